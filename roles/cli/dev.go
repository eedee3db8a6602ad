package cli

import (
	"context"
	"io"
	"io/fs"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/roles"
)

// devCommand runs plaita dev: every role in one process, for a laptop (roles/dev.go, docs/dev.md).
func devCommand(stdout, stderr io.Writer, flows fs.FS) *cli.Command {
	spec := roles.Lookup(config.RoleDev)
	flags := logFlags()
	for _, f := range config.Flags(config.RoleDev) {
		flags = append(flags, &cli.StringFlag{Name: f.Name, Usage: f.Usage})
	}
	flags = append(flags, &cli.StringFlag{Name: "state-dir",
		Usage: "keep the state (the console database; in local mode the executions too) in this directory across restarts (default: in memory, gone when dev stops)"})
	return &cli.Command{
		Name:  string(config.RoleDev),
		Usage: helpUsage(spec.Summary, spec.Built),
		UsageText: "plaita dev [--state-dir DIR] [flags]\n\n" +
			"Runs the console, worker, filter, schedule and delay in one process on the Redis at PLAITA_REDIS_URL, or, when none\n" +
			"answers there, the console in local mode (executions in this process). Seeds a demo tenant, an admin (its password\n" +
			"printed once) and the example flows, and prints the URL. Not for production.",
		Flags: flags,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return cliUsage("dev", "takes no arguments")
			}
			cfg, log, err := preflightAs(cmd, config.RoleDev, "", zerolog.InfoLevel, stderr)
			if err != nil {
				return err
			}
			if err := roles.RunDev(ctx, cfg, log, roles.DevOptions{StateDir: cmd.String("state-dir"), Flows: flows, Stdout: stdout}); err != nil {
				log.Error().Str("role", string(config.RoleDev)).Err(err).Str("event", "role.failed").Msg("stopped with an error")
				return &exitError{code: ExitFailure, err: err}
			}
			return nil
		},
	}
}
