// Package roles wires plaita's service roles (worker, console, filter, schedule, delay) and
// plaita dev, which runs them in one process: typed settings from the configuration (roles/settings), the role's services
// from roles/<role>/ and internal/, and one lifecycle for all of them (serve.go). The commands
// that run them, and the operator commands, are in roles/cli; what the roles do is in
// roles/<role>/, engine/, store/ and queue/.
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

// Spec is one row of the role table.
type Spec struct {
	Role    config.Role
	Summary string
	Needs   []string
	Built   bool // false until the role's services exist; the command then refuses to pretend
}

// Table is the role → dependency table, in the order `plaita roles` prints it.
func Table() []Spec {
	return []Spec{
		{config.RoleWorker, "consumes the task stream and runs executions step by step",
			[]string{DepRedis, DepMetrics, DepSandbox}, true},
		{config.RoleConsole, "HTTP API and web UI (tenants, users, keys, audit, flows, executions, events, schedules, dead letters, bulk jobs, cluster); publishes flows and tenant status; local mode without Redis",
			[]string{DepSQLite, DepRedisOrLocal, DepWeb, DepMetrics}, true},
		{config.RoleFilter, "turns published events into resume tasks for suspended executions",
			[]string{DepRedis, DepMetrics}, true},
		{config.RoleSchedule, "enqueues start tasks for due cron schedules",
			[]string{DepRedis, DepMetrics}, true},
		{config.RoleDelay, "wakes executions whose delay or timeout is due",
			[]string{DepRedis, DepMetrics}, true},
		{config.RoleDev, "every role above in one process, for a laptop: on the Redis it is given (or a default one holding only plaita's keys), else in local mode",
			[]string{DepSQLite, DepRedisOrLocal, DepWeb, DepMetrics, DepSandbox}, true},
	}
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
	switch role {
	case config.RoleWorker:
		return runWorker, true
	case config.RoleDelay:
		return runDelay, true
	case config.RoleSchedule:
		return runSchedule, true
	case config.RoleFilter:
		return runFilter, true
	case config.RoleConsole:
		return runConsole, true
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
