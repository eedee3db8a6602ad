package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// FoundTask is a task of an execution still in the stream: enqueued and not yet settled.
type FoundTask struct {
	ID   string `json:"message_id"`
	Kind Kind   `json:"kind"`
	// Pending: a consumer has it (read, not acknowledged); Consumer and Idle say who and for how
	// long. Otherwise no worker has read it yet.
	Pending    bool          `json:"pending"`
	Consumer   string        `json:"consumer,omitempty"`
	Idle       time.Duration `json:"idle_ns,omitempty"`
	Deliveries int64         `json:"deliveries,omitempty"`
	// ConfigFamily is the family the task was stamped with ("" for a legacy task: never
	// gated); a worker of another family leaves it pending (queue/gate.go).
	ConfigFamily string `json:"config_family,omitempty"`
	// QuotaDeferCount is how often a worker deferred this start because its tenant was at its
	// running limit (roles/worker Quota): each deferral is a new copy of the task.
	QuotaDeferCount int `json:"quota_defer_count,omitempty"`
}

// findPage is how many entries one XREVRANGE of FindTask reads.
const findPage = 500

// FindTask looks, newest first and among at most limit entries, for a task of the tenant's
// execution in the stream (found false: none there). An execution whose start is still here
// exists for its producer but has no state yet: `execution show` says it is queued.
func (q *Queue) FindTask(ctx context.Context, tenant, executionID string, limit int) (FoundTask, bool, error) {
	end := "+"
	for read := 0; read < limit; {
		found, err := q.d.Range(ctx, q.stream, Span{Start: "-", End: end, Count: min(findPage, limit-read), Rev: true})
		if err != nil {
			return FoundTask{}, false, fmt.Errorf("look for execution %s: %w", executionID, err)
		}
		es := found[0]
		for _, e := range es {
			payload, ok := e.Fields[PayloadField]
			// A cheap test before decoding: the id appears in the payload.
			if !ok || !strings.Contains(payload, executionID) {
				continue
			}
			env, _, err := Decode(q.stream, e.ID, []byte(payload))
			if err != nil || env.ExecutionID != executionID || env.Tenant() != tenant {
				continue
			}
			t := FoundTask{ID: e.ID, Kind: env.Kind, ConfigFamily: env.ConfigFamily, QuotaDeferCount: env.QuotaDeferCount}
			p, err := q.pendingEntry(ctx, e.ID)
			if err != nil && !errors.Is(err, ErrNoGroup) { // no group yet: no worker ever read it
				return FoundTask{}, false, err
			}
			if p != nil {
				t.Pending, t.Consumer, t.Idle, t.Deliveries = true, p.Consumer, p.Idle, p.Deliveries
			}
			return t, true, nil
		}
		read += len(es)
		if len(es) < findPage {
			break
		}
		end = "(" + es[len(es)-1].ID
	}
	return FoundTask{}, false, nil
}

// pendingEntry is the group's pending-list entry of one stream entry (nil: nobody has it).
func (q *Queue) pendingEntry(ctx context.Context, id string) (*PendingEntry, error) {
	rows, err := q.d.Pending(ctx, q.stream, PendingSpan{Group: q.group, Start: id, End: id, Count: 1})
	if err != nil {
		return nil, err
	}
	if len(rows[0]) == 0 {
		return nil, nil
	}
	return &rows[0][0], nil
}
