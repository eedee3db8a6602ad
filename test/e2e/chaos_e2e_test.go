//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
)

// The chaos suite: real worker processes, one `plaita filter` and one `plaita delay` against a
// real redis-server with AOF, executions of flows with side effects and every kind of resume,
// while a random worker is killed with kill -9 every few seconds (and replaced), now and then
// the filter or the delay process instead (kill -9, and a new one started), Redis is killed
// and restarted once and one worker is drained with SIGTERM. The wake-ups go through the
// roles: a wait_event is resumed by an event the test publishes (the filter turns it into the
// resume), delays and wait timeouts are sent by the delay role; the test itself answers the
// approvals, cancels and retries. At the end every execution is in its expected state with
// exactly one terminal transition, each role-woken one resumed by its role, none is left
// running, the queue is drained, the dead-letter stream holds exactly the deliberately
// malformed entries, each once, no process logged a panic, and a side effect was replayed only
// where a fault caught its step in flight (or, on a starved machine, where its worker stopped
// the run itself, having lost the lease).
//
// TestChaosShort (every `go test -tags e2e`) runs a few hundred executions; TestChaos (`-tags e2e,chaos`,
// `just chaos`) a few thousand. One body, runChaos, serves both.

// chaosSize is the size of one run.
type chaosSize struct {
	name       string
	executions int
	deadline   time.Duration // for every execution to settle
	stdout     bool          // print the summary to stdout as well
}

const (
	chaosWorkers     = 3
	chaosConcurrency = 4
	chaosWindow      = 150 // executions enqueued and not yet settled, at most
	chaosPoisonEvery = 60  // a malformed entry goes in before every 60th execution
	chaosSweep       = 150 * time.Millisecond
)

// chaosFlows are the flows of the suite; URL is the effect server. A side effect is a request
// to /fx/<execution>/<step>; the other paths are the outside world misbehaving on purpose.
var chaosFlows = map[string]string{
	"fx": `{"id":"fx","start":"a","nodes":[
		{"id":"a","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/a","timeout":10},"next":"s"},
		{"id":"s","type":"set","params":{"vars":{"n":"{{ INPUT.n }}"}},"next":"b"},
		{"id":"b","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/b","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"{{ VARS.n }}"}}]}`,
	"branch": `{"id":"branch","start":"a","nodes":[
		{"id":"a","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/a","timeout":10},"next":"odd"},
		{"id":"odd","type":"condition","params":{"expr":"INPUT.odd"},"branches":{"true":"boom","false":"done"}},
		{"id":"boom","type":"fail","params":{"message":"odd input {{ INPUT.n }}"}},
		{"id":"done","type":"end","params":{"output":"even"}}]}`,
	"appr": `{"id":"appr","start":"a","nodes":[
		{"id":"a","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/a","timeout":10},"next":"ask"},
		{"id":"ask","type":"approval","params":{"message":"ship?"},"next":"b"},
		{"id":"b","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/b","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"shipped"}}]}`,
	// Resumed by the filter, for the event the test publishes once it waits.
	"evt": `{"id":"evt","start":"w","nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"paid","match":"EVENT.order == INPUT.n","timeout":3600,"on_timeout":"late"},"next":"b"},
		{"id":"b","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/b","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"paid"}},
		{"id":"late","type":"end","params":{"output":"late"}}]}`,
	// No event of its order is ever published: the delay role times it out after 2 s (the
	// filter refuses the other orders' events for it meanwhile).
	"evtto": `{"id":"evtto","start":"w","nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"paid","match":"EVENT.order == INPUT.n","timeout":2,"on_timeout":"late"},"next":"done"},
		{"id":"done","type":"end","params":{"output":"paid"}},
		{"id":"late","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/late","timeout":10},"next":"out"},
		{"id":"out","type":"end","params":{"output":"late"}}]}`,
	// Continued by the delay role 1.5 s later.
	"dly": `{"id":"dly","start":"wait","nodes":[
		{"id":"wait","type":"delay","params":{"seconds":1.5},"next":"b"},
		{"id":"b","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/b","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"woke"}}]}`,
	// The first request fails with 500 and the node has no retry policy: the execution ends in
	// error until the test resumes it with retry.
	"flaky": `{"id":"flaky","start":"a","nodes":[
		{"id":"a","type":"http","params":{"url":"URL/once-fail/{{ EXECUTION.id }}","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"recovered"}}]}`,
	// Node retries: the first request fails with 500, the second outlasts the node's timeout,
	// the third answers.
	"nretry": `{"id":"nretry","start":"a","nodes":[
		{"id":"a","type":"http","params":{"url":"URL/retry/{{ EXECUTION.id }}","timeout":1},
		 "retry":{"max_attempts":4,"backoff_seconds":0.1},"next":"b"},
		{"id":"b","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/b","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"retried"}}]}`,
	// The flow's own timeout: the second request never answers in time.
	"tmo": `{"id":"tmo","timeout":2,"start":"a","nodes":[
		{"id":"a","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/a","timeout":10},"next":"h"},
		{"id":"h","type":"http","params":{"url":"URL/hang/{{ EXECUTION.id }}","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"too late"}}]}`,
}

// chaosCase is one execution of the suite and what the test does to it. The driver goroutine
// owns sent and done until it stops.
type chaosCase struct {
	id, flow string
	n        int
	odd      bool
	resume   engine.ResumeType // sent by the test once the execution waits (suspended; in error for retry)
	data     string
	event    string            // the data of the event the test publishes once it waits (the filter resumes it)
	woken    engine.ResumeType // the resume a role applies (its last resume): event (filter), continue or timeout (delay)
	want     state.Status
	output   string // "" = not checked
	errType  string // "" = not checked
	errText  string // a part of the error message; "" = not checked
	sent     bool
	done     bool
}

// eventID is the id of the event the test publishes for c: a publish retried after a failure
// is the same event.
func (c *chaosCase) eventID() string { return "paid-" + c.id }

// wokenBy says how c's last resume differs from the one its role was to apply; "" when it is
// that one (or c is not woken by a role).
func (c *chaosCase) wokenBy(st *state.Execution) string {
	if c.woken == "" {
		return ""
	}
	key := "delay:" + c.id + ":" // the delay role's carrier: delay:<execution>:<node>:<due ms>
	if c.woken == engine.ResumeEvent {
		key = "event:" + c.eventID() // the filter's: event:<event id>:<since ns>
	}
	lr := st.LastResume
	if lr == nil || lr.Type != string(c.woken) || !strings.HasPrefix(lr.Key, key) {
		return fmt.Sprintf("last resume %+v, want %s from %s…", lr, c.woken, key)
	}
	if c.flow == "dly" {
		// The delay role never sends a wake-up before its due time.
		node, _ := st.Nodes()["wait"].(map[string]any)
		due, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(node["due"]))
		woke, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(node["resumed_at"]))
		if err1 != nil || err2 != nil || woke.Before(due) {
			return fmt.Sprintf("the delay's output %v: resumed before its due time", node)
		}
	}
	return ""
}

func chaosCases(n int) []*chaosCase {
	var cs []*chaosCase
	for i := range n {
		c := &chaosCase{id: engine.NewExecutionID(), n: i, odd: (i/10)%2 == 1}
		switch i % 10 {
		case 0, 9:
			c.flow, c.want, c.output = "fx", state.Completed, fmt.Sprint(i)
		case 1:
			c.flow = "branch"
			if c.odd {
				c.want, c.errText = state.Error, fmt.Sprintf("odd input %d", i)
			} else {
				c.want, c.output = state.Completed, "even"
			}
		case 2:
			c.flow, c.resume, c.data, c.want, c.output = "appr", engine.ResumeApproval, `{"approved":true}`, state.Completed, "shipped"
			if c.odd {
				c.resume, c.data, c.want, c.output = engine.ResumeCancel, "", state.Cancelled, ""
			}
		case 3:
			c.flow, c.event, c.woken, c.want, c.output = "evt", fmt.Sprintf(`{"order":%d}`, i), engine.ResumeEvent, state.Completed, "paid"
		case 4:
			c.flow, c.woken, c.want, c.output = "evtto", engine.ResumeTimeout, state.Completed, "late"
		case 5:
			c.flow, c.woken, c.want, c.output = "dly", engine.ResumeContinue, state.Completed, "woke"
		case 6:
			c.flow, c.resume, c.want, c.output = "flaky", engine.ResumeRetry, state.Completed, "recovered"
		case 7:
			c.flow, c.want, c.output = "nretry", state.Completed, "retried"
		case 8:
			c.flow, c.want, c.errType = "tmo", state.Error, engine.ErrTypeDeadline
		}
		cs = append(cs, c)
	}
	return cs
}

// caseClient plays the clients of chaosCases against a stack: it enqueues their starts and
// resumes, publishes their events, and keeps the first writes that failed. One goroutine uses
// it (the suite's driver); published and failures are read once it has stopped.
type caseClient struct {
	e         *stack
	fx        *effectServer
	bus       *store.Events
	queue     string
	started   time.Time
	published int      // events published
	failures  []string // the first 10 writes that failed (and were tried again)
}

func newCaseClient(e *stack, fx *effectServer, started time.Time) *caseClient {
	return &caseClient{e: e, fx: fx, bus: store.NewEvents(store.RedisEvents(e.c), store.EventSettings{}, ""),
		queue: config.QueueName.In(e.cfg), started: started}
}

// failed records err (when not nil) as a failed write, and returns it.
func (cl *caseClient) failed(what string, err error) error {
	if err != nil && len(cl.failures) < 10 {
		cl.failures = append(cl.failures, fmt.Sprintf("+%.1fs %s: %v", time.Since(cl.started).Seconds(), what, err))
	}
	return err
}

func (cl *caseClient) enqueue(env queue.Envelope) error {
	env.Stamp(settings.Generations(cl.e.cfg), time.Now())
	_, err := queue.Enqueue(cl.e.ctx, queue.Redis(cl.e.c), cl.queue, env)
	return cl.failed(fmt.Sprintf("enqueue %s %s", env.Kind, env.ExecutionID), err)
}

// start enqueues c's start.
func (cl *caseClient) start(c *chaosCase) error {
	return cl.enqueue(queue.Envelope{Kind: queue.KindStart, FlowID: c.flow, FlowVersion: "1", ExecutionID: c.id,
		Input: json.RawMessage(fmt.Sprintf(`{"n":%d,"odd":%t}`, c.n, c.odd))})
}

// sweep loads the state of every active case and advances it: kept are the cases not settled
// yet (not started yet included), settled counts the others.
func (cl *caseClient) sweep(active []*chaosCase) (kept []*chaosCase, settled int) {
	kept = active[:0]
	for _, c := range active {
		st, err := cl.e.ts.Load(cl.e.ctx, c.id)
		if err != nil { // not started yet
			kept = append(kept, c)
			continue
		}
		cl.fx.noteState(st)
		if cl.advance(c, st) {
			settled++
			continue
		}
		kept = append(kept, c)
	}
	return kept, settled
}

// advance plays c's client once its state st is loaded: true when c reached its end (an
// execution in error that the test is to retry has not); once c waits, it publishes c's event
// or sends its resume, once. A failed publish or enqueue is tried again on the next call.
func (cl *caseClient) advance(c *chaosCase, st *state.Execution) bool {
	waitsForRetry := c.resume == engine.ResumeRetry && st.Status == state.Error
	if st.Status.Terminal() && !waitsForRetry {
		c.done = true
		return true
	}
	if (c.resume == "" && c.event == "") || c.sent || !(st.Status == state.Suspended || waitsForRetry) {
		return false
	}
	if c.event != "" {
		_, _, err := cl.bus.Publish(cl.e.ctx, store.Event{ID: c.eventID(), Type: "paid", Data: json.RawMessage(c.event)})
		if c.sent = cl.failed("publish the event of "+c.id, err) == nil; c.sent {
			cl.published++
		}
		return false
	}
	if c.resume == engine.ResumeCancel {
		if err := cl.e.ts.SetCancel(cl.e.ctx, c.id); err != nil {
			return false
		}
	}
	env := queue.Envelope{Kind: queue.KindResume, FlowID: c.flow, FlowVersion: "1", ExecutionID: c.id, ResumeType: c.resume}
	if c.data != "" {
		env.ResumeData = json.RawMessage(c.data)
	}
	c.sent = cl.enqueue(env) == nil
	return false
}

// check compares c's final state with what c expects: "" when it is as expected, else what
// differs. Exactly one terminal transition is expected (terminalTransitions).
func (c *chaosCase) check(st *state.Execution) string {
	terminal := terminalTransitions(st)
	errType, errMsg := "", ""
	if st.Error != nil {
		errType, errMsg = st.Error.Type, st.Error.Message
	}
	woken := c.wokenBy(st)
	if woken != "" {
		woken = "; " + woken
	}
	if st.Status != c.want || (c.output != "" && fmt.Sprint(st.Output) != c.output) || terminal != 1 ||
		(c.errType != "" && errType != c.errType) || !strings.Contains(errMsg, c.errText) || woken != "" {
		return fmt.Sprintf("%s (%s, n=%d, resume %q event %q sent %t): status %s output %v error %+v, %d terminal transitions; want %s %q %s %q%s\ntimeline: %+v",
			c.id, c.flow, c.n, c.resume, c.event, c.sent, st.Status, st.Output, st.Error, terminal, c.want, c.output, c.errType, c.errText,
			woken, st.Timeline)
	}
	return ""
}

// chaosPoison are the deliberately malformed entries, in turn; each must be dead-lettered once.
func chaosPoison(k int) []string {
	switch k % 4 {
	case 0:
		return []string{"junk", "no payload field"}
	case 1:
		return []string{queue.PayloadField, "not json"}
	case 2:
		return []string{queue.PayloadField, `{"schema_version":1,"kind":"start"}`}
	}
	return []string{queue.PayloadField, fmt.Sprintf(`{"schema_version":999,"kind":"start","flow_id":"fx","execution_id":"ex_future_%d"}`, k)}
}

// fault is one injected fault and the side-effecting steps it caught in flight.
type fault struct {
	kind     string // "kill", "drain" or "restart"
	at       time.Duration
	worker   int // the killed or drained worker; -1 for the restart
	inFlight int
}

func (f *fault) String() string {
	if f.worker < 0 {
		return fmt.Sprintf("%s at +%.1fs", f.kind, f.at.Seconds())
	}
	return fmt.Sprintf("%s of w%d at +%.1fs", f.kind, f.worker, f.at.Seconds())
}

// catch counts r as in flight at f (once, for the first fault that catches it); nil-safe.
func (f *fault) catch(r *fxRequest) {
	if f != nil && r.fault == nil {
		r.fault = f
		f.inFlight++
	}
}

// fxRequest is one side-effect request as the effect server saw it.
type fxRequest struct {
	path    string
	owner   *proc // the worker whose socket sent it; nil when that socket was gone already
	at      time.Duration
	open    bool
	fault   *fault // the fault that caught its step in flight
	stopped bool   // else: the run it belonged to was stopped by its worker (see workerPool.stops)
}

// effectServer is the flows' outside world. It answers after a random pause (so kills land
// mid-step), counts requests per path, and names the worker behind each connection (from the
// socket's inode in /proc), so that at a fault it can tell which side-effecting steps the
// faulted workers had in flight:
//   - requests open at the fault moment (the workers are stopped with SIGSTOP for it),
//   - requests answered but whose step no saved state holds yet (the test checks Redis),
//   - requests that arrive afterwards from a killed or draining worker, or from anyone while
//     Redis is down.
//
// A replay no fault caught in flight is unexplained, unless the worker logged stopping that run
// (workerPool.stops).
type effectServer struct {
	*httptest.Server
	port    int
	start   time.Time
	workers func() []*proc // the workers whose process is alive

	mu       sync.Mutex
	counts   map[string]int
	fx       map[string][]*fxRequest // side-effect requests by path
	saved    map[string]bool         // side-effect paths whose step a loaded state holds
	doomed   map[*proc]*fault        // killed or draining workers
	outage   *fault                  // the Redis restart under way
	lastKill *fault
}

type connOwnerKey struct{}

func newEffectServer(t *testing.T, start time.Time, workers func() []*proc) *effectServer {
	s := &effectServer{start: start, workers: workers, counts: map[string]int{}, fx: map[string][]*fxRequest{},
		saved: map[string]bool{}, doomed: map[*proc]*fault{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.port = s.Listener.Addr().(*net.TCPAddr).Port
	s.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connOwnerKey{}, s.owner(c))
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *effectServer) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	owner, _ := r.Context().Value(connOwnerKey{}).(*proc)
	s.mu.Lock()
	s.counts[path]++
	n := s.counts[path]
	var req *fxRequest
	if strings.HasPrefix(path, "/fx/") {
		req = &fxRequest{path: path, owner: owner, at: time.Since(s.start), open: true}
		s.fx[path] = append(s.fx[path], req)
		switch {
		case s.outage != nil:
			s.outage.catch(req)
		case owner == nil: // its socket was gone before the server could name it: a killed worker's
			s.lastKill.catch(req)
		default:
			s.doomed[owner].catch(req)
		}
	}
	s.mu.Unlock()
	if req != nil {
		defer func() {
			s.mu.Lock()
			req.open = false
			s.mu.Unlock()
		}()
	}
	pause := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	short := time.Duration(100+rand.IntN(500)) * time.Millisecond
	switch {
	case strings.HasPrefix(path, "/hang/"), strings.HasPrefix(path, "/retry/") && n == 2:
		pause(30 * time.Second) // the client gives up first
		return
	case !pause(short):
		return
	case strings.HasPrefix(path, "/once-fail/") && n == 1, strings.HasPrefix(path, "/retry/") && n == 1:
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"ok":true}`)
}

// owner names the worker holding the client end of c: the socket's inode from /proc/net/tcp,
// then the live worker with that inode among its open files. nil when the socket is gone.
func (s *effectServer) owner(c net.Conn) *proc {
	client, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return nil
	}
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return nil
	}
	local, remote := fmt.Sprintf(":%04X", client.Port), fmt.Sprintf(":%04X", s.port)
	inode := ""
	for _, line := range strings.Split(string(table), "\n") {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		f := strings.Fields(line)
		if len(f) >= 10 && strings.HasSuffix(f[1], local) && strings.HasSuffix(f[2], remote) {
			inode = f[9]
			break
		}
	}
	if inode == "" || inode == "0" {
		return nil
	}
	target := "socket:[" + inode + "]"
	for _, w := range s.workers() {
		dir := "/proc/" + strconv.Itoa(w.cmd.Process.Pid) + "/fd/"
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if l, err := os.Readlink(dir + fd.Name()); err == nil && l == target {
				return w
			}
		}
	}
	return nil
}

// faultMoment is f's moment for the workers ws, stopped by the caller: it catches their open
// side-effect requests, makes their later ones count as caught by f (for an outage, anyone's
// until endOutage), and returns their answered requests whose step no loaded state holds yet
// (the last per path), for the caller to check in Redis.
func (s *effectServer) faultMoment(f *fault, ws []*proc, outage bool) []*fxRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := map[*proc]bool{}
	for _, w := range ws {
		mine[w] = true
	}
	var check []*fxRequest
	for path, rs := range s.fx {
		var last *fxRequest
		for _, r := range rs {
			if r.fault != nil || !(outage || mine[r.owner]) {
				continue
			}
			if r.open {
				f.catch(r)
			} else if !s.saved[path] {
				last = r
			}
		}
		if last != nil {
			check = append(check, last)
		}
	}
	switch {
	case outage:
		s.outage = f
	default:
		for _, w := range ws {
			s.doomed[w] = f
		}
		if f.kind == "kill" {
			s.lastKill = f
		}
	}
	return check
}

func (s *effectServer) endOutage() {
	s.mu.Lock()
	s.outage = nil
	s.mu.Unlock()
}

func (s *effectServer) caught(f *fault, r *fxRequest) {
	s.mu.Lock()
	f.catch(r)
	s.mu.Unlock()
}

// noteState records the side-effecting steps a loaded state holds as saved.
func (s *effectServer) noteState(st *state.Execution) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for node := range st.Nodes() {
		s.saved["/fx/"+st.ExecutionID+"/"+node] = true
	}
}

// fxStep splits /fx/<execution>/<step>.
func fxStep(path string) (id, step string) {
	parts := strings.Split(strings.TrimPrefix(path, "/fx/"), "/")
	if len(parts) != 2 {
		return "", ""
	}
	return parts[0], parts[1]
}

// workerPool is every worker the run started, and every filter and delay process.
type workerPool struct {
	e     *stack
	mu    sync.Mutex
	all   []*proc
	index map[*proc]int
	live  []*proc // running, neither killed nor drained

	roles    map[string][]*proc // "filter", "delay": every process started, the current one last
	roleName map[*proc]string   // f0, f1 … and d0, d1 …
}

// spawnRole starts a `plaita filter` or `plaita delay` process (the one of its role from now on).
func (p *workerPool) spawnRole(role string) *proc {
	w := spawn(p.e.t, p.e.env, role, "--log-format", "json")
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.roles == nil {
		p.roles, p.roleName = map[string][]*proc{}, map[*proc]string{}
	}
	p.roleName[w] = fmt.Sprintf("%c%d", role[0], len(p.roles[role]))
	p.roles[role] = append(p.roles[role], w)
	return w
}

// current is the filter or delay process started last, and its name; nil when none was.
func (p *workerPool) current(role string) (*proc, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws := p.roles[role]
	if len(ws) == 0 {
		return nil, ""
	}
	return ws[len(ws)-1], p.roleName[ws[len(ws)-1]]
}

// named is every process the run started with its name: w0 … (workers), f0 … (filters),
// d0 … (delay processes).
func (p *workerPool) named() []namedProc {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []namedProc
	for i, w := range p.all {
		out = append(out, namedProc{fmt.Sprintf("w%d", i), w})
	}
	for _, role := range []string{"filter", "delay"} {
		for _, w := range p.roles[role] {
			out = append(out, namedProc{p.roleName[w], w})
		}
	}
	return out
}

type namedProc struct {
	name string
	w    *proc
}

// countLog counts the log lines with event ev in the logs of role's processes.
func (p *workerPool) countLog(role, ev string) int {
	p.mu.Lock()
	ws := append([]*proc(nil), p.roles[role]...)
	p.mu.Unlock()
	n := 0
	for _, w := range ws {
		n += strings.Count(w.stderr.String(), `"event":"`+ev+`"`)
	}
	return n
}

func (p *workerPool) spawn() *proc {
	w := spawn(p.e.t, p.e.env, "worker")
	p.mu.Lock()
	defer p.mu.Unlock()
	p.index[w] = len(p.all)
	p.all = append(p.all, w)
	p.live = append(p.live, w)
	return w
}

// pick takes a random live worker out of the live set.
func (p *workerPool) pick() *proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.live) == 0 {
		return nil
	}
	i := rand.IntN(len(p.live))
	w := p.live[i]
	p.live = append(p.live[:i], p.live[i+1:]...)
	return w
}

// alive is every worker whose process has not exited.
func (p *workerPool) alive() []*proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*proc
	for _, w := range p.all {
		select {
		case <-w.exited:
		default:
			out = append(out, w)
		}
	}
	return out
}

func (p *workerPool) name(w *proc) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i, ok := p.index[w]; ok {
		return i
	}
	return -1
}

// about is the last n log lines, of any worker, filter or delay process, that mention s.
func (p *workerPool) about(s string, n int) string { return about(p.named(), s, n) }

// about is the log lines of procs that contain s, the last n, each named by its process.
func about(procs []namedProc, s string, n int) string {
	var lines []string
	for _, np := range procs {
		for _, l := range strings.Split(np.w.stderr.String(), "\n") {
			if strings.Contains(l, s) {
				lines = append(lines, np.name+": "+l)
			}
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// recent is the tail of the log of the last k workers started, and of the current filter and
// delay process.
func (p *workerPool) recent(k, lines int) string {
	p.mu.Lock()
	ws := append([]*proc(nil), p.all...)
	p.mu.Unlock()
	var b strings.Builder
	for i := max(0, len(ws)-k); i < len(ws); i++ {
		fmt.Fprintf(&b, "--- worker w%d stderr (tail):\n%s\n", i, tail(ws[i].stderr.String(), lines))
	}
	for _, role := range []string{"filter", "delay"} {
		if w, name := p.current(role); w != nil {
			fmt.Fprintf(&b, "--- %s %s stderr (tail):\n%s\n", role, name, tail(w.stderr.String(), lines))
		}
	}
	return b.String()
}

// logs is every log of the run: the workers', the filters' and the delay processes'.
func (p *workerPool) logs() string {
	var b strings.Builder
	for _, np := range p.named() {
		fmt.Fprintf(&b, "--- %s stderr:\n%s\n", np.name, np.w.stderr.String())
	}
	return b.String()
}

// workerStop is a worker and an execution whose run it stopped.
type workerStop struct {
	w  *proc
	id string
}

// stops are the runs the workers stopped themselves without saving their step, from their
// logs: a lost lease (a fenced save, or renewals late past the TTL on a starved machine) or a
// transient failure (a storage call that failed); either leaves the message to be redelivered
// from the last checkpoint, and so replays the step it was in. By worker and execution, with
// the count of each kind.
func (p *workerPool) stops() (stops map[workerStop]int, lostLeases, failedTasks int) {
	p.mu.Lock()
	ws := append([]*proc(nil), p.all...)
	p.mu.Unlock()
	stops = map[workerStop]int{}
	for _, w := range ws {
		for _, line := range strings.Split(w.stderr.String(), "\n") {
			lost := strings.Contains(line, `"event":"worker.lease_lost"`)
			if !lost && !strings.Contains(line, `"event":"worker.task_failed"`) {
				continue
			}
			var ev struct {
				ExecutionID string `json:"execution_id"`
			}
			if json.Unmarshal([]byte(line), &ev) != nil || ev.ExecutionID == "" {
				continue
			}
			stops[workerStop{w, ev.ExecutionID}]++
			if lost {
				lostLeases++
			} else {
				failedTasks++
			}
		}
	}
	return stops, lostLeases, failedTasks
}

// freeze stops w with SIGSTOP and waits until every thread of it is stopped; false when the
// process is gone.
func freeze(w *proc) bool {
	if w.cmd.Process.Signal(syscall.SIGSTOP) != nil {
		return false
	}
	task := "/proc/" + strconv.Itoa(w.cmd.Process.Pid) + "/task/"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		select {
		case <-w.exited:
			return false
		default:
		}
		threads, err := os.ReadDir(task)
		if err != nil {
			continue
		}
		stopped := len(threads) > 0
		for _, th := range threads {
			b, err := os.ReadFile(task + th.Name() + "/stat")
			// "pid (comm) S ...": the state follows the last parenthesis.
			i := bytes.LastIndexByte(b, ')')
			if err != nil || i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return true
		}
	}
	return false
}

// runChaos is the chaos suite at one size.
func runChaos(t *testing.T, size chaosSize) {
	total := size.executions
	// Each kill of an execution's holder spends about one delivery of its message, and the suite
	// kills a worker every two seconds: a run of a few seconds (tmo, nretry) can meet five kills
	// in a row, and the default budget of 5 would then end it in error, as designed. The budget
	// here outlasts that; the malformed entries are dead-lettered on their first delivery anyway.
	e := newStack(t, withTimeout(size.deadline+2*time.Minute), withEnv(map[string]string{
		"PLAITA_CLAIM_MIN_IDLE_MS": "1000", "PLAITA_LEASE_TTL_SECONDS": "3", "PLAITA_MAX_DELIVERIES": "20",
		"PLAITA_WORKER_CONCURRENCY": strconv.Itoa(chaosConcurrency), "PLAITA_WORKER_DRAIN_TIMEOUT": "3",
		// An event whose notification no filter heard (published while the filter was down, or
		// before the wait's subscription was written) is found by the next reconcile pass.
		"PLAITA_EVENT_RECONCILE_INTERVAL": "1",
	}), withRedisArgs("--appendonly", "yes", "--appendfsync", "always"))
	pool := &workerPool{e: e, index: map[*proc]int{}}
	started := time.Now()
	fx := newEffectServer(t, started, pool.alive)
	for id, def := range chaosFlows {
		e.publish(id, strings.ReplaceAll(def, "URL", fx.URL))
	}
	queueName := config.QueueName.In(e.cfg)
	cases := chaosCases(total)
	for range chaosWorkers {
		pool.spawn()
	}
	pool.spawnRole("filter")
	pool.spawnRole("delay")
	cl := newCaseClient(e, fx, started)

	// The driver plays the flows' clients: it keeps up to chaosWindow executions enqueued and
	// unsettled, adds a malformed entry every chaosPoisonEvery executions, and once an
	// execution waits sends its resume, or publishes the event it waits for (an idempotent
	// publish: its id is the execution's), once. It pauses while Redis is restarted (redisMu),
	// so no write of its own straddles the kill and has an unknown outcome.
	var redisMu sync.RWMutex
	var settledN atomic.Int64
	poison := map[string]int{} // stream id → kind
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopDriver := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopDriver()
	wg.Add(1)
	go func() {
		defer wg.Done()
		var active []*chaosCase
		next, poisoned := 0, 0
		tick := time.NewTicker(chaosSweep)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			redisMu.RLock()
			for len(active) < chaosWindow && next < len(cases) {
				if poisoned <= next/chaosPoisonEvery {
					fv := chaosPoison(poisoned)
					id, err := e.c.Do(e.ctx, e.c.B().Xadd().Key(queueName).Id("*").FieldValue().FieldValue(fv[0], fv[1]).Build()).ToString()
					if cl.failed("add a malformed entry", err) != nil {
						break
					}
					poison[id] = poisoned % 4
					poisoned++
				}
				c := cases[next]
				if cl.start(c) != nil {
					break
				}
				active = append(active, c)
				next++
			}
			var settled int
			active, settled = cl.sweep(active)
			settledN.Add(int64(settled))
			redisMu.RUnlock()
			if next == len(cases) && len(active) == 0 {
				return
			}
		}
	}()

	// checkAnswered catches the answered requests whose step Redis does not hold either.
	checkAnswered := func(f *fault, rs []*fxRequest) {
		for _, r := range rs {
			id, step := fxStep(r.path)
			if st, err := e.ts.Load(e.ctx, id); err == nil {
				if _, ok := st.Nodes()[step]; ok {
					fx.noteState(st)
					continue
				}
			}
			fx.caught(f, r)
		}
	}
	// restartRedis stops every worker for the fault moment, kills Redis, lets the workers run
	// into the outage for a second, and starts Redis again on its AOF.
	restartRedis := func(f *fault) {
		redisMu.Lock()
		defer redisMu.Unlock()
		var frozen []*proc
		for _, w := range pool.alive() {
			if freeze(w) {
				frozen = append(frozen, w)
			}
		}
		checkAnswered(f, fx.faultMoment(f, frozen, true))
		e.srv.Kill()
		for _, w := range frozen {
			w.cmd.Process.Signal(syscall.SIGCONT)
		}
		time.Sleep(time.Second) // the outage
		e.srv.Start()
		// The test's own client reconnects before the driver goes on.
		waitFor(t, "Redis answering the test again", 30*time.Second, func() bool {
			return e.c.Do(e.ctx, e.c.B().Ping().Build()).Error() == nil
		})
		fx.endOutage()
	}
	var faults []*fault
	newFault := func(kind string, w *proc) *fault {
		f := &fault{kind: kind, at: time.Since(started), worker: -1}
		if w != nil {
			f.worker = pool.name(w)
		}
		faults = append(faults, f)
		return f
	}
	faultLog := func() string {
		fx.mu.Lock()
		defer fx.mu.Unlock()
		var b strings.Builder
		for _, f := range faults {
			fmt.Fprintf(&b, "%s: %d in flight\n", f, f.inFlight)
		}
		return b.String()
	}

	// The faults: kill -9 a random worker every 1–2.5 s and start a new one; every sixth fault
	// kill -9 the filter instead, and every sixth the delay process, and start a new one after
	// up to a second; on the way drain one worker with SIGTERM (once a sixth of the executions
	// settled) and kill and restart Redis (once a third did). At each fault moment the workers
	// concerned are stopped with SIGSTOP for the effect server to take stock of their side
	// effects in flight (the filter and the delay process have none: they only enqueue).
	var kills, restarts, drains, unsettledAtRestart, filterKills, delayKills, faultN int
	var drained *proc
	deadline := started.Add(size.deadline)
	for {
		time.Sleep(time.Duration(1000+rand.IntN(1500)) * time.Millisecond) // the fault cadence
		done := int(settledN.Load())
		if done == total || time.Now().After(deadline) {
			break
		}
		faultN++
		switch {
		case drains == 0 && done >= total/6:
			w := pool.pick()
			if w == nil || !freeze(w) {
				t.Fatalf("no live worker to drain\n%s", pool.recent(3, 50))
			}
			f := newFault("drain", w)
			checkAnswered(f, fx.faultMoment(f, []*proc{w}, false))
			w.cmd.Process.Signal(syscall.SIGTERM)
			w.cmd.Process.Signal(syscall.SIGCONT)
			drained = w
			drains++
			pool.spawn()
		case restarts == 0 && done >= total/3:
			restartRedis(newFault("restart", nil))
			unsettledAtRestart = total - done
			restarts++
		case faultN%6 == 2 || faultN%6 == 5:
			role := "filter"
			if faultN%6 == 5 {
				role = "delay"
			}
			w, name := pool.current(role)
			newFault("kill of "+name, nil)
			select {
			case <-w.exited:
				t.Fatalf("the %s %s exited by itself: %v\n%s", role, name, w.err, tail(w.stderr.String(), 60))
			default:
			}
			w.cmd.Process.Signal(syscall.SIGKILL)
			if !w.wait(10 * time.Second) {
				t.Fatalf("the %s %s survived kill -9", role, name)
			}
			time.Sleep(time.Duration(rand.IntN(1000)) * time.Millisecond) // the downtime
			pool.spawnRole(role)
			if role == "filter" {
				filterKills++
			} else {
				delayKills++
			}
		default:
			w := pool.pick()
			if w == nil {
				t.Fatalf("no live worker to kill\n%s", pool.recent(3, 50))
			}
			f := newFault("kill", w)
			if !freeze(w) {
				t.Fatalf("worker w%d exited by itself: %v\n%s", f.worker, w.err, tail(w.stderr.String(), 60))
			}
			checkAnswered(f, fx.faultMoment(f, []*proc{w}, false))
			w.cmd.Process.Signal(syscall.SIGKILL)
			if !w.wait(10 * time.Second) {
				t.Fatalf("worker w%d survived kill -9", f.worker)
			}
			kills++
			pool.spawn()
		}
	}
	stopDriver()
	elapsed := time.Since(started)
	if restarts == 0 || drains == 0 || kills < 3 || filterKills == 0 || delayKills == 0 {
		t.Fatalf("the faults did not all happen (kills %d, restarts %d, drains %d, filter kills %d, delay kills %d): the run ended too early",
			kills, restarts, drains, filterKills, delayKills)
	}
	if unsettledAtRestart == 0 {
		t.Fatal("no execution was unsettled when Redis was restarted")
	}
	if drained != nil {
		if !drained.wait(30 * time.Second) {
			t.Fatalf("the drained worker w%d did not exit\n%s", pool.name(drained), tail(drained.stderr.String(), 50))
		}
		if drained.err != nil {
			t.Errorf("the drained worker w%d exited with %v\n%s", pool.name(drained), drained.err, tail(drained.stderr.String(), 50))
		}
	}

	// Every execution in its expected state, each with exactly one terminal transition.
	var bad []string
	for _, c := range cases {
		st, err := e.ts.Load(e.ctx, c.id)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s (%s, n=%d): %v (settled %t)\n%s", c.id, c.flow, c.n, err, c.done, pool.about(c.id, 20)))
			continue
		}
		if problem := c.check(st); problem != "" {
			bad = append(bad, problem+"\nits log lines:\n"+pool.about(c.id, 20))
		}
	}
	if len(bad) > 0 {
		shown := bad[:min(len(bad), 10)]
		t.Errorf("%d of %d executions not as expected (after %d kills, %d restarts, %d drains); the first %d:\n%s\nfaults:\n%s\n%s",
			len(bad), total, kills, restarts, drains, len(shown), strings.Join(shown, "\n\n"), faultLog(), pool.recent(3, 60))
	}

	// The queue drained, and the dead-letter stream holds the poisoned entries, each once, and
	// nothing else.
	var streamLen, pending int64
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if streamLen, pending = e.streamLen(), e.pending(); streamLen == 0 && pending == 0 {
			break
		}
		if time.Now().After(end) {
			t.Errorf("the queue did not drain: %d entries, %d pending\n%s", streamLen, pending, pool.recent(3, 60))
			break
		}
	}
	entries := e.dlqEntries()
	seen := map[string]int{}
	for _, en := range entries {
		seen[en["source_id"]]++
	}
	for id, kind := range poison {
		if seen[id] != 1 {
			t.Errorf("poisoned entry %s (kind %d) dead-lettered %d times, want 1", id, kind, seen[id])
		}
	}
	if len(entries) != len(poison) {
		var other []string
		for _, en := range entries {
			if _, ok := poison[en["source_id"]]; ok {
				continue
			}
			id, status := en["execution_id"], "no state"
			if st, err := e.ts.Load(e.ctx, id); err == nil {
				status = string(st.Status)
			}
			other = append(other, fmt.Sprintf("%s %s of %s (%s now), reason %s after %s deliveries; its log lines:\n%s",
				en["kind"], en["source_id"], id, status, en["reason"], en["delivery_count"], pool.about(id, 30)))
		}
		t.Errorf("the DLQ holds %d entries, want the %d poisoned ones; the others:\n%s", len(entries), len(poison), strings.Join(other, "\n"))
	}

	// The filter and the delay process that outlived the faults stop cleanly on SIGTERM.
	for _, role := range []string{"filter", "delay"} {
		w, name := pool.current(role)
		if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("SIGTERM to the %s %s: %v", role, name, err)
		}
		if !w.wait(30 * time.Second) {
			t.Errorf("the %s %s did not stop on SIGTERM\n%s", role, name, tail(w.stderr.String(), 50))
		} else if w.err != nil {
			t.Errorf("the %s %s exited with %v\n%s", role, name, w.err, tail(w.stderr.String(), 50))
		}
	}

	// Side effects: each step ran once, plus once per time a fault caught it in flight, or its
	// worker stopped the run itself (each such stop explains one request of its own).
	stops, lostLeases, failedTasks := pool.stops()
	stopCaught := 0
	fx.mu.Lock()
	requests, replays := 0, 0
	var unexplained []string
	paths := make([]string, 0, len(fx.fx))
	for path := range fx.fx {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	for _, path := range paths {
		rs := fx.fx[path]
		requests += len(rs)
		replays += len(rs) - 1
		var uncaught []*fxRequest
		for _, r := range rs {
			if r.fault == nil {
				uncaught = append(uncaught, r)
			}
		}
		id, _ := fxStep(path)
		left := len(uncaught)
		for _, r := range uncaught[:max(0, len(uncaught)-1)] { // all but the one that went through
			if k := (workerStop{r.owner, id}); stops[k] > 0 {
				stops[k]--
				r.stopped = true
				stopCaught++
				left--
			}
		}
		if left > 1 {
			var desc []string
			for _, r := range rs {
				d := fmt.Sprintf("+%.2fs from a socket gone before it was named", r.at.Seconds())
				if r.owner != nil {
					d = fmt.Sprintf("+%.2fs from w%d", r.at.Seconds(), pool.index[r.owner])
				}
				switch {
				case r.fault != nil:
					d += ", caught by the " + r.fault.String()
				case r.stopped:
					d += ", its run stopped by its worker"
				}
				desc = append(desc, d)
			}
			unexplained = append(unexplained, fmt.Sprintf("%s: %s", path, strings.Join(desc, "; ")))
		}
	}
	steps := len(fx.fx)
	limit, atKills, maxKill, atDrain, atRestart := stopCaught, 0, 0, 0, 0
	for _, f := range faults {
		limit += f.inFlight
		switch f.kind {
		case "kill":
			atKills += f.inFlight
			maxKill = max(maxKill, f.inFlight)
		case "drain":
			atDrain += f.inFlight
		case "restart":
			atRestart += f.inFlight
		}
	}
	fx.mu.Unlock()

	var b strings.Builder
	row := func(k, format string, a ...any) { fmt.Fprintf(&b, "  %-22s %s\n", k, fmt.Sprintf(format, a...)) }
	fmt.Fprintf(&b, "chaos suite (%s)\n", size.name)
	row("executions", "%d", total)
	row("flows", "%d (%s)", len(chaosFlows), strings.Join(sortedKeys(chaosFlows), ", "))
	row("workers", "%d at a time × %d consumers, %d started", chaosWorkers, chaosConcurrency, len(pool.all))
	row("worker kills (kill -9)", "%d", kills)
	row("Redis restarts", "%d", restarts)
	row("drains (SIGTERM)", "%d", drains)
	row("filter, delay", "1 + 1 at a time; %d and %d killed (kill -9) and replaced", filterKills, delayKills)
	row("woken by the roles", "%d events published, %d resumes sent by the filters; %d by the delay processes",
		cl.published, pool.countLog("filter", "filter.wakeup"), pool.countLog("delay", "delay.fired"))
	row("in flight at restart", "%d side-effecting steps (%d executions unsettled)", atRestart, unsettledAtRestart)
	row("in flight at kills", "%d side-effecting steps (at most %d at one kill)", atKills, maxKill)
	row("in flight at drain", "%d side-effecting steps", atDrain)
	row("side-effect requests", "%d for %d steps", requests, steps)
	row("stopped runs", "%d by their own worker (lease lost %d, transient failure %d); %d explain a replay no fault caught",
		lostLeases+failedTasks, lostLeases, failedTasks, stopCaught)
	row("replays", "%d (%d not caught in flight by a fault or a stopped run)", replays, len(unexplained))
	row("limit", "%d (the side-effecting steps in flight at the faults and the stopped runs)", limit)
	row("kills+restarts", "%d (%.2f replays per fault)", kills+restarts, float64(replays)/float64(kills+restarts))
	row("dead letters", "%d (the %d poisoned entries)", len(entries), len(poison))
	row("duration", "%.1fs", elapsed.Seconds())
	row("executions/s", "%.1f", float64(total)/elapsed.Seconds())
	if retried := cl.failures; len(retried) > 0 {
		// Safe to retry: the driver pauses while Redis is killed, so a failed write went to a
		// connection of the killed server and was never applied.
		row("enqueues retried", "%s", strings.Join(retried, "; "))
	}
	t.Log("\n" + b.String())
	if size.stdout {
		fmt.Print(b.String())
	}

	if replays > limit {
		t.Errorf("%d side effects replayed, more than the %d steps in flight at the faults and the stopped runs", replays, limit)
	}
	if len(unexplained) > 0 {
		t.Errorf("%d side-effecting steps replayed without a fault catching them in flight or their worker stopping the run:\n%s\nfaults:\n%s",
			len(unexplained), strings.Join(unexplained[:min(len(unexplained), 20)], "\n"), faultLog())
		for _, u := range unexplained[:min(len(unexplained), 3)] {
			id, _ := fxStep(strings.SplitN(u, ":", 2)[0])
			t.Logf("log lines of %s:\n%s", id, pool.about(id, 30))
		}
	}
	if p := panicIn(pool.logs()); p != "" {
		t.Errorf("a log shows a panic:\n%s", p)
	}
}

// panicIn is the part of a log around the first sign of a panic (a recovered run's
// worker.run_panic, a crash's "panic:" or its goroutine dump); "" when there is none.
func panicIn(l string) string {
	if !strings.Contains(l, "worker.run_panic") && !strings.Contains(l, "panic:") && !strings.Contains(l, "goroutine ") {
		return ""
	}
	i := strings.Index(l, "panic")
	if i < 0 {
		i = strings.Index(l, "goroutine ")
	}
	return l[max(0, i-2000):min(len(l), i+4000)]
}

// terminalTransitions counts the terminal transitions of the timeline. A retry of an execution
// in error starts a new segment: each segment holds at most one terminal transition, and the
// last exactly one; the result is 1 when that holds, else the count of the first segment that
// breaks it.
func terminalTransitions(st *state.Execution) int {
	segments := [][]state.TimelineEntry{nil}
	for _, te := range st.Timeline {
		if te.Event == "retry" && te.Detail == "retry from the failed node" {
			segments = append(segments, nil)
		}
		segments[len(segments)-1] = append(segments[len(segments)-1], te)
	}
	for i, seg := range segments {
		n := 0
		for _, te := range seg {
			switch te.Event {
			case string(state.Completed), string(state.Error), "cancelled":
				n++
			}
		}
		if n > 1 || (i == len(segments)-1 && n != 1) {
			return n
		}
	}
	return 1
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
