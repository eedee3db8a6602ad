package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
)

// Wake-up records (docs/wakeups.md). When a run ends suspended, the dispatcher registers what
// will wake the execution up again, for the roles that consume it:
//
//	delay / timeouts  → the delay role: an entry of the delay queue (queue.Delay)
//	wait_event        → the filter role: a subscription record + a per-event-type index
//	approval          → the console: an approval record + the tenant's pending-approval index
//
// Every write is idempotent: the entry and the records are a pure function of the suspended
// state, so a redelivered suspended result registers the same things again. The record is
// written before the timeout entry (two round trips): a failure of either leaves the task
// unacknowledged and its redelivery registers both again.

// defaultEventTTL is the record lifetime when settings.Wakeups.EventTTL is unset.
const defaultEventTTL = 7 * 24 * time.Hour

// Wakeups registers the wake-up records of suspended executions. It is safe for concurrent
// use.
type Wakeups struct {
	st       *store.Redis
	delay    *queue.Delay
	eventTTL time.Duration
	// Now is the clock of the record TTLs (tests set it); nil = time.Now.
	Now func() time.Time
}

// NewWakeups returns the registration over the store's records and the delay queue.
func NewWakeups(st *store.Redis, delay *queue.Delay, s settings.Wakeups) *Wakeups {
	ttl := s.EventTTL
	if ttl < time.Second {
		ttl = defaultEventTTL
	}
	return &Wakeups{st: st, delay: delay, eventTTL: ttl}
}

func (w *Wakeups) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// recordTTL is the lifetime of a record: the event TTL, and at least that long past its due
// time, so a record outlives the timeout that ends its wait.
func (w *Wakeups) recordTTL(due *time.Time) time.Duration {
	ttl := w.eventTTL
	if due != nil {
		ttl = max(ttl, due.Sub(w.now())+w.eventTTL)
	}
	return ttl
}

// Register writes the wake-up records of a suspended execution: the mapping from its Suspend
// to the records of docs/wakeups.md. An error leaves the task to be redelivered (transient),
// except for a state that is not suspended or names an unknown suspension.
func (w *Wakeups) Register(ctx context.Context, ex *state.Execution) error {
	if ex == nil || ex.Status != state.Suspended || ex.Suspend == nil {
		return errors.New("register wake-up: the execution is not suspended")
	}
	ts, err := w.st.Tenant(ex.TenantID)
	if err != nil {
		return fmt.Errorf("register wake-up of %s: %w", ex.ExecutionID, err)
	}
	s := ex.Suspend
	switch s.Kind {
	case state.SuspendDelay:
		if s.Due == nil {
			return fmt.Errorf("register wake-up of %s: delay without a due time", ex.ExecutionID)
		}
		err = w.schedule(ctx, ex, ts.Tenant(), state.ResumeContinue, *s.Due)
	case state.SuspendEvent:
		sub := store.Subscription{ExecutionID: ex.ExecutionID, FlowID: ex.FlowID, FlowVersion: ex.FlowVersion,
			Node: s.Node, EventType: s.EventType, Match: s.Match, Since: s.Since}
		if s.Due != nil {
			sub.ExpiresAt = *s.Due
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
		return fmt.Errorf("register wake-up of %s: unknown suspension kind %q", ex.ExecutionID, s.Kind)
	}
	if err == nil && s.Kind != state.SuspendDelay && s.Due != nil {
		err = w.schedule(ctx, ex, ts.Tenant(), state.ResumeTimeout, *s.Due)
	}
	if err != nil {
		return fmt.Errorf("register %s wake-up of %s: %w", s.Kind, ex.ExecutionID, err)
	}
	return nil
}

// schedule puts the execution's resume of type rt on the delay queue at due.
func (w *Wakeups) schedule(ctx context.Context, ex *state.Execution, tenant string, rt state.ResumeType, due time.Time) error {
	return w.delay.Schedule(ctx, queue.DelayEntry{ExecutionID: ex.ExecutionID, TenantID: tenant, FlowID: ex.FlowID,
		FlowVersion: ex.FlowVersion, ResumeType: rt, Node: ex.Suspend.Node, Due: due})
}
