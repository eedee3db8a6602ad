package roles

import (
	"context"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/internal/presence"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/roles/filter"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// runFilter wires the filter's services and runs them until ctx ends (SIGTERM/SIGINT).
//
// Start order (service.Group): metrics server → registry (status running) → index janitor →
// reconciler (its start-up pass runs at once) → listener; the role is ready once the listener
// has subscribed. A service that fails to start stops the ones before it, in reverse.
// Shutdown order: not ready + registry status draining → the listener unsubscribes and its
// handlers finish the notifications already queued (what is left is the reconciler's) →
// status stopping → the services stop in reverse: reconciler, janitor, registry
// (deregistered), metrics server last.
func runFilter(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	return runOnRedis(ctx, cfg, log, func(_ context.Context, o onRedis) (roleProcess, error) {
		f := buildFilter(o)
		var svcs []service.Named
		s := filter.SettingsFrom(cfg)
		if s.DisableSweep {
			log.Warn().Str("event", "filter.sweep_disabled").Str("variable", "PLAITA_DISABLE_EVENT_INDEX_SWEEP").
				Msg("event index janitor off: expired events stay in the indexes until a publish prunes them or a list reads them")
		} else {
			svcs = append(svcs, service.Named{Name: "index janitor", Service: f.janitor})
		}
		if s.DisableReconcile {
			log.Warn().Str("event", "filter.reconcile_disabled").Str("variable", "PLAITA_DISABLE_EVENT_RECONCILE").
				Msg("event reconciler off: an event whose notification is lost (no filter subscribed, a dropped connection) wakes nothing")
		} else {
			svcs = append(svcs, service.Named{Name: "reconciler", Service: f.reconciler})
		}
		svcs = append(svcs, service.Named{Name: "listener", Service: f.listener})
		return roleProcess{registry: f.registry, services: svcs, selfReady: true, drain: f.listener.Stop, drainFor: 10 * time.Second, stopFor: 5 * time.Second,
			started: func() {
				log.Info().Str("event", "filter.started").Str("queue", config.QueueName.In(cfg)).Str("metrics", o.server.Addr()).
					Dur("reconcile_interval", s.ReconcileInterval).Dur("reconcile_backfill", s.ReconcileBackfill).
					Bool("reconcile", !s.DisableReconcile).Bool("sweep", !s.DisableSweep).Msg("filter running")
			}}, nil
	})
}

// filterParts are the filter's services.
type filterParts struct {
	registry   *presence.Registry
	listener   *filter.Listener
	reconciler *filter.Reconciler
	janitor    *filter.Janitor
}

// buildFilter builds every part; nothing runs yet. The filter is ready once its listener is
// subscribed.
func buildFilter(o onRedis) *filterParts {
	cfg := o.cfg
	s := filter.SettingsFrom(cfg)
	d := FilterDeps(cfg, o.b, o.set, o.log)
	m := filter.NewMatcher(d, s)
	f := &filterParts{
		registry:   o.presence(roleInstance(cfg, cfg.Role(), config.QueueName.In(cfg), time.Now())),
		listener:   filter.NewListener(d, s, m),
		reconciler: filter.NewReconciler(d, s, m),
		janitor:    filter.NewJanitor(d, s),
	}
	f.listener.OnSubscribed = func(first bool) {
		o.ready.SetReady()
		if !first && !s.DisableReconcile {
			f.reconciler.Trigger() // what was published while unsubscribed reached nobody
		}
	}
	f.listener.OnDown = func(error) { o.ready.SetNotReady("event notifications: not subscribed") }
	if !s.DisableReconcile {
		f.listener.OnOverflow = f.reconciler.TriggerTenant // a dropped notification: a pass of its tenant now
	}
	return f
}

// FilterDeps are the stores the filter's services share and its enqueue: the one producer
// path (queue.Producer) to PLAITA_QUEUE_NAME, the stream the workers read — stamped with this
// process's generations, the event data held to PLAITA_EXECUTION_STATE_MAX_BYTES.
func FilterDeps(cfg *config.Config, b Backend, set *metrics.Set, log zerolog.Logger) filter.Deps {
	producer := queue.NewProducer(b.Queue, config.QueueName.In(cfg), settings.Generations(cfg), config.ExecutionStateMaxBytes.In(cfg), nil)
	return filter.Deps{
		Events:  b.events(settings.Events(cfg)),
		Store:   b.Storage(settings.Store(cfg)),
		Flows:   store.NewFlows(b.Flows, keys.DefaultRoot),
		Enqueue: producer.Enqueue,
		Log:     log, Metrics: set,
	}
}
