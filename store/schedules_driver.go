package store

import (
	"context"
	"time"

	"plaita/queue"
)

// SchedulesDriver is the storage of the cron schedules: per schedule a record (its definition,
// a revision, its firing state and its pending claims), per tenant an index of its schedules by
// creation time, and per key root a due index (when the schedule role must look at each one
// next). Schedules keeps every policy — validation, the cron calendar, decoding, the errors and
// the shapes of the records — and hands the driver what to store; one method is one atomic
// step. Two implement it, held to one contract (storetest.SchedulesContract): RedisSchedules
// (the cluster's authority: one Lua script or one pipeline per method) and the console's
// database (store/sqlite, local mode: one transaction per write).
//
// Times are Unix milliseconds at the driver; the zero time.Time means "none" (+inf): a next tick
// of a disabled schedule, a due time with nothing to do. Every write that changes what the
// schedule role waits for recomputes the schedule's due time as min(next tick, claimed time +
// grace of each pending claim) — a pending claim whose JSON does not decode counts as claimed
// at 0 — so that the due index is exact. Claim times are the driver's clock, the clock of the
// ids of its task streams (Streams), so a takeover can look for a start by time.
//
// A failure of the storage itself is transient (ErrRedis on Redis); a record that is something
// else than a record is a permanent ErrBadSchedule.
type SchedulesDriver interface {
	// Create stores a new record — def, rev 1, last_tick last, next tick next — adds the id to
	// its tenant's index at created and sets its due time. false: the id is taken; nothing is
	// written.
	Create(ctx context.Context, ref ScheduleRef, def string, last, next, created time.Time, grace time.Duration) (bool, error)
	// Read reads records, in one round trip, as DecodeSchedule takes them: one StoredSchedule
	// per ref, in order.
	Read(ctx context.Context, refs ...ScheduleRef) ([]StoredSchedule, error)
	// IDs lists the ids in the tenant's index, oldest first.
	IDs(ctx context.Context, root, tenant string) ([]string, error)
	// Update writes def and next (and last as last_tick unless it is zero) and moves rev on by
	// one, if rev is still the stored one. found false: there is no record.
	Update(ctx context.Context, ref ScheduleRef, rev int64, def string, last, next time.Time, grace time.Duration) (found, written bool, err error)
	// Delete removes the record, its index entry and its due entry; false when there was no
	// record.
	Delete(ctx context.Context, ref ScheduleRef) (bool, error)

	// Due lists up to limit (at least 1) due entries of the key root at or before now, earliest
	// first (then by member).
	Due(ctx context.Context, root string, now time.Time, limit int) ([]DueMember, error)
	// DueScore is the schedule's due time (ok false: no due entry; the zero time: +inf).
	DueScore(ctx context.Context, ref ScheduleRef) (at time.Time, ok bool, err error)
	// Claim records w.Body — a JSON object, the claim without its times — as the pending claim
	// of w.Tick, with claimed_ms and first_claimed_ms set to now by the driver's clock, and
	// moves last_tick to w.Tick and the next tick to w.Next, if the stored rev and last_tick are
	// still w.Rev and w.Last. It returns the claim as stored (the token Complete and TakeOver
	// compare); ok false: rev or last_tick moved, nothing written.
	Claim(ctx context.Context, ref ScheduleRef, w TickWrite, grace time.Duration) (stored string, ok bool, err error)
	// Skip records w.Body as the last skip and moves last_tick to w.Tick and the next tick to
	// w.Next, with Claim's compare-and-set (false: nothing written).
	Skip(ctx context.Context, ref ScheduleRef, w TickWrite, grace time.Duration) (bool, error)
	// Complete removes the pending claim of tickMS if it is stored byte for byte as pending,
	// and records outcome: as the last fire when fired (unless a newer tick's fire is recorded
	// already), else as the last skip. false: the claim is not stored as given.
	Complete(ctx context.Context, ref ScheduleRef, tickMS int64, pending, outcome string, fired bool, grace time.Duration) (bool, error)
	// TakeOver makes the pending claim of tickMS, stored byte for byte as pending, by's: once
	// it is older than grace by the driver's clock, it sets claimed_ms to now and by (and
	// first_claimed_ms when it has none), and returns the claim as stored.
	TakeOver(ctx context.Context, ref ScheduleRef, tickMS int64, pending, by string, grace time.Duration) (Takeover, string, error)
	// Reschedule sets the next tick if rev is still the stored one (false: nothing written).
	Reschedule(ctx context.Context, ref ScheduleRef, rev int64, next time.Time, grace time.Duration) (bool, error)
	// Forget removes the due entry of a schedule that has no record (a record's is kept).
	Forget(ctx context.Context, ref ScheduleRef) error
	// Park sets the due time of a schedule that has a record to +inf.
	Park(ctx context.Context, ref ScheduleRef) error

	// Streams are the task streams beside the schedules, where their starts are enqueued:
	// FindInStream reads them.
	Streams() queue.Driver
}

// ScheduleRef names one schedule to a driver: the key root, the tenant's name (keys.Space's:
// "default" for the default tenant) and the id, all valid.
type ScheduleRef struct {
	Root, Tenant, ID string
}

// member is the schedule's member in the due index.
func (r ScheduleRef) member() string { return r.Tenant + ":" + r.ID }

// StoredSchedule is one record as a driver reads it: its fields as DecodeSchedule takes them
// (nil or empty: there is no record), or Err, a permanent ErrBadSchedule, when what is stored
// there is not a record.
type StoredSchedule struct {
	Fields map[string]string
	Err    error
}

// DueMember is one entry of the due index: "<tenant>:<id>" and its due time (zero: +inf).
type DueMember struct {
	Member string
	At     time.Time
}

// TickWrite is what Claim and Skip write, compare-and-set on the record as read (Rev, Last):
// the tick handled, its body (the claim without its times, or the skip) and the next tick
// (zero: none).
type TickWrite struct {
	Rev  int64
	Last time.Time
	Tick time.Time
	Body string
	Next time.Time
}

// Takeover is what SchedulesDriver.TakeOver found.
type Takeover int

const (
	// TakeoverGone: the claim is no longer stored as given (completed, deleted, taken).
	TakeoverGone Takeover = iota
	// TakeoverTaken: the claim is the caller's now.
	TakeoverTaken
	// TakeoverYoung: the claim is younger than the grace; nothing written.
	TakeoverYoung
	// TakeoverUnreadable: the stored claim does not decode or has no claimed_ms.
	TakeoverUnreadable
)
