package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine/state"
	"plaita/store/keys"
)

// Reaping a zombie execution — a running state no worker holds and nothing will resume — is a
// write over a state the reaper read, against a worker that may still be alive: it must lose to
// any write between its read and its own. So the reaper reads the exact bytes (Snapshot), and
// ReplaceUnleased writes only when the key still holds those bytes and no lease exists, in one
// script; the fence generation moves on, so a worker that takes a lease later from an older
// read is fenced out.

// ErrStateChanged: the state key no longer holds the bytes the caller read (a worker wrote a
// step, or another operator acted); nothing was written. Permanent for that read.
var ErrStateChanged = ErrInvalid.Kind("", "the stored state changed since it was read")

// Snapshot is a state with the exact bytes it was read from.
type Snapshot struct {
	State *state.Execution
	Raw   []byte
	// Leased reports whether the execution's lease key existed when the state was read.
	Leased bool
}

// Snapshot reads a state's bytes and whether its lease exists, in one round trip (one slot: the
// keys share the execution's hash tag). Missing: ErrNotFound; undecodable: *CorruptStateError.
func (ts *TenantStore) Snapshot(ctx context.Context, id string) (Snapshot, error) {
	key, err := ts.sp.Execution(id)
	if err != nil {
		return Snapshot{}, err
	}
	lease, err := ts.sp.Mechanism(keys.FamLease, id)
	if err != nil {
		return Snapshot{}, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	res := c.DoMulti(ctx, c.B().Get().Key(key).Build(), c.B().Exists().Key(lease).Build())
	b, err := stateBytes(id, res[0])
	if err != nil {
		return Snapshot{}, err
	}
	n, err := res[1].AsInt64()
	if err != nil {
		return Snapshot{}, transient(ErrStateLoad, "lease of "+id, err)
	}
	st, err := decodeFor(id, b)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{State: st, Raw: b, Leased: n > 0}, nil
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

// ReplaceUnleased writes st in place of the bytes raw that Snapshot read, only while the key
// holds them and no lease exists: ErrStateChanged, or ErrLeaseHeld (a live worker runs it),
// otherwise; nothing written then.
func (ts *TenantStore) ReplaceUnleased(ctx context.Context, raw []byte, st *state.Execution) error {
	n, err := ts.replaceRead(ctx, replaceUnleasedScript, raw, st)
	switch {
	case err != nil:
		return err
	case n == 0:
		return fmt.Errorf("%w: %s", ErrStateChanged, st.ExecutionID)
	case n == 2:
		return fmt.Errorf("%w: %s", ErrLeaseHeld, st.ExecutionID)
	}
	return nil
}

// replaceRead runs a replacement script — KEYS state, fencegen, lease; ARGV sha1 of the bytes
// read, the new state, its TTL in seconds — and indexes the new state when the script wrote it
// (returned 1). The script's answer is returned for the caller to name.
func (ts *TenantStore) replaceRead(ctx context.Context, script *rueidis.Lua, raw []byte, st *state.Execution) (int64, error) {
	e, err := ts.encode(st)
	if err != nil {
		return 0, err
	}
	fencegen, err := ts.sp.Mechanism(keys.FamFenceGen, st.ExecutionID)
	if err != nil {
		return 0, err
	}
	lease, err := ts.sp.Mechanism(keys.FamLease, st.ExecutionID)
	if err != nil {
		return 0, err
	}
	sum := sha1.Sum(raw)
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	n, err := script.Exec(ctx, c, []string{e.key, fencegen, lease},
		[]string{hex.EncodeToString(sum[:]), string(e.payload), strconv.FormatInt(int64(e.ttl/time.Second), 10)}).AsInt64()
	if err != nil {
		return 0, transient(ErrStateSave, "replace the state of "+st.ExecutionID, err)
	}
	if n != 1 {
		return n, nil
	}
	return n, ts.index(ctx, e)
}
