package roles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// Flow publication format (what `plaita start FLOW.json` writes, and what the console will):
//
//	<prefix>flow:<flow_id>:<version>   STRING  the definition, byte for byte as read from the file
//	<prefix>flow_versions:<flow_id>    ZSET    member <version>, score = publication time (unix ms)
//	<prefix>flow_list                  ZSET    member <flow_id>, score = its last publication (unix ms)
//
// <prefix> is keys.For(root, tenant).Prefix(). The version is the file's "version" field, or
// else the first 12 hex characters of engine.FlowHash of the definition (so an unchanged file
// republishes the same version).
//
// A published version is immutable: executions suspended on it resume against that very
// definition (their flow_hash), so overwriting it would strand them all. The definition is
// written with SET NX; when the key exists, the stored definition is compared by FlowHash: the
// same definition is already published (nothing is rewritten and its scores stay), a different
// one is refused. A change is published as a new version.
//
// "Latest" version of a flow is the member of flow_versions with the highest score: the most
// recently published one (ties, which need the same millisecond, go to the greater version
// string, as ZREVRANGE orders them).
const flowHashVersionLen = 12

// startDefaultTimeout bounds --wait when --timeout is not given.
const startDefaultTimeout = 60 * time.Second

// waitPollInterval is how often --wait reads the state.
const waitPollInterval = 100 * time.Millisecond

// cliFlags are the flags every command over the shared Redis has.
func cliFlags(extra ...cli.Flag) []cli.Flag {
	flags := append(extra, logFlags()...)
	return append(flags, &cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (overrides PLAITA_LOG_LEVEL)"})
}

func tenantFlag() cli.Flag {
	return &cli.StringFlag{Name: "tenant", Usage: "tenant slug (default: the default tenant)"}
}

func jsonFlag(usage string) cli.Flag { return &cli.BoolFlag{Name: "json", Usage: usage} }

// cliUsage is bad usage of the named command: exit 2.
func cliUsage(name, format string, args ...any) error {
	return &exitError{code: ExitRejected, err: fmt.Errorf(name+": "+format, args...)}
}

// subcommandsOnly is the action of a command that only groups subcommands (execution, event):
// an argument that names none of them is bad usage, no argument prints the help.
func subcommandsOnly(_ context.Context, cmd *cli.Command) error {
	if cmd.Args().Len() == 0 {
		return cli.ShowSubcommandHelp(cmd)
	}
	var names []string
	for _, c := range cmd.Commands {
		if c.Name != "help" && !c.Hidden { // urfave/cli's own help command
			names = append(names, c.Name)
		}
	}
	return cliUsage(cmd.Name, "unknown subcommand %q (%s)", cmd.Args().First(), strings.Join(names, ", "))
}

// cliFail is a command that ran and failed: exit 1.
func cliFail(name, format string, args ...any) error {
	return &exitError{code: ExitFailure, err: fmt.Errorf(name+": "+format, args...)}
}

// conn is a connected command: configuration, Redis, and the tenant's store.
type conn struct {
	cfg   *config.Config
	log   zerolog.Logger
	c     rueidis.Client
	sp    keys.Space
	ts    *store.TenantStore
	flows *store.Flows
}

// connect runs the worker's preflight and connects to PLAITA_REDIS_URL for the --tenant.
func connect(cmd *cli.Command, name string, stderr io.Writer) (*conn, error) {
	k, err := prepare(cmd, name, stderr)
	if err != nil {
		return nil, err
	}
	return k, k.dial(name)
}

// prepare is connect's first half: the preflight and the --tenant, no connection yet. A command
// that reads documents reads them in between, bounded by the configuration, so that bad input
// is refused without touching Redis.
func prepare(cmd *cli.Command, name string, stderr io.Writer) (*conn, error) {
	cfg, log, err := preflightAs(cmd, config.RoleWorker, "cli", zerolog.DebugLevel, stderr)
	if err != nil {
		return nil, err
	}
	tenant := cmd.String("tenant")
	sp, err := keys.For(keys.DefaultRoot, tenant)
	if err != nil {
		return nil, cliUsage(name, "--tenant %q: %v", tenant, err)
	}
	return &conn{cfg: cfg, log: log, sp: sp}, nil
}

// dial is connect's second half.
func (k *conn) dial(name string) error {
	c, err := redisClient(config.RedisURL.In(k.cfg))
	if err != nil {
		return cliFail(name, "%v", err)
	}
	ts, err := store.NewRedis(c, settings.Store(k.cfg), keys.DefaultRoot).Tenant(k.sp.Tenant())
	if err != nil {
		c.Close()
		return cliUsage(name, "--tenant %q: %v", k.sp.Tenant(), err)
	}
	k.c, k.ts = c, ts
	k.flows = store.NewFlows(c, keys.DefaultRoot).Reserve(config.QueueName.In(k.cfg), config.DLQKey.In(k.cfg))
	return nil
}

// stateBound is the bound of a document that becomes part of an execution state (a start's
// input, a resume's data).
func (k *conn) stateBound() docBound { return stateBound(k.cfg) }

func stateBound(cfg *config.Config) docBound {
	n := config.ExecutionStateMaxBytes.In(cfg)
	if n < 1 {
		n = state.DefaultMaxStateBytes
	}
	return docBound{Max: n, What: "PLAITA_EXECUTION_STATE_MAX_BYTES"}
}

// flowBound is the bound of a flow definition file.
var flowBound = docBound{Max: engine.MaxFlowBytes, What: "the flow definition bound"}

func (k *conn) close() { k.c.Close() }

// enqueue stamps a fresh envelope with this process's config generations and writes it to
// PLAITA_QUEUE_NAME.
func (k *conn) enqueue(ctx context.Context, env queue.Envelope) (string, error) {
	env.TenantID = k.sp.Tenant()
	env.Stamp(settings.Generations(k.cfg), time.Now())
	return queue.Enqueue(ctx, k.c, config.QueueName.In(k.cfg), env, queue.MaxInput(config.ExecutionStateMaxBytes.In(k.cfg)))
}

func startCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "start",
		Usage:     "publish (from a file) or pick a published flow and enqueue a new execution of it",
		UsageText: "plaita start FLOW.json|FLOW_ID [--version V] [--tenant T] [--input JSON|@file] [--wait] [--timeout SECONDS] [--json]",
		Description: "A FLOW.json file is validated and published first (its \"version\" field, else the first 12 hex\n" +
			"characters of its hash, is the version); a FLOW_ID starts the published --version, else the most\n" +
			"recently published one. The execution id is printed; a worker runs it.\n\n" +
			"Exit status: 0 enqueued (with --wait: completed); 1 failure, unknown flow or version, or with\n" +
			"--wait any end other than completed (error, cancelled, suspended, timed out);\n" +
			"2 bad usage, bad --input, or an invalid flow (every problem is listed with its JSON path).",
		Flags: cliFlags(
			&cli.StringFlag{Name: "version", Usage: "the flow version to start (a FLOW_ID), or to publish the file as"},
			tenantFlag(),
			&cli.StringFlag{Name: "input", Usage: "the execution's INPUT: inline JSON, or @path to read it from a file (default {})"},
			&cli.BoolFlag{Name: "wait", Usage: "wait until the execution completes, fails, is cancelled or suspends"},
			&cli.FloatFlag{Name: "timeout", Value: startDefaultTimeout.Seconds(), Usage: "with --wait: give up after this many seconds"},
			jsonFlag("print a JSON object (with --wait: the execution state) instead of text"),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return runStart(ctx, cmd, stdout, stderr)
		},
	}
}

func runStart(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "start"
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one flow file or flow id: plaita start FLOW.json|FLOW_ID")
	}
	arg := cmd.Args().First()
	timeout := cmd.Float("timeout")
	if cmd.IsSet("timeout") && !cmd.Bool("wait") {
		return cliUsage(name, "--timeout goes with --wait")
	}
	if timeout <= 0 {
		return cliUsage(name, "--timeout %v: must be a positive number of seconds", timeout)
	}
	version := cmd.String("version")
	if cmd.IsSet("version") && version == "" {
		return cliUsage(name, "--version must not be empty")
	}
	isFile := false
	if fi, err := os.Stat(arg); err == nil && !fi.IsDir() {
		isFile = true
	} else if strings.HasSuffix(arg, ".json") || strings.ContainsRune(arg, os.PathSeparator) {
		return cliUsage(name, "flow file %s: %v", arg, unwrapPathError(err))
	}
	k, err := prepare(cmd, name, stderr)
	if err != nil {
		return err
	}
	input := json.RawMessage(`{}`)
	if cmd.IsSet("input") {
		if input, err = readDoc(ctx, name, "input", cmd.String("input"), k.stateBound()); err != nil {
			return err
		}
	}
	var def []byte
	if isFile {
		if def, err = readFileBounded(ctx, arg, flowBound); errors.Is(err, errReadInterrupted) {
			return cliFail(name, "flow file %s: %v", arg, err)
		} else if err != nil {
			return cliUsage(name, "flow file %s: %v", arg, err)
		}
	}
	if err := k.dial(name); err != nil {
		return err
	}
	defer k.close()
	reg, err := k.flowRegistry()
	if err != nil {
		return cliFail(name, "%v", err)
	}
	lim := settings.Engine(k.cfg).Expr

	var f *engine.Flow
	published, already := false, false
	if isFile {
		if f, err = engine.Parse(def, reg, lim); err != nil {
			return &exitError{code: ExitRejected, err: fmt.Errorf("%s: %w", arg, err)}
		}
		if version, err = publishVersion(f, def, version); err != nil {
			return cliUsage(name, "%s: %v", arg, err)
		}
		res, err := publishFlow(ctx, k, f.ID, version, def)
		var conflict *publishConflict
		switch {
		case errors.As(err, &conflict):
			return cliFail(name, "%s: %v; %s", arg, err, newVersionHint(arg, f))
		case errors.Is(err, store.ErrReservedFlowKey):
			return cliUsage(name, "%s: %v", arg, err)
		case err != nil:
			return cliFail(name, "publish flow %s version %s: %v", f.ID, version, err)
		}
		published, already = res == store.Published, res == store.AlreadyPublished
		msg := "published"
		if already {
			msg = "already published with this definition: left as it is"
		}
		k.log.Info().Str("event", "flow."+string(res)).Str("flow_id", f.ID).Str("flow_version", version).
			Msg("flow " + f.ID + " version " + version + ": " + msg)
	} else {
		if version == "" {
			if version, err = k.flows.Latest(ctx, k.sp.Tenant(), arg); err != nil {
				if errors.Is(err, store.ErrFlowNotFound) {
					return cliFail(name, "%v; start a FLOW.json file to publish it", err)
				}
				return cliFail(name, "%v", err)
			}
		}
		def, err = k.flows.Get(ctx, k.sp.Tenant(), arg, version)
		switch {
		case errors.Is(err, store.ErrFlowNotFound):
			return cliFail(name, "flow %s version %q is not published in tenant %s", arg, version, k.sp.Tenant())
		case err != nil:
			return cliFail(name, "read flow %s: %v", arg, err)
		}
		if f, err = engine.Parse(def, reg, lim); err != nil {
			return &exitError{code: ExitRejected, err: fmt.Errorf("published flow %s version %s: %w", arg, version, err)}
		}
	}

	id := engine.NewExecutionID()
	msgID, err := k.enqueue(ctx, queue.Envelope{Kind: queue.KindStart, FlowID: f.ID, FlowVersion: version, ExecutionID: id, Input: input})
	if errors.Is(err, queue.ErrInputTooLarge) || errors.Is(err, queue.ErrBadInput) {
		return cliUsage(name, "--input: %v", err)
	}
	if err != nil {
		return cliFail(name, "%v", err)
	}
	if !cmd.Bool("wait") {
		if cmd.Bool("json") {
			out := map[string]any{"execution_id": id, "tenant_id": k.sp.Tenant(), "flow_id": f.ID,
				"flow_version": version, "published": published, "queue": config.QueueName.In(k.cfg), "message_id": msgID}
			if isFile {
				out["already_published"] = already
			}
			return writeJSON(stdout, out)
		}
		fmt.Fprintln(stdout, id)
		return nil
	}

	st, err := waitSettled(ctx, k.ts, id, time.Duration(timeout*float64(time.Second)))
	if st != nil {
		if cmd.Bool("json") {
			if werr := writeJSON(stdout, st); werr != nil {
				return cliFail(name, "write state: %v", werr)
			}
		} else {
			adv, aerr := k.adviceFor(ctx, st, f)
			if aerr != nil {
				k.log.Warn().Err(aerr).Str("event", "start.hints_unavailable").Msg("cannot check what would resume the execution: no commands are suggested")
			}
			writeSummary(stdout, st, adv, k.sp.Tenant(), k.wakeUpFor(ctx, st, time.Now()))
		}
	}
	if err != nil {
		return cliFail(name, "execution %s: %v", id, err)
	}
	if st.Status != state.Completed {
		return cliFail(name, "execution %s is %s, not completed", id, st.Status)
	}
	return nil
}

// publishVersion is the version a file is published as: its "version" field, else --version,
// else the first 12 hex characters of its hash.
func publishVersion(f *engine.Flow, def []byte, flag string) (string, error) {
	switch {
	case f.Version != "" && flag != "" && f.Version != flag:
		return "", fmt.Errorf("the file says version %q but --version is %q", f.Version, flag)
	case f.Version != "":
		return f.Version, nil
	case flag != "":
		// The version becomes a key segment: the file's own was checked by engine.Parse.
		if err := keys.ValidName("--version", flag); err != nil {
			return "", err
		}
		return flag, nil
	}
	h, err := engine.FlowHash(def)
	if err != nil {
		return "", err
	}
	return h[:flowHashVersionLen], nil
}

// publishConflict is a publication of a different definition under a version already
// published.
type publishConflict struct {
	flowID, version, storedHash, hash string
}

func (e *publishConflict) Error() string {
	return fmt.Sprintf("flow %s version %q is already published with a different definition (hash %s, this file %s); "+
		"a published version is immutable (executions of it resume against that definition)",
		e.flowID, e.version, shortHash(e.storedHash), shortHash(e.hash))
}

func shortHash(h string) string { return h[:min(len(h), flowHashVersionLen)] }

// newVersionHint says how to publish a changed file: under a new version.
func newVersionHint(path string, f *engine.Flow) string {
	if f.Version != "" {
		return fmt.Sprintf(`to publish the change, give it a new version: change "version" in %s (or remove it and pass --version V)`, path)
	}
	return fmt.Sprintf(`to publish the change, give it a new version: pass another --version (or set "version" in %s)`, path)
}

// publishFlow publishes the definition under (flowID, version) unless that version exists: the
// same definition (by flow hash) is a no-op, another is a *publishConflict and nothing is
// written.
func publishFlow(ctx context.Context, k *conn, flowID, version string, def []byte) (store.PublishResult, error) {
	hash, err := engine.FlowHash(def)
	if err != nil {
		return "", err
	}
	var storedHash string
	res, err := k.flows.Publish(ctx, k.sp.Tenant(), flowID, version, def, time.Now(), func(stored []byte) (bool, error) {
		storedHash, err = engine.FlowHash(stored)
		return storedHash == hash, err
	})
	if errors.Is(err, store.ErrVersionConflict) {
		return "", &publishConflict{flowID: flowID, version: version, storedHash: storedHash, hash: hash}
	}
	return res, err
}

// waitSettled polls the state until it is terminal or suspended, or until timeout. On a
// timeout it returns the last state read (nil when none was) and an error.
func waitSettled(ctx context.Context, ts *store.TenantStore, id string, timeout time.Duration) (*state.Execution, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *state.Execution
	for {
		st, err := ts.Load(ctx, id)
		switch {
		case err == nil:
			last = st
			if st.Status.Terminal() || st.Status == state.Suspended {
				return st, nil
			}
		case errors.Is(err, store.ErrNotFound), store.IsTransient(err) && ctx.Err() == nil:
		default:
			return last, err
		}
		select {
		case <-ctx.Done():
			status := "not picked up by a worker yet"
			if last != nil {
				status = "still " + string(last.Status)
			}
			return last, fmt.Errorf("%s after %s (--timeout %s)", status, roundDuration(timeout), strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64))
		case <-time.After(waitPollInterval):
		}
	}
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
