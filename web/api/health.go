package api

import (
	"context"
	"net/http"
	"time"

	"plaita/control"
)

// The console's health endpoints, on its own port: /healthz (the process runs), /readyz (it
// takes traffic: not while starting or draining) and /health (a JSON summary for operators).
// They answer anyone (a load balancer, a probe), so what they say names no tenant, host, path
// or execution: /health gives counts and the kind of a failure; a platform admin's credential
// (the admin key, a platform admin's session) gets the whole report with the errors and names.

type textOut struct {
	Status      int
	ContentType string `header:"Content-Type"`
	Body        []byte
}

func text(status int, s string) *textOut {
	return &textOut{Status: status, ContentType: "text/plain; charset=utf-8", Body: []byte(s + "\n")}
}

func (a *API) healthz(context.Context, *Call, *struct{}) (*textOut, error) {
	return text(http.StatusOK, "ok"), nil
}

func (a *API) readyz(context.Context, *Call, *struct{}) (*textOut, error) {
	if ok, why := a.ready(); !ok {
		return text(http.StatusServiceUnavailable, "not ready: "+why), nil
	}
	return text(http.StatusOK, "ready"), nil
}

// ready is the process's readiness with the drain.
func (a *API) ready() (bool, string) {
	if a.draining.Load() {
		return false, "draining"
	}
	if a.d.Ready != nil {
		return a.d.Ready.Ready()
	}
	return true, ""
}

// HealthReport is GET /health.
type HealthReport struct {
	Status   string          `json:"status" enum:"ok,degraded" doc:"degraded: a dependency does not answer, the console has no Redis, the last tenant-status reconcile failed, or the engine sync was degraded"`
	Version  string          `json:"version"`
	Ready    bool            `json:"ready"`
	Reason   string          `json:"reason,omitempty" doc:"why not ready"`
	Mode     string          `json:"mode" enum:"redis,local,no-redis" doc:"local: Redis was unreachable at start, executions run in the console's process on its database; no-redis: the same without local mode (an embedding with no runner)"`
	Warning  string          `json:"warning,omitempty"`
	Database DependencyState `json:"database"`
	Redis    DependencyState `json:"redis"`
	// TenantStatus is the tenant-status reconcile: how often it runs and its last result.
	TenantStatus *TenantStatusHealth `json:"tenant_status_reconcile,omitempty"`
	// EngineSync is the start's write-back of the recorded flow versions to Redis
	// (control/engine_sync.go); absent without Redis.
	EngineSync *control.EngineSyncReport `json:"engine_sync,omitempty"`
	// Reconcile is local mode's start-up orphan reconcile (PLAITA_CONSOLE_RECONCILE_ORPHANS): the
	// executions an earlier version's local mode left running.
	Reconcile *OrphanReconcile `json:"reconcile,omitempty"`
}

// OrphanReconcile is what local mode's start-up reconcile did with the executions a stopped
// console left running: the counts, and (for a platform admin) the executions.
type OrphanReconcile struct {
	control.ReconcileResult
	ChangedCount int    `json:"changed_count"`
	SkippedCount int    `json:"skipped_count"`
	FailedCount  int    `json:"failed_count"`
	Error        string `json:"error,omitempty"`
}

// TenantStatusHealth is the tenant-status reconcile on /health.
type TenantStatusHealth struct {
	IntervalSeconds int64               `json:"interval_seconds" doc:"PLAITA_TENANT_STATUS_RECONCILE_SECONDS; 0: only at start and on POST /api/cluster/tenant-status/reconcile"`
	Last            *TenantStatusReport `json:"last,omitempty"`
	Warning         string              `json:"warning,omitempty"`
}

// DependencyState is whether a dependency answers.
type DependencyState struct {
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
	LatencyMS int64  `json:"latency_ms"`
}

type healthOut struct{ Body HealthReport }

// tenantStatusHealth says how the tenant statuses in Redis are kept.
func (a *API) tenantStatusHealth() *TenantStatusHealth {
	h := &TenantStatusHealth{IntervalSeconds: int64(a.s.TenantStatusInterval / time.Second), Last: a.d.Accounts.LastTenantStatus()}
	switch {
	case h.IntervalSeconds == 0:
		h.Warning = "the periodic tenant-status reconcile is off (PLAITA_TENANT_STATUS_RECONCILE_SECONDS=0): after a Redis-only restore, " +
			"POST /api/cluster/tenant-status/reconcile corrects the statuses"
	case h.Last != nil && !h.Last.OK:
		h.Warning = "the last tenant-status reconcile failed: the workers keep what Redis has until the next one"
	}
	return h
}

// HealthProbe bounds each dependency's probe (the waiting server's /health too).
const HealthProbe = 2 * time.Second

func (a *API) health(ctx context.Context, c *Call, _ *struct{}) (*healthOut, error) {
	r := a.healthReport(ctx)
	if p, d := a.authenticate(ctx, c.hc); d != nil || !p.Platform {
		r = r.public()
	}
	return &healthOut{Body: r}, nil
}

// public is what anyone may read of the report: no tenant, execution, host, address or path —
// a failure is named by its kind ("not answering"), the lists by their counts.
func (r HealthReport) public() HealthReport {
	hide := func(s *DependencyState) {
		if s.Error != "" {
			s.Error = "not answering (the console's log and the admin's /health say why)"
		}
	}
	hide(&r.Database)
	hide(&r.Redis)
	if r.TenantStatus != nil {
		ts := *r.TenantStatus
		if ts.Last != nil {
			last := *ts.Last
			last.Published, last.Tombstoned = nil, nil
			if last.Error != "" {
				last.Error = "failed (the console's log says why)"
			}
			ts.Last = &last
		}
		r.TenantStatus = &ts
	}
	if r.EngineSync != nil {
		es := *r.EngineSync
		es.WrittenSample = nil
		if es.Error != "" {
			es.Error = "failed (the console's log says why)"
		}
		r.EngineSync = &es
	}
	if r.Reconcile != nil {
		rc := *r.Reconcile
		rc.Changed, rc.Skipped, rc.Failed = nil, nil, nil
		if rc.Error != "" {
			rc.Error = "failed (the console's log says why)"
		}
		r.Reconcile = &rc
	}
	return r
}

// healthReport is the whole report, a platform admin's.
func (a *API) healthReport(ctx context.Context) HealthReport {
	probe := func(f func(context.Context) error) DependencyState {
		pctx, cancel := context.WithTimeout(ctx, HealthProbe)
		defer cancel()
		start := time.Now()
		err := f(pctx)
		s := DependencyState{OK: err == nil, LatencyMS: time.Since(start).Milliseconds()}
		if err != nil {
			s.Error = err.Error()
		}
		return s
	}
	r := HealthReport{Status: "ok", Version: a.s.Version, Mode: "redis", Database: probe(a.d.Accounts.PingDB)}
	r.Ready, r.Reason = a.ready()
	switch {
	case a.d.LocalMode:
		r.Mode = "local"
		r.Redis = DependencyState{Error: "unreachable at start"}
		if a.d.RedisErr != nil {
			r.Redis.Error = "unreachable at start: " + a.d.RedisErr.Error()
		}
		r.Warning = "LOCAL MODE: Redis was unreachable when the console started; the worker, filter, delay and schedule roles run " +
			"in this process on its database — one process, not a cluster. Restart the console once Redis answers: it hands its " +
			"executions to Redis and runs there"
		r.TenantStatus = a.tenantStatusHealth()
		if o := a.d.Orphans; o != nil {
			r.Reconcile = &OrphanReconcile{ReconcileResult: o.Result, ChangedCount: len(o.Result.Changed), SkippedCount: len(o.Result.Skipped),
				FailedCount: len(o.Result.Failed), Error: o.Error}
		}
	case !a.d.Accounts.HasRedis():
		r.Mode = "no-redis"
		r.Redis = DependencyState{Error: "unreachable at start"}
		if a.d.RedisErr != nil {
			r.Redis.Error = "unreachable at start: " + a.d.RedisErr.Error()
		}
		r.Warning = "Redis was unreachable when the console started: flows, executions and tenant statuses answer 503; " +
			"restart the console once Redis answers"
	default:
		r.Redis = probe(a.d.Accounts.PingRedis)
		r.TenantStatus = a.tenantStatusHealth()
		if a.d.EngineSync != nil {
			r.EngineSync = a.d.EngineSync.Last()
		}
	}
	if !r.Database.OK || !r.Redis.OK || r.TenantStatus != nil && r.TenantStatus.Last != nil && !r.TenantStatus.Last.OK ||
		r.EngineSync != nil && r.EngineSync.Status != control.SyncReady {
		r.Status = "degraded"
	}
	return r
}
