//go:build !e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"plaita/engine/state"
)

// actionJSON is what cancel, resume and delete print with --json.
type actionJSON struct {
	ExecutionID string `json:"execution_id"`
	TenantID    string `json:"tenant_id"`
	Action      string `json:"action"`
	Result      string `json:"result"`
	Was         string `json:"was"`
	Enqueued    bool   `json:"enqueued"`
	MessageID   string `json:"message_id"`
	Deleted     bool   `json:"deleted"`
}

func decodeAction(t *testing.T, r result) actionJSON {
	t.Helper()
	var a actionJSON
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	return a
}

// TestCLIExecutionJSONAndCancelTwice: every execution subcommand takes --json; a second cancel
// of a cancelled execution is a success that says so.
func TestCLIExecutionJSONAndCancelTwice(t *testing.T) {
	t.Parallel()
	fx := newResumeFixture(t)
	orderHash := fx.publishVersion("order", "1", orderFlow)
	fx.seed("ex-wait", "order", "1", orderHash, suspendedOrder)

	r := fx.resume(0, "ex-wait", "--type", "timeout", "--json")
	if a := decodeAction(t, r); a.Action != "resume" || a.Result != "enqueued" || !a.Enqueued || a.Was != "suspended" ||
		a.ExecutionID != "ex-wait" || a.TenantID != "default" || a.MessageID == "" {
		t.Fatalf("resume --json: %+v\n%s", a, r.stdout)
	}

	r = run(t, fx.env, "execution", "cancel", "ex-wait", "--json", "--quiet")
	if a := decodeAction(t, r); r.code != 0 || a.Action != "cancel" || a.Result != "cancel_requested" || !a.Enqueued ||
		a.Was != "suspended" || a.MessageID == "" {
		t.Fatalf("cancel --json: exit %d %+v\n%s", r.code, a, r.stderr)
	}

	fx.seed("ex-cancelled", "order", "1", orderHash, func(st *state.Execution) { st.Status = state.Cancelled })
	before := fx.queued()
	r = run(t, fx.env, "execution", "cancel", "ex-cancelled", "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, "already cancelled") {
		t.Fatalf("cancel of a cancelled execution: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, fx.env, "execution", "cancel", "ex-cancelled", "--json", "--quiet")
	if a := decodeAction(t, r); r.code != 0 || a.Result != "already_cancelled" || a.Enqueued || a.Was != "cancelled" {
		t.Fatalf("cancel --json of a cancelled execution: exit %d %+v", r.code, a)
	}
	if n := fx.queued(); n != before {
		t.Fatalf("cancelling a cancelled execution enqueued %d message(s)", n-before)
	}
	// Completed and failed executions stay refused.
	fx.seed("ex-done", "order", "1", orderHash, func(st *state.Execution) { st.Status = state.Completed })
	fx.seed("ex-err", "order", "1", orderHash, failedAt("FlowFailed"))
	for _, id := range []string{"ex-done", "ex-err"} {
		if r = run(t, fx.env, "execution", "cancel", id, "--quiet"); r.code != 1 || !strings.Contains(r.stderr, "already") {
			t.Fatalf("cancel of %s: exit %d\n%s", id, r.code, r.stderr)
		}
	}

	r = run(t, fx.env, "execution", "delete", "ex-done", "--json", "--quiet")
	if a := decodeAction(t, r); r.code != 0 || a.Action != "delete" || a.Result != "deleted" || !a.Deleted || a.Was != "completed" {
		t.Fatalf("delete --json: exit %d %+v\n%s", r.code, a, r.stderr)
	}
}

// TestCLILogFlagsEverywhere: run, start and every execution subcommand take the log flags.
func TestCLILogFlagsEverywhere(t *testing.T) {
	t.Parallel()
	fx := newResumeFixture(t)
	orderHash := fx.publishVersion("order", "1", orderFlow)
	fx.seed("ex-a", "order", "1", orderHash, suspendedOrder)
	fx.seed("ex-b", "order", "1", orderHash, suspendedOrder)
	flow := writeFile(t, "order.json", orderFlow)
	hello := repoFlow(t, "hello.json")

	commands := [][]string{
		{"run", hello, "--state-dir", t.TempDir()},
		{"start", flow},
		{"execution", "list"},
		{"execution", "show", "ex-a"},
		{"execution", "resume", "ex-a", "--type", "timeout"},
		{"execution", "cancel", "ex-a"},
		{"execution", "delete", "ex-b"},
	}
	for _, flags := range [][]string{
		{"--log-level", "debug", "--log-format", "json"},
		{"--quiet", "--log-format", "console"},
		{"--log-level", "warn", "--log-format", "auto"},
	} {
		for _, c := range commands {
			args := append(append([]string{}, c...), flags...)
			r := run(t, fx.env, args...)
			if r.code != 0 {
				t.Errorf("%v: exit %d\n%s", args, r.code, r.stderr)
			}
			if c[len(c)-1] == "ex-b" { // deleted: seed it again for the next round
				fx.seed("ex-b", "order", "1", orderHash, suspendedOrder)
			}
			if c[1] == "cancel" {
				fx.seed("ex-a", "order", "1", orderHash, suspendedOrder)
			}
		}
	}
}
