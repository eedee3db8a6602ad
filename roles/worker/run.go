package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/tick"
	"plaita/internal/tracing"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
)

// run runs the task's execution under its lease and decides the delivery from how the run
// ended.
func (p *Dispatcher) run(ctx context.Context, t *task, f *engine.Flow) Outcome {
	id := t.env.ExecutionID
	if !p.claimRun(id) {
		return p.conflictOutcome(ctx, t, p.self) // another consumer of this process runs it
	}
	defer p.endRun(id)
	input, data, err := payload(t.env)
	if err != nil {
		return deadLetter(queue.ReasonMalformed, err, "worker.task_permanent", "input or resume data is not JSON: dead-lettering")
	}
	if o, done := p.runFresh(ctx, t, f, input); done {
		return o
	}
	begun, err := p.begin(ctx, t, f, input)
	if err != nil {
		if begun != nil && begun.Lease != nil { // taken, but the state does not decode
			octx, cancel := settleCtx(ctx)
			_ = begun.Lease.Release(octx)
			cancel()
		}
		var held *store.LeaseHeldError
		if errors.As(err, &held) {
			return p.conflictOutcome(ctx, t, held.Holder)
		}
		return classify(err)
	}
	lease := begun.Lease
	t.lease, t.nofail = lease, begun.NoFail
	defer p.letGo(ctx, t)
	// A deleted execution stays deleted: a late start or resume must not recreate it.
	if begun.Tombstoned {
		return noop("worker.execution_deleted", "the execution was deleted (tombstone): task acked as a no-op")
	}
	if o, stale := p.staleWakeup(t, begun.State); stale { // stale.go
		return o
	}
	// The run's terminal save deletes the lease in the same script (one round trip fewer).
	lease.ReleaseOnTerminal = true
	rt := t.env.ResumeType
	if t.env.Kind != queue.KindStart && rt == engine.ResumeRetry {
		var o *Outcome
		if rt, o = p.retryBudget(ctx, t); o != nil {
			return *o
		}
	}
	p.dispatched.Inc()
	st, progressed, err := p.execute(ctx, t, f, rt, input, data)
	return p.decideRun(ctx, t, st, progressed, err)
}

// runFresh runs the first delivery of a start whose first step is a control node without a
// Begin round trip: the lease is taken by the run's first save (store.TenantStore.Deferred),
// which also checks that the execution does not exist yet. done is false when it is not a
// fresh start after all (a state, a tombstone, a cancel flag or a crash count is there, or
// another holder has the lease): nothing was written, and the caller runs the delivery the
// ordinary way. A redelivery (count > 1 or reclaimed) never comes here: it may meet a state.
func (p *Dispatcher) runFresh(ctx context.Context, t *task, f *engine.Flow, input any) (Outcome, bool) {
	env := t.env
	if env.Kind != queue.KindStart || t.dl.Count > 1 || t.dl.Reclaimed || f == nil || !f.StartsInstantly() {
		return Outcome{}, false
	}
	lease, err := t.ts.Deferred(env.ExecutionID, p.self)
	if err != nil || lease == nil {
		return Outcome{}, false // fencing off, or a bad id: the ordinary path says why
	}
	lease.ReleaseOnTerminal = true
	t.lease, t.nofail = lease, 0
	defer p.letGo(ctx, t)
	st, progressed, err := p.execute(ctx, t, f, env.ResumeType, input, nil)
	var held *store.LeaseHeldError
	if lease.Deferred() && (errors.Is(err, store.ErrNotFresh) || errors.As(err, &held)) {
		return Outcome{}, false
	}
	tookOver(ctx, t, lease)
	p.dispatched.Inc()
	return p.decideRun(ctx, t, st, progressed, err), true
}

// decideRun decides a run from how the engine ended it.
func (p *Dispatcher) decideRun(ctx context.Context, t *task, st *state.Execution, progressed bool, err error) Outcome {
	var pe *panicError
	if errors.As(err, &pe) {
		return p.deterministicFailure(ctx, t, pe)
	}
	if err != nil {
		return classify(err)
	}
	p.countFailures(ctx, t, st, progressed)
	o := settled(st)
	if o.Action == ActAck && st.Status == state.Suspended {
		octx, cancel := settleCtx(ctx)
		defer cancel()
		if err := p.d.Wakeups.Register(octx, st); err != nil {
			return p.wakeupFailed(octx, t, st, err) // wakeup.go
		}
	}
	return o
}

// payload decodes the start input or the resume data.
func payload(env queue.Envelope) (input, data any, err error) {
	raw, dst := env.Input, &input
	if env.Kind != queue.KindStart {
		raw, dst = env.ResumeData, &data
	}
	if len(raw) > 0 {
		err = json.Unmarshal(raw, dst)
	}
	return input, data, err
}

// execute runs the engine with the lease watchdog and the cancel listener. A panic is returned
// as a *panicError; a cancel flag raised mid-step settles the execution as cancelled from its
// last checkpoint, still under the lease.
func (p *Dispatcher) execute(ctx context.Context, t *task, f *engine.Flow, rt engine.ResumeType, input, data any) (*state.Execution, bool, error) {
	env, set := t.env, p.d.Settings
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if !set.DisableLeaseWatchdog {
		t.lease.OnLoss(runCtx, cancel)
	}
	if !set.DisableCancelInterrupt {
		defer p.cancelListener(runCtx, cancel, t.ts, env.ExecutionID).Stop()
	}
	// A run that moves any node forward clears the execution's deterministic-failure count.
	var progressed atomic.Bool
	hook := observe(p.d.Observer)
	ex := &engine.Executor{
		Store: t.lease.Storage(), Cancel: t.lease.Storage(), Clock: p.d.Clock, Log: p.log,
		OnEvent: func(ev engine.Event) {
			if ev.Entry.Event == "step" {
				progressed.Store(true)
			}
			if hook != nil {
				hook(ev)
			}
		},
		Settings:    func() engine.Settings { return p.d.Engine },
		Credentials: p.d.Credentials,
	}
	if tracing.Enabled() {
		ex.LeaseEpoch = t.lease.Generation // a method value is an allocation: only for the spans
	}
	st, err := func() (st *state.Execution, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = &panicError{value: r, stack: debug.Stack()}
			}
		}()
		if env.Kind == queue.KindStart {
			return ex.Start(runCtx, f, engine.StartRequest{ExecutionID: env.ExecutionID, TenantID: t.ts.Tenant(),
				FlowVersion: env.FlowVersion, Input: input, Trace: startTrace(env)})
		}
		// The carrier's identity: a copy (requeue, replay) keeps its source's.
		key := cmp.Or(env.SourceMessageID, t.dl.ID)
		return ex.ResumeWith(runCtx, f, engine.ResumeRequest{ExecutionID: env.ExecutionID, Type: rt, Data: data, Key: key})
	}()
	if cause := context.Cause(runCtx); err != nil && errors.Is(cause, store.ErrLeaseLost) {
		err = cause
	} else if err != nil && errors.Is(cause, errCancelInterrupt) && ctx.Err() == nil {
		t.log.Info().Str("event", "worker.cancel_interrupt").Msg("cancel flag set during a step: cancelling the execution")
		st, err = ex.Resume(ctx, f, env.ExecutionID, engine.ResumeCancel, nil)
		if errors.Is(err, engine.ErrInvalidResume) && st != nil && st.Status.Terminal() {
			err = nil // it ended meanwhile
		}
	}
	if err != nil && errors.Is(err, store.ErrLeaseLost) {
		trace.SpanFromContext(ctx).AddEvent("fencing refused the run's save: its lease was lost", trace.WithAttributes(attribute.Int64(tracing.AttrLeaseEpoch, t.lease.Generation())))
	}
	return st, progressed.Load(), err
}

// conflictOutcome decides a delivery whose execution lease holder holds.
func (p *Dispatcher) conflictOutcome(ctx context.Context, t *task, holder string) Outcome {
	if o, ok := p.wakeupConflict(ctx, t); ok { // stale.go
		return o
	}
	p.conflicts.Inc()
	p.d.Queue.IncLeaseConflicts()
	c := conflict{kind: t.env.Kind, resume: t.env.ResumeType, redelivery: t.dl.Reclaimed || t.dl.Count > 1, alive: true,
		livenessOff: p.d.Settings.DisableHolderLiveness}
	var aliveErr error
	if !c.livenessOff && p.d.Registry != nil && holder != "" {
		octx, cancel := settleCtx(ctx)
		ok, err := p.d.Registry.Alive(octx, holder)
		cancel()
		if err == nil {
			c.alive = ok
		}
		aliveErr = err // unknown: treat as alive
	}
	o := onConflict(c)
	t.log = t.log.With().Str("holder", holder).Logger()
	if aliveErr != nil {
		t.log = t.log.With().AnErr("liveness_error", aliveErr).Logger()
	}
	return o
}

// claimRun marks an execution as run by this process; false when a consumer already does.
func (p *Dispatcher) claimRun(id string) bool {
	p.runsMu.Lock()
	defer p.runsMu.Unlock()
	if _, ok := p.runs[id]; ok {
		return false
	}
	p.runs[id] = struct{}{}
	return true
}

func (p *Dispatcher) endRun(id string) {
	p.runsMu.Lock()
	delete(p.runs, id)
	p.runsMu.Unlock()
}

// begin takes the execution lease and reads what the run needs in one round trip (as acquire,
// a leftover lease of this instance is taken over). A start whose first step may take long
// passes its new state, written there when the execution has none, so it is visible while that
// step runs; one whose first step is instant (Flow.StartsInstantly) is first written at the end
// of that step, microseconds later — a state encoded and written less per execution.
func (p *Dispatcher) begin(ctx context.Context, t *task, f *engine.Flow, input any) (*store.Begun, error) {
	var fresh *state.Execution
	if env := t.env; env.Kind == queue.KindStart && f != nil && !f.StartsInstantly() {
		st, err := engine.NewState(f, engine.StartRequest{ExecutionID: env.ExecutionID, TenantID: t.ts.Tenant(),
			FlowVersion: env.FlowVersion, Input: input, Trace: startTrace(env)}, p.d.Clock.Now())
		if err == nil {
			fresh = st // else the executor ends it in error, as it would without this
		}
	}
	octx, cancel := settleCtx(ctx)
	defer cancel()
	b, err := t.ts.Begin(octx, t.env.ExecutionID, p.self, true, fresh)
	if fresh != nil && (errors.Is(err, store.ErrStateSerialization) || errors.Is(err, store.ErrStateTooLarge)) {
		b, err = t.ts.Begin(octx, t.env.ExecutionID, p.self, true, nil) // the executor ends it in error
	}
	if err == nil {
		tookOver(ctx, t, b.Lease)
	}
	return b, err
}

// startTrace is the trace a new execution belongs to, which its state keeps for its wake-ups:
// the one its start task carries (or, from a producer that did not trace, the one derived from
// its id: taskTrace). Nothing when tracing is off here and the task carries none.
func startTrace(env queue.Envelope) tracing.Parent {
	if !tracing.Enabled() {
		return env.Trace()
	}
	return taskTrace(env)
}

// acquire takes the execution lease for a task whose execution this process claimed
// (claimRun). A lease this instance holds is then a leftover — a release that failed while
// Redis was away, or an earlier process under the same PLAITA_INSTANCE_ID — and is taken over
// at once rather than waited out as if a live holder ran it.
func (p *Dispatcher) acquire(ctx context.Context, t *task, ts *store.TenantStore) (*store.Lease, error) {
	octx, cancel := settleCtx(ctx)
	defer cancel()
	lease, err := ts.AcquireOwn(octx, t.env.ExecutionID, p.self)
	if err == nil {
		tookOver(ctx, t, lease)
	}
	return lease, err
}

// letGo releases the task's lease when its run ends (a no-op when the run's last save deleted
// it) and forgets it.
func (p *Dispatcher) letGo(ctx context.Context, t *task) {
	lease := t.lease
	t.lease = nil
	octx, cancel := ctx, context.CancelFunc(func() {})
	if lease.Held() { // else Release only stops the watchdogs: no call, no timer to set
		octx, cancel = settleCtx(ctx)
	}
	defer cancel()
	if err := lease.Release(octx); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		t.log.Warn().Err(err).Str("event", "worker.lease_release_failed").Msg("lease not released (it expires, or this instance takes it over on the next delivery)")
	}
}

// tookOver logs a lease that was this instance's leftover and was taken over.
func tookOver(ctx context.Context, t *task, lease *store.Lease) {
	if lease.TookOver() {
		trace.SpanFromContext(ctx).AddEvent("lease taken over", trace.WithAttributes(attribute.Int64(tracing.AttrLeaseEpoch, lease.Generation())))
		t.log.Warn().Str("event", "worker.stale_own_lease").Int64("generation", lease.Generation()).
			Msg("this instance held a leftover lease of an execution it does not run: taken over (the fence generation moved on)")
	}
}

// cancelListener polls the execution's cancel flag every CancelPoll while it runs and
// interrupts the run (its context) when the flag is set. (The fenced saves read the flag too,
// at every step boundary; the poll interrupts a step that is still running.)
func (p *Dispatcher) cancelListener(ctx context.Context, cancel context.CancelCauseFunc, ts *store.TenantStore, id string) *tick.Loop {
	return tick.Every(ctx, p.d.CancelPoll, func(ctx context.Context) bool {
		octx, ocancel := context.WithTimeout(ctx, max(p.d.CancelPoll, time.Second))
		set, err := ts.Cancelled(octx, id)
		ocancel()
		if err == nil && set {
			cancel(errCancelInterrupt)
			return false
		}
		return true
	})
}

// deterministicFailure decides a run that panicked. The crash is counted in the execution's
// nofail counter; below DeterministicFailureMax it is a retry (the redelivery resumes from the
// checkpoint), at the bound the execution is ended in error under the lease and acked.
func (p *Dispatcher) deterministicFailure(ctx context.Context, t *task, pe *panicError) Outcome {
	id := t.env.ExecutionID
	t.log.Error().Str("event", "worker.run_panic").Str("panic", fmt.Sprint(pe.value)).Bytes("stack", pe.stack).Msg("the run panicked")
	octx, cancel := settleCtx(ctx)
	defer cancel()
	n, err := t.ts.Incr(octx, keys.FamNoFail, id)
	if err != nil || n < int64(p.d.DeterministicFailureMax) {
		return retry(pe)
	}
	st, err := t.ts.Load(octx, id)
	if err != nil {
		return retry(fmt.Errorf("%w; and loading the state to end it failed: %w", pe, err))
	}
	if !st.Status.Terminal() {
		msg := fmt.Sprintf("%d runs of this execution crashed (limit %d); last: %v", n, p.d.DeterministicFailureMax, pe.value)
		if err := p.endInError(octx, t.lease, st, ErrTypeDeterministicFailure, msg, true); err != nil {
			return classify(err)
		}
	}
	o := ack("worker.deterministic_failure", "execution ended in error: its runs keep crashing")
	o.Level = zerolog.ErrorLevel
	return o
}

// endInError ends a non-terminal execution in error through the lease's fenced storage, for
// failures the executor did not see.
func (p *Dispatcher) endInError(ctx context.Context, lease *store.Lease, st *state.Execution, typ, msg string, permanent bool) error {
	now := p.d.Clock.Now().UTC()
	st.Status, st.Suspend, st.EndTime, st.LastUpdate = state.Error, nil, &now, now
	st.Error = &state.ErrorInfo{Type: typ, Node: st.CurrentNode, Permanent: permanent, Message: msg}
	engine.AppendTimeline(st, state.TimelineEntry{Time: state.Stamp(now), Event: string(state.Error), Node: st.CurrentNode,
		Detail: typ + ": " + msg}, p.d.Engine.TimelineMax)
	return lease.Storage().Save(ctx, st)
}

// refuseStart ends a refused start's existing execution in error (a redelivered start whose
// tenant was disabled meanwhile). It reports false when there is no such state, or it cannot
// be settled now: the start is then dead-lettered.
func (p *Dispatcher) refuseStart(ctx context.Context, t *task, dec Decision) bool {
	env := t.env
	ts, err := p.d.Store.Tenant(env.Tenant())
	if err != nil {
		return false
	}
	octx, cancel := settleCtx(ctx)
	defer cancel()
	st, err := ts.Load(octx, env.ExecutionID)
	if err != nil {
		return false
	}
	if st.Status.Terminal() {
		return true
	}
	if !p.claimRun(env.ExecutionID) {
		return false
	}
	defer p.endRun(env.ExecutionID)
	lease, err := p.acquire(ctx, t, ts)
	if err != nil {
		return false
	}
	defer func() { _ = lease.Release(octx) }() // best effort; it expires otherwise
	if st, err = ts.Load(octx, env.ExecutionID); err != nil {
		return false
	}
	if !st.Status.Terminal() {
		if err := p.endInError(octx, lease, st, ErrTypeAdmissionRefused, dec.Rule+": "+dec.Reason, true); err != nil {
			t.log.Warn().Err(err).Str("event", "worker.refuse_failed").Msg("could not end the refused execution in error")
			return false
		}
	}
	return true
}

// observe is the engine hook of an optional observer.
func observe(o *Observer) func(engine.Event) {
	if o == nil {
		return nil
	}
	return o.Event
}

// retryBudget applies the two retry gates (store/budget.go, docs/wakeups.md) (only to an execution in error; a retry of
// a running execution is a continue from its checkpoint and always goes through). It returns
// the resume type to run, or the outcome of a retry it refused (acked, state kept).
func (p *Dispatcher) retryBudget(ctx context.Context, t *task) (engine.ResumeType, *Outcome) {
	id, ts := t.env.ExecutionID, t.ts
	octx, cancel := settleCtx(ctx)
	defer cancel()
	st, err := ts.Load(octx, id)
	if err != nil {
		return engine.ResumeRetry, nil // the executor reports it
	}
	if st.Status == state.Running {
		return engine.ResumeContinue, nil
	}
	if st.Status != state.Error {
		return engine.ResumeRetry, nil
	}
	b, err := ts.RetryBudget(octx, id)
	if err != nil {
		o := retry(err)
		return "", &o
	}
	if ex := b.Exceeded(p.d.DeterministicFailureMax); ex != nil {
		msg := fmt.Sprintf("retry wake-ups of this execution reached the limit (%d/%d): the error state is kept; "+
			"after fixing the cause, delete its g1wakeups counter and retry", ex.Count, ex.Limit)
		if ex.Counter == keys.FamNoFail {
			msg = fmt.Sprintf("this execution failed deterministically %d times in a row (limit %d): the error state is kept; "+
				"after fixing the cause, delete its nofail counter and retry", ex.Count, ex.Limit)
		}
		o := noop("worker.retry_refused", msg)
		o.Level = zerolog.WarnLevel
		t.log = t.log.With().Int64("g1wakeups", b.G1Wakeups).Int64("nofail", b.NoFail).Logger()
		return "", &o
	}
	if _, err := ts.Incr(octx, keys.FamG1Wakeups, id); err != nil {
		o := retry(err)
		return "", &o
	}
	return engine.ResumeRetry, nil
}

// countFailures keeps the deterministic-failure count: any node moving forward clears it, a run
// that ends in a node failure or a deadline adds one.
func (p *Dispatcher) countFailures(ctx context.Context, t *task, st *state.Execution, progressed bool) {
	if st == nil {
		return
	}
	reset := progressed && t.nofail > 0
	count := st.Status == state.Error && st.Error != nil && (st.Error.Type == engine.ErrTypeNode || st.Error.Type == engine.ErrTypeDeadline)
	if !reset && !count {
		return
	}
	octx, cancel := settleCtx(ctx)
	defer cancel()
	id := t.env.ExecutionID
	var err error
	if reset {
		err = t.ts.ResetCounter(octx, keys.FamNoFail, id)
	}
	if count {
		_, ierr := t.ts.Incr(octx, keys.FamNoFail, id)
		err = errors.Join(err, ierr)
	}
	if err != nil {
		t.log.Warn().Err(err).Str("event", "worker.nofail_update_failed").Msg("could not update the deterministic-failure counter")
	}
}
