package cli

import (
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
// configuration, the same warnings and the same exit 2, its lines tagged role=run and
// config.effective at debug (one local run prints its result on stdout, not start-up chatter).
func runPreflight(cmd *cli.Command, stderr io.Writer) (*config.Config, zerolog.Logger, error) {
	return preflightAs(cmd, config.RoleWorker, runRoleTag, zerolog.DebugLevel, stderr)
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
