package sandbox

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrIsolationUnavailable is the class of every IsolationError: the program was not started,
// because it could not be kept from reading the memory and environment of the process that runs
// it. It is permanent — running the same program again fails the same way until the operator
// changes how plaita runs.
var ErrIsolationUnavailable = errors.New("sandbox: cannot isolate the program from the process that runs it")

// IsolationError says which step of the isolation failed and how to fix it.
type IsolationError struct {
	Step string // what could not be done
	Fix  string // what the operator can change
	Err  error  // the system's answer
}

func (e *IsolationError) Error() string {
	return fmt.Sprintf("%v: %s: %v; %s", ErrIsolationUnavailable, e.Step, e.Err, e.Fix)
}

// Unwrap makes errors.Is(err, ErrIsolationUnavailable) hold.
func (e *IsolationError) Unwrap() error { return ErrIsolationUnavailable }

// What an operator can change when a root process cannot give its child a user namespace.
const userNamespaceFix = "run plaita as a non-root user (the container image does: USER 10001), " +
	"or allow user namespaces where it runs as root (a container's seccomp profile, " +
	"the user.max_user_namespaces sysctl, a chroot)"

// isolate prepares the running process and attr so that the child cannot read this process's
// environment (/proc/<pid>/environ: the Redis password, the console's admin key), its memory
// (/proc/<pid>/mem, process_vm_readv), its open files (/proc/<pid>/fd/*) or attach to it with
// ptrace. It returns whether attr asks for a user namespace, so that a failed start can be
// told apart (see startError). hostUserNamespace: see Command.HostUserNamespace.
//
// Every one of those accesses passes the kernel's ptrace access check. A caller of the same
// user passes it while the target is dumpable; one holding CAP_SYS_PTRACE over the target's user
// namespace passes it always; and, without CAP_SYS_PTRACE, the caller must be in the target's
// user namespace. So:
//
//   - The running process is made non-dumpable (PR_SET_DUMPABLE 0) before every start: that
//     closes the same-user case. It is one cheap system call per run and idempotent, so this
//     package keeps no state to remember it; it is done here, where a child is started, rather
//     than at process start, so that every caller of Run is covered however it is wired. It is
//     process-wide and stays: the process writes no core dump, a debugger of the same user can no
//     longer attach, and a non-root process can no longer read its own /proc/self/io (its
//     process_io_* metrics stop moving), since a non-dumpable process's /proc files belong to
//     root.
//   - Non-dumpable is not enough for root: root's child holds CAP_SYS_PTRACE (and every other
//     capability). When the process runs as root, the child starts in a new user namespace that
//     maps only root to root: towards files it is still root (same user, same file system, as
//     the backends document), but it holds no capability outside its namespace and is not in
//     the namespace of any other process, so it can read none of them — neither this process
//     nor a root process above it, nor another child. (The syscall package forks such a child —
//     a copy of the page tables — where it would otherwise vfork: a little slower, still one
//     start.)
//     If the namespace cannot be created, the run fails with an IsolationError — never a run
//     without it. A non-root process starts its child in its own namespace: the child holds no
//     capability to begin with, and a non-dumpable non-root process could not write a new
//     namespace's uid_map anyway (its /proc entries belong to root).
func isolate(attr *syscall.SysProcAttr, hostUserNamespace bool) (userNamespace bool, err error) {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return false, &IsolationError{Step: "making the running process non-dumpable (prctl PR_SET_DUMPABLE)",
			Fix: "allow prctl(PR_SET_DUMPABLE) in the seccomp profile plaita runs under", Err: err}
	}
	if os.Geteuid() != 0 || hostUserNamespace {
		return false, nil
	}
	gid := os.Getegid()
	attr.Cloneflags |= syscall.CLONE_NEWUSER
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	return true, nil
}

// startError turns a failed start into an IsolationError when it is the user namespace that
// could not be made: clone(CLONE_NEWUSER) answers EPERM under a seccomp profile that forbids it
// (docker's default for a container without CAP_SYS_ADMIN) or in a chroot, ENOSPC when
// user.max_user_namespaces is used up or 0, EUSERS past the nesting limit, EINVAL where the
// kernel has no user namespaces. A missing or non-executable program (ENOENT, EACCES) stays what
// it is.
func startError(err error, userNamespace bool) error {
	if !userNamespace {
		return err
	}
	for _, errno := range []syscall.Errno{syscall.EPERM, syscall.ENOSPC, syscall.EUSERS, syscall.EINVAL} {
		if errors.Is(err, errno) {
			return &IsolationError{Step: "running as root, the program must start in a new user namespace (which holds no capability over the host), and creating one failed",
				Fix: userNamespaceFix, Err: err}
		}
	}
	return err
}
