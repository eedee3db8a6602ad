package control

import "time"

// QueuedTask is the start task of an execution no worker has started yet, as found in the task
// stream.
type QueuedTask struct {
	ID   string `json:"message_id"`
	Kind string `json:"kind"`
	// Pending: a consumer has it (read, not acknowledged); Consumer and Idle say who and for how
	// long. Otherwise no worker has read it yet.
	Pending    bool          `json:"pending"`
	Consumer   string        `json:"consumer,omitempty"`
	Idle       time.Duration `json:"idle_ns,omitempty"`
	Deliveries int64         `json:"deliveries,omitempty"`
	// ConfigFamily is the family the task was stamped with ("" for a legacy task: never gated);
	// a worker of another family leaves it pending (queue/gate.go).
	ConfigFamily string `json:"config_family,omitempty"`
	// QuotaDeferCount is how often a worker deferred this start because its tenant was at its
	// running limit: each deferral is a new copy of the task.
	QuotaDeferCount int `json:"quota_defer_count,omitempty"`
}
