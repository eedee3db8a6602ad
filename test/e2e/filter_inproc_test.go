//go:build !e2e

package e2e

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/keys"
)

// Acceptance of the filter role in process: `plaita worker` and `plaita filter` on a
// private Redis, driven only through the CLI (`plaita start FLOW.json` publishes and starts,
// `plaita event publish`, `plaita execution show --json`). Filters serve /metrics on a free
// port: their counters are the positive signals the tests wait for.

// A wait_event with a match resumes on the matching event only, exactly once although the
// event is published twice and two filters run.
func TestE2EFilterWakesOnTheMatchingEventOnlyOnce(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, nil)
	worker := s.start("worker", nil)
	filters := []*proc{s.filter(nil), s.filter(nil)}
	a1 := s.startDef("approve", approvalFlow, "", `{"order_id":"A1"}`)
	b2 := s.startDef("approve", approvalFlow, "", `{"order_id":"B2"}`)
	s.waitStatus(a1, "", state.Suspended, 60*time.Second)
	s.waitStatus(b2, "", state.Suspended, 60*time.Second)

	// An event of another order: each filter handles it, and finds no wait of its value (the
	// waits are indexed by their order id) — nothing is checked, nothing refused. (The events
	// counter counts the reconciler's passes over the event too, a pass a second here.)
	s.publishEvent("order.approved", `{"order_id":"Z9"}`)
	waitFor(t, "both filters handle the other order's event", 60*time.Second, func() bool {
		return filters[0].metric("plaita_filter_events_total") >= 1 && filters[1].metric("plaita_filter_events_total") >= 1
	}, s.procs...)
	if n := sumMetric(filters, "plaita_filter_no_match_total"); n != 0 {
		t.Fatalf("the other order's event was checked against %d waits", n)
	}
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
	// Each filter handled the three notifications (two of one event) — the counter counts
	// the reconciler's handling too; one resume was enqueued in all, and applied once.
	waitFor(t, "every notification handled", 60*time.Second, func() bool {
		return filters[0].metric("plaita_filter_notifications_total") >= 3 && filters[1].metric("plaita_filter_notifications_total") >= 3 &&
			filters[0].metric("plaita_filter_events_total") >= 3 && filters[1].metric("plaita_filter_events_total") >= 3
	}, s.procs...)
	if n := sumMetric(filters, "plaita_filter_wakeups_total"); n != 1 {
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
	t.Parallel()
	s := newFilterStack(t, map[string]string{"PLAITA_EVENT_RECONCILE_INTERVAL": "300"})
	s.start("worker", nil)
	f := s.filter(nil)
	a1 := s.startDef("approve", approvalFlow, "", `{"order_id":"A1"}`)
	s.waitStatus(a1, "", state.Suspended, 60*time.Second)
	f.stop(t)

	s.publishEvent("order.approved", `{"order_id":"A1","by":"while-down"}`)
	if st := s.show(a1, ""); st.Status != state.Suspended {
		t.Fatalf("woken without a filter: %s", st.Status)
	}
	g := s.filter(nil)
	st := s.waitStatus(a1, "", state.Completed, 60*time.Second)
	if out, _ := st.Output.(map[string]any); out["by"] != "while-down" || resumes(st) != 1 {
		t.Fatalf("output %v, %d resumes", st.Output, resumes(st))
	}
	if n := g.metric("plaita_filter_reconcile_events_total"); n < 1 {
		t.Errorf("the reconciler scanned %d events: the wake-up did not come from it", n)
	}
}

// An event of tenant A never wakes tenant B's execution: the same flow, the same type and
// data, waiting in two tenants.
func TestE2EFilterKeepsTenantsApart(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, nil)
	s.start("worker", nil)
	f := s.filter(nil)
	acme := s.startDef("approve", approvalFlow, "acme", `{"order_id":"A1"}`)
	dflt := s.startDef("approve", approvalFlow, "", `{"order_id":"A1"}`)
	s.waitStatus(acme, "acme", state.Suspended, 60*time.Second)
	s.waitStatus(dflt, "", state.Suspended, 60*time.Second)

	s.publishEvent("order.approved", `{"order_id":"A1","by":"globex"}`, "--tenant", "globex")
	s.publishEvent("order.approved", `{"order_id":"A1","by":"acme"}`, "--tenant", "acme")
	st := s.waitStatus(acme, "acme", state.Completed, 60*time.Second)
	if out, _ := st.Output.(map[string]any); out["by"] != "acme" || resumes(st) != 1 {
		t.Fatalf("acme's output %v, %d resumes", st.Output, resumes(st))
	}
	// Both events were handled; the default tenant's execution still waits.
	waitFor(t, "both events handled", 60*time.Second, func() bool { return f.metric("plaita_filter_events_total") == 2 }, s.procs...)
	if st := s.show(dflt, ""); st.Status != state.Suspended {
		t.Fatalf("the default tenant's execution is %s after other tenants' events", st.Status)
	}
	s.publishEvent("order.approved", `{"order_id":"A1","by":"default"}`)
	st = s.waitStatus(dflt, "", state.Completed, 60*time.Second)
	if out, _ := st.Output.(map[string]any); out["by"] != "default" || resumes(st) != 1 {
		t.Fatalf("default's output %v, %d resumes", st.Output, resumes(st))
	}
	if n := f.metric("plaita_filter_wakeups_total"); n != 2 {
		t.Errorf("%d wake-ups, want 2", n)
	}
}

// A disabled tenant is skipped and its event kept: once the tenant is active again, the
// reconciler wakes the execution.
func TestE2EFilterSkipsADisabledTenantUntilItIsActive(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, nil)
	s.start("worker", nil)
	f := s.filter(nil)
	id := s.startDef("approve", approvalFlow, "acme", `{"order_id":"A1"}`)
	s.waitStatus(id, "acme", state.Suspended, 60*time.Second)
	c := s.srv.Client(t)
	ctx := context.Background()
	status := keys.MustFor("", "").TenantStatus()
	if err := c.Do(ctx, c.B().Hset().Key(status).FieldValue().FieldValue("acme", "disabled").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s.publishEvent("order.approved", `{"order_id":"A1"}`, "--tenant", "acme")
	// Skipped by the notification and by passes of the reconciler.
	waitFor(t, "the disabled tenant skipped", 60*time.Second, func() bool { return f.metric("plaita_filter_tenant_skipped_total") >= 1 }, s.procs...)
	passes := f.metric("plaita_filter_reconcile_passes_total")
	waitFor(t, "two more reconcile passes", 60*time.Second, func() bool {
		return f.metric("plaita_filter_reconcile_passes_total") >= passes+2
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

// The state a filter killed between claiming a wake-up and enqueuing it leaves behind — a
// pending marker — is taken over once the grace period is over, and the execution wakes.
func TestE2EFilterTakesOverTheClaimOfADeadFilter(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, nil)
	s.start("worker", nil)
	f := s.filter(nil)
	id := s.startDef("approve", approvalFlow, "", `{"order_id":"A1"}`)
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
	if resumes(done) != 1 || f.metric("plaita_filter_takeovers_total") != 1 {
		t.Fatalf("%d resumes, %d takeovers\n%s", resumes(done), f.metric("plaita_filter_takeovers_total"), s.logs())
	}
	if v, _ := c.Do(context.Background(), c.B().Get().Key(key).Build()).ToString(); !strings.HasPrefix(v, "sent ") {
		t.Errorf("marker %q after the takeover", v)
	}
}

// The testdata flow payment-wait completes on worker + filter: a declined payment of another
// order does not touch it, the paid one of its order does.
func TestE2EFilterRunsPaymentWait(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	env := newStack(t, withEnv(cliEnv())).env
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
		{[]string{"event", "list", "--limit", "0"}, 2, "limit 0: use 1 to"},
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
