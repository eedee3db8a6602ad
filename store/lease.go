package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine/state"
	"plaita/internal/tick"
)

// Leases and fencing (README "Operations").
//
// A worker takes the resume lease of an execution before running it: SET NX EX on the lease
// key with "<holder>|<token>". Taking it bumps the execution's fence generation counter
// (fencegen, no TTL) in the same script, and so does deleting the execution. Every save or
// delete through the lease is a CAS that writes only while fencegen still equals the lease's
// generation: once another worker has taken the lease, or the execution was deleted, the old
// worker's late writes are refused with ErrLeaseLost and write nothing — even if an operator
// restored an old state, because fencegen only goes up.
//
// (Earlier builds also kept a "fence" key with the current generation and checked both; a
// delete that bumps fencegen makes it redundant, and dropping it saves a command per run. An
// old fence key is ignored and removed with its execution.)
//
// Acquire bumps fencegen even with PLAITA_DISABLE_FENCING=1 (which only makes saves and
// deletes plain), so fencing can be turned back on without locking current holders out.
//
// The lease's TTL is PLAITA_LEASE_TTL_SECONDS. Lease expiry alone does not fence a worker out;
// another worker taking the lease does. A worker keeps its lease with Watch (renewal every
// TTL/3) unless PLAITA_DISABLE_LEASE_WATCHDOG is on: that is the caller's decision, e.g.
//
//	if !config.DisableLeaseWatchdog.In(cfg) { lost = lease.Watch(ctx) }

// renewScript extends the lease while it is still ours.
// KEYS: 1 lease. ARGV: 1 holder|token, 2 lease TTL (s).
// Returns 1 | 0 (not ours any more).
var renewScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
`)

// releaseScript deletes the lease only while it is ours.
// KEYS: 1 lease. ARGV: 1 holder|token. Returns 1 | 0.
var releaseScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// Lease is a held resume lease of one execution. Its methods are safe for concurrent use.
type Lease struct {
	ts        *TenantStore
	id        string
	holder    string
	value     string // holder|token, the lease key's value while we hold it
	gen       int64
	ttl       time.Duration
	tookOver  bool        // AcquireOwn replaced a leftover lease of the same holder
	cancelled atomic.Bool // the cancel flag as the last begin or save read it
	read      atomic.Bool // cancelled holds a read (Begin ran, or a fenced save did)
	// ReleaseOnTerminal makes the save of a terminal state delete the lease in the same
	// script (a run's last write): the later Release is then a no-op. Set it before the run.
	ReleaseOnTerminal bool

	mu         sync.Mutex
	released   bool             // the lease key was deleted (by Release or a final save)
	preloaded  bool             // Begin read the state: the first Load is served from it
	preState   *state.Execution // what Begin read (nil: no state)
	renewedAt  time.Time        // start of the last call that (re)set the lease's TTL
	indexed    bool             // the index holds our member with score indexScore
	indexScore float64
	stops      []func() // running watchdogs
	deferred   bool     // taken by the first save (TenantStore.Deferred), not yet
}

// Acquire takes the resume lease of an execution for holder (the instance id). It fails with a
// *LeaseHeldError (errors.Is ErrLeaseHeld) naming the current holder when the lease is taken,
// and with ErrRedis (transient) when Redis does not answer. The lease TTL is
// PLAITA_LEASE_TTL_SECONDS.
func (ts *TenantStore) Acquire(ctx context.Context, executionID, holder string) (*Lease, error) {
	return ts.acquire(ctx, executionID, holder, false)
}

// AcquireOwn is Acquire that also takes over a lease held by holder itself. Call it only when
// nothing in this process runs the execution: the lease is then a leftover of an earlier life
// of the instance (a release that failed while Redis was away, or a restart under the same
// PLAITA_INSTANCE_ID), which would otherwise look like a live holder until it expired. The
// fence generation moves on, so nothing of that earlier life can write any more.
func (ts *TenantStore) AcquireOwn(ctx context.Context, executionID, holder string) (*Lease, error) {
	return ts.acquire(ctx, executionID, holder, true)
}

func (ts *TenantStore) acquire(ctx context.Context, executionID, holder string, takeover bool) (*Lease, error) {
	// The one lease-taking script is Begin's; what it reads besides is dropped here, so the
	// lease behaves as a plain one (its first Load and its cancel flag are read from Redis).
	b, err := ts.Begin(ctx, executionID, holder, takeover, nil)
	if err != nil && (b == nil || !errors.Is(err, ErrStateCorrupt)) {
		return nil, err
	}
	l := b.Lease // a corrupt state is the caller's to find: the lease is taken
	l.mu.Lock()
	l.preloaded, l.preState = false, nil
	l.mu.Unlock()
	l.read.Store(false)
	return l, nil
}

// leaseHolder extracts the holder from a lease value (holder|token).
func leaseHolder(v string) string {
	if i := strings.LastIndexByte(v, '|'); i >= 0 {
		return v[:i]
	}
	return v
}

func seconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// ExecutionID is the execution the lease is for.
func (l *Lease) ExecutionID() string { return l.id }

// Holder is the holder the lease was taken for.
func (l *Lease) Holder() string { return l.holder }

// Generation is the fence generation this lease writes with.
func (l *Lease) Generation() int64 { return l.gen }

// TookOver reports whether AcquireOwn replaced a leftover lease of the same holder.
func (l *Lease) TookOver() bool { return l.tookOver }

// TTL is the lease's TTL (PLAITA_LEASE_TTL_SECONDS when it was taken).
func (l *Lease) TTL() time.Duration { return l.ttl }

// Renew extends the lease by its TTL while it is still ours (same holder and token), and
// refreshes our fence's TTL; ErrLeaseLost when the lease expired or someone else holds it,
// ErrRedis (transient) when Redis does not answer.
func (l *Lease) Renew(ctx context.Context) error {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	start := time.Now()
	ok, err := l.ts.r.d.Renew(ctx, l.ts.sp, l.id, l.value, l.ttl)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: execution %s: the lease expired or another worker holds it", ErrLeaseLost, l.id)
	}
	l.mu.Lock()
	l.renewedAt = start
	l.mu.Unlock()
	return nil
}

// Release gives the lease up and stops its watchdogs. Only the holder's own lease is deleted:
// ErrLeaseLost when it was no longer ours (nothing deleted). The fence is left as it is; the
// next Acquire moves it on.
func (l *Lease) Release(ctx context.Context) error {
	l.stopWatchdogs()
	l.mu.Lock()
	released, deferred := l.released, l.deferred
	l.mu.Unlock()
	if released || deferred {
		return nil // the run's last save deleted it, or no save ever took it
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	ok, err := l.ts.r.d.Release(ctx, l.ts.sp, l.id, l.value)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: execution %s: the lease was no longer ours at release", ErrLeaseLost, l.id)
	}
	return nil
}

// Held reports whether Release has a lease key to delete: false once the run's last save
// deleted it, for a deferred lease no save took, and after Release.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.released && !l.deferred
}

// markReleased records that the lease key is gone and stops the watchdogs.
func (l *Lease) markReleased() {
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	l.stopWatchdogs()
}

// preload keeps what Begin read for the storage's first Load.
func (l *Lease) preload(st *state.Execution) {
	l.mu.Lock()
	l.preloaded, l.preState = true, st
	l.mu.Unlock()
}

func (l *Lease) stopWatchdogs() {
	l.mu.Lock()
	stops := l.stops
	l.stops = nil
	l.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// Watch starts the lease watchdog: it renews the lease every TTL/3 until ctx ends or Release
// is called. The returned channel carries at most one error, ErrLeaseLost, when the lease was
// lost (someone else holds it, or no renewal succeeded for a whole TTL because Redis did not
// answer), and is closed when the watchdog stops. Transient renewal failures are retried at the
// next tick. The caller decides whether to run it at all (PLAITA_DISABLE_LEASE_WATCHDOG).
func (l *Lease) Watch(ctx context.Context) <-chan error {
	out := make(chan error, 1)
	w := l.watch(ctx, func(err error) { out <- err })
	go func() {
		w.Wait()
		close(out)
	}()
	return out
}

// OnLoss is Watch with a callback instead of a channel: lost is called at most once, from
// the watchdog, with the ErrLeaseLost Watch would send. Until the first renewal is due it
// costs a timer and no goroutine: a run that ends within TTL/3 never starts one.
func (l *Lease) OnLoss(ctx context.Context, lost func(error)) { l.watch(ctx, lost) }

func (l *Lease) watch(ctx context.Context, lost func(error)) *tick.Loop {
	interval := max(l.ttl/3, 10*time.Millisecond)
	w := tick.Every(ctx, interval, func(ctx context.Context) bool {
		rctx, cancel := context.WithTimeout(ctx, interval)
		err := l.Renew(rctx)
		cancel()
		switch {
		case err == nil:
			return true
		case ctx.Err() != nil:
			return false
		case errors.Is(err, ErrLeaseLost):
			lost(err)
			return false
		}
		l.mu.Lock()
		since := time.Since(l.renewedAt)
		l.mu.Unlock()
		if since >= l.ttl {
			lost(fmt.Errorf("%w: execution %s: not renewed for %s (the lease TTL): %w", ErrLeaseLost, l.id, since.Round(time.Millisecond), err))
			return false
		}
		return true
	})
	l.mu.Lock()
	l.stops = append(l.stops, w.Stop)
	l.mu.Unlock()
	return w
}

// Storage is the lease's fenced view of the tenant's storage; the executor of this execution
// writes through it.
func (l *Lease) Storage() *FencedStorage { return &FencedStorage{l: l} }

// FencedStorage saves and deletes one execution under its lease's fence generation. Loads are
// ordinary loads.
type FencedStorage struct{ l *Lease }

var _ Storage = (*FencedStorage)(nil)

// Lease is the lease the writes are fenced by.
func (s *FencedStorage) Lease() *Lease { return s.l }

func (s *FencedStorage) check(id string) error {
	if id != s.l.id {
		return fmt.Errorf("%w: the lease is for execution %s, not %s; nothing written", ErrLeaseLost, s.l.id, id)
	}
	return nil
}

// Save writes the state if the lease's generation is still current (fence and fencegen both
// equal it), else ErrLeaseLost and nothing is written. Terminal states get the state TTL,
// others none. ErrStateSerialization (nothing sent) and ErrStateSave (transient) as for
// TenantStore.Save. With PLAITA_DISABLE_FENCING=1 (Settings.DisableFencing) it is a plain save.
func (s *FencedStorage) Save(ctx context.Context, st *state.Execution) error {
	l := s.l
	ts := l.ts
	e, err := ts.encode(st)
	if err != nil {
		return err
	}
	if err := s.check(e.id); err != nil {
		return err
	}
	if !ts.r.fencing() {
		return ts.plainSave(ctx, e)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	l.mu.Lock()
	indexed, deferred := l.indexed && l.indexScore == e.score, l.deferred
	l.mu.Unlock()
	if deferred {
		return s.beginSave(ctx, e, l.ReleaseOnTerminal && st.Status.Terminal())
	}
	// The state is indexed with the lease's first save and when its start time changes.
	return s.fencedSave(ctx, e, l.ReleaseOnTerminal && st.Status.Terminal(), !indexed)
}

// Load is an ordinary load (TenantStore.Load), except that the first one after Begin is served
// from what Begin read in its round trip.
func (s *FencedStorage) Load(ctx context.Context, id string) (*state.Execution, error) {
	if l := s.l; id == l.id {
		l.mu.Lock()
		pre, st := l.preloaded, l.preState
		l.preloaded, l.preState = false, nil
		l.mu.Unlock()
		if pre && st == nil {
			return nil, &state.NotFoundError{ExecutionID: id}
		}
		if pre {
			return st, nil
		}
	}
	return s.l.ts.Load(ctx, id)
}

// Delete removes the execution like TenantStore.Delete, but only while the lease's generation
// is current: else ErrLeaseLost and nothing is deleted, no tombstone written. It ends the lease
// (the lease key is deleted with the rest) and stops its watchdogs whatever the outcome: a
// delete is a worker's last act on an execution. With PLAITA_DISABLE_FENCING=1 it is unfenced.
func (s *FencedStorage) Delete(ctx context.Context, id string) error {
	if err := s.check(id); err != nil {
		return err
	}
	l := s.l
	l.stopWatchdogs()
	return l.ts.deleteExecution(ctx, id, l.ts.r.fencing(), l.gen)
}

// Cancelled reports the execution's cancel flag (engine.CancelChecker) as Begin and the last
// fenced save read it: the flag is read with every step's save, so the executor's checkpoint
// between steps costs no round trip. A lease from Acquire (no Begin) reads it from Redis until
// its first save.
func (s *FencedStorage) Cancelled(ctx context.Context, id string) (bool, error) {
	if id == s.l.id && s.l.read.Load() {
		return s.l.cancelled.Load(), nil
	}
	return s.l.ts.Cancelled(ctx, id)
}
