package store

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// ErrNotFresh: a deferred lease's first save found that the execution is not a fresh start
// after all — it has a state, a tombstone, a raised cancel flag or counted crashes. Nothing was
// written and the lease is free again; the caller runs the delivery the ordinary way (Begin).
// Transient (it matches ErrConflict): the ordinary path succeeds.
var ErrNotFresh = ErrConflict.Kind("", "the execution is not a fresh start")

// Deferred is the lease of a fresh start that is taken by the run's first save instead of a
// Begin round trip before it. A first delivery of a start whose first step is a control node
// (engine.Flow.StartsInstantly) runs that step from its new state, which only exists in memory,
// and its first save then takes the lease, bumps the fence generation and writes the state in
// one script — after checking in the same step that nothing is there: no state, no tombstone,
// no cancel flag, no crash count. When something is, the save writes nothing, gives the lease
// back and fails with ErrNotFresh (a lease someone else holds is a *LeaseHeldError); the step
// ran for nothing, and had no effect but its log lines. Until that save the lease is not held:
// Renew reports it lost and Release does nothing. With PLAITA_DISABLE_FENCING=1 there is no
// deferred lease (nil, nil): the caller uses Begin.
func (ts *TenantStore) Deferred(executionID, holder string) (*Lease, error) {
	if !ts.r.fencing() {
		return nil, nil
	}
	l, err := ts.newLease(executionID, holder)
	if err != nil {
		return nil, err
	}
	if err := keys.ValidID(executionID); err != nil {
		return nil, err
	}
	l.deferred = true
	l.read.Store(true) // not cancelled: the first save checks the flag before it writes
	l.preload(nil)
	return l, nil
}

// Deferred reports whether the lease is still to be taken by its first save.
func (l *Lease) Deferred() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deferred
}

// beginSaveScript is a deferred lease's first save: Begin and the fenced save in one step, for
// an execution that must not exist yet. It takes the lease as Begin does (takeLeaseLua; ARGV[3]
// is always the holder itself: a leftover lease of this instance is taken over).
// On a single server it indexes the state too (KEYS[7], and KEYS[8…] the IndexBy keys of its
// indexed values, only for a flow that indexes fields); in a cluster the caller sends the ZADDs
// after it.
// KEYS: 1 lease, 2 fencegen, 3 state, 4 tombstone, 5 cancel, 6 nofail[, 7 index[, 8… by]].
// ARGV: 1 holder|token, 2 lease TTL (s), 3 takeover holder, 4 state JSON, 5 state TTL (s, 0 =
// none), 6 "1" = release the lease, 7 index score, 8 execution id.
// Returns {1, generation, took over} | {0, current lease value} | {2} (not fresh: nothing
// written, the lease deleted again).
//
// A run that ends in its first save (ARGV[6] = "1": a start that completes, fails or is
// cancelled without calling out) neither holds the lease after the script nor writes again, so
// when no lease and no fence generation exist at all — no holder, in this or an earlier life,
// was ever handed a generation that could still write — the script only checks and writes: one
// MGET, the SET and the index, where taking, bumping and deleting cost three commands more. The
// generation stays unset (the reply's 0) until a later lease, whose INCR starts it above every
// generation ever handed out, as before. Anything there (a leftover lease of ours, a fence
// generation) takes the general path below.
var beginSaveScript = rueidis.NewLuaScript(`
local function write()
  if tonumber(ARGV[5]) > 0 then
    redis.call('SET', KEYS[3], ARGV[4], 'EX', ARGV[5])
  else
    redis.call('SET', KEYS[3], ARGV[4])
  end
  for i = 7, #KEYS do redis.call('ZADD', KEYS[i], ARGV[7], ARGV[8]) end
end
if ARGV[6] == '1' then
  local v = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
  if not v[1] and not v[2] then
    if v[3] or v[4] or v[5] or (tonumber(v[6] or '0') or 0) > 0 then return {2} end
    write()
    return {1, 0, 0}
  end
end
` + takeLeaseLua + `
local v = redis.call('MGET', KEYS[3], KEYS[4], KEYS[5], KEYS[6])
if v[1] or v[2] or v[3] or (tonumber(v[4] or '0') or 0) > 0 then
  redis.call('DEL', KEYS[1])
  return {2}
end
local g = redis.call('INCR', KEYS[2])
write()
if ARGV[6] == '1' then redis.call('DEL', KEYS[1]) end
return {1, g, took}
`)

// beginSave is the deferred lease's first save (StateDriver.BeginSave). The caller holds no
// lock.
func (s *FencedStorage) beginSave(ctx context.Context, e encoded, release bool) error {
	l, ts := s.l, s.l.ts
	start := time.Now()
	rep, err := ts.r.d.BeginSave(ctx, ts.sp, BeginSaveCall{W: e.write(), Lease: LeaseRef{Value: l.value, TTL: l.ttl},
		Holder: l.holder, Release: release})
	if err != nil && !rep.Taken {
		return err
	}
	switch {
	case rep.NotFresh:
		return ErrNotFresh
	case !rep.Taken:
		return &LeaseHeldError{ExecutionID: l.id, Holder: leaseHolder(rep.Held)}
	}
	l.mu.Lock()
	l.deferred, l.gen, l.tookOver, l.renewedAt = false, rep.Generation, rep.TookOver, start
	l.indexed, l.indexScore = rep.Indexed, e.score
	l.mu.Unlock()
	if release {
		l.markReleased()
	}
	return err // written; a failed index is reported, the lease is ours
}
