package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine/state"
	"plaita/model"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
)

// Wake-up records (docs/wakeups.md). When a run ends suspended, the dispatcher registers what
// will wake the execution up again, for the roles that consume it:
//
//	delay / timeouts  → the delay role: an entry of the delay queue (queue.Delay)
//	wait_event        → the filter role: a subscription record + a per-event-type index, or
//	                    for a correlated wait the bucket of its first correlation term
//	approval          → the console: an approval record + the tenant's pending-approval index
//
// Every write is idempotent: the entry and the records are a pure function of the suspended
// state, so a redelivered suspended result registers the same things again. The record is
// written before the timeout entry (two round trips): a failure of either leaves the task
// unacknowledged and its redelivery registers both again.
//
// The state is saved before anything is registered (the engine saves it at the step boundary;
// the records are hints, the state is the truth, and a record of a state that was never saved
// would wake nothing). So a suspended state may exist for a moment without its wake-up, and
// registering must then either succeed or end that state:
//
//	Redis failure (transient)     not acked: the redelivery finds the suspended state and
//	                              registers again
//	no record can hold it         ErrWakeupUnregistrable: the execution ends in error
//	(permanent)                   (WakeupNotRegistered, naming why) under the run's lease, and the
//	                              task is acked — a dead letter or a retry would leave it
//	                              suspended with nothing to wake it
//
// The engine refuses such suspensions in the first place (engine.MaxWaitSeconds, DueOutOfRange);
// this is what holds for a state it did not write, such as one an older worker left.

// ErrWakeupUnregistrable: the suspended state names a wake-up no record can hold (no due time
// for a delay, a due time the delay queue refuses, an unknown suspension kind). Permanent: the
// same state fails the same way on every delivery.
var ErrWakeupUnregistrable = errors.New("the wake-up cannot be registered")

// ErrTypeWakeupNotRegistered is the error type of an execution ended in error because its
// wake-up cannot be registered (a permanent error).
const ErrTypeWakeupNotRegistered = "WakeupNotRegistered"

// defaultEventTTL is the record lifetime when settings.Wakeups.EventTTL is unset.
const defaultEventTTL = 7 * 24 * time.Hour

// Wakeups registers the wake-up records of suspended executions. It is safe for concurrent
// use.
type Wakeups struct {
	st       *store.Redis
	delay    *queue.Delay
	eventTTL time.Duration
	// Now is the clock of the record TTLs (NewWakeups sets time.Now; tests replace it before
	// first use).
	Now func() time.Time
}

// NewWakeups returns the registration over the store's records and the delay queue.
func NewWakeups(st *store.Redis, delay *queue.Delay, s settings.Wakeups) *Wakeups {
	ttl := s.EventTTL
	if ttl < time.Second {
		ttl = defaultEventTTL
	}
	return &Wakeups{st: st, delay: delay, eventTTL: ttl, Now: time.Now}
}

// recordTTL is the lifetime of a record: the event TTL, and at least that long past its due
// time, so a record outlives the timeout that ends its wait.
func (w *Wakeups) recordTTL(due *time.Time) time.Duration {
	ttl := w.eventTTL
	if due != nil {
		ttl = max(ttl, due.Sub(w.Now())+w.eventTTL)
	}
	return ttl
}

// Register writes the wake-up records of a suspended execution: the mapping from its Suspend
// to the records of docs/wakeups.md. A state that names no wake-up a record can hold is an
// ErrWakeupUnregistrable; any other error is a Redis failure (transient: the task is
// redelivered).
func (w *Wakeups) Register(ctx context.Context, ex *state.Execution) error {
	if ex == nil || ex.Status != state.Suspended || ex.Suspend == nil {
		return fmt.Errorf("register wake-up: %w: the execution is not suspended", ErrWakeupUnregistrable)
	}
	ts, err := w.st.Tenant(ex.TenantID)
	if err != nil {
		return fmt.Errorf("register wake-up of %s: %w: %w", ex.ExecutionID, ErrWakeupUnregistrable, err)
	}
	s := ex.Suspend
	switch s.Kind {
	case state.SuspendDelay:
		if s.Due == nil {
			return fmt.Errorf("register wake-up of %s: %w: a delay without a due time", ex.ExecutionID, ErrWakeupUnregistrable)
		}
		err = w.schedule(ctx, ex, ts.Tenant(), state.ResumeContinue, *s.Due)
	case state.SuspendEvent:
		sub := store.Subscription{ExecutionID: ex.ExecutionID, FlowID: ex.FlowID, FlowVersion: ex.FlowVersion,
			Node: s.Node, EventType: s.EventType, Match: s.Match, Since: s.Since}
		if s.Due != nil {
			sub.ExpiresAt = *s.Due
		}
		if len(s.Correlation) > 0 {
			// Indexed under its first correlation term: the filter finds it by an event's
			// value instead of checking it against every event of the type (docs/events.md).
			sub.Correlation = &s.Correlation[0]
		}
		err = ts.PutSubscription(ctx, sub, w.recordTTL(s.Due))
	case state.SuspendApproval:
		ap := store.Approval{ExecutionID: ex.ExecutionID, FlowID: ex.FlowID, FlowVersion: ex.FlowVersion,
			Node: s.Node, Message: s.Message, Since: s.Since}
		if s.Due != nil {
			ap.Due = *s.Due
		}
		err = ts.PutApproval(ctx, ap, w.recordTTL(s.Due))
	default:
		return fmt.Errorf("register wake-up of %s: %w: unknown suspension kind %q", ex.ExecutionID, ErrWakeupUnregistrable, s.Kind)
	}
	if err == nil && s.Kind != state.SuspendDelay && s.Due != nil {
		err = w.schedule(ctx, ex, ts.Tenant(), state.ResumeTimeout, *s.Due)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, queue.ErrBadDelayEntry), !model.IsTransient(err):
		return fmt.Errorf("register %s wake-up of %s: %w: %w", s.Kind, ex.ExecutionID, ErrWakeupUnregistrable, err)
	}
	return fmt.Errorf("register %s wake-up of %s: %w", s.Kind, ex.ExecutionID, err)
}

// schedule puts the execution's resume of type rt on the delay queue at due.
func (w *Wakeups) schedule(ctx context.Context, ex *state.Execution, tenant string, rt state.ResumeType, due time.Time) error {
	return w.delay.Schedule(ctx, queue.DelayEntry{ExecutionID: ex.ExecutionID, TenantID: tenant, FlowID: ex.FlowID,
		FlowVersion: ex.FlowVersion, ResumeType: rt, Node: ex.Suspend.Node, Due: due, TraceParent: ex.TraceParent, TraceState: ex.TraceState})
}

// wakeupFailed decides a suspended run whose wake-up could not be registered (see the top of
// this file): a Redis failure is retried; a wake-up no record can hold ends the execution in
// error under the run's lease, and the task is acked.
func (p *Dispatcher) wakeupFailed(ctx context.Context, t *task, st *state.Execution, err error) Outcome {
	if !errors.Is(err, ErrWakeupUnregistrable) {
		return retry(fmt.Errorf("record the wake-up: %w", err))
	}
	what := "its suspension"
	if s := st.Suspend; s != nil {
		what = fmt.Sprintf("its %s suspension at node %q", s.Kind, s.Node)
		if s.Due != nil {
			what += " due " + s.Due.UTC().Format(time.RFC3339Nano)
		}
	}
	msg := fmt.Sprintf("nothing can wake %s: %v", what, err)
	if eerr := p.endInError(ctx, t.lease, st, ErrTypeWakeupNotRegistered, msg, true); eerr != nil {
		return classify(fmt.Errorf("end in error an execution whose wake-up cannot be registered (%v): %w", err, eerr))
	}
	o := ack("worker.wakeup_unregistrable", "the wake-up cannot be registered: the execution ended in error")
	o.Err, o.Level = err, zerolog.ErrorLevel
	return o
}
