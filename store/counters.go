package store

import (
	"context"
	"fmt"
	"slices"

	"plaita/store/keys"
)

// Per-execution counters (keys.CounterFamilies: noderetry, noderefetch, g1wakeups, nofail,
// affinityhandover). Each is a bare integer with MechanismTTL (7d), refreshed on every
// increment: INCR and EXPIRE are pipelined in one round trip (same key, same slot).
//
// Per-node retry counters live under noderetry:{id}:<node>. The node ids that have one are kept
// in a SET, noderetry:{id}:#nodes (same slot, same TTL, refreshed with every per-node
// increment, so it always outlives its members), so Delete can name every per-node key in its
// script's KEYS without a SCAN.

// checkCounter refuses what names no counter: a family that is not one, a node id that is
// empty or starts with '#' (the node-retry set's own suffix).
func (ts *TenantStore) checkCounter(family, id, node string) error {
	if node == "" && !slices.Contains(keys.CounterFamilies(), family) {
		return fmt.Errorf("%w: %q is not a counter family (%v)", ErrInvalid, family, keys.CounterFamilies())
	}
	if err := keys.ValidID(id); err != nil {
		return err // an invalid execution id (keys.ErrBadID)
	}
	if node == "" {
		return nil
	}
	if node[0] == '#' {
		return fmt.Errorf("%w: node id %q", ErrInvalid, node)
	}
	if _, err := ts.sp.NodeRetry(id, node); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func (ts *TenantStore) incr(ctx context.Context, family, id, node string) (int64, error) {
	if err := ts.checkCounter(family, id, node); err != nil {
		return 0, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.r.d.Incr(ctx, ts.sp, family, id, node)
}

func (ts *TenantStore) counter(ctx context.Context, family, id, node string) (int64, error) {
	if err := ts.checkCounter(family, id, node); err != nil {
		return 0, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.r.d.Counter(ctx, ts.sp, family, id, node)
}

func (ts *TenantStore) reset(ctx context.Context, family, id, node string) error {
	if err := ts.checkCounter(family, id, node); err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.r.d.ResetCounter(ctx, ts.sp, family, id, node)
}

// Incr increments one counter family of an execution and returns the new value.
func (ts *TenantStore) Incr(ctx context.Context, family, id string) (int64, error) {
	return ts.incr(ctx, family, id, "")
}

// IncrNodeRetry increments the retry counter of one node of an execution and returns it.
func (ts *TenantStore) IncrNodeRetry(ctx context.Context, id, node string) (int64, error) {
	if node == "" {
		return 0, fmt.Errorf("%w: empty node id", ErrInvalid)
	}
	return ts.incr(ctx, keys.FamNodeRetry, id, node)
}

// Counter reads one counter family of an execution (0 when unset).
func (ts *TenantStore) Counter(ctx context.Context, family, id string) (int64, error) {
	return ts.counter(ctx, family, id, "")
}

// NodeRetry reads the retry counter of one node of an execution (0 when unset).
func (ts *TenantStore) NodeRetry(ctx context.Context, id, node string) (int64, error) {
	if node == "" {
		return 0, fmt.Errorf("%w: empty node id", ErrInvalid)
	}
	return ts.counter(ctx, keys.FamNodeRetry, id, node)
}

// NodeRetries reads every per-node retry counter of an execution, by node id.
func (ts *TenantStore) NodeRetries(ctx context.Context, id string) (map[string]int64, error) {
	if err := ts.checkCounter(keys.FamNodeRetry, id, ""); err != nil {
		return nil, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.r.d.NodeRetries(ctx, ts.sp, id)
}

// ResetCounter deletes one counter family of an execution.
func (ts *TenantStore) ResetCounter(ctx context.Context, family, id string) error {
	return ts.reset(ctx, family, id, "")
}

// ResetNodeRetry deletes the retry counter of one node (it stays in the node set until the
// execution is deleted or the set expires; a missing counter reads 0).
func (ts *TenantStore) ResetNodeRetry(ctx context.Context, id, node string) error {
	if node == "" {
		return fmt.Errorf("%w: empty node id", ErrInvalid)
	}
	return ts.reset(ctx, keys.FamNodeRetry, id, node)
}
