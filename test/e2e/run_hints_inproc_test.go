//go:build !e2e

package e2e

import (
	"strings"
	"testing"
)

// TestRunHintsAreAccepted: what `plaita run` prints to do next is accepted when run.
func TestRunHintsAreAccepted(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()

	// payment-wait.json: the event command satisfies the flow's own match.
	r := run(t, nil, "run", repoFlow(t, "payment-wait.json"), "--state-dir", stateDir, "--quiet")
	if r.code != 0 {
		t.Fatalf("payment-wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	cmd, ok := hintCommand(t, r.stdout, "deliver the event with")
	if !ok {
		t.Fatalf("no event command:\n%s", r.stdout)
	}
	mustContain(t, "event command", strings.Join(cmd, " "), `"type": "payment"`, `"order_id": "ord-1"`, `"status": "paid"`)
	mustContain(t, "payment-wait hints", r.stdout, "the flow also reads EVENT.payment_id")
	r = run(t, nil, append(cmd, "--quiet")...)
	if strings.Contains(r.stderr, "resume refused") {
		t.Fatalf("the printed event command %v was refused:\n%s", cmd, r.stderr)
	}
	// The event was taken and, carrying the status the flow's condition compares with, completes
	// the order: the documented command goes the way the flow was written to go.
	timelineHas(t, r.stdout, "wait_payment", "resumed", "paid", "completed")

	// The timeout command is accepted too.
	r = run(t, nil, "run", repoFlow(t, "payment-wait.json"), "--state-dir", stateDir, "--quiet")
	if cmd, ok = hintCommand(t, r.stdout, "time it out with"); !ok {
		t.Fatalf("no timeout command:\n%s", r.stdout)
	}
	if r = run(t, nil, append(cmd, "--quiet")...); r.code != 0 || !strings.Contains(r.stdout, `"status": "expired"`) {
		t.Fatalf("the printed timeout command %v: exit %d\n%s\n%s", cmd, r.code, r.stdout, r.stderr)
	}

	// runaway-loop.json: no retry command (the engine refuses it), what to do instead.
	r = run(t, nil, "run", repoFlow(t, "runaway-loop.json"), "--state-dir", stateDir, "--quiet")
	if r.code != 1 || !strings.Contains(r.stdout, "StepLimitExceeded") {
		t.Fatalf("runaway-loop: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "runaway-loop", r.stdout, "used all its steps", "new execution", "plaita run "+repoFlow(t, "runaway-loop.json"))
	mustNotContain(t, "runaway-loop", r.stdout, "--type retry")

	// refund-failure.json ends at a fail node that names its own error type
	// (RefundLimitExceeded): no retry command (it would end the same way), what to do instead.
	r = run(t, nil, "run", repoFlow(t, "refund-failure.json"), "--state-dir", stateDir, "--quiet")
	if r.code != 1 || !strings.Contains(r.stdout, "RefundLimitExceeded") {
		t.Fatalf("refund-failure: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "refund-failure", r.stdout, "fail node", "new execution")
	mustNotContain(t, "refund-failure", r.stdout, "--type retry")

	// A match no example can be built for: the expression and what the event must satisfy.
	flow := writeFile(t, "big.json", `{"id": "big", "start": "wait", "nodes": [
	  {"id": "wait", "type": "wait_event", "params": {"event_type": "order.paid", "match": "EVENT.amount > 10"}, "next": "done"},
	  {"id": "done", "type": "end"}]}`)
	r = run(t, nil, "run", flow, "--state-dir", stateDir, "--quiet")
	mustContain(t, "unguessable match", r.stdout, "match:     EVENT.amount > 10", "must satisfy")
	mustNotContain(t, "unguessable match", r.stdout, "--type event")

	// Nested paths, && and a comparison written the other way round.
	flow = writeFile(t, "nested.json", `{"id": "nested", "start": "wait", "vars": {"shop": "s1"}, "nodes": [
	  {"id": "wait", "type": "wait_event", "params": {"event_type": "order.paid",
	    "match": "EVENT.data.order == INPUT.order && VARS.shop == EVENT?.shop && EVENT.kind == 'card'"}, "next": "done"},
	  {"id": "done", "type": "end", "params": {"output": "{{ EVENT.data.order }}"}}]}`)
	r = run(t, nil, "run", flow, "--input", `{"order": [1, 2]}`, "--state-dir", stateDir, "--quiet")
	if cmd, ok = hintCommand(t, r.stdout, "deliver the event with"); !ok {
		t.Fatalf("no event command for the nested match:\n%s", r.stdout)
	}
	if r = run(t, nil, append(cmd, "--quiet")...); r.code != 0 || !strings.Contains(r.stdout, ": completed") {
		t.Fatalf("the printed event command %v: exit %d\n%s\n%s", cmd, r.code, r.stdout, r.stderr)
	}
}
