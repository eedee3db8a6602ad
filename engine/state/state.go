// Package state is the execution state model shared by the engine and every storage backend.
// It is the persisted contract: fields are only ever added, each with a default, and readers
// treat a missing field as "no such capability".
package state

import (
	"time"

	"plaita/internal/tracing"
)

// Status of an execution.
type Status string

const (
	Pending   Status = "pending"
	Running   Status = "running"
	Suspended Status = "suspended"
	Completed Status = "completed"
	Error     Status = "error"
	Cancelled Status = "cancelled"
)

// Terminal reports whether no step will ever run again for this status.
func (s Status) Terminal() bool { return s == Completed || s == Error || s == Cancelled }

// Suspension kinds.
const (
	SuspendEvent    = "event"
	SuspendDelay    = "delay"
	SuspendApproval = "approval"
)

// Keys of the context map.
const (
	ContextNodes = "$NODE" // node results by node id
	ContextVars  = "$VARS" // flow variables written by set nodes
)

// Execution is one run of a flow.
type Execution struct {
	ExecutionID  string                 `json:"execution_id"`
	TenantID     string                 `json:"tenant_id"`
	FlowID       string                 `json:"flow_id"`
	FlowVersion  string                 `json:"flow_version"`
	FlowHash     string                 `json:"flow_hash"`
	FlowHashAlgo string                 `json:"flow_hash_algo"`
	Engine       string                 `json:"engine_version"`
	Status       Status                 `json:"status"`
	CurrentNode  string                 `json:"current_node"`
	Input        any                    `json:"input"`
	Context      map[string]any         `json:"context"`
	NodeTimings  map[string]*NodeTiming `json:"node_timings"`
	StepCount    int                    `json:"step_count"`
	Suspend      *Suspend               `json:"suspend,omitempty"`
	Error        *ErrorInfo             `json:"error,omitempty"`
	Output       any                    `json:"output,omitempty"`
	StartTime    time.Time              `json:"start_time"`
	LastUpdate   time.Time              `json:"last_update_time"`
	EndTime      *time.Time             `json:"end_time,omitempty"`

	// Index holds the values the execution is listed by: field → canonical value
	// (CorrelationValue) of the INPUT fields its flow indexes (engine/index.go), set when it
	// starts and never changed; absent when the flow indexes nothing.
	Index map[string]string `json:"index,omitempty"`

	// LastResume is the last resume applied to the execution (absent before the first).
	LastResume *ResumeMark `json:"last_resume,omitempty"`

	// NodeAttempts counts failed attempts of the node being retried; cleared when it succeeds.
	NodeAttempts    map[string]int  `json:"node_attempts,omitempty"`
	Timeline        []TimelineEntry `json:"timeline,omitempty"`
	TimelineDropped int             `json:"timeline_dropped,omitempty"`

	// Branches counts the decisions of the execution's branching nodes since it started: node
	// id → branch label (engine Outcome.Branch: "true", "case 2", "default", "approved",
	// "timeout" …) → times taken, however many of them the bounded timeline no longer keeps.
	// A state starts with it empty ({}, engine.NewState), which is why it is never omitted.
	// Absent or null — a state an older engine started — the counts are unknown and stay so:
	// counting on from the middle of an execution would pass some of its decisions off as all
	// of them (CountBranch).
	Branches map[string]map[string]int `json:"branches"`

	// TraceParent and TraceState are the execution's trace (W3C trace context): the span of the
	// task that started it, or of its first run when no producer traced it. Every resume its
	// wake-ups send (a delay, an event, an approval) continues that trace. Absent when tracing
	// was off when it started.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// Trace is the execution's trace context (zero when it has none).
func (st *Execution) Trace() tracing.Parent {
	return tracing.Parent{TraceParent: st.TraceParent, TraceState: st.TraceState}
}

// MaxBranchLabels bounds the labels counted for one node in Execution.Branches. A node has as
// many as it has ways out — two for a condition, a switch's cases and default — so only a
// switch of more cases reaches it; its rarer cases are then counted together under
// BranchOther, and the counts still add up to every decision taken.
const MaxBranchLabels = 64

// BranchOther is the label the decisions past MaxBranchLabels of one node are counted under.
const BranchOther = "other"

// CountBranch counts one decision of node: the branch label it took. A state without counts
// (Branches nil, an older engine's) is left without: see Branches.
func (e *Execution) CountBranch(node, label string) {
	if e.Branches == nil || label == "" {
		return
	}
	m := e.Branches[node]
	if m == nil {
		m = map[string]int{}
		e.Branches[node] = m
	}
	if _, seen := m[label]; !seen && len(m) >= MaxBranchLabels-1 {
		label = BranchOther
	}
	m[label]++
}

// Timestamp is a UTC time in RFC 3339 with nanoseconds, formatted once when it is recorded.
// The timeline and the node timings hold hundreds of them and the state is encoded at every
// step: a pre-formatted string keeps that encoding cheap, and the JSON is the same as a
// time.Time's.
type Timestamp string

// Stamp formats t.
func Stamp(t time.Time) Timestamp { return Timestamp(t.UTC().Format(time.RFC3339Nano)) }

// Time parses the timestamp (the zero time when it is empty or malformed).
func (ts Timestamp) Time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, string(ts))
	return t
}

// NodeTiming aggregates the runs of one node.
type NodeTiming struct {
	Runs        int       `json:"runs"`
	FirstStart  Timestamp `json:"first_started"`
	LastStart   Timestamp `json:"last_started"`
	LastEnd     Timestamp `json:"last_ended"`
	TotalMillis int64     `json:"total_ms"`
}

// Suspend says what an execution waits for and what wakes it.
type Suspend struct {
	Kind  string     `json:"kind"` // event | delay | approval
	Node  string     `json:"node"`
	Since time.Time  `json:"since"`
	Due   *time.Time `json:"due,omitempty"` // delay: when to continue; event/approval: when it times out

	EventType string `json:"event_type,omitempty"` // event
	Match     string `json:"match,omitempty"`      // event: expression over EVENT
	Message   string `json:"message,omitempty"`    // approval: what the approver is asked

	// Correlation: the match's correlation terms that have a value at this suspension, in
	// the order written (state/correlation.go; event only). The subscription is indexed
	// under the first; none, or an absent field, is an uncorrelated wait (docs/events.md).
	Correlation []Correlation `json:"correlation,omitempty"`
}

// ResumeMark records a resume that was applied. When the worker that applied it dies before
// the execution settles, the redelivered resume meets a running execution: the mark tells it
// apart from a resume that does not fit, so it continues from the checkpoint instead of being
// refused (which would strand the execution in running).
type ResumeMark struct {
	Type string    `json:"type"`           // continue, retry, event, timeout, approval
	Node string    `json:"node,omitempty"` // the node it was applied at
	Key  string    `json:"key,omitempty"`  // the carrier's identity (task message id), when known
	At   Timestamp `json:"at"`
}

// ErrorInfo describes why an execution ended in error.
type ErrorInfo struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Node      string `json:"node,omitempty"`
	Permanent bool   `json:"permanent"`
}

// TimelineEntry is one event of the bounded per-execution timeline.
type TimelineEntry struct {
	Seq    int       `json:"seq"`
	Time   Timestamp `json:"time"`
	Node   string    `json:"node,omitempty"`
	Event  string    `json:"event"` // step, retry, suspended, resumed, completed, error, cancelled, log
	Millis int64     `json:"ms,omitempty"`
	Detail string    `json:"detail,omitempty"`
	// Why is the reason a branching node took its branch (engine Outcome.Why): "x > 1 is
	// true", "case 2: …", "approved by alice"; absent for other steps and in older states.
	Why string `json:"why,omitempty"`
}

// Nodes returns the node-result map, creating it when absent.
func (e *Execution) Nodes() map[string]any { return e.section(ContextNodes) }

// Vars returns the variables map, creating it when absent.
func (e *Execution) Vars() map[string]any { return e.section(ContextVars) }

func (e *Execution) section(key string) map[string]any {
	if e.Context == nil {
		e.Context = map[string]any{}
	}
	m, ok := e.Context[key].(map[string]any)
	if !ok {
		m = map[string]any{}
		e.Context[key] = m
	}
	return m
}
