package store

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"plaita/queue"
	"plaita/store/keys"
)

// RedisScheduleDriver is SchedulesDriver on Redis, the cluster's authority (docs/schedules.md).
// Every key carries the hash tag {sched}, whatever the tenant, so that a schedule's record, its
// tenant's index and the due index are one Cluster slot and every write is one script:
//
//	<prefix>schedule:{sched}:<id>   HASH  def (JSON Schedule), rev, last_tick, next_ms,
//	                                      pending:<tick_ms> (JSON PendingFire), last_fire (JSON),
//	                                      last_fire_tick, last_skip (JSON)
//	<prefix>schedules:{sched}       ZSET  id → created_at (Unix ms)
//	<root>:schedule_due:{sched}     ZSET  <tenant>:<id> → when the schedule role looks next
//	                                      (Unix ms): min(next_ms, every pending's claimed_ms +
//	                                      grace); +inf when there is nothing to do
//
// One slot for every schedule is deliberate: a few thousand schedules of a few hundred bytes fit
// one slot easily, and it keeps the due index exact (an index in another slot could lose a
// member between two writes and leave a schedule that never fires again). Claim times are the
// Redis clock (TIME), the clock of the task stream's ids. Each method is one round trip: a
// script, a command, or a pipeline where its doc says so.
type RedisScheduleDriver struct{ c rueidis.Client }

// RedisSchedules returns the SchedulesDriver over client c.
func RedisSchedules(c rueidis.Client) *RedisScheduleDriver { return &RedisScheduleDriver{c: c} }

var _ SchedulesDriver = (*RedisScheduleDriver)(nil)

// schedKeys are one schedule's keys and its member in the due index.
type schedKeys struct {
	rec, idx    string
	due, member string
}

func redisSchedKeys(ref ScheduleRef) (schedKeys, error) {
	sp, err := keys.For(ref.Root, ref.Tenant)
	if err != nil {
		return schedKeys{}, err
	}
	rec, err := sp.Schedule(ref.ID)
	if err != nil {
		return schedKeys{}, schedErr(ErrBadSchedule, "%v", err)
	}
	return schedKeys{rec: rec, idx: sp.Schedules(), due: sp.ScheduleDue(), member: ref.member()}, nil
}

// msArg is a time as the scripts' Unix-millisecond argument; the zero time is +inf.
func msArg(t time.Time) string {
	if t.IsZero() {
		return infScore
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

func graceArg(g time.Duration) string { return strconv.FormatInt(g.Milliseconds(), 10) }

// Create runs schedCreateScript.
func (r *RedisScheduleDriver) Create(ctx context.Context, ref ScheduleRef, def string, last, next, created time.Time, grace time.Duration) (bool, error) {
	k, err := redisSchedKeys(ref)
	if err != nil {
		return false, err
	}
	n, err := schedCreateScript.Exec(ctx, r.c, []string{k.rec, k.idx, k.due}, []string{
		def, msArg(last), msArg(next), msArg(created), ref.ID, k.member, graceArg(grace),
	}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "create schedule "+k.rec, err)
	}
	return n == 1, nil
}

// Read is one HGETALL per record, pipelined.
func (r *RedisScheduleDriver) Read(ctx context.Context, refs ...ScheduleRef) ([]StoredSchedule, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	recs := make([]string, len(refs))
	cmds := make(rueidis.Commands, len(refs))
	for i, ref := range refs {
		k, err := redisSchedKeys(ref)
		if err != nil {
			return nil, err
		}
		recs[i], cmds[i] = k.rec, r.c.B().Hgetall().Key(k.rec).Build()
	}
	out := make([]StoredSchedule, len(refs))
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		fields, err := res.AsStrMap()
		switch {
		case err != nil && isWrongType(err):
			out[i].Err = schedErr(ErrBadSchedule, "%s is not a HASH", recs[i])
		case err != nil:
			return nil, transient(ErrRedis, "read schedule "+recs[i], err)
		default:
			out[i].Fields = fields
		}
	}
	return out, nil
}

// IDs is ZRANGE <prefix>schedules:{sched} 0 -1.
func (r *RedisScheduleDriver) IDs(ctx context.Context, root, tenant string) ([]string, error) {
	sp, err := keys.For(root, tenant)
	if err != nil {
		return nil, err
	}
	ids, err := r.c.Do(ctx, r.c.B().Zrange().Key(sp.Schedules()).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		return nil, transient(ErrRedis, "list schedules "+sp.Schedules(), err)
	}
	return ids, nil
}

// Update runs schedUpdateScript.
func (r *RedisScheduleDriver) Update(ctx context.Context, ref ScheduleRef, rev int64, def string, last, next time.Time, grace time.Duration) (bool, bool, error) {
	k, err := redisSchedKeys(ref)
	if err != nil {
		return false, false, err
	}
	lastArg := ""
	if !last.IsZero() {
		lastArg = msArg(last)
	}
	n, err := schedUpdateScript.Exec(ctx, r.c, []string{k.rec, k.due}, []string{
		strconv.FormatInt(rev, 10), def, lastArg, msArg(next), k.member, graceArg(grace),
	}).AsInt64()
	if err != nil {
		return false, false, transient(ErrRedis, "update schedule "+k.rec, err)
	}
	return n >= 0, n == 1, nil
}

// Delete runs schedDeleteScript.
func (r *RedisScheduleDriver) Delete(ctx context.Context, ref ScheduleRef) (bool, error) {
	k, err := redisSchedKeys(ref)
	if err != nil {
		return false, err
	}
	n, err := schedDeleteScript.Exec(ctx, r.c, []string{k.rec, k.idx, k.due}, []string{ref.ID, k.member}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "delete schedule "+k.rec, err)
	}
	return n == 1, nil
}

// Due is ZRANGEBYSCORE <root>:schedule_due:{sched} -inf now WITHSCORES LIMIT 0 limit.
func (r *RedisScheduleDriver) Due(ctx context.Context, root string, now time.Time, limit int) ([]DueMember, error) {
	sp, err := keys.For(root, "")
	if err != nil {
		return nil, err
	}
	due := sp.ScheduleDue()
	zs, err := r.c.Do(ctx, r.c.B().Zrangebyscore().Key(due).Min("-inf").Max(msArg(now)).Withscores().
		Limit(0, int64(max(limit, 1))).Build()).AsZScores()
	if err != nil {
		return nil, transient(ErrRedis, "read "+due, err)
	}
	out := make([]DueMember, len(zs))
	for i, z := range zs {
		out[i] = DueMember{Member: z.Member, At: scoreTime(z.Score)}
	}
	return out, nil
}

// scoreTime is a due score as a time: the zero time for +inf.
func scoreTime(f float64) time.Time {
	if math.IsInf(f, 0) {
		return time.Time{}
	}
	return time.UnixMilli(int64(f)).UTC()
}

// DueScore is ZSCORE.
func (r *RedisScheduleDriver) DueScore(ctx context.Context, ref ScheduleRef) (time.Time, bool, error) {
	k, err := redisSchedKeys(ref)
	if err != nil {
		return time.Time{}, false, err
	}
	f, err := r.c.Do(ctx, r.c.B().Zscore().Key(k.due).Member(k.member).Build()).AsFloat64()
	switch {
	case rueidis.IsRedisNil(err):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, transient(ErrRedis, "read "+k.due, err)
	}
	return scoreTime(f), true, nil
}

// Claim runs schedClaimScript.
func (r *RedisScheduleDriver) Claim(ctx context.Context, ref ScheduleRef, w TickWrite, grace time.Duration) (string, bool, error) {
	k, err := redisSchedKeys(ref)
	if err != nil {
		return "", false, err
	}
	arr, err := schedClaimScript.Exec(ctx, r.c, []string{k.rec, k.due}, []string{
		strconv.FormatInt(w.Rev, 10), msArg(w.Last), msArg(w.Tick), w.Body, msArg(w.Next), k.member, graceArg(grace),
	}).ToArray()
	if err != nil {
		return "", false, transient(ErrRedis, "claim schedule "+k.rec, err)
	}
	if len(arr) == 0 {
		return "", false, fmt.Errorf("%w: claim of %s: empty reply", ErrRedis, k.rec)
	}
	if n, _ := arr[0].AsInt64(); n != 1 || len(arr) < 2 {
		return "", false, nil
	}
	raw, err := arr[1].ToString()
	if err != nil {
		return "", false, fmt.Errorf("%w: claim of %s: unexpected reply: %w", ErrRedis, k.rec, err)
	}
	return raw, true, nil
}

// Skip runs schedSkipScript.
func (r *RedisScheduleDriver) Skip(ctx context.Context, ref ScheduleRef, w TickWrite, grace time.Duration) (bool, error) {
	k, err := redisSchedKeys(ref)
	if err != nil {
		return false, err
	}
	n, err := schedSkipScript.Exec(ctx, r.c, []string{k.rec, k.due}, []string{
		strconv.FormatInt(w.Rev, 10), msArg(w.Last), msArg(w.Tick), w.Body, msArg(w.Next), k.member, graceArg(grace),
	}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "skip tick of schedule "+k.rec, err)
	}
	return n == 1, nil
}

// Complete runs schedCompleteScript.
func (r *RedisScheduleDriver) Complete(ctx context.Context, ref ScheduleRef, tickMS int64, pending, outcome string, fired bool, grace time.Duration) (bool, error) {
	k, err := redisSchedKeys(ref)
	if err != nil {
		return false, err
	}
	kind := "skip"
	if fired {
		kind = "fire"
	}
	tick := strconv.FormatInt(tickMS, 10)
	n, err := schedCompleteScript.Exec(ctx, r.c, []string{k.rec, k.due}, []string{
		fPending + tick, pending, outcome, tick, kind, k.member, graceArg(grace),
	}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "complete claim of schedule "+k.rec, err)
	}
	return n == 1, nil
}

// TakeOver runs schedTakeoverScript.
func (r *RedisScheduleDriver) TakeOver(ctx context.Context, ref ScheduleRef, tickMS int64, pending, by string, grace time.Duration) (Takeover, string, error) {
	k, err := redisSchedKeys(ref)
	if err != nil {
		return TakeoverGone, "", err
	}
	field := fPending + strconv.FormatInt(tickMS, 10)
	arr, err := schedTakeoverScript.Exec(ctx, r.c, []string{k.rec, k.due}, []string{field, pending, by, k.member, graceArg(grace)}).ToArray()
	if err != nil {
		return TakeoverGone, "", transient(ErrRedis, "take over claim of schedule "+k.rec, err)
	}
	if len(arr) == 0 {
		return TakeoverGone, "", fmt.Errorf("%w: takeover of %s: empty reply", ErrRedis, k.rec)
	}
	switch n, _ := arr[0].AsInt64(); {
	case n == 2:
		return TakeoverYoung, "", nil
	case n == -1:
		return TakeoverUnreadable, "", nil
	case n != 1 || len(arr) < 2:
		return TakeoverGone, "", nil
	}
	raw, err := arr[1].ToString()
	if err != nil {
		return TakeoverGone, "", fmt.Errorf("%w: takeover of %s: unexpected reply: %w", ErrRedis, k.rec, err)
	}
	return TakeoverTaken, raw, nil
}

// Reschedule runs schedRescheduleScript.
func (r *RedisScheduleDriver) Reschedule(ctx context.Context, ref ScheduleRef, rev int64, next time.Time, grace time.Duration) (bool, error) {
	k, err := redisSchedKeys(ref)
	if err != nil {
		return false, err
	}
	n, err := schedRescheduleScript.Exec(ctx, r.c, []string{k.rec, k.due}, []string{
		strconv.FormatInt(rev, 10), msArg(next), k.member, graceArg(grace),
	}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "reschedule "+k.rec, err)
	}
	return n == 1, nil
}

// Forget runs schedForgetScript.
func (r *RedisScheduleDriver) Forget(ctx context.Context, ref ScheduleRef) error {
	return r.dueOnly(ctx, schedForgetScript, ref, "forget")
}

// Park runs schedParkScript.
func (r *RedisScheduleDriver) Park(ctx context.Context, ref ScheduleRef) error {
	return r.dueOnly(ctx, schedParkScript, ref, "park")
}

func (r *RedisScheduleDriver) dueOnly(ctx context.Context, script *rueidis.Lua, ref ScheduleRef, what string) error {
	k, err := redisSchedKeys(ref)
	if err != nil {
		return err
	}
	if err := script.Exec(ctx, r.c, []string{k.rec, k.due}, []string{k.member}).Error(); err != nil {
		return transient(ErrRedis, what+" due member of "+k.rec, err)
	}
	return nil
}

// Streams is queue.Redis over the same client.
func (r *RedisScheduleDriver) Streams() queue.Driver { return queue.Redis(r.c) }

// schedLuaDue is the shared part of every script that changes what the schedule role waits for:
// set_due recomputes the member's score from next_ms and the pending claims.
const schedLuaDue = `
local function set_due(rec, due, member, grace)
  local best = math.huge
  local nx = redis.call('HGET', rec, 'next_ms')
  if nx and nx ~= '+inf' then best = tonumber(nx) or math.huge end
  local all = redis.call('HGETALL', rec)
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 8) == 'pending:' then
      local ok, p = pcall(cjson.decode, all[i + 1])
      local at = 0
      if ok and type(p) == 'table' and tonumber(p['claimed_ms']) then at = tonumber(p['claimed_ms']) end
      if at + grace < best then best = at + grace end
    end
  end
  if best == math.huge then
    redis.call('ZADD', due, '+inf', member)
  else
    redis.call('ZADD', due, string.format('%.0f', best), member)
  end
end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// schedLuaEffects lets a script write after TIME on Redis before 7 (effects replication; a no-op
// from Redis 7 on, where it is the only mode).
const schedLuaEffects = `if redis.replicate_commands then pcall(redis.replicate_commands) end
`

// schedCreateScript: KEYS rec, idx, due. ARGV def, last_tick, next_ms, created_ms, id, member, grace.
var schedCreateScript = rueidis.NewLuaScript(schedLuaDue + `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'def', ARGV[1], 'rev', '1', 'last_tick', ARGV[2], 'next_ms', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
set_due(KEYS[1], KEYS[3], ARGV[6], tonumber(ARGV[7]))
return 1
`)

// schedUpdateScript: KEYS rec, due. ARGV rev, def, last_tick (empty: kept), next_ms, member, grace.
// Returns -1 when the record is gone, 0 when rev moved, 1 when written.
var schedUpdateScript = rueidis.NewLuaScript(schedLuaDue + `
local rev = redis.call('HGET', KEYS[1], 'rev')
if not rev then return -1 end
if rev ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'def', ARGV[2], 'rev', tostring(tonumber(rev) + 1), 'next_ms', ARGV[4])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'last_tick', ARGV[3]) end
set_due(KEYS[1], KEYS[2], ARGV[5], tonumber(ARGV[6]))
return 1
`)

// schedDeleteScript: KEYS rec, idx, due. ARGV id, member.
var schedDeleteScript = rueidis.NewLuaScript(`
local n = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[2])
return n
`)

// schedClaimScript: KEYS rec, due. ARGV rev, last_tick, tick_ms, pending (JSON without the claim
// times), next_ms, member, grace. Returns {1, stored pending} or {0} when rev or last_tick
// moved (an edit, or another process claimed first).
var schedClaimScript = rueidis.NewLuaScript(schedLuaEffects + schedLuaDue + `
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then return {0} end
if redis.call('HGET', KEYS[1], 'last_tick') ~= ARGV[2] then return {0} end
local ms = string.format('%.0f', now_ms())
local p = string.sub(ARGV[4], 1, -2) .. ',"claimed_ms":' .. ms .. ',"first_claimed_ms":' .. ms .. '}'
redis.call('HSET', KEYS[1], 'last_tick', ARGV[3], 'next_ms', ARGV[5], 'pending:' .. ARGV[3], p)
set_due(KEYS[1], KEYS[2], ARGV[6], tonumber(ARGV[7]))
return {1, p}
`)

// schedSkipScript: KEYS rec, due. ARGV rev, last_tick, tick_ms, skip (JSON), next_ms, member, grace.
// Returns 1, or 0 when rev or last_tick moved.
var schedSkipScript = rueidis.NewLuaScript(schedLuaDue + `
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'last_tick') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'last_tick', ARGV[3], 'next_ms', ARGV[5], 'last_skip', ARGV[4])
set_due(KEYS[1], KEYS[2], ARGV[6], tonumber(ARGV[7]))
return 1
`)

// schedCompleteScript: KEYS rec, due. ARGV field, pending (exact), outcome (JSON), tick_ms, 'fire' or
// 'skip', member, grace. Returns 0 when the pending claim is no longer there as given (deleted
// with the schedule, or taken over).
var schedCompleteScript = rueidis.NewLuaScript(schedLuaDue + `
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
if ARGV[5] == 'fire' then
  local lf = tonumber(redis.call('HGET', KEYS[1], 'last_fire_tick') or '-1') or -1
  if tonumber(ARGV[4]) >= lf then redis.call('HSET', KEYS[1], 'last_fire', ARGV[3], 'last_fire_tick', ARGV[4]) end
else
  redis.call('HSET', KEYS[1], 'last_skip', ARGV[3])
end
set_due(KEYS[1], KEYS[2], ARGV[6], tonumber(ARGV[7]))
return 1
`)

// schedTakeoverScript: KEYS rec, due. ARGV field, pending (exact), by, member, grace. Returns {1,
// new pending}, {0} when the claim is no longer there as given, {2} when it is younger than
// the grace (by the Redis clock), {-1} when it does not decode.
var schedTakeoverScript = rueidis.NewLuaScript(schedLuaEffects + schedLuaDue + `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur ~= ARGV[2] then return {0} end
local ok, p = pcall(cjson.decode, cur)
if not ok or type(p) ~= 'table' or not tonumber(p['claimed_ms']) then return {-1} end
local now = now_ms()
if now < tonumber(p['claimed_ms']) + tonumber(ARGV[5]) then return {2} end
p['claimed_ms'] = now
p['by'] = ARGV[3]
if not tonumber(p['first_claimed_ms']) then p['first_claimed_ms'] = now end
local enc = cjson.encode(p)
redis.call('HSET', KEYS[1], ARGV[1], enc)
set_due(KEYS[1], KEYS[2], ARGV[4], tonumber(ARGV[5]))
return {1, enc}
`)

// schedRescheduleScript: KEYS rec, due. ARGV rev, next_ms, member, grace. Returns 0 when rev moved.
var schedRescheduleScript = rueidis.NewLuaScript(schedLuaDue + `
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'next_ms', ARGV[2])
set_due(KEYS[1], KEYS[2], ARGV[3], tonumber(ARGV[4]))
return 1
`)

// schedForgetScript: KEYS rec, due. ARGV member. Drops a due member whose record is gone.
var schedForgetScript = rueidis.NewLuaScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`)

// schedParkScript: KEYS rec, due. ARGV member. Puts an unreadable record out of the due index's
// way (+inf) until someone fixes or deletes it.
var schedParkScript = rueidis.NewLuaScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], '+inf', ARGV[1])
return 1
`)
