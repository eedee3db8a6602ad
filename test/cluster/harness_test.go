package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/redistest"
	"plaita/queue"
	"plaita/roles"
	"plaita/roles/cli"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// stack is one scenario: a private redis-server, the environment every role and command of it
// gets, the store the test reads Redis with, and the roles it started (test/e2e's stack, with
// the roles in this process).
type stack struct {
	t   *testing.T
	srv *redistest.Server
	c   rueidis.Client
	ctx context.Context
	env map[string]string
	cfg *config.Config     // env as a worker reads it: key names, budgets
	ts  *store.TenantStore // the default tenant's executions

	mu    sync.Mutex
	procs []*proc
	n     int // roles started: their instance ids
}

type stackOptions struct {
	env       map[string]string
	timeout   time.Duration
	redisArgs []string
}

// stackOption is an option of newStack.
type stackOption func(*stackOptions)

// withEnv adds variables to the stack's environment (a later option overrides an earlier one).
func withEnv(env map[string]string) stackOption {
	return func(o *stackOptions) { maps.Copy(o.env, env) }
}

// withRedisArgs are flags for the private redis-server.
func withRedisArgs(args ...string) stackOption {
	return func(o *stackOptions) { o.redisArgs = append(o.redisArgs, args...) }
}

// withTimeout bounds the test's own Redis calls (the stack's ctx).
func withTimeout(d time.Duration) stackOption {
	return func(o *stackOptions) { o.timeout = d }
}

// cliEnv is the environment of the CLI suites' stacks: two consumers and a 5-second drain.
func cliEnv() map[string]string {
	return map[string]string{"PLAITA_WORKER_CONCURRENCY": "2", "PLAITA_WORKER_DRAIN_TIMEOUT": "5"}
}

// newStack starts the scenario's Redis. Every role and command gets PLAITA_REDIS_URL, a
// workspace of its own (PLAITA_NODES_WORKSPACE_ROOT), a HOME, a 5-second drain, then the
// options' variables.
func newStack(t *testing.T, opts ...stackOption) *stack {
	t.Helper()
	o := stackOptions{env: map[string]string{"PLAITA_NODES_WORKSPACE_ROOT": t.TempDir(), "PLAITA_WORKER_DRAIN_TIMEOUT": "5", "HOME": t.TempDir()}}
	for _, opt := range opts {
		opt(&o)
	}
	c := &stack{t: t, ctx: t.Context(), env: o.env}
	if o.timeout > 0 {
		ctx, cancel := context.WithTimeout(c.ctx, o.timeout)
		t.Cleanup(cancel)
		c.ctx = ctx
	}
	c.srv = redistest.StartServer(t, o.redisArgs...)
	c.c = c.srv.Client(t)
	c.env["PLAITA_REDIS_URL"] = c.srv.URL()
	var err error
	if c.cfg, err = config.Load(config.RoleWorker, true, config.WithEnv(c.env)); err != nil {
		t.Fatal(err)
	}
	if c.ts, err = store.NewRedis(c.c, settings.Store(c.cfg), "").Tenant(""); err != nil {
		t.Fatal(err)
	}
	return c
}

// proc is one role running in the test's process (test/e2e's proc is a process): its log
// lines, the metrics port it serves, and its stop.
type proc struct {
	name   string
	stderr *syncBuffer // its JSON log lines
	addr   string      // what it serves its callers: the console's API (roles.Hooks)
	port   int         // its metrics port
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
	ended  bool // the test stopped it
}

// start runs a role in process (roles.Body) with the stack's environment and extra, and returns
// once it is ready. A role serves /metrics on a free port (unless extra sets
// PLAITA_METRICS_PORT): its counters are the positive signals tests wait for. At the end of the
// test it is stopped as SIGTERM stops it, and must drain and end without an error.
func (c *stack) start(name string, extra map[string]string) *proc {
	c.t.Helper()
	c.mu.Lock()
	c.n++
	id := name + "-" + strconv.Itoa(c.n)
	c.mu.Unlock()
	env := maps.Clone(c.env)
	env["PLAITA_INSTANCE_ID"] = id
	if _, set := extra["PLAITA_METRICS_PORT"]; !set {
		env["PLAITA_METRICS_PORT"], env["PLAITA_METRICS_HOST"] = strconv.Itoa(redistest.FreePort(c.t)), "127.0.0.1"
	}
	maps.Copy(env, extra)
	r := &proc{name: name, stderr: &syncBuffer{}, done: make(chan error, 1)}
	r.port, _ = strconv.Atoi(env["PLAITA_METRICS_PORT"])
	log := zerolog.New(r.stderr).With().Timestamp().Str("role", name).Logger()
	cfg, err := config.Load(config.Role(name), true, config.WithEnv(env), config.WithLogger(log))
	if err != nil {
		c.t.Fatalf("%s: %v", name, err)
	}
	cfg.SetLogger(log)
	body, ok := roles.Body(config.Role(name))
	if !ok {
		c.t.Fatalf("no role %s", name)
	}
	ready := make(chan roles.ReadyRole, 1)
	var ctx context.Context
	ctx, r.cancel = context.WithCancel(roles.WithHooks(context.Background(), roles.Hooks{Ready: func(rr roles.ReadyRole) { ready <- rr }}))
	go func() { r.done <- body(ctx, cfg, log) }()
	c.t.Cleanup(func() {
		if err := r.end(); err != nil && !r.ended {
			c.t.Errorf("%s: %v\n%s", id, err, r.stderr)
		}
	})
	select {
	case rr := <-ready:
		r.addr = rr.Addr
	case err := <-r.done:
		r.done <- err
		c.t.Fatalf("%s ended before it was ready: %v\n%s", id, err, r.stderr)
	case <-time.After(30 * time.Second):
		c.t.Fatalf("%s not ready within 30 s\n%s", id, r.stderr)
	}
	c.mu.Lock()
	c.procs = append(c.procs, r)
	c.mu.Unlock()
	return r
}

// spawn is start: test/e2e spawns a process the test may kill; here every role is stopped at the
// end of the test as SIGTERM stops it.
func (c *stack) spawn(name string, extra map[string]string) *proc {
	c.t.Helper()
	return c.start(name, extra)
}

// end stops the role as SIGTERM does — it drains — and waits for it (30 s at most): the error
// it ended with.
func (p *proc) end() error {
	p.once.Do(func() {
		p.cancel()
		select {
		case p.err = <-p.done:
			if p.err != nil {
				p.err = fmt.Errorf("stopped with %w", p.err)
			}
		case <-time.After(30 * time.Second):
			p.err = errors.New("did not drain and stop within 30 s")
		}
	})
	return p.err
}

// stop stops the role as SIGTERM does and wants it to drain and end cleanly.
func (p *proc) stop(t testing.TB) {
	t.Helper()
	p.ended = true
	if err := p.end(); err != nil {
		t.Fatalf("%s: %v\n%s", p.name, err, p.stderr)
	}
}

// get is an HTTP GET of the role's metrics port.
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

// metric reads a counter from the role's /metrics (0 when absent or unreachable).
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

// sumMetric adds up a counter over roles.
func sumMetric(ps []*proc, name string) int {
	n := 0
	for _, p := range ps {
		n += p.metric(name)
	}
	return n
}

// logs are every role's log lines, for failure messages.
func (c *stack) logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return logs(c.procs)
}

// logs are the log lines of ps, for failure messages.
func logs(ps []*proc) string {
	var b strings.Builder
	for _, r := range ps {
		fmt.Fprintf(&b, "--- %s:\n%s\n", r.name, r.stderr)
	}
	return b.String()
}

// result is one command's exit status and output.
type result struct {
	code           int
	stdout, stderr string
}

// run runs the command tree in process with exactly env (the cluster's, unless given) and
// returns its exit status and output; commands print `plaita` as an installed binary's would.
func run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// Exactly env, and a HOME of the test's (test/e2e gives its processes the same): the
	// developer's own PLAITA_* variables cannot leak into a command.
	env = maps.Clone(env)
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["HOME"]; !ok {
		env["HOME"] = t.TempDir()
	}
	var stdout, stderr bytes.Buffer
	err := cli.App(&stdout, &stderr, cli.WithEnv(env), cli.WithProgram("plaita")).Run(ctx, append([]string{"plaita"}, args...))
	code := cli.ExitCode(err, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// cli runs a command (with --quiet) on the cluster and fails the test unless it exits 0.
func (c *stack) cli(args ...string) string {
	c.t.Helper()
	r := run(c.t, c.env, append(args, "--quiet")...)
	if r.code != 0 {
		c.t.Fatalf("plaita %s: exit %d\n%s%s\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr, c.logs())
	}
	return r.stdout
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

// startFlow is `plaita start FLOW [--input INPUT] [--tenant TENANT]`: a flow file (published
// first) or the id of a published flow. It returns the execution id.
func (c *stack) startFlow(flow, tenant, input string) string {
	c.t.Helper()
	args := []string{flow}
	if input != "" {
		args = append(args, "--input", input)
	}
	if tenant != "" {
		args = append(args, "--tenant", tenant)
	}
	out, r := startFile(c.t, c.env, args...)
	if r.code != 0 || out.ExecutionID == "" {
		c.t.Fatalf("start %s: exit %d\n%s%s", flow, r.code, r.stdout, r.stderr)
	}
	return out.ExecutionID
}

// startDef writes def to NAME.json and starts it.
func (c *stack) startDef(name, def, tenant, input string) string {
	c.t.Helper()
	return c.startFlow(writeFile(c.t, name+".json", def), tenant, input)
}

// lookup is `plaita execution show ID --json`, false while the execution does not exist yet.
func (c *stack) lookup(id, tenant string) (state.Execution, bool) {
	c.t.Helper()
	args := []string{"execution", "show", id, "--json", "--quiet"}
	if tenant != "" {
		args = append(args, "--tenant", tenant)
	}
	r := run(c.t, c.env, args...)
	var st state.Execution
	if r.code == 1 && strings.Contains(r.stderr, "no execution "+id) {
		return st, false
	}
	if r.code != 0 {
		c.t.Fatalf("show %s: exit %d\n%s", id, r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		c.t.Fatalf("show --json: %v\n%s", err, r.stdout)
	}
	return st, true
}

// show is lookup of an execution that must exist.
func (c *stack) show(id, tenant string) state.Execution {
	c.t.Helper()
	st, ok := c.lookup(id, tenant)
	if !ok {
		c.t.Fatalf("show %s: no such execution", id)
	}
	return st
}

// waitStatus reads the execution until it has the status (one that does not exist yet is
// waited for).
func (c *stack) waitStatus(id, tenant string, want state.Status, within time.Duration) state.Execution {
	c.t.Helper()
	var st state.Execution
	waitFor(c.t, fmt.Sprintf("execution %s %s", id, want), within, func() bool {
		var ok bool
		st, ok = c.lookup(id, tenant)
		return ok && st.Status == want
	}, c.procs...)
	return st
}

// waitDone waits for a terminal status through the CLI.
func (c *stack) waitDone(id string) state.Execution {
	c.t.Helper()
	var st state.Execution
	waitFor(c.t, "execution "+id+" to finish", 60*time.Second, func() bool {
		var ok bool
		st, ok = c.lookup(id, "")
		return ok && st.Status.Terminal()
	}, c.procs...)
	return st
}

// publishEvent runs `plaita event publish`; extra are more flags (--id, --tenant).
func (c *stack) publishEvent(typ, data string, extra ...string) (id string, duplicate bool) {
	c.t.Helper()
	r := run(c.t, c.env, append([]string{"event", "publish", typ, "--data", data, "--json", "--quiet"}, extra...)...)
	if r.code != 0 {
		c.t.Fatalf("event publish: exit %d\n%s", r.code, r.stderr)
	}
	var out struct {
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		c.t.Fatalf("event publish --json: %v\n%s", err, r.stdout)
	}
	return out.ID, out.Duplicate
}

// waitFor checks ok until it holds, within timeout: what it waits on is a state another
// goroutine (a role) writes to Redis, which a test can only read back. ps's logs go with a
// failure.
func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool, ps ...*proc) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\n%s", what, logs(ps))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeFile writes body to a new file and returns its absolute path.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// repoFlow is a flow file of the repository's testdata/flows.
func repoFlow(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "flows", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// syncBuffer is a buffer several goroutines write (a role's logger) while the test reads it.
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

func (s *stack) dlqLen() int64 {
	n, _ := s.c.Do(s.ctx, s.c.B().Xlen().Key(config.DLQKey.In(s.cfg)).Build()).AsInt64()
	return n
}

// waitTerminal waits for the execution of the default tenant to reach a terminal status, as
// the store reads it.
func (s *stack) waitTerminal(id string, timeout time.Duration, ps ...*proc) *state.Execution {
	s.t.Helper()
	var st *state.Execution
	waitFor(s.t, "execution "+id+" to finish", timeout, func() bool {
		var err error
		st, err = s.ts.Load(s.ctx, id)
		return err == nil && st.Status.Terminal()
	}, ps...)
	return st
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

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

func mustNotContain(t *testing.T, what, got string, nots ...string) {
	t.Helper()
	for _, n := range nots {
		if strings.Contains(got, n) {
			t.Errorf("%s has %q:\n%s", what, n, got)
		}
	}
}

// logLines are the JSON log lines of stderr with the event.
func logLines(stderr, event string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(stderr, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == event {
			out = append(out, m)
		}
	}
	return out
}
