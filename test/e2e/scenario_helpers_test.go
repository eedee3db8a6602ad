// Scenario helpers that read the same on both builds: the in-process cluster (the default build)
// and the binary (-tags e2e) each provide the harness core these stand on (stack, proc, run).
package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

// approvalFlow waits for an order.approved event of the input's order, then ends with the
// event's data.
const approvalFlow = `{"id":"approve","start":"wait","nodes":[
	{"id":"wait","type":"wait_event","params":{"event_type":"order.approved","match":"EVENT.order_id == INPUT.order_id"},"next":"done"},
	{"id":"done","type":"end","params":{"output":{"order_id":"{{ EVENT.order_id }}","by":"{{ EVENT.by ?? '' }}"}}}]}`

const attackFlow = `{"id":"attack","start":"wait","nodes":[
	{"id":"wait","type":"wait_event","params":{"event_type":"T","match":"EVENT.k == INPUT.k"},"next":"done"},
	{"id":"done","type":"end","params":{"output":{"k":"{{ EVENT.k }}","n":"{{ EVENT.n ?? 0 }}"}}}]}`

// attackStack is a filter suite's stack with the three roles running and one execution
// waiting.
type attackStack struct {
	*stack
	waiting string // the execution waiting for a T event with k == "u"
}

// events is how many events the tenant has (`plaita event list --json`).
func (s *attackStack) events() int {
	s.t.Helper()
	r := run(s.t, s.env, "event", "list", "--json", "--quiet")
	var page struct {
		Events []json.RawMessage `json:"events"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &page) != nil {
		s.t.Fatalf("event list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return len(page.Events)
}

// refused runs the binary and wants exit code with want in stderr.
func (s *attackStack) refused(code int, want string, args ...string) result {
	s.t.Helper()
	r := run(s.t, s.env, append(args, "--quiet")...)
	if r.code != code || !strings.Contains(r.stderr, want) {
		s.t.Fatalf("%.200q: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), r.code, r.stderr, code, want)
	}
	return r
}

// wakes publishes a good event and waits for the waiting execution to complete: what was
// refused before left the wait intact.
func (s *attackStack) wakes(data string) state.Execution {
	s.t.Helper()
	s.publishEvent("T", data)
	return s.waitStatus(s.waiting, "", state.Completed, 60*time.Second)
}

// cliEnv is the environment of the CLI suites' stacks: two consumers and a 5-second drain.
func cliEnv() map[string]string {
	return map[string]string{"PLAITA_WORKER_CONCURRENCY": "2", "PLAITA_WORKER_DRAIN_TIMEOUT": "5"}
}

// console is a running `plaita console` and how to call it.
type console struct {
	p    *proc
	base string
}

// call sends one request with the admin key in the default tenant; the body is sent as JSON.
func (c *console) call(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-API-Key", consoleAdminKey)
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, nil
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

const consoleAdminKey = "e2e-admin-key"

// corrFlow is a flow waiting for an event of type typ with match, ending with the waking
// event's tag.
func corrFlow(id, typ, match string) string {
	m, _ := json.Marshal(match)
	return fmt.Sprintf(`{"id":%q,"start":"w","nodes":[
	{"id":"w","type":"wait_event","params":{"event_type":%q,"match":%s},"next":"done"},
	{"id":"done","type":"end","params":{"output":"{{ EVENT.tag }}"}}]}`, id, typ, m)
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

func delayFlowFile(t *testing.T, id string, seconds float64) string {
	return writeFile(t, id+".json", fmt.Sprintf(`{"id":%q,"version":"1","start":"nap","nodes":[
	 {"id":"nap","type":"delay","params":{"seconds":%v},"next":"done"},
	 {"id":"done","type":"end","params":{"output":{"due":"{{ NODE.nap.due }}","resumed_at":"{{ NODE.nap.resumed_at }}"}}}]}`, id, seconds))
}

// fired counts the delay.fired lines for execution id in the logs of procs.
func fired(id string, procs ...*proc) int {
	n := 0
	for _, p := range procs {
		for _, l := range logLines(p.stderr.String(), "delay.fired") {
			if l["execution_id"] == id {
				n++
			}
		}
	}
	return n
}

// hintCommand returns the command printed on the line after the one holding label, as words
// without the leading "plaita"; ok is false when there is no such label.
func hintCommand(t *testing.T, out, label string) ([]string, bool) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, label) && i+1 < len(lines) {
			words := shellWords(t, strings.TrimSpace(lines[i+1]))
			if len(words) == 0 || words[0] != "plaita" {
				t.Fatalf("the line after %q is not a plaita command:\n%s", label, out)
			}
			return words[1:], true
		}
	}
	return nil, false
}

// keyFlow waits for a k.set event whose k is the input's.
const keyFlow = `{"id":"wait-k","start":"wait","nodes":[
	{"id":"wait","type":"wait_event","params":{"event_type":"k.set","match":"EVENT.k == INPUT.k"},"next":"done"},
	{"id":"done","type":"end","params":{"output":{"k":"{{ EVENT.k }}"}}}]}`

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

func newAttackStack(t *testing.T, extra map[string]string) *attackStack {
	t.Helper()
	s := &attackStack{stack: newFilterStack(t, extra)}
	s.start("worker", nil)
	s.filter(nil)
	s.start("delay", nil)
	s.waiting = s.startDef("attack", attackFlow, "", `{"k":"u"}`)
	s.waitStatus(s.waiting, "", state.Suspended, 60*time.Second)
	return s
}

// newDelayStack is the delay suite's stack: four consumers per worker.
func newDelayStack(t *testing.T) *stack {
	t.Helper()
	return newStack(t, withTimeout(3*time.Minute), withEnv(map[string]string{"PLAITA_WORKER_CONCURRENCY": "4"}))
}

// newFilterStack is the filter suite's stack (the CLI suites' environment, a reconcile pass a
// second: a test waiting for the reconciler waits seconds, not minutes), extra on top.
func newFilterStack(t *testing.T, extra map[string]string, redisArgs ...string) *stack {
	t.Helper()
	return newStack(t, withEnv(cliEnv()), withEnv(map[string]string{"PLAITA_EVENT_RECONCILE_INTERVAL": "1"}), withEnv(extra),
		withRedisArgs(redisArgs...))
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

func newPathServer(t *testing.T, delays map[string]time.Duration) *pathServer {
	return newFlakyServer(t, "", delays)
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

func noStateFile(t *testing.T, stateDir, id string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(stateDir, id+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file of %s still there (stat: %v)", id, err)
	}
}

const orderFlow = `{"id": "order", "version": "1", "start": "wait", "nodes": [
  {"id": "wait", "type": "wait_event", "params": {"event_type": "order.paid", "match": "EVENT.order_id == INPUT.order_id", "timeout": 3600}, "next": "done"},
  {"id": "done", "type": "end"}]}`

// pathServer is an HTTP server that counts requests per path and sleeps per path; the first
// request of the path failFirst (when set) fails with 500.
type pathServer struct {
	*httptest.Server
	mu     sync.Mutex
	counts map[string]int
	seen   chan string
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

func readState(t *testing.T, stateDir, id string) savedExecution {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, id+".json"))
	if err != nil {
		t.Fatalf("state file: %v", err)
	}
	var st savedExecution
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state file is not JSON: %v\n%s", err, b)
	}
	return st
}

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

type savedExecution struct {
	ExecutionID string         `json:"execution_id"`
	FlowID      string         `json:"flow_id"`
	Status      string         `json:"status"`
	CurrentNode string         `json:"current_node"`
	StepCount   int            `json:"step_count"`
	Output      any            `json:"output"`
	Context     map[string]any `json:"context"`
	Suspend     *struct {
		Kind      string `json:"kind"`
		Node      string `json:"node"`
		EventType string `json:"event_type"`
		Message   string `json:"message"`
	} `json:"suspend"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Node    string `json:"node"`
	} `json:"error"`
	Timeline []struct {
		Seq   int    `json:"seq"`
		Event string `json:"event"`
		Node  string `json:"node"`
	} `json:"timeline"`
}

// shellWords splits a printed command the way sh does for what the hints use: words separated
// by spaces, single-quoted strings, and '\” for a quote inside one.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case quoted && ch == '\'':
			quoted = false
		case quoted:
			cur.WriteByte(ch)
		case ch == '\'':
			quoted, inWord = true, true
		case ch == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case ch == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unterminated quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

const shortFlow = `{"id":"short","start":"a","nodes":[
	{"id":"a","type":"set","params":{"vars":{"x":"1"}},"next":"b"},
	{"id":"b","type":"set","params":{"vars":{"y":"{{ VARS.x }}2"}},"next":"done"},
	{"id":"done","type":"end","params":{"output":"{{ VARS.y }}"}}]}`

func (e *stack) addSchedule(args ...string) store.ScheduleRecord {
	e.t.Helper()
	out := e.cli(append([]string{"schedule", "add"}, append(args, "--json")...)...)
	var rec store.ScheduleRecord
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		e.t.Fatalf("schedule add --json does not parse: %v\n%s", err, out)
	}
	return rec
}

// corrStart publishes def and starts it with input; warned says whether the start logged a
// validation warning for the wait's match.
func (s *stack) corrStart(name, def, input string) (id string, warned bool) {
	s.t.Helper()
	out, r := startFile(s.t, s.env, writeFile(s.t, name+".json", def), "--input", input)
	if r.code != 0 {
		s.t.Fatalf("start %s: exit %d\n%s", name, r.code, r.stderr)
	}
	return out.ExecutionID, strings.Contains(r.stderr, `"event":"flow.warning"`) && strings.Contains(r.stderr, `"path":"nodes[0].params.match"`)
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

func (s *stack) dlqLen() int64 {
	n, _ := s.c.Do(s.ctx, s.c.B().Xlen().Key(config.DLQKey.In(s.cfg)).Build()).AsInt64()
	return n
}

// enqueue enqueues a start of version "1" of flowID with an empty input.
func (s *stack) enqueue(flowID string) string {
	s.t.Helper()
	id := engine.NewExecutionID()
	if _, err := queue.Enqueue(s.ctx, queue.Redis(s.c), config.QueueName.In(s.cfg), queue.Envelope{Kind: queue.KindStart, FlowID: flowID,
		FlowVersion: "1", ExecutionID: id, Input: json.RawMessage(`{}`)}); err != nil {
		s.t.Fatal(err)
	}
	return id
}

// entriesAdded is how many entries were ever added to the task stream (XINFO STREAM
// entries-added): every start and every resume that reached it, whether or not it was deleted
// after it was acked.
func (d *stack) entriesAdded() int64 {
	d.t.Helper()
	m, err := d.c.Do(d.ctx, d.c.B().XinfoStream().Key(config.QueueName.In(d.cfg)).Build()).AsMap()
	if err != nil {
		d.t.Fatalf("xinfo stream: %v", err)
	}
	v := m["entries-added"]
	n, err := v.AsInt64()
	if err != nil {
		d.t.Fatalf("entries-added: %v", err)
	}
	return n
}

// filter starts a filter and waits until it is ready (/readyz: it listens for notifications).
func (s *stack) filter(extra map[string]string) *proc {
	s.t.Helper()
	p := s.start("filter", extra)
	waitFor(s.t, "the filter is ready", 60*time.Second, func() bool {
		code, _ := p.get("/readyz")
		return code == http.StatusOK
	}, s.procs...)
	return p
}

// listJSON runs `plaita execution list ARGS --json` and returns the ids, the summaries and the
// next cursor.
func (s *stack) listJSON(args ...string) (ids []string, items []store.Summary, next string) {
	s.t.Helper()
	out := s.cli(append([]string{"execution", "list", "--json"}, args...)...)
	var page struct {
		Items      []store.Summary `json:"items"`
		NextCursor string          `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		s.t.Fatalf("execution list --json: %v\n%s", err, out)
	}
	for _, it := range page.Items {
		ids = append(ids, it.ExecutionID)
	}
	return ids, page.Items, page.NextCursor
}

// publish stores flow as version "1" of id in the default tenant, as a producer would.
func (s *stack) publish(id, flow string) {
	s.t.Helper()
	if err := s.c.Do(s.ctx, s.c.B().Set().Key(keys.MustFor("", "").Flow(id, "1")).Value(flow).Build()).Error(); err != nil {
		s.t.Fatal(err)
	}
}

func (d *stack) scheduled() []string {
	d.t.Helper()
	ms, err := d.c.Do(d.ctx, d.c.B().Zrange().Key(d.scheduledKey()).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		d.t.Fatal(err)
	}
	return ms
}

func (d *stack) scheduledKey() string { return queue.DelayScheduledKey(config.DelayQueue.In(d.cfg)) }

func (e *stack) showSchedule(tenant, id string) store.ScheduleRecord {
	e.t.Helper()
	out := e.cli("schedule", "show", id, "--tenant", tenant, "--json")
	var rec store.ScheduleRecord
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		e.t.Fatalf("schedule show --json does not parse: %v\n%s", err, out)
	}
	return rec
}

// startConsole starts `plaita console` on a free port with its database in the test's
// directory, and waits until it is ready.
func (s *stack) startConsole(extra map[string]string) *console {
	s.t.Helper()
	port := redistest.FreePort(s.t)
	env := map[string]string{"PLAITA_CONSOLE_REDIS_URL": s.srv.URL(), "PLAITA_CONSOLE_PORT": strconv.Itoa(port),
		"PLAITA_CONSOLE_HOST": "127.0.0.1", "PLAITA_CONSOLE_ADMIN_API_KEY": consoleAdminKey,
		"PLAITA_CONSOLE_DB_URL": "sqlite:///" + filepath.Join(s.t.TempDir(), "console.db")}
	for k, v := range extra {
		env[k] = v
	}
	c := &console{p: s.start("console", env), base: "http://127.0.0.1:" + strconv.Itoa(port)}
	waitFor(s.t, "the console to be ready", 30*time.Second, func() bool {
		code, _ := c.call(s.t, http.MethodGet, "/readyz", nil)
		return code == http.StatusOK
	}, c.p)
	return c
}

// stillWaiting checks that the executions are still suspended.
func (s *stack) stillWaiting(ids ...string) {
	s.t.Helper()
	for _, id := range ids {
		if st := s.show(id, ""); st.Status != state.Suspended {
			s.t.Fatalf("%s is %s (output %v): woken by an event that is not its own", id, st.Status, st.Output)
		}
	}
}

func (s *stack) streamLen() int64 {
	n, err := s.c.Do(s.ctx, s.c.B().Xlen().Key(config.QueueName.In(s.cfg)).Build()).AsInt64()
	if err != nil {
		s.t.Fatalf("xlen: %v", err)
	}
	return n
}

// wokenBy waits until the execution completed and checks that exactly one resume was applied,
// by the event tagged tag.
func (s *stack) wokenBy(id, tag string) {
	s.t.Helper()
	st := s.waitStatus(id, "", state.Completed, 60*time.Second)
	if st.Output != tag || resumes(st) != 1 {
		s.t.Fatalf("%s: woken with %v after %d resumes, want once by %s\n%s", id, st.Output, resumes(st), tag, s.logs())
	}
}

// stackOption is an option of newStack.
type stackOption func(*stackOptions)

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

// startJSON is the part of `plaita start --json` (without --wait) the tests read.
type startJSON struct {
	ExecutionID      string `json:"execution_id"`
	FlowVersion      string `json:"flow_version"`
	Published        bool   `json:"published"`
	AlreadyPublished *bool  `json:"already_published"`
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// ticks maps the execution ids of rec's starts to their ticks, for every whole second from its
// creation to a minute from now.
func ticks(rec store.ScheduleRecord) map[string]time.Time {
	out := map[string]time.Time{}
	for t := rec.CreatedAt.Truncate(time.Second); t.Before(time.Now().Add(time.Minute)); t = t.Add(time.Second) {
		out[store.ScheduleExecutionID(rec.TenantID, rec.ID, rec.CreatedAt, t)] = t
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

// trap is a TCP listener standing in for Redis; it counts every connection it gets.
type trap struct {
	ln    net.Listener
	conns atomic.Int32
	done  chan struct{}
}

// connections drains the accept queue and returns how many connections arrived. Call it after
// the process has exited: every handshake it completed is then queued, and Accept returns
// queued connections before the deadline fires.
func (tr *trap) connections() int {
	tr.ln.(*net.TCPListener).SetDeadline(time.Now().Add(300 * time.Millisecond))
	<-tr.done
	return int(tr.conns.Load())
}

func (tr *trap) url() string { return "redis://" + tr.ln.Addr().String() + "/0" }

// withEnv adds variables to the stack's environment (a later option overrides an earlier one).
func withEnv(env map[string]string) stackOption {
	return func(o *stackOptions) { maps.Copy(o.env, env) }
}

// withTimeout bounds the test's own Redis calls (the stack's ctx).
func withTimeout(d time.Duration) stackOption {
	return func(o *stackOptions) { o.timeout = d }
}

// waitFor polls ok until it holds: what it waits on is a state another process or goroutine (a
// role) writes to Redis, which a test can only read back. After timeout the test fails with the
// logs of ps.
func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool, ps ...*proc) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\n%s", what, logs(ps))
		}
	}
}

// writeFile writes body to a new file (a flow, an input, event data) and returns its absolute
// path (commands may run in another directory).
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// repoFlow is the absolute path of a shipped example flow.
func repoFlow(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// result is one command's exit status and output.
type result struct {
	code           int
	stdout, stderr string
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

// syncBuffer collects what several goroutines write (a process's stderr, a role's logger) while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// withRedisArgs are flags for the private redis-server (AOF for a restart that keeps the data).
func withRedisArgs(args ...string) stackOption {
	return func(o *stackOptions) { o.redisArgs = append(o.redisArgs, args...) }
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

// cli runs a command (with --quiet) on the cluster and fails the test unless it exits 0.
func (s *stack) cli(args ...string) string {
	s.t.Helper()
	r := run(s.t, s.env, append(args, "--quiet")...)
	if r.code != 0 {
		s.t.Fatalf("plaita %s: exit %d\n%s%s\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr, s.logs())
	}
	return r.stdout
}
