package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
)

// executionCommand groups the operator commands over stored executions: each parses its
// arguments, calls one control operation and renders its result (the console calls the same).
func executionCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "execution",
		Usage:     "list, show, cancel, resume or delete executions in Redis",
		UsageText: "plaita execution list|show|cancel|resume|delete [ID] [flags]",
		Description: "Every subcommand runs the worker's configuration preflight and connects to PLAITA_REDIS_URL.\n" +
			"Exit status: 0 done; 1 failure or unknown execution id; 2 bad usage.",
		Action: subcommandsOnly,
		Commands: []*cli.Command{
			executionListCommand(stdout, stderr),
			executionShowCommand(stdout, stderr),
			executionCancelCommand(stdout, stderr),
			executionResumeCommand(stdout, stderr),
			executionDeleteCommand(stdout, stderr),
		},
	}
}

func executionListCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "list the tenant's executions, newest first",
		UsageText: "plaita execution list [--status S] [--flow FLOW_ID] [--started-after TIME] [--started-before TIME] [--index FIELD=VALUE]... [--tenant T] [--limit N] [--cursor C] [--json]",
		Description: "--index lists the executions of flows that index FIELD (\"index\": [\"order_id\"], docs/flows.md)\n" +
			"started with VALUE: read as JSON when it parses (17, true, '\"17\"'), else as text (ord-1);\n" +
			"several --index must all hold. Times are RFC 3339 (2026-03-01T12:00:00Z); --started-after is\n" +
			"inclusive, --started-before exclusive.",
		Flags: cliFlags(tenantFlag(),
			&cli.IntFlag{Name: "limit", Value: control.DefaultListLimit, Usage: fmt.Sprintf("executions per page (1–%d)", control.MaxListLimit)},
			&cli.StringFlag{Name: "cursor", Usage: "continue after the page that printed this cursor"},
			&cli.StringFlag{Name: "status", Usage: "only executions of this status: pending, running, suspended, completed, error or cancelled"},
			&cli.StringFlag{Name: "flow", Usage: "only executions of this flow id"},
			&cli.StringFlag{Name: "started-after", Aliases: []string{"since"}, Usage: "only executions started at or after this time (RFC 3339)"},
			&cli.StringFlag{Name: "started-before", Aliases: []string{"until"}, Usage: "only executions started before this time (RFC 3339)"},
			&cli.StringSliceFlag{Name: "index", Usage: "only executions indexed under FIELD=VALUE (repeatable: all must hold)"},
			jsonFlag("print the page as JSON: items, next_cursor, skipped, degraded")),
		Action: func(ctx context.Context, cmd *cli.Command) error { return executionList(ctx, cmd, stdout, stderr) },
	}
}

func executionShowCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print one execution's summary, what wakes it, and its timeline (or its state as JSON)",
		UsageText: "plaita execution show ID [--wait [--until completed|ended] [--timeout SECONDS]] [--tenant T] [--json]",
		Description: "A suspended execution's summary says which role wakes it and whether one is registered and\n" +
			"alive, and for a due time whether its delay-queue entry is there (--json: the wake_up object).\n" +
			"A state that can no longer be read is shown as stored (--json: corrupt, salvaged, raw).\n" +
			"--wait shows it once it suspends or ends (as start --wait does); with --until, once it ends.\n" +
			"Exit status: 0 shown (with --until completed: and completed); 1 unknown execution, a timeout, or\n" +
			"with --until completed an end other than completed; 2 bad usage.",
		Flags: cliFlags(tenantFlag(),
			&cli.BoolFlag{Name: "wait", Usage: "show it once it suspends or ends (queued or running: wait)"},
			&cli.StringFlag{Name: "until", Usage: untilUsage},
			waitTimeoutFlag(),
			jsonFlag("print the whole execution state as JSON, with wake_up for a suspended one")),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			const name = "show"
			until, err := untilFlag(cmd, name)
			if err != nil {
				return err
			}
			timeout, err := waitTimeout(cmd, name)
			if err != nil {
				return err
			}
			return withExecution(ctx, cmd, name, stderr, nil, func(k *conn, id string) error {
				if !cmd.Bool("wait") {
					return executionShow(ctx, cmd, k, id, stdout)
				}
				// An unknown id fails at once, not at the timeout (a queued one is waited for).
				if _, err := k.plane.Show(ctx, k.tenant, id); err != nil {
					return refused(name, err)
				}
				wait := k.plane.WaitSettled
				if until != "" {
					wait = k.plane.WaitEnded
				}
				st, err := wait(ctx, k.tenant, id, timeout)
				if err != nil {
					return cliFail(name, "execution %s: %v", id, err)
				}
				if err := executionShow(ctx, cmd, k, id, stdout); err != nil {
					return err
				}
				if until == untilCompleted && st.Status != state.Completed {
					return cliFail(name, "execution %s %s, not completed", id, control.DescribeEnd(st))
				}
				return nil
			})
		},
	}
}

func executionCancelCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "cancel",
		Usage:     "cancel an execution (raises its cancel flag and enqueues a cancel resume)",
		UsageText: "plaita execution cancel ID [--tenant T] [--json]",
		Description: "A running execution stops at its next step boundary; a suspended one is ended by the\n" +
			"cancel resume. An execution already cancelled is left as it is (exit 0, \"already cancelled\");\n" +
			"a completed or failed one is refused (exit 1). One whose state can no longer be read is\n" +
			"cancelled by replacing that state with a cancelled one.",
		Flags: cliFlags(tenantFlag(), jsonFlag("print a JSON object saying what was done")),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return withExecution(ctx, cmd, "cancel", stderr, nil, func(k *conn, id string) error {
				done, err := k.plane.Cancel(ctx, k.tenant, id)
				if err != nil {
					return refused("cancel", err)
				}
				if cmd.Bool("json") {
					return writeJSON(stdout, done)
				}
				switch done.Result {
				case "already_cancelled":
					fmt.Fprintf(stdout, "execution %s: already cancelled; nothing to do\n", id)
				case "cancelled":
					fmt.Fprintf(stdout, "execution %s: cancelled (its unreadable state of %d bytes was replaced)\n", id, done.ReplacedBytes)
				default:
					fmt.Fprintf(stdout, "execution %s: cancel requested (was %s)\n", id, done.Was)
				}
				return nil
			})
		},
	}
}

func executionResumeCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "enqueue a resume of an execution (approval answer, event, retry …)",
		UsageText: "plaita execution resume ID --type continue|retry|event|timeout|cancel|approval [--data JSON|@file] [--tenant T] [--force] [--allow-flow-hash-change] [--json]",
		Description: "The flow id and version come from the stored state. Before enqueuing, the resume is checked\n" +
			"the way the worker will check it — against the execution's status and suspension, the published\n" +
			"definition (an event must satisfy the wait's match), and for a retry the wake-up budgets\n" +
			"(g1wakeups, nofail) and the step limit; a resume that would be refused is not enqueued (exit 1)\n" +
			"and the reason and the accepted commands are printed. --force skips the check (the worker\n" +
			"still decides). A completed or cancelled execution is always refused (exit 1).\n" +
			"--allow-flow-hash-change resumes an execution whose flow hash differs from the published one's in\n" +
			"algorithm and value (flow_hash_mismatch, after an engine upgrade) when the definition is unchanged;\n" +
			"the worker logs a WARNING and records the new hash (docs/flows.md).",
		Flags: cliFlags(tenantFlag(),
			&cli.StringFlag{Name: "type", Usage: "continue, retry, event, timeout, cancel or approval"},
			&cli.StringFlag{Name: "data", Usage: "the event, the approval answer …: inline JSON, or @path"},
			&cli.BoolFlag{Name: "force", Usage: "enqueue without checking first (the worker still refuses what does not fit)"},
			&cli.BoolFlag{Name: "allow-flow-hash-change", Usage: "override a flow_hash_mismatch (hash algorithm and value both changed, as after an engine upgrade): only when the definition is unchanged"},
			jsonFlag("print a JSON object saying what was done (or why not)")),
		Action: func(ctx context.Context, cmd *cli.Command) error { return executionResume(ctx, cmd, stdout, stderr) },
	}
}

func executionDeleteCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete an execution's state and keys (writes a tombstone)",
		UsageText: "plaita execution delete ID [--tenant T] [--force] [--json]",
		Flags: cliFlags(tenantFlag(),
			&cli.BoolFlag{Name: "force", Usage: "delete even a running (or pending) execution"},
			jsonFlag("print a JSON object saying what was done")),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return withExecution(ctx, cmd, "delete", stderr, nil, func(k *conn, id string) error {
				done, err := k.plane.Delete(ctx, k.tenant, id, cmd.Bool("force"))
				if err != nil {
					return refused("delete", err)
				}
				if cmd.Bool("json") {
					return writeJSON(stdout, done)
				}
				fmt.Fprintf(stdout, "execution %s: deleted (was %s)\n", id, done.Was)
				return nil
			})
		},
	}
}

// withExecution checks the one ID argument, runs the worker's preflight, reads the command's
// documents (read, when set: before connecting, so bad input never touches Redis), connects and
// calls fn.
func withExecution(ctx context.Context, cmd *cli.Command, name string, stderr io.Writer, read func(*conn) error,
	fn func(k *conn, id string) error) error {
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one execution id: plaita execution %s ID", name)
	}
	id := cmd.Args().First()
	if err := control.ValidID(id); err != nil {
		return cliUsage(name, "%q is not an execution id: %v", id, err)
	}
	k, err := prepare(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	if read != nil {
		if err := read(k); err != nil {
			return err
		}
	}
	if err := k.dial(name); err != nil {
		return err
	}
	defer k.close()
	return fn(k, id)
}

func executionShow(ctx context.Context, cmd *cli.Command, k *conn, id string, stdout io.Writer) error {
	shown, err := k.plane.Show(ctx, k.tenant, id)
	switch {
	case err != nil:
		return refused("show", err)
	case shown.Corrupt != nil && cmd.Bool("json"):
		return writeJSON(stdout, shown.Corrupt)
	case shown.Corrupt != nil:
		writeCorrupt(stdout, shown.Corrupt)
		return nil
	case shown.Queued != nil && cmd.Bool("json"):
		return writeJSON(stdout, shown.Queued)
	case shown.Queued != nil:
		fmt.Fprintf(stdout, "execution %s: queued\n  %s\n  message:   %s\n", id, shown.Queued.Text, shown.Queued.Task.ID)
		return nil
	case cmd.Bool("json"):
		return writeJSON(stdout, shown)
	}
	hints, err := k.plane.Hints(ctx, k.tenant, shown.Execution, nil)
	if err != nil {
		return cliFail("show", "execution %s: %v", id, err)
	}
	writeSummary(stdout, summary{st: shown.Execution, hints: hints, wake: shown.WakeUp})
	return nil
}

func executionResume(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "resume"
	if !cmd.IsSet("type") {
		return cliUsage(name, "--type continue|retry|event|timeout|cancel|approval is required")
	}
	rt, err := engine.ParseResumeType(cmd.String("type"))
	if err != nil {
		return cliUsage(name, "--type %q: use continue, retry, event, timeout, cancel or approval", cmd.String("type"))
	}
	var data json.RawMessage
	read := func(k *conn) (err error) {
		if cmd.IsSet("data") {
			data, err = readDoc(ctx, name, "data", cmd.String("data"), stateBound(k.cfg))
		}
		return err
	}
	return withExecution(ctx, cmd, name, stderr, read, func(k *conn, id string) error {
		force := cmd.Bool("force")
		done, err := k.plane.Resume(ctx, control.ResumeRequest{Tenant: k.tenant, ID: id, Type: rt, Data: data, Force: force,
			AllowFlowHashChange: cmd.Bool("allow-flow-hash-change")})
		if err != nil {
			return printResumeRefusal(name, id, rt, k.tenant, cmd.Bool("json"), stdout, stderr, err)
		}
		if cmd.Bool("json") {
			return writeJSON(stdout, done)
		}
		fmt.Fprintf(stdout, "execution %s: %s resume enqueued (was %s)\n", id, rt, done.Was)
		if force {
			fmt.Fprintln(stdout, "not checked (--force): the worker decides whether it fits")
		}
		return nil
	})
}

// printResumeRefusal prints a refused resume (the accepted ones, with their commands; as JSON on
// stdout with --json) and returns its exit error; any other error as refused does.
func printResumeRefusal(name, id string, rt engine.ResumeType, tenant string, asJSON bool, stdout, stderr io.Writer, err error) error {
	r := control.AsRefusal(err)
	if r == nil || (r.Code != "resume_refused" && r.Code != "retry_budget" && r.Code != "flow_hash_mismatch") {
		return refused(name, err)
	}
	if asJSON {
		if err := writeJSON(stdout, refusalJSON(r, rt, tenant)); err != nil {
			return cliFail(name, "write: %v", err)
		}
	}
	writeRefusal(stderr, r, rt)
	return &exitError{code: ExitFailure, err: fmt.Errorf("%s: execution %s: %s", name, id, r.Message), printed: true}
}

func executionList(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "list"
	req, err := listRequest(cmd)
	if err != nil {
		return refused(name, err)
	}
	if req.Limit < 1 || req.Limit > control.MaxListLimit {
		return cliUsage(name, "--limit %d: use 1 to %d", req.Limit, control.MaxListLimit)
	}
	k, err := connect(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	defer k.close()
	page, err := k.plane.List(ctx, k.tenant, req)
	if err != nil {
		return refused(name, err)
	}
	if cmd.Bool("json") {
		return writeJSON(stdout, map[string]any{"tenant_id": k.tenant, "items": nonNil(page.Items),
			"next_cursor": page.NextCursor, "skipped": page.Skipped, "degraded": page.Degraded})
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EXECUTION\tSTATUS\tFLOW\tVERSION\tSTEPS\tSTARTED\tNODE")
	for _, s := range page.Items {
		node := s.CurrentNode
		if node == "" {
			node = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", s.ExecutionID, s.Status, s.FlowID, s.FlowVersion, s.StepCount,
			s.StartTime.UTC().Format(time.RFC3339), node)
	}
	tw.Flush()
	stdout.Write(buf.Bytes())
	fmt.Fprintf(stdout, "%d execution(s) in tenant %s\n", len(page.Items), k.tenant)
	if page.Degraded {
		fmt.Fprintf(stdout, "degraded: %d index member(s) skipped (invalid, missing or corrupt; `plaita reindex` rebuilds the index)\n", page.Skipped)
	}
	if page.NextCursor != "" {
		fmt.Fprintf(stdout, "next page:\n  %s execution list%s --limit %d --cursor %s\n", k.program, listFilterFlags(cmd, k.tenant), req.Limit, control.ShellQuote(page.NextCursor))
	}
	return nil
}

// listRequest reads the list's flags (the times and the index filters are checked by control).
func listRequest(cmd *cli.Command) (control.ListRequest, error) {
	req := control.ListRequest{Cursor: cmd.String("cursor"), Limit: cmd.Int("limit"),
		Status: state.Status(cmd.String("status")), FlowID: cmd.String("flow")}
	var err error
	if req.StartedAfter, err = control.ParseListTime("--started-after", cmd.String("started-after")); err != nil {
		return req, err
	}
	if req.StartedBefore, err = control.ParseListTime("--started-before", cmd.String("started-before")); err != nil {
		return req, err
	}
	for _, s := range cmd.StringSlice("index") {
		f, err := control.ParseIndexFilter(s)
		if err != nil {
			return req, err
		}
		req.Index = append(req.Index, f)
	}
	return req, nil
}

// listFilterFlags are the filter flags of a list, as the next page's command repeats them.
func listFilterFlags(cmd *cli.Command, tenant string) string {
	var b strings.Builder
	for _, f := range []string{"status", "flow", "started-after", "started-before"} {
		if v := cmd.String(f); v != "" {
			b.WriteString(" --" + f + " " + control.ShellQuote(v))
		}
	}
	for _, v := range cmd.StringSlice("index") {
		b.WriteString(" --index " + control.ShellQuote(v))
	}
	if tenant != control.DefaultTenant {
		b.WriteString(" --tenant " + tenant)
	}
	return b.String()
}
