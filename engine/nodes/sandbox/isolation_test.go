package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"plaita/test/testutil"
)

// The isolation tests run this test binary again as the process that starts the child (the
// runner), because what they test belongs to a whole process: /proc/<pid>/environ shows the
// environment a process was exec'd with (t.Setenv would not put a secret there), the runner is
// made non-dumpable for good, and it has to die while its child runs. helperVar names the
// runner's part; the runner checks what it sees itself and prints helperPassed at the end, so a
// runner that ran no test cannot pass for one that saw nothing.
const (
	helperVar    = "PLAITA_SANDBOX_TEST_HELPER"
	helperPassed = "sandbox helper passed"
	secretVar    = "PLAITA_SANDBOX_TEST_SECRET"
)

// probeScript is the attack: read the environment, the memory and an open file (its stdin,
// /dev/null, so that reading it cannot block) of the process that started it. Every error goes
// to stdout, so the runner sees what the child was told.
const probeScript = `echo "ppid=$PPID"
echo "environ:"; cat "/proc/$PPID/environ" 2>&1 | tr '\0' '\n'
echo "mem:"; cat "/proc/$PPID/mem" 2>&1 >/dev/null | head -c 300
echo "fd:"; cat "/proc/$PPID/fd/0" 2>&1 >/dev/null | head -c 300
echo "probe done"`

// TestHelperRunner is the runner's side of the tests below; run directly, it does nothing.
func TestHelperRunner(t *testing.T) {
	switch os.Getenv(helperVar) {
	case "":
		t.Skip("the runner of the isolation tests: they start it themselves")
	case "probe":
		probeRunner(t)
	case "orphan":
		orphanRunner(t)
	case "no-user-namespace":
		noUserNamespaceRunner(t)
	default:
		t.Fatalf("unknown helper %q", os.Getenv(helperVar))
	}
	if !t.Failed() {
		fmt.Println(helperPassed)
	}
}

// probeRunner runs probeScript (through the memory-limit wrapper when asked) and checks that the
// child ran, under this process, and was refused all it tried.
func probeRunner(t *testing.T) {
	secret := os.Getenv(secretVar)
	memoryMB, _ := strconv.Atoi(os.Getenv("PLAITA_SANDBOX_TEST_MEMORY_MB"))
	res, err := host.Run(context.Background(), Command{Path: "/bin/sh", Args: []string{"-c", probeScript}, Timeout: 20 * time.Second, MemoryMB: memoryMB})
	if err != nil {
		t.Fatalf("the child was not started: %v", err)
	}
	out := string(res.Stdout)
	defer func() {
		if t.Failed() {
			t.Logf("the child printed (its environ section left out):\n%s", withoutEnviron(out))
		}
	}()
	// The positive signal: the child ran to its end, and its parent was this process.
	if !strings.Contains(out, "ppid="+strconv.Itoa(os.Getpid())+"\n") || !strings.Contains(out, "probe done") {
		t.Fatalf("the probe did not run under the runner (pid %d); %v", os.Getpid(), res.Err())
	}
	if secret == "" || strings.Contains(out, secret) || strings.Contains(out, secretVar) || strings.Contains(out, "PLAITA_REDIS_URL") {
		t.Errorf("the child read the runner's environment")
	}
	for _, what := range []string{"environ", "mem", "fd"} {
		_, after, _ := strings.Cut(out, what+":\n")
		line, _, _ := strings.Cut(after, "\n")
		if !strings.Contains(line, "Permission denied") {
			if what == "environ" && !strings.HasPrefix(line, "cat:") {
				line = "the environment" // not copied into the test's log
			}
			t.Errorf("/proc/<runner>/%s: want permission denied, the child got %q", what, line)
		}
	}
}

// orphanRunner starts a child that outlives it: the test kills this process and waits for the
// child to die of its parent-death signal.
func orphanRunner(t *testing.T) {
	pidFile := os.Getenv("PLAITA_SANDBOX_TEST_PID_FILE")
	res, err := host.Run(context.Background(), Command{Path: "/bin/sh", Args: []string{"-c", `echo $$ > "$1"; exec sleep 300`, "sh", pidFile}, Timeout: time.Minute})
	t.Errorf("the runner was to be killed while its child ran, but the child ended: %+v %v", res, err)
}

// noUserNamespaceRunner runs as root where no user namespace can be created: the run must fail
// with an IsolationError, and the program must not run.
func noUserNamespaceRunner(t *testing.T) {
	// Only this namespace's limit (the runner's own user namespace, made by the test): the
	// machine's stays as it is.
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
		t.Fatalf("cannot forbid user namespaces in the runner's namespace: %v", err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	res, err := host.Run(context.Background(), Command{Path: "/bin/sh", Args: []string{"-c", `echo ran > "$1"`, "sh", marker}, Timeout: 20 * time.Second})
	var ie *IsolationError
	if !errors.Is(err, ErrIsolationUnavailable) || !errors.As(err, &ie) || res != nil {
		t.Fatalf("want an IsolationError, got %v (result %+v)", err, res)
	}
	t.Logf("error: %v", err)
	for _, want := range []string{"user namespace", "no space left on device", "run plaita as a non-root user", "allow user namespaces"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the program ran without its user namespace (stat %v)", err)
	}
}

// withoutEnviron is the probe's output without what it read of /proc/<pid>/environ, which
// holds the whole environment of the machine running the tests.
func withoutEnviron(out string) string {
	before, rest, ok := strings.Cut(out, "environ:\n")
	if !ok {
		return out
	}
	read, after, _ := strings.Cut(rest, "mem:\n")
	return fmt.Sprintf("%senviron: (%d lines)\nmem:\n%s", before, strings.Count(read, "\n"), after)
}

// runner is one run of this test binary as the runner.
type runner struct {
	argv []string // the program (a wrapper such as setpriv first) and its arguments
	dir  string
	attr *syscall.SysProcAttr
}

// asThisUser runs the runner as the user the tests run as.
func asThisUser() runner {
	return runner{argv: []string{os.Args[0], "-test.run=^TestHelperRunner$", "-test.count=1"}}
}

// asNobody runs the runner as uid and gid 65534 through setpriv: when the tests run as root,
// this covers the path of a non-root worker. The test binary is copied where that user can run
// it (the go tool builds it in a directory only its owner can enter).
func asNobody(t *testing.T) runner {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the tests run as a non-root user already: the other cases cover that path")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) is not installed: the non-root runner is not tested here")
	}
	dir, err := os.MkdirTemp("", "plaita-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return runner{argv: []string{setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", bin,
		"-test.run=^TestHelperRunner$", "-test.count=1"}, dir: dir}
}

func (r runner) command(mode string, env ...string) *exec.Cmd {
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	cmd.Env = append(os.Environ(), append([]string{helperVar + "=" + mode}, env...)...)
	cmd.Dir = r.dir
	cmd.SysProcAttr = r.attr
	return cmd
}

// run runs the runner to its end and checks that it passed.
func (r runner) run(t *testing.T, mode string, env ...string) {
	t.Helper()
	out, err := r.command(mode, env...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), helperPassed) {
		t.Fatalf("runner (%s): %v\n%s", mode, err, out)
	}
}

func TestChildCannotReadTheRunner(t *testing.T) {
	for _, tc := range []struct {
		name     string
		runner   func(t *testing.T) runner
		memoryMB string
	}{
		{"direct", func(*testing.T) runner { return asThisUser() }, "0"},
		{"through the memory limit", func(*testing.T) runner { return asThisUser() }, "256"},
		{"non-root runner", asNobody, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b [16]byte
			_, _ = rand.Read(b[:])
			secret := "s3cr3t-" + hex.EncodeToString(b[:])
			tc.runner(t).run(t, "probe", secretVar+"="+secret, "PLAITA_SANDBOX_TEST_MEMORY_MB="+tc.memoryMB,
				"PLAITA_REDIS_URL=redis://:"+secret+"@127.0.0.1:1/0")
		})
	}
}

// The child dies with its runner (Pdeathsig), in its user namespace too.
func TestChildDiesWithTheRunner(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := asThisUser().command("orphan", "PLAITA_SANDBOX_TEST_PID_FILE="+pidFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child := testutil.ReadPid(t, pidFile)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	testutil.WaitGone(t, child)
}

// A root runner that cannot give its child a user namespace does not run the program.
func TestRootWithoutUserNamespacesRefuses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root runner uses a user namespace")
	}
	// The runner gets a user namespace of its own (root mapped to root), where it may forbid
	// further ones without touching the machine's limit.
	r := asThisUser()
	r.attr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}}
	r.run(t, "no-user-namespace")
}

func TestStartError(t *testing.T) {
	eperm := &os.PathError{Op: "fork/exec", Path: "/usr/bin/python3", Err: syscall.EPERM}
	enoent := &os.PathError{Op: "fork/exec", Path: "/usr/bin/python3", Err: syscall.ENOENT}
	var ie *IsolationError
	if err := startError(eperm, true); !errors.As(err, &ie) || !errors.Is(err, ErrIsolationUnavailable) || ie.Err != eperm {
		t.Errorf("EPERM with a user namespace: %v", err)
	}
	for _, tc := range []struct {
		err    error
		userNS bool
	}{{eperm, false}, {enoent, true}, {enoent, false}} {
		if err := startError(tc.err, tc.userNS); err != tc.err {
			t.Errorf("%v (user namespace %v) became %v", tc.err, tc.userNS, err)
		}
	}
}
