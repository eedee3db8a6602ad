package worker

import (
	"context"
	"errors"
	"fmt"

	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
)

// settle carries out an outcome: the one place where a delivery is acked, dead-lettered, left
// pending, requeued or handed to Queue.Apply.
func (p *Dispatcher) settle(ctx context.Context, t *task, o Outcome) {
	o = onRetry(o, t.dl, p.d.Queue, ctx.Err() != nil)
	if o.Failed || o.Action == ActExhausted {
		p.failed.Inc()
		p.d.Queue.IncFailed()
	}
	p.logOutcome(t, o)
	// An ack is queued for the acker and a retry sends nothing: only the other outcomes call
	// Redis here, so only they set a timer.
	octx, cancel := ctx, context.CancelFunc(func() {})
	if o.Action != ActAck && o.Action != ActRetry {
		octx, cancel = settleCtx(ctx)
	}
	defer cancel()
	q := p.d.Queue
	switch o.Action {
	case ActAck:
		if o.NoOp {
			p.noops.Inc()
		}
		p.acks.ack(t.dl.ID, t.log)
	case ActDeadLetter:
		p.deadLetter(octx, t, o.Reason, o.Err)
	case ActLeavePending:
		if o.Restore {
			var err error
			if o.After > 0 {
				err = q.LeavePendingFor(octx, t.dl, o.After)
			} else {
				err = q.LeavePending(octx, t.dl)
			}
			if err != nil {
				t.log.Warn().Err(err).Str("event", "worker.leave_pending_failed").Msg("could not restore the delivery count; this delivery counts")
			}
		}
	case ActRetry: // not acked: redelivered after the claim idle time
	case ActRequeue:
		p.requeue(ctx, t, o)
	case ActVerdict:
		if err := q.Apply(octx, t.dl, o.Verdict); err != nil {
			t.log.Warn().Err(err).Str("event", "worker.gate_apply_failed").Str("verdict", string(o.Verdict)).Msg("could not carry out the delivery verdict")
		}
	case ActExhausted:
		p.exhausted(ctx, t, o.Err)
	}
}

func (p *Dispatcher) logOutcome(t *task, o Outcome) {
	if o.Event == "" {
		return // a queue verdict: the queue logs it
	}
	ev := t.log.WithLevel(o.Level).Str("event", o.Event).Str("outcome", o.Action.String())
	if o.Reason != "" {
		ev = ev.Str("reason", o.Reason)
	}
	if o.Err != nil {
		ev = ev.Err(o.Err)
	}
	ev.Msg(o.Msg)
}

// deadLetter moves the delivery to the dead-letter stream; detail becomes the entry's detail.
func (p *Dispatcher) deadLetter(ctx context.Context, t *task, reason string, detail error) {
	dl := t.dl
	if detail != nil && dl.Err == nil {
		dl.Err = detail
	}
	if err := p.d.Queue.DeadLetter(ctx, dl, reason); err != nil {
		t.log.Error().Err(err).Str("event", "worker.dead_letter_failed").Str("reason", reason).Msg("dead-letter failed; the message stays pending")
	}
}

// requeue writes the delivery's copy (after the outcome's wait; a drain interrupts it and the
// message stays pending).
func (p *Dispatcher) requeue(ctx context.Context, t *task, o Outcome) {
	if o.After > 0 {
		p.sleep(ctx, o.After)
		if ctx.Err() != nil {
			return
		}
	}
	octx, cancel := settleCtx(ctx)
	defer cancel()
	id, err := p.d.Queue.Requeue(octx, t.dl, o.Mutate)
	if err != nil {
		t.log.Warn().Err(err).Str("event", "worker.requeue_failed").Msg("requeue failed; the message stays pending")
		return
	}
	t.log.Info().Str("event", "worker.requeued").Str("new_message_id", id).Msg("task re-enqueued")
}

// ErrTypeDeliveriesExhausted is the error type of an execution whose task message used up
// PLAITA_MAX_DELIVERIES without settling: it is ended in error before the message is
// dead-lettered, so it never stays running with its only carrier in the dead-letter stream.
const ErrTypeDeliveriesExhausted = "DeliveriesExhausted"

// exhausted dead-letters a delivery that used up PLAITA_MAX_DELIVERIES. Its execution, when
// it exists and is not settled (running or pending), is first ended in error under its lease
// (a retry can take it up again once the cause is fixed). While another holder's lease on the
// execution lives, the message is not dead-lettered: it waits for the lease without spending a
// delivery. A suspended execution stays suspended (its wake-up is still recorded).
func (p *Dispatcher) exhausted(ctx context.Context, t *task, cause error) {
	reason := queue.ReasonMaxDeliveries(p.d.Queue.MaxDeliveries())
	octx, cancel := settleCtx(ctx)
	defer cancel()
	env := t.env
	ts := t.ts
	if ts == nil && env.ExecutionID != "" && p.d.Store != nil {
		ts, _ = p.d.Store.Tenant(env.Tenant())
	}
	if ts == nil || env.ExecutionID == "" {
		p.deadLetter(octx, t, reason, cause)
		return
	}
	if !p.claimRun(env.ExecutionID) {
		p.waitForLease(octx, t, "this instance runs the execution")
		return
	}
	defer p.endRun(env.ExecutionID)
	lease, err := p.acquire(ctx, t, ts)
	var held *store.LeaseHeldError
	switch {
	case errors.As(err, &held):
		p.waitForLease(octx, t, "another holder's lease lives ("+held.Holder+")")
		return
	case err != nil:
		t.log.Warn().Err(err).Str("event", "worker.dead_letter_failed").Msg("deliveries used up; the lease cannot be read: left pending")
		return
	}
	defer func() { _ = lease.Release(octx) }() // best effort: it expires otherwise
	if err := p.endExhausted(octx, t, ts, lease, cause); err != nil {
		t.log.Warn().Err(err).Str("event", "worker.dead_letter_failed").Msg("deliveries used up; the execution could not be ended in error: left pending")
		return
	}
	p.deadLetter(octx, t, reason, cause)
}

// endExhausted ends the execution of an exhausted delivery in error, if it is still running or
// pending; nil when there is nothing to end.
func (p *Dispatcher) endExhausted(ctx context.Context, t *task, ts *store.TenantStore, lease *store.Lease, cause error) error {
	st, err := ts.Load(ctx, t.env.ExecutionID)
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrStateCorrupt):
		return nil
	case err != nil:
		return err
	case st.Status != state.Running && st.Status != state.Pending:
		return nil
	}
	msg := fmt.Sprintf("its task message was delivered %d times without settling (PLAITA_MAX_DELIVERIES=%d) and was dead-lettered; "+
		"after fixing the cause, resume it with --type retry", t.dl.Count, p.d.Queue.MaxDeliveries())
	if cause != nil {
		msg += "; last error: " + cause.Error()
	} else if t.dl.Err != nil {
		msg += "; last error: " + t.dl.Err.Error()
	}
	if err := p.endInError(ctx, lease, st, ErrTypeDeliveriesExhausted, msg, false); err != nil {
		return err
	}
	t.log.Error().Str("event", "worker.deliveries_exhausted").Msg("execution ended in error: its task used up its deliveries")
	return nil
}

// waitForLease leaves an exhausted delivery pending with its count restored: it is not
// dead-lettered while a live lease may still settle the execution.
func (p *Dispatcher) waitForLease(ctx context.Context, t *task, why string) {
	t.log.Info().Str("event", "worker.exhausted_wait").Str("why", why).Msg("deliveries used up, but the execution's lease is held: left pending until it ends")
	if err := p.d.Queue.LeavePending(ctx, t.dl); err != nil {
		t.log.Warn().Err(err).Str("event", "worker.leave_pending_failed").Msg("could not restore the delivery count; this delivery counts")
	}
}
