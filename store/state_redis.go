package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine/state"
	"plaita/store/keys"
)

// redisState is StateDriver on Redis: the keys of package keys, the scripts of redis.go,
// lease.go, begin.go and deferred.go, and the round trips their comments count.
type redisState struct{ c rueidis.Client }

var _ StateDriver = redisState{}

func (r redisState) cluster() bool { return r.c.Mode() == rueidis.ClientModeCluster }

// Ping is PING.
func (r redisState) Ping(ctx context.Context) error {
	if err := r.c.Do(ctx, r.c.B().Ping().Build()).Error(); err != nil {
		return transient(ErrRedis, "ping", err)
	}
	return nil
}

// indexByKeys are the IndexBy keys of a state's indexed values (state.Execution.Index), in
// field order. A field that cannot name a key (a state not written by the engine) is left out:
// it is not indexed, and nothing else changes.
func indexByKeys(sp keys.Space, index map[string]string) []string {
	if len(index) == 0 {
		return nil
	}
	out := make([]string, 0, len(index))
	for _, field := range slices.Sorted(maps.Keys(index)) {
		if k, err := sp.IndexBy(field, index[field]); err == nil {
			out = append(out, k)
		}
	}
	return out
}

func (r redisState) setCmd(key string, w StateWrite) rueidis.Completed {
	v := r.c.B().Set().Key(key).Value(rueidis.BinaryString(w.Payload))
	if w.TTL > 0 {
		return v.ExSeconds(int64(w.TTL / time.Second)).Build()
	}
	return v.Build() // a plain SET drops any TTL: running/suspended states persist
}

// indexCmds index a state: its member in the tenant's index and in the IndexBy key of each of
// its indexed values, each a ZADD of its own (each key has its own Cluster slot).
func (r redisState) indexCmds(sp keys.Space, w StateWrite) rueidis.Commands {
	cmds := make(rueidis.Commands, 0, 1+len(w.Index))
	for _, k := range append([]string{sp.Index()}, indexByKeys(sp, w.Index)...) {
		cmds = append(cmds, r.c.B().Zadd().Key(k).ScoreMember().ScoreMember(w.Score, w.ID).Build())
	}
	return cmds
}

// index sends indexCmds (after a script that wrote the state, in a Cluster).
func (r redisState) index(ctx context.Context, sp keys.Space, w StateWrite) error {
	for _, res := range r.c.DoMulti(ctx, r.indexCmds(sp, w)...) {
		if err := res.Error(); err != nil {
			return transient(ErrStateSave, "execution "+w.ID+": state written, index not updated", err)
		}
	}
	return nil
}

// indexArgs extend a script's KEYS and ARGV with the index and the IndexBy keys, its score and
// its member (a script on a single server indexes the state itself).
func indexArgs(sp keys.Space, ks, args []string, w StateWrite) ([]string, []string) {
	ks = append(append(ks, sp.Index()), indexByKeys(sp, w.Index)...)
	return ks, append(args, strconv.FormatFloat(w.Score, 'f', -1, 64), w.ID)
}

// Save writes the state, then indexes it. On one server SET and ZADD go in one pipeline: one
// connection, executed in order, so the ZADD runs after the SET (and an error reply that fails
// the SET — OOM, READONLY — fails the ZADD too). In a cluster the two keys live on different
// nodes and a pipeline would run them in parallel, so the ZADD is sent only once the SET is
// confirmed (2 round trips). A lost ZADD leaves the state saved but unindexed: the error says
// so, and Load puts the member back.
func (r redisState) Save(ctx context.Context, sp keys.Space, w StateWrite) error {
	key, err := sp.Execution(w.ID)
	if err != nil {
		return err
	}
	c := r.c
	if r.cluster() {
		if err := c.Do(ctx, r.setCmd(key, w)).Error(); err != nil {
			return transient(ErrStateSave, "execution "+w.ID, err)
		}
		return r.index(ctx, sp, w)
	}
	res := c.DoMulti(ctx, append(rueidis.Commands{r.setCmd(key, w)}, r.indexCmds(sp, w)...)...)
	if err := res[0].Error(); err != nil {
		return transient(ErrStateSave, "execution "+w.ID, err)
	}
	for _, res := range res[1:] {
		if err := res.Error(); err != nil {
			return transient(ErrStateSave, "execution "+w.ID+": state written, index not updated", err)
		}
	}
	return nil
}

// Load is GET and ZSCORE, pipelined.
func (r redisState) Load(ctx context.Context, sp keys.Space, id string) ([]byte, bool, error) {
	key, err := sp.Execution(id)
	if err != nil {
		return nil, false, err
	}
	c := r.c
	res := c.DoMulti(ctx, c.B().Get().Key(key).Build(), c.B().Zscore().Key(sp.Index()).Member(id).Build())
	b, err := stateBytes(id, res[0])
	if err != nil {
		return nil, false, err
	}
	_, zerr := res[1].AsFloat64()
	return b, !rueidis.IsRedisNil(zerr), nil
}

// Get is GET.
func (r redisState) Get(ctx context.Context, sp keys.Space, id string) ([]byte, error) {
	key, err := sp.Execution(id)
	if err != nil {
		return nil, err
	}
	return stateBytes(id, r.c.Do(ctx, r.c.B().Get().Key(key).Build()))
}

// stateBytes is the reply of a GET of id's state key: the bytes, ErrNotFound when there is
// none, a *CorruptStateError when the key holds no string, ErrStateLoad when Redis failed.
func stateBytes(id string, res rueidis.RedisResult) ([]byte, error) {
	b, err := res.AsBytes()
	switch {
	case rueidis.IsRedisNil(err):
		return nil, &state.NotFoundError{ExecutionID: id}
	case isWrongType(err):
		return nil, &CorruptStateError{ID: id, Err: fmt.Errorf("%w: %w", ErrStateCorrupt, err)}
	case err != nil:
		return nil, transient(ErrStateLoad, "execution "+id, err)
	}
	return b, nil
}

// Reindex is ZADD NX of the member in the index and its IndexBy keys, pipelined: a member
// there keeps its score (Load's repair and the backfill).
func (r redisState) Reindex(ctx context.Context, sp keys.Space, id string, score float64, index map[string]string) error {
	for _, res := range r.c.DoMulti(ctx, r.indexNXCmds(sp, id, score, index)...) {
		if err := res.Error(); err != nil {
			return transient(ErrRedis, "index execution "+id, err)
		}
	}
	return nil
}

// indexNXCmds put back a stored state's members where they are missing (ZADD NX: a member
// there keeps its score).
func (r redisState) indexNXCmds(sp keys.Space, id string, score float64, index map[string]string) rueidis.Commands {
	var cmds rueidis.Commands
	for _, k := range append([]string{sp.Index()}, indexByKeys(sp, index)...) {
		cmds = append(cmds, r.c.B().Zadd().Key(k).Nx().ScoreMember().ScoreMember(score, id).Build())
	}
	return cmds
}

// leaseKeys are the keys beginScript and beginSaveScript take, in their KEYS order.
func leaseKeys(sp keys.Space, id string) ([]string, error) {
	k, err := sp.ExecutionKeys(id)
	if err != nil {
		return nil, err
	}
	// Room for the index key, which indexArgs appends on a single server.
	return append(make([]string, 0, 7), k.Lease, k.FenceGen, k.State, k.Tombstone, k.Cancel, k.NoFail), nil
}

// Begin runs beginScript; a start's new state is indexed in it on a single server, by a ZADD
// after it against a cluster.
func (r redisState) Begin(ctx context.Context, sp keys.Space, c BeginCall) (BeginReply, error) {
	ks, err := leaseKeys(sp, c.ID)
	if err != nil {
		return BeginReply{}, err
	}
	var fresh StateWrite
	if c.Fresh != nil {
		fresh = *c.Fresh
	}
	inScript := c.Fresh != nil && !r.cluster()
	args := []string{c.Lease.Value, seconds(c.Lease.TTL), c.Takeover, rueidis.BinaryString(fresh.Payload)}
	if inScript {
		ks, args = indexArgs(sp, ks, args, fresh)
	} else {
		args = append(args, "0", c.ID)
	}
	arr, err := beginScript.Exec(ctx, r.c, ks, args).ToArray()
	if err != nil {
		return BeginReply{}, transient(ErrRedis, "begin a run of "+c.ID, err)
	}
	if ok, _ := arr[0].AsInt64(); ok != 1 || len(arr) != 8 {
		cur, _ := arr[min(1, len(arr)-1)].ToString()
		return BeginReply{Held: cur}, nil
	}
	rep := BeginReply{Taken: true}
	rep.Generation, _ = arr[1].AsInt64()
	took, _ := arr[2].AsInt64()
	tomb, _ := arr[4].AsInt64()
	canc, _ := arr[5].AsInt64()
	rep.TookOver, rep.Tombstoned, rep.Cancelled = took == 1, tomb == 1, canc == 1
	rep.NoFail, _ = arr[6].AsInt64()
	if created, _ := arr[7].AsInt64(); created == 1 {
		rep.Created = true
		if !inScript {
			if err := r.index(ctx, sp, fresh); err != nil {
				return rep, err
			}
		}
		rep.Indexed = true
		return rep, nil
	}
	if raw, err := arr[3].AsBytes(); err == nil {
		rep.State = raw
	}
	return rep, nil
}

// FencedSave runs fencedSaveScript; asked to index, it does so in the script on a single
// server and by ZADDs after it in a cluster.
func (r redisState) FencedSave(ctx context.Context, sp keys.Space, c FencedSave) (FencedReply, error) {
	k, err := sp.ExecutionKeys(c.W.ID)
	if err != nil {
		return FencedReply{}, err
	}
	rel := "0"
	if c.Release {
		rel = "1"
	}
	inScript := c.Index && !r.cluster()
	ks := []string{k.State, k.FenceGen, k.Cancel, k.Lease}
	args := []string{strconv.FormatInt(c.Gen, 10), rueidis.BinaryString(c.W.Payload), seconds(c.W.TTL), rel}
	if inScript {
		ks, args = indexArgs(sp, ks, args, c.W)
	}
	arr, err := fencedSaveScript.Exec(ctx, r.c, ks, args).ToArray()
	if err != nil {
		return FencedReply{}, transient(ErrStateSave, "execution "+c.W.ID, err)
	}
	if ok, _ := arr[0].AsInt64(); ok != 1 {
		return lostReply(arr), nil
	}
	var rep FencedReply
	if len(arr) > 1 {
		n, _ := arr[1].AsInt64()
		rep.Cancelled = n == 1
	}
	if c.Index && !inScript {
		if err := r.index(ctx, sp, c.W); err != nil {
			return rep, err
		}
	}
	rep.Indexed = c.Index
	return rep, nil
}

// lostReply reads a refused fenced write's {0, ”, fencegen}.
func lostReply(arr []rueidis.RedisMessage) FencedReply {
	rep := FencedReply{Lost: true}
	if len(arr) == 3 {
		rep.FenceGen, _ = arr[2].ToString()
	}
	return rep
}

// BeginSave runs beginSaveScript; indexing as FencedSave's.
func (r redisState) BeginSave(ctx context.Context, sp keys.Space, c BeginSaveCall) (BeginReply, error) {
	ks, err := leaseKeys(sp, c.W.ID)
	if err != nil {
		return BeginReply{}, err
	}
	rel := "0"
	if c.Release {
		rel = "1"
	}
	inScript := !r.cluster()
	args := []string{c.Lease.Value, seconds(c.Lease.TTL), c.Holder, rueidis.BinaryString(c.W.Payload), seconds(c.W.TTL), rel}
	if inScript {
		ks, args = indexArgs(sp, ks, args, c.W)
	}
	arr, err := beginSaveScript.Exec(ctx, r.c, ks, args).ToArray()
	if err != nil {
		return BeginReply{}, transient(ErrStateSave, "execution "+c.W.ID+" (its first save)", err)
	}
	switch ok, _ := arr[0].AsInt64(); {
	case ok == 2:
		return BeginReply{NotFresh: true}, nil
	case ok != 1 || len(arr) != 3:
		cur, _ := arr[min(1, len(arr)-1)].ToString()
		return BeginReply{Held: cur}, nil
	}
	rep := BeginReply{Taken: true, Created: true, Indexed: true}
	rep.Generation, _ = arr[1].AsInt64()
	took, _ := arr[2].AsInt64()
	rep.TookOver = took == 1
	if !inScript {
		if err := r.index(ctx, sp, c.W); err != nil {
			rep.Indexed = false
			return rep, err
		}
	}
	return rep, nil
}

// Renew runs renewScript.
func (r redisState) Renew(ctx context.Context, sp keys.Space, id, value string, ttl time.Duration) (bool, error) {
	key, err := sp.Mechanism(keys.FamLease, id)
	if err != nil {
		return false, err
	}
	n, err := renewScript.Exec(ctx, r.c, []string{key}, []string{value, seconds(ttl)}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "renew lease of "+id, err)
	}
	return n == 1, nil
}

// Release runs releaseScript.
func (r redisState) Release(ctx context.Context, sp keys.Space, id, value string) (bool, error) {
	key, err := sp.Mechanism(keys.FamLease, id)
	if err != nil {
		return false, err
	}
	n, err := releaseScript.Exec(ctx, r.c, []string{key}, []string{value}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "release lease of "+id, err)
	}
	return n == 1, nil
}

// nodeSetPos is the node-retry set's position in deleteKeys (KEYS[7] of deleteScript).
const nodeSetPos = 6

// deleteKeys lists the fixed keys of deleteScript, in its KEYS order.
func deleteKeys(sp keys.Space, id string) ([]string, error) {
	var out []string
	add := func(k string, err error) error {
		out = append(out, k)
		return err
	}
	if err := add(sp.Execution(id)); err != nil {
		return nil, err
	}
	for _, f := range []string{keys.FamFence, keys.FamFenceGen, keys.FamLease, keys.FamCancel} {
		if err := add(sp.Mechanism(f, id)); err != nil {
			return nil, err
		}
	}
	if err := add(sp.Tombstone(id)); err != nil {
		return nil, err
	}
	if err := add(sp.NodeRetrySet(id)); err != nil {
		return nil, err
	}
	for _, f := range keys.CounterFamilies() {
		if err := add(sp.Mechanism(f, id)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Delete is SMEMBERS of the node-retry set, deleteScript, and the ZREMs of the index and of
// the IndexBy keys of the deleted state's indexed values in one pipeline (3 round trips); the
// script is run again when a node counter was added between the SMEMBERS and it.
func (r redisState) Delete(ctx context.Context, sp keys.Space, id string, fenced bool, gen int64, tomb []byte, tombTTL time.Duration) (FencedReply, error) {
	fixed, err := deleteKeys(sp, id)
	if err != nil {
		return FencedReply{}, err
	}
	c := r.c
	fencedArg := "0"
	if fenced {
		fencedArg = "1"
	}
	ttl := strconv.FormatInt(int64(tombTTL/time.Second), 10)
	for range 5 {
		nodes, err := c.Do(ctx, c.B().Smembers().Key(fixed[nodeSetPos]).Build()).AsStrSlice()
		if err != nil && !rueidis.IsRedisNil(err) {
			return FencedReply{}, transient(ErrStateDelete, "execution "+id+": read node retry set", err)
		}
		ks := append([]string(nil), fixed...)
		for _, n := range nodes {
			if k, err := sp.NodeRetry(id, n); err == nil {
				ks = append(ks, k)
			}
		}
		args := []string{fencedArg, strconv.FormatInt(gen, 10), string(tomb), ttl, strconv.Itoa(len(nodes))}
		arr, err := deleteScript.Exec(ctx, c, ks, args).ToArray()
		if err != nil {
			return FencedReply{}, transient(ErrStateDelete, "execution "+id, err)
		}
		switch code, _ := arr[0].AsInt64(); code {
		case 0:
			return lostReply(arr), nil
		case 2:
			continue // a node counter was added between SMEMBERS and the script
		}
		var index map[string]string
		if len(arr) == 3 {
			if b, err := arr[2].AsBytes(); err == nil {
				index = indexOf(b)
			}
		}
		var zrem rueidis.Commands
		for _, k := range append([]string{sp.Index()}, indexByKeys(sp, index)...) {
			zrem = append(zrem, c.B().Zrem().Key(k).Member(id).Build())
		}
		for _, res := range c.DoMulti(ctx, zrem...) {
			if err := res.Error(); err != nil {
				return FencedReply{}, transient(ErrStateDelete, "execution "+id+": deleted, but not removed from the index", err)
			}
		}
		return FencedReply{}, nil
	}
	return FencedReply{}, fmt.Errorf("%w: execution %s: its node retry counters kept changing during the delete", ErrStateDelete, id)
}

// SetCancel is SET cancel 1 EX MechanismTTL, or DEL.
func (r redisState) SetCancel(ctx context.Context, sp keys.Space, id string, on bool) error {
	key, err := sp.Mechanism(keys.FamCancel, id)
	if err != nil {
		return err
	}
	c := r.c
	if on {
		if err := c.Do(ctx, c.B().Set().Key(key).Value("1").ExSeconds(int64(MechanismTTL/time.Second)).Build()).Error(); err != nil {
			return transient(ErrRedis, "set cancel flag of "+id, err)
		}
		return nil
	}
	if err := c.Do(ctx, c.B().Del().Key(key).Build()).Error(); err != nil {
		return transient(ErrRedis, "clear cancel flag of "+id, err)
	}
	return nil
}

// Has is EXISTS of the cancel flag or the tombstone.
func (r redisState) Has(ctx context.Context, sp keys.Space, id string, f Flag) (bool, error) {
	key, err := sp.Mechanism(keys.FamCancel, id)
	what := "read cancel flag of " + id
	if f == FlagTombstone {
		key, err = sp.Tombstone(id)
		what = "read tombstone of " + id
	}
	if err != nil {
		return false, err
	}
	n, err := r.c.Do(ctx, r.c.B().Exists().Key(key).Build()).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, what, err)
	}
	return n > 0, nil
}

// counterKey is a counter family's key, or a node's retry counter's.
func counterKey(sp keys.Space, family, id, node string) (string, error) {
	if node == "" {
		return sp.Mechanism(family, id)
	}
	return sp.NodeRetry(id, node)
}

var ttlSeconds = int64(MechanismTTL.Seconds())

// Incr is INCR and EXPIRE pipelined; a node's counter also adds the node to the node-retry
// set and refreshes its TTL in the same pipeline.
func (r redisState) Incr(ctx context.Context, sp keys.Space, family, id, node string) (int64, error) {
	key, err := counterKey(sp, family, id, node)
	if err != nil {
		return 0, err
	}
	c := r.c
	what := family + " counter of " + id
	cmds := rueidis.Commands{c.B().Incr().Key(key).Build(), c.B().Expire().Key(key).Seconds(ttlSeconds).Build()}
	if node != "" {
		set, err := sp.NodeRetrySet(id)
		if err != nil {
			return 0, err
		}
		what = "node retry counter of " + id + "/" + node
		cmds = append(cmds, c.B().Sadd().Key(set).Member(node).Build(), c.B().Expire().Key(set).Seconds(ttlSeconds).Build())
	}
	res := c.DoMulti(ctx, cmds...)
	for _, res := range res[1:] {
		if err := res.Error(); err != nil {
			return 0, transient(ErrRedis, "increment "+what, err)
		}
	}
	n, err := res[0].AsInt64()
	if err != nil {
		return 0, transient(ErrRedis, "increment "+what, err)
	}
	return n, nil
}

// Counter is GET.
func (r redisState) Counter(ctx context.Context, sp keys.Space, family, id, node string) (int64, error) {
	key, err := counterKey(sp, family, id, node)
	if err != nil {
		return 0, err
	}
	n, err := r.c.Do(ctx, r.c.B().Get().Key(key).Build()).AsInt64()
	switch {
	case rueidis.IsRedisNil(err):
		return 0, nil
	case err != nil:
		return 0, transient(ErrRedis, "read "+key, err)
	}
	return n, nil
}

// NodeRetries is SMEMBERS of the node-retry set, then the GETs pipelined.
func (r redisState) NodeRetries(ctx context.Context, sp keys.Space, id string) (map[string]int64, error) {
	set, err := sp.NodeRetrySet(id)
	if err != nil {
		return nil, err
	}
	c := r.c
	nodes, err := c.Do(ctx, c.B().Smembers().Key(set).Build()).AsStrSlice()
	if err != nil {
		return nil, transient(ErrRedis, "read node retry set of "+id, err)
	}
	out := map[string]int64{}
	var names []string
	var cmds rueidis.Commands
	for _, n := range nodes {
		if n == "" || n[0] == '#' {
			continue
		}
		if k, err := sp.NodeRetry(id, n); err == nil {
			names = append(names, n)
			cmds = append(cmds, c.B().Get().Key(k).Build())
		}
	}
	if len(cmds) == 0 {
		return out, nil
	}
	for i, res := range c.DoMulti(ctx, cmds...) {
		v, err := res.AsInt64()
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

// ResetCounter is DEL.
func (r redisState) ResetCounter(ctx context.Context, sp keys.Space, family, id, node string) error {
	key, err := counterKey(sp, family, id, node)
	if err != nil {
		return err
	}
	if err := r.c.Do(ctx, r.c.B().Del().Key(key).Build()).Error(); err != nil {
		return transient(ErrRedis, "reset "+key, err)
	}
	return nil
}

// Snapshot is GET of the state and EXISTS of the lease, pipelined (one slot: the keys share the
// execution's hash tag).
func (r redisState) Snapshot(ctx context.Context, sp keys.Space, id string) ([]byte, bool, error) {
	key, err := sp.Execution(id)
	if err != nil {
		return nil, false, err
	}
	lease, err := sp.Mechanism(keys.FamLease, id)
	if err != nil {
		return nil, false, err
	}
	c := r.c
	res := c.DoMulti(ctx, c.B().Get().Key(key).Build(), c.B().Exists().Key(lease).Build())
	b, err := stateBytes(id, res[0])
	if err != nil {
		return nil, false, err
	}
	n, err := res[1].AsInt64()
	if err != nil {
		return nil, false, transient(ErrStateLoad, "lease of "+id, err)
	}
	return b, n > 0, nil
}

// replaceUnleasedScript writes a new state over the bytes it was read as, when no lease exists.
//
// KEYS: 1 state, 2 fencegen, 3 lease. ARGV: 1 sha1 of the bytes read, 2 new state, 3 TTL (s, 0 =
// none). Returns 1 written | 0 the bytes changed | 2 a lease exists.
var replaceUnleasedScript = rueidis.NewLuaScript(`
local cur = redis.call('GET', KEYS[1])
if not cur or redis.sha1hex(cur) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then return 2 end
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
redis.call('INCR', KEYS[2])
return 1
`)

// replaceCorruptScript writes st over the corrupt bytes it was read as, and fences out every
// lease taken before: the fence generation moves on and the lease goes.
//
// KEYS: 1 state, 2 fencegen, 3 lease. ARGV: 1 sha1 of the corrupt bytes, 2 new state, 3 TTL (s,
// 0 = none). Returns 1 | 0 (the bytes changed).
var replaceCorruptScript = rueidis.NewLuaScript(`
local cur = redis.call('GET', KEYS[1])
if not cur or redis.sha1hex(cur) ~= ARGV[1] then return 0 end
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
redis.call('INCR', KEYS[2])
redis.call('DEL', KEYS[3])
return 1
`)

// Replace runs replaceUnleasedScript or replaceCorruptScript (KEYS state, fencegen, lease; ARGV
// sha1 of the bytes read, the new state, its TTL in seconds), then indexes the new state when
// it was written.
func (r redisState) Replace(ctx context.Context, sp keys.Space, read []byte, w StateWrite, how ReplaceHow) (Replaced, error) {
	key, err := sp.Execution(w.ID)
	if err != nil {
		return ReplacedChanged, err
	}
	fencegen, _ := sp.Mechanism(keys.FamFenceGen, w.ID)
	lease, _ := sp.Mechanism(keys.FamLease, w.ID)
	script := replaceUnleasedScript
	if how == ReplaceFencing {
		script = replaceCorruptScript
	}
	sum := sha1.Sum(read)
	n, err := script.Exec(ctx, r.c, []string{key, fencegen, lease},
		[]string{hex.EncodeToString(sum[:]), string(w.Payload), strconv.FormatInt(int64(w.TTL/time.Second), 10)}).AsInt64()
	if err != nil {
		return ReplacedChanged, transient(ErrStateSave, "replace the state of "+w.ID, err)
	}
	switch n {
	case 1:
		return ReplacedWritten, r.index(ctx, sp, w)
	case 2:
		return ReplacedLeased, nil
	}
	return ReplacedChanged, nil
}
