package store_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
)

// Index members that no writer of this package makes — a ':' or braces, more than 200
// characters — are what an operator's typo or an attacker with Redis access leaves behind.
// Every reader of the event and subscription indexes skips and counts them, never fails on
// them, and they are removed (by the read itself, or by the janitor's sweep where a read
// pages by rank).
var invalidIDs = []string{"a:b{c}", strings.Repeat("x", 201), "sp ace", "glob*"}

// Subscriptions skips the members that are no execution id and removes them, across pages:
// the removal does not make the next page skip a valid member.
func TestSubscriptionsSkipAndRemoveInvalidMembers(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	acme := f.tenant("acme")
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	idx, _ := acme.Space().SubscriptionIndex("paid")
	// More than a page (500) of valid members, with invalid ones among them, all ranked by
	// their scores: every 100th valid member is followed by an invalid one.
	const valid = 720
	for i := range valid {
		at := now.Add(time.Hour + time.Duration(i)*time.Second)
		f.must(acme.PutSubscription(c, store.Subscription{ExecutionID: fmt.Sprintf("ex_%04d", i), FlowID: "f", FlowVersion: "1",
			Node: "w", EventType: "paid", Since: now.Add(-time.Minute), ExpiresAt: at}, time.Hour))
		if i%100 == 99 {
			bad := invalidIDs[(i/100)%len(invalidIDs)] + fmt.Sprint(i)
			if strings.HasPrefix(bad, "x") {
				bad = strings.Repeat("x", 201+i)
			}
			f.must(f.do(f.c.B().Zadd().Key(idx).ScoreMember().ScoreMember(float64(at.UnixMilli()), bad).Build()).Error())
		}
	}
	f.must(f.do(f.c.B().Zadd().Key(idx).ScoreMember().ScoreMember(math.Inf(1), "a:b{c}").Build()).Error())
	wantInvalid := valid/100 + 1

	got, err := acme.Subscriptions(c, "paid", now)
	f.must(err)
	if got.Invalid != wantInvalid {
		t.Errorf("%d invalid members counted, want %d", got.Invalid, wantInvalid)
	}
	seen := map[string]bool{}
	for _, r := range got.Reads {
		if r.Missing || r.Err != nil || seen[r.ExecutionID] {
			t.Fatalf("read %+v (seen before: %v)", r, seen[r.ExecutionID])
		}
		seen[r.ExecutionID] = true
	}
	if len(seen) != valid {
		t.Fatalf("%d valid members read, want %d", len(seen), valid)
	}
	if n := f.zcard(idx); n != valid {
		t.Errorf("the index holds %d members after the read, want the %d valid ones", n, valid)
	}
	// Read again: nothing invalid is left.
	if again, err := acme.Subscriptions(c, "paid", now); err != nil || again.Invalid != 0 || len(again.Reads) != valid {
		t.Errorf("second read: %d reads, %d invalid, %v", len(again.Reads), again.Invalid, err)
	}

	// The stale-removal path removes an invalid member too (it has no record to compare).
	f.must(f.do(f.c.B().Zadd().Key(idx).ScoreMember().ScoreMember(math.Inf(1), "a:b{c}").Build()).Error())
	if removed, err := acme.RemoveStaleSubscription(c, "a:b{c}", "paid", ""); !removed || err != nil {
		t.Fatalf("stale removal of an invalid member: %v %v", removed, err)
	}
	if _, ok := f.zscore(idx, "a:b{c}"); ok {
		t.Error("the invalid member is still indexed")
	}
}

// A subscription index key that is not a sorted set is a permanent error (ErrInvalid): the
// reconciler must not hold its cursor for it.
func TestSubscriptionsOfAnIndexThatIsNoSortedSet(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	acme := f.tenant("acme")
	idx, _ := acme.Space().SubscriptionIndex("paid")
	f.must(f.do(f.c.B().Set().Key(idx).Value("junk").Build()).Error())
	_, err := acme.Subscriptions(ctx(t), "paid", time.Now())
	if !errors.Is(err, store.ErrInvalid) || model.IsTransient(err) {
		t.Fatalf("err %v: want a permanent ErrInvalid", err)
	}
}

// The feed: FeedPage skips and counts the members no event can have and leaves them (paging
// by rank goes on unchanged), SweepFeed removes them; List and Tenants skip, count and remove.
func TestEventIndexReadersSkipInvalidMembers(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	bus, clock := f.events(store.EventSettings{DisablePruneOnWrite: true})
	sp := f.platform("acme")
	t0 := bus.Now()
	var bad []string
	for i := range 6 {
		_, _, err := bus.Publish(c, store.Event{ID: fmt.Sprintf("e%d", i), Type: "t", TenantID: "acme"})
		f.must(err)
		// Beside each event, at its millisecond, a member no event can have.
		m := []string{"t a:b{c}", "t " + strings.Repeat("x", 201), "bad{type} e0", "no-space", "t glob*", " e1"}[i]
		f.must(f.do(f.c.B().Zadd().Key(sp.EventFeed()).ScoreMember().ScoreMember(float64(bus.Now().UnixMilli()), m).Build()).Error())
		bad = append(bad, m)
		clock.Add(int64(time.Millisecond))
	}
	var ids []string
	invalid := 0
	at, skip := t0, 0
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatal("paging does not end")
		}
		page, err := bus.FeedPage(c, "acme", at, bus.Now(), skip, 3)
		f.must(err)
		invalid += page.Invalid
		for _, r := range page.Refs {
			ids = append(ids, r.ID)
		}
		if page.Read < 3 {
			break
		}
		if page.Last.Equal(at) {
			skip += page.AtLast
		} else {
			at, skip = page.Last, page.AtLast
		}
	}
	if strings.Join(ids, ",") != "e0,e1,e2,e3,e4,e5" || invalid != len(bad) {
		t.Errorf("feed read %v with %d invalid members, want e0…e5 and %d", ids, invalid, len(bad))
	}
	if n := f.zcard(sp.EventFeed()); n != int64(6+len(bad)) {
		t.Errorf("FeedPage removed members: the feed holds %d", n)
	}
	res, err := bus.SweepFeed(c, "acme", 0, 100)
	f.must(err)
	if res.Invalid != len(bad) || res.Removed != len(bad) {
		t.Errorf("sweep %+v, want %d invalid members removed", res, len(bad))
	}
	if n := f.zcard(sp.EventFeed()); n != 6 {
		t.Errorf("the feed holds %d after the sweep, want 6", n)
	}

	// List: the type's index and the feed.
	idx, _ := sp.EventIndex("t")
	f.must(f.do(f.c.B().Zadd().Key(idx).ScoreMember().ScoreMember(float64(bus.Now().UnixMilli()), "a:b{c}").Build()).Error())
	f.must(f.do(f.c.B().Zadd().Key(sp.EventFeed()).ScoreMember().ScoreMember(float64(bus.Now().UnixMilli()), "t a:b{c}").Build()).Error())
	for _, typ := range []string{"t", ""} {
		page, err := bus.List(c, "acme", typ, 100)
		if err != nil || len(page.Events) != 6 || page.Invalid != 1 || page.Expired != 0 {
			t.Errorf("list %q: %d events, %d invalid, %d expired, %v", typ, len(page.Events), page.Invalid, page.Expired, err)
		}
	}
	if _, ok := f.zscore(idx, "a:b{c}"); ok {
		t.Error("List left the invalid index member")
	}

	// Tenants: a member that is no tenant slug.
	tenants := f.platform("").EventBusTenants()
	f.must(f.do(f.c.B().Zadd().Key(tenants).ScoreMember().ScoreMember(1, "Not:A{Tenant}").Build()).Error())
	list, err := bus.Tenants(c, time.Time{})
	if err != nil || list.Invalid != 1 || len(list.Tenants) != 1 || list.Tenants[0] != "acme" {
		t.Errorf("tenants %+v %v", list, err)
	}
	if _, ok := f.zscore(tenants, "Not:A{Tenant}"); ok {
		t.Error("Tenants left the invalid member")
	}
}
