package worker

import (
	"testing"

	"plaita/engine/state"
)

// A first delivery of a start takes its lease with its first save; when the execution turns
// out to exist already (a duplicate start: a producer retry, a copy), nothing is written by
// that path and the delivery runs the ordinary way, which leaves an existing execution alone.
func TestDispatchDuplicateFreshStartLeavesTheExecutionAlone(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "simple", "1", simpleFlow)
	f.publish(t, "appr", "1", approvalFlow)
	f.start(t)
	done, waiting := f.startEnv("simple"), f.startEnv("appr")
	f.enqueue(t, done)
	f.enqueue(t, waiting)
	first := f.waitState(t, done.ExecutionID, statusIs(state.Completed))
	susp := f.waitState(t, waiting.ExecutionID, statusIs(state.Suspended))
	f.waitSettled(t)
	f.enqueue(t, done) // new messages, first deliveries, of the same starts
	f.enqueue(t, waiting)
	f.waitSettled(t)
	ts := f.ts(t)
	again, err := ts.Load(dctx(t), done.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status != state.Completed || !again.StartTime.Equal(first.StartTime) || !again.LastUpdate.Equal(first.LastUpdate) {
		t.Fatalf("completed execution rerun: %s, started %s (was %s), updated %s (was %s)",
			again.Status, again.StartTime, first.StartTime, again.LastUpdate, first.LastUpdate)
	}
	still, err := ts.Load(dctx(t), waiting.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	if still.Status != state.Suspended || !still.LastUpdate.Equal(susp.LastUpdate) {
		t.Fatalf("suspended execution rerun: %s, updated %s (was %s)", still.Status, still.LastUpdate, susp.LastUpdate)
	}
	if d := f.depth(t); d.DLQLength != 0 {
		t.Fatalf("dead-lettered: %+v", d)
	}
}

// A cancel requested before the start ran (the flag is raised, no state yet) is found by the
// first save: the start then runs the ordinary way and is cancelled.
func TestDispatchStartCancelledBeforeItRan(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "simple", "1", simpleFlow)
	env := f.startEnv("simple")
	if err := f.ts(t).SetCancel(dctx(t), env.ExecutionID); err != nil {
		t.Fatal(err)
	}
	f.enqueue(t, env)
	f.start(t)
	st := f.waitState(t, env.ExecutionID, func(st *state.Execution) bool { return st.Status.Terminal() })
	if st.Status != state.Cancelled {
		t.Fatalf("a start whose cancel flag was raised before it ran ended %s", st.Status)
	}
	f.waitSettled(t)
}
