package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/nodes"
	"plaita/engine/nodes/writefile"
	"plaita/engine/state"
	"plaita/roles/settings"
)

// runCommand runs one flow in this process on the memory store: no server, no network. A
// suspended or errored execution is kept in a state file so a later `plaita run --resume`
// can continue it.
func runCommand(stdout, stderr io.Writer) *cli.Command {
	flags := cliFlags(
		&cli.StringFlag{Name: "input", Usage: "the execution's INPUT: inline JSON, or @path to read it from a file (default {})"},
		&cli.StringFlag{Name: "resume", Usage: "continue the saved execution with this id (see the output of the run that stopped)"},
		&cli.StringFlag{Name: "type", Usage: "with --resume: continue, retry, event, timeout, cancel or approval"},
		&cli.StringFlag{Name: "data", Usage: "with --resume: the event, the approval answer …: inline JSON, or @path"},
		&cli.BoolFlag{Name: "json", Usage: "print the whole execution state as JSON instead of the summary"},
		&cli.StringFlag{Name: "state-dir", Usage: "where stopped executions are kept (default $XDG_STATE_HOME/plaita/run, else ~/.local/state/plaita/run)"},
	)
	return &cli.Command{
		Name:  "run",
		Usage: "run a flow in this process (memory store, no server) and print the result",
		UsageText: "plaita run FLOW.json [--input JSON|@file] [--json] [--state-dir DIR]\n" +
			"plaita run FLOW.json --resume EXECUTION_ID --type continue|retry|event|timeout|cancel|approval [--data JSON|@file] [--json] [--state-dir DIR]",
		Description: "Runs the worker's configuration preflight, then the flow, step by step, until it completes,\n" +
			"fails or suspends. A suspended or failed execution is saved as <state-dir>/<execution_id>.json;\n" +
			"the output shows the exact command that resumes it.\n\n" +
			"Exit status: 0 completed or suspended; 1 error, cancelled, interrupted or resume refused;\n" +
			"2 bad usage, bad --input/--data, or an invalid flow (every problem is listed with its JSON path).",
		Flags: flags,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			cfg, log, err := runPreflight(cmd, stderr)
			if err != nil {
				return err
			}
			r, err := newFlowRun(ctx, cmd, stateBound(cfg))
			if err != nil {
				return err
			}
			es := settings.Engine(cfg)
			reg := engine.NewRegistry()
			no := settings.Nodes(cfg)
			if err := nodes.Register(reg, no, nodeSetupLog(log)); err != nil {
				return &exitError{code: ExitFailure, err: fmt.Errorf("run: %w", err)}
			}
			// The root Register gave the writefile node (it logs it at debug only, for run).
			if root, err := writefile.ResolveRoot(writefile.HostFacts(no.WorkspaceRoot, no.AllowUnrestricted, no.ProjectRoot)); err == nil {
				r.files = root.Where()
			}
			ex := engine.NewExecutor(r.mem.Storage())
			ex.Settings = func() engine.Settings { return es }
			ex.Log = log
			return r.execute(ctx, ex, reg, es, stdout, stderr)
		},
	}
}

// flowRun is one invocation of `plaita run`.
type flowRun struct {
	program     string // how the commands printed invoke plaita
	flowPath    string
	stateDir    string
	stateDirSet bool // --state-dir was given: the resume command repeats it
	asJSON      bool
	input       any
	resumeID    string
	resumeType  engine.ResumeType
	data        any
	mem         *control.MemoryStates
	files       string // where writefile nodes write (writefile.Root.Where)
}

// executionIDRe bounds what --resume accepts; the id becomes a file name.
var executionIDRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

func usageError(format string, args ...any) error {
	return &exitError{code: ExitRejected, err: fmt.Errorf("run: "+format, args...)}
}

// newFlowRun checks the arguments and flags; every mistake here is bad usage (exit 2).
func newFlowRun(ctx context.Context, cmd *cli.Command, bound docBound) (*flowRun, error) {
	r := &flowRun{asJSON: cmd.Bool("json"), mem: control.NewMemoryStates(), program: optionsOf(cmd).programName()}
	switch cmd.Args().Len() {
	case 0:
		return nil, usageError("name the flow file: plaita run FLOW.json")
	case 1:
		r.flowPath = cmd.Args().First()
	default:
		return nil, usageError("one flow file at a time, got %d arguments: %s", cmd.Args().Len(), strings.Join(cmd.Args().Slice(), " "))
	}
	r.resumeID = cmd.String("resume")
	resuming := cmd.IsSet("resume")
	switch {
	case resuming && r.resumeID == "":
		return nil, usageError("--resume needs an execution id")
	case resuming && !executionIDRe.MatchString(r.resumeID):
		return nil, usageError("--resume %q is not an execution id", r.resumeID)
	case resuming && !cmd.IsSet("type"):
		return nil, usageError("--resume needs --type continue|retry|event|timeout|cancel|approval")
	case resuming && cmd.IsSet("input"):
		return nil, usageError("--input starts a new execution; with --resume, pass --data")
	case !resuming && cmd.IsSet("type"):
		return nil, usageError("--type goes with --resume EXECUTION_ID")
	case !resuming && cmd.IsSet("data"):
		return nil, usageError("--data goes with --resume EXECUTION_ID; a new execution takes --input")
	}
	var err error
	if resuming {
		if r.resumeType, err = engine.ParseResumeType(cmd.String("type")); err != nil {
			return nil, usageError("--type %q: use continue, retry, event, timeout, cancel or approval", cmd.String("type"))
		}
		if cmd.IsSet("data") {
			if r.data, err = readJSONArg(ctx, "data", cmd.String("data"), bound); err != nil {
				return nil, err
			}
		}
	} else {
		r.input = map[string]any{}
		if cmd.IsSet("input") {
			if r.input, err = readJSONArg(ctx, "input", cmd.String("input"), bound); err != nil {
				return nil, err
			}
		}
	}
	r.stateDirSet = cmd.IsSet("state-dir")
	if r.stateDir, err = resolveStateDir(optionsOf(cmd), cmd.String("state-dir"), r.stateDirSet); err != nil {
		return nil, err
	}
	return r, nil
}

// readJSONArg is readDoc for the run command, decoded.
func readJSONArg(ctx context.Context, flag, value string, bound docBound) (any, error) {
	doc, err := readDoc(ctx, "run", flag, value, bound)
	if err != nil {
		return nil, err
	}
	return decodeDoc(doc)
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// jsonError adds the line and column to a syntax error.
func jsonError(data []byte, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return "unexpected end of JSON input"
		}
		return err.Error()
	}
	line, col := 1, 1
	for _, c := range data[:min(int(se.Offset), len(data))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("%s at line %d, column %d", se.Error(), line, col)
}

// userHome is $HOME of the command tree's environment (os.UserHomeDir of the process's).
func userHome(o *options) (string, error) {
	if o.env == nil {
		return os.UserHomeDir()
	}
	if h, _ := o.hostEnv("HOME"); h != "" {
		return h, nil
	}
	return "", errors.New("$HOME is not defined")
}

// resolveStateDir applies the default: $XDG_STATE_HOME/plaita/run, else ~/.local/state/plaita/run.
func resolveStateDir(o *options, flag string, set bool) (string, error) {
	if set {
		if flag == "" {
			return "", usageError("--state-dir must not be empty")
		}
		return flag, nil
	}
	// The XDG base directory spec says a relative XDG_STATE_HOME is to be ignored.
	if x, _ := o.hostEnv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "plaita", "run"), nil
	}
	home, err := userHome(o)
	if err != nil {
		return "", usageError("no state directory: $XDG_STATE_HOME and $HOME are unset; pass --state-dir (%v)", err)
	}
	return filepath.Join(home, ".local", "state", "plaita", "run"), nil
}

func (r *flowRun) stateFile(id string) string { return filepath.Join(r.stateDir, id+".json") }

// execute parses the flow, starts or resumes the execution, keeps its state file in step and
// prints the outcome.
func (r *flowRun) execute(ctx context.Context, ex *engine.Executor, reg *engine.Registry, es engine.Settings, stdout, stderr io.Writer) error {
	def, err := readFileBounded(ctx, r.flowPath, flowBound)
	if err != nil {
		return usageError("flow file %s: %v", r.flowPath, err)
	}
	f, err := engine.Parse(def, reg, es.Expr)
	if err != nil {
		// A *engine.ValidationError lists every problem, one per line, each with its JSON path.
		return &exitError{code: ExitRejected, err: fmt.Errorf("%s: %w", r.flowPath, err)}
	}
	warnFlow(ex.Log, r.flowPath, f)

	var (
		st     *state.Execution
		runErr error
		id     string
	)
	if r.resumeID != "" {
		id = r.resumeID
		if err := r.load(f); err != nil {
			return err
		}
		st, runErr = ex.Resume(ctx, f, id, r.resumeType, r.data)
		if runErr != nil && resumeRefused(runErr) {
			return r.refusal(id, runErr, r.advice(f, es), stderr)
		}
	} else {
		id = engine.NewExecutionID()
		st, runErr = ex.Start(ctx, f, engine.StartRequest{ExecutionID: id, Input: r.input})
	}

	// The memory store holds the last state saved at a step boundary: that is what is kept.
	raw, saved, ok := r.mem.Saved(id)
	if saved != nil {
		st = saved
	}
	if st == nil {
		if runErr == nil {
			runErr = errors.New("no state was saved")
		}
		return &exitError{code: ExitFailure, err: fmt.Errorf("run: execution %s: %w", id, runErr)}
	}
	stateFile, saveErr := r.persist(st, raw, ok)

	interrupted := runErr != nil && ctx.Err() != nil && errors.Is(runErr, ctx.Err())
	if r.asJSON {
		if err := writeStateJSON(stdout, st, raw, ok); err != nil {
			return &exitError{code: ExitFailure, err: fmt.Errorf("run: write state: %w", err)}
		}
	} else if !interrupted {
		r.writeHuman(stdout, st, stateFile, r.advice(f, es))
	}
	if saveErr != nil {
		fmt.Fprintf(stderr, "plaita: run: execution %s is %s but its state could not be saved: %v\n", id, st.Status, saveErr)
		return &exitError{code: ExitFailure, err: saveErr, printed: true}
	}
	switch {
	case interrupted:
		fmt.Fprintf(stderr, "plaita: run: interrupted: execution %s stopped at node %q after %d step(s); its state is saved in %s\n",
			id, st.CurrentNode, st.StepCount, stateFile)
		fmt.Fprintf(stderr, "continue it with:\n  %s\n", r.resumeCommand(id, "continue", ""))
		return &exitError{code: ExitFailure, err: runErr, printed: true}
	case runErr != nil:
		fmt.Fprintf(stderr, "plaita: run: execution %s: %v\n", id, runErr)
		if stateFile != "" {
			fmt.Fprintf(stderr, "its last checkpoint is saved in %s\n", stateFile)
		}
		return &exitError{code: ExitFailure, err: runErr, printed: true}
	}
	switch st.Status {
	case state.Completed, state.Suspended:
		return nil
	case state.Error, state.Cancelled:
		// The summary (or the JSON state) on stdout says why.
		return &exitError{code: ExitFailure, err: fmt.Errorf("execution %s ended %s", id, st.Status), printed: true}
	}
	fmt.Fprintf(stderr, "plaita: run: execution %s stopped while %s\n", id, st.Status)
	return &exitError{code: ExitFailure, err: fmt.Errorf("execution %s is %s", id, st.Status), printed: true}
}

// load puts the saved state of the execution to resume into the memory store.
func (r *flowRun) load(f *engine.Flow) error {
	path := r.stateFile(r.resumeID)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &exitError{code: ExitFailure, err: fmt.Errorf("run: no saved execution %s: looked for %s (a completed or cancelled execution leaves no state; pass --state-dir if it was saved elsewhere)", r.resumeID, path)}
	}
	if err != nil {
		return &exitError{code: ExitFailure, err: fmt.Errorf("run: read state of %s: %w", r.resumeID, err)}
	}
	st, err := r.mem.Put(b)
	if err != nil {
		return &exitError{code: ExitFailure, err: fmt.Errorf("run: state file %s: %w", path, err)}
	}
	if st.ExecutionID != r.resumeID {
		return &exitError{code: ExitFailure, err: fmt.Errorf("run: state file %s holds execution %s, not %s", path, st.ExecutionID, r.resumeID)}
	}
	if st.FlowID != f.ID {
		return &exitError{code: ExitFailure, err: fmt.Errorf("run: execution %s runs flow %q, but %s defines flow %q", r.resumeID, st.FlowID, r.flowPath, f.ID)}
	}
	return nil
}

// resumeRefused reports whether Resume turned the request down and left the state untouched.
func resumeRefused(err error) bool {
	return errors.Is(err, engine.ErrInvalidResume) || errors.Is(err, engine.ErrEventMismatch) ||
		errors.Is(err, engine.ErrFlowChanged) || errors.Is(err, engine.ErrFlowHashMismatch)
}

// advice is what the printed commands are checked against: this run's definition, and no
// worker gates (nothing but the engine decides here).
func (r *flowRun) advice(f *engine.Flow, es engine.Settings) *control.Advice {
	return &control.Advice{Flow: f, Limits: es.Expr, Now: time.Now(), Local: true}
}

// refusal reports a refused resume and what would be accepted; the state file is left as it
// was.
func (r *flowRun) refusal(id string, err error, adv *control.Advice, stderr io.Writer) error {
	fmt.Fprintf(stderr, "plaita: run: resume refused: %v\n", err)
	if _, st, _ := r.mem.Saved(id); st != nil {
		fmt.Fprintf(stderr, "execution %s is unchanged (%s", id, st.Status)
		if s := st.Suspend; s != nil {
			fmt.Fprintf(stderr, ", %s at node %q", control.DescribeSuspend(s), s.Node)
		}
		fmt.Fprintf(stderr, "); its state stays in %s\n", r.stateFile(id))
		if hints := adv.Hints(st); len(hints) > 0 {
			fmt.Fprintln(stderr, "accepted now:")
			writeHints(stderr, hints, r.command(id))
			r.afterHints(st)(stderr)
		}
	}
	return &exitError{code: ExitFailure, err: err, printed: true}
}

// command renders a hint as the `plaita run --resume` command that does it.
func (r *flowRun) command(id string) func(engine.ResumeType, string) string {
	return func(rt engine.ResumeType, data string) string { return r.resumeCommand(id, string(rt), data) }
}

// afterHints adds, for an execution that used all its steps, the command that starts a new one.
func (r *flowRun) afterHints(st *state.Execution) func(io.Writer) {
	return func(w io.Writer) {
		if st.Status == state.Error && st.Error != nil && st.Error.Type == engine.ErrTypeStepLimit {
			fmt.Fprintf(w, "  start a new execution (once the flow is fixed) with:\n    %s\n", r.runCommand())
		}
	}
}

// persist keeps the state file in step with the execution: written while it can go on
// (suspended, in error, or interrupted while running), removed once it is completed or
// cancelled. It returns the file's path when one is kept.
func (r *flowRun) persist(st *state.Execution, raw []byte, ok bool) (string, error) {
	path := r.stateFile(st.ExecutionID)
	if st.Status == state.Completed || st.Status == state.Cancelled {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("remove %s: %w", path, err)
		}
		return "", nil
	}
	if !ok {
		return "", fmt.Errorf("no state was saved for execution %s", st.ExecutionID)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return "", err
	}
	buf.WriteByte('\n')
	if err := os.MkdirAll(r.stateDir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(r.stateDir, "."+st.ExecutionID+".*.tmp") // created 0600
	if err != nil {
		return "", err
	}
	_, werr := tmp.Write(buf.Bytes())
	if err := errors.Join(werr, tmp.Chmod(0o600), tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return path, nil
}

// writeStateJSON prints the execution state exactly as it is stored, indented.
func writeStateJSON(w io.Writer, st *state.Execution, raw []byte, ok bool) error {
	var buf bytes.Buffer
	if ok {
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
	} else {
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// writeHuman prints the summary: what to do next (only commands adv accepts) for an execution
// that can go on from its state file.
func (r *flowRun) writeHuman(w io.Writer, st *state.Execution, stateFile string, adv *control.Advice) {
	s := summary{st: st, stateFile: stateFile, cmd: r.command(st.ExecutionID), after: r.afterHints(st)}
	if r.files != "" && writesFiles(adv.Flow) {
		s.files = "written " + r.files
	}
	if stateFile != "" {
		s.hints = adv.Hints(st)
	}
	writeSummary(w, s)
}

// writesFiles reports whether f has a writefile node. Only then does the summary say where files
// go: from inside a clone of plaita that is the clone's parent, which the flow's relative paths
// do not suggest; for any other flow the line would be noise.
func writesFiles(f *engine.Flow) bool {
	return f != nil && slices.ContainsFunc(f.Nodes, func(n *engine.Node) bool { return n.Type == "writefile" })
}

// runCommand is the shell command that starts a new execution of this flow.
func (r *flowRun) runCommand() string {
	parts := []string{r.program, "run", control.ShellQuote(r.flowPath)}
	if r.stateDirSet {
		parts = append(parts, "--state-dir", control.ShellQuote(r.stateDir))
	}
	return strings.Join(parts, " ")
}

// resumeCommand is the exact shell command that resumes the execution.
func (r *flowRun) resumeCommand(id, rt, data string) string {
	parts := []string{r.program, "run", control.ShellQuote(r.flowPath)}
	if r.stateDirSet {
		parts = append(parts, "--state-dir", control.ShellQuote(r.stateDir))
	}
	parts = append(parts, "--resume", control.ShellQuote(id), "--type", rt)
	if data != "" {
		parts = append(parts, "--data", control.ShellQuote(data))
	}
	return strings.Join(parts, " ")
}
