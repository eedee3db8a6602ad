//go:build e2e

// Package e2e holds the binary's end-to-end and chaos suites: they build the real plaita binary
// and run it the way an operator does, against private redis-servers.
//
// This file is the one harness they share. TestMain builds the binary once; run runs one command
// of it, spawn starts a long-running process of it (its stderr captured, killed at the end of the
// test); a stack is a private Redis with the CLI's environment and the role processes a scenario
// started, and the steps every suite takes on it: start a role, write and start a flow, show an
// execution or wait for its status, publish an event, read what reached Redis. waitFor waits for
// a positive signal. Each suite keeps its own scenario helpers in its own file.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/config"
	"plaita/engine/state"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/test/redistest"
)

// binary is the plaita binary TestMain builds; repoRoot is the module's root directory (the
// one holding go.mod), against which repository files such as testdata/ are resolved.
var binary, repoRoot string

func TestMain(m *testing.M) {
	root, err := moduleRoot()
	if err != nil {
		panic(err)
	}
	repoRoot = root
	dir, err := os.MkdirTemp("", "plaita-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "plaita")
	build := exec.Command("go", "build", "-o", binary, "plaita")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// moduleRoot walks up from the working directory (the package's, under go test) to the
// directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// processEnv is exactly env plus PATH and HOME, so that the developer's own PLAITA_* variables
// cannot leak into a process of the binary. PATH has the binary's directory first: `plaita`
// names the binary under test, as it does for an operator who installed it, so the commands it
// prints can be run as printed.
func processEnv(t testing.TB, env map[string]string) []string {
	out := []string{"PATH=" + filepath.Dir(binary) + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// ---- one command ----

// run runs the binary with args and exactly env (plus PATH and HOME), in a temp directory, and
// returns its exit status and output.
func run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	// No command here may run for long: a hang fails the test instead of stalling the suite.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = processEnv(t, env)
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return result{code, stdout.String(), stderr.String()}
}

// ---- long-running processes ----

// proc is one long-running process the test started: a role, or a command it interrupts.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{} // closed once the process has exited; err is then its exit status
	err    error
	port   int  // the metrics port it serves (0: none)
	ended  bool // the test stopped or killed it (stop, kill9)
}

// spawn starts the binary with args and exactly env (plus PATH and HOME); a process still
// running when the test ends is killed.
func spawn(t testing.TB, env map[string]string, args ...string) *proc {
	t.Helper()
	return spawnCmd(t, exec.Command(binary, args...), env)
}

// spawnCmd is spawn for any command (a shell that execs the binary under a limit).
func spawnCmd(t testing.TB, cmd *exec.Cmd, env map[string]string) *proc {
	t.Helper()
	cmd.Env = processEnv(t, env)
	p := &proc{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// wait reports whether the process exited within timeout.
func (p *proc) wait(timeout time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(timeout):
		return false
	}
}

// stop sends SIGTERM and wants the process to drain and exit 0 within 30 s.
func (p *proc) stop(t testing.TB) {
	t.Helper()
	p.ended = true
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if !p.wait(30 * time.Second) {
		t.Fatalf("process did not drain and exit\n%s", p.stderr.String())
	}
	if p.err != nil {
		t.Fatalf("exit: %v\n%s", p.err, p.stderr.String())
	}
}

// kill9 kills the process with SIGKILL and waits for it to be gone.
func (p *proc) kill9(t testing.TB) {
	t.Helper()
	p.ended = true
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	if !p.wait(10 * time.Second) {
		t.Fatal("process survived kill -9")
	}
}

// drainAtEnd makes the end of the test stop the process the way an operator does: SIGTERM,
// then it must drain and exit 0 within 30 s. A process that exited before, unless the test
// stopped or killed it, fails the test.
func drainAtEnd(t testing.TB, p *proc, what string) {
	t.Cleanup(func() { // registered after spawnCmd's kill, so it runs first
		select {
		case <-p.exited:
			if !p.ended {
				t.Errorf("%s exited before the end of the test: %v\n%s", what, p.err, p.stderr.String())
			}
			return
		default:
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("SIGTERM %s: %v", what, err)
		}
		if !p.wait(30 * time.Second) {
			t.Errorf("%s did not drain and exit\n%s", what, p.stderr.String())
		} else if p.err != nil {
			t.Errorf("%s exit: %v\n%s", what, p.err, p.stderr.String())
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", what, p.stderr.String())
		}
	})
}

// get is an HTTP GET of the process's metrics port.
func (p *proc) get(path string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", p.port, path))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric reads a counter from the process's /metrics (0 when absent or unreachable).
func (p *proc) metric(name string) int {
	_, body := p.get("/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// logs is the stderr of every process, for a failure message.
func logs(ps []*proc) string {
	var b strings.Builder
	for i, p := range ps {
		fmt.Fprintf(&b, "--- process %d (%s) stderr:\n%s\n", i, strings.Join(p.cmd.Args[1:], " "), p.stderr.String())
	}
	return b.String()
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ---- stand-ins ----

func (s *pathServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[path]
}

// ---- the stack ----

// stack is one scenario: a private redis-server (or cluster), the environment every process of
// the binary gets, the configuration and store the test reads Redis with, and the role
// processes it started. Its methods are for the test's goroutine.
type stack struct {
	t   *testing.T
	srv *redistest.Server // the server the processes are told (on a cluster: one of its nodes)
	c   rueidis.Client    // the test's own client
	ctx context.Context   // the test's Redis calls; ends with the test or its timeout
	env map[string]string
	cfg *config.Config     // env as a worker reads it: key names, budgets
	ts  *store.TenantStore // the default tenant's executions

	procs []*proc // every process started through the stack, for failure messages
}

type stackOptions struct {
	env       map[string]string
	redisArgs []string
	timeout   time.Duration
	cluster   int
}

// withCluster runs the stack on a local Redis Cluster of n primaries; the processes are given
// the URL of one node only.
func withCluster(n int) stackOption {
	return func(o *stackOptions) { o.cluster = n }
}

// newStack starts the stack's Redis. Every process gets PLAITA_REDIS_URL, a workspace of its
// own (PLAITA_NODES_WORKSPACE_ROOT) and a 10-second drain (PLAITA_WORKER_DRAIN_TIMEOUT), then
// the options' variables.
func newStack(t *testing.T, opts ...stackOption) *stack {
	t.Helper()
	o := stackOptions{env: map[string]string{"PLAITA_NODES_WORKSPACE_ROOT": t.TempDir(), "PLAITA_WORKER_DRAIN_TIMEOUT": "10"}}
	for _, opt := range opts {
		opt(&o)
	}
	s := &stack{t: t, env: o.env}
	if o.cluster > 0 {
		var servers []*redistest.Server
		s.c, servers = redistest.StartCluster(t, o.cluster)
		s.srv = servers[min(1, len(servers)-1)]
	} else {
		s.srv = redistest.StartServer(t, o.redisArgs...)
		s.c = s.srv.Client(t)
	}
	s.env["PLAITA_REDIS_URL"] = s.srv.URL()
	s.ctx = t.Context()
	if o.timeout > 0 {
		ctx, cancel := context.WithTimeout(s.ctx, o.timeout)
		t.Cleanup(cancel)
		s.ctx = ctx
	}
	var err error
	if s.cfg, err = config.Load(config.RoleWorker, true, config.WithEnv(s.env)); err != nil {
		t.Fatal(err)
	}
	if s.ts, err = store.NewRedis(s.c, settings.Store(s.cfg), "").Tenant(""); err != nil {
		t.Fatal(err)
	}
	return s
}

// roleEnv is the stack's environment with extra on top.
func (s *stack) roleEnv(extra map[string]string) map[string]string {
	env := maps.Clone(s.env)
	maps.Copy(env, extra)
	return env
}

// spawn starts `plaita ROLE --log-format json` (extra: more variables); it is killed at the end
// of the test. For processes the test kills, or whose end it checks itself.
func (s *stack) spawn(role string, extra map[string]string) *proc {
	s.t.Helper()
	p := spawn(s.t, s.roleEnv(extra), role, "--log-format", "json")
	s.procs = append(s.procs, p)
	return p
}

// start starts `plaita ROLE` as spawn does, and stops it with SIGTERM at the end of the test:
// it must drain and exit 0 (drainAtEnd). A role serves /metrics on a free port (unless the test
// sets PLAITA_METRICS_PORT): its counters are the positive signals the tests wait for.
func (s *stack) start(role string, extra map[string]string) *proc {
	s.t.Helper()
	port := 0
	if _, set := s.roleEnv(extra)["PLAITA_METRICS_PORT"]; !set {
		port = redistest.FreePort(s.t)
		extra = maps.Clone(extra)
		if extra == nil {
			extra = map[string]string{}
		}
		extra["PLAITA_METRICS_PORT"], extra["PLAITA_METRICS_HOST"] = strconv.Itoa(port), "127.0.0.1"
	}
	p := s.spawn(role, extra)
	p.port = port
	drainAtEnd(s.t, p, role)
	return p
}

// logs are the stack's processes' output, for a failure's message.
func (s *stack) logs() string { return logs(s.procs) }

// ---- Redis, directly: what a producer writes, what reached the queue ----

func (s *stack) pending() int64 {
	arr, err := s.c.Do(s.ctx, s.c.B().Xpending().Key(config.QueueName.In(s.cfg)).Group(config.ConsumerGroup.In(s.cfg)).Build()).ToArray()
	if err != nil || len(arr) == 0 {
		s.t.Fatalf("xpending: %v", err)
	}
	n, _ := arr[0].AsInt64()
	return n
}

// waitTerminal waits for the execution of the default tenant to reach a terminal status, as
// the store reads it.
func (s *stack) waitTerminal(id string, timeout time.Duration, ps ...*proc) *state.Execution {
	s.t.Helper()
	var st *state.Execution
	var err error
	for deadline := time.Now().Add(timeout); ; {
		st, err = s.ts.Load(s.ctx, id)
		if err == nil && st.Status.Terminal() {
			return st
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("execution %s not finished (last: %v %v)\n%s", id, st, err, logs(ps))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---- reading an execution ----
