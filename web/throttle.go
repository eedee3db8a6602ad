package web

import (
	"sync"
	"time"
)

// The login throttle: a token bucket per client address in front of POST /api/login. The
// per-account lock-out (store/sqlite: 5 failures in a row lock the account) stops guessing one
// account's password; this stops one address from trying many accounts, and bounds the
// argon2id work (tens of milliseconds of a core per attempt, docs/console.md "Performance")
// one address can make the console do. Every attempt takes a token, a good one too.

// LoginThrottle is the bucket of one client address: Burst attempts at once, then one every
// Every. MaxClients bounds the addresses remembered (beyond it, full buckets are forgotten
// first, then any).
type LoginThrottle struct {
	Burst      int
	Every      time.Duration
	MaxClients int
	// Off turns the throttle off (a benchmark of the login itself).
	Off bool
}

// Defaults of the login throttle: 20 attempts at once from one address, then one every 3 s
// (20 a minute): room for an office behind one address, none for a password sprayer.
const (
	DefaultLoginBurst      = 20
	DefaultLoginEvery      = 3 * time.Second
	DefaultLoginMaxClients = 10000
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
	return t
}

// buckets are the token buckets of the client addresses.
type buckets struct {
	s   LoginThrottle
	now func() time.Time

	mu sync.Mutex
	m  map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

func newBuckets(s LoginThrottle, now func() time.Time) *buckets {
	return &buckets{s: s.withDefaults(), now: now, m: map[string]*bucket{}}
}

// take takes a token of addr's bucket: ok, or how long until the next token.
func (b *buckets) take(addr string) (bool, time.Duration) {
	if b.s.Off {
		return true, 0
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	k, ok := b.m[addr]
	if !ok {
		b.room(now)
		k = &bucket{tokens: float64(b.s.Burst), at: now}
		b.m[addr] = k
	}
	k.tokens = min(float64(b.s.Burst), k.tokens+float64(now.Sub(k.at))/float64(b.s.Every))
	k.at = now
	if k.tokens >= 1 {
		k.tokens--
		return true, 0
	}
	return false, time.Duration((1 - k.tokens) * float64(b.s.Every))
}

// room makes room for one more address: the full buckets go (they remember nothing), and if
// that was not enough, one address (map order: any).
func (b *buckets) room(now time.Time) {
	if len(b.m) < b.s.MaxClients {
		return
	}
	full := time.Duration(b.s.Burst) * b.s.Every
	for a, k := range b.m {
		if now.Sub(k.at) >= full {
			delete(b.m, a)
		}
	}
	for a := range b.m {
		if len(b.m) < b.s.MaxClients {
			return
		}
		delete(b.m, a)
	}
}
