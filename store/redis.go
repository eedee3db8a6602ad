package store

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine/state"
	"plaita/internal/callctx"
	"plaita/store/keys"
)

// Redis execution storage.
//
// Every key comes from package keys. All keys of one execution carry the execution id as a
// hash tag ({id}), so every multi-key Lua script below touches one Cluster slot and declares
// every key it touches in KEYS. The execution index is one ZSET per tenant in its own slot: in
// a cluster it is never touched inside a per-execution script, always by a separate command
// (on a single server Begin indexes a new start inside its script, see beginScript).
//
// Round trips (one "RTT" = one request/response exchange; pipelined commands count once):
//   - TenantStore.Save (unfenced, also the lease's save with PLAITA_DISABLE_FENCING=1):
//     1 — SET and ZADD pipelined (2 against a cluster, where the ZADD waits for the SET);
//   - FencedStorage.Save: 1 (the CAS script; on a single server it indexes the execution
//     itself when needed); against a cluster 2 on the lease's first save or when the start
//     time changes (the script, then ZADD);
//   - Begin: 1 (the begin script; a start's new state is indexed in it on a single server,
//     by a ZADD after it against a cluster);
//   - Load: 1 — GET and ZSCORE pipelined; +1 (ZADD NX) only when the index member is missing;
//   - Delete: 3 — SMEMBERS of the node-retry set, the delete script, ZREM (of the index, and of
//     the IndexBy keys of a state that has indexed values, in one pipeline).
//
// A script sent for the first time to a node costs one more exchange (EVALSHA → NOSCRIPT →
// EVAL), once per node and process.

// Fixed TTLs of the key space (store/keys).
const (
	// MechanismTTL is the TTL of the fence, the counters, the node-retry set and the cancel flag.
	MechanismTTL = 7 * 24 * time.Hour
	// BackfillCursorTTL is the TTL of an interrupted backfill's SCAN cursor.
	BackfillCursorTTL = 24 * time.Hour
	// DefaultOpTimeout bounds one storage call whose context has no deadline. rueidis retries
	// read-only commands until the context ends, so without a bound a Load against a dead
	// Redis would never return.
	DefaultOpTimeout = 30 * time.Second
)

// Settings are the storage's knobs, read once at start (roles build them from the
// configuration). DefaultSettings gives the documented defaults.
type Settings struct {
	// LeaseTTL is PLAITA_LEASE_TTL_SECONDS (≤ 0: 120 s).
	LeaseTTL time.Duration
	// StateTTL is the TTL of a terminal state (PLAITA_EXECUTION_STATE_TTL_DAYS); 0 = none.
	StateTTL time.Duration
	// TombstoneTTL is PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS (≤ 0: 30 days).
	TombstoneTTL time.Duration
	// MaxStateBytes is PLAITA_EXECUTION_STATE_MAX_BYTES (< 1: DefaultMaxStateBytes).
	MaxStateBytes int
	// DisableFencing is PLAITA_DISABLE_FENCING: leased saves and deletes are plain.
	DisableFencing bool
}

// DefaultSettings are the documented defaults.
func DefaultSettings() Settings {
	return Settings{LeaseTTL: 120 * time.Second, StateTTL: 30 * 24 * time.Hour, TombstoneTTL: 2592000 * time.Second,
		MaxStateBytes: DefaultMaxStateBytes}
}

// Redis is the Redis execution storage of one deployment (one client, one key root). It is
// safe for concurrent use; TenantStore scopes it to one tenant.
type Redis struct {
	c    rueidis.Client
	s    Settings
	root string
}

// NewRedis returns the storage over client c with settings s under key root root ("" is
// keys.DefaultRoot).
func NewRedis(c rueidis.Client, s Settings, root string) *Redis {
	if root == "" {
		root = keys.DefaultRoot
	}
	d := DefaultSettings()
	if s.LeaseTTL <= 0 {
		s.LeaseTTL = d.LeaseTTL
	}
	if s.TombstoneTTL <= 0 {
		s.TombstoneTTL = d.TombstoneTTL
	}
	if s.MaxStateBytes < 1 {
		s.MaxStateBytes = d.MaxStateBytes
	}
	s.StateTTL = max(s.StateTTL, 0)
	return &Redis{c: c, s: s, root: root}
}

// Root is the key root.
func (r *Redis) Root() string { return r.root }

// Ping checks that Redis answers (the console's /health): ErrRedis when it does not.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	if err := r.c.Do(ctx, r.c.B().Ping().Build()).Error(); err != nil {
		return transient(ErrRedis, "ping", err)
	}
	return nil
}

// Tenant scopes the storage to one tenant ("" or "default" is the default tenant). An invalid
// slug is an error matching keys.ErrBadTenant.
func (r *Redis) Tenant(tenant string) (*TenantStore, error) {
	sp, err := keys.For(r.root, tenant)
	if err != nil {
		return nil, err
	}
	return &TenantStore{r: r, sp: sp}, nil
}

func (r *Redis) leaseTTL() time.Duration     { return r.s.LeaseTTL }
func (r *Redis) stateTTL() time.Duration     { return r.s.StateTTL }
func (r *Redis) tombstoneTTL() time.Duration { return r.s.TombstoneTTL }
func (r *Redis) maxState() int               { return r.s.MaxStateBytes }
func (r *Redis) fencing() bool               { return !r.s.DisableFencing }

// opCtx is the store's bound of one call: DefaultOpTimeout when its context has no deadline
// (callctx.Bounded).
func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return callctx.Bounded(ctx, DefaultOpTimeout)
}

// TenantStore is the execution storage of one tenant. Its Save and Delete are unfenced: they
// are for readers, tools and operators. Workers write through a Lease's Storage.
type TenantStore struct {
	r  *Redis
	sp keys.Space
}

var _ Storage = (*TenantStore)(nil)

// Space is the tenant's key space.
func (ts *TenantStore) Space() keys.Space { return ts.sp }

// Tenant is the tenant's slug ("default" for the default tenant).
func (ts *TenantStore) Tenant() string { return ts.sp.Tenant() }

// encoded is a state ready to be written.
type encoded struct {
	id      string
	key     string
	payload []byte
	ttl     time.Duration // 0: no TTL (the SET also clears an earlier one)
	score   float64       // index score: start time in ms
	by      []string      // the IndexBy keys of its indexed values (none for most flows)
}

// encode serializes st and works out where and how it is written. Nothing here talks to
// Redis, so an unencodable state fails before anything is sent.
func (ts *TenantStore) encode(st *state.Execution) (encoded, error) {
	if st == nil {
		return encoded{}, fmt.Errorf("%w: nil execution state", ErrInvalid)
	}
	b, err := EncodeBounded(st, ts.r.maxState())
	if err != nil {
		return encoded{}, err
	}
	key, err := ts.sp.Execution(st.ExecutionID)
	if err != nil {
		return encoded{}, err
	}
	e := encoded{id: st.ExecutionID, key: key, payload: b, score: indexScore(st), by: ts.indexByKeys(st.Index)}
	if st.Status.Terminal() {
		e.ttl = ts.r.stateTTL()
	}
	return e, nil
}

// indexScore is the index score of a state: its start time in milliseconds (0 when unset).
func indexScore(st *state.Execution) float64 {
	if st.StartTime.IsZero() {
		return 0
	}
	return float64(st.StartTime.UnixMilli())
}

func (ts *TenantStore) setCmd(e encoded) rueidis.Completed {
	c := ts.r.c
	v := c.B().Set().Key(e.key).Value(rueidis.BinaryString(e.payload))
	if e.ttl > 0 {
		return v.ExSeconds(int64(e.ttl / time.Second)).Build()
	}
	return v.Build() // a plain SET drops any TTL: running/suspended states persist
}

// indexByKeys are the IndexBy keys of a state's indexed values (state.Execution.Index), in
// field order. A field that cannot name a key (a state not written by the engine) is left out:
// it is not indexed, and nothing else changes.
func (ts *TenantStore) indexByKeys(index map[string]string) []string {
	if len(index) == 0 {
		return nil
	}
	out := make([]string, 0, len(index))
	for _, field := range slices.Sorted(maps.Keys(index)) {
		if k, err := ts.sp.IndexBy(field, index[field]); err == nil {
			out = append(out, k)
		}
	}
	return out
}

// indexCmds index an encoded state: its member in the tenant's index and in the IndexBy key of
// each of its indexed values, each a ZADD of its own (each key has its own Cluster slot).
func (ts *TenantStore) indexCmds(e encoded) rueidis.Commands {
	c := ts.r.c
	cmds := make(rueidis.Commands, 0, 1+len(e.by))
	for _, k := range append([]string{ts.sp.Index()}, e.by...) {
		cmds = append(cmds, c.B().Zadd().Key(k).ScoreMember().ScoreMember(e.score, e.id).Build())
	}
	return cmds
}

// indexNXCmds put back a stored state's members where they are missing (ZADD NX: a member
// there keeps its score): Load's repair and the backfill.
func (ts *TenantStore) indexNXCmds(id string, score float64, index map[string]string) rueidis.Commands {
	c := ts.r.c
	var cmds rueidis.Commands
	for _, k := range append([]string{ts.sp.Index()}, ts.indexByKeys(index)...) {
		cmds = append(cmds, c.B().Zadd().Key(k).Nx().ScoreMember().ScoreMember(score, id).Build())
	}
	return cmds
}

// index sends indexCmds (after a script that wrote the state, in a Cluster).
func (ts *TenantStore) index(ctx context.Context, e encoded) error {
	for _, r := range ts.r.c.DoMulti(ctx, ts.indexCmds(e)...) {
		if err := r.Error(); err != nil {
			return transient(ErrStateSave, "execution "+e.id+": state written, index not updated", err)
		}
	}
	return nil
}

// indexArgs extend a script's KEYS and ARGV with the index and the IndexBy keys, its score and
// its member (a script on a single server indexes the state itself).
func (ts *TenantStore) indexArgs(ks, args []string, e encoded) ([]string, []string) {
	ks = append(append(ks, ts.sp.Index()), e.by...)
	return ks, append(args, strconv.FormatFloat(e.score, 'f', -1, 64), e.id)
}

// Save writes the state without any fencing (readers, tools, operators; and a lease's save
// when PLAITA_DISABLE_FENCING=1). A state that cannot be encoded fails with
// ErrStateSerialization and nothing is sent; a Redis failure is ErrStateSave (transient).
func (ts *TenantStore) Save(ctx context.Context, st *state.Execution) error {
	e, err := ts.encode(st)
	if err != nil {
		return err
	}
	return ts.plainSave(ctx, e)
}

// plainSave writes the state, then indexes it. On one server SET and ZADD go in one pipeline:
// one connection, executed in order, so the ZADD runs after the SET (and an error reply that
// fails the SET — OOM, READONLY — fails the ZADD too). In a cluster the two keys live on
// different nodes and a pipeline would run them in parallel, so the ZADD is sent only once the
// SET is confirmed (2 round trips). A lost ZADD leaves the state saved but unindexed: the error
// says so, and Load puts the member back.
func (ts *TenantStore) plainSave(ctx context.Context, e encoded) error {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	if c.Mode() == rueidis.ClientModeCluster {
		if err := c.Do(ctx, ts.setCmd(e)).Error(); err != nil {
			return transient(ErrStateSave, "execution "+e.id, err)
		}
		return ts.index(ctx, e)
	}
	res := c.DoMulti(ctx, append(rueidis.Commands{ts.setCmd(e)}, ts.indexCmds(e)...)...)
	if err := res[0].Error(); err != nil {
		return transient(ErrStateSave, "execution "+e.id, err)
	}
	for _, r := range res[1:] {
		if err := r.Error(); err != nil {
			return transient(ErrStateSave, "execution "+e.id+": state written, index not updated", err)
		}
	}
	return nil
}

// Load reads a state. Missing: ErrNotFound. Redis failure: ErrStateLoad (transient). Bytes
// that are not a state of this id (bad JSON, wrong type, another id): ErrStateCorrupt. A state
// whose index member is missing (a restored key, a lost ZADD) is put back in the index.
func (ts *TenantStore) Load(ctx context.Context, id string) (*state.Execution, error) {
	key, err := ts.sp.Execution(id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	res := c.DoMulti(ctx, c.B().Get().Key(key).Build(), c.B().Zscore().Key(ts.sp.Index()).Member(id).Build())
	b, err := stateBytes(id, res[0])
	if err != nil {
		return nil, err
	}
	st, err := decodeFor(id, b)
	if err != nil {
		return nil, err
	}
	if _, zerr := res[1].AsFloat64(); rueidis.IsRedisNil(zerr) {
		// Best effort: the state is what the caller asked for; the index heals later if this
		// fails (the next load, or Backfill).
		c.DoMulti(ctx, ts.indexNXCmds(id, indexScore(st), st.Index)...)
	}
	return st, nil
}

// Peek reads an execution's state as Load does, in one command: without Load's repair of the
// execution index (the filter reads the state of every wait an event may wake, and the index
// is not its to heal).
func (ts *TenantStore) Peek(ctx context.Context, id string) (*state.Execution, error) {
	key, err := ts.sp.Execution(id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	b, err := stateBytes(id, ts.r.c.Do(ctx, ts.r.c.B().Get().Key(key).Build()))
	if err != nil {
		return nil, err
	}
	return decodeFor(id, b)
}

// stateBytes is the reply of a GET of id's state key: the bytes, ErrNotFound when there is
// none, a *CorruptStateError when the key holds no string, ErrStateLoad when Redis failed.
func stateBytes(id string, res rueidis.RedisResult) ([]byte, error) {
	b, err := res.AsBytes()
	switch {
	case rueidis.IsRedisNil(err):
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	case isWrongType(err):
		return nil, &CorruptStateError{ID: id, Err: fmt.Errorf("%w: %w", ErrStateCorrupt, err)}
	case err != nil:
		return nil, transient(ErrStateLoad, "execution "+id, err)
	}
	return b, nil
}

// decodeFor decodes the bytes stored under id's state key.
func decodeFor(id string, b []byte) (*state.Execution, error) {
	st, err := Decode(b)
	if err != nil {
		return nil, &CorruptStateError{ID: id, Raw: b, Err: err}
	}
	if st.ExecutionID != id {
		return nil, &CorruptStateError{ID: id, Raw: b, Err: fmt.Errorf("%w: the state under %s says execution_id %q", ErrStateCorrupt, id, st.ExecutionID)}
	}
	return st, nil
}

func isWrongType(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && !re.IsNil() && strings.HasPrefix(re.Error(), "WRONGTYPE")
}

// Delete removes an execution without fencing (operators): the state, lease, cancel
// flag and every counter (with the per-node retry keys), removes it from the index and writes
// the tombstone (TTL PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS). The fence generation counter is
// kept and bumped, so a worker still holding an older generation is refused and a re-created
// execution continues from a higher generation. Deleting an id with no state still writes the tombstone.
func (ts *TenantStore) Delete(ctx context.Context, id string) error {
	return ts.deleteExecution(ctx, id, false, 0)
}

// deleteScript deletes one execution's keys in its slot, optionally fenced, and bumps its fence
// generation (kept, never deleted): every lease taken before the delete is fenced out, and a
// re-created execution continues from a higher generation.
//
// The deleted state is returned when it may carry indexed values (state.Execution.Index: a
// top-level "index" object; a nested one only costs the caller a decode), so the caller can
// take the execution out of their IndexBy keys: the values it was indexed under are exactly
// those of the state deleted. pcall: a state key of another type is deleted all the same.
//
// KEYS: 1 state, 2 fence (legacy, deleted), 3 fencegen (bumped), 4 lease, 5 cancel, 6 tombstone
// (written), 7 node-retry set, 8… the counter families, then one key per node in the node-retry
// set. ARGV: 1 "1" = fenced, 2 generation, 3 tombstone value, 4 tombstone TTL (s), 5 the set's
// size when its members were read.
// Returns {1, n deleted[, state]} | {0, ”, fencegen} (fence lost) | {2} (the set changed:
// re-read).
var deleteScript = rueidis.NewLuaScript(`
if ARGV[1] == '1' then
  local g = redis.call('GET', KEYS[3]) or ''
  if g ~= ARGV[2] then return {0, '', g} end
end
if redis.call('SCARD', KEYS[7]) ~= tonumber(ARGV[5]) then return {2} end
local st = redis.pcall('GET', KEYS[1])
local n = 0
for i, k in ipairs(KEYS) do
  if i ~= 3 and i ~= 6 then n = n + redis.call('DEL', k) end
end
redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[6], ARGV[3], 'EX', ARGV[4])
if type(st) == 'string' and string.find(st, '"index":{', 1, true) then return {1, n, st} end
return {1, n}
`)

// nodeSetKey is the SET of node ids that have a per-node retry counter.
func (ts *TenantStore) nodeSetKey(id string) (string, error) {
	return ts.sp.NodeRetrySet(id)
}

// nodeSetPos is the node-retry set's position in deleteKeys (KEYS[7] of deleteScript).
const nodeSetPos = 6

// deleteKeys lists the fixed keys of deleteScript, in its KEYS order.
func (ts *TenantStore) deleteKeys(id string) ([]string, error) {
	var out []string
	add := func(k string, err error) error {
		out = append(out, k)
		return err
	}
	if err := add(ts.sp.Execution(id)); err != nil {
		return nil, err
	}
	for _, f := range []string{keys.FamFence, keys.FamFenceGen, keys.FamLease, keys.FamCancel} {
		if err := add(ts.sp.Mechanism(f, id)); err != nil {
			return nil, err
		}
	}
	if err := add(ts.sp.Tombstone(id)); err != nil {
		return nil, err
	}
	if err := add(ts.nodeSetKey(id)); err != nil {
		return nil, err
	}
	for _, f := range keys.CounterFamilies() {
		if err := add(ts.sp.Mechanism(f, id)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type tombstone struct {
	ExecutionID string    `json:"execution_id"`
	Tenant      string    `json:"tenant_id"`
	DeletedAt   time.Time `json:"deleted_at"`
	Generation  int64     `json:"generation,omitempty"` // the deleting lease's, when fenced
}

func (ts *TenantStore) deleteExecution(ctx context.Context, id string, fenced bool, gen int64) error {
	fixed, err := ts.deleteKeys(id)
	if err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	tomb, _ := json.Marshal(tombstone{ExecutionID: id, Tenant: ts.sp.Tenant(), DeletedAt: time.Now().UTC(), Generation: gen})
	fencedArg := "0"
	if fenced {
		fencedArg = "1"
	}
	ttl := strconv.FormatInt(int64(ts.r.tombstoneTTL()/time.Second), 10)
	for range 5 {
		nodes, err := c.Do(ctx, c.B().Smembers().Key(fixed[nodeSetPos]).Build()).AsStrSlice()
		if err != nil && !rueidis.IsRedisNil(err) {
			return transient(ErrStateDelete, "execution "+id+": read node retry set", err)
		}
		ks := append([]string(nil), fixed...)
		for _, n := range nodes {
			if k, err := ts.sp.NodeRetry(id, n); err == nil {
				ks = append(ks, k)
			}
		}
		args := []string{fencedArg, strconv.FormatInt(gen, 10), string(tomb), ttl, strconv.Itoa(len(nodes))}
		arr, err := deleteScript.Exec(ctx, c, ks, args).ToArray()
		if err != nil {
			return transient(ErrStateDelete, "execution "+id, err)
		}
		switch code, _ := arr[0].AsInt64(); code {
		case 0:
			return lostError(id, gen, arr)
		case 2:
			continue // a node counter was added between SMEMBERS and the script
		}
		var index map[string]string
		if len(arr) == 3 {
			index = indexOf(arr[2])
		}
		var zrem rueidis.Commands
		for _, k := range append([]string{ts.sp.Index()}, ts.indexByKeys(index)...) {
			zrem = append(zrem, c.B().Zrem().Key(k).Member(id).Build())
		}
		for _, r := range c.DoMulti(ctx, zrem...) {
			if err := r.Error(); err != nil {
				return transient(ErrStateDelete, "execution "+id+": deleted, but not removed from the index", err)
			}
		}
		return nil
	}
	return fmt.Errorf("%w: execution %s: its node retry counters kept changing during the delete", ErrStateDelete, id)
}

// indexOf reads the indexed values of a state's bytes (nil when they are not a state).
func indexOf(m rueidis.RedisMessage) map[string]string {
	b, err := m.AsBytes()
	if err != nil {
		return nil
	}
	var st struct {
		Index map[string]string `json:"index"`
	}
	if json.Unmarshal(b, &st) != nil {
		return nil
	}
	return st.Index
}

// lostError explains a refused fenced write from the script's {0, ”, fencegen} reply.
func lostError(id string, gen int64, arr []rueidis.RedisMessage) error {
	var g string
	if len(arr) == 3 {
		g, _ = arr[2].ToString()
	}
	return fmt.Errorf("%w: execution %s: our generation %d, fencegen %q (another worker took over, or the execution was deleted); nothing written",
		ErrLeaseLost, id, gen, g)
}

// SetCancel raises the cancel flag (TTL MechanismTTL); the executor checks it between steps.
func (ts *TenantStore) SetCancel(ctx context.Context, id string) error {
	key, err := ts.sp.Mechanism(keys.FamCancel, id)
	if err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	if err := c.Do(ctx, c.B().Set().Key(key).Value("1").ExSeconds(int64(MechanismTTL/time.Second)).Build()).Error(); err != nil {
		return transient(ErrRedis, "set cancel flag of "+id, err)
	}
	return nil
}

// ClearCancel lowers the cancel flag.
func (ts *TenantStore) ClearCancel(ctx context.Context, id string) error {
	key, err := ts.sp.Mechanism(keys.FamCancel, id)
	if err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	if err := c.Do(ctx, c.B().Del().Key(key).Build()).Error(); err != nil {
		return transient(ErrRedis, "clear cancel flag of "+id, err)
	}
	return nil
}

// Cancelled reports the cancel flag (engine.CancelChecker).
func (ts *TenantStore) Cancelled(ctx context.Context, id string) (bool, error) {
	key, err := ts.sp.Mechanism(keys.FamCancel, id)
	if err != nil {
		return false, err
	}
	return ts.exists(ctx, key, "read cancel flag of "+id)
}

// Tombstoned reports whether the execution was deleted within the tombstone TTL.
func (ts *TenantStore) Tombstoned(ctx context.Context, id string) (bool, error) {
	key, err := ts.sp.Tombstone(id)
	if err != nil {
		return false, err
	}
	return ts.exists(ctx, key, "read tombstone of "+id)
}

func (ts *TenantStore) exists(ctx context.Context, key, what string) (bool, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	n, err := c.Do(ctx, c.B().Exists().Key(key).Build()).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, what, err)
	}
	return n > 0, nil
}
