//go:build !e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// The preflight, the logging flags, doctor and the roles table, through the command tree. None of
// these commands may reach Redis: a trap stands in for it and counts the connections.

func TestWorkerFlagsGoThroughTheEnvRules(t *testing.T) {
	t.Parallel()
	// An invalid Redis URL stops the worker at preflight, before any connection; the flag
	// warnings are logged on the way.
	r := run(t, map[string]string{"PLAITA_REDIS_URL": "http://nowhere"}, "worker", "--concurrency", "0")
	if r.code != 2 || !strings.Contains(r.stderr, `PLAITA_REDIS_URL: "http://nowhere" is not a redis://`) {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	// --concurrency 0 goes through the same rule as the env var: 1, with a WARNING naming it.
	var warned bool
	for _, line := range strings.Split(r.stderr, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["event"] == "config.warning" && rec["variable"] == "--concurrency" && rec["used"] == "1" && rec["level"] == "warn" {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no structured warning for --concurrency 0:\n%s", r.stderr)
	}
}

func TestFlagValuesAreParsedLikeEnv(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "worker", "--concurrency", "abc")
	if r.code != 2 || !strings.Contains(r.stderr, `--concurrency: "abc" is not an integer`) {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	// --quiet drops the info lines: a worker whose Redis refuses it logs its failure, and
	// nothing at info.
	tr := newTrap(t)
	r = run(t, map[string]string{"PLAITA_REDIS_URL": tr.url(), "PLAITA_LOG_FORMAT": "json"}, "worker", "--quiet")
	if r.code != 1 || strings.Contains(r.stderr, `"level":"info"`) || !strings.Contains(r.stderr, `"level":"error"`) {
		t.Errorf("--quiet: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestEveryPreflightWarnsOnceAboutUnknownVariables: a misspelt variable is ignored, so every
// command that runs a preflight says so once, naming the closest known variable, and goes on.
func TestEveryPreflightWarnsOnceAboutUnknownVariables(t *testing.T) {
	t.Parallel()
	tr := newTrap(t)
	for _, cmd := range []string{"worker", "console", "filter", "schedule", "delay", "dev", "reap", "reindex", "dlq list", "status", "drain-list", "migrate"} {
		env := map[string]string{"PLAITA_REDIS_URL": tr.url(), "PLAITA_WORKER_CONCURENCY": "4", "PLAITA_RETIRED_KNOB": "1"}
		want := 0 // every command below is built: each case says where it stops
		switch cmd {
		case "worker", "delay", "schedule", "filter", "dev", "dlq list", "status", "reap", "reindex", "drain-list":
			// The built commands would go on to Redis: stop them at their preflight with a
			// rejected value.
			env["PLAITA_QUEUE_NAME"] = ""
			want = 2
		case "console":
			env["PLAITA_CONSOLE_TASK_QUEUE"] = "" // the console's own stream name
			want = 2
		case "migrate":
			want = 2 // the preflight passed; bare `plaita migrate` names no subcommand
		}
		r := run(t, env, append(strings.Fields(cmd), "--log-format", "json")...)
		if r.code != want {
			t.Errorf("%s: exit %d, want %d (an unknown variable is never a rejection)\n%s", cmd, r.code, want, r.stderr)
			continue
		}
		lines := logLines(r.stderr, "config.unknown_variable")
		byName := map[any]map[string]any{}
		for _, l := range lines {
			byName[l["variable"]] = l
		}
		if len(lines) != 2 || len(byName) != 2 {
			t.Errorf("%s: want one line for each of the 2 unknown variables, got %d:\n%s", cmd, len(lines), r.stderr)
			continue
		}
		typo := byName["PLAITA_WORKER_CONCURENCY"]
		if typo["level"] != "warn" || typo["suggestion"] != "PLAITA_WORKER_CONCURRENCY" ||
			!strings.Contains(typo["message"].(string), "did you mean PLAITA_WORKER_CONCURRENCY?") {
			t.Errorf("%s: typo line: %v", cmd, typo)
		}
		if _, has := byName["PLAITA_RETIRED_KNOB"]["suggestion"]; has {
			t.Errorf("%s: a name close to nothing got a suggestion: %v", cmd, byName["PLAITA_RETIRED_KNOB"])
		}
	}
	if n := tr.connections(); n != 0 {
		t.Errorf("%d connection(s) made", n)
	}
}

// TestReclaimBudgetWarningAtStart: a worker (and dev, which runs one) whose claim idle time
// times its redeliveries is shorter than the lease says so in its start-up log.
func TestReclaimBudgetWarningAtStart(t *testing.T) {
	t.Parallel()
	tr := newTrap(t)
	for _, tc := range []struct {
		cmd  string
		code int
	}{{"worker", 2}, {"dev", 2}} {
		// PLAITA_QUEUE_NAME= stops both at their preflight, before Redis; the warning comes first.
		env := map[string]string{"PLAITA_REDIS_URL": tr.url(), "PLAITA_CLAIM_MIN_IDLE_MS": "10000", "PLAITA_QUEUE_NAME": ""}
		r := run(t, env, tc.cmd, "--log-format", "json")
		if r.code != tc.code {
			t.Fatalf("%s: exit %d\n%s", tc.cmd, r.code, r.stderr)
		}
		var found int
		for _, l := range logLines(r.stderr, "config.warning") {
			msg, _ := l["message"].(string)
			if l["variable"] != "PLAITA_CLAIM_MIN_IDLE_MS" || !strings.Contains(msg, "shorter than") {
				continue
			}
			found++
			for _, want := range []string{"PLAITA_MAX_DELIVERIES", "PLAITA_LEASE_TTL_SECONDS", "10000 ms × 4 = 40000 ms", "120 s"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s: message lacks %q: %s", tc.cmd, want, msg)
				}
			}
			if l["level"] != "warn" {
				t.Errorf("%s: level %v", tc.cmd, l["level"])
			}
		}
		if found != 1 {
			t.Errorf("%s: want one reclaim budget warning, got %d:\n%s", tc.cmd, found, r.stderr)
		}
		// The defaults are consistent: no such warning.
		delete(env, "PLAITA_CLAIM_MIN_IDLE_MS")
		r = run(t, env, tc.cmd, "--log-format", "json")
		if strings.Contains(r.stderr, "shorter than") {
			t.Errorf("%s: defaults warned:\n%s", tc.cmd, r.stderr)
		}
	}
	if n := tr.connections(); n != 0 {
		t.Errorf("%d connection(s) made", n)
	}
}

type doctorReport struct {
	Schema      string            `json:"schema"`
	OK          bool              `json:"ok"`
	Generations map[string]string `json:"generations"`
	Variables   []struct {
		Name     string   `json:"name"`
		Fallback string   `json:"fallback"`
		Value    any      `json:"value"`
		Source   string   `json:"source"`
		Effect   string   `json:"effect"`
		Warnings []string `json:"warnings"`
	} `json:"variables"`
	Warnings []struct {
		Event      string   `json:"event"`
		Variable   string   `json:"variable"`
		Raw        string   `json:"raw"`
		Used       string   `json:"used"`
		Message    string   `json:"message"`
		Related    []string `json:"related"`
		Suggestion string   `json:"suggestion"`
	} `json:"warnings"`
	Problems []struct {
		Variable string `json:"variable"`
	} `json:"problems"`
}

func doctor(t *testing.T, env map[string]string, args ...string) (doctorReport, result) {
	t.Helper()
	r := run(t, env, append([]string{"doctor", "--json"}, args...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json output is not JSON: %v\n%s", err, r.stdout)
	}
	if rep.Schema != "plaita.doctor/v1" {
		t.Fatalf("schema %q", rep.Schema)
	}
	return rep, r
}

func (d doctorReport) value(name string) any {
	for _, v := range d.Variables {
		if v.Name == name {
			return v.Value
		}
	}
	return "<absent>"
}

func TestDoctorReportsClampsAsWarnings(t *testing.T) {
	t.Parallel()
	rep, r := doctor(t, map[string]string{"PLAITA_WORKER_CONCURRENCY": "0"}, "--role", "worker")
	if r.code != 0 || !rep.OK {
		t.Fatalf("exit %d, ok %v", r.code, rep.OK)
	}
	if got := rep.value("PLAITA_WORKER_CONCURRENCY"); got != float64(1) {
		t.Errorf("concurrency %v, want 1", got)
	}
	if len(rep.Warnings) != 1 || rep.Warnings[0].Variable != "PLAITA_WORKER_CONCURRENCY" || rep.Warnings[0].Used != "1" {
		t.Errorf("want one warning naming PLAITA_WORKER_CONCURRENCY: %+v", rep.Warnings)
	}
	for _, k := range []string{"config_family", "config_generation", "budget_generation"} {
		if rep.Generations[k] == "" {
			t.Errorf("generation %s missing", k)
		}
	}
}

func TestDoctorSwitchParsers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, raw string
		want      bool
	}{
		{"PLAITA_DISABLE_FENCING", " 1 ", true},
		{"PLAITA_DISABLE_FENCING", "true", false},
		{"PLAITA_SANDBOX_LIFECYCLE", " 0 ", true},
		{"PLAITA_SANDBOX_LIFECYCLE", "0", false},
		{"PLAITA_HTTP_COOKIES", " TRUE ", true},
	}
	for _, tc := range cases {
		rep, r := doctor(t, map[string]string{tc.name: tc.raw}, "--role", "worker")
		if r.code != 0 {
			t.Fatalf("%s=%q: exit %d\n%s", tc.name, tc.raw, r.code, r.stdout)
		}
		if got := rep.value(tc.name); got != tc.want {
			t.Errorf("%s=%q reads as %v, want %v", tc.name, tc.raw, got, tc.want)
		}
	}
}

func TestDoctorExitsTwoOnProblems(t *testing.T) {
	t.Parallel()
	rep, r := doctor(t, map[string]string{"PLAITA_SANDBOX_TIMEOUT": "0", "PLAITA_CONSOLE_PORT": "http"}, "--all")
	if r.code != 2 || rep.OK || len(rep.Problems) != 2 {
		t.Fatalf("exit %d, ok %v, problems %+v", r.code, rep.OK, rep.Problems)
	}
	text := run(t, map[string]string{"PLAITA_SANDBOX_TIMEOUT": "0"}, "doctor")
	if text.code != 2 || !strings.Contains(text.stdout, "PLAITA_SANDBOX_TIMEOUT") || !strings.Contains(text.stdout, "REJECTED") {
		t.Fatalf("text doctor: exit %d\n%s", text.code, text.stdout)
	}
	bad := run(t, nil, "doctor", "--role", "wroker")
	if bad.code != 2 || !strings.Contains(bad.stderr, `unknown role "wroker"`) {
		t.Fatalf("unknown role: exit %d, %s", bad.code, bad.stderr)
	}
}

// configMatrixNames is every variable named in the configuration matrix (CONFIG.md), copied
// here so the test does not depend on files outside the repository.
var configMatrixNames = strings.Fields(`
PLAITA_REDIS_URL REDIS_URL PLAITA_QUEUE_NAME QUEUE_NAME PLAITA_CONSUMER_GROUP
PLAITA_CONSUMER_GROUP_START_ID PLAITA_CONSUMER_NAME PLAITA_CLAIM_MIN_IDLE_MS PLAITA_LEASE_TTL_SECONDS
PLAITA_MAX_DELIVERIES PLAITA_DEPLOYMENT_EPOCH PLAITA_TENANT_STATUS_RECONCILE_SECONDS
PLAITA_TENANT_STATUS_EPOCH_STRICT PLAITA_EXECUTION_DEADLINE_SECONDS PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS
PLAITA_TASK_MAX_AGE_SECONDS PLAITA_DLQ_KEY PLAITA_EVENT_TTL_SECONDS PLAITA_EVENT_INDEX_SWEEP_INTERVAL
PLAITA_EVENT_INDEX_SWEEP_BUDGET PLAITA_DISABLE_EVENT_INDEX_SWEEP PLAITA_DISABLE_EVENT_INDEX_PRUNE_ON_WRITE
PLAITA_METRICS_PORT PLAITA_METRICS_HOST PLAITA_ALERT_WEBHOOK PLAITA_ALLOW_EXPERIMENTAL_DB
PLAITA_NODES_WORKSPACE_ROOT PLAITA_ALLOW_UNRESTRICTED_WRITES PLAITA_TENANT_MAX_RUNNING
PLAITA_TENANT_RUNNING_TTL_SECONDS PLAITA_TENANT_QUOTA_DEFER_MAX PLAITA_DLQ_MAX_LEN
PLAITA_EXECUTION_STATE_TTL_DAYS PLAITA_WORKER_CONCURRENCY PLAITA_CAPACITY_STALE_SECONDS
PLAITA_CONSOLE_DISPATCH_SHADOW PLAITA_CONSOLE_TASK_QUEUE PLAITA_DISPATCH_LEDGER_KEY PLAITA_DISPATCHER_ID
PLAITA_SANDBOX_LIFECYCLE PLAITA_EXECUTION_EVENTS_PUBLISH PLAITA_EXECUTION_TIMELINE_MAX
PLAITA_EVENT_RECONCILE_INTERVAL PLAITA_EVENT_RECONCILE_BACKFILL PLAITA_WORKER_DENY_REPOS
PLAITA_WORKER_MIN_FREE_DISK_GIB PLAITA_WORKER_DISK_GUARD_PATH PLAITA_WORKER_DRAIN_TIMEOUT PLAITA_NODE_PATH
PLAITA_LOG_LEVEL PLAITA_INSTANCE_ID PLAITA_CHECK_INTERVAL PLAITA_DELAY_QUEUE
PLAITA_DISABLE_TENANT_QUOTA PLAITA_DISABLE_NODE_RETRY PLAITA_DISABLE_FENCING PLAITA_DISABLE_AFFINITY
PLAITA_DISABLE_DISPATCH_TARGET PLAITA_DISABLE_HOLDER_LIVENESS PLAITA_DISABLE_LEASE_WATCHDOG
PLAITA_DISABLE_EVENT_RECONCILE PLAITA_DISABLE_CANCEL_CHECKPOINT PLAITA_DISABLE_CANCEL_INTERRUPT
PLAITA_DISABLE_CODE_NODE PLAITA_SANDBOX_TIMEOUT PLAITA_SANDBOX_MEMORY_MB PLAITA_SANDBOX_DOCKER_IMAGE
PLAITA_SANDBOX_DOCKER_TIMEOUT PLAITA_SANDBOX_DOCKER_MEMORY_MB PLAITA_SANDBOX_DOCKER_CPUS
PLAITA_SANDBOX_DOCKER_USER PLAITA_SANDBOX_NODE_BIN PLAITA_SANDBOX_DOCKER_NODE_IMAGE
PLAITA_SANDBOX_ALLOWED_LANGUAGES PLAITA_SANDBOX_ALLOWED_BACKENDS PLAITA_CODE_BACKEND
PLAITA_ALLOW_SUBPROCESS_FALLBACK PLAITA_EXPR_MAX_RESULT_SIZE PLAITA_EXPR_GROWTH_FACTOR
PLAITA_EXPR_MAX_RESULT_HARD PLAITA_HTTP_DNS_TTL PLAITA_HTTP_CONNECTOR_LIMIT PLAITA_HTTP_COOKIES
PLAITA_HTTP_MAX_RESPONSE_BYTES PLAITA_HTTP_BLOCK_PRIVATE PLAITA_BG_THREAD_WORKERS PLAITA_BG_PROCESS_WORKERS
PLAITA_BG_STATE_MAX PLAITA_LOOP PLAITA_CONSOLE_HOST PLAITA_CONSOLE_PORT PLAITA_CONSOLE_REDIS_URL
PLAITA_CONSOLE_DB_URL PLAITA_CONSOLE_ENV PLAITA_CONSOLE_ADMIN_API_KEY PLAITA_CONSOLE_ALLOW_INSECURE_ADMIN
PLAITA_CONSOLE_ADMIN_PASSWORD PLAITA_CONSOLE_RECONCILE_ORPHANS PLAITA_CONSOLE_SECRET_ID
PLAITA_CONSOLE_SECRET_KEY PLAITA_CONSOLE_LANGFUSE PLAITA_CONSOLE_DEBUG PLAITA_CONSOLE_ENGINE_SYNC_DEADLINE
PLAITA_CONSOLE_ENGINE_SYNC_MAX_VERSIONS PLAITA_CREDENTIALS_FILE PLAITA_CREDENTIALS_KEY
PLAITA_CREDENTIALS_KEY_FILE PLAITA_PROJECT_ROOT PLAITA_PYTHON PLAITA_WORKER_LANGFUSE PLAITA_NODE_MODULES
PLAITA_CONSOLE_NODE_MODULES`)

func TestDoctorAllListsEveryConfiguredVariable(t *testing.T) {
	t.Parallel()
	rep, r := doctor(t, nil, "--all")
	if r.code != 0 {
		t.Fatalf("doctor --all on an empty environment: exit %d\n%s", r.code, r.stderr)
	}
	listed := map[string]bool{}
	for _, v := range rep.Variables {
		listed[v.Name] = true
		if v.Fallback != "" {
			listed[v.Fallback] = true
		}
	}
	for _, name := range configMatrixNames {
		if !listed[name] {
			t.Errorf("%s is in the configuration matrix but not in doctor --all --json", name)
		}
	}
	for _, py := range []string{"PLAITA_LOOP", "PLAITA_BG_PROCESS_WORKERS", "PLAITA_WORKER_LANGFUSE", "PLAITA_CONSOLE_LANGFUSE", "PLAITA_ALLOW_EXPERIMENTAL_DB"} {
		for _, v := range rep.Variables {
			if v.Name == py && v.Effect != "accepted, no effect in this build" {
				t.Errorf("%s effect %q", py, v.Effect)
			}
		}
	}
}

func TestRolesTable(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "roles")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	for _, role := range []string{"worker", "console", "filter", "schedule", "delay", "dev"} {
		if !strings.Contains(r.stdout, "\n"+role+" ") {
			t.Errorf("role %s missing:\n%s", role, r.stdout)
		}
	}
	for _, tool := range []string{"reap", "reindex", "dlq", "drain-list", "migrate"} {
		if !strings.Contains(r.stdout, "\n"+tool+" ") {
			t.Errorf("tool %s missing:\n%s", tool, r.stdout)
		}
	}
	if r := run(t, nil, "nosuch"); r.code != 2 || !strings.Contains(r.stderr, `unknown command "nosuch"`) {
		t.Errorf("unknown command: exit %d, %s", r.code, r.stderr)
	}
	// --help marks what is not built, as the table does.
	help := run(t, nil, "--help")
	for _, line := range strings.Split(help.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "worker", "console", "delay", "schedule", "filter", "dev", "migrate", "dlq", "status", "reap", "reindex", "drain-list":
			if strings.Contains(line, "not built") {
				t.Errorf("the %s is built: %q", f[0], line)
			}
		}
	}
}

// TestLoggingFlagsOnEveryCommand: --log-level, --quiet and --log-format are accepted by every
// command that logs or runs a preflight, and mean the same thing everywhere.
func TestLoggingFlagsOnEveryCommand(t *testing.T) {
	t.Parallel()
	tr := newTrap(t)
	type command struct {
		args []string
		code int  // exit status once the flags are accepted
		logs bool // writes the preflight's lines to stderr
	}
	cmds := []command{
		// Roles reading PLAITA_QUEUE_NAME stop at their preflight (it is empty: exit 2), the
		// console at its PLAITA_CONSOLE_TASK_QUEUE (empty too); the others pass it and are not
		// built yet (exit 1); bare `migrate` names no subcommand (exit 2), `migrate version`
		// reports that the console has no database yet (exit 0).
		{[]string{"worker"}, 2, true},
		{[]string{"console"}, 2, true}, {[]string{"filter"}, 2, true}, {[]string{"schedule"}, 2, true},
		{[]string{"delay"}, 2, true}, {[]string{"dev"}, 2, true},
		{[]string{"reap"}, 2, true}, {[]string{"reindex"}, 2, true}, {[]string{"dlq", "list"}, 2, true},
		{[]string{"drain-list"}, 2, true}, {[]string{"migrate"}, 2, true}, {[]string{"migrate", "version"}, 0, true},
		{[]string{"doctor", "--role", "console"}, 0, false}, {[]string{"roles"}, 0, false},
	}
	for _, c := range cmds {
		name := c.args[0]
		env := map[string]string{"PLAITA_REDIS_URL": tr.url(), "PLAITA_QUEUE_NAME": "", "PLAITA_WORKER_CONCURENCY": "4"}
		if name == "console" {
			env["PLAITA_CONSOLE_TASK_QUEUE"] = ""
		}
		flagged := func(extra ...string) result { return run(t, env, append(append([]string{}, c.args...), extra...)...) }

		r := flagged("--log-level", "debug", "--log-format", "json")
		if r.code != c.code || strings.Contains(r.stderr, "flag provided but not defined") {
			t.Errorf("%s --log-level debug --log-format json: exit %d, want %d\n%s", name, r.code, c.code, r.stderr)
			continue
		}
		if c.logs {
			if len(logLines(r.stderr, "config.unknown_variable")) != 1 {
				t.Errorf("%s --log-format json: no JSON warning line:\n%s", name, r.stderr)
			}
		}

		r = flagged("--quiet", "--log-format", "console")
		if r.code != c.code {
			t.Errorf("%s --quiet --log-format console: exit %d, want %d\n%s", name, r.code, c.code, r.stderr)
			continue
		}
		if strings.Contains(r.stderr, "INF") || strings.Contains(r.stderr, `"level":"info"`) {
			t.Errorf("%s --quiet still logs info:\n%s", name, r.stderr)
		}
		if c.logs && (!strings.Contains(r.stderr, "WRN") || !strings.Contains(r.stderr, "event=config.unknown_variable")) {
			t.Errorf("%s --log-format console: no console-format warning:\n%s", name, r.stderr)
		}

		if r := flagged("--log-format", "xml"); r.code != 2 || !strings.Contains(r.stderr, `--log-format "xml"`) {
			t.Errorf("%s --log-format xml: exit %d\n%s", name, r.code, r.stderr)
		}
		if r := flagged("--log-level", "loud"); r.code != 2 || !strings.Contains(r.stdout+r.stderr, `--log-level: "loud" is not one of debug, info, warn, error`) {
			t.Errorf("%s --log-level loud: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
		}
	}
	if n := tr.connections(); n != 0 {
		t.Errorf("%d connection(s) made", n)
	}
}

// TestDoctorTakesTheRoleLogLevel: doctor's --log-level and --quiet set the level it checks, as
// they would for the role.
func TestDoctorTakesTheRoleLogLevel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{{[]string{"--log-level", "debug"}, "debug"}, {[]string{"--quiet"}, "warn"}, {[]string{"--quiet", "--log-level", "error"}, "error"}} {
		rep, r := doctor(t, map[string]string{"PLAITA_LOG_LEVEL": "info"}, append([]string{"--role", "worker"}, tc.args...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s", tc.args, r.code, r.stderr)
		}
		for _, v := range rep.Variables {
			if v.Name == "PLAITA_LOG_LEVEL" && (v.Value != tc.want || v.Source != "flag") {
				t.Errorf("%v: PLAITA_LOG_LEVEL %v from %s, want %s from flag", tc.args, v.Value, v.Source, tc.want)
			}
		}
	}
}
