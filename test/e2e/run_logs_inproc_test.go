//go:build !e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRunStartupLogs: `plaita run` prints its result and the flow's own log lines, not the
// worker's start-up lines; they are debug detail of the run, tagged role=run.
func TestRunStartupLogs(t *testing.T) {
	t.Parallel()
	flow := repoFlow(t, "hello.json")
	r := run(t, nil, "run", flow, "--state-dir", t.TempDir(), "--log-format", "json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	// Only the flow's own log node speaks at the default level.
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.Contains(line, `"event":"flow.log"`) {
			t.Fatalf("run at the default level logged more than the flow's log node:\n%s", r.stderr)
		}
	}

	r = run(t, nil, "run", flow, "--state-dir", t.TempDir(), "--log-format", "json", "--log-level", "debug")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	events := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var l struct {
			Level string `json:"level"`
			Role  string `json:"role"`
			Event string `json:"event"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		if l.Role != "run" {
			t.Errorf("log line tagged role=%q, want run: %s", l.Role, line)
		}
		events[l.Event] = true
	}
	for _, e := range []string{"config.effective", "writefile.jail", "code_node.registered"} {
		if !events[e] {
			t.Errorf("--log-level debug: no %s line:\n%s", e, r.stderr)
		}
	}
}
