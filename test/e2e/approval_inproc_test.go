//go:build !e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
)

// `plaita approval list|approve|reject` with a real worker: the pending approvals are listed
// for their tenant only, an answer carries who gave it into the flow, an answer the worker would
// refuse is refused, and an execution answered another way leaves the listing.
func TestE2EApprovalCommands(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	s.start("worker", nil)
	flow := repoFlow(t, "expense-approval.json")
	yes := s.startFlow(flow, "", `{"amount": 500, "employee": "kim"}`)
	no := s.startFlow("expense-approval", "", `{"amount": 700}`)
	other := s.startFlow("expense-approval", "", `{"amount": 900}`)
	for _, id := range []string{yes, no, other} {
		s.waitStatus(id, "", state.Suspended, 60*time.Second)
	}

	var list struct {
		Items []struct {
			ExecutionID string `json:"execution_id"`
			Node        string `json:"node"`
			Message     string `json:"message"`
		} `json:"items"`
	}
	// Three starts in a row may share a millisecond, and two consumers suspend them in either
	// order: the list holds the three, each with its own node and message.
	if err := json.Unmarshal([]byte(s.cli("approval", "list", "--json")), &list); err != nil || len(list.Items) != 3 {
		t.Fatalf("approval list: %+v %v", list, err)
	}
	got := map[string]string{}
	for _, it := range list.Items {
		got[it.ExecutionID] = it.Node + " " + it.Message
	}
	if !strings.Contains(got[yes], "manager_approval") || !strings.Contains(got[yes], "500 EUR for kim") ||
		!strings.Contains(got[no], "700 EUR") || !strings.Contains(got[other], "900 EUR") {
		t.Fatalf("approval list: %v", got)
	}
	if out := s.cli("approval", "list", "--tenant", "acme"); !strings.Contains(out, "0 pending approval(s)") {
		t.Fatalf("another tenant sees them:\n%s", out)
	}

	mustContain(t, "approve", s.cli("approval", "approve", yes, "--by", "lee", "--comment", "fine"), "approved by lee")
	if st := s.waitStatus(yes, "", state.Completed, 60*time.Second); !strings.Contains(string(mustJSON(t, st.Output)), `"by":"lee"`) {
		t.Fatalf("the approved expense's output: %s", mustJSON(t, st.Output))
	}
	mustContain(t, "reject", s.cli("approval", "reject", no, "--by", "lee", "--comment", "too much"), "rejected by lee")
	if st := s.waitTerminal(no, 60*time.Second, s.procs...); st.Status != state.Completed || !strings.Contains(string(mustJSON(t, st.Output)), `"approved":false`) {
		t.Fatalf("the rejected expense: %s %s", st.Status, mustJSON(t, st.Output))
	}
	// Answered again: the execution has moved on, the answer is refused with what is accepted.
	if r := run(t, s.env, "approval", "approve", yes, "--by", "lee", "--quiet"); r.code != 1 || !strings.Contains(r.stderr, "completed") {
		t.Fatalf("a second answer: exit %d %s", r.code, r.stderr)
	}
	// Answered through execution resume: the listing no longer shows it.
	s.cli("execution", "resume", other, "--type", "approval", "--data", `{"approved": true, "by": "ops"}`)
	s.waitStatus(other, "", state.Completed, 60*time.Second)
	if out := s.cli("approval", "list"); !strings.Contains(out, "0 pending approval(s)") {
		t.Fatalf("answered approvals still listed:\n%s", out)
	}
	if r := run(t, s.env, "approval", "approve", "bad:id", "--by", "x"); r.code != 2 {
		t.Fatalf("a bad id: exit %d %s", r.code, r.stderr)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
