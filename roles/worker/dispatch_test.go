package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/presence"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

// dispatchFix is one test's private root, queue, store and node registry.
type dispatchFix struct {
	c    rueidis.Client
	root string
	cfg  *config.Config
	q    *queue.Queue
	st   *store.Redis
	reg  *engine.Registry
}

func newDispatchFix(t testing.TB, extra map[string]string) *dispatchFix {
	t.Helper()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	env := map[string]string{
		"PLAITA_QUEUE_NAME":        root + ":flow:queue",
		"PLAITA_DELAY_QUEUE":       root + ":delay:queue",
		"PLAITA_CLAIM_MIN_IDLE_MS": "100",
		"PLAITA_CONSUMER_NAME":     "w1",
		"PLAITA_INSTANCE_ID":       "inst-w1",
	}
	maps.Copy(env, extra)
	cfg, err := config.Load(config.RoleWorker, false, config.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(queue.Redis(c), settings.Queue(cfg), metrics.NewSet(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := q.EnsureGroup(dctx(t)); err != nil {
		t.Fatal(err)
	}
	return &dispatchFix{c: c, root: root, cfg: cfg, q: q, st: store.NewRedis(c, settings.Store(cfg), root), reg: engine.NewRegistry()}
}

func dctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wakeups records wake-ups under the fixture's root and delay queue.
func (f *dispatchFix) wakeups(t testing.TB) *Wakeups {
	t.Helper()
	delay, err := queue.NewDelay(queue.RedisDelays(f.c), settings.DelayQueue(f.cfg))
	if err != nil {
		t.Fatal(err)
	}
	return NewWakeups(f.st, delay, settings.WorkerWakeups(f.cfg))
}

// start builds and starts a dispatcher; it is stopped when the test ends. mod adjusts the
// dependencies.
func (f *dispatchFix) start(t *testing.T, mod ...func(*Deps)) *Dispatcher {
	t.Helper()
	d := Deps{
		Root: f.root, Queue: f.q, Store: f.st, Nodes: f.reg, Definitions: store.NewFlows(store.RedisFlows(f.c), f.root), Wakeups: f.wakeups(t),
		Log: zerolog.Nop(), Metrics: metrics.NewSet(), Settings: withIdentity(SettingsFrom(f.cfg), "inst-w1", 2),
		ReadBlock: 200 * time.Millisecond, ReclaimInterval: 100 * time.Millisecond, CancelPoll: 50 * time.Millisecond,
	}
	for _, m := range mod {
		m(&d)
	}
	p := NewDispatcher(d)
	p.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Stop(ctx)
	})
	return p
}

func (f *dispatchFix) publish(t *testing.T, id, version, def string) {
	t.Helper()
	key := keys.MustFor(f.root, keys.DefaultTenant).Flow(id, version)
	if err := f.c.Do(dctx(t), f.c.B().Set().Key(key).Value(def).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

func (f *dispatchFix) enqueue(t *testing.T, env queue.Envelope) string {
	t.Helper()
	id, err := queue.Enqueue(dctx(t), queue.Redis(f.c), f.q.Stream(), env)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *dispatchFix) startEnv(flow string) queue.Envelope {
	return queue.Envelope{Kind: queue.KindStart, FlowID: flow, FlowVersion: "1", ExecutionID: engine.NewExecutionID(),
		Input: json.RawMessage(`{"n":1}`)}
}

func (f *dispatchFix) ts(t *testing.T) *store.TenantStore {
	t.Helper()
	ts, err := f.st.Tenant(keys.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// waitState polls the execution until ok says so (at most 10 s).
func (f *dispatchFix) waitState(t *testing.T, id string, ok func(*state.Execution) bool) *state.Execution {
	t.Helper()
	ts := f.ts(t)
	deadline := time.Now().Add(10 * time.Second)
	var last *state.Execution
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := ts.Load(ctx, id)
		cancel()
		if err == nil {
			last = st
			if ok(st) {
				return st
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
	t.Fatalf("execution %s did not reach the expected state in 10s; last: %+v", id, last)
	return nil
}

// waitSettled waits until the stream and the pending list are empty (at most 10 s).
func (f *dispatchFix) waitSettled(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var d queue.Depth
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var err error
		d, err = f.q.Depth(ctx)
		cancel()
		if err == nil && d.Pending == 0 && d.StreamLength == 0 {
			return
		}
		time.Sleep(30 * time.Millisecond)
	}
	t.Fatalf("queue not settled in 10s: %+v", d)
}

func (f *dispatchFix) depth(t *testing.T) queue.Depth {
	t.Helper()
	d, err := f.q.Depth(dctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func statusIs(s state.Status) func(*state.Execution) bool {
	return func(st *state.Execution) bool { return st.Status == s }
}

const simpleFlow = `{"id":"simple","version":"1","start":"a","nodes":[
 {"id":"a","type":"set","params":{"vars":{"x":1}},"next":"done"},
 {"id":"done","type":"end","params":{"output":{"ok":true}}}]}`

const approvalFlow = `{"id":"appr","version":"1","start":"ask","nodes":[
 {"id":"ask","type":"approval","params":{"message":"ship it?"},"next":"done"},
 {"id":"done","type":"end","params":{"output":{"ok":true}}}]}`

const delayFlow = `{"id":"dly","version":"1","start":"wait","nodes":[
 {"id":"wait","type":"delay","params":{"seconds":60},"next":"done"},
 {"id":"done","type":"end","params":{"output":{"ok":true}}}]}`

const slowFlow = `{"id":"slow","version":"1","start":"nap","nodes":[
 {"id":"nap","type":"test_sleep","next":"done"},
 {"id":"done","type":"end","params":{"output":{"ok":true}}}]}`

const longFlow = `{"id":"long","version":"1","start":"nap","nodes":[
 {"id":"nap","type":"test_sleep_long","next":"done"},
 {"id":"done","type":"end","params":{"output":{"ok":true}}}]}`

const eventFlow = `{"id":"evt","version":"1","start":"w","nodes":[
 {"id":"w","type":"wait_event","params":{"event_type":"order.paid","match":"EVENT.order == INPUT.n","timeout":120},"next":"done"},
 {"id":"done","type":"end","params":{"output":{"ok":true}}}]}`

// sleepType is a node that sleeps d (300 ms by default) on its context.
type sleepType struct{ d time.Duration }

func (s sleepType) Prepare(*engine.Node, *engine.PrepareContext) engine.Runner {
	return sleepNode{d: cmp.Or(s.d, 300*time.Millisecond)}
}

type sleepNode struct{ d time.Duration }

func (s sleepNode) Run(ctx context.Context, _ *engine.Call) (engine.Outcome, error) {
	t := time.NewTimer(s.d)
	defer t.Stop()
	select {
	case <-t.C:
		return engine.Outcome{Output: map[string]any{"slept": true}}, nil
	case <-ctx.Done():
		return engine.Outcome{}, ctx.Err()
	}
}

func TestDispatchStartCompletes(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "simple", "1", simpleFlow)
	env := f.startEnv("simple")
	f.enqueue(t, env)
	f.start(t)
	st := f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	if st.FlowID != "simple" || st.ExecutionID != env.ExecutionID {
		t.Fatalf("state %+v", st)
	}
	f.waitSettled(t)
}

func TestDispatchApprovalSuspendsAndResumes(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "appr", "1", approvalFlow)
	env := f.startEnv("appr")
	f.enqueue(t, env)
	f.start(t)
	st := f.waitState(t, env.ExecutionID, statusIs(state.Suspended))
	if st.Suspend == nil || st.Suspend.Kind != state.SuspendApproval || st.Suspend.Node != "ask" {
		t.Fatalf("suspend %+v", st.Suspend)
	}
	f.waitSettled(t)
	sp := keys.MustFor(f.root, keys.DefaultTenant)
	apKey, _ := sp.Approval(env.ExecutionID)
	raw, err := f.c.Do(dctx(t), f.c.B().Get().Key(apKey).Build()).ToString()
	if err != nil {
		t.Fatalf("approval record: %v", err)
	}
	var ap store.Approval
	if err := json.Unmarshal([]byte(raw), &ap); err != nil {
		t.Fatal(err)
	}
	if ap.ExecutionID != env.ExecutionID || ap.Node != "ask" || ap.Message != "ship it?" || ap.FlowID != "appr" || ap.TenantID != "default" {
		t.Fatalf("approval record %+v", ap)
	}
	if n, _ := f.c.Do(dctx(t), f.c.B().Zcard().Key(sp.ApprovalIndex()).Build()).AsInt64(); n != 1 {
		t.Fatalf("approval index holds %d members", n)
	}

	f.enqueue(t, queue.Envelope{Kind: queue.KindResume, FlowID: "appr", FlowVersion: "1", ExecutionID: env.ExecutionID,
		ResumeType: engine.ResumeApproval, ResumeData: json.RawMessage(`{"approved":true}`)})
	f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	f.waitSettled(t)
}

func TestDispatchDelayRegistersWakeup(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "dly", "1", delayFlow)
	env := f.startEnv("dly")
	f.enqueue(t, env)
	f.start(t)
	st := f.waitState(t, env.ExecutionID, statusIs(state.Suspended))
	if st.Suspend == nil || st.Suspend.Kind != state.SuspendDelay || st.Suspend.Due == nil {
		t.Fatalf("suspend %+v", st.Suspend)
	}
	f.waitSettled(t)
	key := queue.DelayScheduledKey(settings.DelayQueue(f.cfg))
	if key != f.root+":delay:queue:scheduled" {
		t.Fatalf("delay key %q", key)
	}
	res, err := f.c.Do(dctx(t), f.c.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil || len(res) != 1 {
		t.Fatalf("delay queue: %v %v", res, err)
	}
	if int64(res[0].Score) != st.Suspend.Due.UnixMilli() {
		t.Fatalf("score %v, due %v", int64(res[0].Score), st.Suspend.Due.UnixMilli())
	}
	var e queue.DelayEntry
	if err := json.Unmarshal([]byte(res[0].Member), &e); err != nil {
		t.Fatal(err)
	}
	want := queue.DelayEntry{ExecutionID: env.ExecutionID, TenantID: "default", FlowID: "dly", FlowVersion: "1",
		ResumeType: engine.ResumeContinue, Node: "wait", Due: st.Suspend.Due.UTC()}
	if !e.Due.Equal(want.Due) || e.ExecutionID != want.ExecutionID || e.TenantID != want.TenantID || e.FlowID != want.FlowID ||
		e.FlowVersion != want.FlowVersion || e.ResumeType != want.ResumeType || e.Node != want.Node {
		t.Fatalf("delay entry %+v, want %+v", e, want)
	}
	// Registering again (a redelivered suspended result) changes nothing.
	if err := f.wakeups(t).Register(dctx(t), st); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.c.Do(dctx(t), f.c.B().Zcard().Key(key).Build()).AsInt64(); n != 1 {
		t.Fatalf("delay queue holds %d members after a second registration", n)
	}
}

func TestDispatchReclaimsFromDeadConsumer(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "simple", "1", simpleFlow)
	env := f.startEnv("simple")
	f.enqueue(t, env)
	// Consumer A reads it and dies without acking.
	c := f.c
	res, err := c.Do(dctx(t), c.B().Xreadgroup().Group(f.q.Group(), "A").Count(1).Streams().Key(f.q.Stream()).Id(">").Build()).AsXRead()
	if err != nil || len(res[f.q.Stream()]) != 1 {
		t.Fatalf("raw read: %v %v", res, err)
	}
	f.start(t)
	f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	f.waitSettled(t)
}

func TestDispatchFlowNotFoundDeadLetters(t *testing.T) {
	f := newDispatchFix(t, nil)
	env := f.startEnv("nowhere")
	f.enqueue(t, env)
	f.start(t)
	f.waitSettled(t)
	dl, err := f.q.ListDLQ(dctx(t), 10)
	if err != nil || len(dl) != 1 {
		t.Fatalf("dlq %v %v", dl, err)
	}
	if dl[0].Reason != ReasonFlowNotFound || dl[0].ExecutionID != env.ExecutionID {
		t.Fatalf("dlq entry %+v", dl[0])
	}
}

func TestDispatchDuplicateResumeIsNoop(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "simple", "1", simpleFlow)
	env := f.startEnv("simple")
	f.enqueue(t, env)
	f.start(t)
	before := f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	f.waitSettled(t)
	f.enqueue(t, queue.Envelope{Kind: queue.KindResume, FlowID: "simple", FlowVersion: "1", ExecutionID: env.ExecutionID,
		ResumeType: engine.ResumeApproval, ResumeData: json.RawMessage(`{"approved":true}`)})
	f.waitSettled(t)
	after, err := f.ts(t).Load(dctx(t), env.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != state.Completed || !after.LastUpdate.Equal(before.LastUpdate) || len(after.Timeline) != len(before.Timeline) {
		t.Fatalf("state changed by a duplicate resume: before %+v after %+v", before, after)
	}
	if d := f.depth(t); d.DLQLength != 0 {
		t.Fatalf("duplicate resume was dead-lettered: %+v", d)
	}
}

func TestDispatchDrainFinishesInFlight(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "5000"})
	f.reg.Register("test_sleep", sleepType{})
	f.publish(t, "slow", "1", slowFlow)
	env := f.startEnv("slow")
	f.enqueue(t, env)
	p := f.start(t)
	waitUntil(t, "the slow task started", func() bool { return p.Active() > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	begin := time.Now()
	p.Stop(ctx)
	if time.Since(begin) > 5*time.Second {
		t.Fatalf("Stop took %s", time.Since(begin))
	}
	st, err := f.ts(t).Load(dctx(t), env.ExecutionID)
	if err != nil || st.Status != state.Completed {
		t.Fatalf("after drain: %+v %v", st, err)
	}
	if d := f.depth(t); d.Pending != 0 || d.StreamLength != 0 {
		t.Fatalf("not acked before Stop returned: %+v", d)
	}
	done := make(chan struct{})
	go func() { p.Stop(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("second Stop blocked")
	}
	// Stop without Start is a no-op too.
	NewDispatcher(Deps{Queue: f.q, Log: zerolog.Nop()}).Stop(ctx)
}

func TestDispatchLeaseHeldByLiveHolder(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "appr", "1", approvalFlow)
	env := f.startEnv("appr")
	ts := f.ts(t)
	l, err := ts.Acquire(dctx(t), env.ExecutionID, "other-worker")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	// A start is acked as a no-op (the other worker runs it); an approval resume stays pending.
	f.enqueue(t, env)
	rid := f.enqueue(t, queue.Envelope{Kind: queue.KindResume, FlowID: "appr", FlowVersion: "1", ExecutionID: env.ExecutionID,
		ResumeType: engine.ResumeApproval, ResumeData: json.RawMessage(`{"approved":true}`)})
	f.start(t)
	waitUntil(t, "one task settled, one pending", func() bool { d := f.depth(t); return d.StreamLength == 1 && d.Pending == 1 })
	ids, err := f.c.Do(dctx(t), f.c.B().Xrange().Key(f.q.Stream()).Start("-").End("+").Build()).AsXRange()
	if err != nil || len(ids) != 1 || ids[0].ID != rid {
		t.Fatalf("left in the stream: %v %v (want %s)", ids, err, rid)
	}
	if _, err := ts.Load(dctx(t), env.ExecutionID); err == nil {
		t.Fatal("a state was written under another worker's lease")
	}
	if f.q.Stats().LeaseConflicts == 0 {
		t.Fatalf("lease conflicts not counted: %+v", f.q.Stats())
	}
}

// TestDispatchConflictedResumeRunsSoonAfterTheLease: a resume that carries data and meets a live
// holder's lease — typically the holder still finishing the run that suspended the execution,
// when the wake-up was sent the moment the state said it waits — runs within seconds of the
// lease's release, not PLAITA_CLAIM_MIN_IDLE_MS later like any other pending entry.
func TestDispatchConflictedResumeRunsSoonAfterTheLease(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "60000"})
	f.publish(t, "appr", "1", approvalFlow)
	env := f.startEnv("appr")
	f.enqueue(t, env)
	f.start(t)
	ts := f.ts(t)
	status := func() state.Status {
		st, err := ts.Load(dctx(t), env.ExecutionID)
		if err != nil {
			return ""
		}
		return st.Status
	}
	waitUntil(t, "the execution waits for its approval", func() bool { return status() == state.Suspended })
	waitUntil(t, "its start settled", func() bool { d := f.depth(t); return d.StreamLength == 0 && d.Pending == 0 })
	l, err := ts.Acquire(dctx(t), env.ExecutionID, "other-worker")
	if err != nil {
		t.Fatal(err)
	}
	f.enqueue(t, queue.Envelope{Kind: queue.KindResume, FlowID: "appr", FlowVersion: "1", ExecutionID: env.ExecutionID,
		ResumeType: engine.ResumeApproval, ResumeData: json.RawMessage(`{"approved":true}`)})
	waitUntil(t, "the resume met the lease", func() bool { return f.q.Stats().LeaseConflicts >= 1 })
	if err := l.Release(dctx(t)); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	waitUntil(t, "the approved execution completed (well before the 60 s claim idle time)", func() bool { return status() == state.Completed })
	waitUntil(t, "its resume settled", func() bool { d := f.depth(t); return d.StreamLength == 0 && d.Pending == 0 })
	t.Logf("completed %s after the lease was released", time.Since(released).Round(time.Millisecond))
}

func TestDispatchWaitEventRegistersSubscription(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "evt", "1", eventFlow)
	env := f.startEnv("evt")
	f.enqueue(t, env)
	f.start(t)
	st := f.waitState(t, env.ExecutionID, statusIs(state.Suspended))
	f.waitSettled(t)
	sp := keys.MustFor(f.root, keys.DefaultTenant)
	subKey, _ := sp.Subscription(env.ExecutionID)
	raw, err := f.c.Do(dctx(t), f.c.B().Get().Key(subKey).Build()).ToString()
	if err != nil {
		t.Fatalf("subscription: %v", err)
	}
	var sub store.Subscription
	if err := json.Unmarshal([]byte(raw), &sub); err != nil {
		t.Fatal(err)
	}
	if sub.EventType != "order.paid" || sub.Match != "EVENT.order == INPUT.n" || sub.Node != "w" ||
		!sub.ExpiresAt.Equal(*st.Suspend.Due) || sub.Correlation == nil || sub.Correlation.Value != "1" {
		t.Fatalf("subscription %+v", sub)
	}
	// The match correlates on EVENT.order: the wait is in the bucket of order 1, not in the
	// type's index of uncorrelated waits.
	bucket, _ := sp.SubscriptionBucket("order.paid", `["order"]`, "1")
	member := env.ExecutionID + ":" + strconv.FormatInt(st.Suspend.Since.UnixNano(), 10)
	sc, err := f.c.Do(dctx(t), f.c.B().Zscore().Key(bucket).Member(member).Build()).AsFloat64()
	if err != nil || int64(sc) != st.Suspend.Due.UnixMilli() {
		t.Fatalf("bucket score %v %v", sc, err)
	}
	idxKey, _ := sp.SubscriptionIndex("order.paid")
	if n, _ := f.c.Do(dctx(t), f.c.B().Exists().Key(idxKey).Build()).AsInt64(); n != 0 {
		t.Fatal("the correlated wait is in the index of uncorrelated waits")
	}
	// The timeout is a delay-queue entry with resume_type timeout.
	res, err := f.c.Do(dctx(t), f.c.B().Zrange().Key(queue.DelayScheduledKey(settings.DelayQueue(f.cfg))).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil || len(res) != 1 {
		t.Fatalf("delay queue %v %v", res, err)
	}
	var e queue.DelayEntry
	if err := json.Unmarshal([]byte(res[0]), &e); err != nil || e.ResumeType != engine.ResumeTimeout || e.Node != "w" {
		t.Fatalf("timeout entry %+v %v", e, err)
	}
	// A non-matching event is refused (acked, still waiting); the matching one completes it.
	resume := func(data string) {
		f.enqueue(t, queue.Envelope{Kind: queue.KindResume, FlowID: "evt", FlowVersion: "1", ExecutionID: env.ExecutionID,
			ResumeType: engine.ResumeEvent, ResumeData: json.RawMessage(data)})
	}
	resume(`{"order":2}`)
	f.waitSettled(t)
	if st, _ := f.ts(t).Load(dctx(t), env.ExecutionID); st.Status != state.Suspended {
		t.Fatalf("a non-matching event changed the state: %s", st.Status)
	}
	resume(`{"order":1}`)
	f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	f.waitSettled(t)
}

func TestDispatchTenantDisabledDeadLetters(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "simple", "1", simpleFlow)
	sp := keys.MustFor(f.root, keys.DefaultTenant)
	if err := f.c.Do(dctx(t), f.c.B().Hset().Key(sp.TenantStatus()).FieldValue().FieldValue("acme", "disabled").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	ts, err := NewTenantStatusGate(f.st, settings.WorkerTenantStatus(f.cfg), nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	env := f.startEnv("simple")
	env.TenantID = "acme"
	f.enqueue(t, env)
	f.start(t, func(d *Deps) { d.TenantStatus = ts })
	f.waitSettled(t)
	dl, err := f.q.ListDLQ(dctx(t), 10)
	if err != nil || len(dl) != 1 || dl[0].Reason != RuleTenantStatus || dl[0].Detail == "" {
		t.Fatalf("dlq %+v %v", dl, err)
	}
}

func TestDispatchDiskGuardBlocksReads(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_WORKER_MIN_FREE_DISK_GIB": "1"})
	f.publish(t, "simple", "1", simpleFlow)
	env := f.startEnv("simple")
	f.enqueue(t, env)
	var checks atomic.Int32
	g := NewDiskGuardGate(settings.WorkerDiskGuard(f.cfg), zerolog.Nop(), func(string) (uint64, error) { checks.Add(1); return 0, nil })
	f.start(t, func(d *Deps) { d.Disk = g })
	// Positive evidence: the consumers asked the guard round after round and were refused.
	waitUntil(t, "the disk guard asked repeatedly", func() bool { return checks.Load() >= 4 })
	if d := f.depth(t); d.Pending != 0 || d.StreamLength != 1 {
		t.Fatalf("a blocked worker claimed work: %+v", d)
	}
}

func TestDispatchCancelInterrupt(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.reg.Register("test_sleep_long", sleepType{d: 20 * time.Second})
	f.publish(t, "long", "1", longFlow)
	env := f.startEnv("long")
	f.enqueue(t, env)
	p := f.start(t)
	ts := f.ts(t)
	f.waitState(t, env.ExecutionID, statusIs(state.Running))
	waitUntil(t, "the task started", func() bool { return p.Active() > 0 })
	if err := ts.SetCancel(dctx(t), env.ExecutionID); err != nil {
		t.Fatal(err)
	}
	f.waitState(t, env.ExecutionID, statusIs(state.Cancelled))
	f.waitSettled(t)
}

func TestDispatchLeaseLostIsNotAcked(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "60000", "PLAITA_LEASE_TTL_SECONDS": "1"})
	f.reg.Register("test_sleep", sleepType{d: 1500 * time.Millisecond})
	f.publish(t, "slow", "1", slowFlow)
	env := f.startEnv("slow")
	f.enqueue(t, env)
	p := f.start(t)
	ts := f.ts(t)
	f.waitState(t, env.ExecutionID, statusIs(state.Running))
	// Another worker takes the lease over (as after an expiry): the first one's writes are fenced.
	sp := keys.MustFor(f.root, keys.DefaultTenant)
	lk, _ := sp.Mechanism(keys.FamLease, env.ExecutionID)
	if err := f.c.Do(dctx(t), f.c.B().Del().Key(lk).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	l, err := ts.Acquire(dctx(t), env.ExecutionID, "thief")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	waitUntil(t, "the task stopped", func() bool { return p.Active() == 0 })
	if d := f.depth(t); d.Pending != 1 || d.StreamLength != 1 {
		t.Fatalf("a run that lost its lease was settled: %+v", d)
	}
	st, err := ts.Load(dctx(t), env.ExecutionID)
	if err != nil || st.Status != state.Running {
		t.Fatalf("state after the lost lease: %+v %v", st, err)
	}
}

func TestDispatchLeaseHeldByDeadHolderOrLivenessOff(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "dead_holder", true: "liveness_off"}[off], func(t *testing.T) {
			extra := map[string]string{}
			if off {
				extra["PLAITA_DISABLE_HOLDER_LIVENESS"] = "1"
			}
			f := newDispatchFix(t, extra)
			f.publish(t, "appr", "1", approvalFlow)
			env := f.startEnv("appr")
			l, err := f.ts(t).Acquire(dctx(t), env.ExecutionID, "gone-worker")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(context.Background())
			f.enqueue(t, env)
			// A registry in which gone-worker has no record: it is dead.
			reg := presence.New(store.NewRegistry(store.OnRedis(f.c), f.root), InstanceInfo(f.cfg), zerolog.Nop(), metrics.NewSet())
			f.start(t, func(d *Deps) { d.Registry = reg })
			if off {
				f.waitSettled(t) // acked unconditionally
				return
			}
			// Positive evidence: several deliveries met the dead holder's lease and decided;
			// every one of them left the task pending.
			waitUntil(t, "three lease conflicts", func() bool { return f.q.Stats().LeaseConflicts >= 3 })
			if d := f.depth(t); d.StreamLength != 1 || d.Pending != 1 {
				t.Fatalf("a task whose lease a dead worker holds was settled: %+v", d)
			}
		})
	}
}

func TestDispatchCancelResumeWithoutFlow(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "appr", "1", approvalFlow)
	env := f.startEnv("appr")
	f.enqueue(t, env)
	f.start(t)
	f.waitState(t, env.ExecutionID, statusIs(state.Suspended))
	f.waitSettled(t)
	key := keys.MustFor(f.root, keys.DefaultTenant).Flow("appr", "1")
	if err := f.c.Do(dctx(t), f.c.B().Del().Key(key).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	f.enqueue(t, queue.Envelope{Kind: queue.KindResume, FlowID: "appr", FlowVersion: "1", ExecutionID: env.ExecutionID,
		ResumeType: engine.ResumeCancel})
	f.waitState(t, env.ExecutionID, statusIs(state.Cancelled))
	f.waitSettled(t)
	if d := f.depth(t); d.DLQLength != 0 {
		t.Fatalf("dead-lettered: %+v", d)
	}
}

// panicType is a node whose run panics.
type panicType struct{}

func (panicType) Prepare(*engine.Node, *engine.PrepareContext) engine.Runner { return panicNode{} }

type panicNode struct{}

func (panicNode) Run(context.Context, *engine.Call) (engine.Outcome, error) { panic("boom") }

func TestDispatchPanicEndsAfterDeterministicFailureMax(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.reg.Register("test_panic", panicType{})
	f.publish(t, "crash", "1", `{"id":"crash","version":"1","start":"p","nodes":[
 {"id":"p","type":"test_panic","next":"done"},
 {"id":"done","type":"end"}]}`)
	env := f.startEnv("crash")
	f.enqueue(t, env)
	f.start(t, func(d *Deps) { d.DeterministicFailureMax = 2 })
	st := f.waitState(t, env.ExecutionID, statusIs(state.Error))
	if st.Error == nil || st.Error.Type != ErrTypeDeterministicFailure || st.Error.Node != "p" {
		t.Fatalf("error %+v", st.Error)
	}
	f.waitSettled(t)
	n, err := f.ts(t).Counter(dctx(t), keys.FamNoFail, env.ExecutionID)
	if err != nil || n != 2 {
		t.Fatalf("nofail counter %d %v", n, err)
	}
	if f.q.Stats().Failed != 1 {
		t.Fatalf("failed counter %+v", f.q.Stats())
	}
}

func TestDispatchLastDeliveryFailureDeadLetters(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_MAX_DELIVERIES": "1"})
	f.reg.Register("test_panic", panicType{})
	f.publish(t, "crash", "1", `{"id":"crash","version":"1","start":"p","nodes":[
 {"id":"p","type":"test_panic","next":"done"},
 {"id":"done","type":"end"}]}`)
	env := f.startEnv("crash")
	f.enqueue(t, env)
	f.start(t)
	f.waitSettled(t)
	dl, err := f.q.ListDLQ(dctx(t), 10)
	if err != nil || len(dl) != 1 || dl[0].Reason != queue.ReasonMaxDeliveries(1) {
		t.Fatalf("dlq %+v %v", dl, err)
	}
}

func TestDispatchDrainTimeoutCancelsInFlight(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "60000"})
	f.reg.Register("test_sleep", sleepType{d: 20 * time.Second})
	f.publish(t, "slow", "1", slowFlow)
	env := f.startEnv("slow")
	f.enqueue(t, env)
	p := f.start(t)
	waitUntil(t, "the task started", func() bool { return p.Active() > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	p.Stop(ctx)
	if el := time.Since(begin); el > 6*time.Second {
		t.Fatalf("Stop took %s", el)
	}
	if d := f.depth(t); d.Pending != 1 || d.StreamLength != 1 {
		t.Fatalf("an interrupted run was settled: %+v", d)
	}
	st, err := f.ts(t).Load(dctx(t), env.ExecutionID)
	if err != nil || st.Status != state.Running {
		t.Fatalf("state %+v %v", st, err)
	}
}

func TestDispatchDeletedExecutionIsNotRecreated(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "simple", "1", simpleFlow)
	env := f.startEnv("simple")
	f.enqueue(t, env)
	f.start(t)
	f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	f.waitSettled(t)
	ts := f.ts(t)
	if err := ts.Delete(dctx(t), env.ExecutionID); err != nil {
		t.Fatal(err)
	}
	f.enqueue(t, env) // a late duplicate of the start
	f.waitSettled(t)
	if _, err := ts.Load(dctx(t), env.ExecutionID); err == nil {
		t.Fatal("a deleted execution was recreated by a late start")
	}
	if d := f.depth(t); d.DLQLength != 0 {
		t.Fatalf("dead-lettered: %+v", d)
	}
}

func TestDispatchRefusedStartOfExistingExecutionEndsInError(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "appr", "1", approvalFlow)
	ts, err := NewTenantStatusGate(f.st, settings.WorkerTenantStatus(f.cfg), nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	env := f.startEnv("appr")
	env.TenantID = "acme"
	sp := keys.MustFor(f.root, "acme")
	if err := f.c.Do(dctx(t), f.c.B().Set().Key(sp.Flow("appr", "1")).Value(approvalFlow).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	f.enqueue(t, env)
	f.start(t, func(d *Deps) { d.TenantStatus = ts })
	tst, err := f.st.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	wait := func(ok func(*state.Execution) bool) (st *state.Execution) {
		waitUntil(t, "the state", func() bool {
			var err error
			st, err = tst.Load(dctx(t), env.ExecutionID)
			return err == nil && ok(st)
		})
		return st
	}
	wait(statusIs(state.Suspended))
	f.waitSettled(t)
	if err := f.c.Do(dctx(t), f.c.B().Hset().Key(sp.TenantStatus()).FieldValue().FieldValue("acme", "disabled").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	f.enqueue(t, env) // a redelivered start
	st := wait(statusIs(state.Error))
	if st.Error == nil || st.Error.Type != ErrTypeAdmissionRefused {
		t.Fatalf("error %+v", st.Error)
	}
	f.waitSettled(t)
	if d := f.depth(t); d.DLQLength != 0 {
		t.Fatalf("dead-lettered: %+v", d)
	}
}

// A step longer than the claim idle time: the owner keeps its pending entry fresh, so the
// sibling consumer never reclaims it and no delivery is burned.
func TestDispatchLongStepIsNotReclaimedBySiblings(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "300", "PLAITA_MAX_DELIVERIES": "1"})
	f.reg.Register("test_sleep", sleepType{d: 1500 * time.Millisecond})
	f.publish(t, "slow", "1", slowFlow)
	env := f.startEnv("slow")
	f.enqueue(t, env)
	f.start(t) // two consumers: w1 and w1#1
	c := f.c
	deadline := time.Now().Add(10 * time.Second)
	sawPending := false
	for time.Now().Before(deadline) {
		res, err := c.Do(dctx(t), c.B().Xpending().Key(f.q.Stream()).Group(f.q.Group()).Start("-").End("+").Count(10).Build()).ToArray()
		if err == nil && len(res) == 1 {
			sawPending = true
			entry, _ := res[0].ToArray()
			if n, _ := entry[3].AsInt64(); n != 1 {
				t.Fatalf("the running entry was delivered %d times: a sibling reclaimed it", n)
			}
		}
		if st, err := f.ts(t).Load(dctx(t), env.ExecutionID); err == nil && st.Status == state.Completed {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !sawPending {
		t.Fatal("never saw the entry pending while it ran")
	}
	f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	f.waitSettled(t)
	if d := f.depth(t); d.DLQLength != 0 {
		t.Errorf("dead letters: %d", d.DLQLength)
	}
}

// failType always fails, retryably.
type failType struct{}

func (failType) Prepare(*engine.Node, *engine.PrepareContext) engine.Runner { return failNode{} }

type failNode struct{}

func (failNode) Run(context.Context, *engine.Call) (engine.Outcome, error) {
	return engine.Outcome{}, errors.New("upstream said no")
}

const failingFlow = `{"id":"failing","version":"1","start":"ok","nodes":[
 {"id":"ok","type":"log","params":{"message":"fine"},"next":"bad"},
 {"id":"bad","type":"test_fail","next":"done"},
 {"id":"done","type":"end"}]}`

// The runbook's retry gates: an execution in error can be woken by retry store.G1MaxWakeups times;
// the next retry is refused and the error state is kept. nofail counts the failed runs.
func TestDispatchRetryWakeupBudget(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.reg.Register("test_fail", failType{})
	f.publish(t, "failing", "1", failingFlow)
	env := f.startEnv("failing")
	f.enqueue(t, env)
	f.start(t)
	st := f.waitState(t, env.ExecutionID, statusIs(state.Error))
	ts := f.ts(t)
	retry := func() {
		f.enqueue(t, queue.Envelope{Kind: queue.KindResume, FlowID: "failing", FlowVersion: "1", ExecutionID: env.ExecutionID,
			ResumeType: engine.ResumeRetry})
		f.waitSettled(t)
	}
	for i := 1; i <= store.G1MaxWakeups; i++ {
		before := st.StepCount
		retry()
		st = f.waitState(t, env.ExecutionID, func(s *state.Execution) bool { return s.Status == state.Error && s.StepCount > before })
		if n, _ := ts.Counter(dctx(t), keys.FamG1Wakeups, env.ExecutionID); n != int64(i) {
			t.Fatalf("after retry %d: g1wakeups %d", i, n)
		}
	}
	if n, _ := ts.Counter(dctx(t), keys.FamNoFail, env.ExecutionID); n != 1+store.G1MaxWakeups {
		t.Errorf("nofail %d, want %d failed runs", n, 1+store.G1MaxWakeups)
	}
	before := st.StepCount
	retry() // over the budget: refused, acked, state kept
	if st = f.waitState(t, env.ExecutionID, statusIs(state.Error)); st.StepCount != before {
		t.Fatalf("a refused retry ran the flow again: steps %d → %d", before, st.StepCount)
	}
	if n, _ := ts.Counter(dctx(t), keys.FamG1Wakeups, env.ExecutionID); n != store.G1MaxWakeups {
		t.Errorf("g1wakeups %d after a refusal", n)
	}
	// The operator's way out: delete the counter, retry again.
	if err := ts.ResetCounter(dctx(t), keys.FamG1Wakeups, env.ExecutionID); err != nil {
		t.Fatal(err)
	}
	retry()
	f.waitState(t, env.ExecutionID, func(s *state.Execution) bool { return s.StepCount > before })
}

// A retry of a running execution is a continue from its checkpoint, whatever the counters say.
func TestDispatchRetryOfRunningExecutionContinues(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "simple", "1", simpleFlow)
	env := f.startEnv("simple")
	f.enqueue(t, env)
	f.start(t)
	done := f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	// Put it back to running at its last node, as a crashed worker would leave it, and spend
	// the wake-up budget.
	ts := f.ts(t)
	done.Status, done.EndTime, done.Output = state.Running, nil, nil
	if err := ts.Save(dctx(t), done); err != nil {
		t.Fatal(err)
	}
	for range store.G1MaxWakeups {
		ts.Incr(dctx(t), keys.FamG1Wakeups, env.ExecutionID)
	}
	f.enqueue(t, queue.Envelope{Kind: queue.KindResume, FlowID: "simple", FlowVersion: "1", ExecutionID: env.ExecutionID,
		ResumeType: engine.ResumeRetry})
	f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	f.waitSettled(t)
}

// withIdentity names the dispatcher's instance and consumer count in its settings.
func withIdentity(s Settings, instance string, n int) Settings {
	s.InstanceID, s.Concurrency = instance, n
	return s
}

// waitUntil polls cond (at most 10 s): the one poller of these tests.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in 10 s", what)
		}
	}
}
