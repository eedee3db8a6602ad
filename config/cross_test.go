package config

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// reclaimWarnings returns the warnings that involve the reclaim budget check.
func reclaimWarnings(cfg *Config) []Warning {
	var out []Warning
	for _, w := range cfg.Warnings() {
		if w.Variable == "PLAITA_CLAIM_MIN_IDLE_MS" && slices.Contains(w.Related, "PLAITA_LEASE_TTL_SECONDS") {
			out = append(out, w)
		}
	}
	return out
}

func TestReclaimBudgetShorterThanLeaseWarns(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		warn bool
		nums []string // numbers the message must show
	}{
		{"defaults", nil, false, nil},
		{"short idle", map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "10000"}, true, []string{"10000 ms", "× 4", "= 40000 ms", "120 s"}},
		{"one delivery", map[string]string{"PLAITA_MAX_DELIVERIES": "1"}, true, []string{"60000 ms", "× 0", "= 0 ms", "120 s"}},
		{"idle 0", map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "0"}, true, []string{"0 ms", "× 4", "120 s"}},
		{"long lease", map[string]string{"PLAITA_LEASE_TTL_SECONDS": "600"}, true, []string{"60000 ms", "× 4", "= 240000 ms", "600 s"}},
		{"equal is enough", map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "30000"}, false, nil},
		{"just short", map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "29999"}, true, []string{"29999 ms", "= 119996 ms", "120 s"}},
		{"more deliveries", map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "10000", "PLAITA_MAX_DELIVERIES": "13"}, false, nil},
		// The largest integers a variable takes (2^53): the products overflow an int64.
		{"huge values", map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "9007199254740992", "PLAITA_MAX_DELIVERIES": "9007199254740992",
			"PLAITA_LEASE_TTL_SECONDS": "9007199254740992"}, false, nil},
		{"huge lease", map[string]string{"PLAITA_LEASE_TTL_SECONDS": "9007199254740992"}, true, []string{"= 240000 ms", "9007199254740992 s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, role := range []Role{RoleWorker, RoleDev} {
				cfg := mustLoad(t, role, tc.env)
				got := reclaimWarnings(cfg)
				if !tc.warn {
					if len(got) != 0 {
						t.Fatalf("%s: unexpected warning: %+v", role, got)
					}
					continue
				}
				if len(got) != 1 {
					t.Fatalf("%s: want one warning, got %+v", role, cfg.Warnings())
				}
				w := got[0]
				if w.Event != EventWarning || !slices.Equal(w.Related, []string{"PLAITA_MAX_DELIVERIES", "PLAITA_LEASE_TTL_SECONDS"}) {
					t.Errorf("%s: event %q, related %v", role, w.Event, w.Related)
				}
				for _, want := range append([]string{"PLAITA_CLAIM_MIN_IDLE_MS", "PLAITA_MAX_DELIVERIES", "PLAITA_LEASE_TTL_SECONDS", "shorter than"}, tc.nums...) {
					if !strings.Contains(w.Message, want) {
						t.Errorf("%s: message lacks %q: %s", role, want, w.Message)
					}
				}
				// It is a warning about the combination: it is not filed under any one
				// variable's own warnings (the matrix keeps those per variable).
				for _, name := range []string{"PLAITA_CLAIM_MIN_IDLE_MS", "PLAITA_MAX_DELIVERIES", "PLAITA_LEASE_TTL_SECONDS"} {
					for _, vw := range cfg.entries[name].warnings {
						if strings.Contains(vw, "shorter than") {
							t.Errorf("%s: the combination warning is filed under %s", role, name)
						}
					}
				}
			}
		})
	}
}

func TestReclaimBudgetCheckOnlyForRolesThatReclaim(t *testing.T) {
	env := map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "1000"}
	for _, role := range []Role{RoleConsole, RoleFilter, RoleSchedule, RoleDelay} {
		if got := reclaimWarnings(mustLoad(t, role, env)); len(got) != 0 {
			t.Errorf("%s does not reclaim, yet warned: %+v", role, got)
		}
	}
}

func TestReclaimBudgetCheckSkipsRejectedValues(t *testing.T) {
	// A rejected value stops the role anyway; a second message about the default standing in
	// for it would only mislead.
	cfg, err := load(t, RoleWorker, true, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "1000", "PLAITA_MAX_DELIVERIES": "abc"})
	if err == nil {
		t.Fatal("PLAITA_MAX_DELIVERIES=abc accepted")
	}
	if got := reclaimWarnings(cfg); len(got) != 0 {
		t.Errorf("warned about a rejected value: %+v", got)
	}
	// Non-strict mode uses the default in its place, and the check sees the value in effect.
	cfg, err = load(t, RoleWorker, false, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "1000", "PLAITA_MAX_DELIVERIES": "abc"})
	if err != nil {
		t.Fatal(err)
	}
	if got := reclaimWarnings(cfg); len(got) != 1 || !strings.Contains(got[0].Message, "× 4") {
		t.Errorf("non-strict: %+v", got)
	}
}

func TestReclaimBudgetIsLoggedAndReported(t *testing.T) {
	cfg := mustLoad(t, RoleWorker, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "1000"})
	var logs bytes.Buffer
	cfg.LogWarnings(zerolog.New(&logs))
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct {
			Level, Event, Variable, Raw, Used, Message string
			Related                                    []string
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if rec.Event == EventWarning && rec.Variable == "PLAITA_CLAIM_MIN_IDLE_MS" && strings.Contains(rec.Message, "shorter than") {
			found = true
			if rec.Level != "warn" || rec.Raw != "1000" || rec.Used != "1000" || len(rec.Related) != 2 {
				t.Errorf("log line: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("no config.warning line for the reclaim budget:\n%s", logs.String())
	}
	rep := cfg.Report()
	if len(rep.Warnings) != 1 || len(rep.Warnings[0].Related) != 2 {
		t.Errorf("report warnings: %+v", rep.Warnings)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "Cross-variable checks") || !strings.Contains(text.String(), "PLAITA_LEASE_TTL_SECONDS = 120 s") {
		t.Errorf("doctor text:\n%s", text.String())
	}
}
