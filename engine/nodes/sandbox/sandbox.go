// Package sandbox runs one untrusted or external program as a child process with the limits
// the code and external nodes share: its own process group killed as a whole on timeout, on
// cancellation and after it exits; an environment reduced to an allow-list; a fresh temporary
// working directory removed afterwards; bounded stdout and a bounded stderr tail; and, when
// asked, an address-space limit (RLIMIT_AS) applied in the child.
//
// The program cannot read the environment, the memory or the open files of the process that
// runs it (/proc/<pid>/environ, mem, fd/*; ptrace): that process is made non-dumpable before
// every start, and when it runs as root the program starts in a new user namespace that maps
// only root, so that it holds no capability outside it (isolate.go says why both). A root
// process that cannot create that namespace does not run the program: Run returns an
// IsolationError (ErrIsolationUnavailable) saying how to fix it.
//
// Nothing else is isolated. The program runs as the same user, with the same file system and
// network, as the process that runs it, and reads what that user can read. Under a non-root
// process, that includes the environment of the user's other processes that are not
// non-dumpable: a shell that started the worker, an init such as tini in a container, another
// program this package runs at the same time. A process group is not a containment boundary
// either: a process that calls setsid or setpgid leaves the group and survives the kill. Use the
// docker backend when the code is not trusted.
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults of Command.
const (
	DefaultMaxStdout  = 1 << 20 // bytes of stdout kept; more is an error and kills the group
	DefaultStderrTail = 4 << 10 // last bytes of stderr kept for error messages
	waitDelay         = 2 * time.Second
	defaultPath       = "/usr/local/bin:/usr/bin:/bin"
)

// ulimitScript applies RLIMIT_AS (soft and hard: a POSIX shell's ulimit without -S/-H sets
// both) and then replaces the shell with the program, so the limit holds from the program's
// first instruction and the program keeps the shell's pid and process group. $1 is the limit in
// KiB; the program and its arguments follow. Nothing of the sandboxed input is interpolated
// into the script.
const ulimitScript = `ulimit -v "$1" || { echo "plaita sandbox: cannot set RLIMIT_AS to $1 KiB" >&2; exit 126; }; shift; exec "$@"`

// Options are what every run shares: the part of the worker's environment a program may
// inherit. The caller reads it once at start; this package reads no variable itself (only
// finding an executable by name goes through the process's PATH, inside os/exec).
type Options struct {
	// HostEnv holds host variables by name (the value may be empty; a missing name is unset).
	// BaseEnv passes on only the names of HostVariables, whatever else the map holds.
	HostEnv map[string]string
}

// HostVariables are the names BaseEnv takes from Options.HostEnv: a caller that snapshots the
// environment needs no more than these.
func HostVariables() []string { return []string{"PATH", "LANG", "LC_ALL", "TZ"} }

// Command is one program run.
type Command struct {
	Path  string   // the executable (absolute, or looked up in the worker's PATH)
	Args  []string // arguments, not including the program name
	Stdin []byte

	// Timeout bounds the wall-clock time; 0 = only the context bounds it.
	Timeout time.Duration
	// MemoryMB is the RLIMIT_AS of the program in MiB, applied in the child through
	// /bin/sh's ulimit -v before exec; 0 = unlimited.
	MemoryMB int
	// MaxStdout bounds stdout (0 = DefaultMaxStdout); more kills the group.
	MaxStdout int
	// StderrTail is how much of the end of stderr is kept (0 = DefaultStderrTail).
	StderrTail int
	// Env replaces the allow-listed environment (nil = Options.BaseEnv of the temporary
	// directory).
	Env []string
	// ExtraEnv is added to the environment (a code node's credentials): in the child's
	// environment only, never on its command line.
	ExtraEnv []string
	// OnKill runs once, synchronously, after the group was killed on timeout, cancellation or
	// stdout overflow (the docker backend removes its container there).
	OnKill func()
	// HostUserNamespace keeps a root process's child in the process's own user namespace (see
	// isolate). Only for a trusted program that runs no flow code: the docker client, whose code
	// runs in a container, and which must keep working where a root process may not create user
	// namespaces. The running process is made non-dumpable all the same.
	HostUserNamespace bool
}

// Result is how the program ended.
type Result struct {
	Stdout         []byte
	Stderr         string // the tail of stderr, at most StderrTail bytes
	StderrCut      bool   // stderr was longer than what is kept
	ExitCode       int    // -1 when killed by a signal
	Signal         syscall.Signal
	TimedOut       bool
	Cancelled      bool
	StdoutOverflow bool
	Timeout        time.Duration
	MaxStdout      int
	Duration       time.Duration
	// PipeHeld: a process outside the group (it called setsid) kept stdout or stderr open
	// after the group was killed; the output may be cut.
	PipeHeld bool
}

// Err summarises a failed run (nil when the program exited 0 within its limits): the reason,
// then the stderr tail.
func (r *Result) Err() error {
	var why string
	switch {
	case r.TimedOut:
		why = fmt.Sprintf("timed out after %s (the process group was killed)", r.Timeout)
	case r.Cancelled:
		why = "cancelled (the process group was killed)"
	case r.StdoutOverflow:
		why = fmt.Sprintf("wrote more than %d bytes to stdout (the process group was killed)", r.MaxStdout)
	case r.Signal != 0:
		why = fmt.Sprintf("killed by signal %d (%s)", int(r.Signal), r.Signal)
	case r.ExitCode != 0:
		why = fmt.Sprintf("exited with status %d", r.ExitCode)
	default:
		return nil
	}
	return errors.New(why + r.StderrSuffix())
}

// StderrSuffix is "; stderr: …" with the kept tail, or "" when stderr was empty.
func (r *Result) StderrSuffix() string {
	s := strings.TrimSpace(r.Stderr)
	if s == "" {
		return ""
	}
	if r.StderrCut {
		s = "…" + s
	}
	return "; stderr: " + s
}

// BaseEnv is the environment a sandboxed program gets: PATH (the worker's, or a standard one),
// HOME set to its temporary directory, LANG, LC_ALL and TZ when the worker has them (LANG
// defaults to C.UTF-8). Nothing else — no PLAITA_*, REDIS*, credentials or tokens.
func (o Options) BaseEnv(home string) []string {
	path := o.HostEnv["PATH"]
	if path == "" {
		path = defaultPath
	}
	env := []string{"PATH=" + path, "HOME=" + home}
	lang := o.HostEnv["LANG"]
	if lang == "" {
		lang = "C.UTF-8"
	}
	env = append(env, "LANG="+lang)
	for _, k := range []string{"LC_ALL", "TZ"} {
		// Set but empty still counts: TZ= means UTC, unlike an unset TZ.
		if v, ok := o.HostEnv[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// LookPath resolves an executable name in the worker's PATH (a name with a slash is checked as
// is).
func LookPath(name string) (string, error) { return exec.LookPath(name) }

// Run runs cmd and waits for it and its whole process group to end. The error is only for a
// program that could not be started (missing executable, no temporary directory, an
// IsolationError); how a started program ended is in the Result (see Result.Err).
func (o Options) Run(ctx context.Context, cmd Command) (*Result, error) {
	maxOut := cmd.MaxStdout
	if maxOut <= 0 {
		maxOut = DefaultMaxStdout
	}
	tailN := cmd.StderrTail
	if tailN <= 0 {
		tailN = DefaultStderrTail
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "plaita-sandbox-")
	if err != nil {
		return nil, fmt.Errorf("sandbox working directory: %w", err)
	}
	defer removeAll(dir)

	path, args := cmd.Path, cmd.Args
	if cmd.MemoryMB > 0 {
		args = append([]string{"-c", ulimitScript, "sh", strconv.Itoa(cmd.MemoryMB * 1024), path}, args...)
		path = "/bin/sh"
	}
	c := exec.Command(path, args...)
	c.Dir = dir
	c.Env = cmd.Env
	if c.Env == nil {
		c.Env = o.BaseEnv(dir)
	}
	c.Env = append(c.Env, cmd.ExtraEnv...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	userNS, err := isolate(c.SysProcAttr, cmd.HostUserNamespace)
	if err != nil {
		return nil, err
	}
	c.Stdin = bytes.NewReader(cmd.Stdin)
	c.WaitDelay = waitDelay

	res := &Result{Timeout: cmd.Timeout, MaxStdout: maxOut}
	var (
		mu     sync.Mutex
		reaped bool // the leader is about to be reaped: its pid (= the group id) may be reused
		killed bool
	)
	pid := 0
	killGroup := func() {
		mu.Lock()
		defer mu.Unlock()
		if !reaped && pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	overflow := make(chan struct{})
	stdout := &limitWriter{max: maxOut, onOverflow: func() { close(overflow) }}
	stderr := &tailWriter{max: tailN}
	c.Stdout, c.Stderr = stdout, stderr

	start := time.Now()
	if err := c.Start(); err != nil {
		return nil, startError(err, userNS)
	}
	mu.Lock()
	pid = c.Process.Pid
	mu.Unlock()

	// Wait for the leader to exit without reaping it, so the group id cannot be reused by an
	// unrelated process while the group is still being killed.
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return
			}
		}
	}()

	var timer <-chan time.Time
	if cmd.Timeout > 0 {
		t := time.NewTimer(cmd.Timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-exited:
	case <-timer:
		res.TimedOut, killed = true, true
	case <-ctx.Done():
		res.Cancelled, killed = true, true
	case <-overflow:
		res.StdoutOverflow, killed = true, true
	}
	if killed {
		killGroup()
		if cmd.OnKill != nil {
			cmd.OnKill()
		}
	}
	<-exited
	killGroup() // whatever the program left behind in its group dies with it
	mu.Lock()
	reaped = true
	mu.Unlock()
	werr := c.Wait()
	res.Duration = time.Since(start)
	if errors.Is(werr, exec.ErrWaitDelay) {
		res.PipeHeld = true
	}
	if st := c.ProcessState; st != nil {
		res.ExitCode = st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal()
		}
	}
	if stdout.over {
		res.StdoutOverflow = true
	}
	res.Stdout = stdout.buf.Bytes()
	res.Stderr, res.StderrCut = stderr.String()
	return res, nil
}

// limitWriter keeps the first max bytes and reports the first byte beyond them.
type limitWriter struct {
	mu         sync.Mutex
	buf        bytes.Buffer
	max        int
	over       bool
	onOverflow func()
}

func (w *limitWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over {
		return len(p), nil
	}
	if room := w.max - w.buf.Len(); len(p) > room {
		w.buf.Write(p[:room])
		w.over = true
		w.onOverflow()
		return len(p), nil
	}
	w.buf.Write(p)
	return len(p), nil
}

// tailWriter keeps the last max bytes.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
	max int
	cut bool
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	if len(p) >= w.max {
		w.cut = w.cut || len(p) > w.max || len(w.buf) > 0
		w.buf = append(w.buf[:0], p[len(p)-w.max:]...)
		return n, nil
	}
	if drop := len(w.buf) + len(p) - w.max; drop > 0 {
		w.buf = append(w.buf[:0], w.buf[drop:]...)
		w.cut = true
	}
	w.buf = append(w.buf, p...)
	return n, nil
}

func (w *tailWriter) String() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.ToValidUTF8(string(w.buf), "�"), w.cut
}

// removeAll removes the working directory even when the program made parts of it read-only.
func removeAll(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

// Truncate cuts s to at most n bytes (on a rune boundary), marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
