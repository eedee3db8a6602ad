package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/control"
	"plaita/roles"
)

// drainListCommand is `plaita drain-list`: control's List → Stream migration, with its progress
// on stderr.
func drainListCommand(tool roles.Tool, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      tool.Name,
		Usage:     tool.Summary,
		UsageText: "plaita drain-list --list-key KEY [--queue-name STREAM] [--batch N] [--dry-run] [--json]",
		Description: "Moves every item of a legacy Redis List queue (RPUSH/BLPOP, the first Python versions) into the task\n" +
			"stream (PLAITA_QUEUE_NAME, or --queue-name), in order. Killed at any point and run again, it sends no item\n" +
			"twice and loses none: items taken but not finished wait on KEY:drain:processing and go first. An item that\n" +
			"cannot become a task is set aside on KEY:drain:rejected. Stop the producers first (docs/operations.md).\n" +
			"Exit status: 0 drained; 1 failure, or items set aside; 2 bad usage or configuration.",
		Flags: cliFlags(&cli.StringFlag{Name: "list-key", Usage: "the legacy List to drain (required; not the stream itself)"},
			&cli.IntFlag{Name: "batch", Value: control.DefaultDrainBatch, Usage: "items moved per round trip"},
			&cli.BoolFlag{Name: "dry-run", Usage: "count what would be sent and set aside; write nothing"},
			jsonFlag("print the report as JSON (elapsed in nanoseconds)")),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			const name = "drain-list"
			if cmd.Args().Len() > 0 {
				return cliUsage(name, "takes no arguments (the List is --list-key)")
			}
			if n := cmd.Int("batch"); n < 1 || n > 10000 {
				return cliUsage(name, "--batch %d: use 1 to 10000", n)
			}
			// The preflight first: a bad configuration is exit 2 whatever the flags.
			k, err := prepare(cmd, name, tool.Role, stderr)
			if err != nil {
				return err
			}
			if cmd.String("list-key") == "" {
				return cliUsage(name, "--list-key is required: the legacy List to drain (e.g. plaita:flow:queue)")
			}
			if err := k.dial(name); err != nil {
				return err
			}
			defer k.close()
			return runDrainList(ctx, cmd, k, stdout)
		},
	}
}

func runDrainList(ctx context.Context, cmd *cli.Command, k *conn, stdout io.Writer) error {
	const name = "drain-list"
	last := time.Time{}
	rep, err := k.plane.DrainList(ctx, control.DrainListRequest{List: cmd.String("list-key"), Batch: int(cmd.Int("batch")),
		DryRun: cmd.Bool("dry-run"), Progress: func(p control.DrainListProgress) {
			if time.Since(last) >= time.Second {
				last = time.Now()
				k.log.Info().Str("event", "drain_list.progress").Int("sent", p.Sent).Int("already_sent", p.AlreadySent).
					Int("rejected", p.Rejected).Int64("remaining", p.Remaining).Msg("draining the List")
			}
		}})
	if err != nil {
		return refused(name, err)
	}
	k.log.Info().Str("event", "drain_list.done").Str("list", rep.List).Str("stream", rep.Stream).Bool("dry_run", rep.DryRun).
		Int("sent", rep.Sent).Int("already_sent", rep.AlreadySent).Int("rejected", rep.Rejected).Msg("drain finished")
	if cmd.Bool("json") {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		writeDrainList(stdout, rep)
	}
	if !rep.DryRun && rep.After.Rejected > 0 {
		return cliFail(name, "%d item(s) wait on %s: read them with `redis-cli LRANGE %s 0 -1`", rep.After.Rejected, rep.RejectedList, rep.RejectedList)
	}
	return nil
}

func writeDrainList(w io.Writer, rep control.DrainListReport) {
	verb, left := "sent", "left"
	if rep.DryRun {
		verb, left = "would send", "now"
	}
	fmt.Fprintf(w, "%s → %s: %s %d item(s) (%d start, %d resume; %d start(s) given a deterministic execution id)\n",
		rep.List, rep.Stream, verb, rep.Sent, rep.Starts, rep.Resumes, rep.DerivedIDs)
	fmt.Fprintf(w, "  %d already in the stream (sent by an earlier run, or a byte-identical item), %d set aside on %s\n",
		rep.AlreadySent, rep.Rejected, rep.RejectedList)
	for _, r := range rep.RejectedItems {
		fmt.Fprintf(w, "    %s: %s\n", r.Digest, r.Reason)
	}
	fmt.Fprintf(w, "  List %s: %d item(s) %s, %d on %s, %d on %s; %s\n", rep.List, rep.After.Length, left,
		rep.After.Processing, rep.ProcessingList, rep.After.Rejected, rep.RejectedList, control.RoundDuration(rep.Elapsed))
}
