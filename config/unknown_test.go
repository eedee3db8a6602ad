package config

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// unknownWarnings returns the unknown-variable warnings of cfg, by variable name.
func unknownWarnings(cfg *Config) map[string]Warning {
	out := map[string]Warning{}
	for _, w := range cfg.Warnings() {
		if w.Event == EventUnknownVariable {
			out[w.Variable] = w
		}
	}
	return out
}

func TestUnknownVariablesWarnOnceWithTheClosestName(t *testing.T) {
	env := map[string]string{
		"PLAITA_WORKER_CONCURENCY":  "4",
		"PLAITA_RETIRED_KNOB":       "1",
		"PLAITA_CONSOLE_PORT":       "9000", // known, read by another role: not unknown
		"REDIS_URL":                 "redis://r:6379/0",
		"HOME":                      "/root",
		"PLAITA_TEST_REDIS_URL":     "redis://127.0.0.1:6379/15", // the test harness's own variables
		"PLAITA_TEST_POSTGRES_URL":  "postgres://postgres@127.0.0.1:5432/postgres",
		"PLAITA_WORKER_CONCURRENCY": "2",
	}
	var logs bytes.Buffer
	cfg, err := load(t, RoleWorker, true, env)
	if err != nil {
		t.Fatalf("an unknown variable is a warning, never a rejection: %v", err)
	}
	got := unknownWarnings(cfg)
	if want := []string{"PLAITA_RETIRED_KNOB", "PLAITA_WORKER_CONCURENCY"}; !slices.Equal(slices.Sorted(maps.Keys(got)), want) {
		t.Fatalf("unknown variables %v, want %v", slices.Sorted(maps.Keys(got)), want)
	}
	typo := got["PLAITA_WORKER_CONCURENCY"]
	if typo.Suggestion != "PLAITA_WORKER_CONCURRENCY" || !strings.Contains(typo.Message, "did you mean PLAITA_WORKER_CONCURRENCY?") {
		t.Errorf("typo warning: %+v", typo)
	}
	if retired := got["PLAITA_RETIRED_KNOB"]; retired.Suggestion != "" || strings.Contains(retired.Message, "did you mean") {
		t.Errorf("a name close to nothing must not get a suggestion: %+v", retired)
	}
	if got := WorkerConcurrency.In(cfg); got != 2 {
		t.Errorf("the misspelled variable must not change anything: concurrency %d", got)
	}

	cfg.LogWarnings(zerolog.New(&logs))
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["event"] != EventUnknownVariable {
			continue
		}
		lines++
		if rec["level"] != "warn" {
			t.Errorf("unknown variable logged at %v: %s", rec["level"], line)
		}
		if rec["variable"] == "PLAITA_WORKER_CONCURENCY" && rec["suggestion"] != "PLAITA_WORKER_CONCURRENCY" {
			t.Errorf("log line lacks the suggestion: %s", line)
		}
	}
	if lines != 2 {
		t.Errorf("want one line per unknown variable (2), got %d:\n%s", lines, logs.String())
	}
}

func TestUnknownVariablesInEveryRole(t *testing.T) {
	for _, role := range []Role{RoleWorker, RoleConsole, RoleFilter, RoleSchedule, RoleDelay, RoleDev} {
		cfg := mustLoad(t, role, map[string]string{"PLAITA_LOG_LEVL": "debug"})
		w, ok := unknownWarnings(cfg)["PLAITA_LOG_LEVL"]
		if !ok || w.Suggestion != "PLAITA_LOG_LEVEL" {
			t.Errorf("%s: want a warning suggesting PLAITA_LOG_LEVEL, got %+v", role, cfg.Warnings())
		}
		if n := len(cfg.Report().Warnings); n != 1 {
			t.Errorf("%s: report has %d warnings, want 1: %+v", role, n, cfg.Report().Warnings)
		}
	}
	// Non-strict loads say it too.
	cfg, err := load(t, RoleWorker, false, map[string]string{"PLAITA_LOG_LEVL": "debug"})
	if err != nil || len(unknownWarnings(cfg)) != 1 {
		t.Errorf("non-strict: %v %+v", err, cfg.Warnings())
	}
}

func TestUnknownVariableValuesAreNeverShown(t *testing.T) {
	// A misspelled secret is still a secret; plaita cannot tell, so no unknown value is shown.
	cfg := mustLoad(t, RoleConsole, map[string]string{"PLAITA_CONSOLE_ADMIN_API_KY": "k-hunter9"})
	w, ok := unknownWarnings(cfg)["PLAITA_CONSOLE_ADMIN_API_KY"]
	if !ok || w.Suggestion != "PLAITA_CONSOLE_ADMIN_API_KEY" {
		t.Fatalf("want a warning suggesting PLAITA_CONSOLE_ADMIN_API_KEY: %+v", cfg.Warnings())
	}
	var out bytes.Buffer
	b, _ := json.Marshal(cfg.Report())
	out.Write(b)
	if err := cfg.Report().WriteText(&out); err != nil {
		t.Fatal(err)
	}
	cfg.LogWarnings(zerolog.New(&out))
	if strings.Contains(out.String(), "hunter9") {
		t.Errorf("the value of an unknown variable leaked:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "PLAITA_CONSOLE_ADMIN_API_KY") {
		t.Errorf("the report does not name the unknown variable:\n%s", out.String())
	}
}

func TestUnknownVariablesCaseAndSpelling(t *testing.T) {
	cases := map[string]string{
		"PLAITA_WORKER_CONCURENCY":    "PLAITA_WORKER_CONCURRENCY",  // a letter missing
		"PLAITA_CONSUMER_GRUOP":       "PLAITA_CONSUMER_GROUP",      // two letters swapped
		"PLAITA_LOGLEVEL":             "PLAITA_LOG_LEVEL",           // separator missing
		"plaita_log_level":            "PLAITA_LOG_LEVEL",           // names are case-sensitive
		"PLAITA_DISABLE_CODE_NODES":   "PLAITA_DISABLE_CODE_NODE",   // a letter too many
		"PLAITA_MAX_DELIVERY":         "PLAITA_MAX_DELIVERIES",      // singular
		"PLAITA_SANDBOX_DOCKER_CPU":   "PLAITA_SANDBOX_DOCKER_CPUS", // singular
		"PLAITA_HTTP_BLOCK_PRIVAT":    "PLAITA_HTTP_BLOCK_PRIVATE",  // truncated
		"PLAITA_FOO":                  "",                           // close to nothing
		"PLAITA_TENANT_ID":            "",                           // an internal marker of the Python build
		"PLAITA_SCRIPT":               "",                           // same
		"PLAITA_NODES_API_TOKEN":      "",                           // a business node's own variable
		"PLAITA_REDIS":                "",                           // too short to guess
		"PLAITA_WORKER_CONCURRENCY_":  "PLAITA_WORKER_CONCURRENCY",  // trailing separator
		"PLAITA_EXECUTION_DEADLINE":   "",                           // a whole word missing is not a typo
		"PLAITA_EVENT_TTL_SECOND":     "PLAITA_EVENT_TTL_SECONDS",   // singular
		"PLAITA_LEASE_TTL_SECS":       "PLAITA_LEASE_TTL_SECONDS",   // abbreviation close enough
		"PLAITA_CLAIM_MIN_IDLE":       "PLAITA_CLAIM_MIN_IDLE_MS",   // unit missing
		"PLAITA_LOG_LVL":              "PLAITA_LOG_LEVEL",           // vowel dropped
		"PLAITA_DISABLE_FENCINGS":     "PLAITA_DISABLE_FENCING",     // a letter too many
		"PLAITA_QUEUE_NAMES":          "PLAITA_QUEUE_NAME",          // plural
		"PLAITA_CONSOLE_HOSTNAME":     "",                           // a different word
		"PLAITA_NODE_MODULE":          "PLAITA_NODE_MODULES",        // singular
		"PLAITA_SANDBOX_ALLOWED_LANG": "",                           // cut short
	}
	for name, want := range cases {
		cfg := mustLoad(t, RoleDev, map[string]string{name: "x"})
		w, ok := unknownWarnings(cfg)[name]
		if !ok {
			t.Errorf("%s: not reported as unknown", name)
			continue
		}
		if w.Suggestion != want {
			t.Errorf("%s: suggestion %q, want %q", name, w.Suggestion, want)
		}
	}
}

func TestUnknownVariablesNeedTheNames(t *testing.T) {
	env := map[string]string{"PLAITA_WORKER_CONCURENCY": "4"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	// A lookup alone cannot list what is set, and must not fall back to the process's own
	// environment: nothing is reported.
	cfg := mustLoad(t, RoleWorker, nil, WithLookup(lookup))
	if got := unknownWarnings(cfg); len(got) != 0 {
		t.Errorf("WithLookup alone reported %v", got)
	}
	cfg = mustLoad(t, RoleWorker, nil, WithLookup(lookup), WithNames(func() []string { return slices.Collect(maps.Keys(env)) }))
	if _, ok := unknownWarnings(cfg)["PLAITA_WORKER_CONCURENCY"]; !ok {
		t.Errorf("WithLookup + WithNames: not reported: %+v", cfg.Warnings())
	}
}

func TestEnvironNames(t *testing.T) {
	got := environNames([]string{"PLAITA_A=1", "PLAITA_B=", "PLAITA_C=x=y", "=C:=C:\\", "NOEQUALS"})
	if want := []string{"PLAITA_A", "PLAITA_B", "PLAITA_C", "NOEQUALS"}; !slices.Equal(got, want) {
		t.Errorf("environNames: %q, want %q", got, want)
	}
}

func TestDoctorTextShowsUnknownVariables(t *testing.T) {
	cfg := mustLoad(t, RoleWorker, map[string]string{"PLAITA_WORKER_CONCURENCY": "4"})
	var out bytes.Buffer
	if err := cfg.Report().WriteText(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"Unknown variables", "PLAITA_WORKER_CONCURENCY", "did you mean PLAITA_WORKER_CONCURRENCY?", "1 warning,"} {
		if !strings.Contains(text, want) {
			t.Errorf("doctor text lacks %q:\n%s", want, text)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"ABC", "", 3}, {"", "ABC", 3}, {"ABC", "ABC", 0},
		{"CONCURENCY", "CONCURRENCY", 1}, // insertion
		{"GRUOP", "GROUP", 1},            // adjacent swap
		{"LEVL", "LEVEL", 1},
		{"KITTEN", "SITTING", 3},
		{"CA", "ABC", 3}, // optimal string alignment: a swapped pair is not edited again
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := editDistance(tc.b, tc.a); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d (not symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}
