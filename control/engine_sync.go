package control

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"plaita/store"
	"plaita/store/sqlite"
)

// The engine sync (docs/console.md, "Engine sync"): at start the console writes back to Redis
// every flow version it recorded publishing (flow_versions) that Redis lacks — after a Redis
// restored from an old snapshot, or a new Redis — so that executions of those versions can
// resume. A batch of versions is one pipeline; the whole is bounded by a wall-clock deadline
// (PLAITA_CONSOLE_ENGINE_SYNC_DEADLINE) and a number of versions
// (PLAITA_CONSOLE_ENGINE_SYNC_MAX_VERSIONS). Reaching a bound, or a Redis that does not
// answer, degrades the report; it never keeps the console from starting.

// EngineSyncSettings bound one sync.
type EngineSyncSettings struct {
	Deadline    time.Duration // 0: DefaultEngineSyncDeadline
	MaxVersions int           // 0: DefaultEngineSyncMaxVersions
	Batch       int           // versions per pipeline (0: EngineSyncBatch)
	Now         func() time.Time
	// Singletons, when set, runs the sync on one console at a time (SingletonEngineSync): a
	// console that starts while another syncs leaves the sync to it.
	Singletons *Singletons
}

// Defaults of the sync's bounds (shared/CONFIG.md's defaults of the variables).
const (
	DefaultEngineSyncDeadline    = 5 * time.Second
	DefaultEngineSyncMaxVersions = 50000
	EngineSyncBatch              = 200
)

// Statuses of an engine sync report.
const (
	SyncReady    = "ready"
	SyncDegraded = "degraded"
)

// Why a sync stopped before the end of the record.
const (
	TruncatedDeadline    = "deadline"
	TruncatedMaxVersions = "max_versions"
	TruncatedError       = "error"
)

// EngineSyncReport is what a sync did (GET /health's engine_sync).
type EngineSyncReport struct {
	Status    string `json:"status" enum:"ready,degraded" doc:"degraded: a bound was reached, or versions could not be written"`
	Versions  int    `json:"versions" doc:"recorded versions read"`
	Written   int    `json:"written" doc:"versions Redis lacked, written back"`
	Skipped   int    `json:"skipped" doc:"versions Redis had (left as they are)"`
	Errors    int    `json:"errors" doc:"versions that could not be written"`
	Batches   int    `json:"batches" doc:"pipelines sent"`
	Truncated bool   `json:"truncated" doc:"the sync stopped before the end of the record"`
	// TruncatedReason: deadline, max_versions, or error (the database or Redis failed).
	TruncatedReason string    `json:"truncated_reason,omitempty" enum:"deadline,max_versions,error"`
	ElapsedMS       int64     `json:"elapsed_ms"`
	Error           string    `json:"error,omitempty" doc:"the first failure"`
	StartedAt       time.Time `json:"started_at"`
	// WrittenSample names the first versions written back (tenant/flow@version).
	WrittenSample []string `json:"written_sample,omitempty"`
	// RanBy: another console held the sync's lease and ran it (several consoles on one
	// database); this one did not.
	RanBy string `json:"ran_by,omitempty" doc:"another console on the same database ran the sync (it held its lease); this one did not"`
}

// leaseMargin is how much longer than the work it guards a singleton's lease lasts: the
// clocks of two consoles may differ by that much.
const leaseMargin = 5 * time.Second

// engineSyncSample bounds WrittenSample.
const engineSyncSample = 10

// EngineSync writes the recorded versions back to Redis and keeps the last report.
type EngineSync struct {
	db    FlowRecords
	flows *store.Flows
	s     EngineSyncSettings

	mu   sync.Mutex
	last *EngineSyncReport
}

// NewEngineSync returns the sync of db's records to the plane's Redis (its flow store, with
// the task queue's keys reserved: a record that would write one is refused, as its
// publication was).
func NewEngineSync(p *Plane, db FlowRecords, s EngineSyncSettings) *EngineSync {
	if s.Deadline <= 0 {
		s.Deadline = DefaultEngineSyncDeadline
	}
	if s.MaxVersions <= 0 {
		s.MaxVersions = DefaultEngineSyncMaxVersions
	}
	if s.Batch <= 0 {
		s.Batch = EngineSyncBatch
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	return &EngineSync{db: db, flows: p.d.Flows, s: s}
}

// Last is the last report (nil before the first sync).
func (e *EngineSync) Last() *EngineSyncReport {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last == nil {
		return nil
	}
	r := *e.last
	return &r
}

// Run syncs once within the deadline (and ctx) and returns the report, kept for Last.
func (e *EngineSync) Run(ctx context.Context) EngineSyncReport {
	start := e.s.Now()
	r := EngineSyncReport{Status: SyncReady, StartedAt: start.UTC()}
	ctx, cancel := context.WithTimeout(ctx, e.s.Deadline)
	defer cancel()
	if l := e.s.Singletons; l != nil {
		held, holder, err := l.Hold(ctx, SingletonEngineSync, e.s.Deadline+leaseMargin)
		switch {
		case err != nil:
			r.Truncated, r.TruncatedReason, r.Error = true, TruncatedError, err.Error()
		case !held:
			r.RanBy = holder
		default:
			e.run(ctx, &r)
			// A release that fails leaves the lease to end by itself.
			_ = l.Release(context.WithoutCancel(ctx), SingletonEngineSync)
		}
	} else {
		e.run(ctx, &r)
	}
	if r.Truncated || r.Errors > 0 {
		r.Status = SyncDegraded
	}
	r.ElapsedMS = e.s.Now().Sub(start).Milliseconds()
	e.mu.Lock()
	e.last = &r
	e.mu.Unlock()
	return r
}

func (e *EngineSync) run(ctx context.Context, r *EngineSyncReport) {
	stop := func(reason string, err error) {
		r.Truncated, r.TruncatedReason = true, reason
		if err != nil && r.Error == "" {
			r.Error = err.Error()
		}
	}
	cursor := ""
	for {
		if ctx.Err() != nil {
			stop(TruncatedDeadline, nil)
			return
		}
		left := e.s.MaxVersions - r.Versions
		if left <= 0 {
			stop(TruncatedMaxVersions, nil)
			return
		}
		page, err := e.db.AllVersions(ctx, sqlite.ListOptions{Cursor: cursor, Limit: min(e.s.Batch, left)})
		if err != nil {
			if ctx.Err() != nil {
				stop(TruncatedDeadline, err)
			} else {
				stop(TruncatedError, fmt.Errorf("read the version records: %w", err))
			}
			return
		}
		if len(page.Items) == 0 {
			return
		}
		if err := e.batch(ctx, r, page.Items); err != nil {
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				stop(TruncatedDeadline, nil) // Redis answered nothing within the deadline (half-open)
			} else {
				stop(TruncatedError, nil)
			}
			return
		}
		if cursor = page.Next; cursor == "" {
			return
		}
	}
}

// batch writes one page back in one pipeline; the Redis failure of an item, when Redis failed
// (the sync stops: the next batches would fail alike).
func (e *EngineSync) batch(ctx context.Context, r *EngineSyncReport, vs []sqlite.FlowVersion) error {
	items := make([]store.FlowRestore, len(vs))
	for i, v := range vs {
		items[i] = store.FlowRestore{Tenant: v.Tenant, FlowID: v.FlowID, Version: v.Version, Definition: v.Definition, PublishedAt: v.PublishedAt}
	}
	r.Versions += len(vs)
	r.Batches++
	var redisErr error
	for i, o := range e.flows.Restore(ctx, items) {
		switch {
		case o.Err != nil:
			r.Errors++
			if r.Error == "" {
				r.Error = fmt.Sprintf("%s/%s@%s: %v", vs[i].Tenant, vs[i].FlowID, vs[i].Version, o.Err)
			}
			if redisErr == nil && errors.Is(o.Err, store.ErrRedis) {
				redisErr = o.Err
			}
		case o.Written:
			r.Written++
			if len(r.WrittenSample) < engineSyncSample {
				r.WrittenSample = append(r.WrittenSample, vs[i].Tenant+"/"+vs[i].FlowID+"@"+vs[i].Version)
			}
		default:
			r.Skipped++
		}
	}
	return redisErr
}
