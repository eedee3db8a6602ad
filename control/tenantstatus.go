package control

import (
	"context"
	"time"
)

// The tenant-status reconcile: every tenant's status, from the console's database (the
// authority), published to Redis where the workers, the filter and the schedule role read it
// (a tenant Redis has and the database does not becomes a disabled tombstone). The console runs
// it at start and every PLAITA_TENANT_STATUS_RECONCILE_SECONDS (roles/console.go), an operator
// on POST /api/cluster/tenant-status/reconcile; /health shows the last one. Without the
// periodic one, a Redis-only restore that brought a deleted tenant's "active" back is corrected
// only by hand.

// TenantStatusReport is one reconcile.
type TenantStatusReport struct {
	At         time.Time `json:"at"`
	Trigger    string    `json:"trigger" enum:"start,periodic,api" doc:"what ran it"`
	OK         bool      `json:"ok"`
	Published  []string  `json:"published,omitempty" doc:"the tenants whose status the database gave (not on the public /health)"`
	Tombstoned []string  `json:"tombstoned,omitempty" doc:"tenants Redis had and the database does not: written disabled (not on the public /health)"`
	// The counts of Published and Tombstoned: what the public /health says of them.
	PublishedCount  int    `json:"published_count"`
	TombstonedCount int    `json:"tombstoned_count"`
	Epoch           string `json:"epoch" doc:"PLAITA_DEPLOYMENT_EPOCH, written with the statuses"`
	Error           string `json:"error,omitempty"`
	DurationMS      int64  `json:"duration_ms"`
}

// Triggers of a reconcile.
const (
	TriggerStart    = "start"
	TriggerPeriodic = "periodic"
	TriggerAPI      = "api"
)

// ReconcileTenantStatuses publishes every tenant's status from the database, once (reconciles
// never overlap). The report is also the one LastTenantStatus gives next; the error is the
// database's or Redis's (ErrNoRedis without Redis).
func (a *Accounts) ReconcileTenantStatuses(ctx context.Context, trigger string) (TenantStatusReport, error) {
	if a.redis == nil {
		return TenantStatusReport{}, ErrNoRedis
	}
	a.run.Lock()
	defer a.run.Unlock()
	began := time.Now()
	rep := TenantStatusReport{At: a.s.Now().UTC(), Trigger: trigger, Epoch: a.s.Epoch, Published: []string{}, Tombstoned: []string{}}
	tenants, err := a.db.AllTenants(ctx)
	if err == nil {
		authority := make(map[string]string, len(tenants))
		for _, t := range tenants {
			authority[t.Slug] = string(t.Status)
		}
		res, serr := a.redis.SyncTenantStatuses(ctx, authority, a.s.Epoch)
		if err = serr; err == nil {
			rep.OK = true
			rep.Published = append(rep.Published, res.Published...)
			rep.Tombstoned = append(rep.Tombstoned, res.Tombstoned...)
		}
	}
	rep.DurationMS = time.Since(began).Milliseconds()
	rep.PublishedCount, rep.TombstonedCount = len(rep.Published), len(rep.Tombstoned)
	if err != nil {
		rep.Error = err.Error()
		a.s.Log.Warn().Str("event", "console.tenant_status_publish_failed").Str("trigger", trigger).Err(err).
			Msg("tenant statuses not published: the workers keep what Redis has until the next reconcile")
	} else {
		a.s.Log.Info().Str("event", "console.tenant_status_published").Str("trigger", trigger).Int("published", len(rep.Published)).
			Strs("tombstoned", rep.Tombstoned).Str("epoch", rep.Epoch).Msg("tenant statuses published from the database")
	}
	a.mu.Lock()
	a.last = &rep
	a.mu.Unlock()
	return rep, err
}

// LastTenantStatus is the last reconcile's report (nil before the first).
func (a *Accounts) LastTenantStatus() *TenantStatusReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		return nil
	}
	rep := *a.last
	return &rep
}
