package control

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/service"
	"plaita/store"
	"plaita/store/sqlite"
)

// The local runner runs local mode's executions in the console's process: a start or a resume
// handed to it by an operation, a due time (a delay, a wait's or an approval's timeout) when its
// timer fires, an event delivered to a wait. It is the worker, filter and delay role of local
// mode, with what they guarantee in cluster mode and no more than one process can: one
// execution is run by one goroutine at a time (jobs are sharded by execution id), every step is
// saved before the next runs (the executor, over store/sqlite), a due time is kept in the state
// and armed again when the runner starts. What it cannot give is at-least-once delivery: a
// console that stops mid-step leaves the execution running, and the next start's orphan
// reconcile suspends or fails it (sqlite.Executions.ReconcileOrphans) instead of replaying the
// step's side effects on its own.

// localShardQueue bounds the jobs waiting on one shard: an operation that finds it full waits
// for room (within its context) rather than dropping the job.
const localShardQueue = 1024

// localJob is one thing to run.
type localJob struct {
	tenant, id      string
	flowID, version string
	start           *engine.StartRequest
	resume          *engine.ResumeRequest
	// mark, when set, is the suspension the job answers (a due time, an event): it runs only
	// while the execution is still suspended at that node since that time, so a timer or an
	// event that lost a race with another resume wakes nothing.
	mark *suspensionMark
	// orphan: the resume is a continue of an execution the orphan reconcile suspended.
	orphan bool
}

type suspensionMark struct {
	node  string
	since time.Time
}

func (m *suspensionMark) holds(st *state.Execution) bool {
	return st.Status == state.Suspended && st.Suspend != nil && st.Suspend.Node == m.node && st.Suspend.Since.Equal(m.since)
}

// markOf is the mark of st's suspension.
func markOf(st *state.Execution) *suspensionMark {
	return &suspensionMark{node: st.Suspend.Node, since: st.Suspend.Since}
}

type localRunner struct {
	svc    service.Base
	l      *Local
	shards []chan localJob

	mu       sync.Mutex
	timers   map[string]*time.Timer
	stopping bool
	inflight sync.WaitGroup

	// reconciled is what the start-up orphan reconcile did (nil before it ran).
	reconciled *sqlite.ReconcileResult
	reconErr   error
}

func newLocalRunner(l *Local) *localRunner {
	r := &localRunner{l: l, timers: map[string]*time.Timer{}, shards: make([]chan localJob, l.d.Workers)}
	for i := range r.shards {
		r.shards[i] = make(chan localJob, localShardQueue)
	}
	return r
}

// Start reconciles the executions a stopped console left running, arms the timers of every
// suspended execution's due time, then runs the jobs. A failure of the reconcile or of the
// scan (the database) fails the start.
func (r *localRunner) Start(ctx context.Context) error {
	l := r.l
	res, err := l.x.ReconcileOrphans(ctx, l.d.Orphans, l.now())
	r.mu.Lock()
	r.reconciled, r.reconErr = &res, err
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("local mode: orphan reconcile: %w", err)
	}
	if len(res.Changed) > 0 || len(res.Failed) > 0 {
		l.d.Log.Warn().Str("event", "console.orphans_reconciled").Str("mode", string(res.Mode)).Int("running", res.Running).
			Int("changed", len(res.Changed)).Int("failed", len(res.Failed)).Int("skipped", len(res.Skipped)).
			Msg("executions the console was running when it stopped were settled (PLAITA_CONSOLE_RECONCILE_ORPHANS); resume a suspended one with continue")
	}
	armed := 0
	for after := ""; ; {
		page, next, err := l.x.Suspended(ctx, sqlite.SuspendedQuery{AllTenants: true, After: after, Limit: sqlite.MaxLimit})
		if err != nil {
			return fmt.Errorf("local mode: read the suspended executions: %w", err)
		}
		for _, st := range page {
			if r.arm(st) {
				armed++
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	l.d.Log.Info().Str("event", "console.local_runner").Int("workers", len(r.shards)).Int("timers", armed).
		Msg("local runner started: executions run in this process")
	return r.svc.Run(ctx, r.work)
}

// Stop stops taking jobs, lets the runs in flight finish within ctx, then cancels them: a run
// cut short stays running and is settled by the next start's orphan reconcile. Timers are
// disarmed (their due times are in the states: the next start arms them again).
func (r *localRunner) Stop(ctx context.Context) {
	r.mu.Lock()
	r.stopping = true
	for id, t := range r.timers {
		t.Stop()
		delete(r.timers, id)
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	r.svc.Stop(ctx)
}

// Runner is local mode's runner, a service of the console's lifecycle: its Start reconciles
// the orphans and arms the timers before it runs jobs; its Stop drains.
func (l *Local) Runner() service.Service { return l.run }

// ReconcileResult is what an orphan reconcile of local mode did.
type ReconcileResult = sqlite.ReconcileResult

// Reconciled is what the start-up orphan reconcile did, for /health (nil before it ran).
func (l *Local) Reconciled() (*ReconcileResult, error) {
	l.run.mu.Lock()
	defer l.run.mu.Unlock()
	return l.run.reconciled, l.run.reconErr
}

// work runs one goroutine per shard until ctx ends.
func (r *localRunner) work(ctx context.Context) {
	var wg sync.WaitGroup
	for _, ch := range r.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-ch:
					r.do(ctx, j)
					r.inflight.Done()
				}
			}
		}()
	}
	wg.Wait()
}

// submit queues a job on its execution's shard.
func (r *localRunner) submit(ctx context.Context, j localJob) error {
	r.mu.Lock()
	stopping := r.stopping
	if !stopping {
		r.inflight.Add(1)
	}
	r.mu.Unlock()
	if stopping {
		return &Refusal{Class: Limited, Code: "draining", Message: "the console is stopping: it runs nothing new", RetryAfter: time.Second}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(j.id))
	select {
	case r.shards[h.Sum32()%uint32(len(r.shards))] <- j:
		return nil
	case <-ctx.Done():
		r.inflight.Done()
		return fmt.Errorf("the local runner is busy: %w", ctx.Err())
	}
}

// resumeJob is a resume of st by the runner.
func (l *Local) resumeJob(tenant string, st *state.Execution, rt engine.ResumeType, data any, key string) localJob {
	j := localJob{tenant: tenant, id: st.ExecutionID, flowID: st.FlowID, version: st.FlowVersion,
		resume: &engine.ResumeRequest{ExecutionID: st.ExecutionID, Type: rt, Data: data, Key: key}}
	if st.Status == state.Suspended && st.Suspend != nil && st.Suspend.Kind == sqlite.SuspendOrphan {
		j.orphan = rt == engine.ResumeContinue
	}
	return j
}

// executor is the engine over the local storage.
func (l *Local) executor() *engine.Executor {
	ex := engine.NewExecutor(l.x)
	ex.Cancel = l.x
	ex.Settings = l.d.Engine
	ex.Log = l.d.Log
	if l.d.Now != nil {
		ex.Clock = localClock{now: l.d.Now}
	}
	return ex
}

type localClock struct{ now func() time.Time }

func (c localClock) Now() time.Time { return c.now() }
func (c localClock) Sleep(ctx context.Context, d time.Duration) error {
	return engine.SystemClock{}.Sleep(ctx, d)
}

// do runs one job to the execution's next settle point: suspended, terminal, or the end of
// what it could do (a failed save: the state stays as last saved).
func (r *localRunner) do(ctx context.Context, j localJob) {
	log := r.l.d.Log.With().Str("execution_id", j.id).Str("tenant_id", j.tenant).Logger()
	f, _, err := r.l.publishedFlow(ctx, j.tenant, j.flowID, j.version)
	if err != nil {
		log.Error().Str("event", "local.flow_unavailable").Err(err).Msg("the flow of a local execution cannot be read: nothing ran")
		return
	}
	ex := r.l.executor()
	var st *state.Execution
	switch {
	case j.start != nil:
		if err = r.begin(ctx, f, *j.start); err != nil {
			break
		}
		st, err = ex.Start(ctx, f, *j.start)
	case j.mark != nil || j.orphan:
		var gen int64
		var cur *state.Execution
		if cur, gen, err = r.l.x.LoadGeneration(ctx, j.id); err != nil {
			break
		}
		if j.mark != nil && !j.mark.holds(cur) {
			return // it moved on since: the timer or the event wakes nothing
		}
		if j.orphan {
			if st, err = r.continueOrphan(ctx, ex, f, cur, gen); err != nil {
				break
			}
			r.arm(st)
			return
		}
		st, err = ex.ResumeWith(ctx, f, *j.resume)
	default:
		st, err = ex.ResumeWith(ctx, f, *j.resume)
	}
	switch {
	case errors.Is(err, engine.ErrInvalidResume), errors.Is(err, engine.ErrEventMismatch), errors.Is(err, engine.ErrFlowChanged), errors.Is(err, engine.ErrFlowHashMismatch):
		// Checked when it was asked for; what changed since refuses it, and nothing was written.
		log.Warn().Str("event", "local.resume_refused").Err(err).Msg("a resume was refused by the execution as it is now")
	case err != nil:
		log.Error().Str("event", "local.run_failed").Err(err).Msg("a local run stopped before its execution settled; it is kept as last saved")
	}
	if st != nil {
		r.arm(st)
	}
}

// begin saves a new execution's state before its first step runs, as a worker's Begin does:
// a console that dies during that step leaves the execution running in the database (an
// orphan the next start settles), never a start that vanished. A start of an id that has a
// state already saves nothing (the executor goes on from that state, or leaves it).
func (r *localRunner) begin(ctx context.Context, f *engine.Flow, req engine.StartRequest) error {
	_, err := r.l.x.Load(ctx, req.ExecutionID)
	switch {
	case err == nil, errors.Is(err, store.ErrStateCorrupt):
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	st, err := engine.NewState(f, req, r.l.now())
	if err != nil {
		return nil // not storable: the executor ends it in error with the reason
	}
	return r.l.x.Save(ctx, st)
}

// continueOrphan sets an execution the orphan reconcile suspended running again at its
// checkpoint (a compare-and-swap: nothing else wrote it since it was read) and runs on.
func (r *localRunner) continueOrphan(ctx context.Context, ex *engine.Executor, f *engine.Flow, st *state.Execution, gen int64) (*state.Execution, error) {
	if st.Status != state.Suspended || st.Suspend == nil || st.Suspend.Kind != sqlite.SuspendOrphan {
		return st, nil
	}
	now := r.l.now().UTC()
	node := st.Suspend.Node
	st.Status, st.Suspend, st.LastUpdate = state.Running, nil, now
	engine.AppendTimeline(st, state.TimelineEntry{Time: state.Stamp(now), Event: "resumed", Node: node,
		Detail: "continue: the step the console was running when it stopped runs again"}, r.l.d.Engine().TimelineMax)
	if _, err := r.l.x.SaveIf(ctx, st, gen); err != nil {
		return st, err
	}
	return ex.Start(ctx, f, engine.StartRequest{ExecutionID: st.ExecutionID, TenantID: st.TenantID, FlowVersion: st.FlowVersion})
}

// arm sets the timer of st's due time (replacing the one it had), or disarms it when st has
// none; it reports whether a timer is armed.
func (r *localRunner) arm(st *state.Execution) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.timers[st.ExecutionID]; ok {
		t.Stop()
		delete(r.timers, st.ExecutionID)
	}
	if r.stopping || st.Status != state.Suspended || st.Suspend == nil || st.Suspend.Due == nil {
		return false
	}
	rt := engine.ResumeTimeout
	if st.Suspend.Kind == state.SuspendDelay {
		rt = engine.ResumeContinue
	}
	tenant := cmpTenant(st.TenantID)
	j := r.l.resumeJob(tenant, st, rt, nil, "local:due:"+st.Suspend.Node+":"+st.Suspend.Due.UTC().Format(time.RFC3339Nano))
	j.mark = markOf(st)
	id := st.ExecutionID
	r.timers[id] = time.AfterFunc(max(st.Suspend.Due.Sub(r.l.now()), 0), func() {
		r.mu.Lock()
		delete(r.timers, id)
		r.mu.Unlock()
		if err := r.submit(context.Background(), j); err != nil {
			r.l.d.Log.Warn().Str("event", "local.due_not_run").Str("execution_id", id).Err(err).
				Msg("a due time passed while the console stops: the next start arms it again")
		}
	})
	return true
}

// disarm drops an execution's timer.
func (r *localRunner) disarm(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.timers[id]; ok {
		t.Stop()
		delete(r.timers, id)
	}
}

// armed reports whether a timer is armed for the execution.
func (r *localRunner) armed(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.timers[id]
	return ok
}
