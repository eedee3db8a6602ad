package store

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// Ephemeral is the driver of what lives only while processes run: publish/subscribe (live
// events, control requests), short-lived mailboxes (control replies) and records with a TTL
// and their index sets (the instance registry). LiveEvents, Control and Registry keep their
// rules and formats; the driver only carries and keeps. RedisEphemeral is the cluster's
// (PUBLISH/SUBSCRIBE, Lists, strings and sets); Hub is local mode's, in the process: a console
// without Redis is one process, and nothing here outlives it in Redis either (records expire,
// pub/sub is at most once). storetest's contracts hold both.
type Ephemeral interface {
	// Publish sends msg on channel and says how many subscribers heard it.
	Publish(ctx context.Context, channel string, msg []byte) (int64, error)
	// Subscribe returns once the subscription is live: a message published after it is heard.
	Subscribe(ctx context.Context, channel string) (*LiveSubscription, error)
	// Listened lists, per glob pattern, the channels with a subscriber, and whether some
	// subscriber listens by pattern (then every channel may be heard).
	Listened(ctx context.Context, patterns ...string) (channels [][]string, all bool, err error)

	// Push appends value to mailbox key, which expires ttl after the push.
	Push(ctx context.Context, key, value string, ttl time.Duration) error
	// Pop takes the oldest value of mailbox key, waiting up to wait for one (ok false: none).
	Pop(ctx context.Context, key string, wait time.Duration) (value string, ok bool, err error)

	// SetRecord writes record key for ttl; onlyIfPresent writes only over a live record
	// (written false: there was none).
	SetRecord(ctx context.Context, key, value string, ttl time.Duration, onlyIfPresent bool) (written bool, err error)
	// Records reads records (found false: none, or expired). A key that holds something that
	// is not a record reads as a *BadRecordError.
	Records(ctx context.Context, keys ...string) ([]Record, error)
	// DeleteRecord removes record key and member from set, in one round trip.
	DeleteRecord(ctx context.Context, key, set, member string) error
	// AddMember, Members and RemoveMembers keep an index set.
	AddMember(ctx context.Context, set, member string) error
	Members(ctx context.Context, set string) ([]string, error)
	RemoveMembers(ctx context.Context, set string, members ...string) error
}

// Record is one read record.
type Record struct {
	Value string
	Found bool
	Err   error // the key holds something else
}

// RedisEphemeral is Ephemeral on Redis.
type RedisEphemeral struct{ c rueidis.Client }

// OnRedis returns the Ephemeral driver over client c.
func OnRedis(c rueidis.Client) *RedisEphemeral { return &RedisEphemeral{c: c} }

// Publish is PUBLISH.
func (r *RedisEphemeral) Publish(ctx context.Context, channel string, msg []byte) (int64, error) {
	n, err := r.c.Do(ctx, r.c.B().Publish().Channel(channel).Message(rueidis.BinaryString(msg)).Build()).AsInt64()
	if err != nil {
		return 0, transient(ErrRedis, "publish to "+channel, err)
	}
	return n, nil
}

// Subscribe is SUBSCRIBE on a connection of its own (LiveSubscription).
func (r *RedisEphemeral) Subscribe(ctx context.Context, channel string) (*LiveSubscription, error) {
	return subscribe(ctx, r.c, channel)
}

// Listened is PUBSUB CHANNELS per pattern and PUBSUB NUMPAT on every node of a cluster (a
// subscription lives on the node it was made on), one round trip per node.
func (r *RedisEphemeral) Listened(ctx context.Context, patterns ...string) ([][]string, bool, error) {
	out := make([][]string, len(patterns))
	all := false
	for addr, node := range r.c.Nodes() {
		cmds := make(rueidis.Commands, 0, len(patterns)+1)
		for _, p := range patterns {
			cmds = append(cmds, node.B().PubsubChannels().Pattern(p).Build())
		}
		cmds = append(cmds, node.B().PubsubNumpat().Build())
		res := node.DoMulti(ctx, cmds...)
		for i := range patterns {
			chs, err := res[i].AsStrSlice()
			if err != nil {
				return nil, false, transient(ErrRedis, "PUBSUB on "+addr, err)
			}
			out[i] = append(out[i], chs...)
		}
		numpat, err := res[len(patterns)].AsInt64()
		if err != nil {
			return nil, false, transient(ErrRedis, "PUBSUB on "+addr, err)
		}
		all = all || numpat > 0
	}
	return out, all, nil
}

// Push is LPUSH and PEXPIRE, pipelined (Pop takes from the other end: the oldest first).
func (r *RedisEphemeral) Push(ctx context.Context, key, value string, ttl time.Duration) error {
	for _, res := range r.c.DoMulti(ctx, r.c.B().Lpush().Key(key).Element(value).Build(),
		r.c.B().Pexpire().Key(key).Milliseconds(ttl.Milliseconds()).Build()) {
		if err := res.Error(); err != nil {
			return transient(ErrRedis, "push to "+key, err)
		}
	}
	return nil
}

// Pop is BRPOP with wait as its timeout (fractions of a second from Redis 6).
func (r *RedisEphemeral) Pop(ctx context.Context, key string, wait time.Duration) (string, bool, error) {
	kv, err := r.c.Do(ctx, r.c.B().Brpop().Key(key).Timeout(max(wait.Seconds(), 0.01)).Build()).AsStrSlice()
	switch {
	case rueidis.IsRedisNil(err):
		return "", false, nil
	case err != nil:
		return "", false, transient(ErrRedis, "pop "+key, err)
	case len(kv) != 2:
		return "", false, &BadRecordError{ID: key, Err: fmt.Errorf("brpop replied %d values", len(kv))}
	}
	return kv[1], true, nil
}

// SetRecord is SET key value PX ttl [XX].
func (r *RedisEphemeral) SetRecord(ctx context.Context, key, value string, ttl time.Duration, onlyIfPresent bool) (bool, error) {
	b := r.c.B().Set().Key(key).Value(value)
	var cmd rueidis.Completed
	if onlyIfPresent {
		cmd = b.Xx().PxMilliseconds(ttl.Milliseconds()).Build()
	} else {
		cmd = b.PxMilliseconds(ttl.Milliseconds()).Build()
	}
	err := r.c.Do(ctx, cmd).Error()
	switch {
	case onlyIfPresent && rueidis.IsRedisNil(err):
		return false, nil
	case err != nil:
		return false, transient(ErrRedis, "set "+key, err)
	}
	return true, nil
}

// Records is one GET per key, pipelined.
func (r *RedisEphemeral) Records(ctx context.Context, keys ...string) ([]Record, error) {
	return getRecords(ctx, r.c, keys, func(i int) string { return "get " + keys[i] })
}

// getRecords is one GET per key, pipelined: a missing key is a record not found, a key of
// another type a record with Err; any other failure is ErrRedis, named by what(i).
func getRecords(ctx context.Context, c rueidis.Client, keys []string, what func(i int) string) ([]Record, error) {
	out := make([]Record, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	cmds := make(rueidis.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = c.B().Get().Key(k).Build()
	}
	for i, res := range c.DoMulti(ctx, cmds...) {
		v, err := res.ToString()
		switch {
		case rueidis.IsRedisNil(err):
		case isWrongType(err):
			out[i].Err = err
		case err != nil:
			return nil, transient(ErrRedis, what(i), err)
		default:
			out[i] = Record{Value: v, Found: true}
		}
	}
	return out, nil
}

// DeleteRecord is DEL and SREM, pipelined.
func (r *RedisEphemeral) DeleteRecord(ctx context.Context, key, set, member string) error {
	for _, res := range r.c.DoMulti(ctx, r.c.B().Del().Key(key).Build(), r.c.B().Srem().Key(set).Member(member).Build()) {
		if err := res.Error(); err != nil {
			return transient(ErrRedis, "delete "+key, err)
		}
	}
	return nil
}

// AddMember is SADD.
func (r *RedisEphemeral) AddMember(ctx context.Context, set, member string) error {
	if err := r.c.Do(ctx, r.c.B().Sadd().Key(set).Member(member).Build()).Error(); err != nil {
		return transient(ErrRedis, "sadd "+set, err)
	}
	return nil
}

// Members is SMEMBERS.
func (r *RedisEphemeral) Members(ctx context.Context, set string) ([]string, error) {
	m, err := r.c.Do(ctx, r.c.B().Smembers().Key(set).Build()).AsStrSlice()
	if err != nil {
		return nil, transient(ErrRedis, "smembers "+set, err)
	}
	return m, nil
}

// RemoveMembers is SREM.
func (r *RedisEphemeral) RemoveMembers(ctx context.Context, set string, members ...string) error {
	if err := r.c.Do(ctx, r.c.B().Srem().Key(set).Member(members...).Build()).Error(); err != nil {
		return transient(ErrRedis, "srem "+set, err)
	}
	return nil
}
