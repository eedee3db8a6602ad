package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// RedisEventsDriver is EventsDriver on the keys events.go lays out: a STRING per record, a
// ZSET per type's index and per tenant's feed, a STRING throttle, the root's tenant ZSET and
// cursor HASH, a STRING per wake-up marker and a pub/sub channel. Each method is the command,
// the pipeline or the script its doc names: one round trip (Index: two when it takes a type's
// prune throttle, once a minute; ClaimWake: two when it takes over a stale claim).
type RedisEventsDriver struct {
	c rueidis.Client
	// claimByScript: the server refused SET … NX GET (Redis before 7.0), so claims run
	// claimScript alone.
	claimByScript atomic.Bool
}

// RedisEvents returns the EventsDriver over client c.
func RedisEvents(c rueidis.Client) *RedisEventsDriver { return &RedisEventsDriver{c: c} }

var _ EventsDriver = (*RedisEventsDriver)(nil)

// setKey is the key of one of the bus's sorted sets.
func setKey(sp keys.Space, set EventSet) (string, error) {
	switch set.Kind {
	case EventFeed:
		return sp.EventFeed(), nil
	case EventTenants:
		return sp.EventBusTenants(), nil
	default:
		idx, err := sp.EventIndex(set.Type)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return idx, nil
	}
}

// Put is SET NX PX of the record.
func (r *RedisEventsDriver) Put(ctx context.Context, sp keys.Space, id string, record []byte, ttl time.Duration) (bool, error) {
	key, err := sp.Event(id)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	err = r.c.Do(ctx, r.c.B().Set().Key(key).Value(string(record)).Nx().Px(ttl).Build()).Error()
	switch {
	case rueidis.IsRedisNil(err):
		return false, nil
	case err != nil:
		return false, transient(ErrRedis, "write event "+id, err)
	}
	return true, nil
}

// Records is one GET per id, pipelined (single-key GETs: they may live in different Cluster
// slots).
func (r *RedisEventsDriver) Records(ctx context.Context, sp keys.Space, ids []string) ([]Record, error) {
	ks := make([]string, len(ids))
	for i, id := range ids {
		key, err := sp.Event(id)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadEvent, err)
		}
		ks[i] = key
	}
	return getRecords(ctx, r.c, ks, func(i int) string { return "read event " + ids[i] })
}

// Exist is one EXISTS per id, pipelined.
func (r *RedisEventsDriver) Exist(ctx context.Context, sp keys.Space, ids []string) ([]bool, error) {
	out := make([]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cmds := make(rueidis.Commands, len(ids))
	for i, id := range ids {
		key, err := sp.Event(id)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadEvent, err)
		}
		cmds[i] = r.c.B().Exists().Key(key).Build()
	}
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		n, err := res.AsInt64()
		if err != nil {
			return nil, transient(ErrRedis, "check events of "+sp.Tenant(), err)
		}
		out[i] = n > 0
	}
	return out, nil
}

// Index is ZADD of the type's index, of the feed and of the tenant list, PUBLISH of the
// notification and, with a throttle, SET NX PX of the throttle: pipelined
// (doMultiPublishing). The index's and the feed's TTLs are set when the throttle is taken
// (TTL + throttle, in a second round trip): once a throttle period per type across every
// publisher instead of two commands per publish. Every member written while a throttle holds
// was written after the TTLs were last set, and they outlive it by the throttle period, so
// neither key expires before its newest member's record. Without a throttle every publish
// sets them (PEXPIRE of both in the pipeline).
func (r *RedisEventsDriver) Index(ctx context.Context, sp keys.Space, w EventIndexWrite) (bool, error) {
	c := r.c
	idx, err := sp.EventIndex(w.Type)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	score := float64(w.Score)
	cmds := rueidis.Commands{
		c.B().Zadd().Key(idx).ScoreMember().ScoreMember(score, w.ID).Build(),
		c.B().Zadd().Key(sp.EventFeed()).ScoreMember().ScoreMember(score, w.Feed).Build(),
		c.B().Zadd().Key(sp.EventBusTenants()).ScoreMember().ScoreMember(float64(w.TenantAt), sp.Tenant()).Build(),
		c.B().Publish().Channel(w.Channel).Message(string(w.Note)).Build(),
	}
	ttls := func(ttl time.Duration) rueidis.Commands {
		return rueidis.Commands{c.B().Pexpire().Key(idx).Milliseconds(ttl.Milliseconds()).Build(),
			c.B().Pexpire().Key(sp.EventFeed()).Milliseconds(ttl.Milliseconds()).Build()}
	}
	if w.Throttle > 0 {
		throttle, _ := sp.EventIndexPrune(w.Type)
		cmds = append(cmds, c.B().Set().Key(throttle).Value("1").Nx().Px(w.Throttle).Build())
	} else {
		cmds = append(cmds, ttls(w.TTL)...)
	}
	res := doMultiPublishing(ctx, c, cmds, 3)
	for i, r := range res {
		if i == 4 && w.Throttle > 0 {
			continue // the throttle: a nil reply is a throttle held
		}
		if err := r.Error(); err != nil {
			return false, transient(ErrRedis, "index event "+w.ID, err)
		}
	}
	// A throttle held (a nil reply) or not written: no prune now, and the TTLs stand.
	if w.Throttle <= 0 || res[4].Error() != nil {
		return false, nil
	}
	for _, r := range c.DoMulti(ctx, ttls(w.TTL+w.Throttle)...) {
		if err := r.Error(); err != nil {
			return false, transient(ErrRedis, "index event "+w.ID, err)
		}
	}
	return true, nil
}

// doMultiPublishing sends cmds, of which cmds[pub] is a PUBLISH, in one round trip — except on
// a Cluster, where a PUBLISH has no slot and rueidis refuses it beside keyed commands: there it
// goes alone, after the others (a notification must not arrive before what it announces).
// The results are in the order of cmds.
func doMultiPublishing(ctx context.Context, c rueidis.Client, cmds rueidis.Commands, pub int) []rueidis.RedisResult {
	if c.Mode() != rueidis.ClientModeCluster {
		return c.DoMulti(ctx, cmds...)
	}
	rest := append(append(rueidis.Commands{}, cmds[:pub]...), cmds[pub+1:]...)
	res := c.DoMulti(ctx, rest...)
	out := append(append([]rueidis.RedisResult{}, res[:pub]...), c.Do(ctx, cmds[pub]))
	return append(out, res[pub:]...)
}

// Unindex is ZREM of each member from the feed and ZREM of its id from its type's index,
// pipelined.
func (r *RedisEventsDriver) Unindex(ctx context.Context, sp keys.Space, members []EventMember) error {
	if len(members) == 0 {
		return nil
	}
	c := r.c
	cmds := make(rueidis.Commands, 0, 2*len(members))
	for _, m := range members {
		cmds = append(cmds, c.B().Zrem().Key(sp.EventFeed()).Member(m.Feed).Build())
		if idx, err := sp.EventIndex(m.Type); err == nil {
			cmds = append(cmds, c.B().Zrem().Key(idx).Member(m.ID).Build())
		}
	}
	for _, res := range c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return transient(ErrRedis, "remove expired events of "+sp.Tenant(), err)
		}
	}
	return nil
}

// Drop is ZREM of the members.
func (r *RedisEventsDriver) Drop(ctx context.Context, sp keys.Space, set EventSet, members ...string) error {
	if len(members) == 0 {
		return nil
	}
	key, err := setKey(sp, set)
	if err != nil {
		return err
	}
	if err := r.c.Do(ctx, r.c.B().Zrem().Key(key).Member(members...).Build()).Error(); err != nil {
		return transient(ErrRedis, "write "+key, err)
	}
	return nil
}

// Page is pageScript (list.go) over the set.
func (r *RedisEventsDriver) Page(ctx context.Context, sp keys.Space, set EventSet, after ScoredMember, limit int) ([]ScoredMember, error) {
	key, err := setKey(sp, set)
	if err != nil {
		return nil, err
	}
	rows, err := pageScript.Exec(ctx, r.c, []string{key},
		[]string{after.Member, strconv.FormatFloat(after.Score, 'g', -1, 64), strconv.Itoa(limit)}).ToArray()
	if err != nil {
		return nil, transient(ErrRedis, "read "+key, err)
	}
	out := make([]ScoredMember, 0, len(rows)/2)
	for i := 0; i+1 < len(rows); i += 2 {
		m, _ := rows[i].ToString()
		score, err := rows[i+1].AsFloat64()
		if err != nil {
			return nil, fmt.Errorf("%w: read %s: score of %q: %w", ErrRedis, key, m, err)
		}
		out = append(out, ScoredMember{Member: m, Score: score})
	}
	return out, nil
}

// Ranks is ZRANGE start stop.
func (r *RedisEventsDriver) Ranks(ctx context.Context, sp keys.Space, set EventSet, start, stop int) ([]string, error) {
	key, err := setKey(sp, set)
	if err != nil {
		return nil, err
	}
	m, err := r.c.Do(ctx, r.c.B().Zrange().Key(key).Min(strconv.Itoa(start)).Max(strconv.Itoa(stop)).Build()).AsStrSlice()
	if err != nil {
		return nil, transient(ErrRedis, "read "+key, err)
	}
	return m, nil
}

// FeedRange is ZRANGE BYSCORE LIMIT WITHSCORES of the feed.
func (r *RedisEventsDriver) FeedRange(ctx context.Context, sp keys.Space, from, to int64, skip, count int) ([]ScoredMember, error) {
	c, key := r.c, sp.EventFeed()
	res, err := c.Do(ctx, c.B().Zrange().Key(key).Min(strconv.FormatInt(from, 10)).Max(strconv.FormatInt(to, 10)).
		Byscore().Limit(int64(skip), int64(count)).Withscores().Build()).AsZScores()
	if err != nil {
		return nil, transient(ErrRedis, "read "+key, err)
	}
	out := make([]ScoredMember, len(res))
	for i, z := range res {
		out[i] = ScoredMember{Member: z.Member, Score: z.Score}
	}
	return out, nil
}

// Tenants is ZRANGE BYSCORE of the tenant list.
func (r *RedisEventsDriver) Tenants(ctx context.Context, sp keys.Space, since *int64) ([]string, error) {
	key := sp.EventBusTenants()
	from := "-inf"
	if since != nil {
		from = strconv.FormatInt(*since, 10)
	}
	ts, err := r.c.Do(ctx, r.c.B().Zrange().Key(key).Min(from).Max("+inf").Byscore().Build()).AsStrSlice()
	if err != nil {
		return nil, transient(ErrRedis, "read "+key, err)
	}
	return ts, nil
}

// forgetScript: KEYS[1] = the tenant list; ARGV = tenant, Unix ms. Removes the tenant only when
// its last publish is older than the time (a concurrent publish keeps it). One key.
var forgetScript = rueidis.NewLuaScript(`
local s = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if s ~= nil and s < tonumber(ARGV[2]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
`)

// ForgetTenant is forgetScript.
func (r *RedisEventsDriver) ForgetTenant(ctx context.Context, sp keys.Space, before int64) (bool, error) {
	key := sp.EventBusTenants()
	n, err := forgetScript.Exec(ctx, r.c, []string{key}, []string{sp.Tenant(), strconv.FormatInt(before, 10)}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "write "+key, err)
	}
	return n == 1, nil
}

// Cursor is HGET of the cursor HASH.
func (r *RedisEventsDriver) Cursor(ctx context.Context, sp keys.Space) (string, bool, error) {
	key := sp.EventBusCursor()
	s, found, err := optString(r.c.Do(ctx, r.c.B().Hget().Key(key).Field(sp.Tenant()).Build()))
	if err != nil {
		return "", false, transient(ErrRedis, "read "+key, err)
	}
	return s, found, nil
}

// cursorScript moves a tenant's cursor forward only: KEYS[1] = the cursor HASH, ARGV = tenant,
// Unix ms. One key.
var cursorScript = rueidis.NewLuaScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
local at = tonumber(ARGV[2])
if cur == nil or cur < at then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  return 1
end
return 0
`)

// AdvanceCursor is cursorScript.
func (r *RedisEventsDriver) AdvanceCursor(ctx context.Context, sp keys.Space, at int64) error {
	key := sp.EventBusCursor()
	if err := cursorScript.Exec(ctx, r.c, []string{key}, []string{sp.Tenant(), strconv.FormatInt(at, 10)}).Error(); err != nil {
		return transient(ErrRedis, "write "+key, err)
	}
	return nil
}

// claimScript: KEYS[1] = the marker. ARGV = the pending value, now (ms), grace (ms), TTL (ms).
// Values: "pending <ms> <owner>", "sent <ms> <stream id>" or "refused <ms> <why>". One key.
// It is DecideWake in Lua.
var claimScript = rueidis.NewLuaScript(`
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
  return {'claimed', ''}
end
if string.sub(v, 1, 5) == 'sent ' then
  return {'sent', v}
end
if string.sub(v, 1, 8) == 'refused ' then
  return {'refused', v}
end
local t = tonumber(string.match(v, '^pending (%d+)'))
if t == nil or tonumber(ARGV[2]) - t >= tonumber(ARGV[3]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
  return {'taken_over', v}
end
return {'pending', v}
`)

// ClaimWake claims with SET NX GET: a marker that was not there is claimed by that one command
// (the script costs three: EVALSHA, GET, SET). A marker found there is decided by DecideWake;
// only one to take over runs claimScript, which decides again on the value it reads. On a Redis
// that refuses SET NX GET (before 7.0) every claim runs claimScript.
func (r *RedisEventsDriver) ClaimWake(ctx context.Context, m WakeMarker, c WakeClaim) (WakeState, string, error) {
	key, err := m.Space.EventWake(m.ExecutionID, m.Suspension, m.EventID)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !r.claimByScript.Load() {
		old, err := r.c.Do(ctx, r.c.B().Set().Key(key).Value(c.Token).Nx().Get().PxMilliseconds(c.TTL.Milliseconds()).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			return WakeClaimed, "", nil
		}
		if re, ok := rueidis.IsRedisErr(err); ok && strings.Contains(re.Error(), "syntax error") {
			r.claimByScript.Store(true)
		} else if err != nil {
			return "", "", transient(ErrRedis, "claim "+key, err)
		} else if state, replace := DecideWake(old, true, c.Now, c.Grace); !replace {
			return state, old, nil
		}
	}
	arr, err := claimScript.Exec(ctx, r.c, []string{key}, []string{c.Token, strconv.FormatInt(c.Now, 10),
		strconv.FormatInt(c.Grace.Milliseconds(), 10), strconv.FormatInt(c.TTL.Milliseconds(), 10)}).AsStrSlice()
	if err != nil || len(arr) != 2 {
		return "", "", transient(ErrRedis, "claim "+key, fmt.Errorf("reply %v: %w", arr, err))
	}
	return WakeState(arr[0]), arr[1], nil
}

// casScript: KEYS[1] = the marker. ARGV = the expected value, the new value ("" deletes), TTL
// (ms). One key.
var casScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 1
`)

// SetWake is casScript.
func (r *RedisEventsDriver) SetWake(ctx context.Context, m WakeMarker, expect, value string, ttl time.Duration) (bool, error) {
	key, err := m.Space.EventWake(m.ExecutionID, m.Suspension, m.EventID)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	n, err := casScript.Exec(ctx, r.c, []string{key}, []string{expect, value, strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "write "+key, err)
	}
	return n == 1, nil
}

// Listen is SUBSCRIBE on the client's pub/sub connection: the client subscribes again by
// itself after a lost connection, and onSubscribed runs on every confirmation.
func (r *RedisEventsDriver) Listen(ctx context.Context, channel string, onSubscribed func(), fn func(payload string)) error {
	if onSubscribed != nil {
		ctx = rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
			if s.Kind == "subscribe" && s.Channel == channel {
				onSubscribed()
			}
		})
	}
	err := r.c.Receive(ctx, r.c.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) { fn(m.Message) })
	if err != nil && ctx.Err() == nil {
		return transient(ErrRedis, "subscribe to "+channel, err)
	}
	return nil
}
