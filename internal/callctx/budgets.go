package callctx

import (
	"context"
	"time"
)

// The named budgets: how long one call of a kind may take when nothing else bounds it. A call
// bounded by something other than its caller's deadline names one of these (or a setting of its
// own: a node's timeout, a drain's), so that the limits of the process read in one place.
const (
	// Start bounds a process's start: opening the console's database, connecting, the first
	// reads, every service started in order. Past it the process exits rather than hang.
	Start = 30 * time.Second
	// RedisOp bounds one Redis round trip of a loop that must not hang on a lost connection
	// (a reclaim, a group's creation, a bulk job's record, a doctor's checks).
	RedisOp = 10 * time.Second
	// BlockingSlack is added to a blocking command's own block time (XREADGROUP BLOCK, BLPOP):
	// the round trip's slack past it.
	BlockingSlack = 10 * time.Second
	// Cleanup bounds giving back what a failed call took (a replay's marker).
	Cleanup = 5 * time.Second
	// Publish bounds a best-effort publish, or a read of who listens: a slow Redis does not
	// slow the step that publishes.
	Publish = 2 * time.Second
	// Probe bounds a check of an outside dependency at start (the docker daemon).
	Probe = 15 * time.Second
)

// Within returns ctx bounded by d: the caller's deadline when it is sooner, else d. For a
// budget that holds whatever the caller set (Bounded keeps a caller's longer deadline).
func Within(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
