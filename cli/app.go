package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/engine"
	"plaita/roles"
)

// Exit statuses of the plaita binary.
const (
	ExitOK       = 0
	ExitFailure  = 1 // the command ran and failed, or is not built yet
	ExitRejected = 2 // configuration rejected by the strict preflight, or bad usage
)

// exitError carries an exit status; its message has already been printed when printed is set.
type exitError struct {
	code    int
	err     error
	printed bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

// ExitCode prints err (unless it was printed already) and returns the process exit status.
func ExitCode(err error, stderr io.Writer) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if !ee.printed {
			fmt.Fprintln(stderr, "plaita:", ee.err)
		}
		return ee.code
	}
	// Anything else comes from flag parsing or an unknown command: bad usage.
	fmt.Fprintln(stderr, "plaita:", err)
	return ExitRejected
}

// Option is what the binary gives the command tree beside its output.
type Option func(*options)

type options struct {
	demoFlows fs.FS
	// env is the whole environment the commands read (nil: the process's); program names
	// plaita in the commands printed ("": found from the executable, program.go).
	env     map[string]string
	program string
}

// WithDemoFlows are the flows plaita dev publishes (the binary's examples).
func WithDemoFlows(flows fs.FS) Option { return func(o *options) { o.demoFlows = flows } }

// WithEnv runs the command tree on env instead of the process's environment: the
// configuration and the host variables it reads (HOME, XDG_STATE_HOME). Tests run the commands
// in process, in parallel, each with its own environment.
func WithEnv(env map[string]string) Option { return func(o *options) { o.env = env } }

// WithProgram is how the commands printed invoke plaita (tests: "plaita").
func WithProgram(name string) Option { return func(o *options) { o.program = name } }

// optionsKey is where the root command keeps its options (Command.Metadata).
const optionsKey = "plaita.options"

// optionsOf are the options of cmd's command tree.
func optionsOf(cmd *cli.Command) *options {
	if cmd != nil {
		if root := cmd.Root(); root != nil {
			if o, ok := root.Metadata[optionsKey].(*options); ok {
				return o
			}
		}
	}
	return &options{}
}

// load runs the configuration's loader on the command tree's environment.
func (o *options) load(role config.Role, flags map[string]string) (*config.Config, error) {
	opts := []config.Option{config.WithFlags(flags)}
	if o.env != nil {
		opts = append(opts, config.WithEnv(o.env))
	}
	return config.Load(role, true, opts...)
}

// hostEnv is a host variable (not plaita configuration) of the command tree's environment.
func (o *options) hostEnv(name string) (string, bool) {
	if o.env != nil {
		v, ok := o.env[name]
		return v, ok
	}
	return config.HostEnv(name)
}

// programName is how the commands printed invoke plaita.
func (o *options) programName() string {
	if o.program != "" {
		return o.program
	}
	return program()
}

// App builds the command tree. stdout and stderr are parameters so tests can read them.
func App(stdout, stderr io.Writer, opts ...Option) *cli.Command {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	app := &cli.Command{
		Name:      "plaita",
		Usage:     "durable multi-tenant flow engine",
		UsageText: "plaita <role|command> [flags]",
		Description: "One binary plays every part: pick a role (" + roleNames() + ").\n" +
			"Every role runs the strict configuration preflight first; `plaita doctor` runs it alone.",
		Writer:    stdout,
		ErrWriter: stderr,
		Metadata:  map[string]any{optionsKey: &o},
		// main owns the exit: the CLI library must never call os.Exit itself.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
		// The library's own --version prints through a package-level printer; these flags
		// print through stdout like every other command. Local: subcommands keep their own
		// --json.
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "version", Usage: "print the version, VCS commit and Go version", Local: true},
			&cli.BoolFlag{Name: "json", Usage: "with --version: print it as JSON", Local: true},
			// The logging flags are taken before a command's name too, for every command.
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (overrides PLAITA_LOG_LEVEL)", Local: true},
			&cli.BoolFlag{Name: "quiet", Usage: "log warnings and errors only (same as --log-level warn)", Local: true},
			&cli.StringFlag{Name: "log-format", Value: "auto", Usage: "json, console, or auto (console when stderr is a terminal)", Local: true},
		},
		Suggest: true,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Bool("version") {
				return writeVersion(stdout, cmd.Bool("json"))
			}
			if cmd.Bool("json") {
				return &exitError{code: ExitRejected, err: fmt.Errorf("--json goes with --version (or with the command that prints JSON)")}
			}
			if cmd.Args().Len() > 0 {
				name := cmd.Args().First()
				if s := cli.SuggestCommand(cmd.Commands, name); s != "" {
					return &exitError{code: ExitRejected, err: fmt.Errorf("unknown command %q: did you mean %q? (`plaita --help` lists the commands)", name, s)}
				}
				return &exitError{code: ExitRejected, err: fmt.Errorf("unknown command %q; `plaita --help` lists the commands", name)}
			}
			return cli.ShowRootCommandHelp(cmd)
		},
		Commands: append(roleCommands(stdout, stderr, o.demoFlows), []*cli.Command{
			doctorCommand(stdout, stderr),
			runCommand(stdout, stderr),
			startCommand(stdout, stderr),
			flowCommand(stdout, stderr),
			executionCommand(stdout, stderr),
			eventCommand(stdout, stderr),
			approvalCommand(stdout, stderr),
			credentialsCommand(stdout, stderr),
			benchCommand(stdout, stderr),
			{
				Name:      "version",
				Usage:     "print the version, VCS commit and Go version (same as plaita --version)",
				UsageText: "plaita version [--json]",
				// It logs nothing, but takes the logging flags like every command.
				Flags: append([]cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print it as JSON"}}, append(logFlags(), logLevelFlag())...),
				Action: func(_ context.Context, cmd *cli.Command) error {
					if err := checkLogFlags(cmd); err != nil {
						return err
					}
					return writeVersion(stdout, cmd.Bool("json"))
				},
			},
			{
				Name:  "roles",
				Usage: "print the roles and operator tools: what each needs and whether it is built",
				// It logs nothing, but takes the logging flags like every command, so one set of
				// flags fits every invocation in a script.
				Flags: append(logFlags(), logLevelFlag()),
				Action: func(_ context.Context, cmd *cli.Command) error {
					if err := checkLogFlags(cmd); err != nil {
						return err
					}
					return roles.WriteTable(stdout)
				},
			},
		}...),
	}
	for _, tool := range roles.Tools() {
		if build, ok := toolCommand(tool.Name); ok {
			app.Commands = append(app.Commands, build(tool, stdout, stderr))
			continue
		}
		app.Commands = append(app.Commands, opsCommand(tool, stderr))
	}
	return app
}

// toolCommand is the command of an operator tool that is built; the others run their
// preflight and say they are not built yet (opsCommand).
func toolCommand(name string) (func(tool roles.Tool, stdout, stderr io.Writer) *cli.Command, bool) {
	switch name {
	case "migrate":
		return migrateCommand, true
	case "dlq":
		return dlqCommand, true
	case "status":
		return statusCommand, true
	case "reap":
		return reapCommand, true
	case "reindex":
		return reindexCommand, true
	case "drain-list":
		return drainListCommand, true
	case "ctl":
		return ctlCommand, true
	case "probe":
		return probeCommand, true
	}
	return nil, false
}

// roleCommands are the commands of the role table's rows, in its order: dev's own command for
// dev, roleCommand for the others, with the operator subcommands a role's command carries
// (roleSubcommands).
func roleCommands(stdout, stderr io.Writer, demoFlows fs.FS) []*cli.Command {
	var out []*cli.Command
	for _, spec := range roles.Table() {
		if spec.Role == config.RoleDev {
			out = append(out, devCommand(stdout, stderr, demoFlows))
			continue
		}
		cmd := roleCommand(spec, stderr)
		if add, ok := roleSubcommands(spec.Role); ok {
			cmd = add(cmd, stdout, stderr)
		}
		out = append(out, cmd)
	}
	return out
}

// roleSubcommands adds the operator subcommands a role's command carries: `plaita schedule
// add|list|…` edits what the schedule role runs.
func roleSubcommands(role config.Role) (func(cmd *cli.Command, stdout, stderr io.Writer) *cli.Command, bool) {
	switch role {
	case config.RoleSchedule:
		return scheduleCommand, true
	}
	return nil, false
}

// roleNames lists the role table's names for the root's help.
func roleNames() string {
	var names []string
	for _, spec := range roles.Table() {
		names = append(names, string(spec.Role))
	}
	return strings.Join(names, ", ")
}

// roleCommand runs the preflight for a role and then its body.
func roleCommand(spec roles.Spec, stderr io.Writer) *cli.Command {
	role := spec.Role
	flags := logFlags()
	for _, f := range config.Flags(role) {
		flags = append(flags, &cli.StringFlag{Name: f.Name, Usage: f.Usage})
	}
	return &cli.Command{
		Name:  string(role),
		Usage: helpUsage(spec.Summary, spec.Built),
		Flags: flags,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			cfg, log, err := preflight(cmd, role, stderr)
			if err != nil {
				return err
			}
			if spec.Body == nil {
				return &exitError{code: ExitFailure, err: fmt.Errorf("%s: not built yet in this version; `plaita roles` shows what is", role)}
			}
			stopTracing, err := roles.StartTracing(ctx, cfg, log)
			if err != nil {
				return &exitError{code: ExitRejected, err: fmt.Errorf("%s: %w", role, err)}
			}
			defer stopTracing()
			if err := spec.Body(ctx, cfg, log); err != nil {
				log.Error().Err(err).Str("event", "role.failed").Msg("stopped with an error")
				return &exitError{code: ExitFailure, err: err}
			}
			return nil
		},
	}
}

// helpUsage is a command's line in --help: its summary, marked when it is not built, so the
// help and `plaita roles` say the same thing.
func helpUsage(summary string, built bool) string {
	if built {
		return summary
	}
	return summary + " (" + roles.Status(built) + ")"
}

// opsCommand is an operator tool of the same binary; it runs the preflight of the role whose
// configuration it uses.
func opsCommand(tool roles.Tool, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  tool.Name,
		Usage: helpUsage(tool.Summary, tool.Built),
		Flags: append(logFlags(), logLevelFlag()),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if _, _, err := preflight(cmd, tool.Role, stderr); err != nil {
				return err
			}
			return &exitError{code: ExitFailure, err: fmt.Errorf("%s: not built yet in this version", tool.Name)}
		},
	}
}

// logLevelFlag is --log-level for commands whose role flags do not already bring it (a role's
// comes from config.Flags, since it overrides PLAITA_LOG_LEVEL). It is not part of logFlags:
// commands that take those add their own --log-level, and a flag defined twice is an error.
func logLevelFlag() cli.Flag {
	return &cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (overrides PLAITA_LOG_LEVEL)"}
}

// logFlags are --quiet and --log-format, which every command that logs takes.
func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "quiet", Usage: "log warnings and errors only (same as --log-level warn)"},
		&cli.StringFlag{Name: "log-format", Value: "auto", Usage: "json, console, or auto (console when stderr is a terminal)"},
	}
}

// Version is what `plaita --version` prints: enough to tell two binaries of a fleet apart.
type Version struct {
	Version    string `json:"version"`  // module version; "devel" for a build from a work tree
	Commit     string `json:"commit"`   // vcs.revision, or "unknown"
	Modified   string `json:"modified"` // vcs.modified ("true"/"false"), or "unknown"
	Go         string `json:"go"`
	Engine     string `json:"engine"`              // recorded in every execution state it starts
	TaskSchema int    `json:"task_schema_version"` // the newest task envelope it accepts and the one it writes
}

// versionFrom reads a binary's build information. The go tool stamps VCS settings only when it
// builds inside a repository with -buildvcs on; without them the commit is "unknown" rather
// than a guess.
func versionFrom(info *debug.BuildInfo, ok bool) Version {
	v := Version{Version: "devel", Commit: "unknown", Modified: "unknown", Go: runtime.Version(),
		Engine: engine.Version, TaskSchema: config.TaskSchemaVersion}
	if !ok || info == nil {
		return v
	}
	if m := info.Main.Version; m != "" && m != "(devel)" {
		v.Version = m
	}
	if info.GoVersion != "" {
		v.Go = info.GoVersion
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value
		}
	}
	return v
}

func writeVersion(w io.Writer, asJSON bool) error {
	v := versionFrom(debug.ReadBuildInfo())
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return &exitError{code: ExitFailure, err: fmt.Errorf("version: %w", err)}
		}
		return nil
	}
	_, err := fmt.Fprintf(w, "plaita %s\ncommit:   %s\nmodified: %s\ngo:       %s\nengine:   %s\ntask schema version: %d\n",
		v.Version, v.Commit, v.Modified, v.Go, v.Engine, v.TaskSchema)
	if err != nil {
		return &exitError{code: ExitFailure, err: fmt.Errorf("version: %w", err)}
	}
	return nil
}
