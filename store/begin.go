package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine/state"
	"plaita/store/keys"
)

// takeLeaseLua takes the execution lease (KEYS[1]) for ARGV[1] (holder|token) with TTL ARGV[2]
// seconds, or, when ARGV[3] names a holder (” = none), takes over a lease that holder left;
// another holder's lease ends the script with {0, its value}. It leaves took = 1 after a
// takeover. The start of beginScript and beginSaveScript: one way to take a lease.
const takeLeaseLua = `
local took = 0
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then
  local held = redis.call('GET', KEYS[1]) or ''
  if ARGV[3] == '' or string.sub(held, 1, #ARGV[3] + 1) ~= ARGV[3] .. '|' then
    return {0, held}
  end
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
  took = 1
end
`

// beginScript is a run's first round trip: it takes the execution lease (takeLeaseLua),
// bumps the fence generation, and reads in the same step what the run needs before its first
// node — the state, the tombstone, the cancel flag and the deterministic-failure count — so a
// run starts in one round trip. On a single server (no Cluster slots) a start's new state is
// also indexed in the script (KEYS[7], and KEYS[8…] the IndexBy keys of its indexed values,
// written only for a flow that indexes fields): a round trip fewer per start. In a cluster the
// index lives in its own slot, and the ZADDs are separate commands once the script has written
// the state.
// KEYS: 1 lease, 2 fencegen, 3 state, 4 tombstone, 5 cancel, 6 nofail[, 7 index[, 8… by]].
// ARGV: 1 holder|token, 2 lease TTL (s), 3 takeover holder (” = none), 4 new state (” =
// none), 5 its index score, 6 the execution id (the index member).
// Returns {0, current lease value} | {1, generation, took over, state|false, tombstoned,
// cancelled, nofail, created}.
var beginScript = rueidis.NewLuaScript(takeLeaseLua + `
local g = redis.call('INCR', KEYS[2])
local v = redis.call('MGET', KEYS[3], KEYS[4], KEYS[5], KEYS[6])
local created = 0
if not v[1] and not v[2] and ARGV[4] ~= '' then
  redis.call('SET', KEYS[3], ARGV[4])
  for i = 7, #KEYS do redis.call('ZADD', KEYS[i], ARGV[5], ARGV[6]) end
  created = 1
end
return {1, g, took, v[1], v[2] and 1 or 0, v[3] and 1 or 0, tonumber(v[4] or '0') or 0, created}
`)

// Begun is what Begin found when it took the lease.
type Begun struct {
	Lease      *Lease
	State      *state.Execution // nil: the execution has no state yet (a fresh start)
	Tombstoned bool             // the execution was deleted: do not recreate it
	Cancelled  bool             // its cancel flag is raised
	NoFail     int64            // its deterministic-failure count
}

// Begin takes the execution lease for holder (taking over a leftover lease of holder itself
// when takeover is set, as AcquireOwn) and reads the state, tombstone, cancel flag and
// deterministic-failure count in the same round trip; a start passes its new state (nil for a
// resume), written when the execution has none and is not deleted, then indexed. The lease's
// storage serves its first Load from what Begin read or wrote. A lease held by another holder
// is a *LeaseHeldError; a new state that cannot be stored is ErrStateSerialization or
// ErrStateTooLarge and nothing is sent. A stored state that does not decode is ErrStateCorrupt
// with the Begun (and its taken lease) returned: the caller releases it.
func (ts *TenantStore) Begin(ctx context.Context, executionID, holder string, takeover bool, fresh *state.Execution) (*Begun, error) {
	var fe encoded
	if fresh != nil {
		var err error
		if fe, err = ts.encode(fresh); err != nil {
			return nil, err
		}
	}
	l, err := ts.newLease(executionID, holder)
	if err != nil {
		return nil, err
	}
	from := ""
	if takeover {
		from = holder
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	start := time.Now()
	call := BeginCall{ID: executionID, Lease: LeaseRef{Value: l.value, TTL: l.ttl}, Takeover: from}
	if fresh != nil {
		w := fe.write()
		call.Fresh = &w
	}
	rep, err := ts.r.d.Begin(ctx, ts.sp, call)
	if err != nil && !rep.Created {
		return nil, err
	}
	if !rep.Taken {
		return nil, &LeaseHeldError{ExecutionID: executionID, Holder: leaseHolder(rep.Held)}
	}
	l.gen, l.tookOver, l.renewedAt = rep.Generation, rep.TookOver, start
	b := &Begun{Lease: l, Tombstoned: rep.Tombstoned, Cancelled: rep.Cancelled, NoFail: rep.NoFail}
	l.cancelled.Store(b.Cancelled)
	l.read.Store(true)
	if rep.Created {
		b.State = fresh
		l.preload(fresh)
		if err != nil { // written, not indexed
			return b, err
		}
		l.mu.Lock()
		l.indexed, l.indexScore = true, fe.score
		l.mu.Unlock()
		return b, nil
	}
	if rep.State != nil {
		if b.State, err = decodeFor(executionID, rep.State); err != nil {
			return b, err
		}
	}
	l.preload(b.State)
	return b, nil
}

// newLease prepares a lease value (keys, token, TTL) for holder; nothing is sent.
func (ts *TenantStore) newLease(executionID, holder string) (*Lease, error) {
	if holder == "" {
		return nil, fmt.Errorf("%w: empty lease holder", ErrInvalid)
	}
	l := &Lease{ts: ts, id: executionID, holder: holder, ttl: ts.r.leaseTTL()}
	if err := keys.ValidID(executionID); err != nil {
		return nil, err
	}
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, fmt.Errorf("lease token: %w", err)
	}
	l.value = holder + "|" + hex.EncodeToString(tok[:])
	return l, nil
}

// fencedSaveScript writes a state only while fencegen equals our generation (any later lease,
// and any delete, moved it on), reads the cancel flag in the same step (the executor's cancel
// checkpoint costs no round trip), and — for the run's last save — deletes the lease: a
// generation still ours proves the lease is ours or expired and untaken, so no comparison is
// needed.
// On a single server it also indexes the state when asked (KEYS[5], with KEYS[6…] the IndexBy
// keys of its indexed values: the execution's first save, or a changed start time), a round
// trip fewer; in a cluster the index is in another slot and the caller sends the ZADDs after
// the script.
// KEYS: 1 state, 2 fencegen, 3 cancel, 4 lease[, 5 index[, 6… by]].
// ARGV: 1 generation, 2 state JSON, 3 TTL (s, 0 = none), 4 "1" = release the lease, 5 index
// score, 6 execution id (the index member).
// Returns {1, cancelled} | {0, ”, fencegen}.
var fencedSaveScript = rueidis.NewLuaScript(`
local v = redis.call('MGET', KEYS[2], KEYS[3])
local g = v[1] or ''
if g ~= ARGV[1] then return {0, '', g} end
if tonumber(ARGV[3]) > 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
if ARGV[4] == '1' then redis.call('DEL', KEYS[4]) end
for i = 5, #KEYS do redis.call('ZADD', KEYS[i], ARGV[5], ARGV[6]) end
return {1, v[2] and 1 or 0}
`)

// fencedSave writes an encoded state under the lease's generation (StateDriver.FencedSave);
// release deletes the lease with it, index indexes it.
func (s *FencedStorage) fencedSave(ctx context.Context, e encoded, release, index bool) error {
	l := s.l
	rep, err := l.ts.r.d.FencedSave(ctx, l.ts.sp, FencedSave{W: e.write(), Gen: l.gen, Release: release, Index: index})
	if err != nil {
		return err
	}
	if rep.Lost {
		return lostError(e.id, l.gen, rep.FenceGen)
	}
	l.cancelled.Store(rep.Cancelled)
	l.read.Store(true)
	if rep.Indexed {
		l.mu.Lock()
		l.indexed, l.indexScore = true, e.score
		l.mu.Unlock()
	}
	if release {
		l.markReleased()
	}
	return nil
}
