package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/test/webtest"
	"plaita/web/api"
)

// Local mode over real HTTP: no Redis; the roles run in the console's process on its database
// (roles.LocalMode). The API publishes flows, runs executions through a delay, an approval and
// a correlated event wait, streams one live, and serves what the roles serve on Redis too: the
// dead letters, the schedules, the event list and the cluster.
func TestLocalModeOverHTTP(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithLocal())
	var h api.HealthReport
	f.Client(nil).Want(t, http.StatusOK, http.MethodGet, "/health", nil).Decode(t, &h)
	if h.Mode != "local" || h.Status != "degraded" || !strings.Contains(h.Warning, "LOCAL MODE") {
		t.Fatalf("health: %+v", h)
	}
	boss := f.Admin("")
	def := json.RawMessage(`{"id": "buy", "start": "pause", "nodes": [
	  {"id": "pause", "type": "delay", "params": {"seconds": 0.2}, "next": "ask"},
	  {"id": "ask", "type": "approval", "params": {"message": "buy?"}, "next": "wait"},
	  {"id": "wait", "type": "wait_event", "params": {"event_type": "paid", "match": "EVENT.order == INPUT.order"}, "next": "done"},
	  {"id": "done", "type": "end", "params": {"output": "{{ EVENT.order }}"}}]}`)
	var pub api.FlowPublished
	boss.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": def}).Decode(t, &pub)
	if v, err := f.DB.FlowVersion(t.Context(), "default", "buy", pub.Version); err != nil || v.PublishedBy == "" {
		t.Fatalf("the version's record: %+v %v", v, err)
	}
	// The same definition again is already published; a changed one under its version a 409.
	boss.Want(t, http.StatusOK, http.MethodPost, "/api/flows", map[string]any{"definition": def})
	changed := json.RawMessage(strings.Replace(string(def), `"buy?"`, `"buy now?"`, 1))
	if p := boss.Want(t, http.StatusConflict, http.MethodPost, "/api/flows", map[string]any{"definition": changed, "version": pub.Version}).Problem(t); p.Code != "flow_version_conflict" {
		t.Fatalf("changed definition: %+v", p)
	}
	var list api.FlowList
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/flows", nil).Decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].FlowID != "buy" || list.Items[0].Latest != pub.Version {
		t.Fatalf("flows: %+v", list)
	}

	var started api.ExecutionStarted
	boss.Want(t, http.StatusCreated, http.MethodPost, "/api/executions", map[string]any{"flow_id": "buy", "input": map[string]any{"order": "o-1"}},
		"Idempotency-Key", "k-1").Decode(t, &started)
	if started.Queue == "" || started.ExecutionID == "" {
		t.Fatalf("started: %+v", started)
	}
	id := started.ExecutionID
	// A client's retry of the same key starts nothing new.
	var again api.ExecutionStarted
	boss.Want(t, http.StatusOK, http.MethodPost, "/api/executions", map[string]any{"flow_id": "buy"}, "Idempotency-Key", "k-1").Decode(t, &again)
	if !again.Replayed || again.ExecutionID != id {
		t.Fatalf("replayed start: %+v", again)
	}
	s, r := boss.Stream(t, "/api/executions/"+id+"/events")
	if r.Status != http.StatusOK {
		t.Fatalf("events stream: %d %s", r.Status, r.Raw)
	}
	if ev := s.Next(t, eventWait); ev.Event != "snapshot" {
		t.Fatalf("first event %+v", ev)
	}
	waitView := func(what string, cond func(api.ExecutionView) bool) api.ExecutionView {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var v api.ExecutionView
			boss.Want(t, http.StatusOK, http.MethodGet, "/api/executions/"+id, nil).Decode(t, &v)
			if cond(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, v.Execution)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	at := func(node string) func(api.ExecutionView) bool {
		return func(v api.ExecutionView) bool {
			return v.Execution != nil && v.Execution.Status == state.Suspended && v.Execution.CurrentNode == node
		}
	}
	v := waitView("the approval after the delay", at("ask"))
	if v.Waiting == nil || v.Waiting.By != "console" || len(v.Waiting.Problems) != 0 {
		t.Fatalf("waiting: %+v", v.Waiting)
	}
	var approvals struct {
		Items []struct {
			ExecutionID string `json:"execution_id"`
		}
	}
	// The worker saves the suspended state, then lists its approval: the list may lag the
	// state by a moment.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		boss.Want(t, http.StatusOK, http.MethodGet, "/api/approvals", nil).Decode(t, &approvals)
		if len(approvals.Items) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(approvals.Items) != 1 || approvals.Items[0].ExecutionID != id {
		t.Fatalf("approvals: %+v", approvals)
	}
	boss.Want(t, http.StatusOK, http.MethodPost, "/api/approvals/"+id, map[string]any{"approved": true, "comment": "ok"})
	waitView("the event wait after the answer", at("wait"))
	// An event of another order wakes nothing; the order's own completes it.
	boss.Want(t, http.StatusCreated, http.MethodPost, "/api/events", map[string]any{"type": "paid", "data": map[string]any{"order": "o-2"}})
	boss.Want(t, http.StatusCreated, http.MethodPost, "/api/events", map[string]any{"type": "paid", "data": map[string]any{"order": "o-1"}})
	done := waitView("completed", func(v api.ExecutionView) bool { return v.Execution != nil && v.Execution.Status == state.Completed })
	if done.Execution.Output != "o-1" {
		t.Fatalf("output %v", done.Execution.Output)
	}
	// The stream follows to the end.
	for {
		ev := s.Next(t, eventWait)
		if ev.Event == "end" {
			break
		}
	}
	var page api.Timeline
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/executions/"+id+"/timeline", nil).Decode(t, &page)
	if page.Status != state.Completed || len(page.Items) == 0 {
		t.Fatalf("timeline: %+v", page)
	}
	// A resume of a completed execution is refused as in cluster mode.
	if p := boss.Want(t, http.StatusConflict, http.MethodPost, "/api/executions/"+id+"/resume", map[string]any{"type": "continue"}).Problem(t); p.Code != "terminal" {
		t.Fatalf("resume of a completed execution: %+v", p)
	}
	// What the roles serve on Redis is served here too: nothing answers 503.
	for _, path := range []string{"/api/dead-letters", "/api/schedules", "/api/events", "/api/cluster/status"} {
		boss.Want(t, http.StatusOK, http.MethodGet, path, nil)
	}
	var events api.EventList
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/events?type=paid", nil).Decode(t, &events)
	if len(events.Items) != 2 {
		t.Fatalf("events: %+v", events)
	}
	boss.Want(t, http.StatusOK, http.MethodDelete, "/api/executions/"+id, nil)
	boss.Want(t, http.StatusNotFound, http.MethodGet, "/api/executions/"+id, nil)
}
