package engine

import (
	"os"
	"reflect"
	"testing"
	"time"

	"plaita/engine/state"
)

// The example event of payment-wait goes the way the flow was written to go: beyond the match's
// order_id it sets the status the next condition compares with ('paid'), and names what else the
// flow reads (payment_id) — the documented command then completes the flow.
func TestExampleEventFollowsTheFlow(t *testing.T) {
	def, err := os.ReadFile("../examples/payment-wait.json")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	f := h.flow(string(def))
	st := h.start(f, nil)
	wantStatus(t, st, state.Suspended)
	ev, more, ok := ExampleEvent(f, st, h.set.Expr, time.Now())
	if !ok || !reflect.DeepEqual(ev, map[string]any{"type": "payment", "order_id": "ord-1", "status": "paid"}) ||
		!reflect.DeepEqual(more, []string{"EVENT.payment_id"}) {
		t.Fatalf("example %v, more %v, ok %v", ev, more, ok)
	}
	done, err := h.ex.Resume(t.Context(), f, st.ExecutionID, ResumeEvent, ev)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, done, state.Completed)
}
