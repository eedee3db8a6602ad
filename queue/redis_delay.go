package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// RedisDelay is DelayDriver on Redis: per queue name, the ZSET <name>:scheduled (score = due
// time in Unix ms), the HASH <name>:attempts and the HASH <name>:dead (queue/delay.go).
type RedisDelay struct{ c rueidis.Client }

// RedisDelays returns the DelayDriver over client c.
func RedisDelays(c rueidis.Client) *RedisDelay { return &RedisDelay{c: c} }

// Schedule is ZADD <name>:scheduled at member.
func (r *RedisDelay) Schedule(ctx context.Context, name, member string, at time.Time) error {
	key := DelayScheduledKey(name)
	if err := r.c.Do(ctx, r.c.B().Zadd().Key(key).ScoreMember().ScoreMember(float64(at.UnixMilli()), member).Build()).Error(); err != nil {
		return redisErr("zadd", key, err)
	}
	return nil
}

// Due is ZRANGE <name>:scheduled -inf now BYSCORE LIMIT 0 limit.
func (r *RedisDelay) Due(ctx context.Context, name string, now time.Time, limit int) ([]string, error) {
	c, key := r.c, DelayScheduledKey(name)
	due, err := c.Do(ctx, c.B().Zrange().Key(key).Min("-inf").Max(strconv.FormatInt(now.UnixMilli(), 10)).Byscore().
		Limit(0, int64(limit)).Build()).AsStrSlice()
	if err != nil {
		return nil, redisErr("zrange", key, err)
	}
	return due, nil
}

// Move runs moveScript on a single server. In a Redis Cluster the ZSET and the stream live in
// different slots and no script may touch both, so a member moves in steps there
// (moveStepwise).
func (r *RedisDelay) Move(ctx context.Context, name, stream string, now time.Time, o MoveOptions, items []MoveItem) ([]MoveResult, error) {
	if r.c.Mode() == rueidis.ClientModeCluster {
		return r.moveStepwise(ctx, name, stream, now, o, items), nil
	}
	args := []string{strconv.FormatInt(now.UnixMilli(), 10), strconv.Itoa(o.MaxAttempts),
		strconv.FormatInt(o.RetryBase.Milliseconds(), 10), strconv.FormatInt(o.RetryMax.Milliseconds(), 10),
		now.UTC().Format(time.RFC3339Nano)}
	for _, it := range items {
		if it.Dead != "" {
			args = append(args, "d", it.Member, it.Dead)
		} else {
			args = append(args, "m", it.Member, it.Payload)
		}
	}
	keys := []string{DelayScheduledKey(name), DelayAttemptsKey(name), DelayDeadKey(name), stream}
	res, err := moveScript.Exec(ctx, r.c, keys, args).ToArray()
	if err != nil {
		return nil, redisErr("move due members of", name, err)
	}
	out := make([]MoveResult, len(res))
	for i, m := range res {
		vals, err := m.ToArray()
		if err != nil || len(vals) == 0 {
			return nil, fmt.Errorf("%w: move script result %d: %v", ErrRedis, i, err)
		}
		code, _ := vals[0].AsInt64()
		var mr MoveResult
		if len(vals) > 1 {
			mr.Err, _ = vals[1].ToString()
		}
		if len(vals) > 2 {
			mr.Attempts, _ = vals[2].AsInt64()
		}
		switch code {
		case 0:
			mr.Code = MoveSkipped
		case 1:
			mr = MoveResult{Code: MoveSent, ID: mr.Err}
		case 2:
			mr.Code = MoveRetried
		case 3:
			mr.Code = MoveBuried
		default:
			mr.Code = MoveKept
		}
		out[i] = mr
	}
	return out, nil
}

// Stats is ZCARD, ZCOUNT -inf now, HLEN <name>:dead and the first member with its score,
// pipelined.
func (r *RedisDelay) Stats(ctx context.Context, name string, now time.Time) (DelayStats, error) {
	c, key := r.c, DelayScheduledKey(name)
	res := c.DoMulti(ctx, c.B().Zcard().Key(key).Build(),
		c.B().Zcount().Key(key).Min("-inf").Max(strconv.FormatInt(now.UnixMilli(), 10)).Build(),
		c.B().Hlen().Key(DelayDeadKey(name)).Build(),
		c.B().Zrange().Key(key).Min("0").Max("0").Withscores().Build())
	var s DelayStats
	var errs []error
	var err error
	s.Scheduled, err = res[0].AsInt64()
	errs = append(errs, err)
	s.Due, err = res[1].AsInt64()
	errs = append(errs, err)
	s.Dead, err = res[2].AsInt64()
	errs = append(errs, err)
	first, err := res[3].AsZScores()
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return DelayStats{}, redisErr("stats", name, err)
	}
	if len(first) > 0 {
		s.OldestDue = time.UnixMilli(int64(first[0].Score)).UTC()
	}
	return s, nil
}

// Lookup is ZSCORE, HGET :attempts and HGET :dead of member, pipelined.
func (r *RedisDelay) Lookup(ctx context.Context, name, member string) (at time.Time, scheduled bool, attempts int64, dead string, err error) {
	c := r.c
	res := c.DoMulti(ctx, c.B().Zscore().Key(DelayScheduledKey(name)).Member(member).Build(),
		c.B().Hget().Key(DelayAttemptsKey(name)).Field(member).Build(),
		c.B().Hget().Key(DelayDeadKey(name)).Field(member).Build())
	score, err := res[0].AsFloat64()
	switch {
	case err == nil:
		scheduled, at = true, time.UnixMilli(int64(score)).UTC()
	case !rueidis.IsRedisNil(err):
		return at, false, 0, "", redisErr("zscore", DelayScheduledKey(name), err)
	}
	if n, err := res[1].AsInt64(); err == nil {
		attempts = n
	} else if !rueidis.IsRedisNil(err) {
		return at, false, 0, "", redisErr("hget", DelayAttemptsKey(name), err)
	}
	dead, err = res[2].ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		return at, false, 0, "", redisErr("hget", DelayDeadKey(name), err)
	}
	return at, scheduled, attempts, dead, nil
}

// Dead is HGETALL <name>:dead.
func (r *RedisDelay) Dead(ctx context.Context, name string) (map[string]string, error) {
	m, err := r.c.Do(ctx, r.c.B().Hgetall().Key(DelayDeadKey(name)).Build()).AsStrMap()
	if err != nil {
		return nil, redisErr("hgetall", DelayDeadKey(name), err)
	}
	return m, nil
}

// moveScript sends due members on a single server (in a Redis Cluster its keys would span
// slots: see MoveDue), each one atomically: its resume is added to the stream and the member removed in the
// same step, so a crash never sends it twice and two movers never both send it (the second
// finds it gone). A member whose XADD fails (OOM, a stream key of the wrong type …) has its
// failure counted in :attempts and its score pushed to its next attempt, or past MaxAttempts
// is moved to :dead; a member the caller found malformed goes to :dead at once.
// KEYS: 1 scheduled, 2 attempts, 3 dead, 4 task stream.
// ARGV: 1 now (ms), 2 max attempts, 3 retry base (ms), 4 retry max (ms), 5 now (RFC 3339),
// then per member: op ('m' send | 'd' dead), the member, the envelope JSON ('m') or the dead
// record JSON ('d').
// Returns per member: {0} gone or not due | {1, stream id} sent | {2, error, attempts}
// retried later | {3} dead (malformed) | {3, error, attempts} dead (enqueue failed) |
// {4, error} the failure could not even be counted (OOM): left as it is for the next pass.
var moveScript = rueidis.NewLuaScript(`
local out = {}
local now = tonumber(ARGV[1])
for i = 6, #ARGV, 3 do
  local op, member, arg = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local score = redis.call('ZSCORE', KEYS[1], member)
  if not score or tonumber(score) > now then
    out[#out + 1] = {0}
  elseif op == 'd' then
    redis.call('HSET', KEYS[3], member, arg)
    redis.call('ZREM', KEYS[1], member)
    redis.call('HDEL', KEYS[2], member)
    out[#out + 1] = {3}
  else
    local id = redis.pcall('XADD', KEYS[4], '*', 'payload', arg)
    if type(id) ~= 'table' then
      redis.call('ZREM', KEYS[1], member)
      redis.call('HDEL', KEYS[2], member)
      out[#out + 1] = {1, id}
    else
      local e = id.err or 'error'
      local n = redis.pcall('HINCRBY', KEYS[2], member, 1)
      if type(n) == 'table' then
        out[#out + 1] = {4, e}
      elseif n >= tonumber(ARGV[2]) then
        redis.call('HSET', KEYS[3], member, cjson.encode({reason = 'enqueue_failed', detail = e, attempts = n, at = ARGV[5]}))
        redis.call('ZREM', KEYS[1], member)
        redis.call('HDEL', KEYS[2], member)
        out[#out + 1] = {3, e, n}
      else
        local wait = math.min(tonumber(ARGV[3]) * 2 ^ (n - 1), tonumber(ARGV[4]))
        redis.call('ZADD', KEYS[1], 'XX', string.format('%d', now + wait), member)
        out[#out + 1] = {2, e, n}
      end
    end
  end
end
return out
`)

// claimScript is a Cluster mover's first step for one member (the ZSET alone: one slot): a
// member still due is pushed ClusterClaimLease into the future, so no other mover takes it
// while this one sends it. KEYS: 1 scheduled. ARGV: 1 member, 2 now (ms), 3 lease end (ms).
// Returns 1 when claimed, 0 when gone or not due.
var claimScript = rueidis.NewLuaScript(`
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', ARGV[3], ARGV[1])
return 1
`)

// moveStepwise is Move in a Redis Cluster: claim a member (claimScript: pushed
// ClusterClaimLease ahead), XADD, ZREM. A mover that dies after the claim loses nothing (the
// member comes due again after the lease); one that dies between XADD and ZREM sends the
// resume twice — the worker drops the second as a stale or duplicate wake-up. :attempts and
// :dead are separate commands too. Every failure is per member.
func (r *RedisDelay) moveStepwise(ctx context.Context, name, stream string, now time.Time, o MoveOptions, items []MoveItem) []MoveResult {
	out := make([]MoveResult, 0, len(items))
	for _, it := range items {
		out = append(out, r.moveOne(ctx, name, stream, now, o, it))
	}
	return out
}

func (r *RedisDelay) moveOne(ctx context.Context, name, stream string, now time.Time, o MoveOptions, it MoveItem) MoveResult {
	c, key := r.c, DelayScheduledKey(name)
	lease := strconv.FormatInt(now.Add(ClusterClaimLease).UnixMilli(), 10)
	n, err := claimScript.Exec(ctx, c, []string{key}, []string{it.Member, strconv.FormatInt(now.UnixMilli(), 10), lease}).AsInt64()
	if err != nil {
		return MoveResult{Code: MoveKept, Err: "claim: " + err.Error()}
	}
	if n == 0 {
		return MoveResult{Code: MoveSkipped}
	}
	if it.Dead != "" {
		if err := r.bury(ctx, name, it.Member, it.Dead); err != nil {
			return MoveResult{Code: MoveKept, Err: err.Error()}
		}
		return MoveResult{Code: MoveBuried}
	}
	id, xerr := c.Do(ctx, c.B().Xadd().Key(stream).Id("*").FieldValue().FieldValue(PayloadField, it.Payload).Build()).ToString()
	if xerr == nil {
		// A failure here leaves the claimed member to come due again: sent twice, which the
		// worker drops as a duplicate wake-up.
		for _, res := range c.DoMulti(ctx, c.B().Zrem().Key(key).Member(it.Member).Build(),
			c.B().Hdel().Key(DelayAttemptsKey(name)).Field(it.Member).Build()) {
			_ = res.Error()
		}
		return MoveResult{Code: MoveSent, ID: id}
	}
	n, err = c.Do(ctx, c.B().Hincrby().Key(DelayAttemptsKey(name)).Field(it.Member).Increment(1).Build()).AsInt64()
	switch {
	case err != nil: // not even counted: the claim lease brings it back
		return MoveResult{Code: MoveKept, Err: xerr.Error()}
	case n >= int64(o.MaxAttempts):
		rec, err := json.Marshal(DelayDeadRecord{Reason: DelayReasonEnqueueFailed, Detail: xerr.Error(), Attempts: n, At: now.UTC()})
		if err == nil {
			err = r.bury(ctx, name, it.Member, string(rec))
		}
		if err != nil {
			return MoveResult{Code: MoveRetried, Attempts: n, Err: xerr.Error()}
		}
		return MoveResult{Code: MoveBuried, Attempts: n, Err: xerr.Error()}
	default:
		wait := min(o.RetryBase*time.Duration(1<<min(n-1, 30)), o.RetryMax)
		_ = c.Do(ctx, c.B().Zadd().Key(key).Xx().ScoreMember().ScoreMember(float64(now.Add(wait).UnixMilli()), it.Member).Build()).Error()
		return MoveResult{Code: MoveRetried, Attempts: n, Err: xerr.Error()}
	}
}

// bury moves a claimed member to :dead in a cluster: the record first, so a crash in between
// leaves a member that is buried again, never one that is lost.
func (r *RedisDelay) bury(ctx context.Context, name, member, rec string) error {
	c := r.c
	if err := c.Do(ctx, c.B().Hset().Key(DelayDeadKey(name)).FieldValue().FieldValue(member, rec).Build()).Error(); err != nil {
		return redisErr("bury in", DelayDeadKey(name), err)
	}
	for _, res := range c.DoMulti(ctx, c.B().Zrem().Key(DelayScheduledKey(name)).Member(member).Build(),
		c.B().Hdel().Key(DelayAttemptsKey(name)).Field(member).Build()) {
		if err := res.Error(); err != nil {
			return redisErr("bury", name, err)
		}
	}
	return nil
}
