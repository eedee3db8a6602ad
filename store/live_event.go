package store

import "plaita/engine/state"

// LiveEvent is what a worker publishes (roles/worker/events.go) on an execution's channel
// (<prefix>execution_events:{<id>}) and, for a status change, on its tenant's status channel
// (<prefix>execution_status): the wire format of the console's live views. Its home is beside
// the channels it travels on, so that the publisher and every reader share one definition.
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
