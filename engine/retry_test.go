package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
)

// A retry runs the failed node again on the same data: it is refused for the failures that
// would end the same way, and taken for those that may not (a node's error, a deadline).
func TestRetryOfADeterministicFailureIsRefused(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"r","start":"n","nodes":[{"id":"n","type":"log","params":{"message":"on"},"next":"f"},
		{"id":"f","type":"fail","params":{"message":"no","type":"PaymentDeclined"}}]}`)
	for typ, retryable := range map[string]bool{
		ErrTypeFlowFailed: false, ErrTypeNoBranch: false, ErrTypeSerialization: false, ErrTypeStateTooLarge: false,
		ErrTypeDueOutOfRange: false, ErrTypeUnknownNode: false, ErrTypeStepLimit: false,
		ErrTypeNode: true, ErrTypeDeadline: true, ErrTypeWaitTimeout: true, ErrTypeRejected: true, "DeliveriesExhausted": true,
	} {
		st := &state.Execution{ExecutionID: "ex_1", FlowID: "r", FlowHash: f.Hash, FlowHashAlgo: f.HashAlgo, Status: state.Error,
			CurrentNode: "n", Error: &state.ErrorInfo{Type: typ, Node: "n", Message: "it failed"}}
		err := CheckResume(f, st, ResumeRetry, nil, h.set.Expr, time.Now())
		if retryable != (err == nil) {
			t.Errorf("%s: retry check %v, want retryable %v", typ, err, retryable)
		}
		if !retryable && (!errors.Is(err, ErrInvalidResume) || !strings.Contains(err.Error(), "start a new execution")) {
			t.Errorf("%s: %v does not say what to do instead", typ, err)
		}
	}
	// An error a fail node raised, under whatever type it names, is raised again by a retry.
	st := &state.Execution{ExecutionID: "ex_1", FlowID: "r", FlowHash: f.Hash, FlowHashAlgo: f.HashAlgo, Status: state.Error,
		CurrentNode: "f", Error: &state.ErrorInfo{Type: "PaymentDeclined", Node: "f", Message: "no", Permanent: true}}
	if err := CheckResume(f, st, ResumeRetry, nil, h.set.Expr, time.Now()); !errors.Is(err, ErrInvalidResume) ||
		!strings.Contains(err.Error(), "fail node") {
		t.Errorf("retry of a fail node's own error type: %v", err)
	}
	// Through a real run: the fail node's execution is not retried.
	st = h.start(f, nil)
	wantError(t, st, "PaymentDeclined", "f")
	if _, err := h.ex.Resume(t.Context(), f, st.ExecutionID, ResumeRetry, nil); !errors.Is(err, ErrInvalidResume) {
		t.Fatalf("retry of a fail node: %v", err)
	}
}
