package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
	"plaita/roles"
)

// dlqCommand is `plaita dlq list|show|replay` over control's dead-letter operations: the same
// tenant scoping, one-shot replay and inherited schema version as the console's endpoint.
func dlqCommand(tool roles.Tool, stdout, stderr io.Writer) *cli.Command {
	all := &cli.BoolFlag{Name: "all-tenants", Usage: "every tenant's dead letters (default: the --tenant's only)"}
	return &cli.Command{
		Name:      tool.Name,
		Usage:     tool.Summary,
		UsageText: "plaita dlq list|show|replay [ID] [--tenant T | --all-tenants] [--json]",
		Description: "The dead-letter stream (PLAITA_DLQ_KEY) is shared by every tenant: each subcommand sees the --tenant's\n" +
			"entries only (--all-tenants: every one). A replay enqueues the dead letter again once — a second\n" +
			"replay of the same entry says \"already replayed\" and enqueues nothing; the copy keeps its source's\n" +
			"schema version and generations, and a legacy start without an execution id gets the id its first\n" +
			"delivery used. The entry stays in the stream as evidence.\n" +
			"Exit status: 0 done; 1 failure, unknown entry, or a dead letter this build cannot replay; 2 bad usage.",
		Action: subcommandsOnly,
		Commands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "list the newest dead letters",
				UsageText: "plaita dlq list [--limit N] [--tenant T | --all-tenants] [--json]",
				Flags: cliFlags(tenantFlag(), all, &cli.IntFlag{Name: "limit", Value: 50, Usage: "dead letters to list (1–1000)"},
					jsonFlag("print {tenant_id, items} as JSON")),
				Action: func(ctx context.Context, cmd *cli.Command) error { return dlqList(ctx, cmd, stdout, stderr) },
			},
			{
				Name:      "show",
				Usage:     "print one dead letter with its payload",
				UsageText: "plaita dlq show ID [--tenant T | --all-tenants] [--json]",
				Flags:     cliFlags(tenantFlag(), all, jsonFlag("print the dead letter as JSON")),
				Action:    func(ctx context.Context, cmd *cli.Command) error { return dlqShow(ctx, cmd, stdout, stderr) },
			},
			{
				Name:      "replay",
				Usage:     "enqueue a dead letter again, once",
				UsageText: "plaita dlq replay ID [--tenant T | --all-tenants] [--json]",
				Flags:     cliFlags(tenantFlag(), all, jsonFlag("print what the replay did as JSON")),
				Action:    func(ctx context.Context, cmd *cli.Command) error { return dlqReplay(ctx, cmd, stdout, stderr) },
			},
		},
	}
}

// dlqList prints the newest dead letters of the --tenant (or of every tenant).
func dlqList(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "dlq list"
	if cmd.Args().Len() > 0 {
		return cliUsage(name, "takes no arguments")
	}
	return withConn(ctx, cmd, name, stderr, func(k *conn) error {
		es, err := k.plane.DeadLetters(ctx, k.tenant, cmd.Bool("all-tenants"), int(cmd.Int("limit")))
		if err != nil {
			return refused(name, err)
		}
		if cmd.Bool("json") {
			return writeJSON(stdout, map[string]any{"tenant_id": k.tenant, "all_tenants": cmd.Bool("all-tenants"), "items": es})
		}
		writeDeadLetters(stdout, es)
		return nil
	})
}

// dlqShow prints one dead letter with its payload.
func dlqShow(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "dlq show"
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one dead letter: plaita dlq show ID")
	}
	return withConn(ctx, cmd, name, stderr, func(k *conn) error {
		e, err := k.plane.DeadLetter(ctx, k.tenant, cmd.Bool("all-tenants"), cmd.Args().First())
		if err != nil {
			return refused(name, err)
		}
		if cmd.Bool("json") {
			return writeJSON(stdout, e)
		}
		writeDeadLetter(stdout, e)
		return nil
	})
}

// dlqReplay enqueues a dead letter again, once (control.ReplayDeadLetter).
func dlqReplay(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "dlq replay"
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one dead letter: plaita dlq replay ID")
	}
	return withConn(ctx, cmd, name, stderr, func(k *conn) error {
		res, err := k.plane.ReplayDeadLetter(ctx, k.tenant, cmd.Bool("all-tenants"), cmd.Args().First())
		if err != nil {
			return refused(name, err)
		}
		k.log.Info().Str("event", "dlq.replay_requested").Str("dlq_id", res.DLQID).Str("status", string(res.Status)).
			Str("execution_id", res.ExecutionID).Str("tenant_id", res.TenantID).Msg("dead letter replay")
		if cmd.Bool("json") {
			return writeJSON(stdout, res)
		}
		if res.Status == control.ReplayAlreadyReplayed {
			fmt.Fprintf(stdout, "dead letter %s: already replayed (as %s); nothing enqueued\n", res.DLQID, res.QueueID)
			return nil
		}
		fmt.Fprintf(stdout, "dead letter %s: replayed as %s (execution %s, tenant %s, schema version %d)\n",
			res.DLQID, res.QueueID, res.ExecutionID, res.TenantID, res.SchemaVersion)
		return nil
	})
}

// withConn runs the worker's preflight, connects for the --tenant and runs fn.
func withConn(ctx context.Context, cmd *cli.Command, name string, stderr io.Writer, fn func(*conn) error) error {
	if cmd.Bool("all-tenants") && cmd.IsSet("tenant") {
		return cliUsage(name, "--tenant and --all-tenants do not go together")
	}
	k, err := connect(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	defer k.close()
	return fn(k)
}

func writeDeadLetters(w io.Writer, es []control.DeadLetter) {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DLQ ID\tDEAD-LETTERED\tTENANT\tKIND\tEXECUTION\tREASON\tDELIVERIES")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", e.ID, e.DeadLetteredAt.Format(time.RFC3339), dash(e.TenantID), dash(e.Kind),
			dash(e.ExecutionID), e.Reason, e.DeliveryCount)
	}
	tw.Flush()
	w.Write(b.Bytes())
	fmt.Fprintf(w, "%d dead letter(s)\n", len(es))
}

func writeDeadLetter(w io.Writer, e control.DeadLetter) {
	fmt.Fprintf(w, "dead letter %s\n", e.ID)
	fmt.Fprintf(w, "  reason:     %s\n", e.Reason)
	if e.Detail != "" {
		fmt.Fprintf(w, "  detail:     %s\n", e.Detail)
	}
	fmt.Fprintf(w, "  source:     %s (queue %s, %d deliveries)\n", e.SourceID, e.Queue, e.DeliveryCount)
	fmt.Fprintf(w, "  execution:  %s (tenant %s, %s)\n", dash(e.ExecutionID), dash(e.TenantID), dash(e.Kind))
	fmt.Fprintf(w, "  at:         %s\n", e.DeadLetteredAt.Format(time.RFC3339))
	switch {
	case !e.HasPayload:
		fmt.Fprintln(w, "  payload:    (none)")
	case e.Truncated:
		fmt.Fprintf(w, "  payload:    the first %d of %d bytes (sha256 %s): cannot be replayed\n    %s\n", len(e.Payload), e.PayloadSize, e.PayloadSHA256, e.Payload)
	default:
		fmt.Fprintf(w, "  payload:\n    %s\n", e.Payload)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
