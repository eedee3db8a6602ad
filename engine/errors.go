package engine

import (
	"errors"
	"fmt"

	"plaita/engine/state"
)

// Storage failure classes (engine/state/errors.go), shared with every backend through package
// state: the executor decides by them alone.
var (
	ErrNotFound           = state.ErrNotFound
	ErrStateSerialization = state.ErrStateSerialization
	ErrStateTooLarge      = state.ErrStateTooLarge
	ErrLeaseLost          = state.ErrLeaseLost
)

// StateTooLargeError is an ErrStateTooLarge with the sizes.
type StateTooLargeError = state.StateTooLargeError

// permanentError marks a failure that retrying cannot fix (a bad expression, a rejected
// approval, an explicit fail node).
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying. Node errors are retryable unless marked.
func Permanent(err error) error {
	if err == nil || IsPermanent(err) {
		return err
	}
	return permanentError{err}
}

// IsPermanent reports whether err (or anything it wraps) was marked permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Error types recorded in state.ErrorInfo.Type.
const (
	ErrTypeNode          = "NodeError"
	ErrTypeDeadline      = "ExecutionDeadlineError"
	ErrTypeStepLimit     = "StepLimitExceeded"
	ErrTypeSerialization = "StateSerializationError"
	ErrTypeStateTooLarge = "StateTooLarge"
	ErrTypeNoBranch      = "NoMatchingBranch"
	ErrTypeFlowFailed    = "FlowFailed"
	ErrTypeWaitTimeout   = "WaitTimeout"
	ErrTypeRejected      = "ApprovalRejected"
	ErrTypeUnknownNode   = "UnknownNode"
	// ErrTypeStateCorrupt: an operator ended an execution whose stored state could no longer be
	// read; its state was replaced (see store.ReplaceCorrupt).
	ErrTypeStateCorrupt = "StateCorrupt"
	// ErrTypeDueOutOfRange: a delay's or a timeout's due time outside the range plaita can
	// schedule (before 1970, or more than MaxWaitSeconds ahead). Permanent.
	ErrTypeDueOutOfRange = "DueOutOfRange"
	// ErrTypeOrphaned: an operator's reap found the execution running with no worker holding
	// it and no task that would resume it, idle past the reap's bound (plaita reap). Not
	// permanent: a retry resumes it from its checkpoint.
	ErrTypeOrphaned = "Orphaned"
)

// deterministic are the error types a retry cannot get past: it runs the failed node again
// from the same state, which ends the same way (a fail node, a branch no case matches, a value
// that cannot be stored, a due time out of range, a node the flow no longer has, a spent step
// budget). Their executions are started anew instead, with other input or a fixed flow.
var deterministic = map[string]string{
	ErrTypeFlowFailed:    "the flow ended at a fail node",
	ErrTypeNoBranch:      "no branch of the node matches the execution's data",
	ErrTypeSerialization: "the node's result cannot be stored",
	ErrTypeStateTooLarge: "the node's result makes the state too large",
	ErrTypeDueOutOfRange: "the node's due time is out of range",
	ErrTypeUnknownNode:   "the flow has no such node",
	ErrTypeStepLimit:     "the execution used all its steps",
}

// Deterministic reports whether an execution that ended in error of this type would end the
// same way if retried, and says why.
func Deterministic(errType string) (why string, ok bool) {
	why, ok = deterministic[errType]
	return why, ok
}

// deterministicFailure is Deterministic for an execution of f that ended in e: also the error
// a fail node raises under a type of its own (params.type: "PaymentDeclined"), which a retry
// raises again just the same. (Another error at a fail node — its message that did not
// evaluate — is judged by its type, as at any node.)
func deterministicFailure(f *Flow, e *state.ErrorInfo) (why string, ok bool) {
	if e == nil {
		return "", false
	}
	if why, ok := Deterministic(e.Type); ok {
		return why, ok
	}
	if n, found := f.Node(e.Node); found {
		if fn, isFail := n.runner.(*failNode); isFail && fn.typ == e.Type {
			return deterministic[ErrTypeFlowFailed], true
		}
	}
	return "", false
}

var (
	// ErrInvalidResume: the resume type does not fit the execution's status or suspension.
	ErrInvalidResume = errors.New("invalid resume")
	// ErrFlowChanged: the flow definition changed under a running execution (same hash
	// algorithm, different hash). Not overridable: restore the definition or start anew.
	ErrFlowChanged = errors.New("flow definition changed since the execution started")
	// ErrFlowHashMismatch: algorithm and hash both differ (an engine upgrade is suspected);
	// resumable only with allow_flow_hash_change.
	ErrFlowHashMismatch = errors.New("flow_hash_mismatch")
	// ErrEventMismatch: the event given to resume a wait_event does not satisfy its match.
	ErrEventMismatch = errors.New("event does not match the waiting node")
)

// FlowHashError carries the details of a refused resume.
type FlowHashError struct {
	Err              error
	StoredAlgo       string
	StoredHash       string
	CurrentAlgo      string
	CurrentHash      string
	UpgradeSuspected bool
}

func (e *FlowHashError) Error() string {
	msg := fmt.Sprintf("%v: stored %s/%s, current %s/%s", e.Err, e.StoredAlgo, e.StoredHash, e.CurrentAlgo, e.CurrentHash)
	if e.UpgradeSuspected {
		msg += " (upgrade_suspected: resume with allow_flow_hash_change if the definition is unchanged)"
	}
	return msg
}

func (e *FlowHashError) Unwrap() error { return e.Err }
