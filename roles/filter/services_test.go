package filter

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The reconciler delivers events nobody was notified of, moves the tenant's cursor, and a
// second pass over the same events enqueues nothing more.
func TestReconcilerDeliversWhatNotificationsMissed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
	b.suspend("", f, "ex_b2", map[string]any{"order_id": "B2"})
	b.publish("", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	b.publish("", "evt_x", "order.approved", `{"order_id":"X"}`)
	r := NewReconciler(b.d, b.s, NewMatcher(b.d, b.s))
	b.reconcile(r)
	if got := b.entries(); len(got) != 1 || got[0].ExecutionID != "ex_a1" {
		t.Fatalf("after the first pass: %+v", got)
	}
	cur, found, err := b.d.Events.Cursor(b.ctx(), "default")
	if err != nil || !found || time.Since(cur) > time.Minute {
		t.Fatalf("cursor %s %v %v", cur, found, err)
	}
	b.publish("", "evt_b2", "order.approved", `{"order_id":"B2"}`)
	b.reconcile(r)
	b.reconcile(r)
	got := b.entries()
	if len(got) != 2 || got[1].ExecutionID != "ex_b2" {
		t.Fatalf("after three passes: %+v", got)
	}
	if n := b.counter("plaita_filter_reconcile_passes_total"); n != 3 {
		t.Errorf("passes %d", n)
	}
}

// The start-up pass looks back PLAITA_EVENT_RECONCILE_BACKFILL: 0 is an empty window, and an
// event older than the window is not delivered.
func TestReconcilerStartUpWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		backfill time.Duration
		age      time.Duration
		want     int
	}{
		{"inside the window", time.Hour, 10 * time.Minute, 1},
		{"older than the window", time.Hour, 2 * time.Hour, 0},
		{"backfill 0", 0, time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			f := b.flow("", ordersFlow)
			// The wait began before the event; the filter's clock is age after the publish.
			start := time.Now().Add(-3 * time.Hour)
			b.clock.Store(start.UnixNano())
			b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
			pub := time.Now().Add(-tc.age)
			b.clock.Store(pub.UnixNano())
			b.publish("", "evt_a1", "order.approved", `{"order_id":"A1"}`)
			b.clock.Store(0)
			s := b.s
			s.ReconcileBackfill = tc.backfill
			r := NewReconciler(b.d, s, NewMatcher(b.d, s))
			b.reconcile(r)
			if n := len(b.entries()); n != tc.want {
				t.Fatalf("%d entries, want %d", n, tc.want)
			}
			// Whatever the start-up window, the cursor is set: later passes follow it.
			if _, found, _ := b.d.Events.Cursor(b.ctx(), "default"); !found {
				t.Fatal("no cursor after the start-up pass")
			}
		})
	}
}

// After a restart the start-up pass starts at the cursor (minus the overlap) when the cursor
// is inside the backfill window: what was published while no filter ran is delivered.
func TestReconcilerResumesFromItsCursorAfterARestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
	first := NewReconciler(b.d, b.s, NewMatcher(b.d, b.s))
	b.reconcile(first)
	// Down; an event published meanwhile reaches no listener.
	b.publish("", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	again := NewReconciler(b.d, b.s, NewMatcher(b.d, b.s))
	b.reconcile(again)
	if n := len(b.entries()); n != 1 {
		t.Fatalf("%d entries after the restart, want 1", n)
	}
}

// A refused tenant's cursor stays where it was; once the tenant is active, the next pass
// delivers its events.
func TestReconcilerHoldsARefusedTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("acme", ordersFlow)
	b.suspend("acme", f, "ex_a1", map[string]any{"order_id": "A1"})
	b.publish("acme", "evt_warm", "other", `{}`)
	r := NewReconciler(b.d, b.s, NewMatcher(b.d, b.s))
	b.reconcile(r) // sets acme's cursor
	before, found, _ := b.d.Events.Cursor(b.ctx(), "acme")
	if !found {
		t.Fatal("no cursor")
	}
	b.setTenantStatus("acme", "disabled")
	b.publish("acme", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	// Later than the overlap: only a cursor that stayed finds the event.
	b.clock.Store(time.Now().Add(10 * time.Minute).UnixNano())
	b.reconcile(r)
	if n := len(b.entries()); n != 0 {
		t.Fatalf("%d entries for a disabled tenant", n)
	}
	if cur, _, _ := b.d.Events.Cursor(b.ctx(), "acme"); !cur.Equal(before) {
		t.Fatalf("the disabled tenant's cursor moved from %s to %s", before, cur)
	}
	b.setTenantStatus("acme", "active")
	b.clock.Store(time.Now().Add(20 * time.Minute).UnixNano())
	b.reconcile(r)
	if n := len(b.entries()); n != 1 {
		t.Fatalf("%d entries once active, want 1", n)
	}
}

// A wake-up pending in another filter keeps the cursor so that a later pass sees the event
// again, and that pass takes the claim over once the grace period is over.
func TestReconcilerComesBackToAPendingWakeUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	st := b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
	b.publish("", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	_, err := b.d.Events.ClaimWake(b.ctx(), "", "ex_a1", fmt.Sprint(st.Suspend.Since.UnixNano()), "evt_a1", "filter-dead", DefaultGrace)
	b.must(err)
	r := NewReconciler(b.d, b.s, NewMatcher(b.d, b.s))
	b.reconcile(r)
	if n := len(b.entries()); n != 0 {
		t.Fatalf("%d entries within the grace period", n)
	}
	// Far later than the overlap: the held cursor still covers the event.
	b.clock.Store(time.Now().Add(time.Hour).UnixNano())
	b.reconcile(r)
	if n := len(b.entries()); n != 1 {
		t.Fatalf("%d entries after the grace period, want 1", n)
	}
}

// Feed pages: more events than one page, many sharing a millisecond; the one event that
// wakes something is the last.
func TestReconcilerPagesThroughTheFeed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	at := time.Now().Add(-time.Minute)
	b.clock.Store(at.UnixNano())
	b.suspend("", f, "ex_last", map[string]any{"order_id": "last"})
	const n = reconcilePage + 37
	for i := range n {
		b.clock.Store(at.Add(time.Duration(i/50) * time.Millisecond).Add(time.Second).UnixNano()) // 50 events per ms
		typ, data := "noise", `{}`
		if i == n-1 {
			typ, data = "order.approved", `{"order_id":"last"}`
		}
		b.publish("", fmt.Sprintf("evt_%04d", i), typ, data)
	}
	b.clock.Store(0)
	r := NewReconciler(b.d, b.s, NewMatcher(b.d, b.s))
	b.reconcile(r)
	if got := b.entries(); len(got) != 1 || got[0].ExecutionID != "ex_last" {
		t.Fatalf("entries %+v", got)
	}
	if c := b.counter("plaita_filter_reconcile_events_total"); c != n {
		t.Errorf("scanned %d events, want %d", c, n)
	}
}

// The janitor checks at most the budget per tick, across tenants, and removes what expired.
func TestJanitorSweepsWithinItsBudget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tenant := range []string{"acme", "globex"} {
		sp := keysFor(t, b.root, tenant)
		for i := range 6 {
			ev := b.publish(tenant, fmt.Sprintf("e%d", i), "t", `{}`)
			if i%2 == 0 {
				k, _ := sp.Event(ev.ID)
				b.must(b.c.Do(b.ctx(), b.c.B().Del().Key(k).Build()).Error())
			}
		}
	}
	s := b.s
	s.SweepBudget = 4
	j := NewJanitor(b.d, s)
	removed := 0
	for tick := range 3 {
		st, err := j.RunOnce(b.ctx())
		b.must(err)
		if st.Checked > 4 {
			t.Fatalf("tick %d checked %d with a budget of 4", tick, st.Checked)
		}
		removed += st.Removed
	}
	if removed != 6 {
		t.Fatalf("removed %d over 3 ticks, want 6", removed)
	}
	for _, tenant := range []string{"acme", "globex"} {
		page, err := b.d.Events.List(b.ctx(), tenant, "t", 10)
		if err != nil || len(page.Events) != 3 || page.Expired != 0 {
			t.Errorf("%s after the sweep: %+v %v", tenant, page, err)
		}
	}
}

// The listener delivers a published event through its pool, and its Stop is safe twice.
func TestListenerDeliversNotifications(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
	l := NewListener(b.d, b.s, NewMatcher(b.d, b.s))
	subscribed := make(chan bool, 4)
	l.OnSubscribed = func(first bool) { subscribed <- first }
	b.must(l.Start(b.ctx()))
	defer l.Stop(context.Background())
	select {
	case first := <-subscribed:
		if !first {
			t.Fatal("the first subscription is not marked first")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never subscribed")
	}
	b.publish("", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	if got := b.waitEntries(1, 10*time.Second); len(got) != 1 || got[0].ExecutionID != "ex_a1" {
		t.Fatalf("entries %+v", got)
	}
	// A malformed notification is counted and ignored.
	b.must(b.c.Do(b.ctx(), b.c.B().Publish().Channel(keysFor(t, b.root, "").EventBusNotify()).Message("garbage").Build()).Error())
	deadline := time.Now().Add(10 * time.Second)
	for b.counter("plaita_filter_notifications_malformed_total") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the malformed notification was not counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.Stop(context.Background())
	l.Stop(context.Background())
	if err := l.Start(b.ctx()); err == nil {
		t.Error("Start after Stop succeeded")
	}
}

// A refused tenant seen for the first time gets a cursor where its pass would have started,
// so its events are still found once it is active.
func TestReconcilerHoldsARefusedTenantWithoutCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("acme", ordersFlow)
	b.suspend("acme", f, "ex_a1", map[string]any{"order_id": "A1"})
	r := NewReconciler(b.d, b.s, NewMatcher(b.d, b.s))
	b.reconcile(r) // no tenant with events yet
	b.setTenantStatus("acme", "disabled")
	b.publish("acme", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	b.clock.Store(time.Now().Add(10 * time.Minute).UnixNano())
	b.reconcile(r)
	if _, found, _ := b.d.Events.Cursor(b.ctx(), "acme"); !found {
		t.Fatal("the refused tenant got no cursor")
	}
	b.setTenantStatus("acme", "active")
	b.clock.Store(time.Now().Add(20 * time.Minute).UnixNano())
	b.reconcile(r)
	if n := len(b.entries()); n != 1 {
		t.Fatalf("%d entries once active, want 1", n)
	}
}

// The services outlive the context they were started with (the role's bounded start-up
// context): once it is done, the listener still delivers and the reconciler still passes.
func TestServicesOutliveTheirStartContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
	m := NewMatcher(b.d, b.s)
	l := NewListener(b.d, b.s, m)
	r := NewReconciler(b.d, b.s, m)
	subscribed := make(chan bool, 4)
	l.OnSubscribed = func(first bool) { subscribed <- first }
	startCtx, cancel := context.WithCancel(context.Background())
	b.must(l.Start(startCtx))
	b.must(r.Start(startCtx))
	defer l.Stop(context.Background())
	defer r.Stop(context.Background())
	select {
	case <-subscribed:
	case <-time.After(10 * time.Second):
		t.Fatal("never subscribed")
	}
	cancel()
	passes := b.counter("plaita_filter_reconcile_passes_total")
	r.Trigger()
	deadline := time.Now().Add(10 * time.Second)
	for b.counter("plaita_filter_reconcile_passes_total") <= passes {
		if time.Now().After(deadline) {
			t.Fatal("no reconcile pass after the start context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.publish("", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	if got := b.waitEntries(1, 10*time.Second); len(got) != 1 {
		t.Fatalf("entries %+v after the start context ended", got)
	}
}
