// Package control is the control plane's operations, shared by every front end — the operator
// commands (cli/) and the console's HTTP API (web): publish a flow, start one, show an
// execution with what can be done next and what wakes it, list, resume with the worker's own
// check, cancel, delete, publish and list events, edit schedules, list and replay dead letters,
// drain a legacy List queue into the stream (drainlist.go), ask an instance for its status or a
// drain over its control channel (ctl.go); follow an execution live and page its timeline
// (live.go, timeline.go); bulk jobs by filter that apply those same operations item by item
// (bulk.go, bulk_runner.go); the console's own record of flows — drafts, who published each
// version — and its write-back to Redis (catalog.go, engine_sync.go); credentials and signed
// triggers (credentials.go, hooks.go, signature.go). Local mode is the same Plane over the
// console database's drivers (roles.LocalMode); orphans.go settles what an earlier version's
// local mode left running.
//
// Each operation is one method of Plane over typed arguments, returning a typed result or a
// *Refusal (what was refused, what is accepted instead, how to unblock it); nothing here prints,
// speaks HTTP or reads the configuration — the front ends do, so they refuse exactly the same
// things with the same words. asynq's Inspector, which its CLI and asynqmon both use, is the
// model.
package control

import (
	"context"
	"fmt"
	"time"

	"plaita/engine"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
)

// Deps is what the operations work on; a front end builds it once from its configuration.
type Deps struct {
	// Root is the key root the stores below use ("" = keys.DefaultRoot).
	Root  string
	Store *store.Redis // execution states of every tenant
	// Flows publishes and reads definitions; the caller reserves the task queue's streams
	// (store.Flows.Reserve) so that no publication can write them.
	Flows     *store.Flows
	Events    *store.Events
	Schedules *store.Schedules
	Registry  *store.Registry // who is alive: the wake-up report
	// Control is the instances' control channels (ctl.go: status and drain of one instance).
	Control  *store.Control
	Delay    *queue.Delay    // the delay queue: the wake-up report
	Producer *queue.Producer // the one way a task is enqueued
	// Queue is the task queue: its dead-letter stream (list, show, replay) and the tasks not
	// settled yet (a start no worker has taken shows as queued).
	Queue *queue.Queue
	// NodeTypes builds the worker's node types, so that a definition parses here exactly when
	// it parses on a worker (an error: this process cannot set them up).
	NodeTypes func() (*engine.Registry, error)
	Expr      engine.ExprLimits
	// StateMaxBytes is PLAITA_EXECUTION_STATE_MAX_BYTES, the bound of an input or resume data.
	StateMaxBytes int
	// TimelineMax is PLAITA_EXECUTION_TIMELINE_MAX, the bound of a timeline an operation
	// appends to (0: the engine's default).
	TimelineMax int
	// Quota is the tenant running quota a start is checked against (control/quota.go).
	Quota QuotaSettings
	// Dispatch is capacity dispatch of starts (control/dispatch.go); the zero value is off.
	Dispatch DispatchSettings
	// Built reports whether this build has a role ("console", "delay" …): the wake-up report
	// says when the role that wakes an execution is not built yet.
	Built func(role string) bool
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Program is how the command lines printed in hints and texts invoke plaita ("": "plaita";
	// "go run ." from a clone, or the binary's path when it is not on PATH).
	Program string
	// Live is what the workers publish for live views (Follow, FollowStatus); nil: those
	// operations poll the state only.
	Live *store.LiveEvents
}

// Plane runs the operations. It is safe for concurrent use.
type Plane struct {
	d   Deps
	now func() time.Time
}

// New returns the control plane over d.
func New(d Deps) *Plane {
	now := d.Now
	if now == nil {
		now = time.Now
	}
	if d.Built == nil {
		d.Built = func(string) bool { return true }
	}
	if d.Root == "" {
		d.Root = keys.DefaultRoot
	}
	if d.Program == "" {
		d.Program = "plaita"
	}
	return &Plane{d: d, now: now}
}

// Tenant checks a tenant slug ("" is the default tenant) and returns its canonical name.
func (p *Plane) Tenant(tenant string) (string, error) {
	sp, err := keys.For(p.d.Root, tenant)
	if err != nil {
		return "", refuse(Invalid, "invalid_tenant", err, "%v", err)
	}
	return sp.Tenant(), nil
}

// tenantStore is the execution storage of a checked tenant.
func (p *Plane) tenantStore(tenant string) (*store.TenantStore, error) {
	if _, err := p.Tenant(tenant); err != nil {
		return nil, err
	}
	ts, err := p.d.Store.Tenant(tenant)
	if err != nil {
		return nil, refuse(Invalid, "invalid_tenant", err, "%v", err)
	}
	return ts, nil
}

// QueueName is the stream tasks are enqueued on.
func (p *Plane) QueueName() string { return p.d.Producer.Stream() }

// nodeTypes builds the node registry flows are parsed with.
func (p *Plane) nodeTypes() (*engine.Registry, error) {
	if p.d.NodeTypes == nil {
		return engine.NewRegistry(), nil
	}
	return p.d.NodeTypes()
}

// enqueue writes one fresh task through the producer.
func (p *Plane) enqueue(ctx context.Context, tenant string, env queue.Envelope) (string, error) {
	env.TenantID = tenant
	id, err := p.d.Producer.Enqueue(ctx, env)
	if err != nil {
		return "", fmt.Errorf("enqueue: %w", err)
	}
	return id, nil
}
