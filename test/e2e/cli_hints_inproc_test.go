//go:build !e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
)

// TestCLIHintsOfTheExampleFlowsAreAccepted runs payment-wait.json and runaway-loop.json on a
// worker: the event command that `start --wait` and `execution show` print is the one the
// worker takes, and a step-limited execution gets no retry command.
func TestCLIHintsOfTheExampleFlowsAreAccepted(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	env := s.env
	s.start("worker", nil)

	r := run(t, env, "start", repoFlow(t, "payment-wait.json"), "--wait", "--quiet")
	if r.code != 1 || !strings.Contains(r.stdout, ": suspended") {
		t.Fatalf("payment-wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	id := strings.TrimSuffix(strings.Fields(r.stdout)[1], ":")
	mustContain(t, "payment-wait summary", r.stdout, "match:     EVENT.order_id == VARS.order_id")
	// The direct resume; the publish printed before it is TestCLIStartWaitEventHintPublishes's.
	cmd, ok := hintCommand(t, r.stdout, "or resume it directly with")
	if !ok {
		t.Fatalf("no event command:\n%s", r.stdout)
	}
	show := run(t, env, "execution", "show", id, "--quiet")
	if again, _ := hintCommand(t, show.stdout, "or resume it directly with"); strings.Join(again, " ") != strings.Join(cmd, " ") {
		t.Fatalf("show prints another event command than start --wait:\n%s\nvs\n%v", show.stdout, cmd)
	}
	if r = run(t, env, append(cmd, "--quiet")...); r.code != 0 {
		t.Fatalf("the printed event command %v: exit %d\n%s", cmd, r.code, r.stderr)
	}
	// The worker took the event, and the printed event goes the way the flow was written to go:
	// beside the match's order_id it carries the status the flow's next condition compares with,
	// so the documented command completes the order (it once ended in PaymentDeclined). What
	// else the flow reads is named.
	mustContain(t, "payment-wait hints", r.stdout+show.stdout, "the flow also reads EVENT.payment_id")
	st := s.waitStatus(id, "", state.Completed, 30*time.Second)
	resumed := false
	for _, e := range st.Timeline {
		resumed = resumed || (e.Node == "wait_payment" && e.Event == "resumed")
	}
	if out, _ := st.Output.(map[string]any); !resumed || out["status"] != "paid" {
		t.Fatalf("after the printed event: output %v, timeline %+v", st.Output, st.Timeline)
	}

	r = run(t, env, "start", repoFlow(t, "runaway-loop.json"), "--wait", "--quiet")
	if r.code != 1 || !strings.Contains(r.stdout, "StepLimitExceeded") {
		t.Fatalf("runaway-loop: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	id = strings.TrimSuffix(strings.Fields(r.stdout)[1], ":")
	for what, out := range map[string]string{"start --wait": r.stdout, "show": run(t, env, "execution", "show", id, "--quiet").stdout} {
		mustContain(t, "runaway-loop "+what, out, "used all its steps", "new execution")
		mustNotContain(t, "runaway-loop "+what, out, "--type retry")
	}

	// expense-approval: the printed approval command completes it.
	r = run(t, env, "start", repoFlow(t, "expense-approval.json"), "--wait", "--quiet")
	id = strings.TrimSuffix(strings.Fields(r.stdout)[1], ":")
	cmd, ok = hintCommand(t, r.stdout, "approve with")
	if !ok {
		t.Fatalf("no approval command:\n%s", r.stdout)
	}
	if r = run(t, env, append(cmd, "--quiet")...); r.code != 0 {
		t.Fatalf("the printed approval command %v: exit %d\n%s", cmd, r.code, r.stderr)
	}
	s.waitStatus(id, "", state.Completed, 30*time.Second)
}
