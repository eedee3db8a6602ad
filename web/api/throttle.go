package api

import (
	"context"
	"net/netip"
	"sync"
	"time"
)

// The login guard, in front of POST /api/login (docs/console.md, "Logging in"):
//
//   - a token bucket per client network (an IPv4 address, an IPv6 /64: one subscriber's
//     addresses are one client) bounds the attempts — and the argon2id work, tens of
//     milliseconds of a core each — one client can make, whatever logins it tries;
//   - failed logins are counted per (login, client network): MaxFailures of them lock that pair
//     for LockFor. An account is never locked for everyone: an attacker who guesses a
//     password locks themselves out, not its owner, who logs in from their own network as
//     usual. The count and the lock are the same for a login that exists and one that does
//     not, so the answers (401, then 429 login_throttled) say nothing of which logins exist.
//
// The failures and locks are the console database's (control.Accounts: login_failures), so a
// pair locked on one console is locked on every console on the database; pairs that hold
// nothing are pruned as failures come, at most once a minute. The buckets are the process's
// own: behind a load balancer each console bounds the rate of the clients it sees. The bucket
// table is bounded (MaxClients): an entry that holds nothing (a full bucket) is dropped to
// make room; one that holds something is never dropped, because forgetting it would give its
// client a fresh start. When the table is full of live entries, a new client shares one
// overflow bucket (so a flood of new networks is held back together).

// loginFailures is where the (login, network) pairs' failures are kept: control.Accounts.
type loginFailures interface {
	LoginLockedUntil(ctx context.Context, login, network string) (time.Time, error)
	RecordLoginFailure(ctx context.Context, login, network string, max int, lockFor time.Duration) (time.Time, error)
	ClearLoginFailures(ctx context.Context, login, network string) error
	PruneLoginFailures(ctx context.Context, before time.Time) (int64, error)
}

// LoginThrottle are the guard's settings. Burst attempts at once per client network, then one
// every Every; MaxFailures failed logins of one login from one network lock that pair for
// LockFor; MaxClients bounds each table.
type LoginThrottle struct {
	Burst       int
	Every       time.Duration
	MaxClients  int
	MaxFailures int
	LockFor     time.Duration
	// Off turns the guard off (a benchmark of the login itself).
	Off bool
}

// Defaults of the login guard: 20 attempts at once from one network, then one every 3 s (20 a
// minute): room for an office behind one address, none for a password sprayer; 5 failures of
// one login from one network lock that pair for 15 minutes.
const (
	DefaultLoginBurst       = 20
	DefaultLoginEvery       = 3 * time.Second
	DefaultLoginMaxClients  = 10000
	DefaultLoginMaxFailures = 5
	DefaultLoginLockFor     = 15 * time.Minute
)

func (t LoginThrottle) withDefaults() LoginThrottle {
	if t.Burst <= 0 {
		t.Burst = DefaultLoginBurst
	}
	if t.Every <= 0 {
		t.Every = DefaultLoginEvery
	}
	if t.MaxClients <= 0 {
		t.MaxClients = DefaultLoginMaxClients
	}
	if t.MaxFailures <= 0 {
		t.MaxFailures = DefaultLoginMaxFailures
	}
	if t.LockFor <= 0 {
		t.LockFor = DefaultLoginLockFor
	}
	return t
}

// clientNetwork is the client a login attempt is counted against: an IPv4 address (an
// IPv4-mapped IPv6 one too), or the /64 of an IPv6 address — the smallest network a
// subscriber is given, so an attacker with one cannot bypass the guard by changing addresses.
func clientNetwork(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip // not an address (a test's pipe): counted as itself
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

// loginGuard is the guard: the buckets of the client networks, and the database's failures of
// the (login, network) pairs.
type loginGuard struct {
	s        LoginThrottle
	now      func() time.Time
	failures loginFailures

	mu      sync.Mutex
	buckets table[bucket]
	pruned  time.Time // the last prune of the failures
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

func newLoginGuard(s LoginThrottle, now func() time.Time, failures loginFailures) *loginGuard {
	s = s.withDefaults()
	g := &loginGuard{s: s, now: now, failures: failures}
	g.buckets = table[bucket]{max: s.MaxClients, m: map[string]*bucket{},
		// A bucket that has had time to refill remembers nothing.
		inert: func(b *bucket, now time.Time) bool { return now.Sub(b.at) >= time.Duration(s.Burst)*s.Every }}
	return g
}

// Why an attempt is refused before its password is checked (the audit's reason).
const (
	refusedThrottled = "throttled" // the client network's bucket is empty
	refusedLocked    = "locked"    // the (login, network) pair is locked
)

// admit checks the pair's lock and takes a token of the client network's bucket: "" when the
// attempt may go on, else why not and how long until it may. An error is the database's.
func (g *loginGuard) admit(ctx context.Context, login, ip string) (refused string, wait time.Duration, err error) {
	if g.s.Off {
		return "", 0, nil
	}
	network := clientNetwork(ip)
	if g.failures != nil {
		until, err := g.failures.LoginLockedUntil(ctx, login, network)
		if err != nil {
			return "", 0, err
		}
		if now := g.now(); now.Before(until) {
			return refusedLocked, until.Sub(now), nil
		}
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.buckets.get(network, now, bucket{tokens: float64(g.s.Burst), at: now})
	b.tokens = min(float64(g.s.Burst), b.tokens+float64(now.Sub(b.at))/float64(g.s.Every))
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return "", 0, nil
	}
	return refusedThrottled, time.Duration((1 - b.tokens) * float64(g.s.Every)), nil
}

// failed counts a failed login of the pair; the one that reaches MaxFailures locks it.
func (g *loginGuard) failed(ctx context.Context, login, ip string) error {
	if g.s.Off || g.failures == nil {
		return nil
	}
	if _, err := g.failures.RecordLoginFailure(ctx, login, clientNetwork(ip), g.s.MaxFailures, g.s.LockFor); err != nil {
		return err
	}
	now := g.now()
	g.mu.Lock()
	prune := now.Sub(g.pruned) >= time.Minute
	if prune {
		g.pruned = now
	}
	g.mu.Unlock()
	if prune {
		// A failed prune leaves the rows for the next one.
		_, _ = g.failures.PruneLoginFailures(ctx, now.Add(-g.s.LockFor))
	}
	return nil
}

// succeeded forgets the pair's failures: a login that worked starts its count again.
func (g *loginGuard) succeeded(ctx context.Context, login, ip string) error {
	if g.failures == nil {
		return nil
	}
	return g.failures.ClearLoginFailures(ctx, login, clientNetwork(ip))
}

// forget forgets every pair of a login (a platform admin unlocked the user).
func (g *loginGuard) forget(ctx context.Context, login string) error {
	if g.failures == nil {
		return nil
	}
	return g.failures.ClearLoginFailures(ctx, login, "")
}

// table is a bounded map of per-client state: see the file's comment for what is dropped and
// what a client gets when it is full.
type table[V any] struct {
	max      int
	m        map[string]*V
	inert    func(*V, time.Time) bool
	overflow V
	used     bool      // overflow was handed out (and so holds state)
	swept    time.Time // the last sweep of a full table
}

// get is key's entry, made from fresh when it has none: the overflow entry when there is no
// room for it.
func (t *table[V]) get(key string, now time.Time, fresh V) *V {
	if v, ok := t.m[key]; ok {
		return v
	}
	if len(t.m) >= t.max && now.Sub(t.swept) >= time.Second { // a sweep at most once a second
		t.swept = now
		for k, v := range t.m {
			if t.inert(v, now) {
				delete(t.m, k)
			}
		}
	}
	if len(t.m) >= t.max {
		if !t.used {
			t.overflow, t.used = fresh, true
		}
		return &t.overflow
	}
	v := &fresh
	t.m[key] = v
	return v
}
