package api

import (
	"time"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
)

// The wire types of the execution routes (h_ops.go, h_live.go): the console's own, copied field
// by field from control's results.

// ExecutionSummary is one execution in a list.
type ExecutionSummary struct {
	ExecutionID string            `json:"execution_id"`
	TenantID    string            `json:"tenant_id"`
	FlowID      string            `json:"flow_id"`
	FlowVersion string            `json:"flow_version"`
	Status      state.Status      `json:"status"`
	CurrentNode string            `json:"current_node"`
	StepCount   int               `json:"step_count"`
	StartTime   time.Time         `json:"start_time"`
	LastUpdate  time.Time         `json:"last_update_time"`
	EndTime     *time.Time        `json:"end_time,omitempty"`
	Suspend     *state.Suspend    `json:"suspend,omitempty"`
	Error       *state.ErrorInfo  `json:"error,omitempty"`
	Index       map[string]string `json:"index,omitempty" doc:"the values it is listed by (its flow's indexed fields)"`
	RetryNext   *time.Time        `json:"retry_next,omitempty" doc:"a running one whose node failed: when its next attempt starts (its retry back-off)"`
	Runtime     string            `json:"runtime,omitempty" doc:"local: it ran in the console's local mode (its state is in the console database; read-only on Redis)"`
}

// LiveEvent is what a worker published of an execution: a timeline entry, a node's start, a
// status change.
type LiveEvent struct {
	ExecutionID string       `json:"execution_id"`
	TenantID    string       `json:"tenant_id"`
	FlowID      string       `json:"flow_id"`
	Status      state.Status `json:"status"`
	Seq         int          `json:"seq,omitempty" doc:"the timeline sequence of the entry (0 for node_started, which is not recorded)"`
	Time        string       `json:"time"`
	Node        string       `json:"node,omitempty"`
	Event       string       `json:"event" doc:"node_started, started, step, retry, suspended, resumed, completed, error, cancelled …"`
	Millis      int64        `json:"ms,omitempty"`
	Detail      string       `json:"detail,omitempty"`
}

// liveEventOf is the live event an item of a follow carries (the zero event when it has none).
func liveEventOf(it control.LiveItem) LiveEvent {
	e := it.Event
	if e == nil {
		return LiveEvent{}
	}
	return LiveEvent{ExecutionID: e.ExecutionID, TenantID: e.TenantID, FlowID: e.FlowID, Status: e.Status, Seq: e.Seq, Time: e.Time,
		Node: e.Node, Event: e.Event, Millis: e.Millis, Detail: e.Detail}
}

// Done is what a resume, a cancel, a delete or an approval's answer did to an execution.
type Done struct {
	ExecutionID string       `json:"execution_id"`
	TenantID    string       `json:"tenant_id"`
	Action      string       `json:"action" doc:"cancel, delete or resume"`
	Result      string       `json:"result"`
	Was         state.Status `json:"was" doc:"the status it had (corrupt: a state that could not be read)"`
	Enqueued    bool         `json:"enqueued"`
	MessageID   string       `json:"message_id,omitempty"`
	// A resume's.
	ResumeType          engine.ResumeType `json:"resume_type,omitempty"`
	FlowID              string            `json:"flow_id,omitempty"`
	FlowVersion         string            `json:"flow_version,omitempty"`
	Checked             *bool             `json:"checked,omitempty"`
	Queue               string            `json:"queue,omitempty"`
	AllowFlowHashChange bool              `json:"allow_flow_hash_change,omitempty"`
	// A cancel's of an unreadable state: the bytes replaced by the cancelled state.
	ReplacedBytes int `json:"replaced_bytes,omitempty"`
	// A delete's.
	Deleted bool `json:"deleted,omitempty"`
}

func doneOf(d control.Done) Done {
	return Done{ExecutionID: d.ExecutionID, TenantID: d.TenantID, Action: d.Action, Result: d.Result, Was: d.Was, Enqueued: d.Enqueued,
		MessageID: d.MessageID, ResumeType: d.ResumeType, FlowID: d.FlowID, FlowVersion: d.FlowVersion, Checked: d.Checked, Queue: d.Queue,
		AllowFlowHashChange: d.AllowFlowHashChange, ReplacedBytes: d.ReplacedBytes, Deleted: d.Deleted}
}

type doneOut struct{ Body Done }

// done renders what an operation did, or its refusal.
func done(d control.Done, err error) (*doneOut, error) {
	if err != nil {
		return nil, err
	}
	return &doneOut{Body: doneOf(d)}, nil
}
