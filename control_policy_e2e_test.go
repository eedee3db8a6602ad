package main

import (
	"encoding/json"
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

	"plaita/engine/state"
	"plaita/internal/redistest"
	"plaita/store"
)

// Every producer holds a fresh task to the input bound (PLAITA_EXECUTION_STATE_MAX_BYTES) as
// the CLI's start does: a filter resume whose event data is over the bound, and a schedule fire
// whose input is over it, enqueue nothing, log a line naming the bound and are not retried.
// Real `plaita worker`, `plaita filter` and `plaita schedule` processes on a private
// redis-server; the roles' /metrics counters are the positive signals the tests wait for.

// policyBound is the small input bound of the roles under test; the CLI keeps the default.
const policyBound = "4096"

// policyStack is one scenario: its Redis, the CLI's environment and the processes started.
type policyStack struct {
	t     *testing.T
	env   map[string]string
	procs []*e2eWorker
}

func newPolicyStack(t *testing.T, extra map[string]string) *policyStack {
	t.Helper()
	srv := redistest.StartServer(t)
	env := map[string]string{"PLAITA_REDIS_URL": srv.URL(), "PLAITA_WORKER_CONCURRENCY": "2", "PLAITA_WORKER_DRAIN_TIMEOUT": "5",
		"PLAITA_NODES_WORKSPACE_ROOT": t.TempDir()}
	maps.Copy(env, extra)
	return &policyStack{t: t, env: env}
}

// start runs `plaita <role>` with its metrics on a free port until the test ends (then SIGTERM
// and a drain); extra is the role's own environment.
func (s *policyStack) start(role string, extra map[string]string) (*e2eWorker, int) {
	s.t.Helper()
	env := maps.Clone(s.env)
	maps.Copy(env, extra)
	port := redistest.FreePort(s.t)
	env["PLAITA_METRICS_PORT"], env["PLAITA_METRICS_HOST"] = strconv.Itoa(port), "127.0.0.1"
	p := spawn(s.t, exec.Command(binary, role, "--log-format", "json"), env)
	s.procs = append(s.procs, p)
	s.t.Cleanup(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			s.t.Errorf("SIGTERM %s: %v", role, err)
		}
		if !p.wait(30 * time.Second) {
			s.t.Errorf("%s did not drain and exit\n%s", role, p.stderr.String())
		}
	})
	return p, port
}

// metric reads a counter from the /metrics on port (0 when absent or unreachable).
func (s *policyStack) metric(port int, name string) int {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// ready reports whether the role serving /readyz on port is ready.
func (s *policyStack) ready(port int) bool {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (s *policyStack) waitFor(what string, within time.Duration, ok func() bool) {
	s.t.Helper()
	for deadline := time.Now().Add(within); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s\n%s", what, logs(s.procs))
		}
	}
}

// cli runs a CLI command with --json --quiet and decodes its output into out.
func (s *policyStack) cli(out any, args ...string) {
	s.t.Helper()
	r := run(s.t, s.env, append(args, "--json", "--quiet")...)
	if r.code != 0 {
		s.t.Fatalf("plaita %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
		s.t.Fatalf("plaita %s --json: %v\n%s", strings.Join(args, " "), err, r.stdout)
	}
}

func (s *policyStack) show(id string) state.Execution {
	s.t.Helper()
	var st state.Execution
	s.cli(&st, "execution", "show", id)
	return st
}

// flowFile writes a flow definition to a file for `plaita start`.
func (s *policyStack) flowFile(name, def string) string {
	s.t.Helper()
	p := filepath.Join(s.t.TempDir(), name)
	if err := os.WriteFile(p, []byte(def), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// logLines counts p's log lines of event ev that contain sub.
func roleLogLines(p *e2eWorker, ev, sub string) int {
	n := 0
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(line, `"event":"`+ev+`"`) && strings.Contains(line, sub) {
			n++
		}
	}
	return n
}

// padded is a JSON object of about n bytes with the given order id.
func padded(orderID string, n int) string {
	return `{"order_id":"` + orderID + `","pad":"` + strings.Repeat("x", n) + `"}`
}

// An event whose data is over the filter's input bound (under the 1 MiB event bound) wakes
// nothing: the filter refuses that wake-up once — counted, logged with the bound — and never
// re-claims it on later reconcile passes; the execution keeps waiting, and a matching event
// within the bound still wakes it.
func TestE2EFilterResumeOverTheInputBoundIsRefusedOnce(t *testing.T) {
	s := newPolicyStack(t, map[string]string{"PLAITA_EVENT_RECONCILE_INTERVAL": "1"})
	bound := map[string]string{"PLAITA_EXECUTION_STATE_MAX_BYTES": policyBound}
	s.start("worker", bound)
	filter, port := s.start("filter", bound)
	s.waitFor("the filter is ready (subscribed)", 60*time.Second, func() bool { return s.ready(port) })
	const flow = `{"id":"bounded","start":"wait","nodes":[
	{"id":"wait","type":"wait_event","params":{"event_type":"order.approved","match":"EVENT.order_id == INPUT.order_id"},"next":"done"},
	{"id":"done","type":"end","params":{"output":{"order_id":"{{ EVENT.order_id }}"}}}]}`
	var started struct {
		ExecutionID string `json:"execution_id"`
	}
	s.cli(&started, "start", s.flowFile("bounded.json", flow), "--input", `{"order_id":"A1"}`)
	id := started.ExecutionID
	s.waitFor("the execution waits for its event", 60*time.Second, func() bool { return s.show(id).Status == state.Suspended })

	var big struct {
		ID string `json:"id"`
	}
	s.cli(&big, "event", "publish", "order.approved", "--data", padded("A1", 8<<10))
	refused := func() int { return s.metric(port, "plaita_filter_wakeups_refused_total") }
	woken := func() int { return s.metric(port, "plaita_filter_wakeups_total") }
	s.waitFor("the filter decides about the big event", 60*time.Second, func() bool { return refused() > 0 || woken() > 0 })
	if n, w := refused(), woken(); n != 1 || w != 0 {
		t.Fatalf("%d wake-ups refused and %d enqueued, want 1 refused and none enqueued\n%s", n, w, logs(s.procs))
	}
	if n := roleLogLines(filter, "filter.wakeup_refused", "PLAITA_EXECUTION_STATE_MAX_BYTES"); n != 1 {
		t.Errorf("%d refusal log lines naming the bound, want 1\n%s", n, filter.stderr.String())
	}
	// Reconcile passes keep re-reading the event (it is within their overlap): the refusal is
	// final for (execution, event), so it is neither claimed again nor retried.
	passes := s.metric(port, "plaita_filter_reconcile_passes_total")
	s.waitFor("three more reconcile passes", 60*time.Second, func() bool {
		return s.metric(port, "plaita_filter_reconcile_passes_total") >= passes+3
	})
	if n, w, e := refused(), woken(), s.metric(port, "plaita_filter_errors_total"); n != 1 || w != 0 || e != 0 {
		t.Errorf("after more passes: %d refused, %d enqueued, %d errors; want 1, 0, 0\n%s", n, w, e, filter.stderr.String())
	}
	if st := s.show(id); st.Status != state.Suspended {
		t.Fatalf("the execution is %s after the refused event, want suspended (error %+v)", st.Status, st.Error)
	}

	// A matching event within the bound still wakes it.
	s.cli(&big, "event", "publish", "order.approved", "--data", padded("A1", 16))
	s.waitFor("the execution completes", 60*time.Second, func() bool { return s.show(id).Status == state.Completed })
	if n := refused(); n != 1 {
		t.Errorf("%d wake-ups refused in all, want 1", n)
	}
}

// A schedule whose input is over the schedule role's input bound enqueues no start: each tick
// is recorded as skipped with the bound in its reason, logged and counted, and none is fired.
func TestE2EScheduleFireOverTheInputBoundIsSkipped(t *testing.T) {
	s := newPolicyStack(t, map[string]string{"PLAITA_CHECK_INTERVAL": "0.2"})
	bound := map[string]string{"PLAITA_EXECUTION_STATE_MAX_BYTES": policyBound}
	s.start("worker", bound)
	hello, err := filepath.Abs(filepath.Join("testdata", "flows", "hello.json"))
	if err != nil {
		t.Fatal(err)
	}
	var started struct {
		ExecutionID string `json:"execution_id"`
	}
	s.cli(&started, "start", hello, "--tenant", "acme") // publishes the flow (and starts it once)
	var rec store.ScheduleRecord
	// The CLI has the default bound: the schedule is accepted; the schedule role's is smaller.
	s.cli(&rec, "schedule", "add", "big", "--tenant", "acme", "--cron", "* * * * * *", "--flow", "hello",
		"--input", padded("A1", 8<<10))
	sched, port := s.start("schedule", bound)
	skipped := func() int { return s.metric(port, `plaita_schedule_skipped_total{reason="start_refused"}`) }
	fired := func() int { return s.metric(port, "plaita_schedule_fired_total") }
	s.waitFor("two ticks decided", 60*time.Second, func() bool { return skipped()+fired() >= 2 })
	if n := fired(); n != 0 {
		t.Fatalf("%d starts fired over the bound\n%s", n, logs(s.procs))
	}
	s.cli(&rec, "schedule", "show", "big", "--tenant", "acme")
	if rec.LastFire != nil || rec.LastSkip == nil || !strings.Contains(rec.LastSkip.Reason, "PLAITA_EXECUTION_STATE_MAX_BYTES") {
		t.Fatalf("schedule record: last fire %+v, last skip %+v; want no fire and a skip naming the bound", rec.LastFire, rec.LastSkip)
	}
	if n := roleLogLines(sched, "schedule.start_refused", "PLAITA_EXECUTION_STATE_MAX_BYTES"); n < 2 {
		t.Errorf("%d refusal log lines naming the bound, want one per tick\n%s", n, sched.stderr.String())
	}
	var list struct {
		Items []struct {
			ID string `json:"execution_id"`
		} `json:"items"`
	}
	s.cli(&list, "execution", "list", "--tenant", "acme")
	for _, e := range list.Items {
		if e.ID != started.ExecutionID {
			t.Errorf("execution %s exists beside the CLI's own start: a tick was fired", e.ID)
		}
	}
}
