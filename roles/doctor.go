package roles

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v3"

	"plaita/config"
)

// doctorCommand runs the same strict loader as the roles and prints what it found.
func doctorCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "doctor",
		Usage:     "run the strict configuration preflight and print the effective configuration",
		UsageText: "plaita doctor [--role ROLE | --all] [--json] [--log-level LEVEL | --quiet] [--log-format FORMAT]",
		Description: "Exit status 0 when every value is accepted, 2 when any is rejected.\n" +
			"The --json layout is documented in docs/doctor.md.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "role", Usage: "check one role: worker, console, filter, schedule, delay or dev"},
			&cli.BoolFlag{Name: "all", Usage: "check every variable of every role (the default)"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
		}, append(logFlags(), logLevelFlag())...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			// The report is doctor's output; the logging flags are taken so one set of flags
			// fits every command, and --log-level/--quiet set the level checked, as they would
			// for the role.
			if _, err := parseLogFormat(cmd.String("log-format")); err != nil {
				return &exitError{code: ExitRejected, err: err}
			}
			role := config.RoleDev
			if cmd.IsSet("role") {
				if cmd.Bool("all") {
					return &exitError{code: ExitRejected, err: fmt.Errorf("doctor: use --role or --all, not both")}
				}
				r, err := config.ParseRole(cmd.String("role"))
				if err != nil {
					return &exitError{code: ExitRejected, err: fmt.Errorf("doctor: %w", err)}
				}
				role = r
			}
			cfg, loadErr := config.Load(role, true, config.WithFlags(overrides(cmd, role)))
			report := cfg.Report()
			if cmd.Bool("json") {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(report); err != nil {
					return &exitError{code: ExitFailure, err: fmt.Errorf("doctor: write report: %w", err)}
				}
			} else if err := report.WriteText(stdout); err != nil {
				return &exitError{code: ExitFailure, err: fmt.Errorf("doctor: write report: %w", err)}
			}
			if loadErr != nil {
				// The report already lists every problem.
				return &exitError{code: ExitRejected, err: loadErr, printed: true}
			}
			return nil
		},
	}
}
