package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// Verdict is what the delivery gate decides for one delivery.
type Verdict string

const (
	// VerdictRun: execute the task.
	VerdictRun Verdict = "run"
	// VerdictDropTooOld: older than PLAITA_TASK_MAX_AGE_SECONDS (or of unknown age): ack and drop.
	VerdictDropTooOld Verdict = "drop_too_old"
	// VerdictDeadLetterMalformed: no payload, bad JSON or a missing/invalid required field.
	VerdictDeadLetterMalformed Verdict = "dead_letter_malformed"
	// VerdictDeadLetterNewerSchema: schema_version newer than this build: dead-letter once,
	// never clone.
	VerdictDeadLetterNewerSchema Verdict = "dead_letter_newer_schema"
	// VerdictDeadLetterMaxDeliveries: delivered more than PLAITA_MAX_DELIVERIES times.
	VerdictDeadLetterMaxDeliveries Verdict = "dead_letter_max_deliveries"
	// VerdictLeavePendingFamilyMismatch: the message and this worker both carry a config_family
	// and they differ: do not execute, leave it pending for a worker of its family.
	VerdictLeavePendingFamilyMismatch Verdict = "leave_pending_family_mismatch"
	// VerdictLeavePendingBudgetStale: a redelivery whose budget_generation differs: leave it
	// pending for a worker of its budget generation (or a drain); no delivery is burned. A first
	// delivery is never gated on its budget: producers stamp their own, and a budget change is
	// not an incompatibility.
	VerdictLeavePendingBudgetStale Verdict = "leave_pending_budget_stale"
)

// Dead-letter reasons written by Apply.
const (
	ReasonMalformed   = "malformed"
	ReasonNewerSchema = "newer_schema"
)

// ReasonMaxDeliveries is the dead-letter reason of an exhausted delivery budget.
func ReasonMaxDeliveries(n int) string { return fmt.Sprintf("max_deliveries=%d", n) }

// generationVerdict is the config generation gate (docs/configuration.md): it applies only when both sides
// carry the field; a message without them is legacy and never gated. config_family gates every
// delivery; budget_generation only a redelivery (an entry of the old budget's PEL), never a
// first delivery.
func (q *Queue) generationVerdict(env Envelope, redelivery bool) Verdict {
	if env.ConfigFamily != "" && q.gens.Family != "" && env.ConfigFamily != q.gens.Family {
		return VerdictLeavePendingFamilyMismatch
	}
	if redelivery && env.BudgetGeneration != "" && q.gens.Budget != "" && env.BudgetGeneration != q.gens.Budget {
		return VerdictLeavePendingBudgetStale
	}
	return VerdictRun
}

// Gate decides what to do with a delivery, in this order:
//
//  1. the generation gate: another config_family, then (redeliveries only) another
//     budget_generation → leave pending (the entry is not ours to judge, not even to
//     dead-letter);
//  2. schema_version newer than ours → dead-letter once;
//  3. malformed → dead-letter;
//  4. age = now − max(created_at, stream id time) above PLAITA_TASK_MAX_AGE_SECONDS (0 = gate
//     off), or no usable time at all → drop (fail-closed);
//  5. delivered more than PLAITA_MAX_DELIVERIES times → dead-letter;
//  6. run.
//
// Gate has no side effects; Apply carries a verdict out.
func (q *Queue) Gate(d Delivery) Verdict {
	if v := q.generationVerdict(d.Envelope, d.Reclaimed || d.Count > 1); v != VerdictRun {
		return v
	}
	switch {
	case errors.Is(d.Err, ErrNewerSchema):
		return VerdictDeadLetterNewerSchema
	case d.Err != nil:
		return VerdictDeadLetterMalformed
	}
	if maxAge := q.maxAge; maxAge > 0 {
		if age, ok := q.Age(d); !ok || age > maxAge {
			return VerdictDropTooOld
		}
	}
	if q.ShouldDeadLetter(d) {
		return VerdictDeadLetterMaxDeliveries
	}
	return VerdictRun
}

// Age is now − max(created_at, the time in the stream id); ok is false when neither is known.
func (q *Queue) Age(d Delivery) (age time.Duration, ok bool) {
	newest, _ := idTime(d.ID)
	if ct := d.Envelope.CreatedAt; ct.After(newest) {
		newest = ct
	}
	if newest.IsZero() {
		return 0, false
	}
	return q.Now().Sub(newest), true
}

// ShouldDeadLetter reports whether d has used up PLAITA_MAX_DELIVERIES: a message runs at
// most that many times, and the delivery after the last one goes to the DLQ.
func (q *Queue) ShouldDeadLetter(d Delivery) bool { return d.Count > int64(q.maxDeliveries) }

// Apply carries out a verdict other than run: ack and drop a too-old task, dead-letter (and
// ack) a malformed, newer-schema or exhausted one, or leave a gated one pending with its
// delivery counter restored, so that the gate burns no delivery. Each outcome is counted and
// logged.
func (q *Queue) Apply(ctx context.Context, d Delivery, v Verdict) error {
	switch v {
	case VerdictRun:
		return nil
	case VerdictDropTooOld:
		if err := q.Ack(ctx, d); err != nil {
			return err
		}
		q.m.tooOld.Inc()
		ev := q.log.Warn().Str("event", "queue.too_old").Str("message_id", d.ID).
			Str("execution_id", d.Envelope.ExecutionID).Str("tenant_id", d.Envelope.Tenant()).
			Dur("max_age", q.maxAge)
		if age, ok := q.Age(d); ok {
			ev = ev.Dur("age", age)
		} else {
			ev = ev.Bool("age_unknown", true)
		}
		ev.Msg("task older than PLAITA_TASK_MAX_AGE_SECONDS (or of unknown age) dropped")
		return nil
	case VerdictDeadLetterMalformed:
		q.m.malformed.Inc()
		return q.DeadLetter(ctx, d, ReasonMalformed)
	case VerdictDeadLetterNewerSchema:
		q.m.newerSchema.Inc()
		return q.DeadLetter(ctx, d, ReasonNewerSchema)
	case VerdictDeadLetterMaxDeliveries:
		return q.DeadLetter(ctx, d, ReasonMaxDeliveries(q.maxDeliveries))
	case VerdictLeavePendingFamilyMismatch, VerdictLeavePendingBudgetStale:
		q.noteGated(d, v)
		return q.restoreCount(ctx, d)
	}
	return fmt.Errorf("queue: unknown verdict %q", v)
}

// LeavePending leaves d pending for a later redelivery without spending a delivery: its
// counter goes back to what it was before this delivery and its idle time restarts, so it is
// reclaimed again after PLAITA_CLAIM_MIN_IDLE_MS. A delivery that waits for another holder's
// execution lease uses it: waiting must not use up the budget of a message nobody ran.
func (q *Queue) LeavePending(ctx context.Context, d Delivery) error { return q.restoreCount(ctx, d) }

// LeavePendingFor is LeavePending for a delivery that waits for something expected to end
// soon — a live holder finishing the run that holds the execution's lease: it is reclaimed
// again after about after (at most PLAITA_CLAIM_MIN_IDLE_MS) instead of the full claim idle
// time, its idle time restarting that much closer to it.
func (q *Queue) LeavePendingFor(ctx context.Context, d Delivery, after time.Duration) error {
	return q.hold(ctx, d, q.minIdle-min(max(after, 0), q.minIdle))
}

// restoreCount sets the entry's delivery counter back to what it was before this delivery
// (XCLAIM to the same consumer with RETRYCOUNT and JUSTID, which does not increment it).
func (q *Queue) restoreCount(ctx context.Context, d Delivery) error { return q.hold(ctx, d, 0) }

// hold is restoreCount with the entry's idle time restarting at idle.
func (q *Queue) hold(ctx context.Context, d Delivery, idle time.Duration) error {
	if err := q.d.Hold(ctx, q.stream, q.group, d.Consumer, max(d.Count-1, 0), idle, d.ID); err != nil {
		return fmt.Errorf("restore delivery count of %s: %w", d.ID, err)
	}
	return nil
}

// noteGated counts and logs an entry left pending by the generation gate, once per entry and
// process: a reclaim pass sees the same entries again and again.
func (q *Queue) noteGated(d Delivery, v Verdict) {
	q.mu.Lock()
	_, seen := q.noted[d.ID]
	if !seen {
		if len(q.noted) >= maxNoted {
			clear(q.noted)
		}
		q.noted[d.ID] = struct{}{}
	}
	q.mu.Unlock()
	if seen {
		return
	}
	var ev *zerolog.Event
	if v == VerdictLeavePendingFamilyMismatch {
		q.m.familyMismatch.Inc()
		ev = q.log.Warn().Str("event", "queue.config_family_mismatch").
			Str("message_family", d.Envelope.ConfigFamily).Str("worker_family", q.gens.Family)
	} else {
		q.m.budgetStale.Inc()
		ev = q.log.Warn().Str("event", "queue.config_budget_stale").
			Str("message_budget", d.Envelope.BudgetGeneration).Str("worker_budget", q.gens.Budget)
	}
	ev.Str("message_id", d.ID).Bool("reclaimed", d.Reclaimed).Int64("delivery_count", d.Count).
		Msg("message of another config generation left pending for a worker of its generation (not executed, not claimed)")
}
