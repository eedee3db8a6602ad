//go:build !e2e

package e2e

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

// Wake-up attacks on the filter role (docs/events.md), in process: a worker and a
// filter on a private Redis. One index member that no execution can have must not stall the
// reconciler, and a burst of events past the listener's queue must not leave its waits to the
// next periodic reconcile pass.

// badMembers are index members that are no valid execution or event id: a key separator and
// braces, and one character over the 200 an id may have.
var badMembers = []string{"a:b{c}", strings.Repeat("x", 201)}

// A subscription index holding members that are no execution id: the reconciler's passes
// skip them (counted) and remove them, the tenant's cursor moves on, and a valid event still
// wakes its wait while such a member sits in the same index. The feed's unusable members are
// skipped by the passes and removed by the janitor.
func TestE2EFilterBadIndexMemberDoesNotStallTheReconciler(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, map[string]string{"PLAITA_EVENT_INDEX_SWEEP_INTERVAL": "1"})
	s.start("worker", nil)
	u := s.startDef("wait-k", keyFlow, "acme", `{"k":"u"}`)
	v := s.startDef("wait-k", keyFlow, "acme", `{"k":"v"}`)
	s.waitStatus(u, "acme", state.Suspended, 60*time.Second)
	s.waitStatus(v, "acme", state.Suspended, 60*time.Second)

	c := s.srv.Client(t)
	ctx := context.Background()
	sp := keys.MustFor("", "acme")
	idx, err := sp.SubscriptionIndex("k.set")
	if err != nil {
		t.Fatal(err)
	}
	addBad := func() {
		t.Helper()
		for _, m := range badMembers {
			if err := c.Do(ctx, c.B().Zadd().Key(idx).ScoreMember().ScoreMember(math.Inf(1), m).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	addBad()
	// An event published ten minutes ago (before the waits: it wakes nothing), while no filter
	// ran: the filter's start-up pass reads it, and with it the index and its bad members.
	bus := store.NewEvents(store.RedisEvents(c), store.EventSettings{}, "")
	bus.Now = func() time.Time { return time.Now().Add(-10 * time.Minute) }
	if _, _, err := bus.Publish(ctx, store.Event{Type: "k.set", TenantID: "acme", Data: json.RawMessage(`{"k":"old"}`)}); err != nil {
		t.Fatal(err)
	}
	// Feed members no event can have.
	feedBad := []string{"k.set a:b{c}", "k.set " + badMembers[1], "k{set} evt_1"}
	for _, m := range feedBad {
		at := float64(time.Now().Add(-5 * time.Minute).UnixMilli())
		if err := c.Do(ctx, c.B().Zadd().Key(sp.EventFeed()).ScoreMember().ScoreMember(at, m).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}

	started := time.Now()
	f := s.filter(nil)
	// The tenant's cursor moves past the old event: no member held it.
	cursorKey := keys.MustFor("", "").EventBusCursor()
	waitFor(t, "acme's cursor past the filter's start", 60*time.Second, func() bool {
		ms, err := c.Do(ctx, c.B().Hget().Key(cursorKey).Field("acme").Build()).AsInt64()
		return err == nil && ms >= started.Add(-time.Second).UnixMilli()
	}, s.procs...)
	for _, m := range badMembers {
		waitFor(t, "the bad member removed from the subscription index", 60*time.Second, func() bool {
			return !zmember(t, s, idx, m)
		}, s.procs...)
	}
	if n := f.metric("plaita_filter_invalid_subscriptions_total"); n < len(badMembers) {
		t.Errorf("%d invalid subscription members counted, want at least %d", n, len(badMembers))
	}

	// A bad member back in the index: the next event still wakes its wait.
	addBad()
	s.publishEvent("k.set", `{"k":"u"}`, "--tenant", "acme")
	if st := s.waitStatus(u, "acme", state.Completed, 60*time.Second); resumes(st) != 1 {
		t.Fatalf("u: %d resumes", resumes(st))
	}
	addBad()
	s.publishEvent("k.set", `{"k":"v"}`, "--tenant", "acme")
	if st := s.waitStatus(v, "acme", state.Completed, 60*time.Second); resumes(st) != 1 {
		t.Fatalf("v: %d resumes", resumes(st))
	}

	// Passes over the events and the bad members (a pass a second): none fails.
	passes := f.metric("plaita_filter_reconcile_passes_total")
	waitFor(t, "three more reconcile passes", 60*time.Second, func() bool {
		return f.metric("plaita_filter_reconcile_passes_total") >= passes+3
	}, s.procs...)
	if n := f.metric("plaita_filter_reconcile_failures_total"); n != 0 {
		t.Errorf("%d reconcile failures\n%s", n, f.stderr.String())
	}
	for _, ev := range []string{"filter.reconcile_failed", "filter.event_failed"} {
		if n := countLog(f, ev, ""); n != 0 {
			t.Errorf("%d %s lines\n%s", n, ev, f.stderr.String())
		}
	}
	if n := f.metric("plaita_filter_reconcile_invalid_members_total"); n < len(feedBad) {
		t.Errorf("%d invalid feed members counted by the reconciler, want at least %d", n, len(feedBad))
	}
	for _, m := range feedBad {
		waitFor(t, "the janitor removes feed member "+strconv.Quote(m[:min(len(m), 20)]), 60*time.Second, func() bool {
			return !zmember(t, s, sp.EventFeed(), m)
		}, s.procs...)
	}
}

// zmember reports whether member is in the sorted set key.
func zmember(t *testing.T, s *stack, key, member string) bool {
	t.Helper()
	c := s.srv.Client(t)
	_, err := c.Do(context.Background(), c.B().Zscore().Key(key).Member(member).Build()).AsFloat64()
	return err == nil
}
