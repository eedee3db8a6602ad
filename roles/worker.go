package roles

import (
	"context"
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/nodes"
	"plaita/engine/nodes/writefile"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/roles/worker"
	"plaita/store"
	"plaita/store/keys"
)

// runWorker wires the worker's components and runs them until ctx ends (SIGTERM/SIGINT).
//
// Start order: Redis → node types (a refused code backend stops here) → queue group → store →
// registry (status running) → gates → dispatcher → metrics server, then ready.
// Shutdown order (the runbook's drain): not ready + registry status draining at once → the
// dispatcher stops reading, lets in-flight tasks finish and ack, and after
// PLAITA_WORKER_DRAIN_TIMEOUT cancels what is left → status stopping → deregister (a closed gate
// keeps late heartbeats from recreating the key) → residue sweeper, alerts, metrics server.
func runWorker(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	set := metrics.NewSet()
	c, err := redisClient(config.RedisURL.In(cfg))
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer c.Close()

	reg := engine.NewRegistry()
	if err := nodes.Register(reg, nodeOptions(cfg), log); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	q, err := queue.New(c, settings.Queue(cfg), set, log)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	startCtx, cancelStart := context.WithTimeout(ctx, 30*time.Second)
	defer cancelStart()
	if err := q.EnsureGroup(startCtx); err != nil {
		return fmt.Errorf("worker: consumer group: %w", err)
	}
	st := store.NewRedis(c, settings.Store(cfg), keys.DefaultRoot)

	info := worker.InstanceInfoFromConfig(cfg)
	registry := worker.NewRegistry(c, keys.DefaultRoot, info, log, set)
	if err := registry.Start(startCtx); err != nil {
		return fmt.Errorf("worker: registry: %w", err)
	}
	ready := worker.NewReadiness()
	server := worker.NewServer(config.MetricsHost.In(cfg), config.MetricsPort.In(cfg), set, ready, log)
	server.AddCollector(worker.QueueDepthCollector(q, config.QueueName.In(cfg), set, log))
	if err := server.Start(ctx); err != nil {
		registry.Stop(context.Background())
		return fmt.Errorf("worker: metrics endpoint: %w", err)
	}

	tenantStatus, err := worker.NewTenantStatus(c, cfg, keys.DefaultRoot, set, log)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	quota, err := worker.NewQuota(c, cfg, keys.DefaultRoot, set, log)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	root, err := writefile.ResolveRoot(writefile.HostFacts(
		config.NodesWorkspaceRoot.In(cfg), config.AllowUnrestrictedWrites.In(cfg), config.ProjectRoot.In(cfg)))
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	deny := worker.DenyRepos(cfg)
	alerter := worker.NewAlerter(config.AlertWebhook.In(cfg), info.InstanceID, set, log)
	alerter.Start(ctx)
	observer := worker.NewObserver(store.NewLiveEvents(c, keys.DefaultRoot), worker.SettingsFrom(cfg).EventsPublish, set, log)
	observer.Start(context.WithoutCancel(ctx))

	d := worker.NewDispatcher(worker.Deps{
		Client: c, Config: cfg, Root: keys.DefaultRoot, Queue: q, Store: st,
		Flows: engine.NewFlowCache(reg, settings.Engine(cfg).Expr, 1024), Nodes: reg, Engine: settings.Engine(cfg),
		Registry: registry, DenyRepos: &deny, Target: worker.NewTarget(cfg, set, log), TenantStatus: tenantStatus,
		Affinity: worker.NewAffinity(cfg, st, root.Path, set, log), Quota: quota,
		Disk: worker.NewDiskGuard(cfg, log, nil), Alerter: alerter, Observer: observer,
		Log: log, Metrics: set, Settings: worker.SettingsFrom(cfg), Clock: engine.SystemClock{},
	})
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	d.Start(runCtx)
	sweepCtx, stopSweep := context.WithCancel(runCtx)
	sweeperDone := make(chan struct{})
	go func() { defer close(sweeperDone); q.RunSweeper(sweepCtx, queue.DefaultSweepInterval) }()
	ready.SetReady()
	log.Info().Str("event", "worker.started").Str("queue", config.QueueName.In(cfg)).
		Int("concurrency", config.WorkerConcurrency.In(cfg)).Str("metrics", server.Addr()).Msg("worker running")

	<-ctx.Done()

	// Drain: everything below runs on fresh contexts, the process context is done.
	drain := time.Duration(config.WorkerDrainTimeout.In(cfg) * float64(time.Second))
	ready.SetNotReady("draining")
	bg := context.Background()
	if err := registry.SetStatus(bg, worker.StatusDraining); err != nil {
		log.Warn().Err(err).Str("event", "worker.status_write_failed").Msg("could not mark the instance draining")
	}
	log.Info().Str("event", "worker.draining").Dur("timeout", drain).Int("active", d.Active()).Msg("draining: no new work, finishing in-flight tasks")
	drainCtx, cancelDrain := context.WithTimeout(bg, drain)
	d.Stop(drainCtx)
	cancelDrain()
	if err := registry.SetStatus(bg, worker.StatusStopping); err != nil {
		log.Warn().Err(err).Str("event", "worker.status_write_failed").Msg("could not mark the instance stopping")
	}
	stopCtx, cancelStop := context.WithTimeout(bg, 5*time.Second)
	defer cancelStop()
	registry.Stop(stopCtx)
	stopSweep()
	<-sweeperDone
	alerter.Stop(stopCtx)
	observer.Stop(stopCtx)
	server.Stop(stopCtx)
	stopRun()
	log.Info().Str("event", "worker.stopped").Msg("worker stopped")
	return nil
}

// redisClient connects to the URL the preflight accepted. Client-side caching is off: every
// read must see the latest fenced write.
func redisClient(url string) (rueidis.Client, error) {
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("connect to redis at %s: %w", maskedAddr(opt.InitAddress), err)
	}
	return c, nil
}

func maskedAddr(addrs []string) string {
	if len(addrs) == 0 {
		return "(no address)"
	}
	return addrs[0]
}
