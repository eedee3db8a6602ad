package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
	"plaita/store/storetest"
)

// The event bus's contract on the console's database (local mode): the cases Redis passes
// (store/contracts_test.go), each on a migrated file of its own, its notifications through an
// in-process hub.
func TestEventsContractSQLite(t *testing.T) {
	storetest.EventsContract(t, storetest.EventsBackend{Name: "sqlite", Open: func(t *testing.T) func(store.EventSettings) *store.Events {
		es := realClockDB(t).EventStore(store.NewHub())
		return func(s store.EventSettings) *store.Events { return store.NewEvents(es, s, "") }
	}})
}

// Records, sets and markers expire on the database's clock, as Redis keys do on the server's:
// past their time they read as absent (a set with every member in it), and later writes
// delete expired rows, a bounded batch at a time — a write past the batch still finds the
// expired record or set it writes gone.
func TestEventStoreExpiresOnItsClock(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	bus := store.NewEvents(f.EventStore(nil), store.EventSettings{TTL: time.Hour, DisablePruneOnWrite: true}, "")
	bus.Now = f.clock.Now
	const n = sweepBatch + 8
	for i := range n {
		if _, _, err := bus.Publish(c, store.Event{ID: fmt.Sprintf("e%02d", i), Type: fmt.Sprintf("t%02d", i), TenantID: "acme"}); err != nil {
			t.Fatal(err)
		}
	}
	last := fmt.Sprintf("t%02d", n-1) // the last type's index holds two events
	if _, _, err := bus.Publish(c, store.Event{ID: "x", Type: last, TenantID: "acme"}); err != nil {
		t.Fatal(err)
	}
	w, err := bus.ClaimWake(c, "acme", "ex_1", "s1", "e00", "a", time.Minute)
	if err != nil || w.State != store.WakeClaimed {
		t.Fatalf("claim: %+v %v", w, err)
	}
	f.clock.Advance(time.Hour - time.Millisecond)
	if _, err := bus.Get(c, "acme", "e00"); err != nil {
		t.Fatalf("a record a millisecond before its end: %v", err)
	}
	f.clock.Advance(time.Millisecond)
	if _, err := bus.Get(c, "acme", "e00"); !errors.Is(err, store.ErrEventNotFound) {
		t.Fatalf("a record at its end: %v, want ErrEventNotFound", err)
	}
	// The index and the feed expired with their last write: nothing to list, nothing expired.
	if p, err := bus.List(c, "acme", "t00", 100); err != nil || len(p.Events) != 0 || p.Expired != 0 {
		t.Fatalf("an expired index: %+v %v", p, err)
	}
	if r, err := bus.FeedPage(c, "acme", time.Time{}, f.clock.Now(), 0, 100); err != nil || r.Read != 0 {
		t.Fatalf("an expired feed: %+v %v", r, err)
	}
	// The last one again: a new event (its record expired), alone in its type's index (the
	// set expired with its other member).
	again, dup, err := bus.Publish(c, store.Event{ID: fmt.Sprintf("e%02d", n-1), Type: last, TenantID: "acme"})
	if err != nil || dup || !again.PublishedAt.Equal(f.clock.Now()) {
		t.Fatalf("an expired event published again: %+v %v %v", again, dup, err)
	}
	if p, err := bus.List(c, "acme", last, 100); err != nil || len(p.Events) != 1 || p.Events[0].ID != again.ID || p.Expired != 0 {
		t.Fatalf("the index of an expired set written again: %+v %v", p, err)
	}
	// That write deleted a batch of the expired records, not all of them (the one written
	// again may be of the batch or not); the next deletes the rest.
	if k := f.count("event_records"); k != n+1-sweepBatch && k != n+2-sweepBatch {
		t.Errorf("%d records after a publish past the expiry of %d, want %d or %d", k, n+1, n+1-sweepBatch, n+2-sweepBatch)
	}
	if _, _, err := bus.Publish(c, store.Event{ID: "fresh", Type: "t", TenantID: "acme"}); err != nil {
		t.Fatal(err)
	}
	if k := f.count("event_records"); k != 2 {
		t.Errorf("%d records after a second publish, want 2", k)
	}
	if k := f.count("event_members"); k != 4 {
		t.Errorf("%d set members once the expired sets are gone, want 4 (two indexes, two in the feed)", k)
	}
	// The marker lives the event TTL and a day: pending still, then gone, claimed afresh.
	if w, err := bus.ClaimWake(c, "acme", "ex_1", "s1", "e00", "b", 48*time.Hour); err != nil || w.State != store.WakePending {
		t.Fatalf("a marker within its life: %+v %v", w, err)
	}
	f.clock.Advance(24 * time.Hour)
	if w, err := bus.ClaimWake(c, "acme", "ex_1", "s1", "e00", "b", 48*time.Hour); err != nil || w.State != store.WakeClaimed || w.Previous != "" {
		t.Fatalf("a marker past its life: %+v %v", w, err)
	}
}

// A listener that falls behind the hub loses notifications (the hub drops rather than block a
// publisher) and is told, as a resubscription on Redis tells it: onSubscribed runs again, and
// the filter's reconciler finds what was lost.
func TestEventStoreListenerBehindIsToldOfTheLoss(t *testing.T) {
	t.Parallel()
	es := realClockDB(t).EventStore(store.NewHub())
	bus := store.NewEvents(es, store.EventSettings{TTL: time.Hour, DisablePruneOnWrite: true}, "")
	lctx, stop := context.WithCancel(ctx(t))
	defer stop()
	subscribed, first, release := make(chan struct{}, 4), make(chan struct{}), make(chan struct{})
	var heard atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- bus.Listen(lctx, func() { subscribed <- struct{}{} }, func(r store.EventRef, err error) {
			if heard.Add(1) == 1 {
				close(first)
				<-release // behind: the hub's buffer fills up
			}
		})
	}()
	<-subscribed
	c := ctx(t)
	n := store.SubscriptionBuffer + 10
	for i := range n {
		if _, _, err := bus.Publish(c, store.Event{ID: fmt.Sprintf("e%d", i), Type: "t"}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			<-first
		}
	}
	close(release)
	select {
	case <-subscribed:
	case err := <-done:
		t.Fatalf("Listen ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("a listener that lost notifications was not told")
	}
	if h := heard.Load(); h >= int64(n) {
		t.Errorf("heard %d of %d notifications, yet was told of a loss", h, n)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Listen ended with its context: %v", err)
	}
}

// Every failure of the database is ErrDB, transient, through every operation of the bus.
func TestEventStoreFailuresAreTransient(t *testing.T) {
	t.Parallel()
	db := realClockDB(t)
	c := ctx(t)
	bus := store.NewEvents(db.EventStore(nil), store.EventSettings{TTL: time.Hour}, "")
	w, err := bus.ClaimWake(c, "acme", "ex_1", "s1", "e1", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, _, publishErr := bus.Publish(c, store.Event{Type: "t", TenantID: "acme"})
	_, getErr := bus.Get(c, "acme", "e1")
	_, _, getManyErr := bus.GetMany(c, "acme", []string{"e1", "e2"})
	_, pageErr := bus.List(c, "acme", "t", 10)
	_, feedPageErr := bus.Page(c, store.EventQuery{Tenant: "acme", Cursor: "", Limit: 10})
	_, feedErr := bus.FeedPage(c, "acme", time.Time{}, time.Now(), 0, 10)
	_, tenantsErr := bus.Tenants(c, time.Time{})
	_, _, cursorErr := bus.Cursor(c, "acme")
	setCursorErr := bus.SetCursor(c, "acme", time.Now())
	_, sweepErr := bus.SweepFeed(c, "acme", 0, 10)
	_, forgetErr := bus.ForgetTenant(c, "acme", time.Now())
	_, claimErr := bus.ClaimWake(c, "acme", "ex_1", "s1", "e2", "a", time.Minute)
	_, sentErr := bus.WakeSent(c, w, "1-1")
	errs := map[string]error{"publish": publishErr, "get": getErr, "get many": getManyErr, "list": pageErr, "feed list": feedPageErr,
		"feed page": feedErr, "tenants": tenantsErr, "cursor": cursorErr, "set cursor": setCursorErr, "sweep": sweepErr,
		"forget": forgetErr, "claim": claimErr, "sent": sentErr}
	for what, err := range errs {
		if !errors.Is(err, ErrDB) || !model.IsTransient(err) {
			t.Errorf("%s on a closed database: %v, want ErrDB, transient", what, err)
		}
	}
}
