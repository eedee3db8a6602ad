package store

import (
	"context"
	"errors"

	"plaita/store/keys"
)

// The two retry gates of an execution in error (the "wake-up budget" of docs/wakeups.md): a
// retry resets the node's retry budget, so without them "wake → spend the budget → error →
// wake" would loop for ever. The worker decides a retry with RetryBudget.Exceeded, and the
// resume check of the CLI and the console reads the same verdict.
const (
	// G1MaxWakeups (G1_MAX_WAKEUPS) is how often one execution in error may be woken by a
	// retry; manual and automatic retries share it (counter g1wakeups).
	G1MaxWakeups = 2
	// DeterministicFailureMax (DETERMINISTIC_FAILURE_MAX) is how many runs of one execution may
	// end in a node failure or a deadline, or crash its worker, in a row (counter nofail).
	DeterministicFailureMax = 12
)

// RetryBudget is an execution's two gate counters.
type RetryBudget struct {
	G1Wakeups int64 `json:"g1wakeups"`
	NoFail    int64 `json:"nofail"`
}

// BudgetExceeded is a gate that refuses a retry: its counter family, count and limit.
type BudgetExceeded struct {
	Counter string // keys.FamG1Wakeups or keys.FamNoFail
	Count   int64
	Limit   int64
}

// Exceeded is the gate that refuses a retry now (nil: both let it through). noFailMax < 1 is
// DeterministicFailureMax.
func (b RetryBudget) Exceeded(noFailMax int) *BudgetExceeded {
	if noFailMax < 1 {
		noFailMax = DeterministicFailureMax
	}
	switch {
	case b.G1Wakeups >= G1MaxWakeups:
		return &BudgetExceeded{Counter: keys.FamG1Wakeups, Count: b.G1Wakeups, Limit: G1MaxWakeups}
	case b.NoFail >= int64(noFailMax):
		return &BudgetExceeded{Counter: keys.FamNoFail, Count: b.NoFail, Limit: int64(noFailMax)}
	}
	return nil
}

// RetryBudget reads an execution's two gate counters.
func (ts *TenantStore) RetryBudget(ctx context.Context, id string) (RetryBudget, error) {
	g1, err1 := ts.Counter(ctx, keys.FamG1Wakeups, id)
	nofail, err2 := ts.Counter(ctx, keys.FamNoFail, id)
	if err := errors.Join(err1, err2); err != nil {
		return RetryBudget{}, err
	}
	return RetryBudget{G1Wakeups: g1, NoFail: nofail}, nil
}
