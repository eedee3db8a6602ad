// Package roles wires plaita's service roles (worker, console, filter, schedule, delay) and
// plaita dev, which runs them in one process. roles.go is the role table, the one place a role
// is declared; each role's wiring is roles/<role>.go (typed settings from the configuration,
// roles/settings; its services from roles/<role>/ and internal/), and serve.go is the one
// lifecycle they all run with. The commands that run them, and the operator commands, are in
// cli/; what the roles do is in roles/<role>/, engine/, store/ and queue/.
package roles

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/rs/zerolog"

	"plaita/config"
)

// Dependencies a role starts before its own services, and stops after them.
const (
	DepRedis        = "redis"
	DepRedisOrLocal = "redis-or-local"
	DepSQLite       = "sqlite"
	DepWeb          = "web"
	DepMetrics      = "metrics"
	DepSandbox      = "sandbox"
)

//go:generate go run ./internal/gen -config ../config/roles_gen.go
//go:generate go generate ../config

// Spec is one row of the role table: the one place a role is declared. Everything else that
// lists roles derives from the table: the configuration's role names and the variables each role
// reads (config/roles_gen.go, from the capabilities), the CLI's role commands, plaita dev's start
// order, `plaita roles` and the roles table of docs/configuration.md.
type Spec struct {
	Role    config.Role
	Summary string
	Needs   []string // what the role starts before its own services, as `plaita roles` shows it
	// Serves are the capabilities whose configuration variables the role reads and its preflight
	// checks (config.CapProcess, every role's, is implied).
	Serves []config.Capability
	// Dev: plaita dev runs the role, in table order (the console in its own way: local mode, the
	// demo).
	Dev bool
	// Body runs the role until ctx ends, on the configuration its preflight accepted; nil: the
	// role is not built yet (dev has none: plaita dev runs the others).
	Body func(ctx context.Context, cfg *config.Config, log zerolog.Logger) error
	// Built is derived by Table: the role has a body (dev: always).
	Built bool
}

// Table is the role table, in the order `plaita roles` prints it. Adding a role is one row here,
// its wiring in roles/<role>.go and its loop in roles/<role>/; then `go generate ./roles`. The
// names are literals: config's Role constants (config.RoleWorker …) are generated from them.
func Table() []Spec {
	t := []Spec{
		{Role: "worker", Summary: "consumes the task stream and runs executions step by step",
			Needs:  []string{DepRedis, DepMetrics, DepSandbox},
			Serves: []config.Capability{config.CapRedis, config.CapProducer, config.CapConsumer, config.CapEngine, config.CapEvents, config.CapDelayQueue, config.CapTenant},
			Dev:    true, Body: runWorker},
		{Role: "console", Summary: "HTTP API and web UI (tenants, users, keys, audit, flows, executions, events, schedules, dead letters, bulk jobs, cluster); publishes flows and tenant status; local mode without Redis",
			Needs:  []string{DepSQLite, DepRedisOrLocal, DepWeb, DepMetrics},
			Serves: []config.Capability{config.CapEngine, config.CapEvents, config.CapTenant, config.CapStarts, config.CapConsoleAPI},
			Dev:    true, Body: runConsole},
		{Role: "filter", Summary: "turns published events into resume tasks for suspended executions",
			Needs:  []string{DepRedis, DepMetrics},
			Serves: []config.Capability{config.CapRedis, config.CapProducer, config.CapEvents, config.CapEventMatch},
			Dev:    true, Body: runFilter},
		{Role: "schedule", Summary: "enqueues start tasks for due cron schedules",
			Needs:  []string{DepRedis, DepMetrics},
			Serves: []config.Capability{config.CapRedis, config.CapProducer, config.CapStarts, config.CapCron},
			Dev:    true, Body: runSchedule},
		{Role: "delay", Summary: "wakes executions whose delay or timeout is due",
			Needs:  []string{DepRedis, DepMetrics},
			Serves: []config.Capability{config.CapRedis, config.CapProducer, config.CapDelayQueue},
			Dev:    true, Body: runDelay},
		{Role: "dev", Summary: "every role above in one process, for a laptop: on the Redis it is given (or a default one holding only plaita's keys), else in local mode",
			Needs: []string{DepSQLite, DepRedisOrLocal, DepWeb, DepMetrics, DepSandbox}},
	}
	for i := range t {
		t[i].Built = t[i].Body != nil || t[i].Role == config.RoleDev
	}
	return t
}

// ConfigTable is the role table as the configuration reads it: what `go generate ./roles`
// writes into config/roles_gen.go.
func ConfigTable() []config.RoleDef {
	var out []config.RoleDef
	for _, s := range Table() {
		out = append(out, config.RoleDef{Role: s.Role, Summary: s.Summary, Serves: s.Serves, Dev: s.Dev})
	}
	return out
}

// Tool is an operator command of the same binary (the operations scripts of the Python
// implementation, as subcommands). It runs the
// preflight of the role whose configuration it uses.
type Tool struct {
	Name    string
	Summary string
	Role    config.Role // whose preflight it runs
	Needs   []string
	Built   bool
}

// Tools lists the operator commands, in the order `plaita roles` prints them.
func Tools() []Tool {
	return []Tool{
		{"status", "what needs attention: backlog, dead letters, instances, generations, unwoken waits", config.RoleWorker, []string{DepRedis}, true},
		{"reap", "find and settle zombie executions", config.RoleWorker, []string{DepRedis}, true},
		{"reindex", "rebuild the execution index", config.RoleWorker, []string{DepRedis}, true},
		{"dlq", "list, show or replay dead letters", config.RoleWorker, []string{DepRedis}, true},
		{"drain-list", "move a legacy List queue into the task stream, each item once", config.RoleWorker, []string{DepRedis}, true},
		{"ctl", "ask one instance for its status or a drain, over its control channel", config.RoleWorker, []string{DepRedis}, true},
		{"migrate", "apply or roll back console database migrations", config.RoleConsole, []string{DepSQLite}, true},
		{"probe", "exit 0 when a role's /readyz answers 200: the container health check", config.RoleWorker, nil, true},
	}
}

// Lookup is the row of a role.
func Lookup(r config.Role) Spec {
	for _, s := range Table() {
		if s.Role == r {
			return s
		}
	}
	panic("roles: no spec for role " + string(r))
}

// Status is how a build status reads in `plaita roles` and `plaita --help`.
func Status(built bool) string {
	if built {
		return "built"
	}
	return "not built yet"
}

// Body is the body of a role that is built: it runs until ctx ends, on the configuration the
// role's preflight accepted.
func Body(role config.Role) (func(context.Context, *config.Config, zerolog.Logger) error, bool) {
	for _, s := range Table() {
		if s.Role == role && s.Body != nil {
			return s.Body, true
		}
	}
	return nil, false
}

// WriteTable prints the role table and the operator tools, in one set of aligned columns.
func WriteTable(w io.Writer) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tNEEDS\tSTATUS\tWHAT IT DOES")
	for _, s := range Table() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Role, strings.Join(s.Needs, ", "), Status(s.Built), s.Summary)
	}
	// An empty row, not an empty line: an empty line would restart the column widths.
	fmt.Fprintln(tw, "\t\t\t")
	fmt.Fprintln(tw, "TOOL\tNEEDS\tSTATUS\tWHAT IT DOES")
	for _, t := range Tools() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, strings.Join(t.Needs, ", "), Status(t.Built), t.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if _, err := io.WriteString(w, strings.TrimRight(line, " ")+"\n"); err != nil {
			return err
		}
	}
	return nil
}
