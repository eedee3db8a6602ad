//go:build !e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
)

// Every producer holds a fresh task to the input bound (PLAITA_EXECUTION_STATE_MAX_BYTES) as
// the CLI's start does: a filter resume whose event data is over the bound, and a schedule fire
// whose input is over it, enqueue nothing, log a line naming the bound and are not retried.
// Real `plaita worker`, `plaita filter` and `plaita schedule` processes on a private
// redis-server; the roles' /metrics counters are the positive signals the tests wait for.

// policyBound is the small input bound of the roles under test; the CLI keeps the default.
var policyBound = map[string]string{"PLAITA_EXECUTION_STATE_MAX_BYTES": "4096"}

// cliJSON runs a CLI command with --json --quiet and decodes its output into out.
func (s *stack) cliJSON(out any, args ...string) {
	s.t.Helper()
	stdout := s.cli(append(args, "--json")...)
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		s.t.Fatalf("plaita %s --json: %v\n%s", strings.Join(args, " "), err, stdout)
	}
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
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()), withEnv(map[string]string{"PLAITA_EVENT_RECONCILE_INTERVAL": "1"}))
	s.start("worker", policyBound)
	filter := s.start("filter", policyBound)
	waitFor(t, "the filter is ready (subscribed)", 60*time.Second, func() bool {
		code, _ := filter.get("/readyz")
		return code == 200
	}, s.procs...)
	const flow = `{"id":"bounded","start":"wait","nodes":[
	{"id":"wait","type":"wait_event","params":{"event_type":"order.approved","match":"EVENT.order_id == INPUT.order_id"},"next":"done"},
	{"id":"done","type":"end","params":{"output":{"order_id":"{{ EVENT.order_id }}"}}}]}`
	id := s.startDef("bounded.json", flow, "", `{"order_id":"A1"}`)
	s.waitStatus(id, "", state.Suspended, 60*time.Second)

	s.publishEvent("order.approved", padded("A1", 8<<10))
	refused := func() int { return filter.metric("plaita_filter_wakeups_refused_total") }
	woken := func() int { return filter.metric("plaita_filter_wakeups_total") }
	waitFor(t, "the filter decides about the big event", 60*time.Second, func() bool { return refused() > 0 || woken() > 0 }, s.procs...)
	if n, w := refused(), woken(); n != 1 || w != 0 {
		t.Fatalf("%d wake-ups refused and %d enqueued, want 1 refused and none enqueued\n%s", n, w, s.logs())
	}
	if n := countLog(filter, "filter.wakeup_refused", "PLAITA_EXECUTION_STATE_MAX_BYTES"); n != 1 {
		t.Errorf("%d refusal log lines naming the bound, want 1\n%s", n, filter.stderr.String())
	}
	// Reconcile passes keep re-reading the event (it is within their overlap): the refusal is
	// final for (execution, event), so it is neither claimed again nor retried.
	passes := filter.metric("plaita_filter_reconcile_passes_total")
	waitFor(t, "three more reconcile passes", 60*time.Second, func() bool {
		return filter.metric("plaita_filter_reconcile_passes_total") >= passes+3
	}, s.procs...)
	if n, w, e := refused(), woken(), filter.metric("plaita_filter_errors_total"); n != 1 || w != 0 || e != 0 {
		t.Errorf("after more passes: %d refused, %d enqueued, %d errors; want 1, 0, 0\n%s", n, w, e, filter.stderr.String())
	}
	if st := s.show(id, ""); st.Status != state.Suspended {
		t.Fatalf("the execution is %s after the refused event, want suspended (error %+v)", st.Status, st.Error)
	}

	// A matching event within the bound still wakes it.
	s.publishEvent("order.approved", padded("A1", 16))
	s.waitStatus(id, "", state.Completed, 60*time.Second)
	if n := refused(); n != 1 {
		t.Errorf("%d wake-ups refused in all, want 1", n)
	}
}

// A schedule whose input is over the schedule role's input bound enqueues no start: each tick
// is recorded as skipped with the bound in its reason, logged and counted, and none is fired.
func TestE2EScheduleFireOverTheInputBoundIsSkipped(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()), withEnv(map[string]string{"PLAITA_CHECK_INTERVAL": "0.2"}))
	s.start("worker", policyBound)
	first := s.startFlow(repoFlow(t, "hello.json"), "acme", "{}") // publishes the flow (and starts it once)
	var rec store.ScheduleRecord
	// The CLI has the default bound: the schedule is accepted; the schedule role's is smaller.
	s.cliJSON(&rec, "schedule", "add", "big", "--tenant", "acme", "--cron", "* * * * * *", "--flow", "hello",
		"--input", padded("A1", 8<<10))
	sched := s.start("schedule", policyBound)
	skipped := func() int { return sched.metric(`plaita_schedule_skipped_total{reason="start_refused"}`) }
	fired := func() int { return sched.metric("plaita_schedule_fired_total") }
	waitFor(t, "two ticks decided", 60*time.Second, func() bool { return skipped()+fired() >= 2 }, s.procs...)
	if n := fired(); n != 0 {
		t.Fatalf("%d starts fired over the bound\n%s", n, s.logs())
	}
	s.cliJSON(&rec, "schedule", "show", "big", "--tenant", "acme")
	if rec.LastFire != nil || rec.LastSkip == nil || !strings.Contains(rec.LastSkip.Reason, "PLAITA_EXECUTION_STATE_MAX_BYTES") {
		t.Fatalf("schedule record: last fire %+v, last skip %+v; want no fire and a skip naming the bound", rec.LastFire, rec.LastSkip)
	}
	if n := countLog(sched, "schedule.start_refused", "PLAITA_EXECUTION_STATE_MAX_BYTES"); n < 2 {
		t.Errorf("%d refusal log lines naming the bound, want one per tick\n%s", n, sched.stderr.String())
	}
	var list struct {
		Items []struct {
			ID string `json:"execution_id"`
		} `json:"items"`
	}
	s.cliJSON(&list, "execution", "list", "--tenant", "acme")
	for _, e := range list.Items {
		if e.ID != first {
			t.Errorf("execution %s exists beside the CLI's own start: a tick was fired", e.ID)
		}
	}
}
