package filter

import (
	"math"
	"strings"
	"testing"
	"time"
)

// badIndexMembers are subscription index members that are no execution id.
var badIndexMembers = []string{"a:b{c}", strings.Repeat("x", 201)}

func (b *bundle) addBadSubscriptions(tenant, eventType string) string {
	b.t.Helper()
	idx, err := keysFor(b.t, b.root, tenant).SubscriptionIndex(eventType)
	b.must(err)
	for _, m := range badIndexMembers {
		b.must(b.c.Do(b.ctx(), b.c.B().Zadd().Key(idx).ScoreMember().ScoreMember(math.Inf(1), m).Build()).Error())
	}
	return idx
}

func (b *bundle) zmember(key, member string) bool {
	b.t.Helper()
	_, err := b.c.Do(b.ctx(), b.c.B().Zscore().Key(key).Member(member).Build()).AsFloat64()
	return err == nil
}

// A valid event wakes its wait while members that are no execution id sit in the same index:
// they are counted (result and metric) and removed, and the handling does not fail.
func TestMatcherWakesBesideInvalidIndexMembers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("acme", ordersFlow)
	b.suspend("acme", f, "ex_a1", map[string]any{"order_id": "A1"})
	idx := b.addBadSubscriptions("acme", "order.approved")
	m := NewMatcher(b.d, b.s)
	res, err := m.Handle(b.ctx(), ref(b.publish("acme", "evt_a1", "order.approved", `{"order_id":"A1"}`)))
	b.must(err)
	if res.Woken != 1 || res.Invalid != len(badIndexMembers) || res.Hold {
		t.Fatalf("result %+v", res)
	}
	if got := b.entries(); len(got) != 1 || got[0].ExecutionID != "ex_a1" {
		t.Fatalf("entries %+v", got)
	}
	if n := b.counter("plaita_filter_invalid_subscriptions_total"); n != len(badIndexMembers) {
		t.Errorf("invalid subscriptions counted: %d", n)
	}
	for _, mem := range badIndexMembers {
		if b.zmember(idx, mem) {
			t.Errorf("%.20q is still indexed", mem)
		}
	}
}

// A subscription index key that is not a sorted set fails no pass and holds no cursor.
func TestMatcherSkipsAnUnreadableIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	idx, err := keysFor(t, b.root, "").SubscriptionIndex("order.approved")
	b.must(err)
	b.must(b.c.Do(b.ctx(), b.c.B().Set().Key(idx).Value("junk").Build()).Error())
	res, err := NewMatcher(b.d, b.s).Handle(b.ctx(), ref(b.publish("", "evt_a1", "order.approved", `{}`)))
	if err != nil || res.Hold {
		t.Fatalf("result %+v, %v", res, err)
	}
}

// A reconcile pass over an event whose type's index holds invalid members, and over feed
// members no event can have, succeeds, counts them and moves the tenant's cursor to the pass's
// end: the members do not hold it.
func TestReconcilerMovesPastInvalidMembers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("acme", ordersFlow)
	at := time.Now().Add(-20 * time.Minute)
	b.clock.Store(at.UnixNano())
	b.suspend("acme", f, "ex_a1", map[string]any{"order_id": "A1"})
	b.publish("acme", "evt_warm", "other", `{}`)
	r := NewReconciler(b.d, b.s, NewMatcher(b.d, b.s))
	b.reconcile(r) // acme's cursor

	b.clock.Store(at.Add(time.Minute).UnixNano())
	b.publish("acme", "evt_z9", "order.approved", `{"order_id":"Z9"}`)
	idx := b.addBadSubscriptions("acme", "order.approved")
	sp := keysFor(t, b.root, "acme")
	feedBad := []string{"order.approved a:b{c}", "order.approved " + strings.Repeat("y", 201), "bad{type} evt_z9"}
	for _, mem := range feedBad {
		b.must(b.c.Do(b.ctx(), b.c.B().Zadd().Key(sp.EventFeed()).ScoreMember().ScoreMember(float64(at.Add(time.Minute).UnixMilli()), mem).Build()).Error())
	}
	// Far past the overlap: a held cursor would stay at the event.
	end := at.Add(10 * time.Minute)
	b.clock.Store(end.UnixNano())
	st, err := r.RunOnce(b.ctx())
	b.must(err)
	if st.Invalid != len(badIndexMembers)+len(feedBad) || st.Events != 2 {
		t.Fatalf("pass %+v", st)
	}
	if cur, _, _ := b.d.Events.Cursor(b.ctx(), "acme"); cur.UnixMilli() != end.UnixMilli() {
		t.Fatalf("acme's cursor at %s, want the pass's end %s", cur, end)
	}
	if n := b.counter("plaita_filter_reconcile_failures_total"); n != 0 {
		t.Errorf("%d failures", n)
	}
	if n := b.counter("plaita_filter_reconcile_invalid_members_total"); n != len(feedBad) {
		t.Errorf("invalid feed members counted: %d", n)
	}
	if b.zmember(idx, badIndexMembers[0]) {
		t.Error("the invalid index member is still there")
	}
	// The janitor removes the feed's.
	js, err := NewJanitor(b.d, b.s).RunOnce(b.ctx())
	b.must(err)
	if js.Invalid != len(feedBad) {
		t.Errorf("janitor %+v", js)
	}
	for _, mem := range feedBad {
		if b.zmember(sp.EventFeed(), mem) {
			t.Errorf("%.30q is still in the feed", mem)
		}
	}
	if n := b.counter("plaita_event_index_sweep_invalid_total"); n != len(feedBad) {
		t.Errorf("sweep invalid counter %d", n)
	}
}
