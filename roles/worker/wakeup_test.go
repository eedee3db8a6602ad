package worker

import (
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/settings"
)

// A suspended state whose wake-up no record can hold — as an older worker saved a delay whose
// until was 0001-01-01T00:00:00Z, or a wait whose timeout wrapped around — is ended in error by
// the delivery that tries to register it (the redelivered start here), and the task is acked:
// it is not retried into the dead-letter stream while the execution stays suspended with
// nothing to wake it.
func TestDispatchUnregistrableWakeupEndsTheExecutionInError(t *testing.T) {
	var zero time.Time
	wrapped := time.Date(1734, 8, 22, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, flow, def, node string
		suspend               state.Suspend
		want                  string // in the error message
	}{
		{"delay due the zero time", "dly", delayFlow, "wait",
			state.Suspend{Kind: state.SuspendDelay, Node: "wait", Due: &zero}, "0001-01-01T00:00:00Z"},
		{"wait timeout before 1970", "evt", eventFlow, "w",
			state.Suspend{Kind: state.SuspendEvent, Node: "w", EventType: "order.paid", Due: &wrapped}, "1734-08-22T00:00:00Z is before 1970-01-01T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDispatchFix(t, nil)
			f.publish(t, tc.flow, "1", tc.def)
			env := f.startEnv(tc.flow)
			now := time.Now().UTC()
			s := tc.suspend
			s.Since = now
			seed := &state.Execution{ExecutionID: env.ExecutionID, FlowID: tc.flow, FlowVersion: "1", Status: state.Suspended,
				CurrentNode: tc.node, Context: map[string]any{}, StartTime: now, LastUpdate: now, Suspend: &s}
			if err := f.ts(t).Save(dctx(t), seed); err != nil {
				t.Fatal(err)
			}
			f.enqueue(t, env)
			f.start(t)
			st := f.waitState(t, env.ExecutionID, func(st *state.Execution) bool { return st.Status.Terminal() })
			if st.Status != state.Error || st.Error == nil || st.Error.Type != ErrTypeWakeupNotRegistered || st.Error.Node != tc.node ||
				!st.Error.Permanent || !strings.Contains(st.Error.Message, tc.want) || st.Suspend != nil || st.EndTime == nil {
				t.Fatalf("%s, error %+v, suspend %+v", st.Status, st.Error, st.Suspend)
			}
			f.waitSettled(t) // acked: nothing pending, nothing left in the stream
			if dl, err := f.q.ListDLQ(dctx(t), 10); err != nil || len(dl) != 0 {
				t.Fatalf("dead letters %v %v", dl, err)
			}
			n, err := f.c.Do(dctx(t), f.c.B().Zcard().Key(queue.DelayScheduledKey(settings.DelayQueue(f.cfg))).Build()).AsInt64()
			if err != nil || n != 0 {
				t.Fatalf("delay queue holds %d members (%v)", n, err)
			}
		})
	}
}

// A wake-up whose flow version is not published (any more) is judged before it is
// dead-lettered: one that fits the execution's suspension is its way out and goes to the
// dead-letter stream as flow_not_found (replayable once the flow is back); a stale one — another
// due time, no state at all — is acked as a no-op, as it would be with the flow there.
func TestWakeupOfAnUnpublishedFlowDeadLettersOnlyWhenItFits(t *testing.T) {
	f := newDispatchFix(t, nil)
	now := time.Now().UTC().Truncate(time.Millisecond)
	due := now.Add(-time.Second)
	seed := &state.Execution{ExecutionID: "ex_gone", FlowID: "gone", FlowVersion: "1", Status: state.Suspended, CurrentNode: "nap",
		Context: map[string]any{}, StartTime: now, LastUpdate: now,
		Suspend: &state.Suspend{Kind: state.SuspendDelay, Node: "nap", Due: &due, Since: now}}
	if err := f.ts(t).Save(dctx(t), seed); err != nil {
		t.Fatal(err)
	}
	entry := func(id string, due time.Time) queue.DelayEntry {
		return queue.DelayEntry{ExecutionID: id, TenantID: "default", FlowID: "gone", FlowVersion: "1",
			ResumeType: state.ResumeContinue, Node: "nap", Due: due}
	}
	p := f.start(t)
	f.fire(t, entry("ex_gone", due.Add(-time.Hour))) // an earlier suspension's
	f.fire(t, entry("ex_none", due))                 // an execution that has no state
	f.fire(t, entry("ex_gone", due))                 // the current one
	f.waitSettled(t)
	dl, err := f.q.ListDLQ(dctx(t), 10)
	if err != nil || len(dl) != 1 || dl[0].ExecutionID != "ex_gone" || dl[0].Reason != ReasonFlowNotFound {
		t.Fatalf("dead letters %+v %v", dl, err)
	}
	if n := p.d.Metrics.GetOrCreateCounter("plaita_worker_stale_wakeups_total").Get(); n != 2 {
		t.Fatalf("%d stale wake-ups, want 2", n)
	}
	if st, err := f.ts(t).Load(dctx(t), "ex_gone"); err != nil || st.Status != state.Suspended {
		t.Fatalf("state %+v %v", st, err)
	}
}
