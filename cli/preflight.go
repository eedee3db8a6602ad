package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v3"

	"plaita/config"
)

// preflight is the first thing every role does: load the configuration strictly, log every
// warning once, and refuse to go on (exit 2) when any value is rejected. Nothing in it opens a
// network connection.
func preflight(cmd *cli.Command, role config.Role, stderr io.Writer) (*config.Config, zerolog.Logger, error) {
	return preflightAs(cmd, role, string(role), zerolog.InfoLevel, stderr)
}

// preflightAs is preflight with the role tag of the log lines and the level of the
// config.effective line: commands that load a role's configuration without being that role
// (run, start, execution) tag their lines with their own name, and log the generations — which
// identify a fleet's messages — only at debug.
func preflightAs(cmd *cli.Command, role config.Role, tag string, effective zerolog.Level, stderr io.Writer) (*config.Config, zerolog.Logger, error) {
	format, err := parseLogFormat(flagValue(cmd, "log-format"))
	if err != nil {
		return nil, zerolog.Nop(), &exitError{code: ExitRejected, err: err}
	}
	// The logger needs the level the configuration names, so it is built after loading.
	cfg, loadErr := optionsOf(cmd).load(role, overrides(cmd, role))
	level := zerolog.InfoLevel
	if lvl, perr := zerolog.ParseLevel(config.LogLevel.In(cfg)); perr == nil {
		level = lvl
	}
	log := NewLogger(stderr, format, level)
	if tag != "" { // "" : the caller tags its lines itself (plaita dev, one tag per role it runs)
		log = log.With().Str("role", tag).Logger()
	}
	cfg.SetLogger(log)
	cfg.LogWarnings(log)
	if loadErr != nil {
		fmt.Fprintln(stderr, loadErr.Error())
		return nil, log, &exitError{code: ExitRejected, err: loadErr, printed: true}
	}
	if level <= effective {
		cfg.LogEffective(log)
	}
	return cfg, log, nil
}

// setFlag is a flag's value when it is given: to the command, or else before the command name
// (`plaita --log-level debug roles`: the logging flags go on either side).
func setFlag(cmd *cli.Command, name string) (string, bool) {
	if cmd.IsSet(name) {
		return cmd.String(name), true
	}
	if root := cmd.Root(); root != nil && root != cmd && root.IsSet(name) {
		return root.String(name), true
	}
	return "", false
}

// flagValue is setFlag's value, else the command's default.
func flagValue(cmd *cli.Command, name string) string {
	if v, ok := setFlag(cmd, name); ok {
		return v
	}
	return cmd.String(name)
}

// overrides collects the flags of cmd that override role's variables, keyed by variable name.
// --quiet stands for --log-level warn unless the level is given too.
func overrides(cmd *cli.Command, role config.Role) map[string]string {
	flags := map[string]string{}
	for _, f := range config.Flags(role) {
		if v, ok := setFlag(cmd, f.Name); ok {
			flags[f.Var] = v
		}
	}
	if cmd.Bool("quiet") || cmd.Root() != cmd && cmd.Root().Bool("quiet") {
		if _, explicit := flags["PLAITA_LOG_LEVEL"]; !explicit {
			flags["PLAITA_LOG_LEVEL"] = "warn"
		}
	}
	return flags
}

// checkLogFlags validates the logging flags of a command that loads no configuration, with the
// rules a role applies to them, so a script can pass the same flags to every command.
func checkLogFlags(cmd *cli.Command) error {
	if _, err := parseLogFormat(flagValue(cmd, "log-format")); err != nil {
		return &exitError{code: ExitRejected, err: err}
	}
	if level, ok := setFlag(cmd, "log-level"); ok {
		if _, err := config.ParseLogLevel(level); err != nil {
			return &exitError{code: ExitRejected, err: err}
		}
	}
	return nil
}

// LogFormat is how log lines are written.
type LogFormat string

const (
	LogJSON    LogFormat = "json"
	LogConsole LogFormat = "console"
	LogAuto    LogFormat = "auto"
)

func parseLogFormat(s string) (LogFormat, error) {
	switch f := LogFormat(strings.ToLower(strings.TrimSpace(s))); f {
	case LogJSON, LogConsole, LogAuto:
		return f, nil
	case "":
		return LogAuto, nil
	}
	return "", fmt.Errorf("--log-format %q: use json, console or auto", s)
}

// NewLogger returns the process logger: JSON lines by default, human output for a terminal.
func NewLogger(w io.Writer, format LogFormat, level zerolog.Level) zerolog.Logger {
	tty := isTerminal(w)
	if format == LogAuto {
		format = LogJSON
		if tty {
			format = LogConsole
		}
	}
	if format == LogConsole {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339, NoColor: !tty}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
