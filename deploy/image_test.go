package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// repo is the repository root, relative to this package's directory (go test runs there).
const repo = ".."

func readRepoFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dockerfile parses a Dockerfile as `docker build` does (BuildKit's parser and its instruction
// parser, with its linter on every rule): the stages, and every parse or lint warning.
func dockerfile(src []byte) ([]instructions.Stage, []string, error) {
	res, err := parser.Parse(bytes.NewReader(src))
	if err != nil {
		return nil, nil, err
	}
	var warnings []string
	for _, w := range res.Warnings {
		warnings = append(warnings, w.Short)
	}
	lint := linter.New(&linter.Config{ExperimentalAll: true, Warn: func(rule, _, _, msg string, loc []parser.Range) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		warnings = append(warnings, fmt.Sprintf("line %d: %s: %s", line, rule, msg))
	}})
	stages, _, err := instructions.Parse(res.AST, lint)
	return stages, warnings, err
}

// imageRules are the rules the runtime image (the last stage) must keep, each a problem when
// broken (docs/operations.md "Containers"):
//   - it runs as a non-root user, set before its entry point;
//   - it has a HEALTHCHECK that runs `plaita probe` (the role's /readyz, not ready while it drains),
//     and the metrics port the probe asks by default is set;
//   - it installs python3 and nodejs: the code node's subprocess backend runs them;
//   - its default command names no role (a container runs the role its command names);
//   - SIGTERM reaches plaita through tini (the drain), and the entry point gives every container
//     its own instance id.
func imageRules(stages []instructions.Stage) []string {
	if len(stages) == 0 {
		return []string{"no stage"}
	}
	final := stages[len(stages)-1]
	var problems []string
	user, health, cmd, entry := "", []string(nil), []string(nil), []string(nil)
	env := map[string]string{}
	var installs []string
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.HealthCheckCommand:
			health = c.Health.Test
		case *instructions.CmdCommand:
			cmd = c.CmdLine
		case *instructions.EntrypointCommand:
			entry = c.CmdLine
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				env[kv.Key] = kv.Value
			}
		case *instructions.RunCommand:
			line := strings.Join(c.CmdLine, " ")
			if strings.Contains(line, "apt-get install") {
				installs = append(installs, strings.Fields(line)...)
			}
		}
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "root" || name == "0" {
		problems = append(problems, fmt.Sprintf("the image runs as %q: set a non-root USER", user))
	}
	if len(health) < 3 || health[0] != "CMD" || health[1] != "plaita" || health[2] != "probe" {
		problems = append(problems, fmt.Sprintf("HEALTHCHECK %q: want CMD plaita probe …", health))
	}
	if env["PLAITA_METRICS_PORT"] == "" || env["PLAITA_METRICS_PORT"] == "0" {
		problems = append(problems, "PLAITA_METRICS_PORT is not set: `plaita probe` has no /readyz to ask")
	}
	for _, pkg := range []string{"python3", "nodejs", "tini"} {
		if !slices.Contains(installs, pkg) {
			problems = append(problems, pkg+" is not installed in the runtime image")
		}
	}
	roles := []string{"worker", "console", "filter", "schedule", "delay", "dev"}
	if len(cmd) == 0 || slices.Contains(roles, cmd[0]) {
		problems = append(problems, fmt.Sprintf("CMD %q: the default command must name no role", cmd))
	}
	if len(entry) < 3 || entry[0] != "/usr/bin/tini" || entry[len(entry)-1] != "/usr/local/bin/plaita-entrypoint" {
		problems = append(problems, fmt.Sprintf("ENTRYPOINT %q: want tini, then plaita-entrypoint", entry))
	}
	return problems
}

func TestDockerfileFollowsTheImageRules(t *testing.T) {
	stages, warnings, err := dockerfile(readRepoFile(t, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		t.Errorf("BuildKit: %s", w)
	}
	if len(stages) != 2 || stages[0].Name != "build" {
		t.Errorf("want a build stage and a runtime stage, got %d stage(s)", len(stages))
	}
	for _, p := range imageRules(stages) {
		t.Error(p)
	}
}

// Each rule catches the image that breaks it (the rules above can fail).
func TestImageRulesCatchBrokenImages(t *testing.T) {
	good := string(readRepoFile(t, "Dockerfile"))
	cases := []struct{ name, from, to, want string }{
		{"root", "USER 10001:10001", "USER root", "non-root USER"},
		{"no health check", "HEALTHCHECK --interval", "# HEALTHCHECK --interval", "HEALTHCHECK"},
		{"no node", "python3 nodejs tini", "python3 tini", "nodejs is not installed"},
		{"the console by default", `CMD ["roles"]`, `CMD ["console"]`, "must name no role"},
		{"no metrics port", "PLAITA_METRICS_PORT=9100", "PLAITA_METRICS_OFF=1", "PLAITA_METRICS_PORT"},
	}
	for _, tc := range cases {
		if !strings.Contains(good, tc.from) {
			t.Fatalf("%s: the Dockerfile has no %q to change", tc.name, tc.from)
		}
		stages, _, err := dockerfile([]byte(strings.Replace(good, tc.from, tc.to, 1)))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		problems := strings.Join(imageRules(stages), "\n")
		if !strings.Contains(problems, tc.want) {
			t.Errorf("%s: no problem %q in %q", tc.name, tc.want, problems)
		}
	}
	if _, warnings, _ := dockerfile([]byte("from debian AS Build\nCMD echo hi\n")); len(warnings) == 0 {
		t.Error("BuildKit's linter found nothing wrong with a lower-case FROM, a stage name in capitals and a shell-form CMD")
	}
}

// .dockerignore leaves in every file the build uses: the Go files and embedded files of every
// package of the binary, go.mod and go.sum, and each path a COPY of the build context names.
func TestDockerignoreKeepsWhatTheBuildUses(t *testing.T) {
	patterns, err := ignorefile.ReadAll(bytes.NewReader(readRepoFile(t, ".dockerignore")))
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	need := []string{"go.mod", "go.sum"}
	out, err := exec.Command("go", "list", "-deps", "-json=Dir,Module,GoFiles,EmbedFiles", "..").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p struct {
			Dir                 string
			Module              *struct{ Path string }
			GoFiles, EmbedFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || p.Module.Path != "plaita" {
			continue
		}
		rel, _ := filepath.Rel(root, p.Dir)
		for _, f := range append(p.GoFiles, p.EmbedFiles...) {
			need = append(need, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	stages, _, err := dockerfile(readRepoFile(t, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stages {
		for _, c := range s.Commands {
			if cp, ok := c.(*instructions.CopyCommand); ok && cp.From == "" {
				for _, src := range cp.SourcePaths {
					matches, _ := filepath.Glob(filepath.Join(repo, src))
					if len(matches) == 0 {
						t.Errorf("COPY %s: no such file in the repository", src)
					}
					for _, m := range matches {
						rel, _ := filepath.Rel(repo, m)
						need = append(need, filepath.ToSlash(rel))
					}
				}
			}
		}
	}
	if len(need) < 100 {
		t.Fatalf("only %d files to check: the package listing failed", len(need))
	}
	for _, f := range need {
		if f == "." {
			continue
		}
		if excluded, err := pm.MatchesOrParentMatches(f); err != nil || excluded {
			t.Errorf("%s is left out of the build context by .dockerignore (%v)", f, err)
		}
	}
	for _, f := range []string{".git/HEAD", "docs/operations.md", "bench/peers/main.go", "engine/branches_test.go", "test/stack/compose_test.go"} {
		if excluded, _ := pm.MatchesOrParentMatches(f); !excluded {
			t.Errorf("%s reaches the build context", f)
		}
	}
}

// The entry point gives each role's container an instance id of its own (the pid is 1 in every
// container), keeps one that is set, even empty, and leaves the tools alone.
func TestEntrypointGivesEachContainerItsInstanceID(t *testing.T) {
	stub := t.TempDir()
	script := "#!/bin/sh\necho \"id=${PLAITA_INSTANCE_ID-unset} args=$*\"\n"
	if err := os.WriteFile(filepath.Join(stub, "plaita"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	host, err := exec.Command("hostname").Output()
	if err != nil {
		t.Skipf("no hostname command here: %v", err)
	}
	run := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command("sh", append([]string{filepath.Join(repo, "deploy", "docker-entrypoint.sh")}, args...)...)
		cmd.Env = append([]string{"PATH=" + stub + ":/usr/bin:/bin"}, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	h := strings.TrimSpace(string(host))
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"worker", "--concurrency", "4"}, "id=worker-" + h + " args=worker --concurrency 4"},
		{nil, []string{"console"}, "id=console-" + h + " args=console"},
		{[]string{"PLAITA_INSTANCE_ID=w-7"}, []string{"worker"}, "id=w-7 args=worker"},
		{[]string{"PLAITA_INSTANCE_ID="}, []string{"worker"}, "id= args=worker"},
		{nil, []string{"flow", "publish", "x.json"}, "id=unset args=flow publish x.json"},
	}
	for _, tc := range cases {
		if got := run(tc.env, tc.args...); got != tc.want {
			t.Errorf("%v %v: %q, want %q", tc.env, tc.args, got, tc.want)
		}
	}
}
