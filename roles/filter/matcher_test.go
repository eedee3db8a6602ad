package filter

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
)

// An event wakes the execution whose match it satisfies, and only that one: one resume(event)
// carrying the event's data, the execution's flow and tenant, and the event as the carrier.
func TestMatcherWakesOnlyTheMatchingExecution(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	a1 := b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
	b.suspend("", f, "ex_b2", map[string]any{"order_id": "B2"})
	m := NewMatcher(b.d, b.s)

	// The match correlates on order_id: an event of another order finds no wait to check,
	// and A1's event only A1's.
	other := b.publish("", "evt_other", "order.approved", `{"order_id":"Z9"}`)
	res, err := m.Handle(b.ctx(), ref(other))
	b.must(err)
	if res != (Result{}) {
		t.Fatalf("an event matching nobody: %+v", res)
	}
	ev := b.publish("", "evt_a1", "order.approved", `{"order_id":"A1","by":"sam"}`)
	res, err = m.Handle(b.ctx(), ref(ev))
	b.must(err)
	if res.Woken != 1 || res.NoMatch != 0 {
		t.Fatalf("result %+v", res)
	}
	if n := b.counter("plaita_filter_uncorrelated_checked_total"); n != 0 {
		t.Errorf("%d uncorrelated checks", n)
	}
	got := b.entries()
	if len(got) != 1 {
		t.Fatalf("%d entries, want 1", len(got))
	}
	e := got[0]
	if e.Kind != queue.KindResume || e.ResumeType != state.ResumeEvent || e.ExecutionID != "ex_a1" || e.FlowID != "orders" ||
		e.FlowVersion != "1" || e.Tenant() != "default" || e.SourceMessageID != engine.EventCarrier("evt_a1", a1.Suspend.Since) || string(e.ResumeData) != `{"order_id":"A1","by":"sam"}` {
		t.Errorf("envelope %+v (resume data %s)", e, e.ResumeData)
	}
	// The resume is accepted by the engine as the worker runs it.
	if st := b.resume("", f, "ex_a1", map[string]any{"order_id": "A1", "by": "sam"}); st.Status != state.Completed || st.Output != "A1" {
		t.Errorf("resumed: %s %v", st.Status, st.Output)
	}
}

// Exactly once: the same event handled again and again, by two filters at once, enqueues one
// resume.
func TestMatcherDeliversOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
	ev := b.publish("", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	s2 := b.s
	s2.InstanceID = "filter-other"
	matchers := []*Matcher{NewMatcher(b.d, b.s), NewMatcher(b.d, s2)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := Result{}
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := matchers[i%2].Handle(context.Background(), ref(ev))
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total.add(res)
			mu.Unlock()
		}()
	}
	wg.Wait()
	// The others found the wake-up claimed or sent, or the used subscription gone.
	if n := len(b.entries()); n != 1 || total.Woken != 1 {
		t.Fatalf("%d entries, result %+v; want 1 entry, 1 woken", n, total)
	}
	ts, _ := b.d.Store.Tenant("")
	if reads, _ := ts.Subscriptions(b.ctx(), "order.approved", time.Now()); len(reads.Reads) != 0 {
		t.Errorf("the used subscription is still there: %+v", reads)
	}
	// The subscription registered again (a redelivered suspension registers it again) while the
	// resume waits in the stream: the marker makes the event a duplicate.
	st, err := ts.Load(b.ctx(), "ex_a1")
	b.must(err)
	b.register(ts, st)
	res, err := matchers[1].Handle(b.ctx(), ref(ev))
	if err != nil || res.Duplicates != 1 || res.Woken != 0 || len(b.entries()) != 1 {
		t.Fatalf("the event again with the subscription back: %+v %v, %d entries", res, err, len(b.entries()))
	}
}

// Tenant A's event never wakes tenant B's execution, whatever the type and match.
func TestMatcherKeepsTenantsApart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("acme", ordersFlow)
	b.suspend("acme", f, "ex_a1", map[string]any{"order_id": "A1"})
	m := NewMatcher(b.d, b.s)
	for _, tenant := range []string{"", "globex"} {
		ev := b.publish(tenant, "evt_a1", "order.approved", `{"order_id":"A1"}`)
		res, err := m.Handle(b.ctx(), ref(ev))
		b.must(err)
		if res != (Result{}) {
			t.Errorf("event of tenant %q: %+v", tenant, res)
		}
	}
	if n := len(b.entries()); n != 0 {
		t.Fatalf("%d entries from other tenants' events", n)
	}
	ev := b.publish("acme", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	res, err := m.Handle(b.ctx(), ref(ev))
	if err != nil || res.Woken != 1 {
		t.Fatalf("acme's own event: %+v %v", res, err)
	}
	if got := b.entries(); len(got) != 1 || got[0].TenantID != "acme" {
		t.Fatalf("entries %+v", got)
	}
}

// A tenant the worker would refuse gets no resume; its event stays and is delivered once the
// tenant is active again.
func TestMatcherSkipsRefusedTenants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("acme", ordersFlow)
	b.suspend("acme", f, "ex_a1", map[string]any{"order_id": "A1"})
	ev := b.publish("acme", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	m := NewMatcher(b.d, b.s)
	for _, status := range []string{"disabled", " Disabled ", "suspended"} {
		b.setTenantStatus("acme", status)
		res, err := m.Handle(b.ctx(), ref(ev))
		if err != nil || !res.TenantSkipped || res.Woken != 0 {
			t.Fatalf("status %q: %+v %v", status, res, err)
		}
	}
	b.setTenantStatus("acme", "active")
	if res, err := m.Handle(b.ctx(), ref(ev)); err != nil || res.Woken != 1 {
		t.Fatalf("re-enabled: %+v %v", res, err)
	}
	// The default tenant with an unknown status is admitted (the worker's fail-open).
	b.setTenantStatus("default", "weird")
	if ok, _, err := b.d.Store.TenantAdmits(b.ctx(), ""); !ok || err != nil {
		t.Errorf("default tenant with an unknown status: %v %v", ok, err)
	}
}

// Subscriptions are hints: one whose execution no longer waits for the type (gone, finished,
// waiting elsewhere) is removed; one whose execution waits again at a later suspension is
// delivered to that suspension, by the state.
func TestMatcherFollowsTheStateNotTheRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	loop := b.flow("", loopFlow)
	m := NewMatcher(b.d, b.s)
	ts, _ := b.d.Store.Tenant("")

	// Gone: a subscription without an execution.
	b.must(ts.PutSubscription(b.ctx(), store.Subscription{ExecutionID: "ex_ghost", FlowID: "orders", FlowVersion: "1", Node: "wait",
		EventType: "order.approved", Since: time.Now().Add(-time.Minute)}, time.Hour))
	// Finished: resumed by an earlier event, its record left behind as the worker leaves it.
	b.suspend("", f, "ex_done", map[string]any{"order_id": "A1"})
	if st := b.resume("", f, "ex_done", map[string]any{"order_id": "A1"}); st.Status != state.Completed {
		t.Fatal(st.Status)
	}
	ev := b.publish("", "evt_2", "order.approved", `{"order_id":"A1"}`)
	res, err := m.Handle(b.ctx(), ref(ev))
	b.must(err)
	if res.Stale != 2 || res.Woken != 0 {
		t.Fatalf("result %+v, want 2 stale", res)
	}
	if reads, _ := ts.Subscriptions(b.ctx(), "order.approved", time.Now()); len(reads.Reads) != 0 {
		t.Fatalf("stale subscriptions left: %+v", reads)
	}

	// A loop waiting twice for "tick": the first tick wakes w1; the same tick again does not
	// wake w2 (it was published before w2 began); a new tick does.
	b.suspend("", loop, "ex_loop", nil)
	t1 := b.publish("", "tick1", "tick", `{}`)
	if res, err := m.Handle(b.ctx(), ref(t1)); err != nil || res.Woken != 1 {
		t.Fatalf("first tick: %+v %v", res, err)
	}
	time.Sleep(2 * time.Millisecond) // the second wait begins strictly after the first tick
	if st := b.resume("", loop, "ex_loop", map[string]any{}); st.Status != state.Suspended || st.Suspend.Node != "w2" {
		t.Fatalf("after the first tick: %s %+v", st.Status, st.Suspend)
	}
	if res, err := m.Handle(b.ctx(), ref(t1)); err != nil || res.Woken != 0 {
		t.Fatalf("the first tick again, at w2: %+v %v", res, err)
	}
	t2 := b.publish("", "tick2", "tick", `{}`)
	if res, err := m.Handle(b.ctx(), ref(t2)); err != nil || res.Woken != 1 {
		t.Fatalf("second tick: %+v %v", res, err)
	}
	got := b.entries()
	if len(got) != 2 || !strings.HasPrefix(got[0].SourceMessageID, "event:tick1:") || !strings.HasPrefix(got[1].SourceMessageID, "event:tick2:") {
		t.Fatalf("entries %+v", got)
	}
}

// A wait that timed out is the delay role's; an event published before the wait began does
// not wake it; a match that cannot be evaluated on the event refuses it.
func TestMatcherRefusesLateEarlyAndUnevaluable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	early := b.publish("", "evt_early", "pay", `{"amount":5}`)
	time.Sleep(2 * time.Millisecond)
	f := b.flow("", `{"id":"pay","start":"w","nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"pay","match":"EVENT.amount > 10","timeout":60},"next":"e"},
		{"id":"e","type":"end"}]}`)
	st := b.suspend("", f, "ex_p", nil)
	m := NewMatcher(b.d, b.s)
	if res, err := m.Handle(b.ctx(), ref(early)); err != nil || res != (Result{}) {
		t.Fatalf("an event from before the wait: %+v %v", res, err)
	}
	bad := b.publish("", "evt_bad", "pay", `{"amount":"lots"}`)
	if res, err := m.Handle(b.ctx(), ref(bad)); err != nil || res.NoMatch != 1 {
		t.Fatalf("a match that errors: %+v %v", res, err)
	}
	small := b.publish("", "evt_small", "pay", `{"amount":3}`)
	if res, err := m.Handle(b.ctx(), ref(small)); err != nil || res.NoMatch != 1 {
		t.Fatalf("a false match: %+v %v", res, err)
	}
	late := b.publish("", "evt_late", "pay", `{"amount":50}`)
	b.clock.Store(st.Suspend.Due.Add(time.Second).UnixNano())
	if res, err := m.Handle(b.ctx(), ref(late)); err != nil || res.Woken != 0 {
		t.Fatalf("after the timeout: %+v %v", res, err)
	}
	b.clock.Store(0)
	if res, err := m.Handle(b.ctx(), ref(late)); err != nil || res.Woken != 1 {
		t.Fatalf("a matching event in time: %+v %v", res, err)
	}
	if n := len(b.entries()); n != 1 {
		t.Fatalf("%d entries", n)
	}
}

// A filter that died between claiming a wake-up and marking it sent leaves the marker pending:
// another filter takes it over after the grace period (not before) and enqueues.
func TestMatcherTakesOverAPendingWakeUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	st := b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
	ev := b.publish("", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	// What the dead filter left: its claim, now.
	dead := b.d.Events
	w, err := dead.ClaimWake(b.ctx(), "", "ex_a1", strconv.FormatInt(st.Suspend.Since.UnixNano(), 10), "evt_a1", "filter-dead", DefaultGrace)
	if err != nil || w.State != store.WakeClaimed {
		t.Fatalf("seed the claim: %+v %v", w, err)
	}
	m := NewMatcher(b.d, b.s)
	res, err := m.Handle(b.ctx(), ref(ev))
	if err != nil || res.Woken != 0 || res.Duplicates != 1 || !res.Hold {
		t.Fatalf("within the grace period: %+v %v", res, err)
	}
	b.clock.Store(time.Now().Add(DefaultGrace + time.Second).UnixNano())
	res, err = m.Handle(b.ctx(), ref(ev))
	if err != nil || res.Woken != 1 {
		t.Fatalf("past the grace period: %+v %v", res, err)
	}
	if n := b.counter("plaita_filter_takeovers_total"); n != 1 {
		t.Errorf("takeovers counter %d", n)
	}
	if res, err := m.Handle(b.ctx(), ref(ev)); err != nil || res.Woken != 0 || res.Hold {
		t.Fatalf("once sent: %+v %v", res, err)
	}
	if n := len(b.entries()); n != 1 {
		t.Fatalf("%d entries", n)
	}
}

// A failed enqueue releases the claim: the next delivery enqueues at once.
func TestMatcherReleasesTheClaimWhenTheEnqueueFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
	ev := b.publish("", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	fail := true
	d := b.d
	d.Enqueue = func(ctx context.Context, env queue.Envelope) (string, error) {
		if fail {
			return "", fmt.Errorf("enqueue: injected")
		}
		return b.d.Enqueue(ctx, env)
	}
	m := NewMatcher(d, b.s)
	if res, err := m.Handle(b.ctx(), ref(ev)); err == nil || !res.Hold {
		t.Fatalf("a failing enqueue: %+v %v", res, err)
	}
	fail = false
	if res, err := m.Handle(b.ctx(), ref(ev)); err != nil || res.Woken != 1 {
		t.Fatalf("after the failure: %+v %v", res, err)
	}
}

// A flow with node types the filter does not run (http, code) still has its match checked.
func TestMatcherChecksFlowsWithIONodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	def := `{"id":"io","start":"w","nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"go","match":"EVENT.ok == true"},"next":"call"},
		{"id":"call","type":"http","params":{"url":"https://example.invalid/"},"next":"e"},
		{"id":"e","type":"end"}]}`
	// The worker's registry knows http; the test runs the wait with the control nodes only, as
	// the suspended state is all the filter reads.
	reg := engine.NewRegistry()
	reg.SetFallback(func(string) (engine.NodeType, bool) { return opaqueType{}, true })
	f, err := engine.Parse([]byte(def), reg, engine.DefaultExprLimits)
	b.must(err)
	_, err = b.d.Flows.Publish(b.ctx(), "", "io", "1", []byte(def), time.Now(), func([]byte) (bool, error) { return true, nil })
	b.must(err)
	b.suspend("", f, "ex_io", nil)
	m := NewMatcher(b.d, b.s)
	no := b.publish("", "e1", "go", `{"ok":false}`) // its value is not the wait's: not even checked
	if res, err := m.Handle(b.ctx(), ref(no)); err != nil || res != (Result{}) {
		t.Fatalf("false: %+v %v", res, err)
	}
	yes := b.publish("", "e2", "go", `{"ok":true}`)
	if res, err := m.Handle(b.ctx(), ref(yes)); err != nil || res.Woken != 1 {
		t.Fatalf("true: %+v %v", res, err)
	}
}

// An expired event, an unreadable record: nothing delivered, no error.
func TestMatcherIgnoresMissingAndBadEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := NewMatcher(b.d, b.s)
	if res, err := m.Handle(b.ctx(), store.EventRef{TenantID: "default", Type: "t", ID: "nope"}); err != nil || res != (Result{}) {
		t.Errorf("missing: %+v %v", res, err)
	}
	sp := keysFor(t, b.root, "")
	k, _ := sp.Event("bad")
	b.must(b.c.Do(b.ctx(), b.c.B().Set().Key(k).Value("not json").Build()).Error())
	if res, err := m.Handle(b.ctx(), store.EventRef{TenantID: "default", Type: "t", ID: "bad"}); err != nil || res != (Result{}) {
		t.Errorf("bad record: %+v %v", res, err)
	}
}

// A resume the queue refuses — the event's data over the producer's input bound — enqueues
// nothing and is refused once: handled again it is found refused (no retry, no hold), the
// wait goes on, and a later event within the bound wakes it.
func TestMatcherRefusedWakeUpIsFinal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.d.Enqueue = queue.NewProducer(queue.Redis(b.c), b.stream, queue.Generations{}, 64, nil).Enqueue
	f := b.flow("", ordersFlow)
	b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
	m := NewMatcher(b.d, b.s)
	big := b.publish("", "evt_big", "order.approved", `{"order_id":"A1","pad":"`+strings.Repeat("x", 100)+`"}`)
	for range 2 {
		res, err := m.Handle(b.ctx(), ref(big))
		if err != nil || res.Refused != 1 || res.Woken != 0 || res.Hold {
			t.Fatalf("an event over the bound: %+v %v", res, err)
		}
	}
	if n := b.counter(`plaita_filter_wakeups_refused_total`); n != 1 {
		t.Errorf("%d refusals counted, want 1", n)
	}
	if got := b.entries(); len(got) != 0 {
		t.Fatalf("%d entries enqueued over the bound", len(got))
	}
	// In one batch, the event after a refused one is still offered to the wait.
	small := b.publish("", "evt_small", "order.approved", `{"order_id":"A1"}`)
	res, errs := m.handleBatch(b.ctx(), "default", []store.EventRef{ref(big), ref(small)})
	if errs[0] != nil || errs[1] != nil || res[0].Refused != 1 || res[1].Woken != 1 {
		t.Fatalf("batch of the refused and a small event: %+v %v", res, errs)
	}
	if got := b.entries(); len(got) != 1 || !strings.HasPrefix(got[0].SourceMessageID, "event:evt_small:") {
		t.Errorf("entries %+v, want the small event's resume", got)
	}
}
