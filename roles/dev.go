package roles

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/control"
	"plaita/store/sqlite"
)

// plaita dev: every role in one process, for a laptop (docs/dev.md). On a Redis, dev runs the
// console, worker, filter, schedule and delay roles on it — the production code paths, one
// process; without one, the console in local mode (docs/console.md): executions in its own
// process on its database. It uses a Redis only when told to (--redis-url, PLAITA_REDIS_URL,
// REDIS_URL), or when the one answering at the default URL holds nothing but plaita's keys: it
// seeds what it runs on (tenants, an admin, flow versions, a consumer group), and a Redis that
// merely answers on localhost may be somebody else's (chooseDevRedis). An embedded
// Redis-compatible server (miniredis) was measured for that second case and not chosen: the
// role suites fail on it (its XCLAIM ignores the min idle time, TTLs do not run down by
// themselves, RESP3 clients cannot mix commands with a subscription, XPENDING takes no
// exclusive ranges), so dev on it would run code paths production does not.
//
// Either way it seeds a demo: the tenant "demo", a platform admin "admin" (its password
// printed once, unless PLAITA_CONSOLE_ADMIN_PASSWORD names one) and the demo flows
// (examples, in the binary) published in the default and the demo tenant.

// DevOptions are plaita dev's own flags and what the binary brings.
type DevOptions struct {
	// StateDir keeps the console database (and so local mode's executions) across restarts;
	// "" is a temporary directory removed when dev stops.
	StateDir string
	// Flows are the demo flows: the *.json files at its root (nil: none).
	Flows fs.FS
	// Stdout is where the URL and the admin's password are printed.
	Stdout io.Writer
	// RedisFlag: the Redis URL came from --redis-url: dev runs on it or not at all (a Redis
	// given in the environment that does not answer gives local mode, said on the first line).
	RedisFlag bool
	// Program is how the commands dev prints invoke plaita ("": "plaita").
	Program string
}

// DemoTenant is the tenant plaita dev seeds beside the default one.
const DemoTenant = "demo"

// devRoles are the rows of the role table dev runs by their bodies when it has Redis, in start
// (table) order; the console is not among them: dev runs it itself, in local mode or not.
func devRoles() []Spec {
	var out []Spec
	for _, s := range Table() {
		if s.Dev && s.Body != nil && s.Role != config.RoleConsole {
			out = append(out, s)
		}
	}
	return out
}

// RunDev runs plaita dev until ctx ends. base is the process's logger without a role: dev tags
// its own lines role=dev and each role's with its name.
func RunDev(ctx context.Context, cfg *config.Config, base zerolog.Logger, o DevOptions) error {
	log := base.With().Str("role", string(config.RoleDev)).Logger()
	dir, temp := o.StateDir, o.StateDir == ""
	var err error
	if temp {
		if dir, err = os.MkdirTemp("", "plaita-dev-"); err != nil {
			return fmt.Errorf("dev: a temporary state directory: %w", err)
		}
		defer os.RemoveAll(dir)
	} else if err = os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("dev: --state-dir: %w", err)
	}
	redisURL := config.RedisURL.In(cfg)
	// Told: the flag, or the environment (PLAITA_REDIS_URL, its fallback REDIS_URL).
	choice := chooseDevRedis(ctx, redisURL, cfg.IsSet("PLAITA_REDIS_URL"), RedisClient)
	if o.RedisFlag && !choice.Answered {
		return fmt.Errorf("dev: --redis-url %s: %w; start that Redis, or run %s dev without --redis-url for local mode",
			config.MaskURL(redisURL), choice.Err, cmp.Or(o.Program, "plaita"))
	}
	mode := "local"
	if choice.Use {
		mode = "redis"
	}
	state := "in memory: a temporary directory removed when dev stops (--state-dir DIR keeps it): " + dir
	if !temp {
		state = "kept in " + dir
	}
	if mode == "redis" {
		state = "executions in Redis; the console database " + state
	}
	where := choice.where(cmp.Or(o.Program, "plaita"))
	ev := log.Warn().Str("event", "dev.mode").Str("mode", mode).Str("state", state).Str("redis_url", config.MaskURL(redisURL)).Bool("redis_told", choice.Told)
	if len(choice.Survey.Foreign) > 0 {
		ev = ev.Strs("redis_foreign_keys", choice.Survey.Foreign).Int64("redis_keys", choice.Survey.Keys)
	}
	ev.Msgf("plaita dev — NOT FOR PRODUCTION: one process, a demo admin; %s; state %s", where, state)

	values := map[string]string{
		"PLAITA_CONSOLE_DB_URL":     "sqlite:///" + filepath.Join(dir, "console.db"),
		"PLAITA_CONSOLE_REDIS_URL":  redisURL,
		"PLAITA_CONSOLE_TASK_QUEUE": config.QueueName.In(cfg),
	}
	if !cfg.IsSet("PLAITA_CODE_BACKEND") {
		// The console's default backend is docker; a laptop's is the worker's.
		values["PLAITA_CODE_BACKEND"] = config.CodeBackend.In(cfg.As(config.RoleWorker))
	}
	instance := config.InstanceID.In(cfg)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(devRoles())+1)
	runRole := func(role config.Role, run func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", role, err)
				cancel() // one role failing stops dev: a partial stack would mislead
			}
		}()
	}
	if mode == "redis" {
		for _, s := range devRoles() {
			rcfg := cfg.AsWith(s.Role, map[string]string{"PLAITA_INSTANCE_ID": instance + "-" + string(s.Role), "PLAITA_METRICS_PORT": "0"})
			rlog := base.With().Str("role", string(s.Role)).Logger()
			runRole(s.Role, func(ctx context.Context) error { return s.Body(ctx, rcfg, rlog) })
		}
	}
	if mode == "redis" || cfg.IsSet("PLAITA_INSTANCE_ID") {
		// In local mode without one given, the console names its roles after its database, the
		// same at every start (LocalMode): a restart after kill -9 takes its leases back at once.
		values["PLAITA_INSTANCE_ID"] = instance + "-console"
	}
	ccfg := cfg.AsWith(config.RoleConsole, values)
	clog := base.With().Str("role", string(config.RoleConsole)).Logger()
	seed := &devSeed{flows: o.Flows, stdout: o.Stdout, log: log, adminSet: config.ConsoleAdminPassword.In(ccfg) != ""}
	if !choice.Use && choice.Answered {
		seed.note = where // a Redis it did not use: said again beside the URL
	}
	runRole(config.RoleConsole, func(ctx context.Context) error {
		return runConsoleWith(ctx, ccfg, clog, consoleOptions{local: mode == "local", localWhy: choice.why(), seed: seed.run, serving: seed.serving})
	})
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// devSeed is dev's demo: the demo tenant, the admin, the flows; then the URL.
type devSeed struct {
	note     string // printed with the URL: the Redis dev found and left alone
	flows    fs.FS
	stdout   io.Writer
	log      zerolog.Logger
	adminSet bool   // PLAITA_CONSOLE_ADMIN_PASSWORD made the admin (the console did)
	password string // the admin's password dev made ("" when it made none)
}

func (d *devSeed) run(ctx context.Context, db *sqlite.DB, plane *control.Plane) error {
	if _, err := db.CreateTenant(ctx, sqlite.NewTenant{Slug: DemoTenant, Name: "Demo"}); err != nil && !errors.Is(err, sqlite.ErrTenantExists) {
		return fmt.Errorf("dev: the demo tenant: %w", err)
	}
	if !d.adminSet {
		pw := rand.Text()
		if _, created, err := db.EnsureBootstrapAdmin(ctx, BootstrapAdminLogin, pw); err != nil {
			return fmt.Errorf("dev: the admin: %w", err)
		} else if created {
			d.password = pw
		}
	}
	published, failed := 0, 0
	for _, name := range demoFlowNames(d.flows) {
		def, err := fs.ReadFile(d.flows, name)
		if err != nil {
			return fmt.Errorf("dev: demo flow %s: %w", name, err)
		}
		for _, tenant := range []string{"", DemoTenant} {
			if err := publishDemo(ctx, db, plane, tenant, def); err != nil {
				failed++
				d.log.Warn().Str("event", "dev.demo_flow").Str("file", name).Str("tenant", tenant).Err(err).Msg("a demo flow was not published")
				continue
			}
			published++
		}
	}
	d.log.Info().Str("event", "dev.seeded").Str("tenant", DemoTenant).Int("flows_published", published).Int("failed", failed).
		Msg("demo seeded: the demo flows in the default and the demo tenant")
	return nil
}

// demoFlowNames are the *.json files at the root of flows, sorted.
func demoFlowNames(flows fs.FS) []string {
	if flows == nil {
		return nil
	}
	names, _ := fs.Glob(flows, "*.json")
	sort.Strings(names)
	return names
}

// publishDemo publishes one demo flow in tenant as the console's publish does (the catalog:
// through the control plane, recorded in the console database).
func publishDemo(ctx context.Context, db *sqlite.DB, plane *control.Plane, tenant string, def []byte) error {
	pub, err := control.NewCatalog(db, plane).Publish(ctx, control.PublishRequest{Tenant: tenant, Definition: def, By: "plaita dev"})
	if err == nil {
		err = pub.RecordErr
	}
	return err
}

// serving prints where to go, once the console serves.
func (d *devSeed) serving(addr string) {
	if d.stdout == nil {
		return
	}
	fmt.Fprintf(d.stdout, "\nplaita dev is running — open http://%s/ui/\n", addr)
	switch {
	case d.password != "":
		fmt.Fprintf(d.stdout, "  log in as %s with the password %s (printed once: it is not stored in clear)\n", BootstrapAdminLogin, d.password)
	case d.adminSet:
		fmt.Fprintf(d.stdout, "  log in as %s with PLAITA_CONSOLE_ADMIN_PASSWORD\n", BootstrapAdminLogin)
	default:
		fmt.Fprintf(d.stdout, "  log in with the users the kept state already has (its admin's password was printed when it was made)\n")
	}
	fmt.Fprintf(d.stdout, "  tenants: default and %s, each with the demo flows; stop with Ctrl-C\n", DemoTenant)
	if d.note != "" {
		fmt.Fprintf(d.stdout, "  %s\n", d.note)
	}
	fmt.Fprintln(d.stdout)
}
