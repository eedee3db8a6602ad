package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
)

// EventsBackend is one EventsDriver under the contract.
type EventsBackend struct {
	Name string
	// Open makes a new, empty store for one case (cases run in parallel) and returns what
	// makes event buses over it: every bus it makes, whatever its settings, shares that store
	// and hears the notifications of the others.
	Open func(t *testing.T) func(store.EventSettings) *store.Events
}

// buses makes event buses over one case's store.
type buses = func(store.EventSettings) *store.Events

// EventsContract runs the event bus's cases against b: what the console, the CLI and the
// filter rely on — a publish is idempotent by id and refused under another body, a listing
// pages newest first by type or over the feed with cursors that hold through shared
// milliseconds and removed members, an expired event leaves the listings (read-side and
// write-side prune, the janitor's sweep), the feed pages by time for the reconciler with the
// tenant list and its cursor, a wake-up is claimed once, taken over only after its grace,
// final once sent or refused, tenants are apart, and a publish is heard by a listener.
func EventsContract(t *testing.T, b EventsBackend) {
	runCases(t, b.Name, b.Open, []namedCase[buses]{
		{"PublishIsIdempotentByID", publishIsIdempotentByID},
		{"PagesNewestFirstByType", pagesNewestFirstByType},
		{"PagesThroughSharedMilliseconds", pagesThroughSharedMilliseconds},
		{"ExpiredEventsLeaveThePages", expiredEventsLeaveThePages},
		{"WriteSidePrune", func(t *testing.T, b buses) { writeSidePrune(t, b, false) }},
		{"NoWriteSidePruneWhenDisabled", func(t *testing.T, b buses) { writeSidePrune(t, b, true) }},
		{"SweepRemovesExpired", sweepRemovesExpired},
		{"FeedTenantsAndCursor", feedTenantsAndCursor},
		{"WakeClaimedOnce", wakeClaimedOnce},
		{"TenantsApart", eventTenantsApart},
		{"NotificationsHeard", notificationsHeard},
	})
}

// namedCase is one case of a contract over a backend's value of type T.
type namedCase[T any] struct {
	name string
	run  func(t *testing.T, v T)
}

// runCases runs each case in parallel, as backend/case, on a value open makes for it alone.
func runCases[T any](t *testing.T, backend string, open func(t *testing.T) T, cases []namedCase[T]) {
	for _, c := range cases {
		t.Run(backend+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, open(t))
		})
	}
}

func eventsCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func publish(t *testing.T, e *store.Events, ev store.Event) (store.Event, bool) {
	t.Helper()
	got, dup, err := e.Publish(eventsCtx(t), ev)
	if err != nil {
		t.Fatal(err)
	}
	return got, dup
}

// hour and second are the TTLs of the buses of the cases: one that outlives a case, and the
// shortest there is, waited on when a case needs events that expired.
var (
	hour   = store.EventSettings{TTL: time.Hour, DisablePruneOnWrite: true}
	second = store.EventSettings{TTL: time.Second, DisablePruneOnWrite: true}
)

// clocked sets the bus's clock to *at (the publish times, hence the scores, of the case).
func clocked(e *store.Events, at *time.Time) *store.Events {
	e.Now = func() time.Time { return *at }
	return e
}

// msNow is the wall clock at the millisecond the scores keep.
func msNow() time.Time { return time.UnixMilli(time.Now().UnixMilli()).UTC() }

// waitGone waits until every id of tenant reads as absent — their TTL ran out, the signal the
// expiry cases go on from; records still there after 15 s fail the case.
func waitGone(t *testing.T, e *store.Events, tenant string, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, errs, err := e.GetMany(eventsCtx(t), tenant, ids)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(errs, func(err error) bool { return !errors.Is(err, store.ErrEventNotFound) }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %v of %s still there 15 s after a TTL of 1 s: %v", ids, tenant, errs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// attempt runs try with a fresh tenant until it reports that the setup it needs held (events
// of 1 s still there when they are read right after their publish; a machine too busy for
// that tries again), at most five times.
func attempt(t *testing.T, try func(tenant string) bool) {
	t.Helper()
	for i := range 5 {
		if try(fmt.Sprintf("acme-%d", i)) {
			return
		}
	}
	t.Fatal("five attempts found their events of 1 s expired before they were read")
}

func ids(evs []store.Event) string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return strings.Join(out, " ")
}

func page(t *testing.T, e *store.Events, q store.EventQuery) store.EventPage {
	t.Helper()
	p, err := e.Page(eventsCtx(t), q)
	if err != nil {
		t.Fatalf("page %+v: %v", q, err)
	}
	return p
}

// feedRead is how many members the tenant's feed holds between from and an hour later, read
// without the read-side prune (FeedPage removes nothing).
func feedRead(t *testing.T, e *store.Events, tenant string, from time.Time) int {
	t.Helper()
	r, err := e.FeedPage(eventsCtx(t), tenant, from, from.Add(time.Hour), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return r.Read
}

func publishIsIdempotentByID(t *testing.T, b buses) {
	e := b(hour)
	ev := store.Event{ID: "evt_contract1", Type: "order.paid", TenantID: "acme", Data: json.RawMessage(`{"order": 1, "items": [1, 2]}`)}
	first, dup := publish(t, e, ev)
	if dup || first.ID != ev.ID || string(first.Data) != `{"order":1,"items":[1,2]}` || first.PublishedAt.IsZero() {
		t.Fatalf("first publish %+v (duplicate %v)", first, dup)
	}
	// The same event, whatever the key order, spacing and spelling of its numbers.
	same := ev
	same.Data = json.RawMessage(`{"items":[1,2], "order":1.0}`)
	again, dup := publish(t, e, same)
	if !dup || !again.PublishedAt.Equal(first.PublishedAt) || string(again.Data) != string(first.Data) {
		t.Fatalf("the same event again: %+v (duplicate %v), want the first one, duplicate", again, dup)
	}
	for _, other := range []store.Event{
		{ID: ev.ID, Type: ev.Type, TenantID: "acme", Data: json.RawMessage(`{"order": 2, "items": [1, 2]}`)},
		{ID: ev.ID, Type: "order.refunded", TenantID: "acme", Data: ev.Data},
	} {
		if _, _, err := e.Publish(eventsCtx(t), other); !errors.Is(err, store.ErrEventConflict) || model.IsTransient(err) {
			t.Fatalf("another event under the same id: %v, want ErrEventConflict", err)
		}
	}
	got, err := e.Get(eventsCtx(t), "acme", ev.ID)
	if err != nil || got.Type != ev.Type || string(got.Data) != string(first.Data) || !got.PublishedAt.Equal(first.PublishedAt) {
		t.Fatalf("get after the conflicts: %+v %v", got, err)
	}
	// Indexed once: neither the duplicate nor the conflicts added a member.
	if p := page(t, e, store.EventQuery{Tenant: "acme", Limit: 10}); ids(p.Events) != ev.ID {
		t.Fatalf("the feed after a duplicate and conflicts: %+v", p)
	}
	if p := page(t, e, store.EventQuery{Tenant: "acme", Type: "order.refunded", Limit: 10}); len(p.Events) != 0 {
		t.Fatalf("a refused type was indexed: %+v", p)
	}
	evs, errs, err := e.GetMany(eventsCtx(t), "acme", []string{ev.ID, "evt_missing", "bad:id"})
	if err != nil || evs[0].ID != ev.ID || errs[0] != nil || !errors.Is(errs[1], store.ErrEventNotFound) || !errors.Is(errs[2], store.ErrBadEvent) {
		t.Fatalf("get many: %+v %v %v", evs, errs, err)
	}
}

func pagesNewestFirstByType(t *testing.T, b buses) {
	e := b(hour)
	// The bus's clock moves a second between publications, so "newest" is well defined.
	at := time.Now()
	e.Now = func() time.Time { return at }
	var paid []string
	for i, typ := range []string{"order.paid", "order.paid", "order.shipped", "order.paid"} {
		at = at.Add(time.Second)
		ev, _ := publish(t, e, store.Event{Type: typ, TenantID: "acme", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if typ == "order.paid" {
			paid = append([]string{ev.ID}, paid...) // newest first
		}
	}
	p, err := e.Page(eventsCtx(t), store.EventQuery{Tenant: "acme", Type: "order.paid", Limit: 2})
	if err != nil || len(p.Events) != 2 || p.Events[0].ID != paid[0] || p.Events[1].ID != paid[1] || p.NextCursor == "" {
		t.Fatalf("first page %+v %v, want %v", p, err, paid[:2])
	}
	p, err = e.Page(eventsCtx(t), store.EventQuery{Tenant: "acme", Type: "order.paid", Limit: 2, Cursor: p.NextCursor})
	if err != nil || len(p.Events) != 1 || p.Events[0].ID != paid[2] || p.NextCursor != "" {
		t.Fatalf("last page %+v %v, want %v", p, err, paid[2:])
	}
	all, err := e.Page(eventsCtx(t), store.EventQuery{Tenant: "acme", Limit: 10})
	if err != nil || len(all.Events) != 4 || all.Events[0].ID != paid[0] || all.Events[3].ID != paid[2] {
		t.Fatalf("every type: %+v %v", all, err)
	}
	if none, err := e.Page(eventsCtx(t), store.EventQuery{Tenant: "globex", Limit: 10}); err != nil || len(none.Events) != 0 {
		t.Fatalf("another tenant's events: %+v %v", none, err)
	}
	if _, err := e.Page(eventsCtx(t), store.EventQuery{Tenant: "acme", Limit: 10, Cursor: "forged"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a forged cursor: %v, want ErrInvalid", err)
	}
}

// Events that share a millisecond page newest first by id in reverse byte order (a Redis ZSET
// read in reverse), not in the order they were published, and a page that ends inside such a
// millisecond goes on with the rest of it.
func pagesThroughSharedMilliseconds(t *testing.T, b buses) {
	at := msNow()
	e := clocked(b(hour), &at)
	// Within each millisecond the greater id is published first.
	for _, group := range [][]string{{"e1", "e0"}, {"e3", "e2", "E9"}, {"e5", "e4"}, {"e6"}} {
		for _, id := range group {
			publish(t, e, store.Event{ID: id, Type: "a", TenantID: "acme"})
		}
		at = at.Add(time.Millisecond)
	}
	for _, id := range []string{"b0", "b1"} { // in the feed, not in a's index
		publish(t, e, store.Event{ID: id, Type: "b", TenantID: "acme"})
	}
	for _, q := range []store.EventQuery{{Tenant: "acme", Type: "a"}, {Tenant: "acme"}} {
		var got []store.Event
		reads := 0
		for q.Limit = 3; ; {
			p := page(t, e, q)
			reads++
			got = append(got, p.Events...)
			if p.NextCursor == "" {
				break
			}
			q.Cursor = p.NextCursor
		}
		want, wantReads := "e6 e5 e4 e3 e2 E9 e1 e0", 3
		if q.Type == "" {
			want, wantReads = "b1 b0 "+want, 4
		}
		if ids(got) != want || reads != wantReads {
			t.Errorf("type %q: %q in %d pages, want %q in %d", q.Type, ids(got), reads, want, wantReads)
		}
	}
}

// An event whose TTL ran out reads as absent, is counted and removed from its type's index and
// the feed by the first page that reads it, and a page that goes on from it (the cursor's
// member gone) goes on after it; its id can be published afresh.
func expiredEventsLeaveThePages(t *testing.T, b buses) {
	at := msNow()
	t0 := at
	short, long := clocked(b(second), &at), clocked(b(hour), &at)
	attempt(t, func(tenant string) bool {
		// The short-lived one first: the long-lived publications after it keep the index and
		// the feed an hour.
		at = t0.Add(3 * time.Millisecond)
		publish(t, short, store.Event{ID: "e3x", Type: "a", TenantID: tenant})
		for i := range 7 {
			at = t0.Add(time.Duration(i) * time.Millisecond)
			publish(t, long, store.Event{ID: fmt.Sprintf("e%d", i), Type: "a", TenantID: tenant})
		}
		byType := page(t, long, store.EventQuery{Tenant: tenant, Type: "a", Limit: 4})
		feed := page(t, long, store.EventQuery{Tenant: tenant, Limit: 4})
		if ids(byType.Events) != "e6 e5 e4 e3x" || ids(feed.Events) != "e6 e5 e4 e3x" {
			return false
		}
		waitGone(t, long, tenant, "e3x")
		// The first read of it counts it expired and removes it from the index and the feed.
		if p := page(t, long, store.EventQuery{Tenant: tenant, Type: "a", Limit: 10}); ids(p.Events) != "e6 e5 e4 e3 e2 e1 e0" || p.Expired != 1 {
			t.Fatalf("a page over an expired event: %+v", p)
		}
		if p := page(t, long, store.EventQuery{Tenant: tenant, Limit: 10}); len(p.Events) != 7 || p.Expired != 0 {
			t.Fatalf("the feed after the index page removed the expired event: %+v", p)
		}
		if n := feedRead(t, long, tenant, t0); n != 7 {
			t.Fatalf("the feed holds %d members, want 7", n)
		}
		// The next pages go on after the member their cursor names, though it is gone.
		for _, q := range []store.EventQuery{{Tenant: tenant, Type: "a", Cursor: byType.NextCursor, Limit: 10}, {Tenant: tenant, Cursor: feed.NextCursor, Limit: 10}} {
			if p := page(t, long, q); ids(p.Events) != "e3 e2 e1 e0" || p.NextCursor != "" {
				t.Fatalf("the page after a removed member (type %q): %+v", q.Type, p)
			}
		}
		if _, err := long.Get(eventsCtx(t), tenant, "e3x"); !errors.Is(err, store.ErrEventNotFound) {
			t.Fatalf("get of an expired event: %v", err)
		}
		at = t0.Add(time.Minute)
		again, dup := publish(t, long, store.Event{ID: "e3x", Type: "a", TenantID: tenant})
		if dup || !again.PublishedAt.Equal(at) {
			t.Fatalf("an expired id published again: %+v duplicate %v, want a new event", again, dup)
		}
		// A cursor goes on after its member where the member is now (a Redis ZSET rank): the
		// id published again is the newest, so everything else follows it.
		if p := page(t, long, store.EventQuery{Tenant: tenant, Type: "a", Cursor: byType.NextCursor, Limit: 10}); ids(p.Events) != "e6 e5 e4 e3 e2 e1 e0" {
			t.Fatalf("the page after a member published again: %+v", p)
		}
		return true
	})
}

// The write-side prune: at most once a minute per (tenant, type), a publish checks the 8
// oldest members of the type's index and removes those whose record expired, from the index
// and the feed; never when it is disabled.
func writeSidePrune(t *testing.T, b buses, disabled bool) {
	at := msNow()
	t0 := at
	short, long := clocked(b(second), &at), clocked(b(hour), &at)
	pruning := clocked(b(store.EventSettings{TTL: time.Hour, DisablePruneOnWrite: disabled}), &at)
	attempt(t, func(tenant string) bool {
		var old []string
		for i := range 10 {
			at = at.Add(time.Millisecond)
			ev, _ := publish(t, short, store.Event{ID: fmt.Sprintf("old%02d", i), Type: "t", TenantID: tenant})
			old = append(old, ev.ID)
		}
		at = at.Add(time.Millisecond)
		publish(t, long, store.Event{ID: "keep", Type: "t", TenantID: tenant}) // the index and the feed then live an hour
		if feedRead(t, long, tenant, t0) != 11 {
			return false // the feed expired with its first publications
		}
		waitGone(t, long, tenant, old...)
		want := []int{1 + 2 + 1, 1 + 2 + 2} // keep, the 2 expired past the batch, the new ones
		if disabled {
			want = []int{1 + 10 + 1, 1 + 10 + 2}
		}
		for i, w := range want {
			at = at.Add(time.Millisecond)
			publish(t, pruning, store.Event{ID: fmt.Sprintf("new%d", i), Type: "t", TenantID: tenant})
			if n := feedRead(t, long, tenant, t0); n != w {
				t.Fatalf("after publish %d (prune disabled: %v) the feed holds %d, want %d", i+1, disabled, n, w)
			}
		}
		// What the prune left expired, the read-side prune finds in the index.
		p := page(t, long, store.EventQuery{Tenant: tenant, Type: "t", Limit: 100})
		if wantExpired := map[bool]int{false: 2, true: 10}[disabled]; p.Expired != wantExpired || len(p.Events) != 3 {
			t.Fatalf("the index after the prune: %d expired, %d events; want %d, 3", p.Expired, len(p.Events), wantExpired)
		}
		return true
	})
}

// The janitor's sweep checks budget members per call, expired or not, removes the expired ones
// from the feed and their type's index, and walks the whole feed over several calls.
func sweepRemovesExpired(t *testing.T, b buses) {
	at := msNow()
	t0 := at
	short, long := clocked(b(second), &at), clocked(b(hour), &at)
	attempt(t, func(tenant string) bool {
		var gone []string
		for i := range 10 {
			at = at.Add(time.Millisecond)
			bus := long
			if i%2 == 0 {
				bus = short
				gone = append(gone, fmt.Sprintf("e%d", i))
			}
			publish(t, bus, store.Event{ID: fmt.Sprintf("e%d", i), Type: "t", TenantID: tenant})
		}
		if feedRead(t, long, tenant, t0) != 10 {
			return false
		}
		waitGone(t, long, tenant, gone...)
		start, checked, removed, passes := 0, 0, 0, 0
		for {
			res, err := long.SweepFeed(eventsCtx(t), tenant, start, 4)
			if err != nil {
				t.Fatal(err)
			}
			if res.Checked > 4 || res.Invalid != 0 {
				t.Fatalf("a pass with a budget of 4: %+v", res)
			}
			checked, removed, passes = checked+res.Checked, removed+res.Removed, passes+1
			if start = res.Next; start == 0 {
				break
			}
		}
		if removed != 5 || checked != 10 || passes != 3 {
			t.Fatalf("removed %d, checked %d in %d passes; want 5, 10, 3", removed, checked, passes)
		}
		if n := feedRead(t, long, tenant, t0); n != 5 {
			t.Fatalf("the feed holds %d after the sweep, want 5", n)
		}
		if p := page(t, long, store.EventQuery{Tenant: tenant, Type: "t", Limit: 100}); p.Expired != 0 || ids(p.Events) != "e9 e7 e5 e3 e1" {
			t.Fatalf("the index after the sweep: %+v", p)
		}
		return true
	})
}

// The reconciler's view: the feed by publish time, oldest first, in pages that say where they
// ended; the tenants that published since a time; a cursor per tenant that never goes back;
// an idle tenant forgotten, a recent one kept.
func feedTenantsAndCursor(t *testing.T, b buses) {
	at := msNow()
	t0 := at
	e := clocked(b(hour), &at)
	for i := range 5 {
		publish(t, e, store.Event{ID: fmt.Sprintf("e%d", i), Type: "t", TenantID: "acme"})
		if i == 0 {
			at = t0.Add(5 * time.Millisecond)
			publish(t, e, store.Event{ID: "g0", Type: "u", TenantID: "globex"})
		}
		if i != 1 { // e1 and e2 share a millisecond
			at = at.Add(10 * time.Millisecond)
		}
	}
	acmeLast := at.Add(-10 * time.Millisecond) // e4's
	var got []string
	for skip := 0; ; skip += 2 {
		r, err := e.FeedPage(eventsCtx(t), "acme", t0, at, skip, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range r.Refs {
			if ref.TenantID != "acme" || ref.Type != "t" {
				t.Fatalf("ref %+v", ref)
			}
			got = append(got, ref.ID+"@"+fmt.Sprint(ref.At.Sub(t0).Milliseconds()))
		}
		if r.Read < 2 {
			break
		}
	}
	if strings.Join(got, " ") != "e0@0 e1@15 e2@15 e3@25 e4@35" {
		t.Fatalf("the feed by time: %v", got)
	}
	r, err := e.FeedPage(eventsCtx(t), "acme", t0.Add(15*time.Millisecond), t0.Add(15*time.Millisecond), 0, 10)
	if err != nil || r.Read != 2 || r.AtLast != 2 || !r.Last.Equal(t0.Add(15*time.Millisecond)) {
		t.Fatalf("the shared millisecond: %+v %v", r, err)
	}
	if r, err := e.FeedPage(eventsCtx(t), "globex", t0, at, 0, 10); err != nil || len(r.Refs) != 1 || r.Refs[0].ID != "g0" || r.Refs[0].Type != "u" {
		t.Fatalf("globex's feed: %+v %v", r, err)
	}
	tenants := func(since time.Time) []string {
		t.Helper()
		l, err := e.Tenants(eventsCtx(t), since)
		if err != nil || l.Invalid != 0 {
			t.Fatalf("tenants: %+v %v", l, err)
		}
		slices.Sort(l.Tenants)
		return l.Tenants
	}
	if ts := tenants(time.Time{}); !slices.Equal(ts, []string{"acme", "globex"}) {
		t.Fatalf("tenants %v", ts)
	}
	if ts := tenants(t0.Add(6 * time.Millisecond)); !slices.Equal(ts, []string{"acme"}) {
		t.Fatalf("tenants that published since globex did: %v", ts)
	}
	if ts := tenants(acmeLast.Add(time.Millisecond)); len(ts) != 0 {
		t.Fatalf("tenants that published after the last publish: %v", ts)
	}
	// The cursor: none at first, then only forward, per tenant.
	if _, found, err := e.Cursor(eventsCtx(t), "acme"); found || err != nil {
		t.Fatalf("a cursor before any: %v %v", found, err)
	}
	c := t0.Add(time.Hour)
	for _, to := range []time.Time{c, c.Add(-time.Minute)} {
		if err := e.SetCursor(eventsCtx(t), "acme", to); err != nil {
			t.Fatal(err)
		}
	}
	if got, found, err := e.Cursor(eventsCtx(t), "acme"); !found || err != nil || !got.Equal(c) {
		t.Fatalf("cursor %s %v %v, want %s", got, found, err, c)
	}
	if err := e.SetCursor(eventsCtx(t), "acme", c.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, _, err := e.Cursor(eventsCtx(t), "acme"); err != nil || !got.Equal(c.Add(time.Second)) {
		t.Fatalf("cursor moved forward: %s %v", got, err)
	}
	if _, found, err := e.Cursor(eventsCtx(t), "globex"); found || err != nil {
		t.Fatalf("globex's cursor: %v %v", found, err)
	}
	// An idle tenant is forgotten, a recent one kept.
	if gone, err := e.ForgetTenant(eventsCtx(t), "acme", acmeLast); gone || err != nil {
		t.Fatalf("forget a tenant that published at the time: %v %v", gone, err)
	}
	if gone, err := e.ForgetTenant(eventsCtx(t), "acme", acmeLast.Add(time.Millisecond)); !gone || err != nil {
		t.Fatalf("forget an idle tenant: %v %v", gone, err)
	}
	if gone, err := e.ForgetTenant(eventsCtx(t), "acme", acmeLast.Add(time.Hour)); gone || err != nil {
		t.Fatalf("forget a forgotten tenant: %v %v", gone, err)
	}
	if ts := tenants(time.Time{}); !slices.Equal(ts, []string{"globex"}) {
		t.Fatalf("tenants after acme was forgotten: %v", ts)
	}
}

func wakeClaimedOnce(t *testing.T, open buses) {
	e := open(hour)
	claim := func(tenant, owner, event string, grace time.Duration) store.Wake {
		t.Helper()
		w, err := e.ClaimWake(eventsCtx(t), tenant, "ex_1", "s1", event, owner, grace)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	a := claim("acme", "a", "evt_1", time.Hour)
	if a.State != store.WakeClaimed || !a.Mine() || a.Previous != "" || !strings.HasPrefix(a.Token, "pending ") {
		t.Fatalf("first claim %+v", a)
	}
	if b := claim("acme", "b", "evt_1", time.Hour); b.State != store.WakePending || b.Mine() || b.Previous != a.Token {
		t.Fatalf("a claim within the grace %+v, want pending", b)
	}
	// Past the grace (0 here), another owner takes it over; the first owner's claim is gone.
	b := claim("acme", "b", "evt_1", 0)
	if b.State != store.WakeTakenOver || !b.Mine() || b.Previous != a.Token {
		t.Fatalf("a claim past the grace %+v, want taken over", b)
	}
	if ok, err := e.WakeSent(eventsCtx(t), a, "1-1"); err != nil || ok {
		t.Fatalf("the first owner marked it sent after the takeover: %v %v", ok, err)
	}
	if ok, err := e.WakeSent(eventsCtx(t), b, "1-2"); err != nil || !ok {
		t.Fatalf("the owner's WakeSent: %v %v", ok, err)
	}
	if ok, err := e.ReleaseWake(eventsCtx(t), b); err != nil || ok {
		t.Fatalf("a release of a sent wake-up: %v %v", ok, err)
	}
	if c := claim("acme", "c", "evt_1", 0); c.State != store.WakeSent || c.Mine() || !strings.HasPrefix(c.Previous, "sent ") || !strings.HasSuffix(c.Previous, " 1-2") {
		t.Fatalf("a claim of a sent wake-up %+v, want sent (final)", c)
	}
	// Another event is another marker; a released one is claimed again at once.
	d := claim("acme", "d", "evt_2", time.Hour)
	if d.State != store.WakeClaimed {
		t.Fatalf("another event's claim %+v", d)
	}
	if ok, err := e.ReleaseWake(eventsCtx(t), d); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	if again := claim("acme", "e", "evt_2", time.Hour); again.State != store.WakeClaimed || again.Previous != "" {
		t.Fatalf("a released wake-up %+v, want claimed again", again)
	}
	// A refused wake-up is final, whoever claims it past any grace.
	r := claim("acme", "f", "evt_3", time.Hour)
	why := "invalid task envelope: " + strings.Repeat("too large ", 100)
	if ok, err := e.WakeRefused(eventsCtx(t), r, why); err != nil || !ok {
		t.Fatalf("refuse: %v %v", ok, err)
	}
	if again := claim("acme", "g", "evt_3", 0); again.State != store.WakeRefused || again.Mine() ||
		!strings.HasPrefix(again.Previous, "refused ") || !strings.Contains(again.Previous, "invalid task envelope") || len(again.Previous) > 300 {
		t.Fatalf("a claim of a refused wake-up %+v", again)
	}
	// Another tenant's marker of the same names is its own.
	if g := claim("globex", "h", "evt_1", time.Hour); g.State != store.WakeClaimed {
		t.Fatalf("globex's claim %+v", g)
	}
	if _, err := e.WakeSent(eventsCtx(t), store.Wake{State: store.WakePending}, "1-1"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("marked sent without a claim: %v", err)
	}
}

// Tenants are apart: the same id in two tenants is two events, with their own listings, feed,
// sweep and markers.
func eventTenantsApart(t *testing.T, b buses) {
	at := msNow()
	t0 := at
	e := clocked(b(hour), &at)
	for _, tenant := range []string{"acme", "globex", ""} {
		at = at.Add(time.Millisecond)
		ev, dup := publish(t, e, store.Event{ID: "evt_same", Type: "t", TenantID: tenant, Data: json.RawMessage(fmt.Sprintf(`{"tenant":%q}`, tenant))})
		if dup {
			t.Fatalf("the id in %q is a duplicate of another tenant's: %+v", tenant, ev)
		}
	}
	publish(t, e, store.Event{ID: "evt_acme", Type: "t", TenantID: "acme"})
	for _, tenant := range []string{"acme", "globex", "default"} {
		got, err := e.Get(eventsCtx(t), tenant, "evt_same")
		want := tenant
		if tenant == "default" {
			want = ""
		}
		if err != nil || got.TenantID != tenant || string(got.Data) != fmt.Sprintf(`{"tenant":%q}`, want) {
			t.Fatalf("%s's event: %+v %v", tenant, got, err)
		}
	}
	if p := page(t, e, store.EventQuery{Tenant: "globex", Type: "t", Limit: 10}); ids(p.Events) != "evt_same" {
		t.Fatalf("globex's page: %+v", p)
	}
	if n := feedRead(t, e, "globex", t0); n != 1 {
		t.Fatalf("globex's feed holds %d", n)
	}
	if res, err := e.SweepFeed(eventsCtx(t), "globex", 0, 10); err != nil || res.Checked != 1 || res.Removed != 0 {
		t.Fatalf("globex's sweep: %+v %v", res, err)
	}
	if n := feedRead(t, e, "acme", t0); n != 2 {
		t.Fatalf("acme's feed holds %d", n)
	}
	if _, err := e.Get(eventsCtx(t), "initech", "evt_same"); !errors.Is(err, store.ErrEventNotFound) {
		t.Fatalf("a tenant that published nothing: %v", err)
	}
}

// A listener hears every publish of the key root, of every tenant, once it is subscribed —
// a duplicate too — and ends without an error when its context does.
func notificationsHeard(t *testing.T, b buses) {
	listener, publisher := b(hour), b(hour)
	ctx, stop := context.WithCancel(eventsCtx(t))
	defer stop()
	subscribed := make(chan struct{}, 8)
	heard := make(chan store.EventRef, 8)
	done := make(chan error, 1)
	go func() {
		done <- listener.Listen(ctx, func() { subscribed <- struct{}{} }, func(r store.EventRef, err error) {
			if err != nil {
				t.Errorf("a notification that does not decode: %v", err)
				return
			}
			heard <- r
		})
	}()
	select {
	case <-subscribed:
	case err := <-done:
		t.Fatalf("Listen returned before it subscribed: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not subscribed after 10 s")
	}
	want := []store.EventRef{{TenantID: "acme", Type: "order.paid", ID: "evt_n1"}, {TenantID: "default", Type: "order.paid", ID: "evt_n2"},
		{TenantID: "acme", Type: "order.paid", ID: "evt_n1"}}
	for _, w := range want {
		tenant := w.TenantID
		if tenant == "default" {
			tenant = ""
		}
		publish(t, publisher, store.Event{ID: w.ID, Type: w.Type, TenantID: tenant})
		select {
		case got := <-heard:
			if got != w {
				t.Fatalf("heard %+v, want %+v", got, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification of %+v after 10 s", w)
		}
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Listen ended with its context: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not end with its context")
	}
}
