package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"plaita/test/testutil"
)

func load(t *testing.T, role Role, strict bool, env map[string]string, opts ...Option) (*Config, error) {
	t.Helper()
	opts = append([]Option{WithEnv(env), WithProcess(4242, "host-a", 8)}, opts...)
	return Load(role, strict, opts...)
}

func mustLoad(t *testing.T, role Role, env map[string]string, opts ...Option) *Config {
	t.Helper()
	cfg, err := load(t, role, true, env, opts...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cfg
}

func TestPreflightAggregatesEveryProblem(t *testing.T) {
	_, err := load(t, RoleWorker, true, map[string]string{
		"PLAITA_QUEUE_NAME":  "",
		"PLAITA_DLQ_MAX_LEN": "0",
		"PLAITA_LOG_LEVEL":   "verbose",
	})
	var pe *PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("want *PreflightError, got %v", err)
	}
	if !errors.Is(err, ErrRejected) {
		t.Fatal("preflight error does not match ErrRejected")
	}
	if len(pe.Problems) != 3 {
		t.Fatalf("want 3 problems, got %d: %v", len(pe.Problems), pe.Problems)
	}
	msg := err.Error()
	for _, want := range []string{
		"configuration rejected (3 problems)",
		`PLAITA_QUEUE_NAME: empty value is not allowed (unset it to use the default "plaita:flow:queue")`,
		`PLAITA_DLQ_MAX_LEN: "0" is zero: must be a positive integer`,
		`PLAITA_LOG_LEVEL: "verbose" is not one of debug, info, warn, error`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
}

func TestPreflightOnlyChecksTheRolesVariables(t *testing.T) {
	env := map[string]string{"PLAITA_CONSOLE_PORT": "abc"}
	if _, err := load(t, RoleWorker, true, env); err != nil {
		t.Fatalf("the worker does not read PLAITA_CONSOLE_PORT, yet it was rejected: %v", err)
	}
	if _, err := load(t, RoleConsole, true, env); err == nil {
		t.Fatal("the console reads PLAITA_CONSOLE_PORT=abc and must reject it")
	}
	if _, err := load(t, RoleDev, true, env); err == nil {
		t.Fatal("dev runs the console and must reject PLAITA_CONSOLE_PORT=abc")
	}
}

func TestFallbackNames(t *testing.T) {
	cfg := mustLoad(t, RoleWorker, map[string]string{"REDIS_URL": "redis://r1:6379/1", "QUEUE_NAME": "q1"})
	if got := RedisURL.In(cfg); got != "redis://r1:6379/1" {
		t.Errorf("REDIS_URL fallback: got %q", got)
	}
	if got := QueueName.In(cfg); got != "q1" {
		t.Errorf("QUEUE_NAME fallback: got %q", got)
	}
	if got := cfg.entries["PLAITA_REDIS_URL"].from; got != "REDIS_URL" {
		t.Errorf("source variable: got %q, want REDIS_URL", got)
	}
	cfg = mustLoad(t, RoleWorker, map[string]string{"REDIS_URL": "redis://r1:6379/1", "PLAITA_REDIS_URL": "redis://r2:6379/2"})
	if got := RedisURL.In(cfg); got != "redis://r2:6379/2" {
		t.Errorf("PLAITA_REDIS_URL must win over REDIS_URL: got %q", got)
	}
	// An empty PLAITA_ value is an error even when the fallback is set: it never silently
	// falls through to another name.
	if _, err := load(t, RoleWorker, true, map[string]string{"REDIS_URL": "redis://r1:6379/1", "PLAITA_REDIS_URL": ""}); err == nil {
		t.Error("empty PLAITA_REDIS_URL accepted")
	}
	// The fallback name itself is an identity value too.
	_, err := load(t, RoleWorker, true, map[string]string{"QUEUE_NAME": ""})
	if err == nil || !strings.Contains(err.Error(), "QUEUE_NAME: empty value") {
		t.Errorf("empty QUEUE_NAME: got %v", err)
	}
}

func TestFlagsOverrideEnvThroughTheSameRules(t *testing.T) {
	env := map[string]string{"PLAITA_WORKER_CONCURRENCY": "3"}
	cfg := mustLoad(t, RoleWorker, env, WithFlags(map[string]string{"PLAITA_WORKER_CONCURRENCY": "4"}))
	if got := WorkerConcurrency.In(cfg); got != 4 {
		t.Errorf("flag 4 over env 3: got %d", got)
	}
	cfg = mustLoad(t, RoleWorker, env, WithFlags(map[string]string{"PLAITA_WORKER_CONCURRENCY": "0"}))
	if got := WorkerConcurrency.In(cfg); got != 1 {
		t.Errorf("--concurrency 0: got %d, want 1", got)
	}
	w := cfg.Warnings()
	if len(w) != 1 || w[0].Variable != "--concurrency" || w[0].Used != "1" || w[0].Raw != "0" {
		t.Errorf("--concurrency 0 must warn once naming the flag, raw and used value: %+v", w)
	}
	_, err := load(t, RoleWorker, true, env, WithFlags(map[string]string{"PLAITA_WORKER_CONCURRENCY": "abc"}))
	if err == nil || !strings.Contains(err.Error(), `--concurrency: "abc" is not an integer`) {
		t.Errorf("--concurrency abc: got %v", err)
	}
}

func TestSecretsAreMasked(t *testing.T) {
	env := map[string]string{
		"PLAITA_REDIS_URL":             "redis://:hunter2@redis.internal:6379/0",
		"PLAITA_CONSOLE_REDIS_URL":     "http://admin:hunter3@x",
		"PLAITA_CONSOLE_ADMIN_API_KEY": "k-hunter4",
		"PLAITA_ALERT_WEBHOOK":         "https://user:hunter5@hooks.example/a",
	}
	cfg, err := load(t, RoleDev, true, env)
	if err == nil {
		t.Fatal("an http:// console Redis URL must be rejected")
	}
	out, _ := json.Marshal(cfg.Report())
	all := string(out) + err.Error()
	for _, secret := range []string{"hunter2", "hunter3", "hunter4", "hunter5"} {
		if strings.Contains(all, secret) {
			t.Errorf("secret %q leaked into the report or the error:\n%s", secret, all)
		}
	}
	if !strings.Contains(all, "redis.internal:6379") {
		t.Error("masking hid the host too; operators need it")
	}
	// The effective value the code uses is the real one.
	if got := RedisURL.In(cfg); got != env["PLAITA_REDIS_URL"] {
		t.Errorf("accessor returns %q", got)
	}
}

func TestNonStrictSecurityGatesFailClosed(t *testing.T) {
	cfg, err := load(t, RoleDev, false, map[string]string{
		"PLAITA_HTTP_BLOCK_PRIVATE":           "maybe",
		"PLAITA_CONSOLE_ALLOW_INSECURE_ADMIN": "maybe",
		"PLAITA_SANDBOX_ALLOWED_BACKENDS":     "docker,unsafe",
	})
	if err != nil {
		t.Fatalf("non-strict Load must not fail: %v", err)
	}
	if !HTTPBlockPrivate.In(cfg) {
		t.Error("invalid PLAITA_HTTP_BLOCK_PRIVATE must fail closed to true")
	}
	if ConsoleAllowInsecureAdmin.In(cfg) {
		t.Error("invalid PLAITA_CONSOLE_ALLOW_INSECURE_ADMIN must fail closed to false")
	}
	if got := SandboxAllowedBackends.In(cfg); strings.Contains(strings.Join(got, ","), "unsafe") {
		t.Errorf("unsafe backend allowed: %v", got)
	}
}

func TestSandboxAllowLists(t *testing.T) {
	cfg := mustLoad(t, RoleWorker, map[string]string{
		"PLAITA_CODE_BACKEND":              "restricted",
		"PLAITA_SANDBOX_ALLOWED_BACKENDS":  "docker",
		"PLAITA_SANDBOX_ALLOWED_LANGUAGES": "js; javascript",
	})
	if got := fmt.Sprint(SandboxAllowedBackends.In(cfg)); got != "[docker restricted]" {
		t.Errorf("explicit backends are unioned with the effective default: got %s", got)
	}
	if got := fmt.Sprint(SandboxAllowedLanguages.In(cfg)); got != "[python js]" {
		t.Errorf("python is always kept: got %s", got)
	}
	if w := cfg.Warnings(); len(w) != 1 || w[0].Variable != "PLAITA_SANDBOX_ALLOWED_LANGUAGES" {
		t.Errorf("allowing js must warn once: %+v", w)
	}
	if got := CodeBackend.In(mustLoad(t, RoleFilter, nil)); got != "docker" {
		t.Errorf("library default backend: got %q, want docker", got)
	}
	// The console's default is docker; an explicit backend still joins the allowed set.
	cfg = mustLoad(t, RoleConsole, map[string]string{"PLAITA_CODE_BACKEND": "subprocess"})
	if got := fmt.Sprint(SandboxAllowedBackends.In(cfg)); got != "[docker subprocess]" {
		t.Errorf("console with PLAITA_CODE_BACKEND=subprocess: allowed %s, want [docker subprocess]", got)
	}
	// dev runs the worker in process, on a laptop that may have no docker: the worker's default.
	if got := CodeBackend.In(mustLoad(t, RoleDev, nil)); got != "subprocess" {
		t.Errorf("dev default backend: got %q, want subprocess", got)
	}
	_, err := load(t, RoleWorker, true, map[string]string{"PLAITA_SANDBOX_ALLOWED_BACKENDS": "unsafe", "PLAITA_SANDBOX_ALLOWED_LANGUAGES": "ruby"})
	if err == nil || !strings.Contains(err.Error(), `"unsafe"`) || !strings.Contains(err.Error(), `"ruby"`) {
		t.Errorf("unknown backend and language must both be rejected: %v", err)
	}
	for _, bad := range []string{"nan", "inf", "-1", "0"} {
		if _, err := load(t, RoleWorker, true, map[string]string{"PLAITA_SANDBOX_DOCKER_CPUS": bad}); err == nil {
			t.Errorf("PLAITA_SANDBOX_DOCKER_CPUS=%s accepted", bad)
		}
	}
	if got := SandboxDockerCPUs.In(mustLoad(t, RoleWorker, map[string]string{"PLAITA_SANDBOX_DOCKER_CPUS": "1.5"})); got != "1.5" {
		t.Errorf("cpus 1.5: got %q", got)
	}
}

func TestTombstoneTTL(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want int
		warn bool
	}{
		{map[string]string{"PLAITA_EXECUTION_STATE_TTL_DAYS": "60"}, 60 * 86400, false},
		{map[string]string{"PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS": "100"}, 2592000, true},
		{map[string]string{"PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS": "100", "PLAITA_TASK_MAX_AGE_SECONDS": "50"}, 100, false},
		{map[string]string{"PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS": "100", "PLAITA_TASK_MAX_AGE_SECONDS": "0"}, 100, false},
		{map[string]string{"PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS": "9999999"}, 9999999, false},
	}
	for _, tc := range cases {
		cfg := mustLoad(t, RoleWorker, tc.env)
		if got := ExecutionTombstoneTTLSeconds.In(cfg); got != tc.want {
			t.Errorf("%v: got %d, want %d", tc.env, got, tc.want)
		}
		if got := len(cfg.entries["PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS"].warnings) > 0; got != tc.warn {
			t.Errorf("%v: warning=%v, want %v", tc.env, got, tc.warn)
		}
	}
}

func TestQueueMismatchWarns(t *testing.T) {
	cfg := mustLoad(t, RoleDev, map[string]string{"PLAITA_QUEUE_NAME": "a", "PLAITA_CONSOLE_TASK_QUEUE": "b"})
	w := cfg.Warnings()
	if len(w) != 1 || w[0].Variable != "PLAITA_CONSOLE_TASK_QUEUE" || !strings.Contains(w[0].Message, `"a"`) {
		t.Errorf("want one warning about the console queue differing from the worker queue: %+v", w)
	}
}

// Every variable is read once, at load: a call-timed one (re-read per use by the runbook's
// implementation) keeps its loaded value like a startup one.
func TestVariablesAreReadOnce(t *testing.T) {
	env := testutil.NewEnv(map[string]string{"PLAITA_WORKER_CONCURRENCY": "2", "PLAITA_EXECUTION_DEADLINE_SECONDS": "90.5"})
	cfg, err := Load(RoleWorker, true, WithLookup(env.Lookup))
	if err != nil {
		t.Fatal(err)
	}
	env.Set("PLAITA_EXECUTION_DEADLINE_SECONDS", "12")
	if got := ExecutionDeadlineSeconds.In(cfg); got != 90.5 {
		t.Errorf("call-timed variable changed after load: %v", got)
	}
	// A startup variable is read once.
	env.Set("PLAITA_WORKER_CONCURRENCY", "7")
	if got := WorkerConcurrency.In(cfg); got != 2 {
		t.Errorf("startup variable changed after load: %d", got)
	}
}

func TestAccessorTypesMatchTheRegistry(t *testing.T) {
	cfg := mustLoad(t, RoleDev, nil)
	for _, v := range registry() {
		if got := fmt.Sprintf("%T", cfg.get(v.Name)); got != v.GoType() {
			t.Errorf("%s: value type %s, accessor type %s", v.Name, got, v.GoType())
		}
	}
}

func TestRegistryEntriesAreComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range registry() {
		if seen[v.Name] {
			t.Errorf("%s registered twice", v.Name)
		}
		seen[v.Name] = true
		if len(v.Roles()) == 0 {
			t.Errorf("%s: no role reads it", v.Name)
		}
		if v.Doc == "" || v.Section == "" || v.Rule == "" && v.Kind != KindString {
			t.Errorf("%s: doc, section and rule are required (doc %q, section %q, rule %q)", v.Name, v.Doc, v.Section, v.Rule)
		}
		if v.Default == "" && v.DefaultDoc == "" {
			t.Errorf("%s: no documented default", v.Name)
		}
	}
}

func TestGeneratedFilesAreUpToDate(t *testing.T) {
	docs, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, Markdown()) {
		t.Error("docs/configuration.md is stale: run go generate ./config")
	}
	keys, err := os.ReadFile("keys_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	src, err := KeysSource()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(keys, src) {
		t.Error("config/keys_gen.go is stale: run go generate ./config")
	}
}

func TestParseRole(t *testing.T) {
	for _, ok := range []string{"worker", " Console ", "dev"} {
		if _, err := ParseRole(ok); err != nil {
			t.Errorf("ParseRole(%q): %v", ok, err)
		}
	}
	if _, err := ParseRole("wroker"); err == nil || !strings.Contains(err.Error(), "worker, console") {
		t.Errorf("ParseRole(wroker): %v", err)
	}
}

// TestDoctorJSONIsDocumented keeps docs/doctor.md in step with the report's JSON fields.
func TestDoctorJSONIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/doctor.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []reflect.Type{reflect.TypeOf(Report{}), reflect.TypeOf(VarReport{}), reflect.TypeOf(Warning{}),
		reflect.TypeOf(Problem{}), reflect.TypeOf(Generations{})} {
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if !bytes.Contains(doc, []byte("`"+name+"`")) {
				t.Errorf("docs/doctor.md does not document %s.%s (`%s`)", typ.Name(), typ.Field(i).Name, name)
			}
		}
	}
}

// TestHugeIntegersAreInvalid: integers are carried as float64 inside the parser, so a value
// beyond 2^53 cannot be kept exactly (9223372036854775807 used to come out negative). Such a
// value is treated as invalid, like any other number the variable cannot take.
func TestHugeIntegersAreInvalid(t *testing.T) {
	for _, name := range []string{"PLAITA_MAX_DELIVERIES", "PLAITA_CLAIM_MIN_IDLE_MS", "PLAITA_WORKER_CONCURRENCY", "PLAITA_EVENT_TTL_SECONDS"} {
		for _, raw := range []string{"9223372036854775807", "-9223372036854775807", "9007199254740993"} {
			env := map[string]string{name: raw}
			strictCfg, err := load(t, RoleDev, true, env)
			cfg, _ := load(t, RoleDev, false, env)
			e, def := cfg.entries[name], cfg.entries[name].v.Default
			if got := fmtValue(e.value); got != def {
				t.Errorf("%s=%s: value %s, want the default %s", name, raw, got, def)
			}
			if len(e.warnings) == 0 || !strings.Contains(e.warnings[0], "out of range") {
				t.Errorf("%s=%s: warnings %q", name, raw, e.warnings)
			}
			if strictCfg.entries[name].v.Strict != "" && err == nil {
				t.Errorf("%s=%s: strict preflight accepted it", name, raw)
			}
		}
		// The largest exact integer is still a number.
		cfg := mustLoad(t, RoleDev, map[string]string{name: "9007199254740992"})
		if got := fmtValue(cfg.entries[name].value); got != "9007199254740992" {
			t.Errorf("%s=2^53: value %s", name, got)
		}
	}
}

func TestParseLogLevel(t *testing.T) {
	for raw, want := range map[string]string{"debug": "debug", " WARN ": "warn", "warning": "warn", "critical": "error"} {
		if got, err := ParseLogLevel(raw); err != nil || got != want {
			t.Errorf("ParseLogLevel(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	_, err := ParseLogLevel("loud")
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), `--log-level: "loud" is not one of debug, info, warn, error`) {
		t.Errorf("ParseLogLevel(loud): %v", err)
	}
}

func TestAsReadsTheSameEnvironmentForAnotherRole(t *testing.T) {
	env := map[string]string{"PLAITA_SANDBOX_TIMEOUT": "7"}
	console, err := Load(RoleConsole, true, WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	worker := console.As(RoleWorker)
	if worker.Role() != RoleWorker || CodeBackend.In(console) != "docker" || CodeBackend.In(worker) != "subprocess" ||
		SandboxTimeout.In(worker) != 7 {
		t.Fatalf("console %s, worker %s %s, timeout %v", CodeBackend.In(console), worker.Role(), CodeBackend.In(worker), SandboxTimeout.In(worker))
	}
}

func TestParseOTLPHeaders(t *testing.T) {
	got, err := ParseOTLPHeaders(" api-key = s3cr%20et ,x-team=ops,, ")
	if err != nil || len(got) != 2 || got["api-key"] != "s3cr et" || got["x-team"] != "ops" {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := ParseOTLPHeaders(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	for _, bad := range []string{"secret-token", "=v", "k=%zz-secret"} {
		_, err := ParseOTLPHeaders(bad)
		if err == nil {
			t.Errorf("%q was taken", bad)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the value: %v", bad, err)
		}
	}
}
