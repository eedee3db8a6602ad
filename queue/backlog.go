package queue

import "context"

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
	b := Backlog{Stream: q.stream, Group: q.group, DLQ: q.dlq}
	in, err := q.d.Info(ctx, q.stream, q.dlq)
	if err != nil {
		return b, err
	}
	b.Length, b.DLQLength = in.Length, in.DLQLength
	if g, ok := q.ownGroup(in); ok {
		b.GroupExists = true
		b.Pending, b.Consumers, b.Lag, b.LagKnown = g.Pending, g.Consumers, g.Lag, g.LagKnown
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
