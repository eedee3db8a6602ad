package engine

import "sync"

// FlowCache keeps prepared flows by definition hash, so each flow version is validated and its
// expressions compiled once per process, however many executions run it. Safe for concurrent
// use: prepared flows are immutable.
type FlowCache struct {
	reg    *Registry
	limits ExprLimits
	max    int

	mu     sync.Mutex
	byHash map[string]*Flow
	order  []string // insertion order, for eviction
}

// NewFlowCache returns a cache holding at most size flows (the oldest is evicted first).
func NewFlowCache(reg *Registry, limits ExprLimits, size int) *FlowCache {
	return &FlowCache{reg: reg, limits: limits, max: max(size, 1), byHash: map[string]*Flow{}}
}

// Parse returns the prepared flow for a definition, parsing it on first sight.
func (c *FlowCache) Parse(data []byte) (*Flow, error) {
	hash, err := FlowHash(data)
	if err != nil {
		return Parse(data, c.reg, c.limits) // reports the syntax error with its position
	}
	c.mu.Lock()
	f, ok := c.byHash[hash]
	c.mu.Unlock()
	if ok {
		return f, nil
	}
	f, err = Parse(data, c.reg, c.limits)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byHash[hash]; !ok {
		if len(c.order) >= c.max {
			delete(c.byHash, c.order[0])
			c.order = c.order[1:]
		}
		c.byHash[hash] = f
		c.order = append(c.order, hash)
	}
	return c.byHash[hash], nil
}
