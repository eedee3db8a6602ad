//go:build !e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestConsoleRunsAFlowWithEveryRoleE2E: `plaita console`, `plaita worker`, `plaita filter` and
// `plaita delay` in process, one private Redis. A flow published over the API and started
// over it is followed over Server-Sent Events from its start to its end: a delay the delay role
// wakes, a wait for an event published over POST /api/events that the filter delivers, an
// approval answered over POST /api/approvals/{id}, and completed — each timeline entry once,
// in order — then the stream's end. The execution's view says why each branch went where it
// went, and who answered.
func TestConsoleRunsAFlowWithEveryRoleE2E(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()), withEnv(map[string]string{"PLAITA_EVENT_RECONCILE_INTERVAL": "1"}))
	con := s.startConsole(nil)
	for _, role := range []string{"worker", "filter", "delay"} {
		s.start(role, nil)
	}
	def := `{"id":"fulfil","version":"1","start":"pause","nodes":[
		{"id":"pause","type":"delay","params":{"seconds":4},"next":"paid"},
		{"id":"paid","type":"wait_event","params":{"event_type":"order.paid","match":"EVENT.order == INPUT.order","timeout":3600},"next":"big"},
		{"id":"big","type":"condition","params":{"expr":"INPUT.amount > 100"},"branches":{"true":"ask","false":"done"}},
		{"id":"ask","type":"approval","params":{"message":"ship order {{ INPUT.order }}?","on_reject":"done"},"next":"done"},
		{"id":"done","type":"end"}]}`
	if code, body := con.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)}); code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, body)
	}
	code, started := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "fulfil", "input": map[string]any{"order": 42, "amount": 500}})
	if code != http.StatusCreated {
		t.Fatalf("start: %d %v", code, started)
	}
	id := fmt.Sprint(started["execution_id"])
	st := con.follow(t, id)
	if ev := st.Next(t, 30*time.Second); ev.Event != "snapshot" {
		t.Fatalf("first event %+v", ev)
	}
	// suspension waits until the execution's view says it waits for kind: a worker publishes a
	// live entry before it saves the state (control/live.go), so the stream's suspended entry
	// may come a moment before the state that the view reads.
	suspension := func(kind string) map[string]any {
		t.Helper()
		var view map[string]any
		waitFor(t, "the view to say suspended at "+kind, 10*time.Second, func() bool {
			_, view = con.call(t, http.MethodGet, "/api/executions/"+id, nil)
			ex, _ := view["execution"].(map[string]any)
			sus, _ := ex["suspend"].(map[string]any)
			return ex["status"] == "suspended" && sus["kind"] == kind
		}, s.procs...)
		return view
	}

	last, events := readUntil(t, st, 0, "suspended", s.procs...)
	if events[0] != "started" {
		t.Fatalf("entries %v", events)
	}
	suspension("delay") // nothing but the delay role wakes it (in 4 s: time for the view to be read, however loaded the machine)
	last, _ = readUntil(t, st, last, "resumed", s.procs...)
	last, _ = readUntil(t, st, last, "suspended", s.procs...)
	view := suspension("event")
	if waiting, _ := view["waiting"].(map[string]any); waiting == nil || waiting["by"] != "filter" {
		t.Fatalf("the wake-up report of the wait: %v", view["waiting"])
	}

	// An event of another order wakes nothing; this order's does, through the filter.
	code, pub := con.call(t, http.MethodPost, "/api/events", map[string]any{"type": "order.paid", "id": "pay-42", "data": map[string]any{"order": 42}})
	if code != http.StatusCreated || pub["filters_alive"].(float64) < 1 {
		t.Fatalf("publish the event: %d %v", code, pub)
	}
	last, _ = readUntil(t, st, last, "resumed", s.procs...)
	last, _ = readUntil(t, st, last, "suspended", s.procs...)
	suspension("approval")
	_, pending := con.call(t, http.MethodGet, "/api/approvals", nil)
	if items, _ := pending["items"].([]any); len(items) != 1 || items[0].(map[string]any)["execution_id"] != id {
		t.Fatalf("pending approvals: %v", pending)
	}
	if code, done := con.call(t, http.MethodPost, "/api/approvals/"+id, map[string]any{"approved": true, "comment": "paid"}); code != http.StatusOK || done["enqueued"] != true {
		t.Fatalf("approve: %d %v", code, done)
	}
	last, _ = readUntil(t, st, last, "completed", s.procs...)
	wantStreamEnd(t, st, last)

	_, view = con.call(t, http.MethodGet, "/api/executions/"+id, nil)
	branches, _ := view["branches"].([]any)
	var whys []string
	for _, b := range branches {
		m := b.(map[string]any)
		whys = append(whys, fmt.Sprintf("%v: %v -> %v", m["node"], m["why"], m["to"]))
	}
	if len(whys) != 2 || whys[0] != "big: INPUT.amount > 100 is true (INPUT.amount = 500) -> ask" || whys[1] != "ask: approved by admin-key: paid -> done" {
		t.Fatalf("branches %q", whys)
	}
}
