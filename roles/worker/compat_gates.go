package worker

// Adapters with the configuration-taking signatures that the dispatcher, roles/worker.go and
// their tests still call. TO BE REMOVED (the whole file) once those callers build the settings
// in roles/ (settings.Worker*, settings.DelayQueue) and call NewTenantStatusGate, NewQuotaGate,
// NewRepoDeny, NewTargetGate, NewAffinityGate, NewDiskGuardGate and Wakeups.Register directly.
// A nil configuration gives the zero settings, i.e. the defaults, as before.

import (
	"context"
	"errors"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// compatStore is a store over c for the gates' platform keys (their methods use no storage
// setting). An invalid root is an error, as before.
func compatStore(c rueidis.Client, root string) (*store.Redis, error) {
	if _, err := keys.For(root, keys.DefaultTenant); err != nil {
		return nil, err
	}
	return store.NewRedis(c, store.DefaultSettings(), root), nil
}

// NewTenantStatus is NewTenantStatusGate with the settings of cfg. To be removed.
func NewTenantStatus(c rueidis.Client, cfg *config.Config, root string, set *metrics.Set, log zerolog.Logger) (*TenantStatus, error) {
	st, err := compatStore(c, root)
	if err != nil {
		return nil, err
	}
	var s settings.TenantStatus
	if cfg != nil {
		s = settings.WorkerTenantStatus(cfg)
	}
	return NewTenantStatusGate(st, s, set, log)
}

// NewQuota is NewQuotaGate with the settings of cfg. To be removed.
func NewQuota(c rueidis.Client, cfg *config.Config, root string, set *metrics.Set, log zerolog.Logger) (*Quota, error) {
	st, err := compatStore(c, root)
	if err != nil {
		return nil, err
	}
	var s settings.Quota
	if cfg != nil {
		s = settings.WorkerQuota(cfg)
	}
	return NewQuotaGate(st, s, set, log)
}

// DenyRepos is NewRepoDeny with the list of cfg. To be removed.
func DenyRepos(cfg *config.Config) RepoDeny {
	if cfg == nil {
		return RepoDeny{}
	}
	return NewRepoDeny(settings.WorkerDenyRepos(cfg))
}

// NewAffinity is NewAffinityGate with the settings of cfg. To be removed.
func NewAffinity(cfg *config.Config, st *store.Redis, root string, set *metrics.Set, log zerolog.Logger) *Affinity {
	var s settings.Affinity
	if cfg != nil {
		s = settings.WorkerAffinity(cfg)
	}
	return NewAffinityGate(st, s, root, set, log)
}

// NewTarget is NewTargetGate with the settings of cfg. To be removed.
func NewTarget(cfg *config.Config, set *metrics.Set, log zerolog.Logger) *Target {
	var s settings.Target
	if cfg != nil {
		s = settings.WorkerTarget(cfg)
	}
	return NewTargetGate(s, set, log)
}

// NewDiskGuard is NewDiskGuardGate with the settings of cfg. To be removed.
func NewDiskGuard(cfg *config.Config, log zerolog.Logger, statfs func(string) (uint64, error)) *DiskGuard {
	var s settings.DiskGuard
	if cfg != nil {
		s = settings.WorkerDiskGuard(cfg)
	}
	return NewDiskGuardGate(s, log, statfs)
}

// DelayScheduledKey is queue.DelayScheduledKey of cfg's PLAITA_DELAY_QUEUE. To be removed
// (use queue.Delay.ScheduledKey).
func DelayScheduledKey(cfg *config.Config) string {
	return queue.DelayScheduledKey(settings.DelayQueue(cfg))
}

// RegisterWakeup is Wakeups.Register with the settings of cfg. To be removed.
func RegisterWakeup(ctx context.Context, c rueidis.Client, cfg *config.Config, root string, st *state.Execution) error {
	if cfg == nil {
		return errors.New("register wake-up: no configuration (the delay queue has no name)")
	}
	delay, err := queue.NewDelay(c, settings.DelayQueue(cfg))
	if err != nil {
		return err
	}
	return NewWakeups(store.NewRedis(c, store.DefaultSettings(), root), delay, settings.WorkerWakeups(cfg)).Register(ctx, st)
}

// DelayEntry, Subscription and Approval are the wake-up records with their times as the
// strings they are stored as, for the callers that decode them. To be removed (use
// queue.DelayEntry, store.Subscription, store.Approval).
type DelayEntry struct {
	ExecutionID string           `json:"execution_id"`
	TenantID    string           `json:"tenant_id"`
	FlowID      string           `json:"flow_id"`
	FlowVersion string           `json:"flow_version"`
	ResumeType  state.ResumeType `json:"resume_type"`
	Node        string           `json:"node"`
	Due         string           `json:"due"`
}

// Subscription: see DelayEntry.
type Subscription struct {
	ExecutionID string `json:"execution_id"`
	TenantID    string `json:"tenant_id"`
	FlowID      string `json:"flow_id"`
	FlowVersion string `json:"flow_version"`
	Node        string `json:"node"`
	EventType   string `json:"event_type"`
	Match       string `json:"match,omitempty"`
	Since       string `json:"since"`
	ExpiresAt   string `json:"expires_at,omitempty"`
}

// Approval: see DelayEntry.
type Approval struct {
	ExecutionID string `json:"execution_id"`
	TenantID    string `json:"tenant_id"`
	FlowID      string `json:"flow_id"`
	FlowVersion string `json:"flow_version"`
	Node        string `json:"node"`
	Message     string `json:"message,omitempty"`
	Since       string `json:"since"`
	Due         string `json:"due,omitempty"`
}
