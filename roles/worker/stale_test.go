package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store/keys"
)

// A resume from the delay queue is a hint for one suspension. These tests play the delay role
// by hand (the scheduled member → its resume → the stream) and check that an entry of an
// earlier suspension never wakes a later one early.

const twoDelaysFlow = `{"id":"two","version":"1","start":"d1","nodes":[
 {"id":"d1","type":"delay","params":{"seconds":3600},"next":"d2"},
 {"id":"d2","type":"delay","params":{"seconds":3600},"next":"done"},
 {"id":"done","type":"end","params":{"output":{"ok":true}}}]}`

const loopDelayFlow = `{"id":"loop","version":"1","start":"d","nodes":[
 {"id":"d","type":"delay","params":{"seconds":3600},"next":"count"},
 {"id":"count","type":"set","params":{"vars":{"n":"{{ (VARS.n ?? 0) + 1 }}"}},"next":"again"},
 {"id":"again","type":"condition","params":{"expr":"VARS.n < 2"},"branches":{"true":"d","false":"done"}},
 {"id":"done","type":"end","params":{"output":{"n":"{{ VARS.n }}"}}}]}`

const eventThenApprovalFlow = `{"id":"ea","version":"1","start":"w","nodes":[
 {"id":"w","type":"wait_event","params":{"event_type":"order.paid","timeout":60},"next":"ask"},
 {"id":"ask","type":"approval","params":{"message":"ship?","timeout":3600,"on_timeout":"expired"},"next":"done"},
 {"id":"expired","type":"end","params":{"output":{"expired":true}}},
 {"id":"done","type":"end","params":{"output":{"ok":true}}}]}`

// scheduledEntries reads the delay queue's members.
func (f *dispatchFix) scheduledEntries(t *testing.T) []queue.DelayEntry {
	t.Helper()
	ms, err := f.c.Do(dctx(t), f.c.B().Zrange().Key(queue.DelayScheduledKey(f.root+":delay:queue")).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	var out []queue.DelayEntry
	for _, m := range ms {
		e, err := queue.ParseDelayEntry(m)
		if err != nil {
			t.Fatalf("member %s: %v", m, err)
		}
		out = append(out, e)
	}
	return out
}

// entryFor is the one scheduled entry of execution id at node.
func (f *dispatchFix) entryFor(t *testing.T, id, node string) queue.DelayEntry {
	t.Helper()
	for _, e := range f.scheduledEntries(t) {
		if e.ExecutionID == id && e.Node == node {
			return e
		}
	}
	t.Fatalf("no delay entry for %s at %s in %+v", id, node, f.scheduledEntries(t))
	return queue.DelayEntry{}
}

// fire sends e's resume the way the delay role does and returns its stream id.
func (f *dispatchFix) fire(t *testing.T, e queue.DelayEntry) string {
	t.Helper()
	env, err := e.Resume()
	if err != nil {
		t.Fatal(err)
	}
	return f.enqueue(t, env)
}

// suspendedAt waits for the execution to be suspended at node.
func (f *dispatchFix) suspendedAt(t *testing.T, id, node string) *state.Execution {
	t.Helper()
	return f.waitState(t, id, func(st *state.Execution) bool {
		return st.Status == state.Suspended && st.Suspend != nil && st.Suspend.Node == node
	})
}

func resumes(st *state.Execution) int {
	n := 0
	for _, e := range st.Timeline {
		if e.Event == "resumed" {
			n++
		}
	}
	return n
}

// assertUnchanged checks that a stale wake-up left the state exactly as it was.
func (f *dispatchFix) assertUnchanged(t *testing.T, before *state.Execution, what string) {
	t.Helper()
	f.waitSettled(t)
	after, err := f.ts(t).Load(dctx(t), before.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != before.Status || after.Suspend == nil || after.Suspend.Node != before.Suspend.Node ||
		!after.Suspend.Due.Equal(*before.Suspend.Due) || len(after.Timeline) != len(before.Timeline) || !after.LastUpdate.Equal(before.LastUpdate) {
		t.Fatalf("%s changed the execution:\nbefore %+v\nafter  %+v", what, before, after)
	}
	if d := f.depth(t); d.DLQLength != 0 {
		t.Fatalf("%s was dead-lettered: %+v", what, d)
	}
}

// An entry of the first delay, sent again after the execution moved on to the second delay,
// must not end the second one early; nor may one naming the right node with another due time.
func TestStaleWakeupOfAnEarlierDelayIsDropped(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "two", "1", twoDelaysFlow)
	env := f.startEnv("two")
	f.enqueue(t, env)
	p := f.start(t)
	id := env.ExecutionID
	f.suspendedAt(t, id, "d1")
	f.waitSettled(t)
	first := f.entryFor(t, id, "d1")
	f.fire(t, first)
	at2 := f.suspendedAt(t, id, "d2")
	f.waitSettled(t)
	if resumes(at2) != 1 {
		t.Fatalf("timeline %+v", at2.Timeline)
	}

	f.fire(t, first) // a duplicate of the first wake-up (a Cluster mover's crash, an operator's replay)
	f.assertUnchanged(t, at2, "a duplicate of the first delay's wake-up")
	wrongDue := f.entryFor(t, id, "d2")
	wrongDue.Due = first.Due
	f.fire(t, wrongDue)
	f.assertUnchanged(t, at2, "a wake-up for the second delay with the first one's due time")
	if n := p.d.Metrics.GetOrCreateCounter("plaita_worker_stale_wakeups_total").Get(); n != 2 {
		t.Errorf("stale wake-ups counted %d, want 2", n)
	}

	f.fire(t, f.entryFor(t, id, "d2"))
	done := f.waitState(t, id, statusIs(state.Completed))
	if resumes(done) != 2 {
		t.Fatalf("resumed %d times, want 2: %+v", resumes(done), done.Timeline)
	}
	// A wake-up of a finished execution is dropped too (not dead-lettered).
	f.fire(t, first)
	f.waitSettled(t)
	if d := f.depth(t); d.DLQLength != 0 {
		t.Fatalf("dead-lettered: %+v", d)
	}
}

// The same node suspended again (a loop) has a new due time: the old entry does not fit it.
func TestStaleWakeupOfAnEarlierLoopRound(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "loop", "1", loopDelayFlow)
	env := f.startEnv("loop")
	f.enqueue(t, env)
	f.start(t)
	id := env.ExecutionID
	round1 := f.suspendedAt(t, id, "d")
	f.waitSettled(t)
	old := f.entryFor(t, id, "d")
	f.fire(t, old)
	round2 := f.waitState(t, id, func(st *state.Execution) bool {
		return st.Status == state.Suspended && st.Suspend != nil && !st.Suspend.Due.Equal(*round1.Suspend.Due)
	})
	f.waitSettled(t)
	f.fire(t, old)
	f.assertUnchanged(t, round2, "the first round's wake-up")
	var cur queue.DelayEntry
	for _, e := range f.scheduledEntries(t) {
		if e.Due.Equal(*round2.Suspend.Due) {
			cur = e
		}
	}
	f.fire(t, cur)
	if st := f.waitState(t, id, statusIs(state.Completed)); resumes(st) != 2 {
		t.Fatalf("resumed %d times: %+v", resumes(st), st.Timeline)
	}
}

// The wait's timeout entry stays on the delay queue after the event resumed it; when it comes
// due the execution waits at an approval with a timeout of its own, which it must not end.
func TestStaleTimeoutDoesNotTimeOutTheNextWait(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "ea", "1", eventThenApprovalFlow)
	env := f.startEnv("ea")
	f.enqueue(t, env)
	f.start(t)
	id := env.ExecutionID
	f.suspendedAt(t, id, "w")
	f.waitSettled(t)
	waitTimeout := f.entryFor(t, id, "w")
	if waitTimeout.ResumeType != engine.ResumeTimeout {
		t.Fatalf("entry %+v", waitTimeout)
	}
	f.enqueue(t, queue.Envelope{Kind: queue.KindResume, FlowID: "ea", FlowVersion: "1", ExecutionID: id,
		ResumeType: engine.ResumeEvent, ResumeData: json.RawMessage(`{"type":"order.paid"}`)})
	asking := f.suspendedAt(t, id, "ask")
	f.waitSettled(t)
	f.fire(t, waitTimeout)
	f.assertUnchanged(t, asking, "the event wait's timeout")

	f.fire(t, f.entryFor(t, id, "ask"))
	st := f.waitState(t, id, statusIs(state.Completed))
	if out, _ := json.Marshal(st.Output); string(out) != `{"expired":true}` {
		t.Fatalf("output %s", out)
	}
}

// A running execution takes a delay-queue resume only when it is that very resume redelivered
// (its first delivery applied it and its worker died): then it goes on from the checkpoint.
func TestWakeupOfARunningExecution(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "two", "1", twoDelaysFlow)
	env := f.startEnv("two")
	f.enqueue(t, env)
	f.start(t)
	id := env.ExecutionID
	st := f.suspendedAt(t, id, "d1")
	f.waitSettled(t)
	e := f.entryFor(t, id, "d1")
	// Leave the state as a worker that applied this wake-up (its checkpoint is past d1) and
	// died mid-run would have.
	st.Status, st.Suspend, st.CurrentNode = state.Running, nil, "d2"
	st.LastResume = &state.ResumeMark{Type: string(engine.ResumeContinue), Node: "d1", Key: e.CarrierID(), At: state.Stamp(time.Now())}
	f.putState(t, st)

	other := e
	other.Due = e.Due.Add(-time.Minute) // another suspension's wake-up: not this resume
	f.fire(t, other)
	f.waitSettled(t)
	if got, _ := f.ts(t).Load(dctx(t), id); got.Status != state.Running || len(got.Timeline) != len(st.Timeline) {
		t.Fatalf("a foreign wake-up moved the running execution: %+v", got)
	}
	f.fire(t, e) // the redelivered resume itself: on from the checkpoint to the next delay
	f.suspendedAt(t, id, "d2")
}

// A wake-up that meets a held lease (the worker that suspended the execution has not let go
// yet, or a run is in progress) goes back to the delay queue for a second instead of being
// acked away; one that no longer fits is dropped.
func TestWakeupMeetingAHeldLeaseIsRescheduled(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "two", "1", twoDelaysFlow)
	env := f.startEnv("two")
	f.enqueue(t, env)
	f.start(t)
	id := env.ExecutionID
	f.suspendedAt(t, id, "d1")
	f.waitSettled(t)
	e := f.entryFor(t, id, "d1")
	ts := f.ts(t)
	l, err := ts.Acquire(dctx(t), id, "other-worker")
	if err != nil {
		t.Fatal(err)
	}
	delay, err := queue.NewDelay(queue.RedisDelays(f.c), f.root+":delay:queue")
	if err != nil {
		t.Fatal(err)
	}
	// The mover took the member off the queue when it sent it.
	if err := f.c.Do(dctx(t), f.c.B().Del().Key(delay.ScheduledKey()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	f.fire(t, e)
	f.waitSettled(t)
	lk, err := delay.Lookup(dctx(t), e)
	if err != nil || !lk.Scheduled || lk.At.Before(sent.Add(WakeupRetryDelay-10*time.Millisecond)) || lk.At.After(time.Now().Add(WakeupRetryDelay)) {
		t.Fatalf("the wake-up is not back on the delay queue a second later: %+v %v", lk, err)
	}
	stale := e
	stale.Due = e.Due.Add(time.Minute)
	f.fire(t, stale)
	f.waitSettled(t)
	if lk, _ := delay.Lookup(dctx(t), stale); lk.Scheduled {
		t.Fatal("a stale wake-up was put back on the delay queue")
	}
	if err := l.Release(dctx(t)); err != nil {
		t.Fatal(err)
	}
	rep, err := delay.MoveDue(dctx(t), time.Now().Add(WakeupRetryDelay), queue.MoveOptions{Stream: f.q.Stream()})
	if err != nil || len(rep.Fired) != 1 {
		t.Fatalf("move %+v %v", rep, err)
	}
	f.suspendedAt(t, id, "d2")
}

// A mark that does not decode, or a wake-up of an execution that does not exist, is dropped as
// stale: a hint is never the truth, and never a dead letter.
func TestMalformedOrOrphanWakeupIsDropped(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "two", "1", twoDelaysFlow)
	f.start(t)
	f.enqueue(t, queue.Envelope{Kind: queue.KindResume, FlowID: "two", FlowVersion: "1", ExecutionID: engine.NewExecutionID(),
		ResumeType: engine.ResumeContinue, ResumeData: json.RawMessage(`{"wakeup":"delay","node":"d1"}`)})
	orphan := queue.DelayEntry{ExecutionID: engine.NewExecutionID(), TenantID: "default", FlowID: "two", FlowVersion: "1",
		ResumeType: engine.ResumeContinue, Node: "d1", Due: time.Now()}
	f.fire(t, orphan)
	f.waitSettled(t)
	if d := f.depth(t); d.DLQLength != 0 {
		t.Fatalf("dead-lettered: %+v", d)
	}
}

// putState writes st as the stored state, bypassing the lease (a test's stand-in for a worker
// that died after its save).
func (f *dispatchFix) putState(t *testing.T, st *state.Execution) {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	key, err := keys.MustFor(f.root, keys.DefaultTenant).Execution(st.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.c.Do(context.Background(), f.c.B().Set().Key(key).Value(string(b)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

func TestJudgeWakeup(t *testing.T) {
	due := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	w := queue.Wakeup{Source: queue.WakeupSource, Node: "n", Due: due.Truncate(time.Millisecond)}
	suspended := func(kind, node string, due time.Time) *state.Execution {
		return &state.Execution{Status: state.Suspended, Suspend: &state.Suspend{Kind: kind, Node: node, Due: &due}}
	}
	running := func(m *state.ResumeMark) *state.Execution {
		return &state.Execution{Status: state.Running, LastResume: m}
	}
	mark := &state.ResumeMark{Type: "continue", Node: "n", Key: "delay:k"}
	for name, tc := range map[string]struct {
		st   *state.Execution
		rt   engine.ResumeType
		key  string
		fits bool
	}{
		"the delay it was scheduled for":      {suspended(state.SuspendDelay, "n", due), engine.ResumeContinue, "", true},
		"a wait's timeout":                    {suspended(state.SuspendEvent, "n", due), engine.ResumeTimeout, "", true},
		"an approval's timeout":               {suspended(state.SuspendApproval, "n", due), engine.ResumeTimeout, "", true},
		"another node":                        {suspended(state.SuspendDelay, "m", due), engine.ResumeContinue, "", false},
		"the same node, another due time":     {suspended(state.SuspendDelay, "n", due.Add(time.Millisecond)), engine.ResumeContinue, "", false},
		"a continue for a wait":               {suspended(state.SuspendEvent, "n", due), engine.ResumeContinue, "", false},
		"a timeout for a delay":               {suspended(state.SuspendDelay, "n", due), engine.ResumeTimeout, "", false},
		"no due time":                         {&state.Execution{Status: state.Suspended, Suspend: &state.Suspend{Kind: state.SuspendDelay, Node: "n"}}, engine.ResumeContinue, "", false},
		"no suspension record":                {&state.Execution{Status: state.Suspended}, engine.ResumeContinue, "", false},
		"running on this resume":              {running(mark), engine.ResumeContinue, "delay:k", true},
		"running on another carrier":          {running(mark), engine.ResumeContinue, "delay:other", false},
		"running on a resume of another type": {running(mark), engine.ResumeTimeout, "delay:k", false},
		"running, no mark":                    {running(nil), engine.ResumeContinue, "delay:k", false},
		"completed":                           {&state.Execution{Status: state.Completed}, engine.ResumeContinue, "", false},
		"no state":                            {nil, engine.ResumeContinue, "", false},
	} {
		fits, why := judgeWakeup(tc.st, w, tc.rt, tc.key)
		if fits != tc.fits || (!fits && why == "") {
			t.Errorf("%s: fits=%v (%s), want %v", name, fits, why, tc.fits)
		}
	}
}
