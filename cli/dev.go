package cli

import (
	"context"
	"io"
	"io/fs"
	"strings"

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
		usage := f.Usage
		if f.Name == "redis-url" {
			usage = "run every role on this Redis (it must answer), whatever keys it holds; without it, dev uses PLAITA_REDIS_URL or " +
				"REDIS_URL when set, else the Redis at redis://localhost:6379/0 only when that holds nothing but plaita's keys (overrides PLAITA_REDIS_URL)"
		}
		flags = append(flags, &cli.StringFlag{Name: f.Name, Usage: usage})
	}
	flags = append(flags, &cli.StringFlag{Name: "state-dir",
		Usage: "keep the state (the console database; in local mode the executions too) in this directory across restarts (default: in memory, gone when dev stops)"})
	return &cli.Command{
		Name:  string(config.RoleDev),
		Usage: helpUsage(spec.Summary, spec.Built),
		UsageText: "plaita dev [--state-dir DIR] [--redis-url URL] [--port PORT] [flags]\n\n" +
			"Runs " + devRuns() + " in one process on a Redis, or the console in local mode\n" +
			"(executions in this process). It uses the Redis it is given (--redis-url, PLAITA_REDIS_URL or REDIS_URL; one given\n" +
			"with --redis-url must answer), or the one answering at redis://localhost:6379/0 when that holds nothing but plaita's\n" +
			"keys; a Redis holding other keys is left untouched (its dev.mode line says so and how to choose). Seeds a demo tenant,\n" +
			"an admin (its password printed once) and the example flows, and prints the URL (the console on 127.0.0.1:8080;\n" +
			"--port, or PLAITA_CONSOLE_PORT, picks another). Not for production.",
		Flags: flags,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return cliUsage("dev", "takes no arguments")
			}
			cfg, log, err := preflightAs(cmd, config.RoleDev, "", zerolog.InfoLevel, stderr)
			if err != nil {
				return err
			}
			_, redisFlag := setFlag(cmd, "redis-url")
			if err := roles.RunDev(ctx, cfg, log, roles.DevOptions{StateDir: cmd.String("state-dir"), Flows: flows, Stdout: stdout,
				RedisFlag: redisFlag, Program: optionsOf(cmd).programName()}); err != nil {
				log.Error().Str("role", string(config.RoleDev)).Err(err).Str("event", "role.failed").Msg("stopped with an error")
				return &exitError{code: ExitFailure, err: err}
			}
			return nil
		},
	}
}

// devRuns names the roles plaita dev runs (the role table's rows marked Dev), the console first:
// "the console, worker, filter, schedule and delay".
func devRuns() string {
	names := []string{"the console"}
	for _, spec := range roles.Table() {
		if spec.Dev && spec.Role != config.RoleConsole {
			names = append(names, string(spec.Role))
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
