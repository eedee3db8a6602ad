package filter

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
)

// checkedFlow waits for a payment of its order of at least its amount: the order_id conjunct
// correlates, the amount one refuses an event of the right order that pays too little.
const checkedFlow = `{"id":"pay","start":"w","nodes":[
	{"id":"w","type":"wait_event","params":{"event_type":"payment","match":"EVENT.order_id == INPUT.order && EVENT.amount >= INPUT.amount"},"next":"done"},
	{"id":"done","type":"end","params":{"output":"{{ EVENT.order_id }}"}}]}`

// anyFlow waits for any large payment: no correlation term.
const anyFlow = `{"id":"any","start":"w","nodes":[
	{"id":"w","type":"wait_event","params":{"event_type":"payment","match":"EVENT.amount > 1000"},"next":"done"},
	{"id":"done","type":"end"}]}`

// syncBuffer is a log sink the matcher's goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An event is checked against the waits of its value and the uncorrelated ones only: of many
// waits of its type, the one of its order (whose amount conjunct refuses it, then accepts a
// later event) and the uncorrelated one, which is counted and logged once for its flow and node.
func TestMatcherChecksOnlyTheCandidatesOfAnEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	logs := &syncBuffer{}
	b.d.Log = zerolog.New(logs)
	f := b.flow("", checkedFlow)
	anyF := b.flow("", anyFlow)
	const n = 50
	for i := range n {
		b.suspend("", f, fmt.Sprintf("ex_%d", i), map[string]any{"order": fmt.Sprintf("o%d", i), "amount": 10.0})
	}
	b.suspend("", anyF, "ex_any", nil)
	b.suspend("", anyF, "ex_any2", nil)
	m := NewMatcher(b.d, b.s)

	low := b.publish("", "evt_low", "payment", `{"order_id":"o7","amount":5}`)
	res, err := m.Handle(b.ctx(), ref(low))
	b.must(err)
	if res.NoMatch != 3 || res.Woken != 0 {
		t.Fatalf("an event of o7 paying too little: %+v, want 3 refusals (o7's wait, the two uncorrelated ones)", res)
	}
	if got := b.counter("plaita_filter_uncorrelated_checked_total"); got != 2 {
		t.Errorf("%d uncorrelated checks, want 2", got)
	}
	ok := b.publish("", "evt_ok", "payment", `{"order_id":"o7","amount":12}`)
	res, err = m.Handle(b.ctx(), ref(ok))
	b.must(err)
	if res.Woken != 1 || res.NoMatch != 2 {
		t.Fatalf("o7's payment: %+v", res)
	}
	if got := b.entries(); len(got) != 1 || got[0].ExecutionID != "ex_7" {
		t.Fatalf("entries %+v", got)
	}
	if got := b.counter("plaita_filter_uncorrelated_checked_total"); got != 4 {
		t.Errorf("%d uncorrelated checks, want 4", got)
	}
	if c := strings.Count(logs.String(), `"event":"filter.uncorrelated_wait"`); c != 1 ||
		!strings.Contains(logs.String(), `"flow_id":"any"`) || !strings.Contains(logs.String(), `"node":"w"`) {
		t.Errorf("%d uncorrelated_wait lines, want 1:\n%s", c, logs.String())
	}
	// The used member is gone from its bucket.
	ts, _ := b.d.Store.Tenant("")
	w, err := ts.Waits(b.ctx(), "payment", []any{map[string]any{"order_id": "o7"}}, time.Now())
	b.must(err)
	if len(w.Correlated) != 0 {
		t.Errorf("o7's bucket still lists %+v", w.Correlated)
	}
}

// A correlated wait whose execution moved on (cancelled while waiting) is stale: the event of
// its value removes its bucket member and wakes nothing.
func TestMatcherRemovesTheMemberOfAWaitThatIsOver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
	ts, _ := b.d.Store.Tenant("")
	st, err := b.executor(ts).Resume(b.ctx(), f, "ex_a1", engine.ResumeCancel, nil)
	b.must(err)
	if st.Status != state.Cancelled {
		t.Fatal(st.Status)
	}
	m := NewMatcher(b.d, b.s)
	ev := b.publish("", "evt_a1", "order.approved", `{"order_id":"A1"}`)
	res, err := m.Handle(b.ctx(), ref(ev))
	if err != nil || res.Stale != 1 || res.Woken != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	w, err := ts.Waits(b.ctx(), "order.approved", []any{map[string]any{"order_id": "A1"}}, time.Now())
	b.must(err)
	if len(w.Correlated) != 0 {
		t.Fatalf("the stale member stays: %+v", w.Correlated)
	}
	if res, err := m.Handle(b.ctx(), ref(ev)); err != nil || res != (Result{}) {
		t.Fatalf("again: %+v %v", res, err)
	}
}

// A loop that waits twice at the same node with another value each time: each suspension is
// in its own value's bucket; the first event does not reach the second suspension, the
// second value's event wakes it.
func TestMatcherLoopWaitingTwiceAtOneNode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", `{"id":"rounds","start":"w","vars":{"round":1},"nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"round","match":"EVENT.round == VARS.round"},"next":"inc"},
		{"id":"inc","type":"set","params":{"vars":{"round":"{{ VARS.round + 1 }}"}},"next":"c"},
		{"id":"c","type":"condition","params":{"expr":"VARS.round > 2"},"branches":{"true":"e","false":"w"}},
		{"id":"e","type":"end"}]}`)
	b.suspend("", f, "ex_r", nil)
	m := NewMatcher(b.d, b.s)
	r1 := b.publish("", "r1", "round", `{"round":1}`)
	if res, err := m.Handle(b.ctx(), ref(r1)); err != nil || res.Woken != 1 {
		t.Fatalf("round 1: %+v %v", res, err)
	}
	time.Sleep(2 * time.Millisecond)
	st := b.resume("", f, "ex_r", map[string]any{"round": 1.0})
	if st.Status != state.Suspended || len(st.Suspend.Correlation) != 1 || st.Suspend.Correlation[0].Value != "2" {
		t.Fatalf("after round 1: %s %+v", st.Status, st.Suspend)
	}
	if res, err := m.Handle(b.ctx(), ref(r1)); err != nil || res != (Result{}) {
		t.Fatalf("round 1 again: %+v %v", res, err)
	}
	r2 := b.publish("", "r2", "round", `{"round":2.0}`)
	if res, err := m.Handle(b.ctx(), ref(r2)); err != nil || res.Woken != 1 {
		t.Fatalf("round 2: %+v %v", res, err)
	}
	got := b.entries()
	if len(got) != 2 || got[1].SourceMessageID != engine.EventCarrier("r2", st.Suspend.Since) {
		t.Fatalf("entries %+v", got)
	}
}

// A reconcile page of many events of one type wakes each wait with the first event of its own
// value, and checks no wait against another value's event.
func TestReconcilerBatchReadsTheBucketsOfThePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	at := time.Now().Add(-time.Minute)
	b.clock.Store(at.UnixNano())
	const n = 30
	for i := range n {
		b.suspend("", f, fmt.Sprintf("ex_%d", i), map[string]any{"order_id": fmt.Sprintf("o%d", i)})
	}
	for i := range 3 * n {
		b.clock.Store(at.Add(time.Duration(i+1) * time.Millisecond).UnixNano())
		b.publish("", fmt.Sprintf("evt_%03d", i), "order.approved", fmt.Sprintf(`{"order_id":"o%d","n":%d}`, i%(2*n), i))
	}
	b.clock.Store(0)
	r := NewReconciler(b.d, b.s, NewMatcher(b.d, b.s))
	st := b.reconcile(r)
	if st.Events != 3*n || st.Woken != n {
		t.Fatalf("pass %+v", st)
	}
	for _, e := range b.entries() {
		var i int
		fmt.Sscanf(e.ExecutionID, "ex_%d", &i)
		if want := fmt.Sprintf(`{"order_id":"o%d","n":%d}`, i, i); string(e.ResumeData) != want {
			t.Errorf("%s woken by %s, want %s", e.ExecutionID, e.ResumeData, want)
		}
	}
	if got := b.counter("plaita_filter_no_match_total"); got != 0 {
		t.Errorf("%d refusals: waits were checked against other orders' events", got)
	}
}
