package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/control"
	"plaita/roles"
)

// ctlCommand is `plaita ctl status|stop INSTANCE`: one instance asked over its control channel
// (control.InstanceStatus, control.StopInstance), as the console's cluster routes ask it.
func ctlCommand(tool roles.Tool, stdout, stderr io.Writer) *cli.Command {
	timeout := &cli.DurationFlag{Name: "timeout", Value: control.DefaultAnswerWait, Usage: "how long to wait for the answer (with stop --wait: also for the instance to go)"}
	return &cli.Command{
		Name:      tool.Name,
		Usage:     tool.Summary,
		UsageText: "plaita ctl status|stop [--graceful] [--wait] INSTANCE [--timeout D] [--json]",
		Description: "Every role instance (worker, console, filter, schedule, delay) listens on its own Redis control channel.\n" +
			"status: its role, registry status, whether it drains, its uptime and, for a worker, its tasks in flight.\n" +
			"stop: a drain, as SIGTERM does — no new work, in-flight work finishes (past PLAITA_WORKER_DRAIN_TIMEOUT it is\n" +
			"left pending for another worker), then the instance deregisters and exits 0. --graceful is accepted for the\n" +
			"form operators' scripts use: every stop is graceful. INSTANCE is the id `plaita status` lists (PLAITA_INSTANCE_ID).\n" +
			"Exit status: 0 answered; 1 unknown instance, no answer in time, or failure; 2 bad usage or configuration.",
		Action: subcommandsOnly,
		Commands: []*cli.Command{
			{
				Name:      "status",
				Usage:     "ask an instance for its status",
				UsageText: "plaita ctl status INSTANCE [--timeout D] [--json]",
				Flags:     cliFlags(timeout, jsonFlag("print the answer as JSON (durations in nanoseconds)")),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return ctlRun(ctx, cmd, tool, "ctl status", stdout, stderr)
				},
			},
			{
				Name:      "stop",
				Usage:     "ask an instance to drain and exit (as SIGTERM does)",
				UsageText: "plaita ctl stop [--graceful] [--wait] INSTANCE [--timeout D] [--json]",
				Flags: cliFlags(&cli.BoolFlag{Name: "graceful", Usage: "accepted for the form operators' scripts use: a stop always drains"},
					&cli.BoolFlag{Name: "wait", Usage: "after the answer, wait (within --timeout) until the instance has left the registry"},
					timeout, jsonFlag("print the answer as JSON (durations in nanoseconds)")),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return ctlRun(ctx, cmd, tool, "ctl stop", stdout, stderr)
				},
			},
		},
	}
}

// ctlRun runs the preflight, then asks the instance.
func ctlRun(ctx context.Context, cmd *cli.Command, tool roles.Tool, name string, stdout, stderr io.Writer) error {
	k, err := prepare(cmd, name, tool.Role, stderr)
	if err != nil {
		return err
	}
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one instance: plaita %s INSTANCE (`plaita status` lists them)", name)
	}
	if d := cmd.Duration("timeout"); d <= 0 || d > time.Hour {
		return cliUsage(name, "--timeout %s: use a duration above 0 and up to 1h", d)
	}
	if err := k.dial(name); err != nil {
		return err
	}
	defer k.close()
	host, _ := os.Hostname()
	req := control.InstanceRequest{ID: cmd.Args().First(), Wait: cmd.Duration("timeout"), From: "ctl@" + host}
	var a control.InstanceAnswer
	if name == "ctl stop" {
		req.Graceful = cmd.Bool("graceful")
		if cmd.Bool("wait") {
			req.GoneWait = cmd.Duration("timeout")
		}
		a, err = k.plane.StopInstance(ctx, req)
	} else {
		a, err = k.plane.InstanceStatus(ctx, req)
	}
	if err != nil {
		return refused(name, err)
	}
	if cmd.Bool("json") {
		return writeJSON(stdout, a)
	}
	writeInstanceAnswer(stdout, a)
	return nil
}

func writeInstanceAnswer(w io.Writer, a control.InstanceAnswer) {
	fmt.Fprintf(w, "instance %s: %s, %s (host %s, pid %d), up %s", a.InstanceID, a.Role, a.Status, a.Host, a.PID,
		control.RoundDuration(a.Uptime.Truncate(time.Second)))
	if a.InFlight != nil {
		fmt.Fprintf(w, ", %d/%d task(s) in flight", *a.InFlight, a.Capacity)
	}
	fmt.Fprintf(w, "; answered in %s\n", control.RoundDuration(a.AnsweredIn))
	if a.DrainRequested {
		fmt.Fprintf(w, "drain requested: %s\n", a.Message)
	}
	if a.Deregistered {
		fmt.Fprintln(w, "the instance has drained and left the registry")
	}
}
