package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
)

// Reap finds zombie executions — running (or pending) for longer than the idle bound with no
// worker holding their lease and no task in the stream that would run or resume them — and
// ends each in error (Orphaned), so monitoring sees them and an operator can retry them from
// their checkpoint. Three guards keep it from touching a live execution: its lease key exists
// (a worker is on a long step: the watchdog renews it), it has a task in the stream (a worker
// will take it — also when no worker runs now), or its state changed between the read and the
// write (the write is conditional on the exact bytes read, and on no lease: one script).

// reapTaskScan bounds the stream entries a reap reads to tell which executions have a task.
const reapTaskScan = 1_000_000

// DefaultReapIdle is the idle bound when none is given: it must exceed the longest single node.
const DefaultReapIdle = 60 * time.Minute

// ReapRequest asks for one reap pass over some tenants.
type ReapRequest struct {
	Tenants []string      // checked slugs; empty: the default tenant
	Idle    time.Duration // at least this long since the state's last update (0: DefaultReapIdle)
	DryRun  bool          // report what would be reaped, write nothing
	// Progress, when set, is called after each page of each tenant's index.
	Progress func(ReapProgress)
}

// ReapProgress is how far a reap is.
type ReapProgress struct {
	Tenant   string `json:"tenant_id"`
	Examined int    `json:"examined"` // index members examined so far, all tenants
	Reaped   int    `json:"reaped"`
}

// ReapItem is one execution a reap ended, or would end (dry run), or left alone.
type ReapItem struct {
	ExecutionID string        `json:"execution_id"`
	TenantID    string        `json:"tenant_id"`
	FlowID      string        `json:"flow_id"`
	Was         state.Status  `json:"was"`
	Node        string        `json:"node"`
	LastUpdate  time.Time     `json:"last_update_time"`
	Idle        time.Duration `json:"idle_ns"`
	// Outcome: reaped | would_reap | lease_held | task_queued | changed.
	Outcome string `json:"outcome"`
}

// ReapReport is what a pass did.
type ReapReport struct {
	DryRun      bool          `json:"dry_run"`
	Idle        time.Duration `json:"idle_ns"`
	Tenants     []string      `json:"tenants"`
	Examined    int           `json:"examined"`
	TaskEntries int           `json:"task_entries"` // stream entries read to find the queued tasks
	Reaped      []ReapItem    `json:"reaped"`       // reaped, or would_reap in a dry run
	Skipped     []ReapItem    `json:"skipped"`      // candidates a guard kept
}

// Reap runs one pass. A stream too long to read whole is a Conflict: which executions still have
// a task could not be told, so nothing is reaped.
func (p *Plane) Reap(ctx context.Context, req ReapRequest) (ReapReport, error) {
	idle := req.Idle
	if idle <= 0 {
		idle = DefaultReapIdle
	}
	tenants := req.Tenants
	if len(tenants) == 0 {
		tenants = []string{""}
	}
	rep := ReapReport{DryRun: req.DryRun, Idle: idle, Reaped: []ReapItem{}, Skipped: []ReapItem{}}
	stores := make([]*store.TenantStore, 0, len(tenants))
	for _, t := range tenants {
		ts, err := p.tenantStore(t)
		if err != nil {
			return rep, err
		}
		stores = append(stores, ts)
		rep.Tenants = append(rep.Tenants, ts.Tenant())
	}
	tasks, err := p.d.Queue.Tasks(ctx, reapTaskScan)
	if err != nil {
		return rep, err
	}
	rep.TaskEntries = tasks.Read
	if !tasks.Complete {
		return rep, &Refusal{Class: Conflict, Code: "task_stream_too_long",
			Message: fmt.Sprintf("the task stream %s holds more than %d entries: which executions still have a task cannot be told, so none is reaped", p.QueueName(), reapTaskScan),
			Unblock: "let the workers work the backlog down (plaita status), then reap"}
	}
	for _, ts := range stores {
		if err := p.reapTenant(ctx, ts, req, idle, tasks.Has, &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// reapTenant pages through one tenant's index and reaps its candidates.
func (p *Plane) reapTenant(ctx context.Context, ts *store.TenantStore, req ReapRequest, idle time.Duration,
	queued func(tenant, id string) bool, rep *ReapReport) error {
	cutoff := p.now().Add(-idle)
	stale := func(st *state.Execution) bool {
		return (st.Status == state.Running || st.Status == state.Pending) && st.LastUpdate.Before(cutoff)
	}
	cursor := ""
	for {
		page, err := ts.List(ctx, store.ListRequest{Cursor: cursor, Limit: store.MaxListLimit, Match: stale})
		if err != nil {
			return fmt.Errorf("tenant %s: %w", ts.Tenant(), err)
		}
		rep.Examined += len(page.Items) + page.Skipped
		for _, it := range page.Items {
			item, err := p.reapOne(ctx, ts, it.ExecutionID, req.DryRun, stale, queued)
			if err != nil {
				return err
			}
			if item.Outcome == "reaped" || item.Outcome == "would_reap" {
				rep.Reaped = append(rep.Reaped, item)
			} else if item.Outcome != "" {
				rep.Skipped = append(rep.Skipped, item)
			}
		}
		if req.Progress != nil {
			req.Progress(ReapProgress{Tenant: ts.Tenant(), Examined: rep.Examined, Reaped: len(rep.Reaped)})
		}
		if cursor = page.NextCursor; cursor == "" {
			return nil
		}
	}
}

// reapOne reads one candidate's exact bytes and lease, checks the guards and ends it in error
// with a write conditional on both. Outcome "" is a candidate gone meanwhile (not reported).
func (p *Plane) reapOne(ctx context.Context, ts *store.TenantStore, id string, dryRun bool,
	stale func(*state.Execution) bool, queued func(tenant, id string) bool) (ReapItem, error) {
	snap, err := ts.Snapshot(ctx, id)
	var ce *store.CorruptStateError
	switch {
	case errors.Is(err, store.ErrNotFound) || errors.As(err, &ce):
		return ReapItem{}, nil // deleted, or unreadable: execution show/cancel deal with it
	case err != nil:
		return ReapItem{}, err
	}
	st := snap.State
	now := p.now()
	item := ReapItem{ExecutionID: id, TenantID: ts.Tenant(), FlowID: st.FlowID, Was: st.Status, Node: st.CurrentNode,
		LastUpdate: st.LastUpdate, Idle: now.Sub(st.LastUpdate)}
	switch {
	case !stale(st):
		item.Outcome = "changed"
	case snap.Leased:
		item.Outcome = "lease_held"
	case queued(ts.Tenant(), id):
		item.Outcome = "task_queued"
	case dryRun:
		item.Outcome = "would_reap"
	}
	if item.Outcome != "" {
		return item, nil
	}
	msg := fmt.Sprintf("running with no worker holding it and no task to resume it for %s: reaped (plaita reap); a retry resumes it from its checkpoint",
		RoundDuration(item.Idle))
	info := &state.ErrorInfo{Type: engine.ErrTypeOrphaned, Message: msg, Node: st.CurrentNode}
	st.Status, st.Error, st.Suspend = state.Error, info, nil
	st.EndTime, st.LastUpdate = &now, now
	engine.AppendTimeline(st, state.TimelineEntry{Time: state.Stamp(now), Event: string(state.Error), Node: st.CurrentNode,
		Detail: info.Type + ": " + msg}, p.timelineMax())
	switch err := ts.ReplaceUnleased(ctx, snap.Raw, st); {
	case errors.Is(err, store.ErrStateChanged):
		item.Outcome = "changed"
	case errors.Is(err, store.ErrLeaseHeld):
		item.Outcome = "lease_held"
	case err != nil:
		return item, fmt.Errorf("execution %s: %w", id, err)
	default:
		item.Outcome = "reaped"
	}
	return item, nil
}

// KnownTenants lists the tenants this deployment's Redis knows of (store.Redis.KnownTenants):
// what --all-tenants covers.
func (p *Plane) KnownTenants(ctx context.Context) ([]string, error) {
	return p.d.Store.KnownTenants(ctx)
}

// timelineMax is the timeline bound an operation appends with.
func (p *Plane) timelineMax() int {
	if p.d.TimelineMax > 0 {
		return p.d.TimelineMax
	}
	return engine.DefaultSettings().TimelineMax
}
