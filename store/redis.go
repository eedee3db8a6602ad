package store

import (
	"context"
	"encoding/json"
	"fmt"
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

// Redis is the execution storage of one deployment (one key root): its rules over the drivers —
// Redis's (NewRedis), or local mode's on the console's database (NewStore). It is safe for
// concurrent use; TenantStore scopes it to one tenant.
type Redis struct {
	c    rueidis.Client // nil on another driver: the parts not on drivers yet need Redis
	d    StateDriver
	w    WakeupDriver
	t    TenantDriver
	l    ListDriver
	s    Settings
	root string
}

// NewRedis returns the storage over client c with settings s under key root root ("" is
// keys.DefaultRoot).
func NewRedis(c rueidis.Client, s Settings, root string) *Redis {
	r := NewStore(RedisDrivers(c), s, root)
	r.c = c
	return r
}

// RedisDrivers are the storage's drivers over client c.
func RedisDrivers(c rueidis.Client) Drivers {
	return Drivers{State: redisState{c: c}, Wakeups: redisWakeups{c: c}, Tenants: redisTenants{c: c}, Lists: redisLists{c: c}}
}

// Drivers are what the storage stores through.
type Drivers struct {
	State   StateDriver
	Wakeups WakeupDriver
	Tenants TenantDriver
	Lists   ListDriver
}

// NewStore returns the storage over drivers drv (local mode's: store/sqlite) with settings s
// under key root root. Only what runs on the drivers works on it.
func NewStore(drv Drivers, s Settings, root string) *Redis {
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
	return &Redis{d: drv.State, w: drv.Wakeups, t: drv.Tenants, l: drv.Lists, s: s, root: root}
}

// redis is the Redis client for what only Redis keeps: ErrNeedsRedis on another driver.
func (r *Redis) redis(what string) (rueidis.Client, error) {
	if r.c == nil {
		return nil, fmt.Errorf("%w: %s", ErrNeedsRedis, what)
	}
	return r.c, nil
}

// Root is the key root.
func (r *Redis) Root() string { return r.root }

// Ping checks that Redis answers (the console's /health): ErrRedis when it does not.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return r.d.Ping(ctx)
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
	payload []byte
	ttl     time.Duration // 0: no TTL (the SET also clears an earlier one)
	score   float64       // index score: start time in ms
	index   map[string]string
}

// write is the encoded state as the driver takes it.
func (e encoded) write() StateWrite {
	return StateWrite{ID: e.id, Payload: e.payload, TTL: e.ttl, Score: e.score, Index: e.index}
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
	if err := keys.ValidID(st.ExecutionID); err != nil {
		return encoded{}, err
	}
	e := encoded{id: st.ExecutionID, payload: b, score: indexScore(st), index: st.Index}
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

// plainSave writes the state and indexes it (StateDriver.Save).
func (ts *TenantStore) plainSave(ctx context.Context, e encoded) error {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.r.d.Save(ctx, ts.sp, e.write())
}

// Load reads a state. Missing: ErrNotFound. Storage failure: ErrStateLoad (transient). Bytes
// that are not a state of this id (bad JSON, wrong type, another id): ErrStateCorrupt. A state
// whose index member is missing (a restored key, a lost ZADD) is put back in the index.
func (ts *TenantStore) Load(ctx context.Context, id string) (*state.Execution, error) {
	if err := keys.ValidID(id); err != nil {
		return nil, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	b, indexed, err := ts.r.d.Load(ctx, ts.sp, id)
	if err != nil {
		return nil, err
	}
	st, err := decodeFor(id, b)
	if err != nil {
		return nil, err
	}
	if !indexed {
		// Best effort: the state is what the caller asked for; the index heals later if this
		// fails (the next load, or Backfill).
		_ = ts.r.d.Reindex(ctx, ts.sp, id, indexScore(st), st.Index)
	}
	return st, nil
}

// Peek reads an execution's state as Load does, in one command: without Load's repair of the
// execution index (the filter reads the state of every wait an event may wake, and the index
// is not its to heal).
func (ts *TenantStore) Peek(ctx context.Context, id string) (*state.Execution, error) {
	if err := keys.ValidID(id); err != nil {
		return nil, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	b, err := ts.r.d.Get(ctx, ts.sp, id)
	if err != nil {
		return nil, err
	}
	return decodeFor(id, b)
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

type tombstone struct {
	ExecutionID string    `json:"execution_id"`
	Tenant      string    `json:"tenant_id"`
	DeletedAt   time.Time `json:"deleted_at"`
	Generation  int64     `json:"generation,omitempty"` // the deleting lease's, when fenced
}

func (ts *TenantStore) deleteExecution(ctx context.Context, id string, fenced bool, gen int64) error {
	if err := keys.ValidID(id); err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	tomb, _ := json.Marshal(tombstone{ExecutionID: id, Tenant: ts.sp.Tenant(), DeletedAt: time.Now().UTC(), Generation: gen})
	rep, err := ts.r.d.Delete(ctx, ts.sp, id, fenced, gen, tomb, ts.r.tombstoneTTL())
	if err != nil {
		return err
	}
	if rep.Lost {
		return lostError(id, gen, rep.FenceGen)
	}
	return nil
}

// indexOf reads the indexed values of a state's bytes (nil when they are not a state).
func indexOf(b []byte) map[string]string {
	var st struct {
		Index map[string]string `json:"index"`
	}
	if json.Unmarshal(b, &st) != nil {
		return nil
	}
	return st.Index
}

// lostError explains a refused fenced write (fencegen: the generation found, "" none).
func lostError(id string, gen int64, fencegen string) error {
	return fmt.Errorf("%w: execution %s: our generation %d, fencegen %q (another worker took over, or the execution was deleted); nothing written",
		ErrLeaseLost, id, gen, fencegen)
}

// SetCancel raises the cancel flag (TTL MechanismTTL); the executor checks it between steps.
func (ts *TenantStore) SetCancel(ctx context.Context, id string) error {
	return ts.setCancel(ctx, id, true)
}

// ClearCancel lowers the cancel flag.
func (ts *TenantStore) ClearCancel(ctx context.Context, id string) error {
	return ts.setCancel(ctx, id, false)
}

func (ts *TenantStore) setCancel(ctx context.Context, id string, on bool) error {
	if err := keys.ValidID(id); err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.r.d.SetCancel(ctx, ts.sp, id, on)
}

// Cancelled reports the cancel flag (engine.CancelChecker).
func (ts *TenantStore) Cancelled(ctx context.Context, id string) (bool, error) {
	return ts.has(ctx, id, FlagCancel)
}

// Tombstoned reports whether the execution was deleted within the tombstone TTL.
func (ts *TenantStore) Tombstoned(ctx context.Context, id string) (bool, error) {
	return ts.has(ctx, id, FlagTombstone)
}

func (ts *TenantStore) has(ctx context.Context, id string, f Flag) (bool, error) {
	if err := keys.ValidID(id); err != nil {
		return false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.r.d.Has(ctx, ts.sp, id, f)
}
