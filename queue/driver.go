package queue

import (
	"context"
	"time"
)

// Driver is the storage of task streams: append-only streams of entries with consumer groups,
// the groups' pending lists with their delivery counters, and short-lived one-shot markers.
// Queue and Producer keep every policy (the gate, the reclaim cursor, dead-lettering once, the
// replay marker's protocol); a driver only stores. Two implement it: RedisDriver (Redis
// Streams, the cluster) and the console's database (store/sqlite, local mode), both held to
// one contract (queuetest).
//
// Ids are Redis stream ids ("<ms>-<seq>", growing within a stream); a Span's bounds use XRANGE's
// syntax: "-" and "+" for the ends, "(" before an id for an exclusive bound. A failure is
// classed: ErrNoGroup for a missing group (or stream, where a group is named), else a
// transient error (ErrRedis on Redis).
type Driver interface {
	// Add appends an entry with the given field/value pairs and returns its id.
	Add(ctx context.Context, stream string, fields ...string) (string, error)
	// KeyType is "none" for a name nothing uses, "stream" for a stream, or the kind of the
	// other thing stored under it.
	KeyType(ctx context.Context, key string) (string, error)
	// CreateGroup creates group on stream (and the stream) positioned after start; an existing
	// group is left alone and reported as not created.
	CreateGroup(ctx context.Context, stream, group, start string) (created bool, err error)
	// Len is the number of entries of stream (0 when there is none).
	Len(ctx context.Context, stream string) (int64, error)
	// ReadGroup hands consumer up to count entries the group has not been handed yet, each
	// with delivery counter 1, waiting up to block (<= 0: not at all) when there are none.
	// Nothing within block is an empty result.
	ReadGroup(ctx context.Context, stream, group, consumer string, count int, block time.Duration) ([]Entry, error)
	// Range reads each span, in one round trip.
	Range(ctx context.Context, stream string, spans ...Span) ([][]Entry, error)
	// Pending reads each span of the group's pending list, in one round trip.
	Pending(ctx context.Context, stream string, spans ...PendingSpan) ([][]PendingEntry, error)
	// Claim moves the entries among ids that are still pending and idle for at least minIdle
	// to consumer, adds one to their delivery counters and restarts their idle time; it
	// returns those that still exist.
	Claim(ctx context.Context, stream, group, consumer string, minIdle time.Duration, ids []string) ([]Entry, error)
	// Hold moves pending entries to consumer and restarts their idle time at idle (0: they
	// were just delivered) without counting a delivery; deliveries >= 0 also sets their
	// counters to it.
	Hold(ctx context.Context, stream, group, consumer string, deliveries int64, idle time.Duration, ids ...string) error
	// Ack removes ids from the group's pending list.
	Ack(ctx context.Context, stream, group string, ids ...string) error
	// AckDelete acknowledges ids and deletes them from the stream in one round trip. err is
	// the acknowledgement's failure; delErr the deletion's, which leaves residue (acknowledged
	// entries still in the stream) for the sweeper.
	AckDelete(ctx context.Context, stream, group string, ids ...string) (delErr, err error)
	// Delete deletes entries from the stream and says how many there were.
	Delete(ctx context.Context, stream string, ids ...string) (int64, error)
	// Info reads the lengths of stream and dlq and the groups of stream, in one round trip.
	Info(ctx context.Context, stream, dlq string) (StreamInfo, error)
	// DeadLetter appends an entry of fields to dlq, trims it to its newest maxLen entries and
	// sets marker to the new id for ttl — unless marker is set already: then nothing is
	// written and the marker's id is returned with Wrote false. All in one step.
	DeadLetter(ctx context.Context, dlq, marker string, maxLen int, ttl time.Duration, fields ...string) (DeadLettered, error)
	// SetOnce sets marker key to value for ttl unless it is set (false: it was).
	SetOnce(ctx context.Context, key, value string, ttl time.Duration) (bool, error)
	// Get reads marker key (ok false: not set or expired).
	Get(ctx context.Context, key string) (value string, ok bool, err error)
	// Replace sets an existing marker to value, keeping its expiry; a missing one stays
	// missing.
	Replace(ctx context.Context, key, value string) error
	// Unset removes marker key.
	Unset(ctx context.Context, key string) error
}

// Entry is one stream entry.
type Entry struct {
	ID     string
	Fields map[string]string
}

// Span is one range of a stream: Start to End (XRANGE bounds), at most Count entries (< 1: all),
// newest first when Rev.
type Span struct {
	Start, End string
	Count      int
	Rev        bool
}

// PendingSpan is one range of a group's pending list: entries from Start to End (XRANGE
// bounds) idle for at least MinIdle, at most Count.
type PendingSpan struct {
	Group      string
	Start, End string
	MinIdle    time.Duration
	Count      int
}

// PendingEntry is one entry of a group's pending list.
type PendingEntry struct {
	ID         string
	Consumer   string
	Idle       time.Duration
	Deliveries int64
}

// StreamInfo is a stream's and its dead-letter stream's size and the stream's groups.
type StreamInfo struct {
	Length    int64
	DLQLength int64
	Groups    []GroupInfo
}

// GroupInfo is one consumer group of a stream.
type GroupInfo struct {
	Name          string
	LastDelivered string // the id of the last entry handed to the group
	Pending       int64
	Consumers     int64
	// Lag is the entries the group has not been handed yet; LagKnown is false when the driver
	// cannot tell (Redis after an XDEL of an entry the group had not read, or before 7.0).
	Lag      int64
	LagKnown bool
}

// DeadLettered is what Driver.DeadLetter did.
type DeadLettered struct {
	Wrote   bool   // false: the marker was set; nothing was written
	ID      string // the new entry's id, or the marker's when Wrote is false
	Trimmed int64  // entries the trim removed
	Length  int64  // the dead-letter stream's length afterwards
}

// DelayDriver is the storage of delay queues: members with a due time, a count of failed
// sends and a record of given-up members per queue, and the move of due members onto a task
// stream. Policy (what a member's resume is, when to give up) stays in Delay. RedisDelay and
// the console's database implement it, held to queuetest's DelayContract.
type DelayDriver interface {
	// Schedule sets member's time in queue name (adding it when absent).
	Schedule(ctx context.Context, name, member string, at time.Time) error
	// Due lists up to limit members due at now, earliest first.
	Due(ctx context.Context, name string, now time.Time, limit int) ([]string, error)
	// Move carries out one pass over items, each member at most once across movers: a member
	// that is gone or no longer due is skipped; a dead one goes to the dead records; a sent one
	// has its payload added to stream and leaves the queue. A send that fails is retried per
	// o (its time moves on) and given up after o.MaxAttempts. Results are per item, in order.
	Move(ctx context.Context, name, stream string, now time.Time, o MoveOptions, items []MoveItem) ([]MoveResult, error)
	// Stats reads the queue at now.
	Stats(ctx context.Context, name string, now time.Time) (DelayStats, error)
	// Lookup reads one member's time, failed sends and dead record (raw JSON, "" for none).
	Lookup(ctx context.Context, name, member string) (at time.Time, scheduled bool, attempts int64, dead string, err error)
	// Dead reads every given-up member's record (raw JSON).
	Dead(ctx context.Context, name string) (map[string]string, error)
}

// MoveItem is one due member and what a pass does with it: send Payload (an envelope's JSON),
// or bury it with Dead (its record's JSON) when Dead is not "".
type MoveItem struct {
	Member  string
	Payload string
	Dead    string
}

// MoveCode says what happened to one MoveItem.
type MoveCode int

const (
	MoveSkipped MoveCode = iota // gone, or not due any more
	MoveSent                    // ID is the new task's id
	MoveRetried                 // the send failed (Err); the member waits for its next attempt
	MoveBuried                  // moved to the dead records (Err and Attempts: a failed send's)
	MoveKept                    // the failure could not even be counted; left for the next pass
)

// MoveResult is one MoveItem's outcome.
type MoveResult struct {
	Code     MoveCode
	ID       string
	Err      string
	Attempts int64
}
