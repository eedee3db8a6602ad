package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
)

// copyReport is what `plaita migrate copy --json` prints.
type copyReport struct {
	From string `json:"from"`
	To   string `json:"to"`
	control.CopyReport
	Error string `json:"error,omitempty"`
}

// migrateCopyCommand is `plaita migrate copy`: the console's data from one database to another
// (a laptop's SQLite console to PostgreSQL), verified (control.CopyConsoleDB).
func migrateCopyCommand(flags func(extra ...cli.Flag) []cli.Flag, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "copy",
		Usage:     "copy the console's data to another database (SQLite to PostgreSQL, or back), verified by counts and checksums",
		UsageText: "plaita migrate copy [--from URL] --to URL [--leave-local] [--batch N] [--json]",
		Description: "Copies the console's tables — tenants, users, memberships, sessions, API keys, the audit, drafts and\n" +
			"published versions, bulk jobs, contract keys — from --from (default PLAITA_CONSOLE_DB_URL; it must exist\n" +
			"and be at this binary's latest migration, and it is only read) into --to (created and migrated up when\n" +
			"new), then compares every table's rows and checksum on both sides. Stop the consoles on the source\n" +
			"first. A copy cut short is run again: it goes on. A source holding local mode's executions or tasks\n" +
			"is refused — start a console on it with Redis first (it hands them over), or pass --leave-local.\n" +
			"Exit status: 0 copied and verified; 1 a failure or a difference (the report names the tables);\n" +
			"2 bad usage or a rejected configuration.",
		Flags: flags(
			&cli.StringFlag{Name: "from", Usage: "the source's URL (default: PLAITA_CONSOLE_DB_URL)"},
			&cli.StringFlag{Name: "to", Usage: "the target's URL: postgres://user:password@host:5432/database or sqlite:////path.db"},
			&cli.BoolFlag{Name: "leave-local", Usage: "copy even when the source holds local mode's executions or tasks (they stay behind)"},
			&cli.IntFlag{Name: "batch", Value: 500, Usage: "rows per transaction"},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			const name = "migrate copy"
			if cmd.Args().Len() > 0 {
				return cliUsage(name, "takes no arguments (use --from and --to)")
			}
			cfg, log, err := preflight(cmd, config.RoleConsole, stderr)
			if err != nil {
				return err
			}
			if err := checkLogFlags(cmd); err != nil {
				return err
			}
			from, to := cmd.String("from"), cmd.String("to")
			if from == "" {
				from = config.ConsoleDBURL.In(cfg)
			}
			switch {
			case to == "":
				return cliUsage(name, "--to is required: the database to copy into")
			case to == from:
				return cliUsage(name, "--to is the source itself")
			case cmd.Int("batch") < 1:
				return cliUsage(name, "--batch must be at least 1")
			}
			for flag, u := range map[string]string{"--from": from, "--to": to} {
				if _, err := control.ConsoleDBPath(u); err != nil {
					return cliUsage(name, "%s: %v", flag, err)
				}
			}
			asJSON := cmd.Bool("json")
			opts := control.CopyOptions{Batch: int(cmd.Int("batch")), LeaveLocal: cmd.Bool("leave-local"),
				Progress: func(table string, copied, total int64) {
					if copied == total {
						fmt.Fprintf(stderr, "%s: %s %d/%d\n", name, table, copied, total)
					}
				}}
			rep, runErr := control.CopyConsoleDB(ctx, from, to, opts)
			out := copyReport{From: config.MaskURL(from), To: config.MaskURL(to), CopyReport: rep}
			if runErr != nil {
				out.Error = runErr.Error()
			}
			log.Info().Str("event", "console_db.copied").Str("from", out.From).Str("to", out.To).Bool("verified", rep.Verified).
				Int("tables", len(rep.Tables)).AnErr("error", runErr).Msg("console database copied")
			if asJSON {
				if err := writeJSON(stdout, out); err != nil {
					return cliFail(name, "write the report: %v", err)
				}
			} else if len(rep.Tables) > 0 {
				fmt.Fprintf(stdout, "%s: %s → %s\n", name, out.From, out.To)
				for _, t := range rep.Tables {
					mark := "verified"
					if !t.Verified {
						mark = fmt.Sprintf("DIFFERS (the target has %d rows)", t.TargetRows)
					}
					fmt.Fprintf(stdout, "  %-16s %8d rows  %s  %s\n", t.Table, t.Rows, t.SourceChecksum[:12], mark)
				}
				for t, n := range rep.LeftBehind {
					fmt.Fprintf(stdout, "  left behind: %s %d rows (local mode's)\n", t, n)
				}
			}
			if runErr != nil {
				return refused(name, runErr)
			}
			return nil
		},
	}
}
