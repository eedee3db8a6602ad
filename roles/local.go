package roles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/control"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/roles/delay"
	"plaita/roles/filter"
	"plaita/roles/settings"
	"plaita/roles/worker"
	"plaita/store"
	"plaita/store/sqlite"
)

// LocalMode is local mode (docs/console.md): Redis was unreachable when the console started, so
// the console runs the worker, filter, delay and schedule roles in its own process, on the
// console's database (LocalBackend) — the same roles, the same control plane as on Redis; only
// the drivers differ. A step cut short by a killed console is redelivered from the embedded
// task stream at the next start, as a worker's would be.
type LocalMode struct {
	Backend Backend
	// Plane is the control plane the console's API calls, over the same backend.
	Plane *control.Plane
	// Services are the roles' services, in start order: each role's registry presence (on
	// the in-process hub: the cluster page lists them), the worker's live events and
	// dispatcher, the filter's janitor, reconciler and listener, the delay mover, the
	// scheduler.
	Services []service.Named
	worker   *workerParts
	filter   *filterParts
	wcfg     *config.Config
	db       *sqlite.DB
}

// oneProcessMinWorkers is the fewest steps a one-process plaita runs at once — local mode, and
// plaita dev's worker on Redis unless PLAITA_WORKER_CONCURRENCY is given: a worker's
// concurrency may be 1 (one worker per core, the default), but there the one process is every
// worker there is, and one long execution would hold up every other.
const oneProcessMinWorkers = 4

// localClaimMinIdle is local mode's PLAITA_CLAIM_MIN_IDLE_MS unless one is given: the step a
// killed console was running is taken up this long after the next start, instead of a minute
// (the cluster's default, sized for workers whose pauses must not look like deaths). The
// worker refreshes a running step's entry every third of it, so a live step is not taken.
const localClaimMinIdle = 5 * time.Second

// localDelayEvery is how often local mode's delay mover looks for due entries: the mover's
// default suits a role that shares a Redis with others; here a due delay should not wait
// long for the one process there is.
const localDelayEvery = 250 * time.Millisecond

// NewLocalMode builds local mode on db for the console configured by cfg; nothing runs yet.
// Each role reads its settings as it would on its own (cfg as that role), with the instance id
// <PLAITA_INSTANCE_ID>-<role> (without one: local-<the database's path hashed>-<role>, the same
// at every start), no metrics endpoint of its own, and the console's task stream
// (PLAITA_CONSOLE_TASK_QUEUE) as the one the worker reads: the console enqueues there. Each
// role counts on a metrics set of its own (two in one set would register the queue's series
// twice); they are not served: local mode is one process, its state is on the console's pages.
// A node type the worker cannot set up (PLAITA_CODE_BACKEND=docker without a daemon) refuses
// the start, as it refuses a worker's.
func NewLocalMode(cfg *config.Config, db *sqlite.DB, log zerolog.Logger) (*LocalMode, error) {
	if !db.Embedded() {
		return nil, sqlite.ErrNotEmbedded
	}
	b := LocalBackend(db, store.NewHub())
	stream := config.ConsoleTaskQueue.In(cfg)
	instance := config.InstanceID.In(cfg)
	if !cfg.IsSet("PLAITA_INSTANCE_ID") {
		// Local mode is one process per database: its roles keep their names across restarts,
		// so that after a kill -9 the worker takes its own leases back and reads its own pending
		// tasks at once, instead of waiting out the lease (PLAITA_LEASE_TTL_SECONDS).
		sum := sha256.Sum256([]byte(db.Location().Path))
		instance = "local-" + hex.EncodeToString(sum[:4])
	}
	as := func(role config.Role, extra map[string]string) *config.Config {
		values := map[string]string{"PLAITA_INSTANCE_ID": instance + "-" + string(role), "PLAITA_METRICS_PORT": "0", "PLAITA_QUEUE_NAME": stream}
		if !cfg.IsSet("PLAITA_CLAIM_MIN_IDLE_MS") {
			values["PLAITA_CLAIM_MIN_IDLE_MS"] = strconv.Itoa(int(localClaimMinIdle / time.Millisecond))
		}
		for k, v := range extra {
			values[k] = v
		}
		return cfg.AsWith(role, values)
	}
	on := func(role config.Role, c *config.Config) onRedis {
		return newOnRedis(c, b, metrics.NewSet(), log.With().Str("role", string(role)).Logger())
	}
	m := &LocalMode{Backend: b, db: db}
	wcfg := as(config.RoleWorker, nil)
	if n := config.WorkerConcurrency.In(wcfg); n < oneProcessMinWorkers {
		wcfg = as(config.RoleWorker, map[string]string{"PLAITA_WORKER_CONCURRENCY": strconv.Itoa(oneProcessMinWorkers)})
	}
	m.wcfg = wcfg
	var err error
	if m.worker, err = buildWorker(on(config.RoleWorker, wcfg)); err != nil {
		return nil, fmt.Errorf("local mode: the worker: %w", err)
	}
	fcfg := as(config.RoleFilter, nil)
	m.filter = buildFilter(on(config.RoleFilter, fcfg))
	dcfg := as(config.RoleDelay, nil)
	dq, err := queue.NewDelay(b.Delay, settings.DelayQueue(dcfg))
	if err != nil {
		return nil, fmt.Errorf("local mode: the delay role: %w", err)
	}
	donRole := on(config.RoleDelay, dcfg)
	started := time.Now().UTC()
	mover := delay.NewMover(dq, delay.Settings{Interval: localDelayEvery, Move: queue.MoveOptions{Stream: stream,
		Generations: settings.Generations(dcfg), EffectiveAt: started}}, donRole.set, donRole.log)
	scfg := as(config.RoleSchedule, nil)
	schedRegistry, scheduler := buildSchedule(on(config.RoleSchedule, scfg))
	fs := filter.SettingsFrom(fcfg)
	m.Services = []service.Named{
		{Name: "worker registry", Service: m.worker.registry},
		{Name: "worker live events", Service: m.worker.observer},
		{Name: "worker residue sweeper", Service: m.worker.queue.Sweeper(queue.DefaultSweepInterval)},
		{Name: "worker dispatcher", Service: m.worker.dispatcher},
		{Name: "filter registry", Service: m.filter.registry},
	}
	if !fs.DisableSweep {
		m.Services = append(m.Services, service.Named{Name: "filter index janitor", Service: m.filter.janitor})
	}
	if !fs.DisableReconcile {
		m.Services = append(m.Services, service.Named{Name: "filter reconciler", Service: m.filter.reconciler})
	}
	m.Services = append(m.Services,
		service.Named{Name: "filter listener", Service: m.filter.listener},
		service.Named{Name: "delay registry", Service: donRole.presence(roleInstance(dcfg, config.RoleDelay, stream, started))},
		service.Named{Name: "delay mover", Service: mover},
		service.Named{Name: "schedule registry", Service: schedRegistry},
		service.Named{Name: "scheduler", Service: scheduler},
	)
	set := metrics.NewSet()
	// The plane stamps what it enqueues with the generations of the roles' configuration.
	if m.Plane, err = NewPlane(as(config.RoleConsole, nil), b, log, PlaneOptions{Stream: stream, NodeLog: log.Level(max(log.GetLevel(), zerolog.WarnLevel)),
		Metrics: set, NodeConfig: wcfg}); err != nil {
		return nil, fmt.Errorf("local mode: %w", err)
	}
	return m, nil
}

// Start creates the worker's consumer group on the embedded stream (once; a restart finds it).
func (m *LocalMode) Start(ctx context.Context) error {
	if err := m.worker.queue.EnsureGroup(ctx); err != nil {
		return fmt.Errorf("local mode: consumer group: %w", err)
	}
	return nil
}

// AdoptEarlier moves the executions an earlier version's local mode left in the console
// database (local_executions; its orphan reconcile has run) into this local mode's storage,
// their wake-ups registered as the worker registers them: they run on from here.
func (m *LocalMode) AdoptEarlier(ctx context.Context) (HandOverReport, error) {
	var rep HandOverReport
	delay, err := queue.NewDelay(m.Backend.Delay, settings.DelayQueue(m.wcfg))
	if err != nil {
		return rep, err
	}
	st := m.Backend.Storage(settings.Store(m.wcfg))
	err = handOverEarlier(ctx, m.db.Executions(), st, worker.NewWakeups(st, delay, settings.WorkerWakeups(m.wcfg)), &rep)
	return rep, err
}

// Drain is the roles' drain, as each does it on its own: the dispatcher stops reading and
// lets the steps in flight finish and settle, the filter's listener finishes the notifications
// it queued. What ctx cuts short is redelivered at the next start.
func (m *LocalMode) Drain(ctx context.Context) {
	m.filter.listener.Stop(ctx)
	m.worker.dispatcher.Stop(ctx)
}
