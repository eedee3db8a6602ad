package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
	"plaita/roles"
)

// migrateCommand is `plaita migrate up|down|version`: the console database's migrations
// (migrations/, applied through control), by hand. Each subcommand runs the console's strict
// preflight and opens PLAITA_CONSOLE_DB_URL without migrating it; the console itself migrates
// up at every start.
func migrateCommand(tool roles.Tool, stdout, stderr io.Writer) *cli.Command {
	flags := func(extra ...cli.Flag) []cli.Flag {
		return append(append(extra, jsonFlag("print the result as JSON")), append(logFlags(), logLevelFlag())...)
	}
	to := &cli.StringFlag{Name: "to", Usage: "the version to migrate to (a number; 0: no migration)"}
	return &cli.Command{
		Name:      tool.Name,
		Usage:     helpUsage(tool.Summary, tool.Built),
		UsageText: "plaita migrate up [--to N] | down [--to N | --all] | version | copy --to URL   [--json]",
		Description: "Runs the console's configuration preflight and opens the database at PLAITA_CONSOLE_DB_URL\n" +
			"(sqlite:////absolute/path, sqlite:///path/relative/to/the/working/directory, or\n" +
			"postgres://user:password@host:5432/database).\n" +
			"  up        applies every migration the database lacks (--to N: up to version N)\n" +
			"  down      rolls back the last migration (--to N: down to version N; --all: every migration,\n" +
			"            which drops every table and its data)\n" +
			"  version   prints the database's version and the migrations it lacks; it creates nothing\n" +
			"  copy      copies the console's data to another database (--to URL), verified\n" +
			"A dirty database (a migration failed half-way), one newer than this binary and one that is not\n" +
			"plaita's are refused; migrations/README.md says what to do. The console migrates up at start.\n" +
			"Exit status: 0 done (version: the report is printed and the schema is usable); 1 failure\n" +
			"(the database, a refused schema); 2 bad usage or a rejected configuration.",
		Flags: append(logFlags(), logLevelFlag()),
		Action: func(_ context.Context, cmd *cli.Command) error {
			if _, _, err := preflight(cmd, tool.Role, stderr); err != nil {
				return err
			}
			if cmd.Args().Len() > 0 {
				return cliUsage("migrate", "unknown subcommand %q (up, down, version, copy)", cmd.Args().First())
			}
			return cliUsage("migrate", "name what to do: plaita migrate up|down|version|copy (--help says more)")
		},
		Commands: []*cli.Command{
			{
				Name:      "up",
				Usage:     "apply the migrations the database lacks (creating the file when there is none)",
				UsageText: "plaita migrate up [--to N] [--json]",
				Flags:     flags(to),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					target := control.MigrateUp()
					if cmd.IsSet("to") {
						v, err := parseVersionFlag(cmd.String("to"))
						if err != nil {
							return cliUsage("migrate up", "%v", err)
						}
						target = control.MigrateUpTo(v)
					}
					return migrateRun(ctx, cmd, "up", target, false, stdout, stderr)
				},
			},
			{
				Name:      "down",
				Usage:     "roll back the last migration (--to N, --all: more)",
				UsageText: "plaita migrate down [--to N | --all] [--json]",
				Flags:     flags(to, &cli.BoolFlag{Name: "all", Usage: "roll back every migration (drops every table and its data)"}),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					target := control.MigrateDown(1)
					switch {
					case cmd.IsSet("to") && cmd.Bool("all"):
						return cliUsage("migrate down", "use --to N or --all, not both")
					case cmd.Bool("all"):
						target = control.MigrateDownTo(0)
					case cmd.IsSet("to"):
						v, err := parseVersionFlag(cmd.String("to"))
						if err != nil {
							return cliUsage("migrate down", "%v", err)
						}
						target = control.MigrateDownTo(v)
					}
					return migrateRun(ctx, cmd, "down", target, true, stdout, stderr)
				},
			},
			migrateCopyCommand(flags, stdout, stderr),
			{
				Name:      "version",
				Usage:     "print the database's migration version and what it lacks",
				UsageText: "plaita migrate version [--json]",
				Flags:     flags(),
				Action:    func(ctx context.Context, cmd *cli.Command) error { return migrateVersion(ctx, cmd, stdout, stderr) },
			},
		},
	}
}

func parseVersionFlag(s string) (uint, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("--to %q: use a version number (0: no migration; latest: %d)", s, control.LatestMigration())
	}
	return uint(v), nil
}

// openConsoleDB runs the console's preflight and opens its database as it is; path is the file
// PLAITA_CONSOLE_DB_URL names (set even when the file is missing: a NotFound refusal).
func openConsoleDB(ctx context.Context, cmd *cli.Command, name string, mustExist bool, stderr io.Writer) (*control.ConsoleDB, string, zerolog.Logger, error) {
	cfg, log, err := preflight(cmd, config.RoleConsole, stderr)
	if err != nil {
		return nil, "", log, err
	}
	if err := checkLogFlags(cmd); err != nil {
		return nil, "", log, err
	}
	url := config.ConsoleDBURL.In(cfg)
	path, err := control.ConsoleDBPath(url)
	if err != nil {
		return nil, path, log, cliUsage(name, "PLAITA_CONSOLE_DB_URL: %v", err)
	}
	db, err := control.OpenConsoleDB(ctx, url, mustExist)
	if err != nil {
		return nil, path, log, err
	}
	return db, path, log, nil
}

// missingDB reports whether opening the console database found no file (mustExist).
func missingDB(err error) bool {
	r := control.AsRefusal(err)
	return r != nil && r.Class == control.NotFound
}

// migrateResult is what `plaita migrate up|down --json` prints.
type migrateResult struct {
	Database string `json:"database"`
	Action   string `json:"action"` // up or down
	control.MigrateResult
	Error string `json:"error,omitempty"`
}

func migrateRun(ctx context.Context, cmd *cli.Command, action string, target control.MigrateTarget, mustExist bool, stdout, stderr io.Writer) error {
	name := "migrate " + action
	if cmd.Args().Len() > 0 {
		return cliUsage(name, "takes no arguments (use --to N)")
	}
	db, _, log, err := openConsoleDB(ctx, cmd, name, mustExist, stderr)
	var ee *exitError
	switch {
	case missingDB(err):
		return cliFail(name, "%v: nothing to roll back", err)
	case errors.As(err, &ee):
		return err
	case err != nil:
		return refused(name, err)
	}
	defer db.Close()
	res, runErr := db.Migrate(ctx, target)
	out := migrateResult{Database: db.Name(), Action: action, MigrateResult: res}
	if runErr != nil {
		out.Error = runErr.Error()
	}
	if len(res.Applied) > 0 {
		log.Info().Str("event", "console_db.migrated").Str("database", out.Database).Str("target", target.String()).
			Uint("from", res.From.Version).Uint("to", res.To.Version).Bool("dirty", res.To.Dirty).Int("applied", len(res.Applied)).
			Msg("console database migrated")
	}
	if cmd.Bool("json") {
		if err := writeJSON(stdout, out); err != nil {
			return cliFail(name, "write the result: %v", err)
		}
	} else if runErr == nil || len(res.Applied) > 0 {
		writeMigrateText(stdout, name, out)
	}
	if runErr != nil {
		return refused(name, runErr)
	}
	return nil
}

func writeMigrateText(w io.Writer, name string, r migrateResult) {
	if len(r.Applied) == 0 {
		fmt.Fprintf(w, "%s: %s is at version %d (latest %d): nothing to do\n", name, r.Database, r.To.Version, r.Latest)
		return
	}
	fmt.Fprintf(w, "%s: %s from version %d to %d (latest %d)\n", name, r.Database, r.From.Version, r.To.Version, r.Latest)
	for _, a := range r.Applied {
		fmt.Fprintf(w, "  %s %04d %s\n", a.Direction, a.Version, a.Name)
	}
}

// versionReport is what `plaita migrate version --json` prints.
type versionReport struct {
	Database string `json:"database"`
	Exists   bool   `json:"exists"`
	Version  uint   `json:"version"`
	Dirty    bool   `json:"dirty"`
	Latest   uint   `json:"latest"`
	// Status: missing (no file yet: the console creates it), current, behind (migrate up),
	// dirty, too_new, unversioned (not plaita's) — the last three are refused.
	Status  string              `json:"status"`
	Pending []control.Migration `json:"pending"` // what up would apply
	Problem string              `json:"problem,omitempty"`
}

func migrateVersion(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "migrate version"
	if cmd.Args().Len() > 0 {
		return cliUsage(name, "takes no arguments")
	}
	rep := versionReport{Latest: control.LatestMigration(), Pending: []control.Migration{}}
	db, path, _, err := openConsoleDB(ctx, cmd, name, true, stderr)
	var ee *exitError
	switch {
	case missingDB(err):
		rep.Database, rep.Status, rep.Pending = path, control.SchemaMissing, control.Migrations()
		return writeVersionReport(stdout, cmd.Bool("json"), rep, nil)
	case errors.As(err, &ee):
		return err
	case err != nil:
		return refused(name, err)
	}
	defer db.Close()
	rep.Database, rep.Exists = db.Name(), true
	schema, err := db.Schema(ctx)
	if err != nil {
		return cliFail(name, "%v", err)
	}
	rep.Version, rep.Dirty, rep.Status = schema.Version, schema.Dirty, schema.Status
	rep.Pending = append(rep.Pending, schema.Pending...)
	if schema.Problem != nil {
		rep.Problem = schema.Problem.Error()
	}
	return writeVersionReport(stdout, cmd.Bool("json"), rep, schema.Problem)
}

func writeVersionReport(w io.Writer, asJSON bool, rep versionReport, problem error) error {
	const name = "migrate version"
	if asJSON {
		if err := writeJSON(w, rep); err != nil {
			return cliFail(name, "write the report: %v", err)
		}
	} else {
		switch rep.Status {
		case control.SchemaMissing:
			fmt.Fprintf(w, "%s: no database yet (the console creates it at start; latest version %d)\n", rep.Database, rep.Latest)
		case control.SchemaCurrent:
			fmt.Fprintf(w, "%s: version %d, the latest\n", rep.Database, rep.Version)
		case control.SchemaBehind:
			fmt.Fprintf(w, "%s: version %d, latest %d: plaita migrate up applies\n", rep.Database, rep.Version, rep.Latest)
			for _, m := range rep.Pending {
				fmt.Fprintf(w, "  %04d %s\n", m.Version, m.Name)
			}
		default:
			fmt.Fprintf(w, "%s: version %d (dirty %v, latest %d): %s\n", rep.Database, rep.Version, rep.Dirty, rep.Latest, rep.Status)
		}
	}
	if problem != nil {
		return cliFail(name, "%v", problem)
	}
	return nil
}
