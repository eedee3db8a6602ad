package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"plaita/engine"
	"plaita/internal/tracing"
	"plaita/queue"
	"plaita/store"
)

// handle is one delivery: decide its outcome, then settle it.
func (p *Dispatcher) handle(ctx context.Context, consumer string, dl queue.Delivery) {
	p.setActive(1)
	defer p.setActive(-1)
	defer p.keepClaimed(ctx, consumer, dl.ID)()
	t := &task{dl: dl, env: dl.Envelope}
	t.log = p.log.With().Str("message_id", dl.ID).Str("execution_id", t.env.ExecutionID).
		Str("tenant_id", t.env.Tenant()).Str("kind", string(t.env.Kind)).Str("resume_type", string(t.env.ResumeType)).
		Int64("delivery_count", dl.Count).Logger()
	if tracing.Enabled() {
		var span trace.Span
		ctx, span = p.processSpan(ctx, t)
		defer span.End()
		o := p.deliver(ctx, t)
		span.SetAttributes(attribute.String(tracing.AttrOutcome, o.Action.String()))
		if o.Err != nil && o.Action != ActAck {
			tracing.Fail(span, o.Action.String(), o.Err)
		}
		p.settle(ctx, t, o)
		return
	}
	p.settle(ctx, t, p.deliver(ctx, t))
}

// taskTrace is the trace a task's run joins: the one it carries, else the one derived from
// its execution id (tracing.ForExecution), so that an untraced producer's execution still has
// one trace across its deliveries.
func taskTrace(env queue.Envelope) tracing.Parent {
	return tracing.Execution(env.Trace(), env.ExecutionID)
}

// processSpan begins the consumer span of one delivery, a child of the span that sent the
// task: a redelivery of the same message (after a kill -9, a reclaim) is another child of it,
// in the same trace.
func (p *Dispatcher) processSpan(ctx context.Context, t *task) (context.Context, trace.Span) {
	env := t.env
	name := "process " + string(env.Kind)
	if env.Kind == queue.KindResume {
		name += " " + string(env.ResumeType)
	}
	ctx, span := tracing.Start(taskTrace(env).Context(ctx), name, trace.SpanKindConsumer)
	span.SetAttributes(attribute.String(tracing.AttrSystem, "redis"), attribute.String(tracing.AttrOperation, "process"),
		attribute.String(tracing.AttrDestination, p.d.Queue.Stream()), attribute.String(tracing.AttrMessageID, t.dl.ID),
		attribute.Int64(tracing.AttrDelivery, t.dl.Count), attribute.String(tracing.AttrExecution, env.ExecutionID),
		attribute.String(tracing.AttrTenant, env.Tenant()), attribute.String(tracing.AttrFlow, env.FlowID),
		attribute.String(tracing.AttrKind, string(env.Kind)), attribute.String(tracing.AttrResumeType, string(env.ResumeType)),
		attribute.String("service.instance.id", p.self))
	return ctx, span
}

// deliver decides a delivery: the queue's gate, the admission gates, the flow definition, the
// quota, then the run. Its side effects are on the execution only (the run, an error state);
// what becomes of the message is the returned Outcome.
func (p *Dispatcher) deliver(ctx context.Context, t *task) Outcome {
	switch v := p.d.Queue.Gate(t.dl); v {
	case queue.VerdictRun:
	case queue.VerdictDeadLetterMaxDeliveries:
		return Outcome{Action: ActExhausted, Event: "worker.task_failed", Msg: "delivered more than PLAITA_MAX_DELIVERIES times"}
	default:
		return Outcome{Action: ActVerdict, Verdict: v}
	}
	if o, ok := p.admit(ctx, t); !ok {
		return o
	}
	ts, err := p.d.Store.Tenant(t.env.Tenant())
	if err != nil {
		return deadLetter(ReasonInvalidTenant, err, "worker.task_permanent", "invalid tenant: dead-lettering")
	}
	t.ts = ts
	f, o, ok := p.flowFor(ctx, t)
	if !ok {
		return o
	}
	if g := p.d.Affinity; g != nil && f != nil {
		dec, err := g.Check(ctx, t.env, f.Repo)
		if err != nil {
			return retry(err)
		}
		if !dec.Runs() {
			return p.gateOutcome(ctx, t, dec, nil)
		}
	}
	release, o, ok := p.quota(ctx, t)
	if !ok {
		return o
	}
	defer release()
	return p.run(ctx, t, f)
}

// admit applies the gates that need no flow: deny repos, dispatch target, tenant status.
func (p *Dispatcher) admit(ctx context.Context, t *task) (Outcome, bool) {
	env := t.env
	if g := p.d.DenyRepos; g != nil {
		if dec := g.Check(env); !dec.Runs() {
			return p.gateOutcome(ctx, t, dec, nil), false
		}
	}
	if g := p.d.Target; g != nil {
		var alive func(context.Context, string) (bool, error)
		if p.d.Registry != nil {
			alive = p.d.Registry.Alive
		}
		if dec := g.Check(ctx, env, p.self, alive); !dec.Runs() {
			return p.gateOutcome(ctx, t, dec, nil), false
		}
	}
	if g := p.d.TenantStatus; g != nil {
		dec, err := g.Check(ctx, env.Tenant())
		if err != nil {
			return retry(fmt.Errorf("tenant status: %w", err)), false
		}
		if !dec.Runs() {
			return p.gateOutcome(ctx, t, dec, nil), false
		}
	}
	return Outcome{}, true
}

// flowFor loads the definition the task runs: a resume names no version when its producer did
// not know it, so the state says. A cancel runs no node: it goes on without a usable flow.
func (p *Dispatcher) flowFor(ctx context.Context, t *task) (*engine.Flow, Outcome, bool) {
	env := t.env
	flowID, version := env.FlowID, env.FlowVersion
	if env.Kind == queue.KindResume && (flowID == "" || version == "") {
		st, err := t.ts.Load(ctx, env.ExecutionID)
		if err != nil {
			return nil, classify(err), false
		}
		flowID, version = st.FlowID, st.FlowVersion
	}
	f, reason, err := p.loadFlow(ctx, env.Tenant(), flowID, version)
	if err == nil {
		return f, Outcome{}, true
	}
	if reason == "" {
		return nil, retry(err), false
	}
	if env.Kind == queue.KindResume && env.ResumeType == engine.ResumeCancel {
		t.log.Info().Err(err).Str("event", "worker.cancel_without_flow").Msg("flow unusable; cancelling the execution anyway")
		return nil, Outcome{}, true
	}
	if o, stale := p.staleWithoutFlow(ctx, t); stale { // stale.go
		return nil, o, false
	}
	t.log.Warn().Err(err).Str("event", "worker.flow_unusable").Str("flow_id", flowID).Str("flow_version", version).Msg("flow cannot be run")
	return nil, deadLetter(reason, err, "worker.task_permanent", "flow cannot be run: dead-lettering"), false
}

// loadFlow reads the published definition; reason is a dead-letter reason for a permanent
// problem, "" for a transient one.
//
// A published version is immutable, so its parsed definition is kept for FlowCacheTTL: a flow
// read (and hashed, and parsed) per delivery would be a Redis call and a parse per execution
// for bytes that never change.
func (p *Dispatcher) loadFlow(ctx context.Context, tenant, flowID, version string) (*engine.Flow, string, error) {
	key := flowKey{tenant, flowID, version}
	now := p.d.Clock.Now()
	if f, ok := p.defs.get(key, FlowCacheTTL, now); ok {
		return f, "", nil
	}
	octx, cancel := settleCtx(ctx)
	defer cancel()
	raw, err := p.d.Definitions.Get(octx, tenant, flowID, version)
	switch {
	case errors.Is(err, store.ErrFlowNotFound):
		return nil, ReasonFlowNotFound, err
	case err != nil:
		return nil, "", err
	}
	f, err := p.flows.Parse(raw)
	if err != nil {
		return nil, ReasonInvalidFlow, err
	}
	p.defs.put(key, f, FlowCacheTTL, now)
	return f, "", nil
}

// flowKey names one published flow version.
type flowKey struct{ tenant, id, version string }

// FlowCacheTTL is how long a published definition is reused without reading it again.
const FlowCacheTTL = time.Minute

// quota admits the task under its tenant's running limit. release gives the slot back when the
// run ends (a no-op when none was taken).
func (p *Dispatcher) quota(ctx context.Context, t *task) (release func(), o Outcome, ok bool) {
	g := p.d.Quota
	if g == nil {
		return func() {}, Outcome{}, true
	}
	adm, err := g.Admit(ctx, t.env)
	if err != nil {
		return nil, retry(err), false
	}
	if !adm.Runs() {
		o := p.gateOutcome(ctx, t, adm.Decision, adm.Mutate)
		if adm.Verdict == VerdictDefer {
			// Spread the deferral budget over real time: re-enqueued at once, a deferred start
			// would circle the stream and spend PLAITA_TENANT_QUOTA_DEFER_MAX in milliseconds,
			// then run with quota_bypass while the tenant is still full. The consumer waits
			// meanwhile; a drain interrupts the wait and the message stays pending.
			o.After = adm.RetryAfter
		}
		return nil, o, false
	}
	if !adm.Counted {
		return func() {}, Outcome{}, true
	}
	return func() {
		octx, cancel := settleCtx(ctx)
		defer cancel()
		if err := g.Release(octx, t.env.Tenant(), t.env.ExecutionID); err != nil {
			t.log.Warn().Err(err).Str("event", "worker.quota_release_failed").Msg("tenant quota slot not released (it expires)")
		}
	}, Outcome{}, true
}

// gateOutcome is an admission gate's non-run decision. A refused start whose execution already
// exists (a redelivered start) is ended in error and acked rather than dead-lettered.
func (p *Dispatcher) gateOutcome(ctx context.Context, t *task, dec Decision, mutate func(*queue.Envelope)) Outcome {
	if dec.Verdict == VerdictRefuse && t.env.Kind == queue.KindStart && p.d.Store != nil && p.refuseStart(ctx, t, dec) {
		o := ack("worker.start_refused", "start refused by an admission gate; its execution exists: ended in error (if it was not terminal) and acked")
		o.Err = errors.New(dec.Rule + ": " + dec.Reason)
		return o
	}
	return onGate(dec, mutate)
}
