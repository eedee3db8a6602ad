package filter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"plaita/engine"
	"plaita/store"
)

// The match is evaluated by the engine itself (engine.CheckResume on the published definition
// the execution runs), so the filter refuses exactly the events the worker would refuse. The
// filter parses definitions with the control node types — wait_event is one of them, and it is
// the node whose match is checked — and takes every other node type (http, code, writefile,
// external executables) as an opaque node: the filter runs no node, so it needs no sandbox,
// docker or HTTP settings, and a flow with I/O nodes parses here as it does on a worker.

// opaqueType is any node type the filter does not run.
type opaqueType struct{}

func (opaqueType) Prepare(*engine.Node, *engine.PrepareContext) engine.Runner { return opaqueRunner{} }

type opaqueRunner struct{}

var errNotRun = errors.New("the filter runs no node")

func (opaqueRunner) Run(context.Context, *engine.Call) (engine.Outcome, error) {
	return engine.Outcome{}, errNotRun
}

// parseRegistry is the filter's node registry: the control nodes, and opaque nodes for every
// other type name.
func parseRegistry() *engine.Registry {
	reg := engine.NewRegistry()
	reg.SetFallback(func(string) (engine.NodeType, bool) { return opaqueType{}, true })
	return reg
}

// definitionTTL is how long a published definition is reused: published versions are
// immutable, so this bounds only the memory of a version deleted meanwhile.
const definitionTTL = time.Minute

// maxDefinitions bounds the definitions kept.
const maxDefinitions = 1024

type flowKey struct{ tenant, flow, version string }

type cachedFlow struct {
	f   *engine.Flow
	err error // the definition does not parse here
	at  time.Time
}

// definitions reads and parses the published definitions executions run, once a minute per
// version.
type definitions struct {
	flows *store.Flows
	cache *engine.FlowCache
	now   func() time.Time

	mu sync.Mutex
	m  map[flowKey]cachedFlow
}

func newDefinitions(flows *store.Flows, limits engine.ExprLimits, now func() time.Time) *definitions {
	return &definitions{flows: flows, cache: engine.NewFlowCache(parseRegistry(), limits, 256), now: now, m: map[flowKey]cachedFlow{}}
}

// errUnparsable marks a published definition that does not parse here: the match cannot be
// checked, the worker decides.
var errUnparsable = errors.New("the published definition does not parse in the filter")

// get returns the parsed definition of a flow version: store.ErrFlowNotFound when it is not
// published, errUnparsable (wrapping the problems) when it does not parse, a transient store
// error when Redis does not answer.
func (d *definitions) get(ctx context.Context, tenant, flowID, version string) (*engine.Flow, error) {
	k, now := flowKey{tenant, flowID, version}, d.now()
	d.mu.Lock()
	c, ok := d.m[k]
	d.mu.Unlock()
	if ok && now.Sub(c.at) < definitionTTL {
		return c.f, c.err
	}
	def, err := d.flows.Get(ctx, tenant, flowID, version)
	if err != nil {
		return nil, err
	}
	f, err := d.cache.Parse(def)
	if err != nil {
		err = fmt.Errorf("%w: flow %s version %q: %w", errUnparsable, flowID, version, err)
	}
	d.mu.Lock()
	if len(d.m) >= maxDefinitions {
		for old := range d.m { // any one: a bounded memory, not an LRU
			delete(d.m, old)
			break
		}
	}
	d.m[k] = cachedFlow{f: f, err: err, at: now}
	d.mu.Unlock()
	return f, err
}
