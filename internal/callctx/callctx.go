// Package callctx holds the shapes of a per-call timeout, one per meaning, and the named
// budgets (budgets.go), so that every package bounds its calls the same way:
//
//   - Bounded: a call's own limit when its caller set none (a store or queue call made with a
//     bare context still ends; a caller's deadline, shorter or longer, is kept);
//   - Detached: a call that settles what was already done (an ack, a completed claim, the end
//     of a run) and must run even while its caller is being cancelled (a drain, a stop): it
//     keeps the caller's values, drops its cancellation and deadline, and has a limit of its
//     own;
//   - Within: a budget of the call's own that holds whatever the caller set (a start, a
//     round trip of a loop that must not hang).
package callctx

import (
	"context"
	"time"
)

// Bounded returns ctx when it has a deadline, otherwise ctx bounded by d.
func Bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// Detached returns a context with ctx's values that ctx's cancellation does not reach, bounded
// by d.
func Detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}
