//go:build !e2e

package e2e

import (
	"slices"
	"strings"
	"testing"
)

func TestDoctorShowsUnknownVariables(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PLAITA_WORKER_CONCURENCY": "4", "PLAITA_CONSOLE_ADMIN_API_KY": "k-hunter9"}
	rep, r := doctor(t, env, "--all")
	if r.code != 0 || !rep.OK {
		t.Fatalf("unknown variables must not fail doctor: exit %d\n%s", r.code, r.stdout)
	}
	got := map[string]string{}
	for _, w := range rep.Warnings {
		if w.Event == "config.unknown_variable" {
			got[w.Variable] = w.Suggestion
			if !strings.Contains(w.Message, "did you mean "+w.Suggestion+"?") {
				t.Errorf("message %q", w.Message)
			}
		}
	}
	want := map[string]string{"PLAITA_WORKER_CONCURENCY": "PLAITA_WORKER_CONCURRENCY", "PLAITA_CONSOLE_ADMIN_API_KY": "PLAITA_CONSOLE_ADMIN_API_KEY"}
	if len(got) != len(want) || got["PLAITA_WORKER_CONCURENCY"] != want["PLAITA_WORKER_CONCURENCY"] ||
		got["PLAITA_CONSOLE_ADMIN_API_KY"] != want["PLAITA_CONSOLE_ADMIN_API_KY"] {
		t.Errorf("unknown variables in --json: %v, want %v", got, want)
	}
	if rep.value("PLAITA_WORKER_CONCURRENCY") != float64(1) {
		t.Errorf("the misspelt value was used: %v", rep.value("PLAITA_WORKER_CONCURRENCY"))
	}
	text := run(t, env, "doctor", "--role", "worker")
	if text.code != 0 {
		t.Fatalf("text doctor: exit %d\n%s", text.code, text.stdout)
	}
	for _, want := range []string{"Unknown variables", "PLAITA_WORKER_CONCURENCY is not a plaita variable and is ignored; did you mean PLAITA_WORKER_CONCURRENCY?"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("text doctor lacks %q:\n%s", want, text.stdout)
		}
	}
	if strings.Contains(r.stdout+r.stderr+text.stdout+text.stderr, "hunter9") {
		t.Error("the value of an unknown variable was shown")
	}
}

func TestDoctorShowsTheReclaimBudgetCheck(t *testing.T) {
	t.Parallel()
	rep, r := doctor(t, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "10000"}, "--role", "worker")
	if r.code != 0 || len(rep.Warnings) != 1 {
		t.Fatalf("exit %d, warnings %+v", r.code, rep.Warnings)
	}
	w := rep.Warnings[0]
	if w.Event != "config.warning" || w.Variable != "PLAITA_CLAIM_MIN_IDLE_MS" ||
		!slices.Equal(w.Related, []string{"PLAITA_MAX_DELIVERIES", "PLAITA_LEASE_TTL_SECONDS"}) ||
		!strings.Contains(w.Message, "10000 ms × 4 = 40000 ms is shorter than PLAITA_LEASE_TTL_SECONDS = 120 s") {
		t.Errorf("warning %+v", w)
	}
	text := run(t, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "10000"}, "doctor", "--role", "worker")
	if !strings.Contains(text.stdout, "Cross-variable checks") || !strings.Contains(text.stdout, "1 warning,") {
		t.Errorf("text doctor:\n%s", text.stdout)
	}
	// The defaults of every role are consistent: no warning at all.
	rep, r = doctor(t, nil, "--all")
	if r.code != 0 || len(rep.Warnings) != 0 {
		t.Errorf("defaults: exit %d, warnings %+v", r.code, rep.Warnings)
	}
}

func TestDoctorCodeBackendPerRole(t *testing.T) {
	t.Parallel()
	for role, want := range map[string][2]any{
		"worker":  {"subprocess", []any{"docker", "subprocess"}},
		"console": {"docker", []any{"docker"}},
		"dev":     {"subprocess", []any{"docker", "subprocess"}},
	} {
		rep, r := doctor(t, nil, "--role", role)
		if r.code != 0 {
			t.Fatalf("%s: exit %d", role, r.code)
		}
		if got := rep.value("PLAITA_CODE_BACKEND"); got != want[0] {
			t.Errorf("%s: PLAITA_CODE_BACKEND %v, want %v", role, got, want[0])
		}
		got, _ := rep.value("PLAITA_SANDBOX_ALLOWED_BACKENDS").([]any)
		if !slices.Equal(got, want[1].([]any)) {
			t.Errorf("%s: PLAITA_SANDBOX_ALLOWED_BACKENDS %v, want %v", role, got, want[1])
		}
	}
}
