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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/redistest"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
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

// repoFlow is a flow of the repository's testdata/flows, by absolute path (commands run in a
// temp directory).
func repoFlow(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(repoRoot, "testdata", "flows", name)
}

// writeFile writes body to a new file (a flow, an input, event data) and returns its absolute
// path (commands run in another directory).
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
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

type result struct {
	code           int
	stdout, stderr string
}

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

// startJSON is the part of `plaita start --json` (without --wait) the tests read.
type startJSON struct {
	ExecutionID      string `json:"execution_id"`
	FlowVersion      string `json:"flow_version"`
	Published        bool   `json:"published"`
	AlreadyPublished *bool  `json:"already_published"`
}

// startFile runs `plaita start ARGS --json --quiet`; the output is parsed when it exits 0.
func startFile(t *testing.T, env map[string]string, args ...string) (startJSON, result) {
	t.Helper()
	r := run(t, env, append(append([]string{"start"}, args...), "--json", "--quiet")...)
	var out startJSON
	if r.code == 0 {
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("start --json does not parse: %v\n%s", err, r.stdout)
		}
	}
	return out, r
}

// ---- long-running processes ----

// syncBuffer collects a process's stderr while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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

// logLines returns the JSON log lines of stderr whose event is event.
func logLines(stderr, event string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(stderr, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["event"] == event {
			out = append(out, rec)
		}
	}
	return out
}

// countLog counts p's log lines with event ev (and, when set, containing sub).
func countLog(p *proc, ev, sub string) int {
	n := 0
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(line, `"event":"`+ev+`"`) && strings.Contains(line, sub) {
			n++
		}
	}
	return n
}

// waitFor polls ok until it holds; after timeout the test fails with the logs of ps.
func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool, ps ...*proc) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\n%s", what, logs(ps))
		}
	}
}

// ---- stand-ins ----

// trap is a TCP listener standing in for Redis; it counts every connection it gets.
type trap struct {
	ln    net.Listener
	conns atomic.Int32
	done  chan struct{}
}

func newTrap(t *testing.T) *trap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trap{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tr.conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-tr.done })
	return tr
}

func (tr *trap) url() string { return "redis://" + tr.ln.Addr().String() + "/0" }

// connections drains the accept queue and returns how many connections arrived. Call it after
// the process has exited: every handshake it completed is then queued, and Accept returns
// queued connections before the deadline fires.
func (tr *trap) connections() int {
	tr.ln.(*net.TCPListener).SetDeadline(time.Now().Add(300 * time.Millisecond))
	<-tr.done
	return int(tr.conns.Load())
}

// pathServer is an HTTP server that counts requests per path and sleeps per path; the first
// request of the path failFirst (when set) fails with 500.
type pathServer struct {
	*httptest.Server
	mu     sync.Mutex
	counts map[string]int
	seen   chan string
}

func newPathServer(t *testing.T, delays map[string]time.Duration) *pathServer {
	return newFlakyServer(t, "", delays)
}

func newFlakyServer(t *testing.T, failFirst string, delays map[string]time.Duration) *pathServer {
	s := &pathServer{counts: map[string]int{}, seen: make(chan string, 100)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.counts[r.URL.Path]++
		n := s.counts[r.URL.Path]
		s.mu.Unlock()
		select {
		case s.seen <- r.URL.Path:
		default:
		}
		if d := delays[r.URL.Path]; d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		if failFirst != "" && r.URL.Path == failFirst && n == 1 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *pathServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[path]
}

// waitSeen waits until the server has seen a request of path.
func (s *pathServer) waitSeen(t *testing.T, path string, timeout time.Duration, ps ...*proc) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case p := <-s.seen:
			if p == path {
				return
			}
		case <-deadline:
			t.Fatalf("the server never saw %s\n%s", path, logs(ps))
		}
	}
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

// stackOption is an option of newStack.
type stackOption func(*stackOptions)

// withEnv adds variables to the stack's environment (a later option overrides an earlier one).
func withEnv(env map[string]string) stackOption {
	return func(o *stackOptions) { maps.Copy(o.env, env) }
}

// withRedisArgs are flags for the private redis-server (AOF for a restart that keeps the data).
func withRedisArgs(args ...string) stackOption {
	return func(o *stackOptions) { o.redisArgs = append(o.redisArgs, args...) }
}

// withTimeout bounds the test's own Redis calls (the stack's ctx).
func withTimeout(d time.Duration) stackOption {
	return func(o *stackOptions) { o.timeout = d }
}

// withCluster runs the stack on a local Redis Cluster of n primaries; the processes are given
// the URL of one node only.
func withCluster(n int) stackOption {
	return func(o *stackOptions) { o.cluster = n }
}

// cliEnv is the environment of the CLI suites' stacks: two consumers and a 5-second drain.
func cliEnv() map[string]string {
	return map[string]string{"PLAITA_WORKER_CONCURRENCY": "2", "PLAITA_WORKER_DRAIN_TIMEOUT": "5"}
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

func (s *stack) logs() string { return logs(s.procs) }

// cli runs one CLI command (with --quiet) and fails the test unless it exits 0.
func (s *stack) cli(args ...string) string {
	s.t.Helper()
	r := run(s.t, s.env, append(args, "--quiet")...)
	if r.code != 0 {
		s.t.Fatalf("plaita %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// startFlow is `plaita start FLOW [--input INPUT] [--tenant TENANT]`: FLOW is a flow file (it is
// published first) or the id of a published flow. It returns the execution id.
func (s *stack) startFlow(flow, tenant, input string) string {
	s.t.Helper()
	args := []string{flow}
	if input != "" {
		args = append(args, "--input", input)
	}
	if tenant != "" {
		args = append(args, "--tenant", tenant)
	}
	out, r := startFile(s.t, s.env, args...)
	if r.code != 0 || out.ExecutionID == "" {
		s.t.Fatalf("start %s: exit %d\n%s%s", flow, r.code, r.stdout, r.stderr)
	}
	return out.ExecutionID
}

// startDef writes def to NAME.json and starts it with startFlow.
func (s *stack) startDef(name, def, tenant, input string) string {
	s.t.Helper()
	return s.startFlow(writeFile(s.t, name+".json", def), tenant, input)
}

// lookup is `plaita execution show ID --json`, false while the execution does not exist yet
// (`plaita start` returns once the start is enqueued, before a worker runs it).
func (s *stack) lookup(id, tenant string) (state.Execution, bool) {
	s.t.Helper()
	args := []string{"execution", "show", id, "--json", "--quiet"}
	if tenant != "" {
		args = append(args, "--tenant", tenant)
	}
	r := run(s.t, s.env, args...)
	var st state.Execution
	if r.code == 1 && strings.Contains(r.stderr, "no execution "+id) {
		return st, false
	}
	if r.code != 0 {
		s.t.Fatalf("show %s: exit %d\n%s", id, r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		s.t.Fatalf("show --json: %v\n%s", err, r.stdout)
	}
	return st, true
}

// show is lookup of an execution that must exist.
func (s *stack) show(id, tenant string) state.Execution {
	s.t.Helper()
	st, ok := s.lookup(id, tenant)
	if !ok {
		s.t.Fatalf("show %s: no such execution", id)
	}
	return st
}

// waitStatus polls `execution show --json` until the execution has the status; an execution
// that does not exist yet is waited for.
func (s *stack) waitStatus(id, tenant string, want state.Status, within time.Duration) state.Execution {
	s.t.Helper()
	var st state.Execution
	waitFor(s.t, fmt.Sprintf("execution %s %s", id, want), within, func() bool {
		var ok bool
		st, ok = s.lookup(id, tenant)
		return ok && st.Status == want
	}, s.procs...)
	return st
}

// waitDone waits (generously: the machine is shared) for a terminal status through the CLI.
func (s *stack) waitDone(id string) state.Execution {
	s.t.Helper()
	var st state.Execution
	waitFor(s.t, "execution "+id+" to finish", 90*time.Second, func() bool {
		var ok bool
		st, ok = s.lookup(id, "")
		return ok && st.Status.Terminal()
	}, s.procs...)
	return st
}

// publishEvent runs `plaita event publish`; extra are more flags (--id, --tenant).
func (s *stack) publishEvent(typ, data string, extra ...string) (id string, duplicate bool) {
	s.t.Helper()
	r := run(s.t, s.env, append([]string{"event", "publish", typ, "--data", data, "--json", "--quiet"}, extra...)...)
	if r.code != 0 {
		s.t.Fatalf("event publish: exit %d\n%s", r.code, r.stderr)
	}
	var out struct {
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		s.t.Fatalf("event publish --json: %v\n%s", err, r.stdout)
	}
	return out.ID, out.Duplicate
}

// ---- Redis, directly: what a producer writes, what reached the queue ----

// publish stores flow as version "1" of id in the default tenant, as a producer would.
func (s *stack) publish(id, flow string) {
	s.t.Helper()
	if err := s.c.Do(s.ctx, s.c.B().Set().Key(keys.MustFor("", "").Flow(id, "1")).Value(flow).Build()).Error(); err != nil {
		s.t.Fatal(err)
	}
}

// enqueue enqueues a start of version "1" of flowID with an empty input.
func (s *stack) enqueue(flowID string) string {
	s.t.Helper()
	id := engine.NewExecutionID()
	if _, err := queue.Enqueue(s.ctx, s.c, config.QueueName.In(s.cfg), queue.Envelope{Kind: queue.KindStart, FlowID: flowID,
		FlowVersion: "1", ExecutionID: id, Input: json.RawMessage(`{}`)}); err != nil {
		s.t.Fatal(err)
	}
	return id
}

func (s *stack) streamLen() int64 {
	n, err := s.c.Do(s.ctx, s.c.B().Xlen().Key(config.QueueName.In(s.cfg)).Build()).AsInt64()
	if err != nil {
		s.t.Fatalf("xlen: %v", err)
	}
	return n
}

func (s *stack) pending() int64 {
	arr, err := s.c.Do(s.ctx, s.c.B().Xpending().Key(config.QueueName.In(s.cfg)).Group(config.ConsumerGroup.In(s.cfg)).Build()).ToArray()
	if err != nil || len(arr) == 0 {
		s.t.Fatalf("xpending: %v", err)
	}
	n, _ := arr[0].AsInt64()
	return n
}

func (s *stack) dlqLen() int64 {
	n, _ := s.c.Do(s.ctx, s.c.B().Xlen().Key(config.DLQKey.In(s.cfg)).Build()).AsInt64()
	return n
}

// dlqEntries reads the whole dead-letter stream as field maps.
func (s *stack) dlqEntries() []map[string]string {
	s.t.Helper()
	rs, err := s.c.Do(s.ctx, s.c.B().Xrange().Key(config.DLQKey.In(s.cfg)).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		s.t.Fatalf("xrange dlq: %v", err)
	}
	out := make([]map[string]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.FieldValues)
	}
	return out
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

// resumes counts the resumes applied to an execution (its timeline's "resumed" entries).
func resumes(st state.Execution) int {
	n := 0
	for _, e := range st.Timeline {
		if e.Event == "resumed" {
			n++
		}
	}
	return n
}

// timelineResumes returns the details of the "resumed" timeline entries.
func timelineResumes(st state.Execution) []string {
	var out []string
	for _, e := range st.Timeline {
		if e.Event == "resumed" {
			out = append(out, e.Node+":"+e.Detail)
		}
	}
	return out
}

// timelineAt is the time of the last timeline entry with event ev (zero when none).
func timelineAt(st state.Execution, ev string) time.Time {
	var at time.Time
	for _, e := range st.Timeline {
		if e.Event == ev {
			at = e.Time.Time()
		}
	}
	return at
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}
