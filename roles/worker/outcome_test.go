package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
)

// The truth tables of the worker's decisions, without Redis.

func TestClassify(t *testing.T) {
	transient := fmt.Errorf("%w: connection refused", store.ErrStateSave)
	cases := []struct {
		name   string
		err    error
		action Action
		reason string
		noop   bool
	}{
		{"lease lost", fmt.Errorf("save: %w", store.ErrLeaseLost), ActLeavePending, "", false},
		{"invalid resume", fmt.Errorf("%w: not suspended", engine.ErrInvalidResume), ActAck, "", true},
		{"event mismatch", fmt.Errorf("%w: x", engine.ErrEventMismatch), ActAck, "", true},
		{"flow hash", &engine.FlowHashError{}, ActAck, "", true},
		{"not found", fmt.Errorf("%w: ex_1", store.ErrNotFound), ActDeadLetter, ReasonExecutionNotFound, false},
		{"corrupt", fmt.Errorf("%w: bad json", store.ErrStateCorrupt), ActDeadLetter, ReasonStateCorrupt, false},
		{"transient", transient, ActRetry, "", false},
		{"drain", context.Canceled, ActRetry, "", false},
		{"deadline", context.DeadlineExceeded, ActRetry, "", false},
		{"other backend error", errors.New("something"), ActRetry, "", false}, // the store contract: not permanent ⇒ transient
		{"too large", &state.StateTooLargeError{Size: 2, Max: 1}, ActDeadLetter, ReasonPermanent, false},
	}
	for _, tc := range cases {
		o := classify(tc.err)
		if o.Action != tc.action || o.Reason != tc.reason || o.NoOp != tc.noop || o.Event == "" || o.Err == nil {
			t.Errorf("%s: %+v, want %s reason %q noop %v", tc.name, o, tc.action, tc.reason, tc.noop)
		}
	}
	if o := classify(store.ErrLeaseLost); o.Restore || !o.Failed {
		t.Errorf("a lost lease must count as a failed delivery and not give it back: %+v", o)
	}
}

func TestSettled(t *testing.T) {
	for _, tc := range []struct {
		st   *state.Execution
		want Action
	}{
		{nil, ActRetry},
		{&state.Execution{Status: state.Completed}, ActAck},
		{&state.Execution{Status: state.Error}, ActAck},
		{&state.Execution{Status: state.Cancelled}, ActAck},
		{&state.Execution{Status: state.Suspended}, ActAck},
		{&state.Execution{Status: state.Running}, ActRetry},
		{&state.Execution{Status: state.Pending}, ActRetry},
	} {
		if o := settled(tc.st); o.Action != tc.want {
			t.Errorf("%v: %s, want %s", tc.st, o.Action, tc.want)
		}
	}
}

func TestOnConflict(t *testing.T) {
	start, approval, cont := queue.KindStart, engine.ResumeApproval, engine.ResumeContinue
	cases := []struct {
		name string
		c    conflict
		want Action
		back bool // the delivery is given back
	}{
		{"liveness off: ack", conflict{livenessOff: true, kind: start}, ActAck, false},
		{"dead holder: wait", conflict{alive: false, kind: start}, ActLeavePending, true},
		{"dead holder, resume: wait", conflict{alive: false, kind: queue.KindResume, resume: approval}, ActLeavePending, true},
		{"live holder, fresh start: duplicate", conflict{alive: true, kind: start}, ActAck, false},
		{"live holder, fresh continue: duplicate", conflict{alive: true, kind: queue.KindResume, resume: cont}, ActAck, false},
		{"live holder, redelivered start: its own carrier", conflict{alive: true, kind: start, redelivery: true}, ActLeavePending, true},
		{"live holder, resume with data: wait", conflict{alive: true, kind: queue.KindResume, resume: approval}, ActLeavePending, true},
	}
	for _, tc := range cases {
		o := onConflict(tc.c)
		if o.Action != tc.want || o.Restore != tc.back {
			t.Errorf("%s: %s restore %v, want %s restore %v", tc.name, o.Action, o.Restore, tc.want, tc.back)
		}
		// Only a resume with data waiting for a live holder is tried again soon: the others wait
		// for the lease to expire (a dead holder), or for the holder to ack its own carrier.
		soon := tc.c.alive && !tc.c.livenessOff && tc.c.kind == queue.KindResume && tc.c.resume == approval
		if (o.After > 0) != soon {
			t.Errorf("%s: tried again after %s, want soon %v", tc.name, o.After, soon)
		}
	}
}

type budget int

func (b budget) ShouldDeadLetter(d queue.Delivery) bool { return d.Count > int64(b) }

func TestOnRetryExhaustsOnTheLastAllowedDelivery(t *testing.T) {
	r := retry(errors.New("redis down"))
	for _, tc := range []struct {
		count    int64
		draining bool
		want     Action
	}{
		{1, false, ActRetry}, {4, false, ActRetry}, {5, false, ActExhausted}, {5, true, ActRetry}, {7, false, ActExhausted},
	} {
		if o := onRetry(r, queue.Delivery{Count: tc.count}, budget(5), tc.draining); o.Action != tc.want {
			t.Errorf("delivery %d draining %v: %s, want %s", tc.count, tc.draining, o.Action, tc.want)
		}
	}
	if o := onRetry(ack("x", "y"), queue.Delivery{Count: 9}, budget(5), false); o.Action != ActAck {
		t.Errorf("an ack is not a retry: %s", o.Action)
	}
}

func TestOnGate(t *testing.T) {
	for _, tc := range []struct {
		v    Verdict
		want Action
	}{
		{VerdictRefuse, ActDeadLetter}, {VerdictDefer, ActRequeue}, {VerdictHandOver, ActRequeue},
		{VerdictHold, ActLeavePending}, {VerdictLeaveForTarget, ActLeavePending},
	} {
		o := onGate(Decision{Verdict: tc.v, Rule: "rule", Reason: "why"}, nil)
		if o.Action != tc.want {
			t.Errorf("%s: %s, want %s", tc.v, o.Action, tc.want)
		}
		if tc.v == VerdictRefuse && (o.Reason != "rule" || o.Err == nil || o.Err.Error() != "why") {
			t.Errorf("refusal: reason %q detail %v", o.Reason, o.Err)
		}
	}
}
