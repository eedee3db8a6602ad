package roles

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"

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
	stopTracing, err := StartTracing(ctx, cfg, log)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	defer stopTracing()
	dir, temp := o.StateDir, o.StateDir == ""
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
	program := cmp.Or(o.Program, "plaita")
	where := choice.where(program)
	ev := log.Warn().Str("event", "dev.mode").Str("mode", mode).Str("state", state).Str("redis_url", config.MaskURL(redisURL)).Bool("redis_told", choice.Told)
	if len(choice.Survey.Foreign) > 0 {
		ev = ev.Strs("redis_foreign_keys", choice.Survey.Foreign).Int64("redis_keys", choice.Survey.Keys)
	}
	// Where the flows' files go is said before anything runs: from inside a clone of plaita the
	// derived root is the clone's parent (writefile.ResolveRoot), which nothing else would tell.
	files := ""
	if root, err := writefileRoot(cfg.As(config.RoleWorker)); err == nil { // an error stops the worker, which says why
		ev = ev.Str("writefile_root", root.Path).Str("writefile_rule", string(root.Rule))
		files = root.Where()
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
				var taken *PortTakenError
				if !errors.As(err, &taken) { // that one says all there is, once
					err = fmt.Errorf("%s: %w", role, err)
				}
				errs <- err
				cancel() // one role failing stops dev: a partial stack would mislead
			}
		}()
	}
	if mode == "redis" {
		for _, s := range devRoles() {
			values := map[string]string{"PLAITA_INSTANCE_ID": instance + "-" + string(s.Role), "PLAITA_METRICS_PORT": "0"}
			if s.Role == config.RoleWorker && !cfg.IsSet("PLAITA_WORKER_CONCURRENCY") &&
				config.WorkerConcurrency.In(cfg.As(config.RoleWorker)) < oneProcessMinWorkers {
				// The one worker there is runs several steps at once, as local mode's does: at the
				// worker's default (1) one long execution holds up every other start.
				values["PLAITA_WORKER_CONCURRENCY"] = strconv.Itoa(oneProcessMinWorkers)
			}
			rcfg := cfg.AsWith(s.Role, values)
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
	seed := &devSeed{flows: o.Flows, stdout: o.Stdout, log: log, adminPassword: config.ConsoleAdminPassword.In(ccfg),
		adminKey: config.ConsoleAdminAPIKey.In(ccfg) != "", files: files}
	if !choice.Use && choice.Answered {
		seed.note = where // a Redis it did not use: said again beside the URL
	}
	addr := net.JoinHostPort(config.ConsoleHost.In(ccfg), strconv.Itoa(config.ConsolePort.In(ccfg)))
	runRole(config.RoleConsole, func(ctx context.Context) error {
		err := runConsoleWith(ctx, ccfg, clog, consoleOptions{local: mode == "local", localWhy: choice.why(), seed: seed.run, serving: seed.serving})
		if taken := portTaken(err, addr, program); taken != nil {
			return taken
		}
		return err
	})
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// PortTakenError is plaita dev's console port held by another process: said once, with the
// flag and the variable that choose another. The error comes through the HTTP service, the
// console's service group and the console, each naming itself, none of them knowing that dev
// has a --port.
type PortTakenError struct {
	Addr    string // host:port the console was to listen on
	Program string // how the commands printed invoke plaita
	Err     error  // the listen's own error: bind: address already in use
}

func (e *PortTakenError) Error() string {
	return fmt.Sprintf("dev: the console cannot serve on %s: the port is taken (%v) — another plaita dev, or another server, listens there; "+
		"choose another port with `%s dev --port N` (or PLAITA_CONSOLE_PORT=N)", e.Addr, e.Err, e.Program)
}

func (e *PortTakenError) Unwrap() error { return e.Err }

// portTaken is err as a *PortTakenError when it is a listen that found addr in use; nil
// otherwise.
func portTaken(err error, addr, program string) error {
	var op *net.OpError
	if !errors.Is(err, syscall.EADDRINUSE) || !errors.As(err, &op) || op.Op != "listen" {
		return nil
	}
	return &PortTakenError{Addr: addr, Program: program, Err: op.Err}
}

// devSeed is dev's demo: the demo tenant, the admin, the flows; then the URL.
type devSeed struct {
	note          string // printed with the URL: the Redis dev found and left alone
	files         string // where writefile nodes write (writefile.Root.Where; "" unknown)
	flows         fs.FS
	stdout        io.Writer
	log           zerolog.Logger
	adminPassword string // PLAITA_CONSOLE_ADMIN_PASSWORD ("" unset): the console made the admin with it, if there was none
	adminKey      bool   // PLAITA_CONSOLE_ADMIN_API_KEY is set: the admin API answers
	password      string // the admin's password dev made ("" when it made none)
	// adminIs: PLAITA_CONSOLE_ADMIN_PASSWORD is the admin's password (the console made the
	// admin with it now, or a kept state's admin has that one); false when unset.
	adminIs bool
	adminID string // the admin's user id ("" when there is no user admin)
}

func (d *devSeed) run(ctx context.Context, db *sqlite.DB, plane *control.Plane) error {
	if _, err := db.CreateTenant(ctx, sqlite.NewTenant{Slug: DemoTenant, Name: "Demo"}); err != nil && !errors.Is(err, sqlite.ErrTenantExists) {
		return fmt.Errorf("dev: the demo tenant: %w", err)
	}
	if d.adminPassword == "" {
		pw := rand.Text()
		if _, created, err := db.EnsureBootstrapAdmin(ctx, BootstrapAdminLogin, pw); err != nil {
			return fmt.Errorf("dev: the admin: %w", err)
		} else if created {
			d.password = pw
		}
	} else {
		// The console made the admin from the variable only if the database had no user: on a
		// kept state the admin keeps the password it has (EnsureBootstrapAdmin changes none), so
		// dev says "log in with PLAITA_CONSOLE_ADMIN_PASSWORD" only when that is true. The
		// console counts no failed logins (no lockout), so a wrong one here costs nothing.
		_, err := db.VerifyPassword(ctx, BootstrapAdminLogin, d.adminPassword)
		if err != nil && !errors.Is(err, sqlite.ErrBadCredentials) {
			return fmt.Errorf("dev: the admin: %w", err)
		}
		d.adminIs = err == nil
	}
	if u, err := db.UserByLogin(ctx, BootstrapAdminLogin); err == nil {
		d.adminID = u.ID
	} else if !errors.Is(err, sqlite.ErrUserNotFound) {
		return fmt.Errorf("dev: the admin: %w", err)
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

// resetHint says how to give a kept state's admin a new password: the admin API's PATCH
// /api/users/{id} (it ends the user's sessions), with the admin key — or, signed in as another
// platform admin, the Users page.
func (d *devSeed) resetHint(addr string) {
	user := "ID"
	if d.adminID != "" {
		user = d.adminID
	}
	key := "with dev's PLAITA_CONSOLE_ADMIN_API_KEY in your environment"
	if !d.adminKey {
		key = "once dev runs with PLAITA_CONSOLE_ADMIN_API_KEY set (the admin API answers 503 without it)"
	}
	fmt.Fprintf(d.stdout, "  to give %s a new password, set NEW_PASSWORD (8 characters or more) and run this %s; "+
		"or, signed in as another platform admin, use the Users page:\n", BootstrapAdminLogin, key)
	fmt.Fprintf(d.stdout, "    curl -X PATCH http://%s/api/users/%s -H \"X-Admin-API-Key: $PLAITA_CONSOLE_ADMIN_API_KEY\" "+
		"-H 'Content-Type: application/json' -d \"{\\\"password\\\": \\\"$NEW_PASSWORD\\\"}\"\n", addr, user)
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
	case d.adminIs:
		fmt.Fprintf(d.stdout, "  log in as %s with PLAITA_CONSOLE_ADMIN_PASSWORD\n", BootstrapAdminLogin)
	case d.adminPassword != "":
		fmt.Fprintf(d.stdout, "  log in with the users the kept state already has: PLAITA_CONSOLE_ADMIN_PASSWORD is not %s's password there — "+
			"it makes the admin of a state without users, and changes no password\n", BootstrapAdminLogin)
		d.resetHint(addr)
	default:
		fmt.Fprintf(d.stdout, "  log in with the users the kept state already has (its admin's password was printed when it was made); "+
			"PLAITA_CONSOLE_ADMIN_PASSWORD does not reset it — it makes the admin of a state without users only\n")
		d.resetHint(addr)
	}
	fmt.Fprintf(d.stdout, "  tenants: default and %s, each with the demo flows; stop with Ctrl-C\n", DemoTenant)
	if d.files != "" {
		fmt.Fprintf(d.stdout, "  files: writefile nodes write %s\n", d.files)
	}
	if d.note != "" {
		fmt.Fprintf(d.stdout, "  %s\n", d.note)
	}
	fmt.Fprintln(d.stdout)
}
