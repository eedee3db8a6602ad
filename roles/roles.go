// Package roles wires plaita's processes: one command per role, each running the strict
// preflight before anything else. Business logic lives in engine/, store/, queue/ and web/.
package roles

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

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
		{config.RoleConsole, "HTTP API and web UI; publishes flows, schedules and tenant status",
			[]string{DepSQLite, DepRedisOrLocal, DepWeb, DepMetrics}, false},
		{config.RoleFilter, "turns published events into resume tasks for suspended executions",
			[]string{DepRedis, DepMetrics}, true},
		{config.RoleSchedule, "enqueues start tasks for due cron schedules",
			[]string{DepRedis}, true},
		{config.RoleDelay, "wakes executions whose delay or timeout is due",
			[]string{DepRedis, DepMetrics}, true},
		{config.RoleDev, "every role above in one process, for a laptop",
			[]string{DepSQLite, DepRedisOrLocal, DepWeb, DepMetrics, DepSandbox}, false},
	}
}

// Tool is an operator command of the same binary (the runbook's scripts). It runs the
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
		{"reap", "find and settle zombie executions", config.RoleWorker, []string{DepRedis}, false},
		{"reindex", "rebuild the execution index", config.RoleWorker, []string{DepRedis}, false},
		{"dlq", "list or replay dead letters", config.RoleWorker, []string{DepRedis}, false},
		{"drain-list", "migrate a legacy List queue to the Stream", config.RoleWorker, []string{DepRedis}, false},
		{"migrate", "apply or roll back console database migrations", config.RoleConsole, []string{DepSQLite}, false},
	}
}

func lookupSpec(r config.Role) Spec {
	for _, s := range Table() {
		if s.Role == r {
			return s
		}
	}
	panic("roles: no spec for role " + string(r))
}

// status is how a build status reads in `plaita roles` and `plaita --help`.
func status(built bool) string {
	if built {
		return "built"
	}
	return "not built yet"
}

// helpUsage is a command's line in --help: its summary, marked when it is not built, so the
// help and `plaita roles` say the same thing.
func helpUsage(summary string, built bool) string {
	if built {
		return summary
	}
	return summary + " (" + status(built) + ")"
}

// WriteTable prints the role table and the operator tools, in one set of aligned columns.
func WriteTable(w io.Writer) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tNEEDS\tSTATUS\tWHAT IT DOES")
	for _, s := range Table() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Role, strings.Join(s.Needs, ", "), status(s.Built), s.Summary)
	}
	// An empty row, not an empty line: an empty line would restart the column widths.
	fmt.Fprintln(tw, "\t\t\t")
	fmt.Fprintln(tw, "TOOL\tNEEDS\tSTATUS\tWHAT IT DOES")
	for _, t := range Tools() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, strings.Join(t.Needs, ", "), status(t.Built), t.Summary)
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
