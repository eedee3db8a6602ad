package state

import "fmt"

// ResumeType says why a suspended or stopped execution continues. It is part of the task
// envelope and of the state (LastResume), so it lives with the persisted model.
type ResumeType string

const (
	ResumeContinue ResumeType = "continue" // from the checkpoint (running) or past a delay
	ResumeRetry    ResumeType = "retry"    // re-run the node an errored execution stopped at
	ResumeEvent    ResumeType = "event"    // the awaited event arrived
	ResumeTimeout  ResumeType = "timeout"  // a wait, approval or delay ran out
	ResumeCancel   ResumeType = "cancel"   // stop the execution
	ResumeApproval ResumeType = "approval" // a human answered
)

// ResumeTypes lists every resume type.
func ResumeTypes() []ResumeType {
	return []ResumeType{ResumeContinue, ResumeRetry, ResumeEvent, ResumeTimeout, ResumeCancel, ResumeApproval}
}

// ParseResumeType validates a resume type name.
func ParseResumeType(s string) (ResumeType, error) {
	for _, rt := range ResumeTypes() {
		if string(rt) == s {
			return rt, nil
		}
	}
	return "", fmt.Errorf("unknown resume type %q (continue, retry, event, timeout, cancel, approval)", s)
}
