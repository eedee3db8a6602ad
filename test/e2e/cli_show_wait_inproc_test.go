//go:build !e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// `plaita execution show ID --wait` and `plaita approval list --wait`: a script follows an
// execution it started, answers the approval it asks for as soon as it asks, and waits for the
// end — the tutorial's steps (docs/tutorial.md), with no polling loop of its own.
func TestCLIShowAndApprovalListWait(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	env := s.env
	ask := writeFile(t, "ask.json", askFlow)
	s.cli("flow", "publish", ask, "--quiet")

	// Queued (no worker yet): show --wait waits — had it returned then, it would have shown a
	// queued execution — and the worker's run ends the wait at the suspension.
	id := strings.TrimSpace(s.cli("start", "ask", "--quiet"))
	shown := make(chan result, 1)
	go func() { shown <- run(t, env, "execution", "show", id, "--wait", "--timeout", "60", "--quiet") }()
	listed := make(chan result, 1)
	go func() { listed <- run(t, env, "approval", "list", "--wait", "--timeout", "60", "--quiet") }()
	s.start("worker", nil)
	r := <-shown
	if r.code != 0 || !strings.Contains(r.stdout, "execution "+id+": suspended") || !strings.Contains(r.stdout, "approval") {
		t.Fatalf("show --wait: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = <-listed
	if r.code != 0 || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "ship it?") {
		t.Fatalf("approval list --wait: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// --until completed: past the approval to the end.
	ended := make(chan result, 1)
	go func() {
		ended <- run(t, env, "execution", "show", id, "--wait", "--until", "completed", "--timeout", "60", "--quiet")
	}()
	s.cli("approval", "approve", id, "--quiet")
	r = <-ended
	if r.code != 0 || !strings.Contains(r.stdout, "execution "+id+": completed") {
		t.Fatalf("show --wait --until completed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// An unknown id fails at once, not at the timeout; bad usage is exit 2; nothing pending
	// times out with exit 1.
	began := time.Now()
	r = run(t, env, "execution", "show", "ex_000000000000000000000000", "--wait", "--timeout", "60", "--quiet")
	if r.code != 1 || time.Since(began) > 30*time.Second {
		t.Fatalf("show --wait of an unknown id: exit %d after %s\n%s", r.code, time.Since(began), r.stderr)
	}
	for _, args := range [][]string{
		{"execution", "show", id, "--until", "completed"},
		{"execution", "show", id, "--timeout", "5"},
		{"execution", "show", id, "--wait", "--until", "done"},
		{"approval", "list", "--timeout", "5"},
	} {
		if r := run(t, env, append(args, "--quiet")...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (bad usage)\n%s", args, r.code, r.stderr)
		}
	}
	r = run(t, env, "approval", "list", "--wait", "--timeout", "1", "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, "no approval pending after 1s") {
		t.Fatalf("approval list --wait with none pending: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// show --wait returns once an event wait is registered, not only saved: the publish a script
// sends right after it counts the wait (and the filter's notification, not its reconciler,
// delivers it). A worker saves the suspended state a round trip before it registers the wait.
func TestCLIShowWaitReturnsOnceTheEventWaitIsRegistered(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	s.start("worker", nil)
	s.start("filter", nil)
	flow := writeFile(t, "paid.json", `{"id":"paid","version":"1","start":"w","nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"paid","match":"EVENT.order == INPUT.order","timeout":3600},"next":"done"},
		{"id":"done","type":"end"}]}`)
	s.cli("flow", "publish", flow, "--quiet")
	for i := range 5 {
		order := fmt.Sprintf("o-%d", i)
		id := strings.TrimSpace(s.cli("start", "paid", "--input", `{"order": "`+order+`"}`, "--quiet"))
		s.cli("execution", "show", id, "--wait", "--timeout", "60", "--quiet")
		out := s.cli("event", "publish", "paid", "--data", `{"order": "`+order+`"}`, "--quiet")
		if !strings.Contains(out, "1 execution(s) of tenant default wait for \"paid\"") {
			t.Fatalf("publish right after show --wait (round %d) counts no wait:\n%s", i, out)
		}
		s.cli("execution", "show", id, "--wait", "--until", "completed", "--timeout", "60", "--quiet")
	}
}
