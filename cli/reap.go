package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
	"plaita/internal/alert"
	"plaita/roles"
)

// reapCommand is `plaita reap`: control's zombie reap, with its progress on stderr and a
// zombie_reaped alert for each execution actually reaped.
func reapCommand(tool roles.Tool, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      tool.Name,
		Usage:     tool.Summary,
		UsageText: "plaita reap [--idle-minutes M] [--dry-run] [--tenant T | --all-tenants] [--alert-webhook URL] [--json]",
		Description: "Ends in error (Orphaned) every execution running (or pending) for longer than --idle-minutes since its last\n" +
			"update with no worker holding its lease and no task in the stream that would run or resume it. A live\n" +
			"lease, a task in the stream, or any write to the state after it was read keeps an execution as it is (the\n" +
			"write is conditional on the bytes read and on no lease). --idle-minutes must exceed your longest single node.\n" +
			"--all-tenants: the default tenant and every tenant Redis knows (published statuses, event publishers).\n" +
			"Exit status: 0 done (also when nothing was reaped); 1 failure; 2 bad usage or configuration.",
		Flags: cliFlags(tenantFlag(), &cli.BoolFlag{Name: "all-tenants", Usage: "every tenant Redis knows (default: the --tenant's only)"},
			&cli.FloatFlag{Name: "idle-minutes", Value: control.DefaultReapIdle.Minutes(), Usage: "minutes since the last update before an execution counts as a zombie"},
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be reaped; write nothing, alert nothing"},
			&cli.StringFlag{Name: "alert-webhook", Usage: "POST a zombie_reaped event per reaped execution here (default: PLAITA_ALERT_WEBHOOK)"},
			jsonFlag("print the report as JSON (durations in nanoseconds)")),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			const name = "reap"
			if cmd.Args().Len() > 0 {
				return cliUsage(name, "takes no arguments")
			}
			idle := cmd.Float("idle-minutes")
			if !(idle > 0) || math.IsInf(idle, 0) || idle > 60*24*3650 {
				return cliUsage(name, "--idle-minutes %v: use a number of minutes above 0", idle)
			}
			return withConn(ctx, cmd, name, stderr, func(k *conn) error {
				return runReap(ctx, cmd, k, time.Duration(idle*float64(time.Minute)), stdout)
			})
		},
	}
}

func runReap(ctx context.Context, cmd *cli.Command, k *conn, idle time.Duration, stdout io.Writer) error {
	const name = "reap"
	tenants, err := tenantsOf(ctx, cmd, k, name)
	if err != nil {
		return err
	}
	webhook := config.AlertWebhook.In(k.cfg)
	if cmd.IsSet("alert-webhook") {
		webhook = cmd.String("alert-webhook")
	}
	dry := cmd.Bool("dry-run")
	set := metrics.NewSet()
	host, _ := os.Hostname()
	alerts := alert.New(webhook, "reap@"+host, set, k.log)
	if dry {
		alerts = nil // a dry run alerts nothing
	}
	if err := alerts.Start(ctx); err != nil {
		return cliFail(name, "%v", err)
	}
	last := time.Now()
	rep, err := k.plane.Reap(ctx, control.ReapRequest{Tenants: tenants, Idle: idle, DryRun: dry, Progress: func(p control.ReapProgress) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			k.log.Info().Str("event", "reap.progress").Str("tenant_id", p.Tenant).Int("examined", p.Examined).Int("reaped", p.Reaped).Msg("reaping")
		}
	}})
	for _, it := range rep.Reaped {
		if it.Outcome == "reaped" {
			alerts.Send("zombie_reaped", map[string]any{"execution_id": it.ExecutionID, "tenant_id": it.TenantID, "flow_id": it.FlowID,
				"was": it.Was, "node": it.Node, "last_update_time": it.LastUpdate, "idle_seconds": int64(it.Idle / time.Second)})
		}
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), alert.PostTimeout)
	alerts.Stop(stopCtx)
	cancel()
	if err != nil {
		return refused(name, err)
	}
	if cmd.Bool("json") {
		return writeJSON(stdout, rep)
	}
	writeReap(stdout, rep)
	return nil
}

// tenantsOf is the --tenant, or with --all-tenants every tenant Redis knows.
func tenantsOf(ctx context.Context, cmd *cli.Command, k *conn, name string) ([]string, error) {
	if !cmd.Bool("all-tenants") {
		return []string{k.tenant}, nil
	}
	ts, err := k.plane.KnownTenants(ctx)
	if err != nil {
		return nil, cliFail(name, "list the tenants: %v", err)
	}
	return ts, nil
}

func writeReap(w io.Writer, rep control.ReapReport) {
	verb := "reaped"
	if rep.DryRun {
		verb = "would reap"
	}
	if len(rep.Reaped)+len(rep.Skipped) > 0 {
		var b bytes.Buffer
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "EXECUTION\tTENANT\tFLOW\tWAS\tNODE\tIDLE\tOUTCOME")
		for _, it := range append(append([]control.ReapItem{}, rep.Reaped...), rep.Skipped...) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.ExecutionID, it.TenantID, it.FlowID, it.Was, dash(it.Node),
				control.RoundDuration(it.Idle), it.Outcome)
		}
		tw.Flush()
		w.Write(b.Bytes())
	}
	fmt.Fprintf(w, "%s %d execution(s) idle over %s in %d tenant(s); %d left alone (lease held, task queued or changed); %d index members examined\n",
		verb, len(rep.Reaped), control.RoundDuration(rep.Idle), len(rep.Tenants), len(rep.Skipped), rep.Examined)
}
