package worker

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/model"
	"plaita/queue"
	"plaita/store"
)

// One delivery, one outcome: the gates, the engine and the lease checks only decide; an
// Outcome value says what becomes of the delivery, and settle (settle.go) is the one place that
// carries it out on the stream. The decisions below are pure functions with table tests.

// Action is what becomes of a delivery.
type Action uint8

const (
	// ActAck: the delivery is settled (its execution is terminal or suspended with its
	// wake-up recorded, or it was a no-op): XACK + XDEL.
	ActAck Action = iota + 1
	// ActDeadLetter: never runnable here or anywhere: moved to the dead-letter stream.
	ActDeadLetter
	// ActLeavePending: not ours to settle now; Restore gives the delivery back (a wait for
	// another holder's lease spends none); After, when set, has it reclaimed that soon rather
	// than after the claim idle time.
	ActLeavePending
	// ActRetry: transient; not acked, redelivered after the claim idle time from the last
	// checkpoint. On the last allowed delivery it becomes ActExhausted.
	ActRetry
	// ActRequeue: re-enqueued as a copy (quota deferral, handover), after After.
	ActRequeue
	// ActVerdict: a queue.Gate verdict other than run, carried out by Queue.Apply.
	ActVerdict
	// ActExhausted: the delivery budget is used up: a running execution is ended in error,
	// then the message is dead-lettered (unless another holder's lease still lives).
	ActExhausted
)

func (a Action) String() string {
	switch a {
	case ActAck:
		return "ack"
	case ActDeadLetter:
		return "dead_letter"
	case ActLeavePending:
		return "leave_pending"
	case ActRetry:
		return "retry"
	case ActRequeue:
		return "requeue"
	case ActVerdict:
		return "verdict"
	case ActExhausted:
		return "exhausted"
	}
	return "unknown"
}

// Outcome is the decision about one delivery and the log line that explains it.
type Outcome struct {
	Action  Action
	Reason  string // ActDeadLetter: the dead-letter reason
	Restore bool   // ActLeavePending: restore the delivery count
	NoOp    bool   // ActAck: nothing ran (a duplicate, a stale or refused carrier)
	Failed  bool   // counted as a failed delivery (transient failure, lost lease)
	Err     error  // the cause: logged, and a dead letter's detail
	Verdict queue.Verdict
	After   time.Duration         // ActRequeue: wait this long first; ActLeavePending: reclaimed this soon
	Mutate  func(*queue.Envelope) // ActRequeue: changes to the copy

	Event string // the log event (worker.*)
	Msg   string
	Level zerolog.Level
}

func ack(event, msg string) Outcome {
	return Outcome{Action: ActAck, Event: event, Msg: msg, Level: zerolog.InfoLevel}
}

func noop(event, msg string) Outcome {
	o := ack(event, msg)
	o.NoOp = true
	return o
}

func deadLetter(reason string, err error, event, msg string) Outcome {
	return Outcome{Action: ActDeadLetter, Reason: reason, Err: err, Event: event, Msg: msg, Level: zerolog.WarnLevel}
}

func leavePending(restore bool, event, msg string) Outcome {
	return Outcome{Action: ActLeavePending, Restore: restore, Event: event, Msg: msg, Level: zerolog.InfoLevel}
}

func retry(err error) Outcome {
	return Outcome{Action: ActRetry, Err: err, Failed: true, Event: "worker.task_failed", Level: zerolog.WarnLevel,
		Msg: "transient failure: not acked, the message is redelivered and resumes from the checkpoint"}
}

// classify maps an error of a run (or of the load before it) to its outcome: the one error
// vocabulary of the worker — fenced (lease lost), refused (a resume that does not fit),
// permanent (dead-letter), transient (retry).
func classify(err error) Outcome {
	var fh *engine.FlowHashError
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		o := leavePending(false, "worker.lease_lost", "lease lost: stopped at once, nothing more written, not acked")
		o.Err, o.Failed, o.Level = err, true, zerolog.WarnLevel
		return o
	case errors.Is(err, engine.ErrInvalidResume), errors.Is(err, engine.ErrEventMismatch), errors.As(err, &fh):
		o := noop("worker.resume_refused", "resume refused (it does not fit the execution's state); state untouched, acked")
		o.Err, o.Level = err, zerolog.WarnLevel
		return o
	case errors.Is(err, store.ErrNotFound):
		return deadLetter(ReasonExecutionNotFound, err, "worker.task_permanent", "the execution does not exist: dead-lettering")
	case errors.Is(err, store.ErrStateCorrupt):
		return deadLetter(ReasonStateCorrupt, err, "worker.task_permanent", "the execution's state is corrupt: dead-lettering")
	case model.IsTransient(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return retry(err)
	}
	o := deadLetter(ReasonPermanent, err, "worker.task_permanent", "permanent failure: dead-lettering")
	o.Level = zerolog.ErrorLevel
	return o
}

// settled maps the state a run ended with: terminal → ack; suspended → ack (its wake-up is
// recorded first, by the caller); anything else means the run did not reach a settled state.
func settled(st *state.Execution) Outcome {
	switch {
	case st == nil:
		return retry(errors.New("the executor returned no state"))
	case st.Status.Terminal():
		return ack("worker.task_done", "execution settled")
	case st.Status == state.Suspended:
		return ack("worker.task_suspended", "execution suspended; wake-up registered")
	}
	return retry(errors.New("the run stopped with the execution " + string(st.Status)))
}

// conflict is what leaseConflict knows about a delivery whose execution lease another holder
// has.
type conflict struct {
	livenessOff bool // PLAITA_DISABLE_HOLDER_LIVENESS=1
	alive       bool // the holder's registry record is fresh (unknown counts as alive)
	kind        queue.Kind
	resume      engine.ResumeType
	redelivery  bool // reclaimed, or delivered before
}

// onConflict decides a lease conflict. Every delivery it leaves pending waits for the lease
// without spending a delivery: while the lease lives, the budget is not the message's to lose.
func onConflict(c conflict) Outcome {
	if c.livenessOff {
		return noop("worker.lease_conflict", "lease held by another worker: acked (PLAITA_DISABLE_HOLDER_LIVENESS=1)")
	}
	if !c.alive {
		return leavePending(true, "worker.lease_conflict", "lease held by a dead worker: left pending until its lease expires and a redelivery takes over")
	}
	carriesNothing := c.kind == queue.KindStart || c.resume == engine.ResumeContinue || c.resume == engine.ResumeRetry
	switch {
	case carriesNothing && c.redelivery:
		// It may be the very message the holder was running, reclaimed after the holder died
		// (kill -9): its registry record stays fresh for up to RegistryTTLFactor heartbeats,
		// far longer than the lease. Acking it would drop the execution's only carrier; a live
		// holder acks it when it finishes (XACK is per group), a dead one's lease expires.
		return leavePending(true, "worker.lease_conflict", "lease held by a worker that looks alive, on a redelivery: left pending (the holder acks it, or its lease expires)")
	case carriesNothing:
		return noop("worker.lease_conflict", "lease held by a live worker that is running the execution: acked as a no-op")
	}
	// Most often the holder is finishing the very run that suspended the execution (its
	// wake-up registered, its lease not yet released) when the wake-up comes: tried again in
	// a moment, not after PLAITA_CLAIM_MIN_IDLE_MS.
	o := leavePending(true, "worker.lease_conflict", "lease held by a live worker: left pending, tried again in a moment (the resume carries data)")
	o.After = ConflictRetryAfter
	return o
}

// ConflictRetryAfter is how soon a resume that carries data is tried again after it met the
// lease of a live holder. A holder running a long step keeps meeting it: each try is one
// reclaim and one lease check, this often.
const ConflictRetryAfter = time.Second

// onRetry turns a transient outcome on the last allowed delivery into ActExhausted (a drain,
// which cancels the run, never does: the message stays pending for another worker).
func onRetry(o Outcome, next queue.Delivery, q interface{ ShouldDeadLetter(queue.Delivery) bool }, draining bool) Outcome {
	if o.Action != ActRetry || draining {
		return o
	}
	next.Count++
	if q.ShouldDeadLetter(next) {
		o.Action, o.Level = ActExhausted, zerolog.ErrorLevel
		o.Msg = "transient failure on the last allowed delivery: dead-lettering"
	}
	return o
}

// onGate maps an admission gate's non-run decision.
func onGate(dec Decision, mutate func(*queue.Envelope)) Outcome {
	msg := "task " + dec.Verdict.String() + " by an admission gate (" + dec.Rule + "): " + dec.Reason
	switch dec.Verdict {
	case VerdictRefuse:
		return deadLetter(dec.Rule, errors.New(dec.Reason), "worker.gate", "task refused by an admission gate: dead-lettering it")
	case VerdictDefer, VerdictHandOver:
		return Outcome{Action: ActRequeue, Mutate: mutate, Event: "worker.gate", Msg: msg, Level: zerolog.InfoLevel}
	}
	// Hold, LeaveForTarget: pending for a worker that can decide (each reclaim counts).
	return leavePending(false, "worker.gate", "task left pending by an admission gate")
}
