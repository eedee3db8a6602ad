package worker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/presence"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
)

// A lease this instance holds for an execution it does not run (its release failed while
// Redis was away, or an earlier process had the same instance id) is taken over at once.
func TestDispatchTakesOverItsOwnLeftoverLease(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_LEASE_TTL_SECONDS": "600"})
	f.publish(t, "simple", "1", simpleFlow)
	env := f.startEnv("simple")
	leftover, err := f.ts(t).Acquire(dctx(t), env.ExecutionID, "inst-w1") // never released
	if err != nil {
		t.Fatal(err)
	}
	f.enqueue(t, env)
	f.start(t)
	st := f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	if st.StepCount != 2 {
		t.Fatalf("steps %d", st.StepCount)
	}
	f.waitSettled(t)
	if err := leftover.Storage().Save(dctx(t), st); err == nil {
		t.Fatal("the leftover lease can still write")
	}
	if n := f.q.Stats().LeaseConflicts; n != 0 {
		t.Fatalf("%d lease conflicts: the own lease was waited out", n)
	}
}

// While another holder's lease lives, reclaims of the message do not spend its deliveries; once
// the lease is gone the message runs.
func TestDispatchLeaseConflictsSpendNoDeliveries(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_MAX_DELIVERIES": "2", "PLAITA_LEASE_TTL_SECONDS": "600"})
	f.publish(t, "simple", "1", simpleFlow)
	env := f.startEnv("simple")
	held, err := f.ts(t).Acquire(dctx(t), env.ExecutionID, "gone-worker")
	if err != nil {
		t.Fatal(err)
	}
	id := f.enqueue(t, env)
	reg := presence.New(store.NewRegistry(store.OnRedis(f.c), f.root), InstanceInfo(f.cfg), zerolog.Nop(), metrics.NewSet())
	f.start(t, func(d *Deps) { d.Registry = reg })
	// Several reclaims meet the dead holder's lease (max deliveries is 2).
	waitUntil(t, "five lease conflicts", func() bool { return f.q.Stats().LeaseConflicts >= 5 })
	if d := f.depth(t); d.DLQLength != 0 || d.Pending != 1 {
		t.Fatalf("after %d conflicts: %+v", f.q.Stats().LeaseConflicts, d)
	}
	if n := f.pendingCount(t, id); n > 2 {
		t.Fatalf("delivery count %d after conflicts only", n)
	}
	// The lease ends (it would expire): the next reclaim runs the execution.
	if err := held.Release(dctx(t)); err != nil {
		t.Fatal(err)
	}
	f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	f.waitSettled(t)
	if d := f.depth(t); d.DLQLength != 0 {
		t.Fatalf("dead-lettered: %+v", d)
	}
}

// A message that used up its deliveries while its execution is running ends the execution in
// error before it is dead-lettered: never running with its only carrier in the DLQ.
func TestDispatchExhaustedDeliveriesEndTheExecutionInError(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_MAX_DELIVERIES": "2"})
	f.publish(t, "simple", "1", simpleFlow)
	env := f.startEnv("simple")
	ts := f.ts(t)
	// Two earlier deliveries ran it (and died): the state is running at its checkpoint.
	l, err := ts.Acquire(dctx(t), env.ExecutionID, "dead-a")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	fl, err := engine.Parse([]byte(simpleFlow), f.reg, engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	st := &state.Execution{ExecutionID: env.ExecutionID, TenantID: keys.DefaultTenant, FlowID: "simple", FlowVersion: "1",
		FlowHash: fl.Hash, FlowHashAlgo: fl.HashAlgo, Engine: engine.Version,
		Status: state.Running, CurrentNode: "a", StartTime: now, LastUpdate: now, Context: map[string]any{}}
	if err := l.Storage().Save(dctx(t), st); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(dctx(t)); err != nil {
		t.Fatal(err)
	}
	id := f.enqueue(t, env)
	f.claimedBy(t, id, "dead-b", 2)
	f.start(t)
	got := f.waitState(t, env.ExecutionID, statusIs(state.Error))
	if got.Error == nil || got.Error.Type != ErrTypeDeliveriesExhausted || got.Error.Permanent {
		t.Fatalf("error %+v", got.Error)
	}
	f.waitSettled(t)
	dl, err := f.q.ListDLQ(dctx(t), 10)
	if err != nil || len(dl) != 1 || dl[0].Reason != queue.ReasonMaxDeliveries(2) || dl[0].ExecutionID != env.ExecutionID {
		t.Fatalf("dlq %+v %v", dl, err)
	}
	// A retry takes it up again.
	f.enqueue(t, queue.Envelope{Kind: queue.KindResume, FlowID: "simple", FlowVersion: "1", ExecutionID: env.ExecutionID,
		ResumeType: engine.ResumeRetry, ResumeData: json.RawMessage(`{}`)})
	f.waitState(t, env.ExecutionID, statusIs(state.Completed))
}

// claimedBy makes the entry look delivered n times to a consumer that died: pending, idle
// beyond the claim time, delivery counter n.
func (f *dispatchFix) claimedBy(t *testing.T, id, consumer string, n int64) {
	t.Helper()
	c := f.c
	if _, err := c.Do(dctx(t), c.B().Xreadgroup().Group(f.q.Group(), consumer).Count(1).Streams().Key(f.q.Stream()).Id(">").Build()).AsXRead(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(dctx(t), c.B().Xclaim().Key(f.q.Stream()).Group(f.q.Group()).Consumer(consumer).MinIdleTime("0").
		Id(id).Idle(60000).Retrycount(n).Justid().Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

func (f *dispatchFix) pendingCount(t *testing.T, id string) int64 {
	t.Helper()
	c := f.c
	rows, err := c.Do(dctx(t), c.B().Xpending().Key(f.q.Stream()).Group(f.q.Group()).Start(id).End(id).Count(1).Build()).ToArray()
	if err != nil || len(rows) == 0 {
		return 0
	}
	fs, _ := rows[0].ToArray()
	n, _ := fs[3].AsInt64()
	return n
}
