//go:build !e2e

package e2e

import (
	"strings"
	"testing"
)

// docs/doctor.md's example of a queue name under <root>:flow: says what doctor does: the name
// alone is accepted (exit 0); a flow version at the dead-letter key's name is a problem (exit 2).
func TestDoctorDocQueueNameUnderFlowExample(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()), withEnv(map[string]string{"PLAITA_QUEUE_NAME": "plaita:flow:jobs"}))
	if r := run(t, s.env, "doctor", "--role", "worker", "--redis"); r.code != 0 {
		t.Fatalf("doctor with the name alone: exit %d, want 0 as docs/doctor.md says\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := s.c.Do(s.ctx, s.c.B().Set().Key("plaita:flow:jobs:dlq").Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	r := run(t, s.env, "doctor", "--role", "worker", "--redis")
	if r.code != 2 || !strings.Contains(r.stdout+r.stderr, `PLAITA_DLQ_KEY "plaita:flow:jobs:dlq" holds a string`) {
		t.Fatalf("doctor with a key at the dead-letter name: exit %d, want 2 with the docs' words\n%s%s", r.code, r.stdout, r.stderr)
	}
}
