//go:build e2e

package e2e

import (
	"encoding/json"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// buildSettings reads the build information of the test binary with `go version -m`, an
// independent reader of what the binary must print.
func buildSettings(t *testing.T) (version string, settings map[string]string) {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", binary).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	settings = map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod":
			version = f[2]
		case len(f) >= 2 && f[0] == "build":
			if k, v, ok := strings.Cut(f[1], "="); ok {
				settings[k] = v
			}
		}
	}
	return version, settings
}

type versionOutput struct {
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	Modified   string `json:"modified"`
	Go         string `json:"go"`
	Engine     string `json:"engine"`
	TaskSchema int    `json:"task_schema_version"`
}

func TestVersion(t *testing.T) {
	t.Parallel()
	modVersion, settings := buildSettings(t)
	want := versionOutput{Version: modVersion, Commit: "unknown", Modified: "unknown", Go: runtime.Version(), Engine: "plaita-go/1", TaskSchema: 1}
	if want.Version == "(devel)" || want.Version == "" {
		want.Version = "devel"
	}
	if rev, ok := settings["vcs.revision"]; ok {
		want.Commit = rev
	}
	if mod, ok := settings["vcs.modified"]; ok {
		want.Modified = mod
	}

	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := run(t, nil, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		wantText := "plaita " + want.Version + "\n" +
			"commit:   " + want.Commit + "\n" +
			"modified: " + want.Modified + "\n" +
			"go:       " + want.Go + "\n" +
			"engine:   plaita-go/1\n" +
			"task schema version: 1\n"
		if r.stdout != wantText {
			t.Errorf("%v:\n%s\nwant:\n%s", args, r.stdout, wantText)
		}

		r = run(t, nil, append(args, "--json")...)
		if r.code != 0 {
			t.Fatalf("%v --json: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		var got versionOutput
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v --json is not JSON: %v\n%s", args, err, r.stdout)
		}
		if got != want {
			t.Errorf("%v --json: %+v, want %+v", args, got, want)
		}
	}

	// --json alone is not a request for the version, and the root takes no other flags.
	if r := run(t, nil, "--json"); r.code != 2 || !strings.Contains(r.stderr, "--json") {
		t.Errorf("--json alone: exit %d\n%s", r.code, r.stderr)
	}
	// doctor's own --json is untouched by the root's.
	if r := run(t, nil, "doctor", "--json", "--role", "delay"); r.code != 0 || !strings.Contains(r.stdout, `"schema": "plaita.doctor/v1"`) {
		t.Errorf("doctor --json: exit %d\n%s", r.code, r.stdout)
	}
}
