package store

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// redisWakeups is WakeupDriver on Redis: the keys and scripts of wakeup.go and
// subscriptions_read.go.
type redisWakeups struct{ c rueidis.Client }

var _ WakeupDriver = redisWakeups{}

// doAll pipelines cmds and fails with ErrRedis on the first error reply.
func (r redisWakeups) doAll(ctx context.Context, what string, cmds ...rueidis.Completed) error {
	for _, res := range r.c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return transient(ErrRedis, what, err)
		}
	}
	return nil
}

func scoreArg(score float64) string {
	if math.IsInf(score, 1) {
		return "+inf"
	}
	return strconv.FormatFloat(score, 'f', -1, 64)
}

// indexScript adds a wait to one of its indexes (the per-type index, a bucket, the paths of a
// type), drops the members that timed out more than expiredMargin before the wait began, and
// makes the key live at least the record's TTL — never shorter than it lives already, so that
// a wait registered with a short TTL does not take the index away from one with a long TTL
// (a plain EXPIRE would, and EXPIRE … GT needs Redis 7). One key.
// KEYS[1] the ZSET. ARGV: 1 score, 2 member, 3 'GT' (keep the higher of two scores) or empty,
// 4 drop the members scored below this (Unix ms), 5 TTL (ms).
var indexScript = rueidis.NewLuaScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
if ARGV[3] == 'GT' then
  redis.call('ZADD', KEYS[1], 'GT', ARGV[1], ARGV[2])
else
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[5]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
end
return 1
`)

// PutSubscription is SET of the record, then indexScript on each index (two round trips).
func (r redisWakeups) PutSubscription(ctx context.Context, sp keys.Space, w SubscriptionWrite) error {
	key, err := sp.Subscription(w.ID)
	if err != nil {
		return err
	}
	score, drop, ms := scoreArg(w.Score), strconv.FormatInt(w.Drop, 10), strconv.FormatInt(w.TTL.Milliseconds(), 10)
	var adds []rueidis.LuaExec
	if w.Term == nil {
		idx, err := sp.SubscriptionIndex(w.EventType)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		adds = []rueidis.LuaExec{{Keys: []string{idx}, Args: []string{score, w.ID, "", drop, ms}}}
	} else {
		bucket, err := sp.SubscriptionBucket(w.EventType, w.Term.Path, w.Term.Value)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		paths, _ := sp.SubscriptionPaths(w.EventType)
		adds = []rueidis.LuaExec{
			{Keys: []string{paths}, Args: []string{score, w.Term.Path, "GT", drop, ms}},
			{Keys: []string{bucket}, Args: []string{score, w.Member, "", drop, ms}},
		}
	}
	what := "write subscription of " + w.ID
	if err := r.doAll(ctx, what, r.c.B().Set().Key(key).Value(string(w.Record)).Ex(w.TTL).Build()); err != nil {
		return err
	}
	for _, res := range indexScript.ExecMulti(ctx, r.c, adds...) {
		if err := res.Error(); err != nil {
			return transient(ErrRedis, what, err)
		}
	}
	return nil
}

// RemoveSubscription is DEL and ZREM, pipelined.
func (r redisWakeups) RemoveSubscription(ctx context.Context, sp keys.Space, id, eventType string) error {
	key, err := sp.Subscription(id)
	if err != nil {
		return err
	}
	idx, err := sp.SubscriptionIndex(eventType)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return r.doAll(ctx, "remove subscription of "+id, r.c.B().Del().Key(key).Build(), r.c.B().Zrem().Key(idx).Member(id).Build())
}

// PutApproval is SET and ZADD, pipelined.
func (r redisWakeups) PutApproval(ctx context.Context, sp keys.Space, id string, record []byte, since time.Time, ttl time.Duration) error {
	key, err := sp.Approval(id)
	if err != nil {
		return err
	}
	return r.doAll(ctx, "write approval of "+id,
		r.c.B().Set().Key(key).Value(string(record)).Ex(ttl).Build(),
		r.c.B().Zadd().Key(sp.ApprovalIndex()).ScoreMember().ScoreMember(float64(since.UnixMilli()), id).Build())
}

// RemoveApproval is DEL and ZREM, pipelined.
func (r redisWakeups) RemoveApproval(ctx context.Context, sp keys.Space, id string) error {
	key, err := sp.Approval(id)
	if err != nil {
		return err
	}
	return r.doAll(ctx, "remove approval of "+id, r.c.B().Del().Key(key).Build(), r.c.B().Zrem().Key(sp.ApprovalIndex()).Member(id).Build())
}

// liveRange is ZRANGE key now +inf BYSCORE [LIMIT skip limit].
func (r redisWakeups) liveRange(key string, now time.Time, skip, limit int) rueidis.Completed {
	b := r.c.B().Zrange().Key(key).Min(strconv.FormatInt(now.UnixMilli(), 10)).Max("+inf").Byscore()
	if limit > 0 {
		return b.Limit(int64(skip), int64(limit)).Build()
	}
	return b.Build()
}

// members reads a ZRANGE reply; a key of another type is ErrInvalid.
func members(key string, res rueidis.RedisResult) ([]string, error) {
	m, err := res.AsStrSlice()
	switch {
	case isWrongType(err):
		return nil, fmt.Errorf("%w: %s is not a sorted set: %w", ErrInvalid, key, err)
	case err != nil:
		return nil, transient(ErrRedis, "read "+key, err)
	}
	return m, nil
}

// Index is ZRANGE BYSCORE LIMIT.
func (r redisWakeups) Index(ctx context.Context, sp keys.Space, eventType string, now time.Time, skip, limit int) ([]string, error) {
	idx, err := sp.SubscriptionIndex(eventType)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return members(idx, r.c.Do(ctx, r.liveRange(idx, now, skip, limit)))
}

// PathsAndIndex is the two ZRANGEs, pipelined.
func (r redisWakeups) PathsAndIndex(ctx context.Context, sp keys.Space, eventType string, now time.Time, limit int) ([]string, []string, error) {
	idx, err := sp.SubscriptionIndex(eventType)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	pathsKey, _ := sp.SubscriptionPaths(eventType)
	res := r.c.DoMulti(ctx, r.liveRange(pathsKey, now, 0, 0), r.liveRange(idx, now, 0, limit))
	paths, err := members(pathsKey, res[0])
	if err != nil {
		return nil, nil, err
	}
	first, err := members(idx, res[1])
	if err != nil {
		return nil, nil, err
	}
	return paths, first, nil
}

// Buckets pipelines the first page of each bucket, then reads each bucket that filled its page
// on its own.
func (r redisWakeups) Buckets(ctx context.Context, sp keys.Space, eventType string, terms []BucketTerm, now time.Time) ([][]string, error) {
	out := make([][]string, len(terms))
	if len(terms) == 0 {
		return out, nil
	}
	ks := make([]string, len(terms))
	cmds := make(rueidis.Commands, len(terms))
	for i, t := range terms {
		k, err := sp.SubscriptionBucket(eventType, t.Path, t.Value)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		ks[i], cmds[i] = k, r.liveRange(k, now, 0, subscriptionPage)
	}
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		m, err := members(ks[i], res)
		if err != nil {
			return nil, err
		}
		out[i] = m
		for skip := len(m); len(m) == subscriptionPage; skip += len(m) {
			if m, err = members(ks[i], r.c.Do(ctx, r.liveRange(ks[i], now, skip, subscriptionPage))); err != nil {
				return nil, err
			}
			out[i] = append(out[i], m...)
		}
	}
	return out, nil
}

// CountPaths is ZRANGE of the paths and ZCOUNT of the index, pipelined.
func (r redisWakeups) CountPaths(ctx context.Context, sp keys.Space, eventType string, now time.Time) ([]string, int64, error) {
	idx, err := sp.SubscriptionIndex(eventType)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	pathsKey, _ := sp.SubscriptionPaths(eventType)
	nowMs := strconv.FormatInt(now.UnixMilli(), 10)
	res := r.c.DoMulti(ctx, r.liveRange(pathsKey, now, 0, 0), r.c.B().Zcount().Key(idx).Min(nowMs).Max("+inf").Build())
	paths, err := res[0].AsStrSlice()
	if err != nil {
		return nil, 0, transient(ErrRedis, "read "+pathsKey, err)
	}
	n, err := res[1].AsInt64()
	if err != nil {
		return nil, 0, transient(ErrRedis, "count "+idx, err)
	}
	return paths, n, nil
}

// CountBuckets is one ZCOUNT per bucket, pipelined.
func (r redisWakeups) CountBuckets(ctx context.Context, sp keys.Space, eventType string, terms []BucketTerm, now time.Time) (int64, error) {
	if len(terms) == 0 {
		return 0, nil
	}
	nowMs := strconv.FormatInt(now.UnixMilli(), 10)
	cmds := make(rueidis.Commands, 0, len(terms))
	for _, t := range terms {
		k, err := sp.SubscriptionBucket(eventType, t.Path, t.Value)
		if err != nil {
			continue
		}
		cmds = append(cmds, r.c.B().Zcount().Key(k).Min(nowMs).Max("+inf").Build())
	}
	var n int64
	for _, res := range r.c.DoMulti(ctx, cmds...) {
		k, err := res.AsInt64()
		if err != nil {
			return 0, transient(ErrRedis, "count the correlated waits of "+eventType, err)
		}
		n += k
	}
	return n, nil
}

// Subscriptions is one GET per record, pipelined.
func (r redisWakeups) Subscriptions(ctx context.Context, sp keys.Space, ids []string) ([]Record, error) {
	ks := make([]string, len(ids))
	for i, id := range ids {
		key, err := sp.Subscription(id)
		if err != nil {
			return nil, err
		}
		ks[i] = key
	}
	return getRecords(ctx, r.c, ks, func(int) string { return "read subscriptions of " + sp.Tenant() })
}

// Drop is ZREM from the index, the paths or a bucket.
func (r redisWakeups) Drop(ctx context.Context, sp keys.Space, eventType string, where DropFrom, ms ...string) (int64, error) {
	var key string
	var err error
	switch {
	case where.Term != nil:
		key, err = sp.SubscriptionBucket(eventType, where.Term.Path, where.Term.Value)
	case where.Paths:
		key, err = sp.SubscriptionPaths(eventType)
	default:
		key, err = sp.SubscriptionIndex(eventType)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	n, err := r.c.Do(ctx, r.c.B().Zrem().Key(key).Member(ms...).Build()).AsInt64()
	if err != nil {
		return 0, transient(ErrRedis, "remove members of "+key, err)
	}
	return n, nil
}

// casDeleteScript: KEYS[1] = a record; ARGV[1] = the value it must still hold. One key.
var casDeleteScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// RemoveStale is casDeleteScript (when raw is set), then ZREM and GET pipelined. The record and
// the index live in two Cluster slots: not one script.
func (r redisWakeups) RemoveStale(ctx context.Context, sp keys.Space, id, eventType, raw string) (bool, string, error) {
	idx, err := sp.SubscriptionIndex(eventType)
	if err != nil {
		return false, "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	key, err := sp.Subscription(id)
	if err != nil {
		return false, "", err
	}
	c := r.c
	if raw != "" {
		n, err := casDeleteScript.Exec(ctx, c, []string{key}, []string{raw}).AsInt64()
		if err != nil {
			return false, "", transient(ErrRedis, "remove subscription of "+id, err)
		}
		if n == 0 {
			return false, "", nil
		}
	}
	res := c.DoMulti(ctx, c.B().Zrem().Key(idx).Member(id).Build(), c.B().Get().Key(key).Build())
	if err := res[0].Error(); err != nil {
		return false, "", transient(ErrRedis, "remove subscription of "+id, err)
	}
	again, err := res[1].ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return true, "", nil
	case err != nil:
		return true, "", transient(ErrRedis, "read subscription of "+id, err)
	}
	return true, again, nil
}

// Reindex is ZADD.
func (r redisWakeups) Reindex(ctx context.Context, sp keys.Space, id, eventType string, score float64) error {
	idx, err := sp.SubscriptionIndex(eventType)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := r.c.Do(ctx, r.c.B().Zadd().Key(idx).ScoreMember().ScoreMember(score, id).Build()).Error(); err != nil {
		return transient(ErrRedis, "restore subscription of "+id, err)
	}
	return nil
}
