package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// RedisFlowsDriver is FlowsDriver on the keys flows.go lays out: a STRING per version, a ZSET
// of each flow's versions and a ZSET of the tenant's flows, scored by publication time. Each
// method is the command or the pipeline its doc names: one round trip.
type RedisFlowsDriver struct{ c rueidis.Client }

// RedisFlows returns the FlowsDriver over client c.
func RedisFlows(c rueidis.Client) *RedisFlowsDriver { return &RedisFlowsDriver{c: c} }

var _ FlowsDriver = (*RedisFlowsDriver)(nil)

// Definition is GET of the version's key.
func (r *RedisFlowsDriver) Definition(ctx context.Context, sp keys.Space, flowID, version string) ([]byte, bool, error) {
	b, err := r.c.Do(ctx, r.c.B().Get().Key(sp.Flow(flowID, version)).Build()).AsBytes()
	switch {
	case rueidis.IsRedisNil(err):
		return nil, false, nil
	case err != nil:
		return nil, false, transient(ErrRedis, "read flow "+flowID, err)
	}
	return b, true, nil
}

// Put is SET NX of the version's key.
func (r *RedisFlowsDriver) Put(ctx context.Context, sp keys.Space, flowID, version string, def []byte) (bool, error) {
	c := r.c
	err := c.Do(ctx, c.B().Set().Key(sp.Flow(flowID, version)).Value(rueidis.BinaryString(def)).Nx().Build()).Error()
	switch {
	case rueidis.IsRedisNil(err):
		return false, nil
	case err != nil:
		return false, transient(ErrRedis, "publish flow "+flowID, err)
	}
	return true, nil
}

// Register is ZADD [NX] of the version in flow_versions and ZADD [NX] of the flow in
// flow_list, pipelined.
func (r *RedisFlowsDriver) Register(ctx context.Context, sp keys.Space, flowID, version string, at time.Time, onlyMissing bool) error {
	c, score := r.c, float64(at.UnixMilli())
	var cmds rueidis.Commands
	if onlyMissing {
		cmds = rueidis.Commands{
			c.B().Zadd().Key(sp.FlowVersions(flowID)).Nx().ScoreMember().ScoreMember(score, version).Build(),
			c.B().Zadd().Key(sp.FlowList()).Nx().ScoreMember().ScoreMember(score, flowID).Build(),
		}
	} else {
		cmds = rueidis.Commands{
			c.B().Zadd().Key(sp.FlowVersions(flowID)).ScoreMember().ScoreMember(score, version).Build(),
			c.B().Zadd().Key(sp.FlowList()).ScoreMember().ScoreMember(score, flowID).Build(),
		}
	}
	for _, res := range c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return transient(ErrRedis, fmt.Sprintf("record flow %s version %s", flowID, version), err)
		}
	}
	return nil
}

// Latest is ZREVRANGE flow_versions 0 0.
func (r *RedisFlowsDriver) Latest(ctx context.Context, sp keys.Space, flowID string) (string, bool, error) {
	vs, err := r.c.Do(ctx, r.c.B().Zrevrange().Key(sp.FlowVersions(flowID)).Start(0).Stop(0).Build()).AsStrSlice()
	if err != nil {
		return "", false, transient(ErrRedis, "read versions of flow "+flowID, err)
	}
	if len(vs) == 0 {
		return "", false, nil
	}
	return vs[0], true, nil
}

// Versions is ZREVRANGE flow_versions 0 n-1 WITHSCORES.
func (r *RedisFlowsDriver) Versions(ctx context.Context, sp keys.Space, flowID string, n int) ([]FlowEntry, error) {
	c := r.c
	rows, err := c.Do(ctx, c.B().Zrevrange().Key(sp.FlowVersions(flowID)).Start(0).Stop(int64(n-1)).Withscores().Build()).AsZScores()
	if err != nil {
		return nil, transient(ErrRedis, "read versions of flow "+flowID, err)
	}
	return flowEntries(rows), nil
}

// FlowList is ZREVRANGE flow_list 0 n-1 WITHSCORES from the top, else ZREVRANGEBYSCORE
// flow_list atMost -inf WITHSCORES LIMIT 0 n.
func (r *RedisFlowsDriver) FlowList(ctx context.Context, sp keys.Space, atMost *float64, n int) ([]FlowEntry, error) {
	c, key := r.c, sp.FlowList()
	var cmd rueidis.Completed
	if atMost == nil {
		cmd = c.B().Zrevrange().Key(key).Start(0).Stop(int64(n - 1)).Withscores().Build()
	} else {
		top := strconv.FormatFloat(*atMost, 'f', -1, 64)
		cmd = c.B().Zrevrangebyscore().Key(key).Max(top).Min("-inf").Withscores().Limit(0, int64(n)).Build()
	}
	rows, err := c.Do(ctx, cmd).AsZScores()
	if err != nil {
		return nil, transient(ErrRedis, "list flows", err)
	}
	return flowEntries(rows), nil
}

// Heads is ZREVRANGE flow_versions 0 0 and ZCARD flow_versions per flow, pipelined.
func (r *RedisFlowsDriver) Heads(ctx context.Context, sp keys.Space, flowIDs []string) ([]FlowHead, error) {
	if len(flowIDs) == 0 {
		return nil, nil
	}
	c := r.c
	cmds := make(rueidis.Commands, 0, 2*len(flowIDs))
	for _, id := range flowIDs {
		cmds = append(cmds, c.B().Zrevrange().Key(sp.FlowVersions(id)).Start(0).Stop(0).Build(), c.B().Zcard().Key(sp.FlowVersions(id)).Build())
	}
	res := c.DoMulti(ctx, cmds...)
	out := make([]FlowHead, len(flowIDs))
	for i, id := range flowIDs {
		latest, err := res[2*i].AsStrSlice()
		if err != nil {
			return nil, transient(ErrRedis, "read versions of flow "+id, err)
		}
		if len(latest) > 0 {
			out[i].Latest = latest[0]
		}
		if out[i].Versions, err = res[2*i+1].AsInt64(); err != nil {
			return nil, transient(ErrRedis, "count versions of flow "+id, err)
		}
	}
	return out, nil
}

// Restore is, per item, SET NX of the definition, ZADD NX in flow_versions and ZADD GT in
// flow_list (a flow's newer publication keeps its place), all in one pipeline. A Redis that
// does not answer fails every item (ErrRedis, transient).
func (r *RedisFlowsDriver) Restore(ctx context.Context, items []FlowWrite) []RestoreOutcome {
	out := make([]RestoreOutcome, len(items))
	if len(items) == 0 {
		return out
	}
	c := r.c
	cmds := make(rueidis.Commands, 0, 3*len(items))
	for _, it := range items {
		sp, score := it.Space, float64(it.PublishedAt.UnixMilli())
		cmds = append(cmds, c.B().Set().Key(sp.Flow(it.FlowID, it.Version)).Value(rueidis.BinaryString(it.Definition)).Nx().Build(),
			c.B().Zadd().Key(sp.FlowVersions(it.FlowID)).Nx().ScoreMember().ScoreMember(score, it.Version).Build(),
			c.B().Zadd().Key(sp.FlowList()).Gt().ScoreMember().ScoreMember(score, it.FlowID).Build())
	}
	res := c.DoMulti(ctx, cmds...)
	for i, it := range items {
		set, vers, list := res[3*i], res[3*i+1], res[3*i+2]
		switch err := set.Error(); {
		case err == nil:
			out[i].Written = true
		case !rueidis.IsRedisNil(err):
			out[i].Err = transient(ErrRedis, "restore flow "+it.FlowID, err)
			continue
		}
		for _, res := range []rueidis.RedisResult{vers, list} {
			if err := res.Error(); err != nil && !rueidis.IsRedisNil(err) {
				out[i].Err = transient(ErrRedis, "register flow "+it.FlowID, err)
			}
		}
	}
	return out
}

func flowEntries(rows []rueidis.ZScore) []FlowEntry {
	out := make([]FlowEntry, len(rows))
	for i, r := range rows {
		out[i] = FlowEntry{Name: r.Member, Score: r.Score}
	}
	return out
}
