//go:build e2e

package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// What a new user trips over in the first hour, through the binary: commands printed the way
// they can be run, a queued execution that looked missing, events that vanished without a word,
// uneven flags, a bench that wrote into the live key space, expression errors in Go's words,
// /metrics without types.

// The commands plaita prints can be run as printed: `plaita …` when that is the binary on PATH,
// the binary's own path when it is not (once always `plaita`, "command not found").
func TestNewcomerPrintedCommandsNameTheProgramAsRun(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	flow := repoFlow(t, "expense-approval.json")
	approve := regexp.MustCompile(`(?m)^    (.*) run .* --resume .* --type approval`)

	onPath := run(t, nil, "run", flow, "--state-dir", stateDir, "--quiet")
	if m := approve.FindStringSubmatch(onPath.stdout); m == nil || m[1] != "plaita" {
		t.Fatalf("binary on PATH: the approval command starts with %q, want plaita\n%s", m, onPath.stdout)
	}
	offPath := run(t, map[string]string{"PATH": os.Getenv("PATH")}, "run", flow, "--state-dir", stateDir, "--quiet")
	m := approve.FindStringSubmatch(offPath.stdout)
	if m == nil || m[1] != binary {
		t.Fatalf("binary not on PATH: the approval command starts with %q, want %s\n%s", m, binary, offPath.stdout)
	}
	// As printed, it runs.
	cmd, ok := hintCommand(t, strings.ReplaceAll(offPath.stdout, binary, "plaita"), "approve with")
	if !ok {
		t.Fatalf("no approval command:\n%s", offPath.stdout)
	}
	if r := run(t, map[string]string{"PATH": os.Getenv("PATH")}, append(cmd, "--quiet")...); r.code != 0 || !strings.Contains(r.stdout, ": completed") {
		t.Fatalf("the printed command: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Every role's /metrics carries # TYPE lines (promtool checks the rest in .ci/run).
func TestNewcomerMetricsCarryTypes(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	for _, role := range []string{"worker", "filter", "schedule", "delay"} {
		p := s.start(role, nil)
		var body string
		waitFor(t, role+" serves /metrics", 60*time.Second, func() bool {
			var code int
			code, body = p.get("/metrics")
			return code == 200
		}, s.procs...)
		if !strings.Contains(body, "# TYPE ") || strings.Contains(body, "go_cgo_calls_count") {
			t.Errorf("%s's /metrics: no # TYPE lines, or a series named against the conventions:\n%.400s", role, body)
		}
	}
}

// The README's roles table and `plaita roles` say the same of what each role needs.
func TestNewcomerReadmeRolesTableMatchesTheBinary(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(repoRoot + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "roles")
	// The table rows: | `plaita ROLE ...` | what | needs |
	row := regexp.MustCompile("(?m)^\\| `plaita (worker|console|filter|schedule|delay|dev)\\b[^|]*\\|[^|]*\\| ([^|]+) \\|$")
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		got[m[1]] = strings.TrimSpace(m[2])
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		want, ok := got[f[0]]
		if !ok {
			continue
		}
		if !strings.Contains(line, want) {
			t.Errorf("role %s: README says it needs %q; plaita roles says\n%s", f[0], want, line)
		}
	}
	if len(got) < 5 {
		t.Fatalf("read %d role rows from the README table", len(got))
	}
}
