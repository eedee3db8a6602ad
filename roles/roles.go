// Package roles wires plaita's processes: one command per role, each running the strict
// preflight before anything else. Business logic lives in engine/, store/, queue/ and web/.
package roles

import (
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
			[]string{DepRedis}, false},
		{config.RoleSchedule, "enqueues start tasks for due cron schedules",
			[]string{DepRedis}, false},
		{config.RoleDelay, "wakes executions whose delay or timeout is due",
			[]string{DepRedis}, false},
		{config.RoleDev, "every role above in one process, for a laptop",
			[]string{DepSQLite, DepRedisOrLocal, DepWeb, DepMetrics, DepSandbox}, false},
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

// WriteTable prints the role table.
func WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tNEEDS\tSTATUS\tWHAT IT DOES")
	for _, s := range Table() {
		status := "built"
		if !s.Built {
			status = "not built yet"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Role, strings.Join(s.Needs, ", "), status, s.Summary)
	}
	return tw.Flush()
}
