package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
	"plaita/store/keys"
)

// events is the fixture's event bus with a settable clock.
func (f *fixture) events(s store.EventSettings) (*store.Events, *atomic.Int64) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC).UnixNano())
	ev := store.NewEvents(store.RedisEvents(f.c), s, f.root)
	ev.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	return ev, &clock
}

func (f *fixture) zcard(key string) int64 {
	f.t.Helper()
	n, err := f.do(f.c.B().Zcard().Key(key).Build()).AsInt64()
	f.must(err)
	return n
}

func (f *fixture) del(keys ...string) {
	f.t.Helper()
	f.must(f.do(f.c.B().Del().Key(keys...).Build()).Error())
}

// A publish writes the record of docs/events.md byte for byte, indexes it by type and in the
// tenant's feed (scores in ms), lists the tenant and notifies the channel of the root.
func TestEventPublishWritesRecordIndexFeedAndNotifies(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	bus, _ := f.events(store.EventSettings{TTL: time.Hour})

	got := make(chan store.EventRef, 4)
	subscribed := make(chan struct{}, 4)
	lctx, stop := context.WithCancel(c)
	defer stop()
	go func() {
		_ = bus.Listen(lctx, func() { subscribed <- struct{}{} }, func(r store.EventRef, err error) {
			if err == nil {
				got <- r
			}
		})
	}()
	<-subscribed

	ev, dup, err := bus.Publish(c, store.Event{ID: "evt_1", Type: "order.approved", TenantID: "acme", Data: json.RawMessage(`{ "order_id" : "A1" }`)})
	f.must(err)
	if dup {
		t.Error("a first publish reported as a duplicate")
	}
	sp := f.platform("acme")
	key, _ := sp.Event("evt_1")
	const want = `{"id":"evt_1","type":"order.approved","tenant_id":"acme","data":{"order_id":"A1"},"published_at":"2026-11-29T12:00:00.123456789Z"}`
	if rec, _ := f.get(key); rec != want {
		t.Errorf("record\n got %s\nwant %s", rec, want)
	}
	if ttl := f.ttl(key); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("record TTL %s", ttl)
	}
	if ev.PublishedAt.UnixNano() != time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC).UnixNano() || string(ev.Data) != `{"order_id":"A1"}` {
		t.Errorf("returned event %+v", ev)
	}
	idx, _ := sp.EventIndex("order.approved")
	if s, ok := f.zscore(idx, "evt_1"); !ok || s != strconv.FormatInt(ev.PublishedAt.UnixMilli(), 10) {
		t.Errorf("index score %q %v", s, ok)
	}
	if s, ok := f.zscore(sp.EventFeed(), "order.approved evt_1"); !ok || s != strconv.FormatInt(ev.PublishedAt.UnixMilli(), 10) {
		t.Errorf("feed score %q %v", s, ok)
	}
	// Set with the prune throttle it took: the TTL and the throttle's minute.
	for _, k := range []string{idx, sp.EventFeed()} {
		if ttl := f.ttl(k); ttl <= 60*time.Minute || ttl > 61*time.Minute {
			t.Errorf("%s TTL %s", k, ttl)
		}
	}
	if _, ok := f.zscore(sp.EventBusTenants(), "acme"); !ok {
		t.Error("acme is not in the tenant list")
	}
	select {
	case r := <-got:
		if r != (store.EventRef{TenantID: "acme", Type: "order.approved", ID: "evt_1"}) {
			t.Errorf("notification %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
	back, err := bus.Get(c, "acme", "evt_1")
	if err != nil || back.Type != "order.approved" || back.TenantID != "acme" || !back.PublishedAt.Equal(ev.PublishedAt) {
		t.Errorf("Get: %+v %v", back, err)
	}
	// The default tenant sees nothing of acme's.
	if _, err := bus.Get(c, "", "evt_1"); !errors.Is(err, store.ErrEventNotFound) || !errors.Is(err, store.ErrNotFound) || model.IsTransient(err) {
		t.Errorf("Get in the default tenant: %v", err)
	}
	if page, err := bus.List(c, "", "order.approved", 10); err != nil || len(page.Events) != 0 {
		t.Errorf("default tenant's list: %+v %v", page, err)
	}
}

// Publishing an id again is idempotent for the same type and data (whatever the key order
// and spacing); anything else under the id is a conflict and nothing is overwritten.
func TestEventPublishIsIdempotentAndRefusesConflicts(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	bus, clock := f.events(store.EventSettings{})
	first, _, err := bus.Publish(c, store.Event{ID: "evt_x", Type: "paid", Data: json.RawMessage(`{"a":1,"b":[1,2]}`)})
	f.must(err)
	clock.Add(int64(5 * time.Second))
	again, dup, err := bus.Publish(c, store.Event{ID: "evt_x", Type: "paid", Data: json.RawMessage(`{"b":[1, 2], "a":1.0}`)})
	if err != nil || !dup || !again.PublishedAt.Equal(first.PublishedAt) {
		t.Fatalf("republish: %+v dup=%v %v", again, dup, err)
	}
	key, _ := f.platform("").Event("evt_x")
	rec, _ := f.get(key)
	for _, bad := range []store.Event{
		{ID: "evt_x", Type: "paid", Data: json.RawMessage(`{"a":2}`)},
		{ID: "evt_x", Type: "refunded", Data: json.RawMessage(`{"a":1,"b":[1,2]}`)},
	} {
		_, _, err := bus.Publish(c, bad)
		if !errors.Is(err, store.ErrEventConflict) || model.IsTransient(err) {
			t.Errorf("publish %+v: %v, want ErrEventConflict", bad, err)
		}
	}
	if now, _ := f.get(key); now != rec {
		t.Errorf("a conflict rewrote the record:\n%s\n%s", rec, now)
	}
	// The same id in another tenant is another event.
	if _, dup, err := bus.Publish(c, store.Event{ID: "evt_x", Type: "refunded", TenantID: "acme"}); err != nil || dup {
		t.Errorf("same id in acme: dup=%v %v", dup, err)
	}
	// A minted id, and empty data is {}.
	ev, _, err := bus.Publish(c, store.Event{Type: "paid"})
	if err != nil || !strings.HasPrefix(ev.ID, "evt_") || len(ev.ID) != 28 || string(ev.Data) != "{}" {
		t.Errorf("minted: %+v %v", ev, err)
	}
}

func TestEventPublishRejectsBadInputAndWritesNothing(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	bus, _ := f.events(store.EventSettings{})
	big := `{"s":"` + strings.Repeat("x", store.MaxEventDataBytes) + `"}`
	for _, ev := range []store.Event{
		{Type: ""}, {Type: "a:b"}, {Type: "x{y}"}, {Type: "a b"},
		{Type: "ok", ID: "a:b"}, {Type: "ok", ID: "{x}"}, {Type: "ok", ID: "a b"},
		{Type: "ok", TenantID: "Bad Tenant"}, {Type: "ok", TenantID: "events"},
		{Type: "ok", Data: json.RawMessage(`{"a":`)}, {Type: "ok", Data: json.RawMessage(big)},
	} {
		_, _, err := bus.Publish(c, ev)
		if !errors.Is(err, store.ErrBadEvent) || model.IsTransient(err) {
			t.Errorf("publish %+v: %v, want ErrBadEvent", ev, truncated(err))
		}
	}
	if ks := f.scan(); len(ks) != 0 {
		t.Errorf("keys written: %v", ks)
	}
}

func truncated(err error) string {
	if err == nil {
		return "<nil>"
	}
	s := err.Error()
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// List is newest first, by type or over all types; members whose record expired are counted
// and removed from the index and the feed on the way.
func TestEventListNewestFirstAndPrunesExpired(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	bus, clock := f.events(store.EventSettings{DisablePruneOnWrite: true})
	for i, typ := range []string{"a", "b", "a", "a"} {
		_, _, err := bus.Publish(c, store.Event{ID: fmt.Sprintf("e%d", i), Type: typ, Data: json.RawMessage(strconv.Itoa(i))})
		f.must(err)
		clock.Add(int64(time.Second))
	}
	sp := f.platform("")
	k2, _ := sp.Event("e2")
	f.del(k2) // as if it expired
	page, err := bus.List(c, "", "a", 10)
	f.must(err)
	if len(page.Events) != 2 || page.Events[0].ID != "e3" || page.Events[1].ID != "e0" || page.Expired != 1 {
		t.Fatalf("list a: %+v", page)
	}
	idx, _ := sp.EventIndex("a")
	if _, ok := f.zscore(idx, "e2"); ok {
		t.Error("the expired event is still in the index")
	}
	if _, ok := f.zscore(sp.EventFeed(), "a e2"); ok {
		t.Error("the expired event is still in the feed")
	}
	page, err = bus.List(c, "", "", 2)
	f.must(err)
	if len(page.Events) != 2 || page.Events[0].ID != "e3" || page.Events[1].ID != "e1" {
		t.Fatalf("list all, limit 2: %+v", page)
	}
	if _, err := bus.List(c, "", "a:b", 10); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("bad type: %v", err)
	}
	if _, err := bus.List(c, "", "", 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("limit 0: %v", err)
	}
	// A corrupt record is counted, not returned, and not removed.
	k0, _ := sp.Event("e0")
	f.must(f.do(f.c.B().Set().Key(k0).Value(`{"id":"e0"`).Build()).Error())
	page, err = bus.List(c, "", "a", 10)
	if err != nil || len(page.Events) != 1 || page.Corrupt != 1 {
		t.Fatalf("with a corrupt record: %+v %v", page, err)
	}
	if _, err := bus.Get(c, "", "e0"); !errors.Is(err, store.ErrBadEvent) {
		t.Errorf("Get of a corrupt record: %v", err)
	}
}

// Page goes on after the last member the page before read, by type or over the feed, also when
// that member was removed since (expired) and when several events share a millisecond; a
// cursor that is not one is ErrInvalid.
func TestEventPagesByCursor(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	bus, clock := f.events(store.EventSettings{DisablePruneOnWrite: true})
	for i := range 7 {
		_, _, err := bus.Publish(c, store.Event{ID: fmt.Sprintf("e%d", i), Type: "a", Data: json.RawMessage(strconv.Itoa(i))})
		f.must(err)
		if i%2 == 1 { // e0/e1, e2/e3, e4/e5 share a millisecond
			clock.Add(int64(time.Millisecond))
		}
	}
	for _, typ := range []string{"a", ""} {
		var ids []string
		cursor, pages := "", 0
		for {
			page, err := bus.Page(c, store.EventQuery{Type: typ, Cursor: cursor, Limit: 3})
			f.must(err)
			pages++
			for _, ev := range page.Events {
				ids = append(ids, ev.ID)
			}
			if page.NextCursor == "" {
				break
			}
			if pages == 1 && typ == "a" {
				// The member the cursor names goes (as if it expired): the next page starts after it.
				k, _ := f.platform("").Event(page.Events[len(page.Events)-1].ID)
				f.del(k)
				idx, _ := f.platform("").EventIndex("a")
				f.must(f.do(f.c.B().Zrem().Key(idx).Member(page.Events[len(page.Events)-1].ID).Build()).Error())
			}
			cursor = page.NextCursor
		}
		want := "e6 e5 e4 e3 e2 e1 e0" // e4 was read on page 1, before it went
		if typ == "" {
			want = "e6 e5 e3 e2 e1 e0" // e4's record is gone by now
		}
		if got := strings.Join(ids, " "); got != want || pages != 3 {
			t.Errorf("type %q: %q in %d pages, want %q in 3", typ, got, pages, want)
		}
	}
	if _, err := bus.Page(c, store.EventQuery{Cursor: "forged", Limit: 3}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a forged cursor: %v", err)
	}
}

// The write-side prune checks the 8 oldest members of the type's index at most once a minute
// per (tenant, type), and only when it is not disabled.
func TestEventWriteSidePrune(t *testing.T) {
	t.Parallel()
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("disabled=%v", disabled), func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			c := ctx(t)
			bus, clock := f.events(store.EventSettings{DisablePruneOnWrite: true})
			sp := f.platform("")
			for i := range 12 {
				_, _, err := bus.Publish(c, store.Event{ID: fmt.Sprintf("old%02d", i), Type: "t"})
				f.must(err)
				clock.Add(int64(time.Millisecond))
				k, _ := sp.Event(fmt.Sprintf("old%02d", i))
				f.del(k)
			}
			idx, _ := sp.EventIndex("t")
			pruning, _ := f.events(store.EventSettings{DisablePruneOnWrite: disabled})
			pruning.Now = bus.Now
			_, _, err := pruning.Publish(c, store.Event{ID: "new1", Type: "t"})
			f.must(err)
			want := int64(13 - 8)
			if disabled {
				want = 13
			}
			if n := f.zcard(idx); n != want {
				t.Fatalf("index holds %d after the first publish, want %d", n, want)
			}
			if n := f.zcard(sp.EventFeed()); n != want {
				t.Fatalf("feed holds %d, want %d", n, want)
			}
			// Within the minute: no second prune.
			_, _, err = pruning.Publish(c, store.Event{ID: "new2", Type: "t"})
			f.must(err)
			if n := f.zcard(idx); n != want+1 {
				t.Fatalf("index holds %d after a second publish within the minute, want %d", n, want+1)
			}
			if !disabled {
				throttle, _ := sp.EventIndexPrune("t")
				if ttl := f.ttl(throttle); ttl <= 0 || ttl > time.Minute {
					t.Errorf("throttle TTL %s", ttl)
				}
			}
		})
	}
}

// The janitor's sweep checks budget members per call (expired or not), removes the expired
// ones from the feed and their index, and walks the whole feed over several calls.
func TestEventSweepFeedBudget(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	bus, clock := f.events(store.EventSettings{DisablePruneOnWrite: true})
	sp := f.platform("acme")
	for i := range 10 {
		_, _, err := bus.Publish(c, store.Event{ID: fmt.Sprintf("e%d", i), Type: "t", TenantID: "acme"})
		f.must(err)
		clock.Add(int64(time.Millisecond))
		if i%2 == 0 {
			k, _ := sp.Event(fmt.Sprintf("e%d", i))
			f.del(k)
		}
	}
	f.must(f.do(f.c.B().Zadd().Key(sp.EventFeed()).ScoreMember().ScoreMember(0, "garbage").Build()).Error())
	idx, _ := sp.EventIndex("t")
	start, checked, removed, passes := 0, 0, 0, 0
	for {
		res, err := bus.SweepFeed(c, "acme", start, 4)
		f.must(err)
		if res.Checked > 4 {
			t.Fatalf("checked %d with a budget of 4", res.Checked)
		}
		checked, removed, passes = checked+res.Checked, removed+res.Removed, passes+1
		if start = res.Next; start == 0 {
			break
		}
	}
	if removed != 6 || checked != 11 || passes != 3 {
		t.Errorf("removed %d, checked %d in %d passes; want 6 (5 expired + garbage), 11, 3", removed, checked, passes)
	}
	if n := f.zcard(sp.EventFeed()); n != 5 {
		t.Errorf("feed holds %d, want 5", n)
	}
	if n := f.zcard(idx); n != 5 {
		t.Errorf("index holds %d, want 5", n)
	}
}

func TestEventFeedPagesTenantsAndCursor(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	bus, clock := f.events(store.EventSettings{})
	t0 := bus.Now()
	for i := range 5 {
		_, _, err := bus.Publish(c, store.Event{ID: fmt.Sprintf("e%d", i), Type: "t", TenantID: "acme"})
		f.must(err)
		if i != 1 { // e1 and e2 share a millisecond
			clock.Add(int64(10 * time.Millisecond))
		}
	}
	var ids []string
	for skip := 0; ; skip += 2 {
		page, err := bus.FeedPage(c, "acme", t0, bus.Now(), skip, 2)
		f.must(err)
		for _, r := range page.Refs {
			if r.TenantID != "acme" || r.Type != "t" || r.At.IsZero() {
				t.Errorf("ref %+v", r)
			}
			ids = append(ids, r.ID)
		}
		if page.Read < 2 {
			break
		}
	}
	if strings.Join(ids, ",") != "e0,e1,e2,e3,e4" {
		t.Errorf("feed order %v", ids)
	}
	page, err := bus.FeedPage(c, "acme", t0.Add(10*time.Millisecond), t0.Add(10*time.Millisecond), 0, 10)
	if err != nil || len(page.Refs) != 2 {
		t.Errorf("the shared millisecond: %+v %v", page, err)
	}
	tenants, err := bus.Tenants(c, time.Time{})
	if err != nil || len(tenants.Tenants) != 1 || tenants.Tenants[0] != "acme" || tenants.Invalid != 0 {
		t.Errorf("tenants %v %v", tenants, err)
	}
	if tenants, _ := bus.Tenants(c, bus.Now().Add(time.Hour)); len(tenants.Tenants) != 0 {
		t.Errorf("tenants publishing after an hour from now: %v", tenants)
	}
	if _, found, err := bus.Cursor(c, "acme"); found || err != nil {
		t.Errorf("a cursor before any: %v %v", found, err)
	}
	at := time.UnixMilli(1_800_000_000_000).UTC()
	f.must(bus.SetCursor(c, "acme", at))
	f.must(bus.SetCursor(c, "acme", at.Add(-time.Minute))) // never backwards
	if got, found, err := bus.Cursor(c, "acme"); !found || err != nil || !got.Equal(at) {
		t.Errorf("cursor %s %v %v, want %s", got, found, err, at)
	}
	// An idle tenant is forgotten, a recent one kept.
	if gone, err := bus.ForgetTenant(c, "acme", t0); gone || err != nil {
		t.Errorf("forget a recent tenant: %v %v", gone, err)
	}
	if gone, err := bus.ForgetTenant(c, "acme", bus.Now().Add(time.Hour)); !gone || err != nil {
		t.Errorf("forget an idle tenant: %v %v", gone, err)
	}
}

// A wake-up marker is claimed once: a second claimer finds it pending (or sent), a claim
// pending past the grace period is taken over, and only the owner of the current claim can
// mark it sent or release it.
func TestEventWakeMarker(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	bus, clock := f.events(store.EventSettings{TTL: time.Hour})
	const grace = 30 * time.Second
	claim := func(owner string) store.Wake {
		t.Helper()
		w, err := bus.ClaimWake(c, "acme", "ex_1", "1795953600000000000", "evt_1", owner, grace)
		f.must(err)
		return w
	}
	a := claim("filter-a")
	if a.State != store.WakeClaimed || !a.Mine() || !strings.HasPrefix(a.Token, "pending ") {
		t.Fatalf("first claim %+v", a)
	}
	if ttl := f.ttl(a.Key); ttl <= time.Hour || ttl > 25*time.Hour {
		t.Errorf("marker TTL %s, want the event TTL plus a day", ttl)
	}
	if b := claim("filter-b"); b.State != store.WakePending || b.Mine() || b.Previous != a.Token {
		t.Fatalf("second claim %+v", b)
	}
	clock.Add(int64(grace))
	b := claim("filter-b")
	if b.State != store.WakeTakenOver || !b.Mine() || b.Previous != a.Token {
		t.Fatalf("claim past the grace period %+v", b)
	}
	if ok, err := bus.WakeSent(c, a, "1-1"); ok || err != nil {
		t.Errorf("the old owner marked it sent: %v %v", ok, err)
	}
	if ok, err := bus.WakeSent(c, b, "1-2"); !ok || err != nil {
		t.Fatalf("the new owner could not mark it sent: %v %v", ok, err)
	}
	clock.Add(int64(time.Hour))
	if s := claim("filter-c"); s.State != store.WakeSent || !strings.HasSuffix(s.Previous, " 1-2") {
		t.Errorf("claim of a sent marker %+v", s)
	}
	// A release lets the next claim succeed at once.
	w, err := bus.ClaimWake(c, "acme", "ex_1", "1795953600000000000", "evt_2", "filter-a", grace)
	f.must(err)
	if ok, err := bus.ReleaseWake(c, w); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	if again, _ := bus.ClaimWake(c, "acme", "ex_1", "1795953600000000000", "evt_2", "filter-b", grace); again.State != store.WakeClaimed {
		t.Errorf("claim after a release %+v", again)
	}
	// A refused wake-up is final: no later claim owns it, however long after.
	r, err := bus.ClaimWake(c, "acme", "ex_1", "1795953600000000000", "evt_3", "filter-a", grace)
	f.must(err)
	why := "invalid task envelope: " + strings.Repeat("too large ", 100)
	if ok, err := bus.WakeRefused(c, r, why); !ok || err != nil {
		t.Fatalf("refuse: %v %v", ok, err)
	}
	clock.Add(int64(2 * grace))
	if again := func() store.Wake {
		w, err := bus.ClaimWake(c, "acme", "ex_1", "1795953600000000000", "evt_3", "filter-b", grace)
		f.must(err)
		return w
	}(); again.State != store.WakeRefused || again.Mine() || !strings.HasPrefix(again.Previous, "refused ") ||
		!strings.Contains(again.Previous, "invalid task envelope") || len(again.Previous) > 300 {
		t.Errorf("claim of a refused marker %+v", again)
	}
	if _, err := bus.ClaimWake(c, "acme", "ex:1", "1", "evt", "x", grace); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("bad execution id: %v", err)
	}
	if _, err := bus.WakeSent(c, store.Wake{State: store.WakePending}, "1-1"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("mark sent without a claim: %v", err)
	}
}

// A claim on Redis is DecideWake: whatever a marker holds, it finds the state DecideWake gives
// and writes the claimer's value exactly when it says so — what the console's database decides
// in Go (store/sqlite's EventStore). Both ways a claim runs: SET NX GET then the script for a
// takeover (Redis 7), and the script alone (a Redis that refuses SET NX GET).
func TestEventClaimScriptIsDecideWake(t *testing.T) {
	t.Parallel()
	for _, byScript := range []bool{false, true} {
		t.Run(fmt.Sprintf("script only %v", byScript), func(t *testing.T) {
			t.Parallel()
			testClaimIsDecideWake(t, byScript)
		})
	}
}

func testClaimIsDecideWake(t *testing.T, byScript bool) {
	f := setup(t, nil)
	c := ctx(t)
	d := store.RedisEvents(f.c)
	if byScript {
		store.ClaimWakeByScript(d)
	}
	bus := store.NewEvents(d, store.EventSettings{TTL: time.Hour}, f.root)
	now := bus.Now().UnixMilli()
	at := func(d time.Duration) string { return strconv.FormatInt(now-d.Milliseconds(), 10) }
	values := []string{"", "pending " + at(time.Second) + " a", "pending " + at(2*time.Second), "pending " + at(-time.Second) + " a",
		"pending x a", "pending  1 a", "pendingx", "sent " + at(0) + " 1-1", "sent", "refused " + at(0) + " why", "refused",
		"garbage", "pending 99999999999999999999999999 a", "pending 1e3 a"}
	for i, v := range values {
		for _, grace := range []time.Duration{0, time.Second, 3 * time.Second} {
			ev := fmt.Sprintf("evt_%d_%d", i, grace/time.Second)
			key, _ := f.platform("acme").EventWake("ex_1", "s1", ev)
			if v != "" {
				f.must(f.do(f.c.B().Set().Key(key).Value(v).Build()).Error())
			}
			state, write := store.DecideWake(v, v != "", now, grace)
			w, err := bus.ClaimWake(c, "acme", "ex_1", "s1", ev, "me", grace)
			f.must(err)
			after, _ := f.get(key)
			if w.State != state || (after == w.Token) != write || (write && w.Token == "") || w.Previous != v {
				t.Errorf("marker %q, grace %s: the script found %+v and left %q; DecideWake says %s, write %v", v, grace, w, after, state, write)
			}
		}
	}
}

// The filter's view of a subscription index: live members with their records, expired ones
// dropped by the next registration, and a stale subscription removed only while its record is
// the one read.
func TestSubscriptionsAndStaleRemoval(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	acme := f.tenant("acme")
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	put := func(id, node string, expires time.Time) {
		t.Helper()
		f.must(acme.PutSubscription(c, store.Subscription{ExecutionID: id, FlowID: "f", FlowVersion: "1", Node: node, EventType: "paid",
			Since: now.Add(-time.Minute), ExpiresAt: expires}, time.Hour))
	}
	put("ex_expired", "w", now.Add(-3*time.Minute)) // more than a minute before the next one's since
	put("ex_live", "w", time.Time{})
	put("ex_timed", "w", now.Add(time.Minute))
	put("ex_just_expired", "w", now.Add(-time.Second)) // within the margin: kept, not returned
	put("ex_gone", "w", time.Time{})
	gone, _ := acme.Space().Subscription("ex_gone")
	f.del(gone)
	bad, _ := acme.Space().Subscription("ex_bad")
	idx, _ := acme.Space().SubscriptionIndex("paid")
	f.must(f.do(f.c.B().Set().Key(bad).Value(`{"execution_id":"ex_other"}`).Build()).Error())
	f.must(f.do(f.c.B().Zadd().Key(idx).ScoreMember().ScoreMember(1e18, "ex_bad").Build()).Error())

	got, err := acme.Subscriptions(c, "paid", now)
	f.must(err)
	reads := got.Reads
	byID := map[string]store.SubscriptionRead{}
	for _, r := range reads {
		byID[r.ExecutionID] = r
	}
	if len(reads) != 4 || byID["ex_live"].Sub.Node != "w" || byID["ex_timed"].Raw == "" || !byID["ex_gone"].Missing ||
		!errors.Is(byID["ex_bad"].Err, store.ErrInvalid) {
		t.Fatalf("reads %+v", reads)
	}
	if _, ok := f.zscore(idx, "ex_expired"); ok {
		t.Error("the expired member is still indexed")
	}
	if _, ok := f.zscore(idx, "ex_just_expired"); !ok {
		t.Error("a member expired a second ago was removed")
	}
	// Default tenant: nothing of acme's.
	if reads, err := f.ts.Subscriptions(c, "paid", now); err != nil || len(reads.Reads) != 0 {
		t.Errorf("default tenant: %+v %v", reads, err)
	}

	// The worker rewrote ex_live's record (a new suspension) after the filter read it: the
	// stale removal keeps the new record and the member.
	old := byID["ex_live"].Raw
	put("ex_live", "w2", time.Time{})
	if removed, err := acme.RemoveStaleSubscription(c, "ex_live", "paid", old); removed || err != nil {
		t.Fatalf("removal of a rewritten record: %v %v", removed, err)
	}
	if _, ok := f.zscore(idx, "ex_live"); !ok {
		t.Fatal("the rewritten subscription lost its index member")
	}
	// Removed while it is the record read.
	rec, _ := acme.Space().Subscription("ex_timed")
	if removed, err := acme.RemoveStaleSubscription(c, "ex_timed", "paid", byID["ex_timed"].Raw); !removed || err != nil {
		t.Fatalf("stale removal: %v %v", removed, err)
	}
	if f.exists(rec) {
		t.Error("the stale record is still there")
	}
	if _, ok := f.zscore(idx, "ex_timed"); ok {
		t.Error("the stale member is still there")
	}
	// A member without a record is removed.
	if removed, err := acme.RemoveStaleSubscription(c, "ex_gone", "paid", ""); !removed || err != nil {
		t.Fatalf("member without record: %v %v", removed, err)
	}
	// A record that reappeared (written by a worker between the two steps) gets its member
	// back: simulated by a removal with raw "" while the record exists.
	if removed, err := acme.RemoveStaleSubscription(c, "ex_live", "paid", ""); !removed || err != nil {
		t.Fatalf("removal racing a registration: %v %v", removed, err)
	}
	if s, ok := f.zscore(idx, "ex_live"); !ok || s != "inf" {
		t.Errorf("member not restored: %q %v", s, ok)
	}
}

func TestDecodeEventRefusesWhatIsNotARecord(t *testing.T) {
	t.Parallel()
	for _, b := range []string{
		``, `null`, `[]`, `"x"`, `{}`,
		`{"id":"e","type":"t","tenant_id":"default","published_at":"2026-11-29T12:00:00Z"}`,             // no data
		`{"id":"e","type":"t","tenant_id":"default","data":{},"published_at":"yesterday"}`,              // bad time
		`{"id":"e:1","type":"t","tenant_id":"default","data":{},"published_at":"2026-11-29T12:00:00Z"}`, // bad id
		`{"id":"e","type":"a b","tenant_id":"default","data":{},"published_at":"2026-11-29T12:00:00Z"}`, // bad type
		`{"id":"e","type":"t","tenant_id":"Acme","data":{},"published_at":"2026-11-29T12:00:00Z"}`,      // bad tenant
		`{"id":1,"type":"t","tenant_id":"default","data":{},"published_at":"2026-11-29T12:00:00Z"}`,     // id not a string
	} {
		if _, err := store.DecodeEvent([]byte(b)); !errors.Is(err, store.ErrBadEvent) {
			t.Errorf("DecodeEvent(%s): %v, want ErrBadEvent", b, err)
		}
	}
	ev, err := store.DecodeEvent([]byte(`{"id":"e","type":"t","tenant_id":"","data":[1, 2],"published_at":"2026-11-29T13:00:00+01:00","extra":true}`))
	if err != nil || ev.TenantID != keys.DefaultTenant || string(ev.Data) != "[1,2]" || ev.PublishedAt.Location() != time.UTC || ev.PublishedAt.Hour() != 12 {
		t.Errorf("a good record: %+v %v", ev, err)
	}
}

// FuzzDecodeEvent: the decoder never panics, and what it accepts encodes back to a record it
// accepts as the same event.
func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1","type":"order.approved","tenant_id":"acme","data":{"order_id":"A1"},"published_at":"2026-11-29T12:00:00.123456789Z"}`))
	f.Add([]byte(`{"id":"e","type":"t","tenant_id":"","data":null,"published_at":"2026-11-29T13:00:00+01:00"}`))
	f.Add([]byte(`{"id":"e","type":"t","tenant_id":"default","data":"\u0000","published_at":"0001-01-01T00:00:00Z"}`))
	f.Add([]byte(`[{"id":1}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := store.DecodeEvent(b)
		if err != nil {
			if !errors.Is(err, store.ErrBadEvent) {
				t.Fatalf("error %v is not ErrBadEvent", err)
			}
			return
		}
		again, err := store.EncodeEvent(ev)
		if err != nil {
			t.Fatalf("an accepted event does not encode: %+v: %v", ev, err)
		}
		back, err := store.DecodeEvent(again)
		if err != nil {
			t.Fatalf("the encoding of an accepted event is refused: %s: %v", again, err)
		}
		if back.ID != ev.ID || back.Type != ev.Type || back.TenantID != ev.TenantID || !back.PublishedAt.Equal(ev.PublishedAt) ||
			string(back.Data) != string(ev.Data) {
			t.Fatalf("round trip changed the event:\n%+v\n%+v", ev, back)
		}
	})
}

func FuzzDecodeNotification(f *testing.F) {
	f.Add(`{"tenant_id":"acme","type":"t","id":"e"}`)
	f.Add(`{"tenant_id":"","type":"a:b","id":"e"}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := store.DecodeNotification(s)
		if err != nil {
			if !errors.Is(err, store.ErrBadEvent) {
				t.Fatalf("error %v is not ErrBadEvent", err)
			}
			return
		}
		sp, err := keys.For("", ref.TenantID)
		if err != nil {
			t.Fatalf("accepted tenant %q: %v", ref.TenantID, err)
		}
		if _, err := sp.Event(ref.ID); err != nil {
			t.Fatalf("accepted id %q: %v", ref.ID, err)
		}
		if _, err := sp.EventIndex(ref.Type); err != nil {
			t.Fatalf("accepted type %q: %v", ref.Type, err)
		}
	})
}

// FuzzDecodeSubscription: the filter's reader of subscription records never panics, and what
// it accepts names the execution asked for, a node and an event type that is a key name.
func FuzzDecodeSubscription(f *testing.F) {
	f.Add("ex_1", []byte(`{"execution_id":"ex_1","tenant_id":"default","flow_id":"f","flow_version":"1","node":"w","event_type":"paid","since":"2026-11-29T12:00:00Z"}`))
	f.Add("ex_1", []byte(`{"execution_id":"ex_2","node":"w","event_type":"paid","since":"2026-11-29T12:00:00Z"}`))
	f.Add("ex_1", []byte(`{"execution_id":"ex_1","node":"w","event_type":"a:b","since":"2026-11-29T12:00:00Z","expires_at":"x"}`))
	f.Fuzz(func(t *testing.T, id string, b []byte) {
		sub, err := store.DecodeSubscription(id, b)
		if err != nil {
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if sub.ExecutionID != id || sub.Node == "" || sub.Since.IsZero() || keys.ValidName("event type", sub.EventType) != nil {
			t.Fatalf("accepted %+v for %q", sub, id)
		}
	})
}

// The index's and the feed's TTLs are set when a publish takes the type's prune throttle, not by
// every publish: while the throttle holds, a publish leaves them as they are; once it is free,
// the next publish sets them to the TTL and the throttle period. With the write-side prune off
// every publish sets them.
func TestEventIndexTTLsAreSetOncePerThrottle(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	bus, _ := f.events(store.EventSettings{TTL: time.Hour})
	sp := f.platform("default")
	idx, _ := sp.EventIndex("paid")
	throttle, _ := sp.EventIndexPrune("paid")
	publish := func(b *store.Events, id string) {
		t.Helper()
		if _, _, err := b.Publish(c, store.Event{ID: id, Type: "paid", Data: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	publish(bus, "evt_a")
	if !f.exists(throttle) {
		t.Fatal("the first publish did not take the throttle")
	}
	for _, k := range []string{idx, sp.EventFeed()} {
		f.do(f.c.B().Pexpire().Key(k).Milliseconds(int64(10 * time.Minute / time.Millisecond)).Build())
	}
	publish(bus, "evt_b")
	for _, k := range []string{idx, sp.EventFeed()} {
		if ttl := f.ttl(k); ttl > 10*time.Minute {
			t.Errorf("%s: a publish under the throttle set the TTL to %s", k, ttl)
		}
	}
	f.del(throttle)
	publish(bus, "evt_c")
	for _, k := range []string{idx, sp.EventFeed()} {
		if ttl := f.ttl(k); ttl <= 60*time.Minute || ttl > 61*time.Minute {
			t.Errorf("%s: TTL %s after the throttle was taken again", k, ttl)
		}
	}

	off, _ := f.events(store.EventSettings{TTL: time.Hour, DisablePruneOnWrite: true})
	for _, k := range []string{idx, sp.EventFeed()} {
		f.do(f.c.B().Pexpire().Key(k).Milliseconds(int64(10 * time.Minute / time.Millisecond)).Build())
	}
	publish(off, "evt_d")
	for _, k := range []string{idx, sp.EventFeed()} {
		if ttl := f.ttl(k); ttl <= 59*time.Minute || ttl > time.Hour {
			t.Errorf("%s: TTL %s with the write-side prune off", k, ttl)
		}
	}
}
