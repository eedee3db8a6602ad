package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine/state"
)

// Delay queue (docs/wakeups.md): the ZSET <PLAITA_DELAY_QUEUE>:scheduled, shared by all
// tenants, of resumes due at a time — a delay node's continue, a wait_event or approval
// timeout. Score = due time in Unix milliseconds; member = the compact JSON of a DelayEntry.
// The worker schedules; the delay role takes the due members, enqueues their resumes and
// removes them (:attempts and :dead beside :scheduled are the delay role's).

// DelayEntry is one member of the delay queue. Its JSON (fields in this order) is the member
// itself, so scheduling the same entry twice leaves one member.
type DelayEntry struct {
	ExecutionID string           `json:"execution_id"`
	TenantID    string           `json:"tenant_id"` // "default" for the default tenant
	FlowID      string           `json:"flow_id"`
	FlowVersion string           `json:"flow_version"`
	ResumeType  state.ResumeType `json:"resume_type"` // continue (delay) | timeout (event, approval)
	Node        string           `json:"node"`
	// Due is the due time (the score as a time), written in UTC with nanoseconds.
	Due time.Time `json:"due"`
}

// DelayScheduledKey is the ZSET of the delay queue named name (PLAITA_DELAY_QUEUE).
func DelayScheduledKey(name string) string { return name + ":scheduled" }

// Delay is the delay queue of one deployment. It is safe for concurrent use.
type Delay struct {
	c    rueidis.Client
	name string
}

// NewDelay returns the delay queue named name (PLAITA_DELAY_QUEUE) over client c. An empty
// name is an error, never a key ":scheduled".
func NewDelay(c rueidis.Client, name string) (*Delay, error) {
	if c == nil {
		return nil, errors.New("queue.NewDelay: client is required")
	}
	if name == "" {
		return nil, errors.New("queue.NewDelay: empty delay queue name (PLAITA_DELAY_QUEUE)")
	}
	return &Delay{c: c, name: name}, nil
}

// Name is the queue's configured name; ScheduledKey its ZSET of due resumes.
func (d *Delay) Name() string         { return d.name }
func (d *Delay) ScheduledKey() string { return DelayScheduledKey(d.name) }

// delayOpTimeout bounds one Schedule whose context has no deadline.
const delayOpTimeout = 10 * time.Second

// Schedule adds e at its due time. Idempotent: the member is a pure function of e. An entry
// without execution id, resume type or due time is refused before anything is sent.
func (d *Delay) Schedule(ctx context.Context, e DelayEntry) error {
	if e.ExecutionID == "" || e.ResumeType == "" || e.Due.IsZero() {
		return fmt.Errorf("delay queue %s: entry needs an execution id, a resume type and a due time: %+v", d.name, e)
	}
	e.Due = e.Due.UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("delay queue %s: encode entry of %s: %w", d.name, e.ExecutionID, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, delayOpTimeout)
		defer cancel()
	}
	key := d.ScheduledKey()
	if err := d.c.Do(ctx, d.c.B().Zadd().Key(key).ScoreMember().ScoreMember(float64(e.Due.UnixMilli()), string(b)).Build()).Error(); err != nil {
		return fmt.Errorf("delay queue %s: schedule %s of %s: %w", key, e.ResumeType, e.ExecutionID, err)
	}
	return nil
}
