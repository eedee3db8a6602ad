package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/control"
	"plaita/roles"
)

// configHashNote says what the CONFIG column holds. config_generation hashes the same
// variables on every role, but each role's effective values: a default that depends on the role
// (config/registry.go: PLAITA_CODE_BACKEND and, through it, PLAITA_SANDBOX_ALLOWED_BACKENDS)
// gives a worker another hash than a filter on one environment. Status lists a difference among
// the instances of one role only (generation_mismatch, control/status.go); without this note an
// operator reads the worker's other hash as the same problem.
const configHashNote = "  CONFIG: hash of the effective values of the variables that change behaviour (`plaita doctor --role R`); some\n" +
	"  defaults depend on the role (PLAITA_CODE_BACKEND: subprocess on a worker, docker elsewhere), so a worker's hash\n" +
	"  differs from a filter's — replicas of one role should match, and only a difference among them needs attention\n"

// staleNote counts apart the scheduled entries that wake nothing any more (the timeout of an
// approval answered meanwhile …): without it "scheduled 1" with nothing suspended reads as a
// wake-up lost.
func staleNote(d control.DelayStatus) string {
	switch {
	case d.Stale == 0:
		return ""
	case d.StaleChecked < d.Scheduled:
		return fmt.Sprintf(" (%d of the %d soonest for waits already over: dropped when due)", d.Stale, d.StaleChecked)
	}
	return fmt.Sprintf(" (%d for waits already over: dropped when due)", d.Stale)
}

// statusCommand is `plaita status`: control's cluster status as a table or JSON; exit 1 when
// something needs attention, so a cron job or a probe can act on it.
func statusCommand(tool roles.Tool, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      tool.Name,
		Usage:     tool.Summary,
		UsageText: "plaita status [--tenant T] [--json]",
		Description: "The task stream's length, pending entries, lag and residue, the dead letters, the delay queue, the live\n" +
			"instances by role and status, the configuration generations that differ on one queue, and the --tenant's\n" +
			"suspended executions that no live role will wake; then what needs attention, each with its command.\n" +
			"Exit status: 0 nothing needs attention; 1 something does, or Redis cannot be read; 2 bad usage or configuration.",
		Flags: cliFlags(tenantFlag(), jsonFlag("print the status as JSON (durations in nanoseconds)")),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			const name = "status"
			if cmd.Args().Len() > 0 {
				return cliUsage(name, "takes no arguments")
			}
			return withConn(ctx, cmd, name, stderr, func(k *conn) error {
				s, err := k.plane.Status(ctx, k.tenant)
				if err != nil {
					return refused(name, err)
				}
				if cmd.Bool("json") {
					if err := writeJSON(stdout, s); err != nil {
						return err
					}
				} else {
					writeStatus(stdout, s)
				}
				if !s.Healthy() {
					return &exitError{code: ExitFailure, err: fmt.Errorf("%s: %d thing(s) need attention", name, len(s.Attention))}
				}
				return nil
			})
		},
	}
}

func writeStatus(w io.Writer, s control.ClusterStatus) {
	q := s.Queue
	lag := fmt.Sprint(q.Lag)
	if !q.LagKnown {
		lag = "≤" + lag
	}
	fmt.Fprintf(w, "queue %s (group %s)\n", q.Stream, q.Group)
	fmt.Fprintf(w, "  length %d   pending %d   lag %s   residue %d   consumers %d   dead letters %d (%s)\n",
		q.Length, q.Pending, lag, q.Residue, q.Consumers, q.DLQLength, q.DLQ)
	if !q.GroupExists {
		fmt.Fprintln(w, "  no consumer group yet: no worker has started on this queue")
	}
	d := s.Delay
	fmt.Fprintf(w, "delay queue %s\n  scheduled %d%s   due %d   dead %d", d.Key, d.Scheduled, staleNote(d), d.Due, d.Dead)
	if d.OldestDue != nil {
		fmt.Fprintf(w, "   next %s", control.Relative(d.OldestDue.Sub(s.At)))
	}
	fmt.Fprintln(w)

	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tRUNNING\tDRAINING\tSTOPPING")
	for _, r := range s.Roles {
		note := ""
		if !r.Built {
			note = "\t(not built yet)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d%s\n", r.Role, r.Running, r.Draining, r.Stopping, note)
	}
	tw.Flush()
	w.Write(b.Bytes())
	if len(s.Instances) > 0 {
		b.Reset()
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "INSTANCE\tROLE\tSTATUS\tHOST\tPID\tTASKS\tHEARTBEAT\tUP\tCONFIG")
		for _, in := range s.Instances {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d/%d\t%s ago\t%s\t%s\n", in.InstanceID, in.Role, in.Status, in.Host, in.PID,
				in.ActiveTasks, in.Capacity, control.RoundDuration(in.HeartbeatAge), control.RoundDuration(in.Uptime.Truncate(time.Second)),
				dash(in.ConfigGeneration))
		}
		tw.Flush()
		w.Write(b.Bytes())
		fmt.Fprint(w, configHashNote)
	}
	sp := s.Suspended
	scope := "all"
	if !sp.Complete {
		scope = "the newest"
	}
	fmt.Fprintf(w, "suspended executions of tenant %s (%s): %d — delay %d, event %d, approval %d; %d with a timeout\n",
		sp.TenantID, scope, sp.Total, sp.ByKind["delay"], sp.ByKind["event"], sp.ByKind["approval"], sp.WithTimeout)
	if len(s.Attention) == 0 {
		fmt.Fprintln(w, "nothing needs attention")
		return
	}
	fmt.Fprintf(w, "needs attention (%d):\n", len(s.Attention))
	for _, f := range s.Attention {
		fmt.Fprintf(w, "  - [%s] %s\n", f.Code, f.Text)
	}
}
