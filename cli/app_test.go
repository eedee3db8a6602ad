package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v3"

	"plaita/roles"
)

func TestExitCode(t *testing.T) {
	var buf bytes.Buffer
	if got := ExitCode(nil, &buf); got != 0 || buf.Len() != 0 {
		t.Errorf("nil: %d %q", got, buf.String())
	}
	printed := &exitError{code: ExitRejected, err: errors.New("already said"), printed: true}
	if got := ExitCode(fmt.Errorf("wrapped: %w", printed), &buf); got != ExitRejected || buf.Len() != 0 {
		t.Errorf("printed error: %d %q", got, buf.String())
	}
	if got := ExitCode(&exitError{code: ExitFailure, err: errors.New("boom")}, &buf); got != ExitFailure || buf.String() != "plaita: boom\n" {
		t.Errorf("unprinted error: %d %q", got, buf.String())
	}
	buf.Reset()
	if got := ExitCode(errors.New("flag provided but not defined: -x"), &buf); got != ExitRejected || !strings.Contains(buf.String(), "-x") {
		t.Errorf("usage error: %d %q", got, buf.String())
	}
}

func TestLogFormats(t *testing.T) {
	for in, want := range map[string]LogFormat{"": LogAuto, "JSON": LogJSON, " console ": LogConsole} {
		if got, err := parseLogFormat(in); err != nil || got != want {
			t.Errorf("parseLogFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := parseLogFormat("xml"); err == nil {
		t.Error("xml accepted")
	}
	var buf bytes.Buffer
	log := NewLogger(&buf, LogAuto, zerolog.InfoLevel)
	log.Info().Str("event", "x").Msg("m")
	if !strings.HasPrefix(buf.String(), `{"level":"info","event":"x"`) {
		t.Errorf("auto on a non-terminal must be JSON: %q", buf.String())
	}
	buf.Reset()
	log = NewLogger(&buf, LogConsole, zerolog.WarnLevel)
	log.Info().Msg("hidden")
	log.Warn().Str("event", "y").Msg("shown")
	if out := buf.String(); strings.Contains(out, "hidden") || !strings.Contains(out, "WRN shown event=y") {
		t.Errorf("console output: %q", out)
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "plaita", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}}
	got := versionFrom(stamped, true)
	if got.Version != "v1.2.3" || got.Commit != "0123abcd" || got.Modified != "true" || got.Go != "go1.26.8" {
		t.Errorf("stamped build: %+v", got)
	}
	// go build -buildvcs=false, or a build outside a repository: no VCS settings.
	got = versionFrom(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "plaita", Version: "(devel)"}}, true)
	if got.Version != "devel" || got.Commit != "unknown" || got.Modified != "unknown" || got.Go != "go1.26.8" {
		t.Errorf("unstamped build: %+v", got)
	}
	// No build information at all (a binary built without module support).
	got = versionFrom(nil, false)
	if got.Version != "devel" || got.Commit != "unknown" || got.Modified != "unknown" || got.Go == "" {
		t.Errorf("no build info: %+v", got)
	}
}

// TestEveryCommandTakesTheLoggingFlags walks the command tree: every command that does
// something (not help, not version) takes --log-level, --quiet and --log-format, so one set of
// flags fits every invocation.
func TestEveryCommandTakesTheLoggingFlags(t *testing.T) {
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := strings.TrimSpace(prefix + " " + c.Name)
			if c.Name == "help" || c.Name == "version" {
				continue
			}
			if len(c.Commands) > 0 {
				walk(name, c.Commands)
				continue
			}
			have := map[string]bool{}
			for _, f := range c.Flags {
				for _, n := range f.Names() {
					have[n] = true
				}
			}
			for _, want := range []string{"log-level", "quiet", "log-format"} {
				if !have[want] {
					t.Errorf("%s does not take --%s", name, want)
				}
			}
		}
	}
	app := App(io.Discard, io.Discard)
	walk("", app.Commands)
	if len(app.Commands) < 10 {
		t.Fatalf("only %d commands: the walk found nothing to check", len(app.Commands))
	}
}

// helpCommands returns the COMMANDS section of `plaita --help`, by command name.
func helpCommands(t *testing.T) map[string]string {
	t.Helper()
	var out bytes.Buffer
	if err := App(&out, io.Discard).Run(t.Context(), []string{"plaita", "--help"}); err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(out.String(), "COMMANDS:\n")
	if !ok {
		t.Fatalf("no COMMANDS section:\n%s", out.String())
	}
	section, _, _ = strings.Cut(section, "\n\n")
	lines := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			lines[strings.TrimSuffix(f[0], ",")] = line
		}
	}
	return lines
}

// TestHelpMarksWhatIsNotBuilt: --help says which roles and tools are not built, from the
// same table `plaita roles` prints.
func TestHelpMarksWhatIsNotBuilt(t *testing.T) {
	lines := helpCommands(t)
	type row struct {
		name, summary string
		built         bool
	}
	var rows []row
	for _, s := range roles.Table() {
		rows = append(rows, row{string(s.Role), s.Summary, s.Built})
	}
	for _, tool := range roles.Tools() {
		rows = append(rows, row{tool.Name, tool.Summary, tool.Built})
	}
	builtSeen := false
	for _, r := range rows {
		line, ok := lines[r.name]
		if !ok {
			t.Errorf("%s is not in --help:\n%v", r.name, lines)
			continue
		}
		if !strings.Contains(line, r.summary) {
			t.Errorf("%s: help line %q does not show the table's summary %q", r.name, line, r.summary)
		}
		if got := strings.Contains(line, "not built yet"); got != !r.built {
			t.Errorf("%s (built %v): help line %q", r.name, r.built, line)
		}
		builtSeen = builtSeen || r.built
	}
	if !builtSeen {
		t.Error("nothing is built: the worker is")
	}
	for _, name := range []string{"reap", "reindex", "dlq", "drain-list", "migrate"} {
		found := false
		for _, tool := range roles.Tools() {
			found = found || tool.Name == name
		}
		if !found {
			t.Errorf("ops command %s is not in roles.Tools()", name)
		}
	}
	// Commands that are neither roles nor tools carry no mark.
	for _, name := range []string{"doctor", "run", "start", "execution", "roles", "version"} {
		if strings.Contains(lines[name], "not built") {
			t.Errorf("%s is marked: %q", name, lines[name])
		}
	}
}

func TestRolesPrintsTheTools(t *testing.T) {
	var out bytes.Buffer
	if err := roles.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, tool := range roles.Tools() {
		status := "built"
		if !tool.Built {
			status = "not built yet"
		}
		found := false
		for _, line := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == tool.Name && strings.Contains(line, status) && strings.Contains(line, tool.Summary) {
				found = true
			}
		}
		if !found {
			t.Errorf("plaita roles does not list tool %s (%s):\n%s", tool.Name, status, out.String())
		}
	}
}
