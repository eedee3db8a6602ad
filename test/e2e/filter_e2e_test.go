package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/internal/redistest"
	"plaita/store/keys"
)

// Acceptance of the filter role with real processes: `plaita worker` and `plaita filter` on a
// private Redis, driven only through the CLI (`plaita start FLOW.json` publishes and starts,
// `plaita event publish`, `plaita execution show --json`). Filters serve /metrics on a free
// port: their counters are the positive signals the tests wait for.

// approvalFlow waits for an order.approved event of the input's order, then ends with the
// event's data.
const approvalFlow = `{"id":"approve","start":"wait","nodes":[
	{"id":"wait","type":"wait_event","params":{"event_type":"order.approved","match":"EVENT.order_id == INPUT.order_id"},"next":"done"},
	{"id":"done","type":"end","params":{"output":{"order_id":"{{ EVENT.order_id }}","by":"{{ EVENT.by ?? '' }}"}}}]}`

// filterStack is one scenario: its Redis, the CLI's environment and the processes started.
type filterStack struct {
	t     *testing.T
	srv   *redistest.Server
	env   map[string]string
	procs []*e2eWorker
}

// rolProc is a started role process and its metrics port (0: none).
type roleProc struct {
	*e2eWorker
	port int
}

func newFilterStack(t *testing.T, extra map[string]string, redisArgs ...string) *filterStack {
	t.Helper()
	srv := redistest.StartServer(t, redisArgs...)
	env := cliEnv(t, srv)
	// A pass a second: a test waiting for the reconciler waits seconds, not minutes.
	env["PLAITA_EVENT_RECONCILE_INTERVAL"] = "1"
	maps.Copy(env, extra)
	return &filterStack{t: t, srv: srv, env: env}
}

// start runs `plaita <role>` until the test ends (then SIGTERM and a drain).
func (s *filterStack) start(role string, extra map[string]string) roleProc {
	s.t.Helper()
	env := maps.Clone(s.env)
	maps.Copy(env, extra)
	port := 0
	if role == "filter" {
		port = redistest.FreePort(s.t)
		env["PLAITA_METRICS_PORT"], env["PLAITA_METRICS_HOST"] = strconv.Itoa(port), "127.0.0.1"
	}
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
	return roleProc{p, port}
}

// filter starts a filter and waits until it is ready (/readyz: it listens for notifications).
func (s *filterStack) filter(extra map[string]string) roleProc {
	s.t.Helper()
	p := s.start("filter", extra)
	waitFor(s.t, "the filter is ready", 60*time.Second, func() bool {
		code, _ := s.get(p, "/readyz")
		return code == http.StatusOK
	}, s.procs...)
	return p
}

func (s *filterStack) get(p roleProc, path string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", p.port, path))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric reads a counter from a filter's /metrics (0 when absent or unreachable).
func (s *filterStack) metric(p roleProc, name string) int {
	_, body := s.get(p, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

func (s *filterStack) sum(ps []roleProc, name string) int {
	n := 0
	for _, p := range ps {
		n += s.metric(p, name)
	}
	return n
}

func (s *filterStack) stop(p roleProc) {
	s.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	if !p.wait(30 * time.Second) {
		s.t.Fatalf("process did not exit\n%s", p.stderr.String())
	}
	if p.err != nil {
		s.t.Fatalf("exit: %v\n%s", p.err, p.stderr.String())
	}
}

func (s *filterStack) kill9(p roleProc) {
	s.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	if !p.wait(10 * time.Second) {
		s.t.Fatal("process survived kill -9")
	}
}

func (s *filterStack) logs() string { return logs(s.procs) }

// countLog counts p's log lines with event ev (and, when set, containing sub).
func countLog(p roleProc, ev, sub string) int {
	n := 0
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(line, `"event":"`+ev+`"`) && strings.Contains(line, sub) {
			n++
		}
	}
	return n
}

// startFlow publishes def (from a file) and starts it with input in tenant ("" = default).
func (s *filterStack) startFlow(name, def, tenant, input string) string {
	s.t.Helper()
	args := []string{writeCLIFlow(s.t, name+".json", def), "--input", input}
	if tenant != "" {
		args = append(args, "--tenant", tenant)
	}
	out, r := startFile(s.t, s.env, args...)
	if r.code != 0 {
		s.t.Fatalf("start %s: exit %d\n%s", name, r.code, r.stderr)
	}
	return out.ExecutionID
}

func (s *filterStack) show(id, tenant string) state.Execution {
	s.t.Helper()
	st, ok := s.lookup(id, tenant)
	if !ok {
		s.t.Fatalf("show %s: no such execution", id)
	}
	return st
}

// lookup is show, false while the execution does not exist yet (`plaita start` returns once
// the start is enqueued, before a worker runs it).
func (s *filterStack) lookup(id, tenant string) (state.Execution, bool) {
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

// waitStatus polls `execution show --json` until the execution has the status; an execution
// that does not exist yet is waited for.
func (s *filterStack) waitStatus(id, tenant string, want state.Status, within time.Duration) state.Execution {
	s.t.Helper()
	var st state.Execution
	waitFor(s.t, fmt.Sprintf("execution %s %s", id, want), within, func() bool {
		var ok bool
		st, ok = s.lookup(id, tenant)
		return ok && st.Status == want
	}, s.procs...)
	return st
}

// publishEvent runs `plaita event publish`; extra are more flags (--id, --tenant).
func (s *filterStack) publishEvent(typ, data string, extra ...string) (id string, duplicate bool) {
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

// A wait_event with a match resumes on the matching event only, exactly once although the
// event is published twice and two filters run.
func TestE2EFilterWakesOnTheMatchingEventOnlyOnce(t *testing.T) {
	s := newFilterStack(t, nil)
	worker := s.start("worker", nil)
	filters := []roleProc{s.filter(nil), s.filter(nil)}
	a1 := s.startFlow("approve", approvalFlow, "", `{"order_id":"A1"}`)
	b2 := s.startFlow("approve", approvalFlow, "", `{"order_id":"B2"}`)
	s.waitStatus(a1, "", state.Suspended, 60*time.Second)
	s.waitStatus(b2, "", state.Suspended, 60*time.Second)

	// An event of another order: each filter checks it against both waits and refuses it.
	s.publishEvent("order.approved", `{"order_id":"Z9"}`)
	waitFor(t, "both filters refuse the other order's event for both waits", 60*time.Second, func() bool {
		return s.metric(filters[0], "plaita_filter_no_match_total") == 2 && s.metric(filters[1], "plaita_filter_no_match_total") == 2
	}, s.procs...)
	if st := s.show(a1, ""); st.Status != state.Suspended {
		t.Fatalf("A1 is %s after another order's event", st.Status)
	}

	if _, dup := s.publishEvent("order.approved", `{"order_id":"A1","by":"sam"}`, "--id", "approval-A1"); dup {
		t.Fatal("the first publish is a duplicate")
	}
	if _, dup := s.publishEvent("order.approved", `{"by":"sam","order_id":"A1"}`, "--id", "approval-A1"); !dup {
		t.Fatal("the second publish of the same id is not a duplicate")
	}
	st := s.waitStatus(a1, "", state.Completed, 60*time.Second)
	if out, _ := st.Output.(map[string]any); out["order_id"] != "A1" || out["by"] != "sam" {
		t.Fatalf("output %v", st.Output)
	}
	// Each filter handled the three notifications (two of one event); one resume was enqueued
	// in all, and applied once.
	waitFor(t, "every notification handled", 60*time.Second, func() bool {
		return s.metric(filters[0], "plaita_filter_events_total") == 3 && s.metric(filters[1], "plaita_filter_events_total") == 3
	}, s.procs...)
	if n := s.sum(filters, "plaita_filter_wakeups_total"); n != 1 {
		t.Errorf("%d resumes enqueued, want 1\n%s", n, s.logs())
	}
	if n := resumes(st); n != 1 {
		t.Errorf("%d resumes applied, want 1", n)
	}
	if n := countLog(worker, "worker.resume_refused", ""); n != 0 {
		t.Errorf("the worker refused %d resumes: a duplicate reached it\n%s", n, worker.stderr.String())
	}
	if st := s.show(b2, ""); st.Status != state.Suspended {
		t.Errorf("B2 is %s: woken by A1's event", st.Status)
	}
	// The event list shows both events, newest first.
	r := run(t, s.env, "event", "list", "--type", "order.approved", "--json", "--quiet")
	var page struct {
		Events []struct {
			ID string `json:"id"`
		} `json:"events"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &page) != nil || len(page.Events) != 2 || page.Events[0].ID != "approval-A1" {
		t.Errorf("event list: exit %d\n%s", r.code, r.stdout)
	}
}

// With the filter stopped while the event is published, the reconciler of the next filter
// wakes the execution (its start-up pass reads the events since its cursor).
func TestE2EFilterReconcilerWakesWhatWasPublishedWhileItWasDown(t *testing.T) {
	s := newFilterStack(t, map[string]string{"PLAITA_EVENT_RECONCILE_INTERVAL": "300"})
	s.start("worker", nil)
	f := s.filter(nil)
	a1 := s.startFlow("approve", approvalFlow, "", `{"order_id":"A1"}`)
	s.waitStatus(a1, "", state.Suspended, 60*time.Second)
	s.stop(f)

	s.publishEvent("order.approved", `{"order_id":"A1","by":"while-down"}`)
	if st := s.show(a1, ""); st.Status != state.Suspended {
		t.Fatalf("woken without a filter: %s", st.Status)
	}
	g := s.filter(nil)
	st := s.waitStatus(a1, "", state.Completed, 60*time.Second)
	if out, _ := st.Output.(map[string]any); out["by"] != "while-down" || resumes(st) != 1 {
		t.Fatalf("output %v, %d resumes", st.Output, resumes(st))
	}
	if n := s.metric(g, "plaita_filter_reconcile_events_total"); n < 1 {
		t.Errorf("the reconciler scanned %d events: the wake-up did not come from it", n)
	}
}

// An event of tenant A never wakes tenant B's execution: the same flow, the same type and
// data, waiting in two tenants.
func TestE2EFilterKeepsTenantsApart(t *testing.T) {
	s := newFilterStack(t, nil)
	s.start("worker", nil)
	f := s.filter(nil)
	acme := s.startFlow("approve", approvalFlow, "acme", `{"order_id":"A1"}`)
	dflt := s.startFlow("approve", approvalFlow, "", `{"order_id":"A1"}`)
	s.waitStatus(acme, "acme", state.Suspended, 60*time.Second)
	s.waitStatus(dflt, "", state.Suspended, 60*time.Second)

	s.publishEvent("order.approved", `{"order_id":"A1","by":"globex"}`, "--tenant", "globex")
	s.publishEvent("order.approved", `{"order_id":"A1","by":"acme"}`, "--tenant", "acme")
	st := s.waitStatus(acme, "acme", state.Completed, 60*time.Second)
	if out, _ := st.Output.(map[string]any); out["by"] != "acme" || resumes(st) != 1 {
		t.Fatalf("acme's output %v, %d resumes", st.Output, resumes(st))
	}
	// Both events were handled; the default tenant's execution still waits.
	waitFor(t, "both events handled", 60*time.Second, func() bool { return s.metric(f, "plaita_filter_events_total") == 2 }, s.procs...)
	if st := s.show(dflt, ""); st.Status != state.Suspended {
		t.Fatalf("the default tenant's execution is %s after other tenants' events", st.Status)
	}
	s.publishEvent("order.approved", `{"order_id":"A1","by":"default"}`)
	st = s.waitStatus(dflt, "", state.Completed, 60*time.Second)
	if out, _ := st.Output.(map[string]any); out["by"] != "default" || resumes(st) != 1 {
		t.Fatalf("default's output %v, %d resumes", st.Output, resumes(st))
	}
	if n := s.metric(f, "plaita_filter_wakeups_total"); n != 2 {
		t.Errorf("%d wake-ups, want 2", n)
	}
}

// A disabled tenant is skipped and its event kept: once the tenant is active again, the
// reconciler wakes the execution.
func TestE2EFilterSkipsADisabledTenantUntilItIsActive(t *testing.T) {
	s := newFilterStack(t, nil)
	s.start("worker", nil)
	f := s.filter(nil)
	id := s.startFlow("approve", approvalFlow, "acme", `{"order_id":"A1"}`)
	s.waitStatus(id, "acme", state.Suspended, 60*time.Second)
	c := s.srv.Client(t)
	ctx := context.Background()
	status := keys.MustFor("", "").TenantStatus()
	if err := c.Do(ctx, c.B().Hset().Key(status).FieldValue().FieldValue("acme", "disabled").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s.publishEvent("order.approved", `{"order_id":"A1"}`, "--tenant", "acme")
	// Skipped by the notification and by passes of the reconciler.
	waitFor(t, "the disabled tenant skipped", 60*time.Second, func() bool { return s.metric(f, "plaita_filter_tenant_skipped_total") >= 1 }, s.procs...)
	passes := s.metric(f, "plaita_filter_reconcile_passes_total")
	waitFor(t, "two more reconcile passes", 60*time.Second, func() bool {
		return s.metric(f, "plaita_filter_reconcile_passes_total") >= passes+2
	}, s.procs...)
	if st := s.show(id, "acme"); st.Status != state.Suspended {
		t.Fatalf("a disabled tenant's execution is %s", st.Status)
	}
	if err := c.Do(ctx, c.B().Hset().Key(status).FieldValue().FieldValue("acme", "active").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	st := s.waitStatus(id, "acme", state.Completed, 60*time.Second)
	if resumes(st) != 1 {
		t.Fatalf("%d resumes", resumes(st))
	}
}

// kill -9 of a filter while it delivers a burst of events loses no wake-up: the filter started
// after it (its start-up reconcile pass, taking over the claims the dead one left pending)
// resumes every execution, each once.
func TestE2EFilterKill9MidFlightLosesNoWakeUp(t *testing.T) {
	s := newFilterStack(t, nil)
	s.start("worker", map[string]string{"PLAITA_WORKER_CONCURRENCY": "4"})
	a := s.filter(nil)
	const n = 16
	ids := make([]string, n)
	for i := range ids {
		ids[i] = s.startFlow("approve", approvalFlow, "", fmt.Sprintf(`{"order_id":"o%d"}`, i))
	}
	for _, id := range ids {
		s.waitStatus(id, "", state.Suspended, 60*time.Second)
	}
	// The burst, all at once.
	errs := make(chan string, n)
	for i := range n {
		go func() {
			r := run(t, s.env, "event", "publish", "order.approved", "--data", fmt.Sprintf(`{"order_id":"o%d"}`, i), "--quiet")
			if r.code != 0 {
				errs <- r.stderr
				return
			}
			errs <- ""
		}()
	}
	waitFor(t, "the filter under way", 60*time.Second, func() bool { return s.metric(a, "plaita_filter_wakeups_total") >= 1 }, s.procs...)
	s.kill9(a)
	for range n {
		if e := <-errs; e != "" {
			t.Fatalf("publish: %s", e)
		}
	}
	before := 0
	for _, id := range ids {
		if s.show(id, "").Status != state.Suspended {
			before++
		}
	}
	b := s.filter(nil)
	for _, id := range ids {
		st := s.waitStatus(id, "", state.Completed, 120*time.Second)
		if resumes(st) != 1 {
			t.Errorf("%s: %d resumes applied", id, resumes(st))
		}
	}
	t.Logf("%d of %d woken before the kill; the next filter enqueued %d (%d taken over from the dead one)",
		before, n, s.metric(b, "plaita_filter_wakeups_total"), s.metric(b, "plaita_filter_takeovers_total"))
}

// The state a filter killed between claiming a wake-up and enqueuing it leaves behind — a
// pending marker — is taken over once the grace period is over, and the execution wakes.
func TestE2EFilterTakesOverTheClaimOfADeadFilter(t *testing.T) {
	s := newFilterStack(t, nil)
	s.start("worker", nil)
	f := s.filter(nil)
	id := s.startFlow("approve", approvalFlow, "", `{"order_id":"A1"}`)
	st := s.waitStatus(id, "", state.Suspended, 60*time.Second)
	// The dead filter's claim, 31 s old (the grace period is 30 s).
	key, err := keys.MustFor("", "").EventWake(id, strconv.FormatInt(st.Suspend.Since.UnixNano(), 10), "evt-dead")
	if err != nil {
		t.Fatal(err)
	}
	c := s.srv.Client(t)
	claim := "pending " + strconv.FormatInt(time.Now().Add(-31*time.Second).UnixMilli(), 10) + " filter-killed"
	if err := c.Do(context.Background(), c.B().Set().Key(key).Value(claim).Ex(time.Hour).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s.publishEvent("order.approved", `{"order_id":"A1"}`, "--id", "evt-dead")
	done := s.waitStatus(id, "", state.Completed, 60*time.Second)
	if resumes(done) != 1 || s.metric(f, "plaita_filter_takeovers_total") != 1 {
		t.Fatalf("%d resumes, %d takeovers\n%s", resumes(done), s.metric(f, "plaita_filter_takeovers_total"), s.logs())
	}
	if v, _ := c.Do(context.Background(), c.B().Get().Key(key).Build()).ToString(); !strings.HasPrefix(v, "sent ") {
		t.Errorf("marker %q after the takeover", v)
	}
}

// A Redis restart: the filter subscribes again by itself (and reconciles what it may have
// missed) and goes on waking executions.
func TestE2EFilterSurvivesARedisRestart(t *testing.T) {
	// A run cut by the restart is redelivered after the claim idle time, its lease expired.
	s := newFilterStack(t, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "1000", "PLAITA_LEASE_TTL_SECONDS": "2"},
		"--appendonly", "yes", "--appendfsync", "always")
	s.start("worker", nil)
	f := s.filter(nil)
	id := s.startFlow("approve", approvalFlow, "", `{"order_id":"A1"}`)
	s.waitStatus(id, "", state.Suspended, 60*time.Second)
	passes := s.metric(f, "plaita_filter_reconcile_passes_total")
	s.srv.Kill()
	s.srv.Start()
	waitFor(t, "the filter subscribed again", 60*time.Second, func() bool { return countLog(f, "filter.subscribed", `"times":2`) == 1 }, s.procs...)
	waitFor(t, "a reconcile pass after the restart", 60*time.Second, func() bool {
		return s.metric(f, "plaita_filter_reconcile_passes_total") > passes
	}, s.procs...)
	s.publishEvent("order.approved", `{"order_id":"A1","by":"after-restart"}`)
	st := s.waitStatus(id, "", state.Completed, 60*time.Second)
	if out, _ := st.Output.(map[string]any); out["by"] != "after-restart" || resumes(st) != 1 {
		t.Fatalf("output %v, %d resumes", st.Output, resumes(st))
	}
	if code, body := s.get(f, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the restart: %d %s", code, body)
	}
}

// The testdata flow payment-wait completes on worker + filter: a declined payment of another
// order does not touch it, the paid one of its order does.
func TestE2EFilterRunsPaymentWait(t *testing.T) {
	s := newFilterStack(t, nil)
	s.start("worker", nil)
	s.filter(nil)
	out, r := startFile(t, s.env, repoFlow(t, "payment-wait.json"), "--input", `{"order_id":"ord-7","amount":12}`)
	if r.code != 0 {
		t.Fatalf("start: exit %d\n%s", r.code, r.stderr)
	}
	s.waitStatus(out.ExecutionID, "", state.Suspended, 60*time.Second)
	s.publishEvent("payment", `{"order_id":"ord-8","status":"declined"}`)
	s.publishEvent("payment", `{"order_id":"ord-7","status":"paid","payment_id":"pay-1"}`)
	st := s.waitStatus(out.ExecutionID, "", state.Completed, 60*time.Second)
	if o, _ := st.Output.(map[string]any); o["status"] != "paid" || o["payment_id"] != "pay-1" || o["order_id"] != "ord-7" {
		t.Fatalf("output %v", st.Output)
	}
}

// Bad input to `plaita event` is a named usage error, and nothing is stored.
func TestE2EEventCommandRefusesBadInput(t *testing.T) {
	srv := redistest.StartServer(t)
	env := cliEnv(t, srv)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"event", "publish"}, 2, "name one event type"},
		{[]string{"event", "publish", "a:b"}, 2, "invalid key name"},
		{[]string{"event", "publish", "ok", "--data", "{"}, 2, "not valid JSON"},
		{[]string{"event", "publish", "ok", "--data", "@/nonexistent"}, 2, "no such file"},
		{[]string{"event", "publish", "ok", "--id", "a b"}, 2, "invalid execution id"},
		{[]string{"event", "publish", "ok", "--tenant", "Bad"}, 2, "invalid tenant"},
		{[]string{"event", "list", "--type", "x{y}"}, 2, "invalid key name"},
		{[]string{"event", "list", "--limit", "0"}, 2, "--limit 0"},
	} {
		r := run(t, env, append(tc.args, "--quiet")...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	if r := run(t, env, "event", "nope"); r.code != 2 || !strings.Contains(r.stderr, `unknown subcommand "nope"`) {
		t.Errorf("event nope: exit %d %s", r.code, r.stderr)
	}
	// An id taken by another event: refused, the first kept.
	if r := run(t, env, "event", "publish", "t", "--id", "e1", "--data", `{"a":1}`, "--quiet"); r.code != 0 {
		t.Fatalf("publish: %d %s", r.code, r.stderr)
	}
	r := run(t, env, "event", "publish", "t", "--id", "e1", "--data", `{"a":2}`, "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, "already published with another type or data") {
		t.Fatalf("conflict: exit %d %s", r.code, r.stderr)
	}
	r = run(t, env, "event", "list", "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, `{"a":1}`) || !strings.Contains(r.stdout, "1 event(s) of all types in tenant default") {
		t.Fatalf("list: exit %d\n%s", r.code, r.stdout)
	}
}
