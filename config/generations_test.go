package config

import (
	"regexp"
	"strings"
	"testing"
)

func gens(t *testing.T, env map[string]string) Generations {
	t.Helper()
	return mustLoad(t, RoleWorker, env).Generations()
}

func TestGenerationsFormat(t *testing.T) {
	g := gens(t, nil)
	for s, re := range map[string]string{g.Family: `^cf1-[0-9a-f]{12}$`, g.Config: `^cfg1-[0-9a-f]{12}$`, g.Budget: `^bg1-[0-9a-f]{12}$`} {
		if !regexp.MustCompile(re).MatchString(s) {
			t.Errorf("%q does not match %s", s, re)
		}
	}
}

func TestGenerationsAreDeterministic(t *testing.T) {
	env := map[string]string{"PLAITA_MAX_DELIVERIES": "9", "PLAITA_QUEUE_NAME": "q", "PLAITA_DISABLE_FENCING": "1"}
	a := gens(t, env)
	for range 20 { // map iteration order differs between runs; the hashes must not
		if b := gens(t, env); b != a {
			t.Fatalf("same configuration, different generations: %+v vs %+v", a, b)
		}
	}
	// Spelling does not matter, the effective value does.
	if b := gens(t, map[string]string{"PLAITA_MAX_DELIVERIES": " 9 ", "PLAITA_QUEUE_NAME": "q", "PLAITA_DISABLE_FENCING": " 1 "}); b != a {
		t.Errorf("equivalent spellings changed the generations: %+v vs %+v", a, b)
	}
}

func TestGenerationChanges(t *testing.T) {
	base := gens(t, nil)
	cases := []struct {
		name                 string
		env                  map[string]string
		family, config, budg bool
	}{
		{"log level is observation only", map[string]string{"PLAITA_LOG_LEVEL": "debug"}, false, false, false},
		{"metrics port is observation only", map[string]string{"PLAITA_METRICS_PORT": "9100"}, false, false, false},
		{"instance id is identity, not semantics", map[string]string{"PLAITA_INSTANCE_ID": "w-7"}, false, false, false},
		{"concurrency is capacity, not semantics", map[string]string{"PLAITA_WORKER_CONCURRENCY": "8"}, false, false, false},
		{"max deliveries is budget", map[string]string{"PLAITA_MAX_DELIVERIES": "9"}, false, true, true},
		{"lease ttl is budget", map[string]string{"PLAITA_LEASE_TTL_SECONDS": "300"}, false, true, true},
		{"task max age is budget", map[string]string{"PLAITA_TASK_MAX_AGE_SECONDS": "3600"}, false, true, true},
		{"dlq length is budget", map[string]string{"PLAITA_DLQ_MAX_LEN": "50"}, false, true, true},
		{"a rollback switch is semantics, not budget", map[string]string{"PLAITA_DISABLE_FENCING": "1"}, false, true, false},
		{"queue rename is a new family", map[string]string{"PLAITA_QUEUE_NAME": "other:queue"}, true, true, false},
		{"group rename is a new family", map[string]string{"PLAITA_CONSUMER_GROUP": "g2"}, true, true, false},
		{"dlq rename is a new family", map[string]string{"PLAITA_DLQ_KEY": "other:dlq"}, true, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := gens(t, tc.env)
			if got := g.Family != base.Family; got != tc.family {
				t.Errorf("config_family changed=%v, want %v", got, tc.family)
			}
			if got := g.Config != base.Config; got != tc.config {
				t.Errorf("config_generation changed=%v, want %v", got, tc.config)
			}
			if got := g.Budget != base.Budget; got != tc.budg {
				t.Errorf("budget_generation changed=%v, want %v", got, tc.budg)
			}
		})
	}
}

func TestGenerationFieldsAreDocumented(t *testing.T) {
	doc := string(Markdown())
	for _, f := range append(append(append([]string{}, familyFields...), budgetFields...), SemanticFields()...) {
		if !strings.Contains(doc, "`"+f+"`") {
			t.Errorf("generation input %s is not in the configuration reference", f)
		}
	}
	for _, excluded := range []string{"PLAITA_LOG_LEVEL", "PLAITA_INSTANCE_ID", "PLAITA_REDIS_URL", "PLAITA_CONSOLE_ADMIN_API_KEY"} {
		for _, f := range SemanticFields() {
			if f == excluded {
				t.Errorf("%s must not feed config_generation", excluded)
			}
		}
	}
}
