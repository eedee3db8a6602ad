package control

import (
	"context"
	"fmt"
	"time"

	"plaita/store/sqlite"
)

// ReconcileResult is what an orphan reconcile of local mode did.
type ReconcileResult = sqlite.ReconcileResult

// OrphanReport is what local mode's start did with the executions an earlier version's local
// mode left running in the console database (they have no task in the embedded stream, so
// nothing would take them up): PLAITA_CONSOLE_RECONCILE_ORPHANS suspends them for an operator,
// fails them, or leaves them.
type OrphanReport struct {
	Result ReconcileResult
	Error  string
}

// ReconcileLocalOrphans settles the executions an earlier version's local mode left running in
// db (sqlite.Executions.ReconcileOrphans with mode).
func ReconcileLocalOrphans(ctx context.Context, x *sqlite.Executions, mode sqlite.OrphanMode, now time.Time) (*OrphanReport, error) {
	res, err := x.ReconcileOrphans(ctx, mode, now)
	out := &OrphanReport{Result: res}
	if err != nil {
		out.Error = err.Error()
		return out, fmt.Errorf("local mode: orphan reconcile: %w", err)
	}
	return out, nil
}
