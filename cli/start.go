package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
	"plaita/engine/state"
)

// `plaita start FLOW.json|FLOW_ID`: control.Start publishes a file's flow (an immutable version:
// control/flows.go) and enqueues an execution of it; --wait follows it to its end.

// maxIdempotencyKey bounds --idempotency-key as the API bounds its Idempotency-Key header.
const maxIdempotencyKey = 255

// startDefaultTimeout bounds --wait when --timeout is not given.
const startDefaultTimeout = 60 * time.Second

func startCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "start",
		Usage:     "publish (from a file) or pick a published flow and enqueue a new execution of it",
		UsageText: "plaita start FLOW.json|FLOW_ID [--version V] [--tenant T] [--input JSON|@file] [--idempotency-key KEY] [--wait [--until completed|ended] [--timeout SECONDS]] [--json]",
		Description: "A FLOW.json file is validated and published first (its \"version\" field, else the first 12 hex\n" +
			"characters of its hash, is the version); a FLOW_ID starts the published --version, else the most\n" +
			"recently published one. The execution id is printed; a worker runs it.\n\n" +
			"--wait follows the execution until it completes, fails, is cancelled or suspends, and prints its\n" +
			"summary (with --json its state); --until completed|ended waits past suspensions until it ends.\n" +
			"With --json every outcome is one JSON object on stdout: the start, the state, or {\"error\": {code,\n" +
			"message, problems}}.\n\n" +
			"Exit status: 0 enqueued (with --wait: completed; with --until ended: any end — completed, error\n" +
			"or cancelled); 1 failure, unknown flow or version, or with --wait an end other than completed\n" +
			"(error, cancelled, suspended without --until) or a timeout; 2 bad usage, bad --input, or an\n" +
			"invalid flow (every problem is listed with its JSON path).",
		Flags: cliFlags(
			&cli.StringFlag{Name: "version", Usage: "the flow version to start (a FLOW_ID), or to publish the file as"},
			tenantFlag(),
			&cli.StringFlag{Name: "input", Usage: "the execution's INPUT: inline JSON, or @path to read it from a file (default {})"},
			&cli.StringFlag{Name: "idempotency-key", Usage: "name this start: a retry with the same key (here or over the console's API) makes no second execution"},
			&cli.BoolFlag{Name: "wait", Usage: "wait until the execution completes, fails, is cancelled or suspends"},
			&cli.StringFlag{Name: "until", Usage: untilUsage},
			waitTimeoutFlag(),
			jsonFlag("print a JSON object (with --wait: the execution state; a refusal: {\"error\": …}) instead of text"),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if !cmd.Bool("json") {
				return runStart(ctx, cmd, stdout, stderr)
			}
			// A script reads stdout: an outcome that printed no JSON (a refusal, bad usage, a
			// wait that read no state) is printed as {"error": …} there, and to stderr as ever.
			out := &jsonOut{w: stdout}
			err := runStart(ctx, cmd, out, stderr)
			if err != nil && !out.wrote {
				if werr := writeJSON(stdout, errorJSON(err)); werr != nil {
					return errors.Join(err, cliFail("start", "write: %v", werr))
				}
			}
			return err
		},
	}
}

func runStart(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "start"
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one flow file or flow id: plaita start FLOW.json|FLOW_ID")
	}
	arg := cmd.Args().First()
	timeout, err := waitTimeout(cmd, name)
	if err != nil {
		return err
	}
	until, err := untilFlag(cmd, name)
	if err != nil {
		return err
	}
	req := control.StartRequest{Version: cmd.String("version"), FlowID: arg}
	if cmd.IsSet("version") && req.Version == "" {
		return cliUsage(name, "--version must not be empty")
	}
	key := cmd.String("idempotency-key")
	if cmd.IsSet("idempotency-key") && (key == "" || len(key) > maxIdempotencyKey) {
		return cliUsage(name, "--idempotency-key must be 1 to %d bytes", maxIdempotencyKey)
	}
	isFile := false
	if fi, err := os.Stat(arg); err == nil && !fi.IsDir() {
		isFile = true
	} else if strings.HasSuffix(arg, ".json") || strings.ContainsRune(arg, os.PathSeparator) {
		return cliUsage(name, "flow file %s: %v", arg, unwrapPathError(err))
	}
	k, err := prepare(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	req.Tenant = k.tenant
	if cmd.IsSet("input") {
		if req.Input, err = readDoc(ctx, name, "input", cmd.String("input"), stateBound(k.cfg)); err != nil {
			return err
		}
	}
	if isFile {
		if req.Definition, err = readFileBounded(ctx, arg, flowBound); errors.Is(err, errReadInterrupted) {
			return cliFail(name, "flow file %s: %v", arg, err)
		} else if err != nil {
			return cliUsage(name, "flow file %s: %v", arg, err)
		}
	}
	if err := k.dial(name); err != nil {
		return err
	}
	defer k.close()

	started, err := control.StartOnce(ctx, k.plane, req, key)
	if err != nil {
		if r := control.AsRefusal(err); r != nil && isFile && r.Code != "invalid_input" {
			err = fmt.Errorf("%s: %w", arg, err) // the file's refusal: name the file
		}
		if cmd.Bool("json") {
			// Here, where the refusal is still at hand: its code and an invalid flow's problems.
			if werr := writeJSON(stdout, errorJSON(err)); werr != nil {
				return errors.Join(refused(name, err), cliFail(name, "write: %v", werr))
			}
		}
		return refused(name, err)
	}
	if started.Already != nil {
		logPublished(k, started)
		warnFlow(k.log, arg, started.Flow)
	}
	if started.Replayed {
		fmt.Fprintf(stderr, "plaita: start: the idempotency key names execution %s, started before: nothing was enqueued\n", started.ExecutionID)
	} else if started.WorkersAlive == 0 {
		fmt.Fprintf(stderr, "plaita: start: no worker is registered: execution %s waits in the queue until one runs (%s worker)\n", started.ExecutionID, k.program)
	}
	if !cmd.Bool("wait") {
		if cmd.Bool("json") {
			return writeJSON(stdout, started)
		}
		fmt.Fprintln(stdout, started.ExecutionID)
		return nil
	}
	return waitStarted(ctx, cmd, k, started, until, timeout, stdout)
}

// The values of --until.
const (
	untilCompleted = "completed" // wait for the end; exit 0 only when it completed
	untilEnded     = "ended"     // wait for the end; exit 0 at any end
)

// untilFlag is --until, checked: it goes with --wait and names completed or ended ("" unset).
func untilFlag(cmd *cli.Command, name string) (string, error) {
	until := cmd.String("until")
	if !cmd.IsSet("until") {
		return "", nil
	}
	if !cmd.Bool("wait") {
		return "", cliUsage(name, "--until goes with --wait")
	}
	if until != untilCompleted && until != untilEnded {
		return "", cliUsage(name, "--until %q: use completed or ended", until)
	}
	return until, nil
}

// waitTimeoutFlag is --timeout of the commands that --wait: start, execution show, approval
// list.
func waitTimeoutFlag() cli.Flag {
	return &cli.FloatFlag{Name: "timeout", Value: startDefaultTimeout.Seconds(), Usage: "with --wait: give up after this many seconds"}
}

// waitTimeout is --timeout, checked: it goes with --wait and is a positive number of seconds.
func waitTimeout(cmd *cli.Command, name string) (time.Duration, error) {
	if cmd.IsSet("timeout") && !cmd.Bool("wait") {
		return 0, cliUsage(name, "--timeout goes with --wait")
	}
	t := cmd.Float("timeout")
	if t <= 0 {
		return 0, cliUsage(name, "--timeout %v: must be a positive number of seconds", t)
	}
	return time.Duration(t * float64(time.Second)), nil
}

// untilUsage is the flag's help, shared by start and execution show.
const untilUsage = "with --wait: wait past suspensions until the execution ends; " +
	"completed exits 0 only when it completed, ended at any end (error and cancelled too)"

// waitStarted is --wait: it follows the execution until it completes, fails, is cancelled or
// suspends (with until, past suspensions to its end), then prints its summary (or its state as
// JSON).
func waitStarted(ctx context.Context, cmd *cli.Command, k *conn, started control.Started, until string, timeout time.Duration, stdout io.Writer) error {
	const name = "start"
	id := started.ExecutionID
	wait := k.plane.WaitSettled
	if until != "" {
		wait = k.plane.WaitEnded
	}
	st, err := wait(ctx, k.tenant, id, timeout)
	if st != nil {
		if cmd.Bool("json") {
			if werr := writeJSON(stdout, st); werr != nil {
				return cliFail(name, "write state: %v", werr)
			}
		} else {
			hints, herr := k.plane.Hints(ctx, k.tenant, st, started.Flow)
			if herr != nil {
				k.log.Warn().Err(herr).Str("event", "start.hints_unavailable").Msg("cannot check what would resume the execution: no commands are suggested")
			}
			writeSummary(stdout, summary{st: st, hints: hints, wake: k.plane.WakeUp(ctx, k.tenant, st)})
		}
	}
	if err != nil {
		return cliFail(name, "execution %s: %v", id, err)
	}
	if st.Status != state.Completed && until != untilEnded {
		return cliFail(name, "execution %s %s, not completed", id, control.DescribeEnd(st))
	}
	return nil
}

// jsonOut is stdout with --json: whether anything was written to it yet.
type jsonOut struct {
	w     io.Writer
	wrote bool
}

func (o *jsonOut) Write(p []byte) (int, error) {
	o.wrote = o.wrote || len(p) > 0
	return o.w.Write(p)
}

// logPublished says what the publication of a start's file did.
func logPublished(k *conn, started control.Started) {
	msg, res := "published", control.NewlyPublished
	if *started.Already {
		msg, res = "already published with this definition: left as it is", control.AlreadyPublished
	}
	k.log.Info().Str("event", "flow."+string(res)).Str("flow_id", started.FlowID).Str("flow_version", started.FlowVersion).
		Msg("flow " + started.FlowID + " version " + started.FlowVersion + ": " + msg)
}
