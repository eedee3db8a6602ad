package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/user"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
	"plaita/engine"
)

// approvalCommand is `plaita approval list|approve|reject`: control's pending approvals and
// their answer — the console's approvals page, from a terminal.
func approvalCommand(stdout, stderr io.Writer) *cli.Command {
	answer := func(approved bool) *cli.Command {
		verb, usage := "approve", "approve a pending approval (the flow goes on)"
		if !approved {
			verb, usage = "reject", "reject a pending approval (the flow takes on_reject, or ends in error)"
		}
		return &cli.Command{
			Name:      verb,
			Usage:     usage,
			UsageText: "plaita approval " + verb + " ID [--comment TEXT] [--by NAME] [--tenant T] [--json]",
			Flags: cliFlags(tenantFlag(), &cli.StringFlag{Name: "comment", Usage: "the answer's comment ($NODE.comment)"},
				&cli.StringFlag{Name: "by", Usage: "who answers ($NODE.by; default: the user running the command)"},
				jsonFlag("print what was enqueued as JSON")),
			Action: func(ctx context.Context, cmd *cli.Command) error {
				return approvalAnswer(ctx, cmd, verb, approved, stdout, stderr)
			},
		}
	}
	return &cli.Command{
		Name:      "approval",
		Usage:     "list the executions that wait for an approval; approve or reject one",
		UsageText: "plaita approval list|approve|reject [ID] [--tenant T] [--json]",
		Description: "An answer is a checked resume of type approval that records who gave it ($NODE.by): an answer the\n" +
			"worker would refuse (the execution moved on, its flow changed) is refused here, with what is accepted.\n" +
			"Exit status: 0 done; 1 failure, unknown execution, or a refused answer; 2 bad usage or configuration.",
		Action: subcommandsOnly,
		Commands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "list the pending approvals, newest first",
				UsageText: "plaita approval list [--wait [--timeout SECONDS]] [--limit N] [--cursor C] [--tenant T] [--json]",
				Description: "--wait lists them once at least one is pending: a script answers an approval as soon as a flow\n" +
					"asks for it. Exit status: 0 listed; 1 failure, or --wait's timeout with none pending; 2 bad usage.",
				Flags: cliFlags(tenantFlag(), &cli.IntFlag{Name: "limit", Value: 50, Usage: "approvals per page (1–1000)"},
					&cli.StringFlag{Name: "cursor", Usage: "the next page (next_cursor of the previous one)"},
					&cli.BoolFlag{Name: "wait", Usage: "wait until at least one approval is pending"},
					waitTimeoutFlag(),
					jsonFlag("print {tenant_id, items, next_cursor} as JSON")),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					const name = "approval list"
					if cmd.Args().Len() > 0 {
						return cliUsage(name, "takes no arguments")
					}
					if l := cmd.Int("limit"); l < 1 || l > control.MaxListLimit {
						return cliUsage(name, "--limit %d: use 1–%d", l, control.MaxListLimit)
					}
					timeout, err := waitTimeout(cmd, name)
					if err != nil {
						return err
					}
					return withConn(ctx, cmd, name, stderr, func(k *conn) error {
						var wait time.Duration // 0: one read
						if cmd.Bool("wait") {
							wait = timeout
						}
						page, err := k.plane.WaitApprovals(ctx, k.tenant, cmd.String("cursor"), int(cmd.Int("limit")), wait)
						if err != nil {
							return refused(name, err)
						}
						if cmd.Bool("json") {
							return writeJSON(stdout, map[string]any{"tenant_id": k.tenant, "items": page.Items,
								"next_cursor": page.NextCursor, "pruned": page.Pruned, "skipped": page.Skipped})
						}
						next := []string{"approval", "list", "--cursor", page.NextCursor}
						if k.tenant != control.DefaultTenant {
							next = append(next, "--tenant", k.tenant)
						}
						writeApprovals(stdout, page, k.plane.Command(next...))
						return nil
					})
				},
			},
			answer(true),
			answer(false),
		},
	}
}

func approvalAnswer(ctx context.Context, cmd *cli.Command, verb string, approved bool, stdout, stderr io.Writer) error {
	name := "approval " + verb
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one execution id: plaita approval %s ID", verb)
	}
	id := cmd.Args().First()
	if err := control.ValidID(id); err != nil {
		return cliUsage(name, "%q is not an execution id: %v", id, err)
	}
	by := cmd.String("by")
	if !cmd.IsSet("by") {
		u, err := user.Current()
		if err != nil || u.Username == "" {
			return cliUsage(name, "cannot tell who you are (%v): pass --by NAME", err)
		}
		by = u.Username
	}
	k, err := connect(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	defer k.close()
	done, err := k.plane.AnswerApproval(ctx, control.Answer{Tenant: k.tenant, ID: id, Approved: approved, Comment: cmd.String("comment"), By: by})
	if err != nil {
		return printResumeRefusal(name, id, engine.ResumeApproval, k.tenant, cmd.Bool("json"), stdout, stderr, err)
	}
	if cmd.Bool("json") {
		return writeJSON(stdout, done)
	}
	fmt.Fprintf(stdout, "execution %s: %s by %s, enqueued\n", id, map[bool]string{true: "approved", false: "rejected"}[approved], by)
	return nil
}

func writeApprovals(w io.Writer, page control.ApprovalPage, next string) {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EXECUTION\tFLOW\tNODE\tWAITING SINCE\tTIMES OUT\tMESSAGE")
	for _, a := range page.Items {
		due := "never"
		if !a.Due.IsZero() {
			due = a.Due.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s@%s\t%s\t%s\t%s\t%s\n", a.ExecutionID, a.FlowID, a.FlowVersion, a.Node, a.Since.Format(time.RFC3339), due, a.Message)
	}
	tw.Flush()
	w.Write(b.Bytes())
	fmt.Fprintf(w, "%d pending approval(s)\n", len(page.Items))
	if page.NextCursor != "" {
		fmt.Fprintf(w, "more: %s\n", next)
	}
}
