package filter

import (
	"context"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine"
	"plaita/queue"
	"plaita/store"
)

// Fixed knobs of the role (not configuration: no variable sets them).
const (
	// DefaultGrace is how long a wake-up marker may stay "pending" (claimed, not yet marked
	// sent) before another filter takes it over: far longer than the enqueue it covers, so
	// only a claimer that died is overtaken.
	DefaultGrace = 30 * time.Second
	// DefaultOverlap is how far before its cursor a reconcile pass starts: an event whose
	// index write lands after a pass read the feed (a slow pipeline, clocks a few seconds
	// apart) is seen by the next pass. Re-scanned events cost a marker read each.
	DefaultOverlap = 30 * time.Second
	// DefaultHandlers is the number of notifications handled at once; DefaultQueue the
	// notifications waiting for a handler (past it they are dropped, counted, and left to
	// the reconciler).
	DefaultHandlers = 4
	DefaultQueue    = 4096
	// eventTimeout bounds the handling of one event.
	eventTimeout = 30 * time.Second
)

// Settings are the role's knobs, read once at start.
type Settings struct {
	InstanceID string            // PLAITA_INSTANCE_ID: the owner written into wake-up markers
	Expr       engine.ExprLimits // PLAITA_EXPR_*: the match is evaluated as the worker evaluates it

	ReconcileInterval time.Duration // PLAITA_EVENT_RECONCILE_INTERVAL
	ReconcileBackfill time.Duration // PLAITA_EVENT_RECONCILE_BACKFILL (0: no start-up window)
	DisableReconcile  bool          // PLAITA_DISABLE_EVENT_RECONCILE

	SweepInterval time.Duration // PLAITA_EVENT_INDEX_SWEEP_INTERVAL
	SweepBudget   int           // PLAITA_EVENT_INDEX_SWEEP_BUDGET (members checked per tick)
	DisableSweep  bool          // PLAITA_DISABLE_EVENT_INDEX_SWEEP

	// Grace, Overlap, Handlers and Queue default to the constants above (tests shorten them).
	Grace    time.Duration
	Overlap  time.Duration
	Handlers int
	Queue    int
}

// SettingsFrom reads the role's settings from the configuration (once, at start).
func SettingsFrom(cfg *config.Config) Settings {
	return Settings{
		InstanceID: config.InstanceID.In(cfg),
		Expr: engine.ExprLimits{
			MaxResultSize: config.ExprMaxResultSize.In(cfg),
			GrowthFactor:  config.ExprGrowthFactor.In(cfg),
			MaxResultHard: config.ExprMaxResultHard.In(cfg),
		},
		ReconcileInterval: seconds(config.EventReconcileInterval.In(cfg)),
		ReconcileBackfill: seconds(config.EventReconcileBackfill.In(cfg)),
		DisableReconcile:  config.DisableEventReconcile.In(cfg),
		SweepInterval:     time.Duration(config.EventIndexSweepInterval.In(cfg)) * time.Second,
		SweepBudget:       config.EventIndexSweepBudget.In(cfg),
		DisableSweep:      config.DisableEventIndexSweep.In(cfg),
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// withDefaults fills the fixed knobs and clamps what the configuration already clamped (a
// zero value in a test).
func (s Settings) withDefaults() Settings {
	if s.Grace <= 0 {
		s.Grace = DefaultGrace
	}
	if s.Overlap <= 0 {
		s.Overlap = DefaultOverlap
	}
	if s.Handlers < 1 {
		s.Handlers = DefaultHandlers
	}
	if s.Queue < 1 {
		s.Queue = DefaultQueue
	}
	if s.ReconcileInterval <= 0 {
		s.ReconcileInterval = 300 * time.Second
	}
	if s.ReconcileBackfill < 0 {
		s.ReconcileBackfill = time.Hour
	}
	if s.SweepInterval <= 0 {
		s.SweepInterval = 60 * time.Second
	}
	if s.SweepBudget < 1 {
		s.SweepBudget = 1
	}
	return s
}

// Deps are what the role's services use; the wiring builds them.
type Deps struct {
	Events *store.Events
	Store  *store.Redis
	Flows  *store.Flows
	// Enqueue writes a resume to the task stream the workers read: queue.Producer.Enqueue,
	// which stamps this process's config generations and holds the event's data to
	// PLAITA_EXECUTION_STATE_MAX_BYTES (a refusal matches queue.ErrInvalidEnvelope).
	Enqueue func(ctx context.Context, env queue.Envelope) (string, error)
	Log     zerolog.Logger
	Metrics *metrics.Set
	// Now is the clock (nil: time.Now, set by every constructor through withDefaults).
	Now func() time.Time
}

// withDefaults is d with its clock set: each service's constructor applies it once.
func (d Deps) withDefaults() Deps {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Metrics == nil {
		d.Metrics = metrics.NewSet()
	}
	return d
}
