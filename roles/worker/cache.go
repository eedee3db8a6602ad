package worker

import (
	"sync"
	"time"
)

// ttlCache remembers values for a short while. The tenant status and the quota overrides are
// read on every delivery; a worker takes thousands a second, and an operator's change may
// take effect a moment later without harm. A zero TTL caches nothing.
type ttlCache[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]cached[V]
}

type cached[V any] struct {
	v  V
	at time.Time
}

// GateCacheTTL is how long the worker reuses a tenant's status and quota override: an
// operator's change takes effect within it.
const GateCacheTTL = time.Second

// maxCached bounds the entries (one per tenant): past it the cache starts over.
const maxCached = 4096

func (c *ttlCache[K, V]) get(k K, ttl time.Duration, now time.Time) (V, bool) {
	var zero V
	if ttl <= 0 {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || now.Sub(e.at) >= ttl || now.Before(e.at) {
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[K, V]) put(k K, v V, ttl time.Duration, now time.Time) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[K]cached[V]{}
	}
	c.m[k] = cached[V]{v: v, at: now}
}
