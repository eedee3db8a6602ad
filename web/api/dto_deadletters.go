package api

import (
	"time"

	"plaita/control"
)

// The wire types of the dead-letter routes (h_deadletters.go): the console's own, copied field by
// field from control's results.

// DeadLetter is an entry of the dead-letter stream: why the task was dead-lettered, where from,
// and its payload.
type DeadLetter struct {
	ID             string    `json:"dlq_id"`
	Reason         string    `json:"reason"`
	Detail         string    `json:"detail,omitempty"`
	SourceID       string    `json:"source_id"`
	Queue          string    `json:"queue"`
	Consumer       string    `json:"consumer,omitempty"`
	DeliveryCount  int64     `json:"delivery_count"`
	SchemaVersion  int       `json:"schema_version"`
	TenantID       string    `json:"tenant_id"`
	ExecutionID    string    `json:"execution_id,omitempty"`
	Kind           string    `json:"kind,omitempty"`
	DeadLetteredAt time.Time `json:"dead_lettered_at,omitzero"`
	Payload        string    `json:"payload"`
	HasPayload     bool      `json:"has_payload"`
	// Truncated: the payload was oversized; Payload is its first bytes, PayloadSize and
	// PayloadSHA256 describe the whole.
	Truncated     bool   `json:"payload_truncated,omitempty"`
	PayloadSize   int    `json:"payload_size,omitempty"`
	PayloadSHA256 string `json:"payload_sha256,omitempty"`
	FlowID        string `json:"flow_id,omitempty" doc:"the flow its task names (absent when the payload does not say)"`
	// Replayed is read in a listing only (a single dead letter's read leaves it false).
	Replayed   bool   `json:"replayed" doc:"in a listing: it was replayed (a replay marker is set for 90 days)"`
	ReplayedAs string `json:"replayed_as,omitempty" doc:"in a listing: the task entry its replay enqueued (absent while the replay is under way)"`
}

func deadLetterOf(e control.DeadLetter) DeadLetter {
	return DeadLetter{ID: e.ID, Reason: e.Reason, Detail: e.Detail, SourceID: e.SourceID, Queue: e.Queue, Consumer: e.Consumer,
		DeliveryCount: e.DeliveryCount, SchemaVersion: e.SchemaVersion, TenantID: e.TenantID, ExecutionID: e.ExecutionID, Kind: e.Kind,
		DeadLetteredAt: e.DeadLetteredAt, Payload: e.Payload, HasPayload: e.HasPayload, Truncated: e.Truncated, PayloadSize: e.PayloadSize,
		PayloadSHA256: e.PayloadSHA256, FlowID: e.FlowID, Replayed: e.Replayed, ReplayedAs: e.ReplayedAs}
}

// DeadLetterList is a page of dead letters, newest first: the tenant's, or every tenant's.
type DeadLetterList struct {
	TenantID   string `json:"tenant_id"`
	AllTenants bool   `json:"all_tenants"`
	control.Page[DeadLetter]
}

// ReplayResult is what a replay did: enqueued the dead letter again, or nothing (a second
// replay: already_replayed).
type ReplayResult struct {
	Status          string `json:"status"`
	DLQID           string `json:"dlq_id"`
	QueueID         string `json:"queue_id,omitempty" doc:"the new task's stream id (absent when unknown)"`
	SourceMessageID string `json:"source_message_id"`
	ExecutionID     string `json:"execution_id"`
	// DerivedExecutionID: a legacy start without execution_id got the id its first delivery
	// used, derived from its source message.
	DerivedExecutionID bool   `json:"derived_execution_id"`
	SchemaVersion      int    `json:"schema_version"`
	TenantID           string `json:"tenant_id"`
}
