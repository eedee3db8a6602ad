//go:build !e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
)

// `plaita start --idempotency-key`: a retry of a start names the execution it made and
// enqueues nothing; the same key for another flow is refused; the key is the console's
// Idempotency-Key (control.StartOnce), so a retry may come from either front end.
func TestCLIStartWithAnIdempotencyKeyRunsOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	s.start("worker", nil)
	flow := writeFile(t, "hello.json", `{"id":"hello","start":"done","nodes":[{"id":"done","type":"end","params":{"output":"hi"}}]}`)
	first, r := startFile(t, s.env, flow, "--idempotency-key", "order-42")
	if r.code != 0 || first.ExecutionID == "" {
		t.Fatalf("first start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	s.waitStatus(first.ExecutionID, "", state.Completed, 30*time.Second)
	queued := s.streamLen()
	for _, args := range [][]string{{flow, "--idempotency-key", "order-42"}, {"hello", "--idempotency-key", "order-42"}} {
		again, r := startFile(t, s.env, args...)
		if r.code != 0 || again.ExecutionID != first.ExecutionID {
			t.Fatalf("retry %v: exit %d, id %s, want %s\n%s", args, r.code, again.ExecutionID, first.ExecutionID, r.stderr)
		}
	}
	if n := s.streamLen(); n != queued {
		t.Fatalf("the retries enqueued %d task(s)", n-queued)
	}
	other := writeFile(t, "other.json", `{"id":"other","start":"done","nodes":[{"id":"done","type":"end"}]}`)
	if _, r := startFile(t, s.env, other, "--idempotency-key", "order-42"); r.code != 1 || !strings.Contains(r.stderr, "use a new key") {
		t.Fatalf("the key for another flow: exit %d\n%s", r.code, r.stderr)
	}
	if _, r := startFile(t, s.env, "hello", "--idempotency-key", ""); r.code != 2 {
		t.Fatalf("an empty key: exit %d\n%s", r.code, r.stderr)
	}
}
