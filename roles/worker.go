package roles

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/nodes"
	"plaita/engine/nodes/writefile"
	"plaita/internal/alert"
	"plaita/internal/callctx"
	"plaita/internal/presence"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/roles/worker"
	"plaita/store"
	"plaita/store/keys"
)

// runWorker wires the worker's services and runs them until ctx ends (SIGTERM/SIGINT).
//
// Start order (service.Group): metrics server → registry (status running) → alert sender →
// live events → residue sweeper → dispatcher, then ready. A service that fails to start stops
// the ones before it, in reverse.
// Shutdown order (the drain, README "Operations"): not ready + registry status draining at once → the
// dispatcher stops reading, lets in-flight tasks finish and ack, and after
// PLAITA_WORKER_DRAIN_TIMEOUT cancels what is left → status stopping → the services stop in
// reverse: sweeper, live events and alerts (flushed), registry (deregistered; a closed gate
// keeps late heartbeats from recreating the key), metrics server last.
func runWorker(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	return runOnRedis(ctx, cfg, log, func(ctx context.Context, o onRedis) (roleProcess, error) {
		w, err := buildWorker(o)
		if err != nil {
			return roleProcess{}, err
		}
		groupCtx, cancelGroup := callctx.Within(ctx, callctx.Start)
		defer cancelGroup()
		if err := w.queue.EnsureGroup(groupCtx); err != nil {
			return roleProcess{}, fmt.Errorf("consumer group: %w", err)
		}
		timeout := time.Duration(config.WorkerDrainTimeout.In(cfg) * float64(time.Second))
		return roleProcess{registry: w.registry,
			services: []service.Named{
				{Name: "alerts", Service: w.alerter},
				{Name: "live events", Service: w.observer},
				{Name: "residue sweeper", Service: w.queue.Sweeper(queue.DefaultSweepInterval)},
				{Name: "dispatcher", Service: w.dispatcher},
			},
			drain: func(ctx context.Context) {
				log.Info().Str("event", "worker.draining").Dur("timeout", timeout).Int("active", w.dispatcher.Active()).
					Msg("draining: no new work, finishing in-flight tasks")
				w.dispatcher.Stop(ctx)
			},
			drainFor: timeout, stopFor: 5 * time.Second,
			started: func() {
				ev := log.Info().Str("event", "worker.started").Str("queue", config.QueueName.In(cfg)).
					Int("concurrency", config.WorkerConcurrency.In(cfg)).Str("metrics", o.server.Addr())
				if root, err := writefileRoot(cfg); err == nil { // an error stopped the start before this line
					ev = ev.Str("writefile_root", root.Path).Str("writefile_rule", string(root.Rule))
				}
				ev.Msg("worker running")
			}}, nil
	})
}

// workerParts are the worker's services and what the drain needs.
type workerParts struct {
	queue      *queue.Queue
	registry   *presence.Registry
	alerter    *alert.Alerter
	observer   *worker.Observer
	dispatcher *worker.Dispatcher
}

// buildWorker builds every part; nothing runs yet. A refused code backend or an invalid jail
// root stops here.
func buildWorker(o onRedis) (*workerParts, error) {
	cfg, b, set, log := o.cfg, o.b, o.set, o.log
	reg := engine.NewRegistry()
	if err := nodes.Register(reg, settings.Nodes(cfg), log); err != nil {
		return nil, err
	}
	q, err := queue.New(b.Queue, settings.Queue(cfg), set, log)
	if err != nil {
		return nil, err
	}
	st := b.Storage(settings.Store(cfg))
	info := worker.InstanceInfo(cfg)
	info.MetricsAddr = metricsAddr(cfg, info.Host)
	w := &workerParts{queue: q, registry: o.presence(info),
		alerter:  alert.New(config.AlertWebhook.In(cfg), info.InstanceID, set, log),
		observer: worker.NewObserver(store.NewLiveEvents(b.Ephemeral, keys.DefaultRoot), worker.SettingsFrom(cfg).EventsPublish, set, log),
	}
	o.server.AddCollector(worker.QueueDepthCollector(q, config.QueueName.In(cfg), set, log))
	deps, err := gateDeps(cfg, b, st, set, log)
	if err != nil {
		return nil, err
	}
	deps.Root, deps.Queue, deps.Store = keys.DefaultRoot, q, st
	deps.Flows, deps.Nodes, deps.Engine = engine.NewFlowCache(reg, settings.Engine(cfg).Expr, 1024), reg, settings.Engine(cfg)
	deps.Registry, deps.Alerter, deps.Observer = w.registry, w.alerter, w.observer
	deps.Log, deps.Metrics, deps.Settings, deps.Clock = log, set, worker.SettingsFrom(cfg), engine.SystemClock{}
	deps.Credentials = credentials(b, credentialsKey(cfg, false, log))
	w.dispatcher = worker.NewDispatcher(deps)
	return w, nil
}

// writefileRoot is the root the writefile nodes of a process configured by cfg write under
// (writefile.ResolveRoot on this host): the worker's gates use it, its start-up line and
// plaita dev's first lines say it.
func writefileRoot(cfg *config.Config) (writefile.Root, error) {
	return writefile.ResolveRoot(writefile.HostFacts(
		config.NodesWorkspaceRoot.In(cfg), config.AllowUnrestrictedWrites.In(cfg), config.ProjectRoot.In(cfg)))
}

// gateDeps builds the admission gates and the wake-up records.
func gateDeps(cfg *config.Config, b Backend, st *store.Redis, set *metrics.Set, log zerolog.Logger) (worker.Deps, error) {
	tenantStatus, err := worker.NewTenantStatusGate(st, settings.WorkerTenantStatus(cfg), set, log)
	if err != nil {
		return worker.Deps{}, err
	}
	quota, err := worker.NewQuotaGate(st, settings.WorkerQuota(cfg), set, log)
	if err != nil {
		return worker.Deps{}, err
	}
	// Read on every delivery otherwise: a status or quota change takes effect within a second.
	tenantStatus.CacheFor, quota.CacheFor = worker.GateCacheTTL, worker.GateCacheTTL
	root, err := writefileRoot(cfg)
	if err != nil {
		return worker.Deps{}, err
	}
	delay, err := queue.NewDelay(b.Delay, settings.DelayQueue(cfg))
	if err != nil {
		return worker.Deps{}, err
	}
	deny := worker.NewRepoDeny(settings.WorkerDenyRepos(cfg))
	return worker.Deps{DenyRepos: &deny, Target: worker.NewTargetGate(settings.WorkerTarget(cfg), set, log),
		TenantStatus: tenantStatus, Quota: quota, Disk: worker.NewDiskGuardGate(settings.WorkerDiskGuard(cfg), log, nil),
		Affinity:    worker.NewAffinityGate(st, settings.WorkerAffinity(cfg), root.Path, set, log),
		Wakeups:     worker.NewWakeups(st, delay, settings.WorkerWakeups(cfg)),
		Definitions: store.NewFlows(b.Flows, keys.DefaultRoot)}, nil
}

// RedisClient connects to the URL the preflight accepted. Client-side caching is off: every
// read must see the latest fenced write.
func RedisClient(url string) (rueidis.Client, error) {
	return redisClient(url, nil)
}

// ConsoleRedisClient is the console's client: a read-only command that cannot reach Redis at
// all (its connection's dial fails: refused, unroutable, timed out) is sent again at most
// consoleReadRetries times, where rueidis retries it until its context ends. A Redis that is
// gone then fails every page at once, as the pages that write fail, instead of holding the
// pages that only read for the whole call bound (9.7 s measured for the flows, the cluster,
// the schedules and the dead letters, where the list answered in 10 ms). Any other network
// error (a connection cut under a command, a subscription's) is retried as rueidis does.
func ConsoleRedisClient(url string) (rueidis.Client, error) {
	return redisClient(url, func(attempts int, _ rueidis.Completed, err error) time.Duration {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			if attempts > consoleReadRetries {
				return -1
			}
			return time.Duration(50*attempts) * time.Millisecond
		}
		return retryPause(attempts)
	})
}

// consoleReadRetries bounds a console read's retries when Redis cannot be dialled (50 ms, then
// 100 ms).
const consoleReadRetries = 2

// retryPause is rueidis' own pause before the attempts-th retry (its default is not exported):
// a doubling number of microseconds with as much jitter, at most a second.
func retryPause(attempts int) time.Duration {
	base := time.Duration(1<<min(attempts, 20)) * time.Microsecond
	return min(time.Second, base+mrand.N(base))
}

func redisClient(url string, retry rueidis.RetryDelayFn) (rueidis.Client, error) {
	opt, err := clientOptions(url, retry)
	if err != nil {
		return nil, err
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("connect to redis at %s: %w", maskedAddr(opt.InitAddress), err)
	}
	return c, nil
}

// connBufferBytes is each connection's read and write buffer. rueidis's default, 0.5 MiB each
// way, holds pipelines far longer than a process here sends: with it a worker at concurrency 64
// peaked at 47.8 MiB (VmHWM), 19.1 MiB of it anonymous; with 64 KiB at 44.5 MiB, 14.7 MiB, and
// the same executions/s (bench e2e, interleaved pairs at concurrency 10 and 64). A write
// longer than the buffer goes out in pieces of it, a read longer than it straight into its
// destination.
const connBufferBytes = 64 << 10

// clientOptions are the options of every client a role makes: the URL's, client-side caching
// off (every read must see the latest fenced write), retry the given pause (nil: rueidis's).
func clientOptions(url string, retry rueidis.RetryDelayFn) (rueidis.ClientOption, error) {
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return opt, fmt.Errorf("redis url: %w", err)
	}
	opt.DisableCache = true
	opt.RetryDelay = retry
	opt.ReadBufferEachConn, opt.WriteBufferEachConn = connBufferBytes, connBufferBytes
	return opt, nil
}

func maskedAddr(addrs []string) string {
	if len(addrs) == 0 {
		return "(no address)"
	}
	return addrs[0]
}

// InProcessWorker is a worker's services for a process that runs one beside its own work
// (`plaita bench`): no metrics server, no alerts, no readiness.
type InProcessWorker struct {
	Queue      *queue.Queue
	Dispatcher *worker.Dispatcher
	// Services are the registry presence, the live events and the dispatcher, in start order.
	Services []service.Named
}

// NewInProcessWorker builds a worker on the configuration a preflight accepted; nothing runs yet.
func NewInProcessWorker(cfg *config.Config, c rueidis.Client, set *metrics.Set, log zerolog.Logger) (*InProcessWorker, error) {
	w, err := buildWorker(newOnRedis(cfg, RedisBackend(c), set, log))
	if err != nil {
		return nil, err
	}
	return &InProcessWorker{Queue: w.queue, Dispatcher: w.dispatcher, Services: []service.Named{
		{Name: "registry", Service: w.registry}, {Name: "live events", Service: w.observer}, {Name: "dispatcher", Service: w.dispatcher}}}, nil
}
