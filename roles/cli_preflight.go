package roles

import (
	"fmt"
	"io"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v3"

	"plaita/config"
)

// runRoleTag tags the log lines of `plaita run`. It loads the worker's configuration (it runs
// flows as a worker would) but is not a worker: its lines must not pass for a worker's in a
// log search for role=worker.
const runRoleTag = "run"

// runPreflight is preflight for `plaita run`: the same strict load of the worker's
// configuration, the same warnings and the same exit 2, with two differences. The lines are
// tagged role=run, and config.effective is logged at debug: the config generations identify a
// fleet's messages, and one local run prints its result on stdout, not start-up chatter.
func runPreflight(cmd *cli.Command, stderr io.Writer) (*config.Config, zerolog.Logger, error) {
	flags := map[string]string{}
	for _, f := range config.Flags(config.RoleWorker) {
		if cmd.IsSet(f.Name) {
			flags[f.Var] = cmd.String(f.Name)
		}
	}
	if cmd.Bool("quiet") {
		if _, explicit := flags["PLAITA_LOG_LEVEL"]; !explicit {
			flags["PLAITA_LOG_LEVEL"] = "warn"
		}
	}
	format, err := parseLogFormat(cmd.String("log-format"))
	if err != nil {
		return nil, zerolog.Nop(), &exitError{code: ExitRejected, err: err}
	}
	cfg, loadErr := config.Load(config.RoleWorker, true, config.WithFlags(flags))
	level := zerolog.InfoLevel
	if lvl, perr := zerolog.ParseLevel(config.LogLevel.In(cfg)); perr == nil {
		level = lvl
	}
	log := NewLogger(stderr, format, level).With().Str("role", runRoleTag).Logger()
	cfg.SetLogger(log)
	cfg.LogWarnings(log)
	if loadErr != nil {
		fmt.Fprintln(stderr, loadErr.Error())
		return nil, log, &exitError{code: ExitRejected, err: loadErr, printed: true}
	}
	g := cfg.Generations()
	log.Debug().Str("event", "config.effective").Str("config_family", g.Family).Str("config_generation", g.Config).
		Str("budget_generation", g.Budget).Int("warnings", len(cfg.Warnings())).Msg("configuration loaded")
	return cfg, log, nil
}

// nodeSetupLog is the logger node types are registered with by commands that do not run a
// worker (start, execution, run). Registration logs the writefile jail and the code backends
// at info: a worker's gates, worth a line when a worker starts, noise on every CLI call.
// Here they are shown from --log-level debug; warnings (an unrestricted jail, a sandbox
// fallback) still show.
func nodeSetupLog(log zerolog.Logger) zerolog.Logger {
	if log.GetLevel() <= zerolog.DebugLevel {
		return log
	}
	return log.Level(max(log.GetLevel(), zerolog.WarnLevel))
}
