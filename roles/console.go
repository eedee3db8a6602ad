package roles

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/control"
	"plaita/internal/callctx"
	"plaita/internal/health"
	"plaita/internal/keyring"
	"plaita/internal/presence"
	"plaita/internal/service"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
	"plaita/web"
	"plaita/web/api"
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
// database does not become disabled tombstones); the database records that it served with
// Redis (sqlite.ServedCluster).
//
// Redis unreachable at start: a database that never served with Redis gets local mode
// (executions in this process on the database, said loudly and on /health); one that did
// waits for Redis instead — not ready, its port answering 503 (web.Waiting) — unless
// PLAITA_CONSOLE_LOCAL_FALLBACK allows local mode: local mode there would answer starts that
// no worker runs and no cluster listing shows (waitForRedis).
//
// Start order (service.Group): metrics server → registry (status running; not without Redis)
// → the engine sync (with Redis; once, within PLAITA_CONSOLE_ENGINE_SYNC_DEADLINE) → the bulk
// jobs' runner (with Redis) → the periodic tenant-status reconcile (every
// PLAITA_TENANT_STATUS_RECONCILE_SECONDS; 0 = off, with a warning) → the HTTP server on
// PLAITA_CONSOLE_HOST:PLAITA_CONSOLE_PORT (taking the port over from the waiting server, when
// the console waited), then ready.
// Shutdown: not ready and the status draining → the API refuses writes (503 draining) and
// ends its live streams, the bulk jobs' runner finishes the batch in hand and releases its
// jobs (the next console resumes them) → status stopping → the HTTP server shuts down
// (requests in flight finish, within 20 s) → the reconcile stops → registry deregistered →
// metrics server; then Redis and the database are closed.
func runConsole(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	return runConsoleWith(ctx, cfg, log, consoleOptions{})
}

// consoleOptions are what plaita dev changes in the console it runs.
type consoleOptions struct {
	// local runs local mode without trying Redis: dev decided so (it found none, or was told
	// to use none); the database's record of serving with Redis does not make it wait.
	local bool
	// localWhy is why dev runs local mode (the error the console reports on /health).
	localWhy string
	// seed runs once the console's operations exist, before the tenant statuses are published
	// and before it serves (dev's demo tenant, admin and flows).
	seed func(ctx context.Context, db *sqlite.DB, plane *control.Plane) error
	// serving hears the address the console serves on, once it is ready.
	serving func(addr string)
}

func runConsoleWith(ctx context.Context, cfg *config.Config, log zerolog.Logger, o consoleOptions) error {
	openCtx, cancelOpen := callctx.Within(ctx, callctx.Start)
	defer cancelOpen()
	// Local mode's execution states (their input and context) are sealed at rest under the
	// credentials' master key, its purpose subkey console-fields (docs/credentials.md).
	// One key source for everything the console seals (the states, credentials, contract
	// keys): the file is created, read and said once.
	masterKeys := credentialsKey(cfg, true, log)
	fields := keyring.Fields{Keys: masterKeys, Purpose: "console-fields"}
	db, err := control.OpenConsoleStore(openCtx, config.ConsoleDBURL.In(cfg), sqlite.WithMaxStateBytes(config.ExecutionStateMaxBytes.In(cfg)),
		sqlite.WithFieldCipher(fields))
	if err != nil {
		return fmt.Errorf("console: database: %w", err)
	}
	defer db.Close()
	if db.Embedded() {
		log.Info().Str("event", "console.database").Str("engine", db.Engine()).Str("path", db.Location().Path).Msg("console database open and migrated")
	} else {
		log.Info().Str("event", "console.database").Str("engine", db.Engine()).Str("url", db.Location().URL).Msg("console database open and migrated")
		if !cfg.IsSet("PLAITA_CREDENTIALS_KEY") && !cfg.IsSet("PLAITA_CREDENTIALS_KEY_FILE") {
			// The runbook's rule: without a file database, what derives from its place falls back
			// to the working directory. Replicas with a key each could not open each other's
			// contract keys.
			log.Warn().Str("event", "credentials.key_in_working_directory").Str("path", credentialsKeyFile(cfg)).
				Str("variable", "PLAITA_CREDENTIALS_KEY_FILE").
				Msg("the console database is on a server, so the credentials key file is in the working directory: every console " +
					"replica and worker must use the same key — set PLAITA_CREDENTIALS_KEY, or PLAITA_CREDENTIALS_KEY_FILE to a file they share")
		}
	}
	if pw := config.ConsoleAdminPassword.In(cfg); pw != "" {
		u, created, err := db.EnsureBootstrapAdmin(openCtx, BootstrapAdminLogin, pw)
		if err != nil {
			return fmt.Errorf("console: PLAITA_CONSOLE_ADMIN_PASSWORD: %w", err)
		}
		if created {
			log.Info().Str("event", "console.bootstrap_admin").Str("login", u.Login).Msg("platform admin created from PLAITA_CONSOLE_ADMIN_PASSWORD")
		}
	}
	// Who this console is to the others on its database (the bulk jobs' runner, the
	// singletons' leases): its instance id, and its host unless the id was set — the default
	// <role>-<pid> is the same in every container.
	holder := config.InstanceID.In(cfg)
	if !cfg.IsSet("PLAITA_INSTANCE_ID") {
		if host, err := os.Hostname(); err == nil && host != "" {
			holder += "@" + host
		}
	}
	singletons := control.NewSingletons(db, holder)
	set := metrics.NewSet()
	ready := health.NewReadiness()
	metricsSrv := health.New(config.MetricsHost.In(cfg), config.MetricsPort.In(cfg), set, ready, log)
	var metricsService service.Service = metricsSrv
	addr := net.JoinHostPort(config.ConsoleHost.In(cfg), strconv.Itoa(config.ConsolePort.In(cfg)))
	redisURL := config.ConsoleRedisURL.In(cfg)
	deps := api.Deps{Log: log, Ready: ready}
	var redisStore *store.Redis
	var registry *presence.Registry
	var localMode *LocalMode
	var backend Backend          // where the roles keep their state: Redis, or local mode's database
	var handOver service.Service // nil without Redis
	var ctlChannel *store.Control
	var waiting *web.Waiting
	var c rueidis.Client
	if o.local {
		err = errors.New(cmp.Or(o.localWhy, "plaita dev runs local mode"))
	} else {
		c, err = ConsoleRedisClient(redisURL)
	}
	var servedCluster sqlite.Served
	served := false
	if err != nil {
		var rerr error
		if servedCluster, served, rerr = db.ServedIn(openCtx, sqlite.ServedCluster); rerr != nil {
			return fmt.Errorf("console: %w", rerr)
		}
		fallback := o.local || config.ConsoleLocalFallback.In(cfg)
		if !db.Embedded() && fallback {
			return fmt.Errorf("console: %w: Redis is unreachable (%v) and PLAITA_CONSOLE_LOCAL_FALLBACK asks for local mode, but PLAITA_CONSOLE_DB_URL is a %s database",
				sqlite.ErrNotEmbedded, err, db.Engine())
		}
		if !db.Embedded() || (served && !fallback) {
			// Local mode here would split the system (docs/console.md): the database served with
			// Redis, or it is a server several consoles share.
			why := fmt.Sprintf("this console database has served with Redis (since %s), so the console does not run local mode while Redis "+
				"is unreachable (its executions would be out of sight of the workers and of the cluster's lists) — PLAITA_CONSOLE_LOCAL_FALLBACK=1 allows it",
				servedCluster.First.UTC().Format(time.RFC3339))
			if !db.Embedded() {
				why = "the console database is on " + db.Engine() + ", where local mode does not run (it runs on a SQLite console database only: docs/console.md)"
			}
			if c, waiting, err = waitForRedis(ctx, db, why, redisURL, addr, ready, metricsSrv, err, log); err != nil {
				return err
			}
			if c == nil {
				log.Info().Str("event", "console.stopped").Msg("console stopped while it waited for Redis")
				return nil
			}
			defer metricsSrv.Stop(context.Background()) // safe twice: the role stops it too
			defer waiting.Stop(context.Background())
			metricsService = alreadyRunning{metricsSrv}
		}
	}
	cancelOpen()
	// The start's own budget begins now: a console that waited for Redis starts afresh.
	startCtx, cancel := callctx.Within(ctx, callctx.Start)
	defer cancel()
	if err != nil {
		deps.RedisErr, deps.LocalMode = err, true
		if localMode, err = NewLocalMode(cfg, db, log); err != nil {
			return fmt.Errorf("console: %w", err)
		}
		deps.Plane, backend = localMode.Plane, localMode.Backend
		redisStore = localMode.Backend.Storage(settings.Store(cfg))
		registry = presence.New(store.NewRegistry(localMode.Backend.Ephemeral, keys.DefaultRoot),
			roleInstance(cfg, config.RoleConsole, config.ConsoleTaskQueue.In(cfg), time.Now()), log, set)
		ctlChannel = store.NewControl(localMode.Backend.Ephemeral, keys.DefaultRoot)
		ev := log.Warn().Str("event", "console.local_mode").Err(err).Str("variable", "PLAITA_CONSOLE_REDIS_URL").Str("database", db.Location().Path)
		msg := "LOCAL MODE: Redis is unreachable, so the console runs the worker, filter, delay and schedule roles in this process on " +
			"its database — one process, not a cluster; restart the console once Redis answers to hand its executions to Redis and run there"
		if served {
			ev = ev.Bool("served_with_redis", true).Time("served_with_redis_since", servedCluster.First)
			allows := "PLAITA_CONSOLE_LOCAL_FALLBACK allows local mode here"
			if o.local {
				allows = "plaita dev chose local mode"
			}
			msg += "; this database has served with Redis (" + allows + "): the executions in Redis are out of sight until then"
		}
		ev.Msg(msg)
		if err := db.MarkServed(startCtx, sqlite.ServedLocal, db.Location().Path); err != nil {
			return fmt.Errorf("console: %w", err)
		}
		if err := localMode.Start(startCtx); err != nil {
			return fmt.Errorf("console: %w", err)
		}
		if deps.Orphans, err = control.ReconcileLocalOrphans(startCtx, db.Executions(),
			sqlite.OrphanMode(config.ConsoleReconcileOrphans.In(cfg)), time.Now()); err != nil {
			return fmt.Errorf("console: %w", err)
		}
		if r := deps.Orphans.Result; len(r.Changed) > 0 || len(r.Failed) > 0 {
			log.Warn().Str("event", "console.orphans_reconciled").Str("mode", string(r.Mode)).Int("running", r.Running).
				Int("changed", len(r.Changed)).Int("failed", len(r.Failed)).Int("skipped", len(r.Skipped)).
				Msg("executions an earlier version's local mode left running were settled (PLAITA_CONSOLE_RECONCILE_ORPHANS)")
		}
		if rep, err := localMode.AdoptEarlier(startCtx); err != nil {
			return fmt.Errorf("console: the executions of an earlier version's local mode: %w", err)
		} else if !rep.Empty() {
			log.Warn().Str("event", "console.adopted_earlier").Int("executions", rep.Executions).Int("wake_ups", rep.WakeUps).
				Int("unreadable", rep.Unreadable).Msg("the executions an earlier version's local mode ran are taken up by this one's roles")
		}
	} else {
		defer c.Close()
		// Recorded before anything is served: from now on this database does not get local
		// mode by itself.
		if err := db.MarkServed(startCtx, sqlite.ServedCluster, config.MaskURL(redisURL)); err != nil {
			return fmt.Errorf("console: %w", err)
		}
		backend = RedisBackend(c)
		if deps.Plane, redisStore, err = consoleRedis(cfg, c, db, set, log); err != nil {
			return fmt.Errorf("console: %w", err)
		}
		deps.EngineSync = control.NewEngineSync(deps.Plane, db, control.EngineSyncSettings{
			Deadline:    time.Duration(config.ConsoleEngineSyncDeadline.In(cfg) * float64(time.Second)),
			MaxVersions: config.ConsoleEngineSyncMaxVersions.In(cfg), Singletons: singletons})
		registry = presence.New(store.NewRegistry(store.OnRedis(c), keys.DefaultRoot), roleInstance(cfg, config.RoleConsole, config.ConsoleTaskQueue.In(cfg), time.Now()), log, set)
		ctlChannel = store.NewControl(store.OnRedis(c), keys.DefaultRoot)
		if db.Embedded() { // only a SQLite database can hold what a local mode left
			handOver = &handOverService{log: log, run: func(ctx context.Context) (HandOverReport, error) {
				return handOverLocal(ctx, cfg, db, LocalBackend(db, store.NewHub()), RedisBackend(c))
			}}
		}
	}
	deps.Credentials = credentials(backend, masterKeys)
	deps.Hooks = control.NewHooks(db, deps.Plane, masterKeys, globalContract(cfg, log))
	deps.Jobs = control.NewBulk(deps.Plane, db, control.BulkSettings{Runner: holder, OnError: func(err error) {
		log.Warn().Str("event", "console.jobs_failed").Err(err).Msg("a round of the bulk jobs failed; the next one tries again")
	}})
	deps.Accounts = control.NewAccounts(db, redisStore, deps.Plane, control.AccountsSettings{Epoch: config.DeploymentEpoch.In(cfg), Log: log})
	deps.Catalog = control.NewCatalog(db, catalogPublisher(deps.Plane))
	srv := web.New(deps, consoleSettings(cfg))
	if deps.Plane != nil && config.ConsoleAdminAPIKey.In(cfg) == "" && !config.ConsoleAllowInsecureAdmin.In(cfg) {
		log.Warn().Str("event", "console.admin_api_off").Str("variable", "PLAITA_CONSOLE_ADMIN_API_KEY").
			Msg("no admin API key: tenant and user management answers 503 except to a platform admin's session")
	}
	httpService := srv.Service(addr)
	if waiting != nil {
		httpService = &takeOver{waiting: waiting, srv: srv}
	}
	r := roleProcess{name: "console", ready: ready, server: metricsService, addr: srv.Addr,
		registry: registry, control: ctlChannel, services: consoleServices(deps, localMode, handOver, httpService, log),
		drain: func(ctx context.Context) {
			log.Info().Str("event", "console.draining").Msg("draining: no new writes, live streams end; requests in flight finish")
			srv.Drain()
			if deps.Jobs != nil {
				deps.Jobs.Stop(ctx) // hand the running jobs over now: the batch in hand is finished and recorded
			}
			if localMode != nil {
				localMode.Drain(ctx) // the steps in flight finish and settle (within the drain); what is cut short is redelivered next time
			}
		},
		drainFor: consoleDrainFor, stopFor: consoleStopFor}
	if o.seed != nil {
		if err := o.seed(startCtx, db, deps.Plane); err != nil {
			return fmt.Errorf("console: %w", err)
		}
	}
	if redisStore != nil {
		// A failure is logged (and on /health): the console still serves, the workers keep the
		// statuses they had until the next reconcile.
		_, _ = srv.ReconcileTenantStatuses(startCtx, api.TriggerStart)
		if svc := tenantStatusService(cfg, srv, singletons, log); svc != nil {
			r.services = append([]service.Named{{Name: "tenant-status reconcile", Service: svc}}, r.services...)
		}
	}
	if localMode != nil {
		r.services = append(r.services, service.Named{Name: "redis watch", Service: redisWatch(cfg, log)})
	}
	r.started = func() {
		mode := "redis"
		ev := log.Info().Str("event", "console.started").Str("addr", srv.Addr())
		if localMode != nil {
			mode = "local"
			// Local mode runs the worker's nodes here: where their files go is this role's to say.
			if root, err := writefileRoot(localMode.wcfg); err == nil {
				ev = ev.Str("writefile_root", root.Path).Str("writefile_rule", string(root.Rule))
			}
		}
		ev.Str("mode", mode).Str("env", config.ConsoleEnv.In(cfg)).Msg("console running")
		if o.serving != nil {
			o.serving(srv.Addr())
		}
	}
	return r.serve(ctx, log)
}

// consoleServices are the console's own services in start order: the engine sync (with Redis:
// the recorded flow versions Redis lacks are written back before anything is served, within
// its deadline), with Redis the hand-over of what local mode left in the database (handover.go),
// in local mode the roles (local), the bulk jobs' runner, then the HTTP server
// (the drain stops the runner and the roles' work already; stopping them again after the
// server covers a start that failed half-way).
func consoleServices(deps api.Deps, local *LocalMode, handOver service.Service, http service.Service, log zerolog.Logger) []service.Named {
	var out []service.Named
	if deps.EngineSync != nil {
		out = append(out, service.Named{Name: "engine sync", Service: &engineSync{sync: deps.EngineSync, log: log}})
	}
	if handOver != nil {
		out = append(out, service.Named{Name: "hand-over", Service: handOver})
	}
	if local != nil {
		out = append(out, local.Services...)
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
	if r.RanBy != "" {
		msg = "the engine sync runs on another console on this database (it holds the sync's lease): this one leaves it to it"
	}
	if r.Status != control.SyncReady {
		ev = e.log.Warn()
		msg = "ENGINE SYNC DEGRADED: not every recorded flow version was checked or written back to Redis; executions of a missing version cannot resume (see /health engine_sync)"
	}
	ev.Str("event", "console.engine_sync").Str("status", r.Status).Int("versions", r.Versions).Int("written", r.Written).
		Int("skipped", r.Skipped).Int("errors", r.Errors).Int("batches", r.Batches).Bool("truncated", r.Truncated).
		Str("truncated_reason", r.TruncatedReason).Int64("elapsed_ms", r.ElapsedMS).Str("error", r.Error).Strs("written_sample", r.WrittenSample).
		Str("ran_by", r.RanBy).Msg(msg)
	return nil
}

func (e *engineSync) Stop(context.Context) { e.stopped.Store(true) }

// consoleSettings are the API's settings from the configuration.
func consoleSettings(cfg *config.Config) api.Settings {
	return api.Settings{
		Env: config.ConsoleEnv.In(cfg), AdminAPIKey: config.ConsoleAdminAPIKey.In(cfg),
		AllowInsecureAdmin: config.ConsoleAllowInsecureAdmin.In(cfg),
		Version:            buildVersion(),
		Live: api.LiveSettings{MaxStreams: config.ConsoleMaxStreams.In(cfg),
			MaxPerTenant: config.ConsoleMaxStreamsPerTenant.In(cfg)},
		SessionTTL:           time.Duration(config.ConsoleSessionTTL.In(cfg)) * time.Second,
		TenantStatusInterval: time.Duration(max(config.TenantStatusReconcileSeconds.In(cfg), 0)) * time.Second,
		Config:               effectiveConfig(cfg.Report()),
		TraceURLTemplate:     config.TraceURLTemplate.In(cfg),
	}
}

// tenantStatusService republishes the tenants' statuses from the database every
// PLAITA_TENANT_STATUS_RECONCILE_SECONDS, so that a Redis-only restore that brought a deleted
// tenant's "active" back is corrected without a restart. 0 turns it off (nil), with a warning.
//
// Of several consoles on one database, the one that holds the reconcile's lease runs it
// (control.SingletonTenantStatus, renewed every round): another takes it over within two
// rounds of its holder's death, or at its next round after the holder drained.
func tenantStatusService(cfg *config.Config, srv *web.Server, singletons *control.Singletons, log zerolog.Logger) service.Service {
	every := time.Duration(config.TenantStatusReconcileSeconds.In(cfg)) * time.Second
	if every <= 0 {
		log.Warn().Str("event", "console.tenant_status_reconcile_off").Str("variable", "PLAITA_TENANT_STATUS_RECONCILE_SECONDS").
			Msg("the periodic tenant-status reconcile is off: after a Redis-only restore, correct the statuses with POST /api/cluster/tenant-status/reconcile")
		return nil
	}
	var holding atomic.Bool
	return &tenantStatusLoop{
		Loop: service.Loop{Interval: every, Once: func(ctx context.Context) {
			held, holder, err := singletons.Hold(ctx, control.SingletonTenantStatus, 2*every+5*time.Second)
			if err != nil {
				log.Warn().Str("event", "console.lease_failed").Str("lease", control.SingletonTenantStatus).Err(err).
					Msg("the tenant-status reconcile's lease could not be claimed; the next round tries again")
				return
			}
			if held != holding.Swap(held) {
				log.Info().Str("event", "console.lease").Str("lease", control.SingletonTenantStatus).Bool("held", held).Str("holder", holder).
					Msg("the periodic tenant-status reconcile runs on the console that holds its lease")
			}
			if held {
				_, _ = srv.ReconcileTenantStatuses(ctx, api.TriggerPeriodic) // logged, and on /health
			}
		}},
		release: func(ctx context.Context) { _ = singletons.Release(ctx, control.SingletonTenantStatus) },
	}
}

// tenantStatusLoop is the reconcile's loop; its Stop hands the lease on.
type tenantStatusLoop struct {
	service.Loop
	release func(context.Context)
}

func (l *tenantStatusLoop) Stop(ctx context.Context) {
	l.Loop.Stop(ctx)
	l.release(ctx)
}

// effectiveConfig is the configuration report as GET /api/cluster/config shows it (the report
// masks secrets already).
func effectiveConfig(r config.Report) *api.EffectiveConfig {
	out := &api.EffectiveConfig{Role: string(r.Role), OK: r.OK, Variables: make([]api.ConfigVariable, 0, len(r.Variables)), Warnings: []string{},
		Generations: api.ConfigGenerations{Family: r.Generations.Family, Config: r.Generations.Config, Budget: r.Generations.Budget}}
	for _, v := range r.Variables {
		out.Variables = append(out.Variables, api.ConfigVariable{Name: v.Name, Section: v.Section, Value: v.Value, Default: v.Default,
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

// catalogPublisher is what publishes the catalog's flows: the plane, on Redis or in local mode.
func catalogPublisher(plane *control.Plane) control.Publisher {
	if plane == nil {
		return nil // not an interface holding a nil *Plane: the catalog tells "none" by nil
	}
	return plane
}

// consoleRedis is the control plane and the store over the console's Redis: starts and resumes
// go to PLAITA_CONSOLE_TASK_QUEUE; flows are parsed with the node types a worker of this
// environment sets up (the worker's view of PLAITA_CODE_BACKEND: the console's own default,
// docker, would refuse every flow without a docker daemon).
func consoleRedis(cfg *config.Config, c rueidis.Client, db *sqlite.DB, set *metrics.Set, log zerolog.Logger) (*control.Plane, *store.Redis, error) {
	plane, err := NewPlane(cfg, RedisBackend(c), log, PlaneOptions{Stream: config.ConsoleTaskQueue.In(cfg), NodeLog: log.Level(max(log.GetLevel(), zerolog.WarnLevel)),
		Metrics: set, NodeConfig: cfg.As(config.RoleWorker), Dispatch: true})
	if err != nil {
		return nil, nil, err
	}
	return plane, store.NewRedis(c, settings.Store(cfg), keys.DefaultRoot), nil
}

// redisWatchEvery is how often local mode checks whether Redis answers again.
const redisWatchEvery = 30 * time.Second

// redisWatch checks PLAITA_CONSOLE_REDIS_URL while the console runs in local mode and says,
// once, when Redis answers: local mode does not switch by itself (the mode is fixed for the
// process's life, the runbook's rule); a restart does, and hands the executions over.
func redisWatch(cfg *config.Config, log zerolog.Logger) service.Service {
	url := config.ConsoleRedisURL.In(cfg)
	said := false
	return &service.Loop{Interval: redisWatchEvery, Once: func(ctx context.Context) {
		if said {
			return
		}
		c, err := RedisClient(url)
		if err != nil {
			return
		}
		c.Close()
		said = true
		log.Warn().Str("event", "console.redis_back").Str("variable", "PLAITA_CONSOLE_REDIS_URL").
			Msg("Redis answers now; this console stays in local mode until it is restarted (a restart hands its executions to Redis)")
	}}
}

// globalContract is the global contract key (PLAITA_CONSOLE_SECRET_ID / _SECRET_KEY): a whsec_
// secret, or any text of 16 bytes or more taken as it is; empty or shorter turns the global
// hook path off (503), with a WARNING when something was set.
func globalContract(cfg *config.Config, log zerolog.Logger) control.GlobalContract {
	id, raw := config.ConsoleSecretID.In(cfg), config.ConsoleSecretKey.In(cfg)
	if raw == "" {
		return control.GlobalContract{}
	}
	secret, err := control.ParseWebhookSecret(raw)
	if err != nil {
		if len(raw) < 16 {
			log.Warn().Str("event", "console.global_contract_off").Str("variable", "PLAITA_CONSOLE_SECRET_KEY").
				Msg("the global contract key is shorter than 16 bytes: the global hook path answers 503")
			return control.GlobalContract{}
		}
		secret = []byte(raw)
	}
	return control.GlobalContract{ID: cmp.Or(id, "global"), Secret: secret}
}
