//go:build !e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
)

// `plaita dlq list|show|replay` with a real worker: a start of a flow not published yet is
// dead-lettered; the dead letter is listed for its tenant only, shown with its payload, and once
// the flow is published a replay runs it — once: a second replay enqueues nothing.
func TestE2EDLQCommands(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	s.start("worker", nil)
	id := s.enqueue("late")
	waitFor(t, "the start is dead-lettered", 60*time.Second, func() bool { return s.dlqLen() == 1 }, s.procs...)

	var list struct {
		Items []struct {
			ID          string `json:"dlq_id"`
			Reason      string `json:"reason"`
			ExecutionID string `json:"execution_id"`
			TenantID    string `json:"tenant_id"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(s.cli("dlq", "list", "--json")), &list); err != nil || len(list.Items) != 1 ||
		list.Items[0].Reason != "flow_not_found" || list.Items[0].ExecutionID != id {
		t.Fatalf("dlq list: %+v %v", list, err)
	}
	dlqID := list.Items[0].ID
	if out := s.cli("dlq", "list", "--tenant", "acme"); !strings.Contains(out, "0 dead letter(s)") {
		t.Fatalf("another tenant sees the dead letter:\n%s", out)
	}
	if out := s.cli("dlq", "list", "--all-tenants"); !strings.Contains(out, dlqID) {
		t.Fatalf("--all-tenants misses it:\n%s", out)
	}
	mustContain(t, "dlq show", s.cli("dlq", "show", dlqID), "reason:     flow_not_found", id, `"flow_id":"late"`)
	if r := run(t, s.env, "dlq", "replay", dlqID, "--tenant", "acme", "--quiet"); r.code != 1 || !strings.Contains(r.stderr, "no dead letter") {
		t.Fatalf("replay from another tenant: exit %d %s", r.code, r.stderr)
	}

	s.publish("late", `{"id":"late","start":"done","nodes":[{"id":"done","type":"end","params":{"output":"ran"}}]}`)
	mustContain(t, "dlq replay", s.cli("dlq", "replay", dlqID), "replayed as", id)
	if st := s.waitStatus(id, "", state.Completed, 60*time.Second); st.Output != "ran" {
		t.Fatalf("the replayed start: %+v", st.Output)
	}
	mustContain(t, "second replay", s.cli("dlq", "replay", dlqID), "already replayed", "nothing enqueued")
	if r := run(t, map[string]string{"PLAITA_REDIS_URL": s.env["PLAITA_REDIS_URL"], "PLAITA_QUEUE_NAME": ""}, "dlq", "list"); r.code != 2 ||
		!strings.Contains(r.stderr, "PLAITA_QUEUE_NAME") {
		t.Fatalf("dlq list with a rejected configuration: exit %d %s", r.code, r.stderr)
	}
}
