package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/rueidis"

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

func (ts *TenantStore) counterKey(family, id string) (string, error) {
	if !slices.Contains(keys.CounterFamilies(), family) {
		return "", fmt.Errorf("%w: %q is not a counter family (%v)", ErrInvalid, family, keys.CounterFamilies())
	}
	return ts.sp.Mechanism(family, id)
}

func (ts *TenantStore) nodeRetryKey(id, node string) (string, error) {
	if _, err := ts.sp.Mechanism(keys.FamNodeRetry, id); err != nil {
		return "", err // an invalid execution id (keys.ErrBadID)
	}
	if node == "" || node[0] == '#' {
		return "", fmt.Errorf("%w: node id %q", ErrInvalid, node)
	}
	k, err := ts.sp.NodeRetry(id, node)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return k, nil
}

var ttlSeconds = int64(MechanismTTL.Seconds())

// Incr increments one counter family of an execution and returns the new value.
func (ts *TenantStore) Incr(ctx context.Context, family, id string) (int64, error) {
	key, err := ts.counterKey(family, id)
	if err != nil {
		return 0, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	res := c.DoMulti(ctx, c.B().Incr().Key(key).Build(), c.B().Expire().Key(key).Seconds(ttlSeconds).Build())
	return incrResult(res, family+" counter of "+id)
}

// IncrNodeRetry increments the retry counter of one node of an execution and returns it.
func (ts *TenantStore) IncrNodeRetry(ctx context.Context, id, node string) (int64, error) {
	key, err := ts.nodeRetryKey(id, node)
	if err != nil {
		return 0, err
	}
	set, _ := ts.nodeSetKey(id)
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	res := c.DoMulti(ctx,
		c.B().Incr().Key(key).Build(), c.B().Expire().Key(key).Seconds(ttlSeconds).Build(),
		c.B().Sadd().Key(set).Member(node).Build(), c.B().Expire().Key(set).Seconds(ttlSeconds).Build())
	return incrResult(res, "node retry counter of "+id+"/"+node)
}

func incrResult(res []rueidis.RedisResult, what string) (int64, error) {
	for _, r := range res[1:] {
		if err := r.Error(); err != nil {
			return 0, transient(ErrRedis, "increment "+what, err)
		}
	}
	n, err := res[0].AsInt64()
	if err != nil {
		return 0, transient(ErrRedis, "increment "+what, err)
	}
	return n, nil
}

// Counter reads one counter family of an execution (0 when unset).
func (ts *TenantStore) Counter(ctx context.Context, family, id string) (int64, error) {
	key, err := ts.counterKey(family, id)
	if err != nil {
		return 0, err
	}
	return ts.readInt(ctx, key, family+" counter of "+id)
}

// NodeRetry reads the retry counter of one node of an execution (0 when unset).
func (ts *TenantStore) NodeRetry(ctx context.Context, id, node string) (int64, error) {
	key, err := ts.nodeRetryKey(id, node)
	if err != nil {
		return 0, err
	}
	return ts.readInt(ctx, key, "node retry counter of "+id+"/"+node)
}

// NodeRetries reads every per-node retry counter of an execution, by node id.
func (ts *TenantStore) NodeRetries(ctx context.Context, id string) (map[string]int64, error) {
	set, err := ts.nodeSetKey(id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	nodes, err := c.Do(ctx, c.B().Smembers().Key(set).Build()).AsStrSlice()
	if err != nil {
		return nil, transient(ErrRedis, "read node retry set of "+id, err)
	}
	out := map[string]int64{}
	var names []string
	var cmds rueidis.Commands
	for _, n := range nodes {
		if k, err := ts.nodeRetryKey(id, n); err == nil {
			names = append(names, n)
			cmds = append(cmds, c.B().Get().Key(k).Build())
		}
	}
	if len(cmds) == 0 {
		return out, nil
	}
	for i, r := range c.DoMulti(ctx, cmds...) {
		v, err := r.AsInt64()
		switch {
		case rueidis.IsRedisNil(err):
			continue // expired
		case err != nil:
			return nil, transient(ErrRedis, "read node retry counter of "+id+"/"+names[i], err)
		}
		out[names[i]] = v
	}
	return out, nil
}

// ResetCounter deletes one counter family of an execution.
func (ts *TenantStore) ResetCounter(ctx context.Context, family, id string) error {
	key, err := ts.counterKey(family, id)
	if err != nil {
		return err
	}
	return ts.del(ctx, key, "reset "+family+" counter of "+id)
}

// ResetNodeRetry deletes the retry counter of one node (it stays in the node set until the
// execution is deleted or the set expires; a missing counter reads 0).
func (ts *TenantStore) ResetNodeRetry(ctx context.Context, id, node string) error {
	key, err := ts.nodeRetryKey(id, node)
	if err != nil {
		return err
	}
	return ts.del(ctx, key, "reset node retry counter of "+id+"/"+node)
}

func (ts *TenantStore) readInt(ctx context.Context, key, what string) (int64, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	n, err := c.Do(ctx, c.B().Get().Key(key).Build()).AsInt64()
	switch {
	case rueidis.IsRedisNil(err):
		return 0, nil
	case err != nil:
		return 0, transient(ErrRedis, "read "+what, err)
	}
	return n, nil
}

func (ts *TenantStore) del(ctx context.Context, key, what string) error {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	if err := c.Do(ctx, c.B().Del().Key(key).Build()).Error(); err != nil {
		return transient(ErrRedis, what, err)
	}
	return nil
}
