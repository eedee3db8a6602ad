package queue

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
)

// Backlog is the task queue as an operator checks it first: how much waits, how much is being
// worked, what is left over and what died.
type Backlog struct {
	Stream string `json:"stream"`
	Group  string `json:"group"`
	DLQ    string `json:"dlq"`
	// GroupExists is false before the first worker created the consumer group: every entry of
	// the stream is then undelivered.
	GroupExists bool  `json:"group_exists"`
	Length      int64 `json:"stream_length"`
	Pending     int64 `json:"pending"` // delivered to a worker, not settled yet
	// Lag is the entries the group has not been handed yet (XINFO GROUPS lag); LagKnown is false
	// when Redis cannot tell (after an XDEL of an entry the group had not read, or before 7.0):
	// Lag is then the stream length less the pending count, an upper bound.
	Lag      int64 `json:"lag"`
	LagKnown bool  `json:"lag_known"`
	// Residue is what is left: entries acknowledged but not deleted (the residue sweeper removes
	// them), the stream length less the pending and the lag.
	Residue   int64 `json:"residue"`
	Consumers int64 `json:"consumers"` // consumer names the group knows, alive or not
	DLQLength int64 `json:"dlq_length"`
}

// Backlog reads the stream's length, its group's pending count, lag and consumers, and the
// dead-letter stream's length, in one round trip.
func (q *Queue) Backlog(ctx context.Context) (Backlog, error) {
	c := q.c
	res := c.DoMulti(ctx,
		c.B().Xlen().Key(q.stream).Build(),
		c.B().XinfoGroups().Key(q.stream).Build(),
		c.B().Xlen().Key(q.dlq).Build())
	b := Backlog{Stream: q.stream, Group: q.group, DLQ: q.dlq}
	var err error
	if b.Length, err = res[0].AsInt64(); err != nil {
		return b, fmt.Errorf("%w: xlen %s: %w", ErrRedis, q.stream, err)
	}
	if b.DLQLength, err = res[2].AsInt64(); err != nil {
		return b, fmt.Errorf("%w: xlen %s: %w", ErrRedis, q.dlq, err)
	}
	rows, err := res[1].ToArray()
	if re, ok := rueidis.IsRedisErr(err); ok && strings.Contains(strings.ToLower(re.Error()), "no such key") {
		err, rows = nil, nil // no stream yet: nothing was ever enqueued
	}
	if err != nil {
		return b, fmt.Errorf("%w: xinfo groups %s: %w", ErrRedis, q.stream, err)
	}
	for _, r := range rows {
		m, err := r.AsMap()
		if err != nil {
			return b, fmt.Errorf("%w: xinfo groups %s: %w", ErrRedis, q.stream, err)
		}
		name := m["name"]
		if n, _ := name.ToString(); n != q.group {
			continue
		}
		b.GroupExists = true
		b.Pending = intField(m, "pending")
		b.Consumers = intField(m, "consumers")
		if lag, ok := m["lag"]; ok && !lag.IsNil() {
			b.Lag, err = lag.AsInt64()
			b.LagKnown = err == nil
		}
	}
	if !b.GroupExists {
		b.Lag, b.LagKnown = b.Length, true
	}
	if !b.LagKnown {
		b.Lag = max(b.Length-b.Pending, 0)
	}
	b.Residue = max(b.Length-b.Pending-b.Lag, 0)
	return b, nil
}

// intField is an integer of an XINFO reply, 0 when it is missing or not an integer.
func intField(m map[string]rueidis.RedisMessage, name string) int64 {
	v, ok := m[name]
	if !ok {
		return 0
	}
	n, _ := v.AsInt64()
	return n
}
