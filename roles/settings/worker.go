package settings

import (
	"time"

	"plaita/config"
)

// The worker's gate and wake-up settings. They are declared here, beside their builders,
// rather than in roles/worker: package worker's tests import this package (for the queue's
// and the store's settings), so this package cannot import roles/worker. A zero value is the
// documented default of every field.

// TenantStatus are the tenant-status gate's knobs.
type TenantStatus struct {
	// DeploymentEpoch is PLAITA_DEPLOYMENT_EPOCH ("" = "legacy").
	DeploymentEpoch string
	// EpochStrict is PLAITA_TENANT_STATUS_EPOCH_STRICT: nil = auto (the epoch gate is on when
	// DeploymentEpoch is not "legacy"), otherwise on or off.
	EpochStrict *bool
}

// Quota are the per-tenant running quota's knobs.
type Quota struct {
	// MaxRunning is PLAITA_TENANT_MAX_RUNNING, the limit of a tenant without an override in
	// <root>:tenant_quota; ≤ 0 = unlimited.
	MaxRunning int
	// RunningTTL is PLAITA_TENANT_RUNNING_TTL_SECONDS, the lifetime of a slot (≤ 0: 24 h).
	RunningTTL time.Duration
	// DeferMax is PLAITA_TENANT_QUOTA_DEFER_MAX, the deferrals of an over-quota start before it
	// runs with quota_bypass (≤ 0: 64).
	DeferMax int
	// Disabled is PLAITA_DISABLE_TENANT_QUOTA: no admission at all.
	Disabled bool
}

// Affinity are the repo-affinity gate's knobs.
type Affinity struct {
	// Disabled is PLAITA_DISABLE_AFFINITY: the check is skipped.
	Disabled bool
}

// Target are the dispatch-target gate's knobs.
type Target struct {
	// Disabled is PLAITA_DISABLE_DISPATCH_TARGET: target_instance_id is ignored.
	Disabled bool
}

// DiskGuard are the free-disk guard's knobs.
type DiskGuard struct {
	// MinFreeGiB is PLAITA_WORKER_MIN_FREE_DISK_GIB; ≤ 0 turns the guard off.
	MinFreeGiB float64
	// Path is PLAITA_WORKER_DISK_GUARD_PATH, where free disk is measured ("" = ".").
	Path string
}

// Wakeups are the wake-up registration's knobs (the delay queue's name is DelayQueue's).
type Wakeups struct {
	// EventTTL is PLAITA_EVENT_TTL_SECONDS, the lifetime of a subscription or approval record
	// past its due time (≤ 0: 7 days).
	EventTTL time.Duration
}

// WorkerTenantStatus maps PLAITA_DEPLOYMENT_EPOCH and PLAITA_TENANT_STATUS_EPOCH_STRICT.
func WorkerTenantStatus(cfg *config.Config) TenantStatus {
	s := TenantStatus{DeploymentEpoch: config.DeploymentEpoch.In(cfg)}
	switch config.TenantStatusEpochStrict.In(cfg) {
	case "1":
		s.EpochStrict = new(true)
	case "0":
		s.EpochStrict = new(false)
	}
	return s
}

// WorkerQuota maps the PLAITA_TENANT_* quota variables and PLAITA_DISABLE_TENANT_QUOTA.
func WorkerQuota(cfg *config.Config) Quota {
	return Quota{
		MaxRunning: max(config.TenantMaxRunning.In(cfg), 0),
		RunningTTL: time.Duration(config.TenantRunningTTLSeconds.In(cfg)) * time.Second,
		DeferMax:   config.TenantQuotaDeferMax.In(cfg),
		Disabled:   config.DisableTenantQuota.In(cfg),
	}
}

// WorkerDenyRepos is PLAITA_WORKER_DENY_REPOS as listed (the gate trims items and drops empty
// ones).
func WorkerDenyRepos(cfg *config.Config) []string { return config.WorkerDenyRepos.In(cfg) }

// WorkerAffinity maps PLAITA_DISABLE_AFFINITY.
func WorkerAffinity(cfg *config.Config) Affinity {
	return Affinity{Disabled: config.DisableAffinity.In(cfg)}
}

// WorkerTarget maps PLAITA_DISABLE_DISPATCH_TARGET.
func WorkerTarget(cfg *config.Config) Target {
	return Target{Disabled: config.DisableDispatchTarget.In(cfg)}
}

// WorkerDiskGuard maps PLAITA_WORKER_MIN_FREE_DISK_GIB and PLAITA_WORKER_DISK_GUARD_PATH.
func WorkerDiskGuard(cfg *config.Config) DiskGuard {
	return DiskGuard{MinFreeGiB: config.WorkerMinFreeDiskGiB.In(cfg), Path: config.WorkerDiskGuardPath.In(cfg)}
}

// WorkerWakeups maps PLAITA_EVENT_TTL_SECONDS.
func WorkerWakeups(cfg *config.Config) Wakeups {
	return Wakeups{EventTTL: time.Duration(config.EventTTLSeconds.In(cfg)) * time.Second}
}

// DelayQueue is PLAITA_DELAY_QUEUE, the name queue.NewDelay takes.
func DelayQueue(cfg *config.Config) string { return config.DelayQueue.In(cfg) }
