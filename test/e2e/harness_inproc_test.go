//go:build !e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/cli"
	"plaita/config"
	"plaita/engine/state"
	"plaita/roles"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/test/redistest"
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

// ---- Redis, directly: what a producer writes, what reached the queue ----

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

func mustNotContain(t *testing.T, what, got string, nots ...string) {
	t.Helper()
	for _, n := range nots {
		if strings.Contains(got, n) {
			t.Errorf("%s has %q:\n%s", what, n, got)
		}
	}
}
