package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// RedisDriver is Driver on Redis Streams (6.2 or newer: XPENDING IDLE, exclusive ranges): the
// commands each method sends are the ones its doc names, one round trip per method.
type RedisDriver struct{ c rueidis.Client }

// Redis returns the Driver over client c.
func Redis(c rueidis.Client) *RedisDriver { return &RedisDriver{c: c} }

// Client is the Redis client under the driver (the legacy List drain moves Redis Lists).
func (r *RedisDriver) Client() rueidis.Client { return r.c }

// redisErr classes a failed call: NOGROUP is ErrNoGroup, anything else ErrRedis.
func redisErr(op, key string, err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "NOGROUP") {
		return fmt.Errorf("%s %s: %w (%v)", op, key, ErrNoGroup, err)
	}
	return fmt.Errorf("%w: %s %s: %w", ErrRedis, op, key, err)
}

func entries(es []rueidis.XRangeEntry) []Entry {
	out := make([]Entry, len(es))
	for i, e := range es {
		out[i] = Entry{ID: e.ID, Fields: e.FieldValues}
	}
	return out
}

// Add is XADD stream * fields….
func (r *RedisDriver) Add(ctx context.Context, stream string, fields ...string) (string, error) {
	c := r.c
	fv := c.B().Xadd().Key(stream).Id("*").FieldValue()
	for i := 0; i+1 < len(fields); i += 2 {
		fv = fv.FieldValue(fields[i], fields[i+1])
	}
	id, err := c.Do(ctx, fv.Build()).ToString()
	if err != nil {
		return "", redisErr("xadd", stream, err)
	}
	return id, nil
}

// KeyType is TYPE key.
func (r *RedisDriver) KeyType(ctx context.Context, key string) (string, error) {
	typ, err := r.c.Do(ctx, r.c.B().Type().Key(key).Build()).ToString()
	if err != nil {
		return "", redisErr("type", key, err)
	}
	return typ, nil
}

// CreateGroup is XGROUP CREATE … MKSTREAM; BUSYGROUP is an existing group.
func (r *RedisDriver) CreateGroup(ctx context.Context, stream, group, start string) (bool, error) {
	c := r.c
	err := c.Do(ctx, c.B().XgroupCreate().Key(stream).Group(group).Id(start).Mkstream().Build()).Error()
	if rueidis.IsRedisBusyGroup(err) {
		return false, nil
	}
	if err != nil {
		return false, redisErr("xgroup create "+group, stream, err)
	}
	return true, nil
}

// Len is XLEN.
func (r *RedisDriver) Len(ctx context.Context, stream string) (int64, error) {
	n, err := r.c.Do(ctx, r.c.B().Xlen().Key(stream).Build()).AsInt64()
	if err != nil {
		return 0, redisErr("xlen", stream, err)
	}
	return n, nil
}

// ReadGroup is XREADGROUP GROUP group consumer COUNT count [BLOCK ms] STREAMS stream >.
func (r *RedisDriver) ReadGroup(ctx context.Context, stream, group, consumer string, count int, block time.Duration) ([]Entry, error) {
	c := r.c
	xr := c.B().Xreadgroup().Group(group, consumer).Count(int64(max(count, 1)))
	var cmd rueidis.Completed
	if block > 0 {
		cmd = xr.Block(max(block.Milliseconds(), 1)).Streams().Key(stream).Id(">").Build().UnblockOnCancel()
	} else {
		cmd = xr.Streams().Key(stream).Id(">").Build()
	}
	res, err := c.Do(ctx, cmd).AsXRead()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, redisErr("read", stream, err)
	}
	return entries(res[stream]), nil
}

// Range is one XRANGE (XREVRANGE when Rev) per span, pipelined.
func (r *RedisDriver) Range(ctx context.Context, stream string, spans ...Span) ([][]Entry, error) {
	c := r.c
	cmds := make(rueidis.Commands, 0, len(spans))
	for _, s := range spans {
		if s.Rev {
			b := c.B().Xrevrange().Key(stream).End(s.End).Start(s.Start)
			if s.Count > 0 {
				cmds = append(cmds, b.Count(int64(s.Count)).Build())
			} else {
				cmds = append(cmds, b.Build())
			}
			continue
		}
		b := c.B().Xrange().Key(stream).Start(s.Start).End(s.End)
		if s.Count > 0 {
			cmds = append(cmds, b.Count(int64(s.Count)).Build())
		} else {
			cmds = append(cmds, b.Build())
		}
	}
	out := make([][]Entry, len(spans))
	for i, res := range c.DoMulti(ctx, cmds...) {
		es, err := res.AsXRange()
		if err != nil {
			return nil, redisErr("xrange", stream, err)
		}
		out[i] = entries(es)
	}
	return out, nil
}

// Pending is one extended XPENDING per span (IDLE when MinIdle > 0), pipelined.
func (r *RedisDriver) Pending(ctx context.Context, stream string, spans ...PendingSpan) ([][]PendingEntry, error) {
	c := r.c
	cmds := make(rueidis.Commands, 0, len(spans))
	for _, s := range spans {
		count := int64(max(s.Count, 1))
		if s.MinIdle > 0 {
			cmds = append(cmds, c.B().Xpending().Key(stream).Group(s.Group).Idle(s.MinIdle.Milliseconds()).
				Start(s.Start).End(s.End).Count(count).Build())
		} else {
			cmds = append(cmds, c.B().Xpending().Key(stream).Group(s.Group).Start(s.Start).End(s.End).Count(count).Build())
		}
	}
	out := make([][]PendingEntry, len(spans))
	for i, res := range c.DoMulti(ctx, cmds...) {
		rows, err := res.ToArray()
		if err != nil {
			return nil, redisErr("xpending", stream, err)
		}
		out[i] = make([]PendingEntry, 0, len(rows))
		for _, row := range rows {
			f, err := row.ToArray()
			if err != nil || len(f) < 4 {
				return nil, fmt.Errorf("%w: xpending %s: unexpected row: %v", ErrRedis, stream, err)
			}
			var p PendingEntry
			var idle int64
			p.ID, _ = f[0].ToString()
			p.Consumer, _ = f[1].ToString()
			idle, _ = f[2].AsInt64()
			p.Deliveries, _ = f[3].AsInt64()
			p.Idle = time.Duration(idle) * time.Millisecond
			out[i] = append(out[i], p)
		}
	}
	return out, nil
}

// Claim is XCLAIM stream group consumer minIdle ids….
func (r *RedisDriver) Claim(ctx context.Context, stream, group, consumer string, minIdle time.Duration, ids []string) ([]Entry, error) {
	c := r.c
	res, err := c.Do(ctx, c.B().Xclaim().Key(stream).Group(group).Consumer(consumer).
		MinIdleTime(strconv.FormatInt(minIdle.Milliseconds(), 10)).Id(ids...).Build()).ToArray()
	if err != nil {
		return nil, redisErr("xclaim", stream, err)
	}
	out := make([]Entry, 0, len(res))
	for _, m := range res {
		if m.IsNil() { // Redis < 7 answers nil for an entry deleted meanwhile
			continue
		}
		e, err := m.AsXRangeEntry()
		if err != nil {
			return out, redisErr("xclaim", stream, err)
		}
		if e.FieldValues == nil {
			continue
		}
		out = append(out, Entry{ID: e.ID, Fields: e.FieldValues})
	}
	return out, nil
}

// Hold is XCLAIM stream group consumer 0 ids… IDLE ms [RETRYCOUNT n] JUSTID, which counts no delivery.
func (r *RedisDriver) Hold(ctx context.Context, stream, group, consumer string, deliveries int64, idle time.Duration, ids ...string) error {
	c := r.c
	b := c.B().Xclaim().Key(stream).Group(group).Consumer(consumer).MinIdleTime("0").Id(ids...).Idle(idle.Milliseconds())
	var cmd rueidis.Completed
	if deliveries >= 0 {
		cmd = b.Retrycount(deliveries).Justid().Build()
	} else {
		cmd = b.Justid().Build()
	}
	if err := c.Do(ctx, cmd).Error(); err != nil {
		return redisErr("xclaim justid", stream, err)
	}
	return nil
}

// Ack is XACK.
func (r *RedisDriver) Ack(ctx context.Context, stream, group string, ids ...string) error {
	if err := r.c.Do(ctx, r.c.B().Xack().Key(stream).Group(group).Id(ids...).Build()).Error(); err != nil {
		return redisErr("xack", stream, err)
	}
	return nil
}

// AckDelete is XACK and XDEL, pipelined.
func (r *RedisDriver) AckDelete(ctx context.Context, stream, group string, ids ...string) (delErr, err error) {
	c := r.c
	res := c.DoMulti(ctx,
		c.B().Xack().Key(stream).Group(group).Id(ids...).Build(),
		c.B().Xdel().Key(stream).Id(ids...).Build())
	if err := res[0].Error(); err != nil {
		return nil, redisErr("xack", stream, err)
	}
	if err := res[1].Error(); err != nil {
		return redisErr("xdel", stream, err), nil
	}
	return nil, nil
}

// Delete is XDEL.
func (r *RedisDriver) Delete(ctx context.Context, stream string, ids ...string) (int64, error) {
	n, err := r.c.Do(ctx, r.c.B().Xdel().Key(stream).Id(ids...).Build()).AsInt64()
	if err != nil {
		return 0, redisErr("xdel", stream, err)
	}
	return n, nil
}

// Info is XLEN stream, XINFO GROUPS stream and XLEN dlq, pipelined.
func (r *RedisDriver) Info(ctx context.Context, stream, dlq string) (StreamInfo, error) {
	c := r.c
	res := c.DoMulti(ctx,
		c.B().Xlen().Key(stream).Build(),
		c.B().XinfoGroups().Key(stream).Build(),
		c.B().Xlen().Key(dlq).Build())
	var in StreamInfo
	var err error
	if in.Length, err = res[0].AsInt64(); err != nil {
		return in, redisErr("xlen", stream, err)
	}
	if in.DLQLength, err = res[2].AsInt64(); err != nil {
		return in, redisErr("xlen", dlq, err)
	}
	rows, err := res[1].ToArray()
	if re, ok := rueidis.IsRedisErr(err); ok && strings.Contains(strings.ToLower(re.Error()), "no such key") {
		return in, nil // no stream yet: nothing was ever enqueued
	}
	if err != nil {
		return in, redisErr("xinfo groups", stream, err)
	}
	for _, row := range rows {
		m, err := row.AsMap()
		if err != nil {
			return in, redisErr("xinfo groups", stream, err)
		}
		g := GroupInfo{Pending: intField(m, "pending"), Consumers: intField(m, "consumers")}
		if v, ok := m["name"]; ok {
			g.Name, _ = v.ToString()
		}
		if v, ok := m["last-delivered-id"]; ok {
			g.LastDelivered, _ = v.ToString()
		}
		if lag, ok := m["lag"]; ok && !lag.IsNil() {
			g.Lag, err = lag.AsInt64()
			g.LagKnown = err == nil
		}
		in.Groups = append(in.Groups, g)
	}
	return in, nil
}

// intField is an integer of an XINFO reply, 0 when it is missing or not an integer.
func intField(m map[string]rueidis.RedisMessage, name string) int64 {
	v, ok := m[name]
	if !ok {
		return 0
	}
	n, _ := v.AsInt64()
	return n
}

// deadLetterScript writes a dead letter and its source's one-shot marker in one step, so that
// a worker killed between the two cannot leave an entry without its marker (its redelivery
// would dead-letter the message a second time). The DLQ is trimmed exactly (it is small, and
// "0 keeps 1" must keep exactly one).
// KEYS: 1 DLQ stream, 2 marker. ARGV: 1 MAXLEN, 2 marker TTL (s), 3… the entry's field/value
// pairs. Returns {0, previous DLQ id} (already dead-lettered) | {1, DLQ id, trimmed, length}.
var deadLetterScript = rueidis.NewLuaScript(`
local prev = redis.call('GET', KEYS[2])
if prev then return {0, prev} end
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
local trimmed = redis.call('XTRIM', KEYS[1], 'MAXLEN', ARGV[1])
redis.call('SET', KEYS[2], id, 'EX', ARGV[2])
return {1, id, trimmed, redis.call('XLEN', KEYS[1])}
`)

// DeadLetter runs deadLetterScript.
func (r *RedisDriver) DeadLetter(ctx context.Context, dlq, marker string, maxLen int, ttl time.Duration, fields ...string) (DeadLettered, error) {
	args := append([]string{strconv.Itoa(maxLen), strconv.FormatInt(int64(ttl/time.Second), 10)}, fields...)
	arr, err := deadLetterScript.Exec(ctx, r.c, []string{dlq, marker}, args).ToArray()
	if err != nil {
		return DeadLettered{}, redisErr("dead-letter to", dlq, err)
	}
	if len(arr) < 2 {
		return DeadLettered{}, fmt.Errorf("%w: dead-letter to %s: unexpected reply", ErrRedis, dlq)
	}
	var out DeadLettered
	wrote, _ := arr[0].AsInt64()
	out.Wrote = wrote == 1
	out.ID, _ = arr[1].ToString()
	if out.Wrote && len(arr) == 4 {
		out.Trimmed, _ = arr[2].AsInt64()
		out.Length, _ = arr[3].AsInt64()
	}
	return out, nil
}

// SetOnce is SET key value NX EX ttl.
func (r *RedisDriver) SetOnce(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	err := r.c.Do(ctx, r.c.B().Set().Key(key).Value(value).Nx().Ex(ttl).Build()).Error()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	if err != nil {
		return false, redisErr("set nx", key, err)
	}
	return true, nil
}

// Get is GET.
func (r *RedisDriver) Get(ctx context.Context, key string) (string, bool, error) {
	v, err := r.c.Do(ctx, r.c.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, redisErr("get", key, err)
	}
	return v, true, nil
}

// Replace is SET key value XX KEEPTTL.
func (r *RedisDriver) Replace(ctx context.Context, key, value string) error {
	err := r.c.Do(ctx, r.c.B().Set().Key(key).Value(value).Xx().Keepttl().Build()).Error()
	if err != nil && !rueidis.IsRedisNil(err) {
		return redisErr("set xx", key, err)
	}
	return nil
}

// Unset is DEL.
func (r *RedisDriver) Unset(ctx context.Context, key string) error {
	if err := r.c.Do(ctx, r.c.B().Del().Key(key).Build()).Error(); err != nil {
		return redisErr("del", key, err)
	}
	return nil
}
