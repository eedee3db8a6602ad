package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"plaita/control"
	"plaita/roles"
)

// runCLI runs the command tree as main does: the exit status and what was printed.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := App(&stdout, &stderr).Run(t.Context(), append([]string{"plaita"}, args...))
	return ExitCode(err, &stderr), stdout.String(), stderr.String()
}

// migrateJSON runs a migrate subcommand with --json and decodes what it printed.
func migrateJSON[T any](t *testing.T, want int, args ...string) T {
	t.Helper()
	code, out, errOut := runCLI(t, append(args, "--json", "--log-format", "json")...)
	if code != want {
		t.Fatalf("%v: exit %d, want %d\nstdout %s\nstderr %s", args, code, want, out, errOut)
	}
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return v
}

func TestMigrateCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.db")
	t.Setenv("PLAITA_CONSOLE_DB_URL", "sqlite:///"+path)
	latest := control.LatestMigration()

	// Before the console ever ran: version reports the file missing, and creates nothing.
	rep := migrateJSON[versionReport](t, 0, "migrate", "version")
	if rep.Status != "missing" || rep.Exists || rep.Database != path || len(rep.Pending) != int(latest) {
		t.Fatalf("missing: %+v", rep)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("version created the file: %v", err)
	}
	if code, _, errOut := runCLI(t, "migrate", "down", "--log-format", "json"); code != 1 || !strings.Contains(errOut, "nothing to roll back") {
		t.Errorf("down without a database: exit %d, %s", code, errOut)
	}

	res := migrateJSON[migrateResult](t, 0, "migrate", "up")
	if res.Database != path || res.From.Version != 0 || res.To.Version != latest || len(res.Applied) != int(latest) || res.Action != "up" {
		t.Fatalf("up: %+v", res)
	}
	if rep := migrateJSON[versionReport](t, 0, "migrate", "version"); rep.Status != "current" || rep.Version != latest || !rep.Exists {
		t.Errorf("current: %+v", rep)
	}
	res = migrateJSON[migrateResult](t, 0, "migrate", "up")
	if len(res.Applied) != 0 || res.To.Version != latest {
		t.Errorf("up again: %+v", res)
	}
	// down goes one step; version then lists what up would apply.
	res = migrateJSON[migrateResult](t, 0, "migrate", "down")
	if res.To.Version != latest-1 || len(res.Applied) != 1 || res.Applied[0].Direction != "down" {
		t.Fatalf("down: %+v", res)
	}
	rep = migrateJSON[versionReport](t, 0, "migrate", "version")
	if rep.Status != "behind" || len(rep.Pending) != 1 || rep.Pending[0].Version != latest {
		t.Errorf("behind: %+v", rep)
	}
	// Text output names what ran.
	code, out, _ := runCLI(t, "migrate", "up", "--log-format", "json")
	ms := control.Migrations()
	newest := fmt.Sprintf("up %04d %s", ms[len(ms)-1].Version, ms[len(ms)-1].Name)
	if code != 0 || !strings.Contains(out, "migrate up: "+path) || !strings.Contains(out, newest) {
		t.Errorf("up (text): exit %d\n%s", code, out)
	}
	// --all goes to zero; --to goes where it says.
	if res := migrateJSON[migrateResult](t, 0, "migrate", "down", "--all"); res.To.Version != 0 || len(res.Applied) != int(latest) {
		t.Errorf("down --all: %+v", res)
	}
	if res := migrateJSON[migrateResult](t, 0, "migrate", "up", "--to", "1"); res.To.Version != 1 || len(res.Applied) != 1 {
		t.Errorf("up --to 1: %+v", res)
	}
	if res := migrateJSON[migrateResult](t, 0, "migrate", "down", "--to", "0"); res.To.Version != 0 {
		t.Errorf("down --to 0: %+v", res)
	}

	// Bad usage: exit 2, nothing done.
	for _, args := range [][]string{
		{"migrate"}, {"migrate", "sideways"}, {"migrate", "up", "extra"}, {"migrate", "up", "--to", "x"}, {"migrate", "up", "--to", "-1"},
		{"migrate", "up", "--to", "99"}, {"migrate", "down", "--to", "1", "--all"}, {"migrate", "down"},
	} {
		if code, _, errOut := runCLI(t, append(args, "--log-format", "json")...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, errOut)
		}
	}
	// At version 0 nothing is left but the version table: a usable database up makes again.
	if rep := migrateJSON[versionReport](t, 0, "migrate", "version"); rep.Version != 0 || rep.Status != "behind" || len(rep.Pending) != int(latest) {
		t.Errorf("after the refusals: %+v", rep)
	}
}

// A file that is not a database, a rejected configuration: failures with their exit status.
func TestMigrateCommandFailures(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a database\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PLAITA_CONSOLE_DB_URL", "sqlite:///"+junk)
	for _, sub := range []string{"up", "version"} {
		if code, _, errOut := runCLI(t, "migrate", sub, "--log-format", "json"); code != 1 || !strings.Contains(errOut, "migrate "+sub) {
			t.Errorf("%s over a file that is not a database: exit %d\n%s", sub, code, errOut)
		}
	}
	t.Setenv("PLAITA_CONSOLE_DB_URL", "sqlite:///"+filepath.Join(dir, "missing", "console.db"))
	if code, _, errOut := runCLI(t, "migrate", "up", "--log-format", "json"); code != 2 || !strings.Contains(errOut, "does not exist") {
		t.Errorf("up in a missing directory: exit %d\n%s", code, errOut)
	}
	t.Setenv("PLAITA_CONSOLE_DB_URL", "mysql://db/console")
	if code, _, errOut := runCLI(t, "migrate", "up", "--log-format", "json"); code != 2 || !strings.Contains(errOut, "PLAITA_CONSOLE_DB_URL") {
		t.Errorf("up with a rejected URL: exit %d\n%s", code, errOut)
	}
}

// The tool table and the command tree agree: a tool marked built has its own command, and a
// tool with a command is marked built.
func TestBuiltToolsHaveCommands(t *testing.T) {
	for _, tool := range roles.Tools() {
		if _, ok := toolCommand(tool.Name); ok != tool.Built {
			t.Errorf("%s: built %v, has a command %v", tool.Name, tool.Built, ok)
		}
	}
}
