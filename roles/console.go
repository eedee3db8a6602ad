package roles

import (
	"context"
	"fmt"
	"net"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/control"
	"plaita/internal/health"
	"plaita/internal/presence"
	"plaita/internal/service"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
	"plaita/web"
)

// BootstrapAdminLogin is the login of the platform admin PLAITA_CONSOLE_ADMIN_PASSWORD creates.
const BootstrapAdminLogin = "admin"

// consoleDrainFor bounds the console's drain, consoleStopFor the graceful shutdown of its HTTP
// server (the requests in flight finish within it).
const (
	consoleDrainFor = 2 * time.Second
	consoleStopFor  = 20 * time.Second
)

// runConsole wires the console and runs it until ctx ends (SIGTERM/SIGINT), docs/console.md.
//
// Before the services: the database at PLAITA_CONSOLE_DB_URL is opened and migrated up; the
// platform admin is created from PLAITA_CONSOLE_ADMIN_PASSWORD when there is no user; Redis
// (PLAITA_CONSOLE_REDIS_URL) is connected and every tenant's status is published from the
// database, the authority (store.Redis.SyncTenantStatuses: tenants Redis knows and the
// database does not become disabled tombstones). Redis unreachable: the console starts
// anyway, says so loudly and on /health, and its Redis-backed routes answer 503 (local mode,
// executions on SQLite, is not built yet).
//
// Start order (service.Group): metrics server → registry (status running; not without Redis)
// → the engine sync (with Redis; once, within PLAITA_CONSOLE_ENGINE_SYNC_DEADLINE) → the bulk
// jobs' runner (with Redis) → the periodic tenant-status reconcile (every
// PLAITA_TENANT_STATUS_RECONCILE_SECONDS; 0 = off, with a warning) → the HTTP server on
// PLAITA_CONSOLE_HOST:PLAITA_CONSOLE_PORT, then ready.
// Shutdown: not ready and the status draining → the API refuses writes (503 draining) and
// ends its live streams, the bulk jobs' runner finishes the batch in hand and releases its
// jobs (the next console resumes them) → status stopping → the HTTP server shuts down
// (requests in flight finish, within 20 s) → the reconcile stops → registry deregistered →
// metrics server; then Redis and the database are closed.
func runConsole(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, err := sqlite.Open(startCtx, config.ConsoleDBURL.In(cfg), sqlite.WithMaxStateBytes(config.ExecutionStateMaxBytes.In(cfg)))
	if err != nil {
		return fmt.Errorf("console: database: %w", err)
	}
	defer db.Close()
	log.Info().Str("event", "console.database").Str("path", db.Location().Path).Msg("console database open and migrated")
	if pw := config.ConsoleAdminPassword.In(cfg); pw != "" {
		u, created, err := db.EnsureBootstrapAdmin(startCtx, BootstrapAdminLogin, pw)
		if err != nil {
			return fmt.Errorf("console: PLAITA_CONSOLE_ADMIN_PASSWORD: %w", err)
		}
		if created {
			log.Info().Str("event", "console.bootstrap_admin").Str("login", u.Login).Msg("platform admin created from PLAITA_CONSOLE_ADMIN_PASSWORD")
		}
	}
	set := metrics.NewSet()
	deps := web.Deps{DB: db, Log: log}
	var registry *presence.Registry
	c, err := RedisClient(config.ConsoleRedisURL.In(cfg))
	if err != nil {
		deps.RedisErr = err
		log.Error().Str("event", "console.no_redis").Err(err).Str("variable", "PLAITA_CONSOLE_REDIS_URL").
			Msg("REDIS IS UNREACHABLE: the console starts without it — flows, executions and tenant statuses answer 503 " +
				"and local mode is not built yet; restart the console once Redis answers")
	} else {
		defer c.Close()
		if deps.Plane, deps.Redis, err = consoleRedis(cfg, c, set, log); err != nil {
			return fmt.Errorf("console: %w", err)
		}
		deps.Jobs = control.NewBulk(deps.Plane, db, control.BulkSettings{Runner: config.InstanceID.In(cfg), OnError: func(err error) {
			log.Warn().Str("event", "console.jobs_failed").Err(err).Msg("a round of the bulk jobs failed; the next one tries again")
		}})
		deps.EngineSync = control.NewEngineSync(deps.Plane, db, control.EngineSyncSettings{
			Deadline:    time.Duration(config.ConsoleEngineSyncDeadline.In(cfg) * float64(time.Second)),
			MaxVersions: config.ConsoleEngineSyncMaxVersions.In(cfg)})
		registry = presence.New(store.NewRegistry(c, keys.DefaultRoot), roleInstance(cfg, config.RoleConsole, config.ConsoleTaskQueue.In(cfg), time.Now()), log, set)
	}
	ready := health.NewReadiness()
	deps.Ready = ready
	srv := web.New(deps, consoleSettings(cfg))
	if deps.Plane != nil && config.ConsoleAdminAPIKey.In(cfg) == "" && !config.ConsoleAllowInsecureAdmin.In(cfg) {
		log.Warn().Str("event", "console.admin_api_off").Str("variable", "PLAITA_CONSOLE_ADMIN_API_KEY").
			Msg("no admin API key: tenant and user management answers 503 except to a platform admin's session")
	}
	addr := net.JoinHostPort(config.ConsoleHost.In(cfg), strconv.Itoa(config.ConsolePort.In(cfg)))
	r := roleProcess{name: "console", ready: ready, server: health.New(config.MetricsHost.In(cfg), config.MetricsPort.In(cfg), set, ready, log),
		registry: registry, services: consoleServices(deps, srv.Service(addr), log),
		drain: func(ctx context.Context) {
			log.Info().Str("event", "console.draining").Msg("draining: no new writes, live streams end; requests in flight finish")
			srv.Drain()
			if deps.Jobs != nil {
				deps.Jobs.Stop(ctx) // hand the running jobs over now: the batch in hand is finished and recorded
			}
		},
		drainFor: consoleDrainFor, stopFor: consoleStopFor}
	if deps.Redis != nil {
		// A failure is logged (and on /health): the console still serves, the workers keep the
		// statuses they had until the next reconcile.
		_, _ = srv.ReconcileTenantStatuses(startCtx, web.TriggerStart)
		if svc := tenantStatusService(cfg, srv, log); svc != nil {
			r.services = append([]service.Named{{Name: "tenant-status reconcile", Service: svc}}, r.services...)
		}
	}
	err = r.serve(ctx, log, func() {
		mode := "redis"
		if deps.Plane == nil {
			mode = "no-redis"
		}
		log.Info().Str("event", "console.started").Str("addr", srv.Addr()).Str("mode", mode).Str("env", config.ConsoleEnv.In(cfg)).
			Msg("console running")
	})
	if err == nil {
		log.Info().Str("event", "console.stopped").Msg("console stopped")
	}
	return err
}

// consoleServices are the console's own services in start order: the engine sync (with Redis:
// the recorded flow versions Redis lacks are written back before anything is served, within
// its deadline), the bulk jobs' runner (with Redis) before the HTTP server (the drain stops the
// runner already; stopping it again after the server is a no-op that covers a start that
// failed half-way).
func consoleServices(deps web.Deps, http service.Service, log zerolog.Logger) []service.Named {
	var out []service.Named
	if deps.EngineSync != nil {
		out = append(out, service.Named{Name: "engine sync", Service: &engineSync{sync: deps.EngineSync, log: log}})
	}
	if deps.Jobs != nil {
		out = append(out, service.Named{Name: "bulk jobs", Service: deps.Jobs})
	}
	return append(out, service.Named{Name: "http server", Service: http})
}

// engineSync runs the engine sync once as the console starts (control.EngineSync, bounded by
// PLAITA_CONSOLE_ENGINE_SYNC_DEADLINE and _MAX_VERSIONS): its Start returns when the sync is
// done or its deadline passed, never with an error — a degraded sync is a WARNING and shows on
// /health, and the console serves all the same.
type engineSync struct {
	sync    *control.EngineSync
	log     zerolog.Logger
	stopped atomic.Bool
}

func (e *engineSync) Start(ctx context.Context) error {
	if e.stopped.Load() {
		return service.ErrStopped
	}
	r := e.sync.Run(ctx)
	ev := e.log.Info()
	msg := "the recorded flow versions Redis lacked are written back"
	if r.Status != control.SyncReady {
		ev = e.log.Warn()
		msg = "ENGINE SYNC DEGRADED: not every recorded flow version was checked or written back to Redis; executions of a missing version cannot resume (see /health engine_sync)"
	}
	ev.Str("event", "console.engine_sync").Str("status", r.Status).Int("versions", r.Versions).Int("written", r.Written).
		Int("skipped", r.Skipped).Int("errors", r.Errors).Int("batches", r.Batches).Bool("truncated", r.Truncated).
		Str("truncated_reason", r.TruncatedReason).Int64("elapsed_ms", r.ElapsedMS).Str("error", r.Error).Strs("written_sample", r.WrittenSample).
		Msg(msg)
	return nil
}

func (e *engineSync) Stop(context.Context) { e.stopped.Store(true) }

// consoleSettings are the API's settings from the configuration.
func consoleSettings(cfg *config.Config) web.Settings {
	return web.Settings{
		Env: config.ConsoleEnv.In(cfg), AdminAPIKey: config.ConsoleAdminAPIKey.In(cfg),
		AllowInsecureAdmin: config.ConsoleAllowInsecureAdmin.In(cfg), DeploymentEpoch: config.DeploymentEpoch.In(cfg),
		Version:              buildVersion(),
		Live:                 web.LiveSettings{MaxStreams: config.ConsoleMaxStreams.In(cfg)},
		TenantStatusInterval: time.Duration(max(config.TenantStatusReconcileSeconds.In(cfg), 0)) * time.Second,
		Config:               effectiveConfig(cfg.Report()),
	}
}

// tenantStatusService republishes the tenants' statuses from the database every
// PLAITA_TENANT_STATUS_RECONCILE_SECONDS, so that a Redis-only restore that brought a deleted
// tenant's "active" back is corrected without a restart. 0 turns it off (nil), with a warning.
func tenantStatusService(cfg *config.Config, srv *web.Server, log zerolog.Logger) service.Service {
	every := time.Duration(config.TenantStatusReconcileSeconds.In(cfg)) * time.Second
	if every <= 0 {
		log.Warn().Str("event", "console.tenant_status_reconcile_off").Str("variable", "PLAITA_TENANT_STATUS_RECONCILE_SECONDS").
			Msg("the periodic tenant-status reconcile is off: after a Redis-only restore, correct the statuses with POST /api/cluster/tenant-status/reconcile")
		return nil
	}
	return &service.Loop{Interval: every, Once: func(ctx context.Context) {
		_, _ = srv.ReconcileTenantStatuses(ctx, web.TriggerPeriodic) // logged, and on /health
	}}
}

// effectiveConfig is the configuration report as GET /api/cluster/config shows it (the report
// masks secrets already).
func effectiveConfig(r config.Report) *web.EffectiveConfig {
	out := &web.EffectiveConfig{Role: string(r.Role), OK: r.OK, Variables: make([]web.ConfigVariable, 0, len(r.Variables)), Warnings: []string{},
		Generations: web.ConfigGenerations{Family: r.Generations.Family, Config: r.Generations.Config, Budget: r.Generations.Budget}}
	for _, v := range r.Variables {
		out.Variables = append(out.Variables, web.ConfigVariable{Name: v.Name, Section: v.Section, Value: v.Value, Default: v.Default,
			Source: string(v.Source), Secret: v.Secret, Effect: v.Effect, Warnings: append([]string{}, v.Warnings...)})
	}
	for _, w := range r.Warnings {
		out.Warnings = append(out.Warnings, w.Message)
	}
	return out
}

// buildVersion is the module version of the binary ("devel" from a work tree).
func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

// consoleRedis is the control plane and the store over the console's Redis: starts and resumes
// go to PLAITA_CONSOLE_TASK_QUEUE; flows are parsed with the node types a worker of this
// environment sets up (the console's own code backend default, docker, is for running code in
// local mode, which is not built yet; without a docker daemon it would refuse every flow).
func consoleRedis(cfg *config.Config, c rueidis.Client, set *metrics.Set, log zerolog.Logger) (*control.Plane, *store.Redis, error) {
	plane, err := NewPlane(cfg, c, log, PlaneOptions{Stream: config.ConsoleTaskQueue.In(cfg), NodeLog: log.Level(max(log.GetLevel(), zerolog.WarnLevel)),
		Metrics: set, NodeConfig: cfg.As(config.RoleWorker), Dispatch: true})
	if err != nil {
		return nil, nil, err
	}
	return plane, store.NewRedis(c, settings.Store(cfg), keys.DefaultRoot), nil
}
