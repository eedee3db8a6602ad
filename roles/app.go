package roles

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v3"

	"plaita/config"
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

// App builds the command tree. stdout and stderr are parameters so tests can read them.
func App(stdout, stderr io.Writer) *cli.Command {
	app := &cli.Command{
		Name:      "plaita",
		Usage:     "durable multi-tenant flow engine",
		UsageText: "plaita <role|command> [flags]",
		Description: "One binary plays every part: pick a role (worker, console, filter, schedule, delay, dev).\n" +
			"Every role runs the strict configuration preflight first; `plaita doctor` runs it alone.",
		Writer:    stdout,
		ErrWriter: stderr,
		// main owns the exit: the CLI library must never call os.Exit itself.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return &exitError{code: ExitRejected, err: fmt.Errorf("unknown command %q; `plaita --help` lists the commands", cmd.Args().First())}
			}
			return cli.ShowRootCommandHelp(cmd)
		},
		Commands: []*cli.Command{
			roleCommand(config.RoleWorker, stderr),
			roleCommand(config.RoleConsole, stderr),
			roleCommand(config.RoleFilter, stderr),
			roleCommand(config.RoleSchedule, stderr),
			roleCommand(config.RoleDelay, stderr),
			roleCommand(config.RoleDev, stderr),
			doctorCommand(stdout, stderr),
			runCommand(stdout, stderr),
			startCommand(stdout, stderr),
			executionCommand(stdout, stderr),
			{
				Name:  "roles",
				Usage: "print the role → dependency table",
				Action: func(context.Context, *cli.Command) error {
					return WriteTable(stdout)
				},
			},
			opsCommand("reap", "find and settle zombie executions", config.RoleWorker, stderr),
			opsCommand("reindex", "rebuild the execution index", config.RoleWorker, stderr),
			opsCommand("dlq", "list or replay dead letters", config.RoleWorker, stderr),
			opsCommand("drain-list", "migrate a legacy List queue to the Stream", config.RoleWorker, stderr),
			opsCommand("migrate", "apply or roll back console database migrations", config.RoleConsole, stderr),
		},
	}
	return app
}

// roleCommand runs the preflight for a role and then its services.
func roleCommand(role config.Role, stderr io.Writer) *cli.Command {
	spec := lookupSpec(role)
	flags := logFlags()
	for _, f := range config.Flags(role) {
		flags = append(flags, &cli.StringFlag{Name: f.Name, Usage: f.Usage})
	}
	return &cli.Command{
		Name:  string(role),
		Usage: spec.Summary,
		Flags: flags,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			cfg, log, err := preflight(cmd, role, stderr)
			if err != nil {
				return err
			}
			if run, ok := service(role); ok {
				if err := run(ctx, cfg, log); err != nil {
					log.Error().Err(err).Str("event", "role.failed").Msg("stopped with an error")
					return &exitError{code: ExitFailure, err: err}
				}
				return nil
			}
			if !spec.Built {
				return &exitError{code: ExitFailure, err: fmt.Errorf("%s: not built yet in this version; `plaita roles` shows what is", role)}
			}
			return nil
		},
	}
}

// service returns the body of a role, when it exists; a role without one says it is not
// built yet.
func service(role config.Role) (func(context.Context, *config.Config, zerolog.Logger) error, bool) {
	switch role {
	case config.RoleWorker:
		return runWorker, true
	}
	return nil, false
}

// opsCommand is an operator tool of the same binary; it runs the preflight of the role whose
// configuration it uses.
func opsCommand(name, usage string, role config.Role, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  name,
		Usage: usage,
		Flags: append(logFlags(), &cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (overrides PLAITA_LOG_LEVEL)"}),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if _, _, err := preflight(cmd, role, stderr); err != nil {
				return err
			}
			return &exitError{code: ExitFailure, err: fmt.Errorf("%s: not built yet in this version", name)}
		},
	}
}

func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "quiet", Usage: "log warnings and errors only (same as --log-level warn)"},
		&cli.StringFlag{Name: "log-format", Value: "auto", Usage: "json, console, or auto (console when stderr is a terminal)"},
	}
}
