package filter

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A pass matches a page of events as one batch: of several events a wait takes, the first
// published wakes it, once; the others are not offered to it.
func TestReconcilerBatchWakesWithTheFirstMatchingEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.flow("", ordersFlow)
	at := time.Now().Add(-time.Minute)
	b.clock.Store(at.UnixNano())
	b.suspend("", f, "ex_a1", map[string]any{"order_id": "A1"})
	b.suspend("", f, "ex_b2", map[string]any{"order_id": "B2"})
	for i, data := range []string{`{"order_id":"Z"}`, `{"order_id":"A1","n":1}`, `{"order_id":"B2"}`, `{"order_id":"A1","n":2}`} {
		b.clock.Store(at.Add(time.Duration(i+1) * time.Second).UnixNano())
		b.publish("", fmt.Sprintf("evt_%d", i), "order.approved", data)
	}
	b.clock.Store(0)
	r := NewReconciler(b.d, b.s, NewMatcher(b.d, b.s))
	st := b.reconcile(r)
	if st.Events != 4 || st.Woken != 2 {
		t.Fatalf("pass %+v", st)
	}
	got := map[string]string{}
	for _, e := range b.entries() {
		got[e.ExecutionID] = string(e.ResumeData)
	}
	if len(got) != 2 || got["ex_a1"] != `{"order_id":"A1","n":1}` || got["ex_b2"] != `{"order_id":"B2"}` {
		t.Fatalf("resumes %v", got)
	}
	// Again: the markers make it a no-op.
	if st := b.reconcile(r); st.Woken != 0 {
		t.Fatalf("second pass %+v", st)
	}
	if n := len(b.entries()); n != 2 {
		t.Fatalf("%d entries after a second pass", n)
	}
}

// BenchmarkReconcileBurst is one reconcile pass over a burst: waits executions wait for
// order.approved of their own order, and 20,000 events of the type are in the feed (the one
// matching wait i at 1,000·i+500 for the first 20 waits, all the others matching nobody: the
// match correlates on order_id, so each looks up the bucket of its own order and checks no
// other wait). It reports the pass's time per event.
func BenchmarkReconcileBurst(b *testing.B) {
	const events = 20000
	for _, waits := range []int{20, 200} {
		b.Run(fmt.Sprintf("waits=%d", waits), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				bb := setup(b)
				f := bb.flow("", ordersFlow)
				for i := range waits {
					bb.suspend("", f, fmt.Sprintf("ex_w%d", i), map[string]any{"order_id": fmt.Sprintf("w%d", i)})
				}
				r := NewReconciler(bb.d, bb.s, NewMatcher(bb.d, bb.s))
				bb.reconcile(r)
				for i := range events {
					k := fmt.Sprintf("n%d", i)
					if i%1000 == 500 {
						k = fmt.Sprintf("w%d", i/1000)
					}
					bb.publish("", fmt.Sprintf("evt_%05d", i), "order.approved", `{"order_id":"`+k+`"}`)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				b.StartTimer()
				began := time.Now()
				st, err := r.RunOnce(ctx)
				took := time.Since(began)
				b.StopTimer()
				cancel()
				bb.must(err)
				if st.Woken != min(waits, events/1000) || st.Events != events {
					b.Fatalf("pass %+v", st)
				}
				b.ReportMetric(float64(took.Microseconds())/events, "µs/event")
			}
		})
	}
}
