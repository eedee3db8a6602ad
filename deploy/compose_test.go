package deploy

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads a compose file as `docker compose config` does — compose-go, the reference
// implementation of the Compose specification: YAML anchors and merges, ${VAR:-default}
// interpolation from env, and validation against the specification's JSON schema.
func loadCompose(t *testing.T, src []byte, env map[string]string) (*types.Project, error) {
	t.Helper()
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  repo,
		ConfigFiles: []types.ConfigFile{{Filename: "docker-compose.yml", Content: src}},
		Environment: env,
	}, func(o *loader.Options) { o.SetProjectName("plaita", true) })
}

// plaitaRoles are the compose services that run a long-lived plaita role.
var plaitaRoles = []string{"console", "worker", "filter", "schedule", "delay"}

// composeRules are the stack's rules (docs/operations.md "Containers"), each a problem when
// broken.
func composeRules(p *types.Project) []string {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	for _, name := range append([]string{"redis", "seed"}, plaitaRoles...) {
		if _, ok := p.Services[name]; !ok {
			bad("no service %s", name)
		}
	}
	if len(problems) > 0 {
		return problems
	}
	for _, name := range plaitaRoles {
		s := p.Services[name]
		if len(s.Command) == 0 || s.Command[0] != name {
			bad("%s: command %q does not run the role", name, s.Command)
		}
		port := env(s, "PLAITA_METRICS_PORT")
		if port == "" || port == "0" {
			bad("%s: PLAITA_METRICS_PORT is not set: no /readyz", name)
		}
		if h := s.HealthCheck; h == nil || h.Disable || !strings.Contains(strings.Join(h.Test, " "), "127.0.0.1:"+port+"/readyz") {
			bad("%s: the health check does not ask /readyz on port %s: %+v", name, port, h)
		}
		if c := s.DependsOn["redis"]; c.Condition != types.ServiceConditionHealthy {
			bad("%s: does not wait for a healthy Redis", name)
		}
		switch policy, tries, _ := strings.Cut(s.Restart, ":"); {
		case policy != "on-failure" || tries == "":
			bad("%s: restart %q: a role that fails at start must not be restarted for ever (on-failure:N)", name, s.Restart)
		default:
			if n, err := strconv.Atoi(tries); err != nil || n < 1 || n > 10 {
				bad("%s: restart %q: at most 10 tries", name, s.Restart)
			}
		}
		if s.StopGracePeriod == nil {
			bad("%s: no stop_grace_period (the default 10 s cuts a drain short)", name)
		}
	}
	// One build of the image for the whole stack: every plaita service runs plaita:dev, one builds
	// it, none pulls it (a `build:` on each is one concurrent build per service).
	var builders []string
	for _, name := range append([]string{"seed"}, plaitaRoles...) {
		s := p.Services[name]
		if s.Image != "plaita:dev" {
			bad("%s: image %q, not plaita:dev", name, s.Image)
		}
		if s.Build != nil {
			builders = append(builders, name)
		}
		if s.PullPolicy != types.PullPolicyNever {
			bad("%s: pull_policy %q: plaita:dev is built here, never pulled", name, s.PullPolicy)
		}
	}
	if len(builders) != 1 {
		bad("services that build plaita:dev: %q, want exactly one", builders)
	}
	w := p.Services["worker"]
	if !strings.Contains(strings.Join(w.Command, " "), "--concurrency 4") {
		bad("worker: command %q has no --concurrency 4", w.Command)
	}
	drain, err := strconv.ParseFloat(env(w, "PLAITA_WORKER_DRAIN_TIMEOUT"), 64)
	if err != nil {
		bad("worker: PLAITA_WORKER_DRAIN_TIMEOUT is not set explicitly: %v", err)
	} else if grace := time.Duration(*w.StopGracePeriod); grace < time.Duration(drain*float64(time.Second))+10*time.Second {
		bad("worker: stop_grace_period %s is not above PLAITA_WORKER_DRAIN_TIMEOUT %gs + 10 s", grace, drain)
	}
	c := p.Services["console"]
	if env(c, "PLAITA_CONSOLE_HOST") != "0.0.0.0" {
		bad("console: PLAITA_CONSOLE_HOST must be set explicitly to 0.0.0.0 (the image hard-codes no host)")
	}
	if u, err := url.Parse(env(c, "PLAITA_CONSOLE_DB_URL")); err != nil || !mounted(c, path.Dir(u.Path)) {
		bad("console: the database %q is not on a volume", env(c, "PLAITA_CONSOLE_DB_URL"))
	}
	if env(c, "PLAITA_CONSOLE_ADMIN_PASSWORD") == "" {
		bad("console: no admin password: nobody can log in to the demo")
	}
	seed := p.Services["seed"]
	if line := strings.Join(append(append([]string{}, seed.Entrypoint...), seed.Command...), " "); !strings.Contains(line, "plaita flow publish") ||
		!strings.Contains(line, "/usr/share/plaita/flows/") {
		bad("seed: %q does not publish the image's demo flows", line)
	}
	if c := p.Services["console"].DependsOn["seed"]; c.Condition != types.ServiceConditionCompletedSuccessfully {
		bad("console: does not wait for the seed to complete: `docker compose up --wait` would fail on the seed's exit")
	}
	if seed.Restart != "no" && seed.Restart != "" {
		bad("seed: restart %q: it runs once", seed.Restart)
	}
	return problems
}

func env(s types.ServiceConfig, name string) string {
	if v := s.Environment[name]; v != nil {
		return *v
	}
	return ""
}

// mounted reports whether dir is a volume's target in s.
func mounted(s types.ServiceConfig, dir string) bool {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeVolume && path.Clean(v.Target) == path.Clean(dir) {
			return true
		}
	}
	return false
}

func TestComposeFileIsValidAndFollowsTheStackRules(t *testing.T) {
	p, err := loadCompose(t, readRepoFile(t, "docker-compose.yml"), map[string]string{})
	if err != nil {
		t.Fatalf("the Compose specification refuses docker-compose.yml: %v", err)
	}
	for _, problem := range composeRules(p) {
		t.Error(problem)
	}
	if got := env(p.Services["console"], "PLAITA_CONSOLE_ADMIN_PASSWORD"); got != "plaita-demo" {
		t.Errorf("the demo's default admin password is %q, want the documented plaita-demo", got)
	}
	// The operator's own password wins over the default.
	p, err = loadCompose(t, readRepoFile(t, "docker-compose.yml"), map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": "s3cret-pass"})
	if err != nil {
		t.Fatal(err)
	}
	if got := env(p.Services["console"], "PLAITA_CONSOLE_ADMIN_PASSWORD"); got != "s3cret-pass" {
		t.Errorf("PLAITA_CONSOLE_ADMIN_PASSWORD from the environment: %q", got)
	}
	// The image is the one the Dockerfile checks above describe, built from the repository's root.
	if b := p.Services["console"].Build; b == nil || b.Dockerfile != "Dockerfile" || b.Context != repo {
		t.Errorf("console: build %+v, want the repository's Dockerfile", b)
	}
}

// The schema check and the rules both catch a broken file.
func TestComposeChecksCatchBrokenFiles(t *testing.T) {
	good := string(readRepoFile(t, "docker-compose.yml"))
	schema := []struct{ name, from, to string }{
		{"a misspelt key", "stop_grace_period: 45s", "stop_grace_periods: 45s"},
		{"a grace period that is no duration", "stop_grace_period: 45s", "stop_grace_period: [45]"},
		{"a health check without its test list", `test: ["CMD", "plaita", "probe"`, `test: {cmd: "plaita"}, x: ["CMD", "plaita", "probe"`},
	}
	for _, tc := range schema {
		if !strings.Contains(good, tc.from) {
			t.Fatalf("%s: no %q in the file", tc.name, tc.from)
		}
		if _, err := loadCompose(t, []byte(strings.Replace(good, tc.from, tc.to, 1)), nil); err == nil {
			t.Errorf("%s: the loader accepted it", tc.name)
		}
	}
	rules := []struct{ name, from, to, want string }{
		{"a short grace", "stop_grace_period: 45s", "stop_grace_period: 31s", "not above PLAITA_WORKER_DRAIN_TIMEOUT"},
		{"restarts for ever", "restart: on-failure:5", "restart: unless-stopped", "must not be restarted for ever"},
		{"no host", "PLAITA_CONSOLE_HOST: 0.0.0.0", "PLAITA_CONSOLE_HOSTS: 0.0.0.0", "PLAITA_CONSOLE_HOST must be set"},
		{"the database off the volume", "- console-data:/data", "- console-data:/elsewhere", "is not on a volume"},
		{"a second build", "command: [\"filter\"]", "command: [\"filter\"]\n    build: .", "want exactly one"},
		{"no build", "    build: .\n", "", "want exactly one"},
		{"a pulled image", "  pull_policy: never\n", "", "never pulled"},
		{"no dependant of the seed", "condition: service_completed_successfully", "condition: service_started", "does not wait for the seed"},
	}
	for _, tc := range rules {
		p, err := loadCompose(t, []byte(strings.Replace(good, tc.from, tc.to, 1)), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := strings.Join(composeRules(p), "\n"); !strings.Contains(got, tc.want) {
			t.Errorf("%s: no problem %q in %q", tc.name, tc.want, got)
		}
	}
}
