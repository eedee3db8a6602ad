package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/test/webtest"
	"plaita/web/api"
)

// GET /api/executions/{id} carries a running execution's progress (its node's retry back-off)
// and its timers; GET /api/executions filters suspended ones by due time.
func TestExecutionProgressAndDueFilter(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	admin := f.Admin("")
	def := `{"id":"flaky","version":"1","start":"a","nodes":[{"id":"a","type":"log","params":{"message":"x"},"retry":{"max_attempts":4,"backoff_seconds":300},"next":"b"},{"id":"b","type":"end"}]}`
	admin.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)})
	now := time.Now().UTC()
	in1h := now.Add(time.Hour)
	f.Save(t, &state.Execution{ExecutionID: "ex_backoff", TenantID: "default", FlowID: "flaky", FlowVersion: "1", Status: state.Running, CurrentNode: "a",
		StartTime: now, LastUpdate: now, Context: map[string]any{}, NodeAttempts: map[string]int{"a": 1},
		Timeline: []state.TimelineEntry{{Seq: 1, Time: state.Stamp(now), Event: "retry", Node: "a", Detail: "attempt 1 of 4 failed: boom; next in 5m0s"}}})
	f.Save(t, &state.Execution{ExecutionID: "ex_nap", TenantID: "default", FlowID: "flaky", FlowVersion: "1", Status: state.Suspended, CurrentNode: "a",
		StartTime: now, LastUpdate: now, Context: map[string]any{}, Suspend: &state.Suspend{Kind: state.SuspendDelay, Node: "a", Since: now, Due: &in1h}})

	var v api.ExecutionView
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_backoff", nil).Decode(t, &v)
	if v.Progress == nil || v.Progress.Retry == nil || v.Progress.Retry.Attempt != 1 || v.Progress.Retry.MaxAttempts != 4 ||
		len(v.Timers) != 1 || v.Timers[0].Kind != "retry_backoff" || !v.Timers[0].Due.Equal(v.Progress.Retry.Next) {
		t.Fatalf("progress %+v timers %+v", v.Progress, v.Timers)
	}
	v = api.ExecutionView{}
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_nap", nil).Decode(t, &v)
	if v.Progress != nil || len(v.Timers) != 1 || v.Timers[0].Kind != "delay" || !v.Timers[0].Due.Equal(in1h) {
		t.Fatalf("a delay's timers %+v", v.Timers)
	}

	var list api.ExecutionList
	q := url.Values{"wake_before": {now.Add(2 * time.Hour).Format(time.RFC3339)}}
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/executions?"+q.Encode(), nil).Decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].ExecutionID != "ex_nap" {
		t.Fatalf("due before +2h: %+v", list.Items)
	}
	q = url.Values{"wake_after": {now.Add(2 * time.Hour).Format(time.RFC3339)}}
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/executions?"+q.Encode(), nil).Decode(t, &list)
	if len(list.Items) != 0 {
		t.Fatalf("due after +2h: %+v", list.Items)
	}
	p := admin.Want(t, http.StatusBadRequest, http.MethodGet, "/api/executions?wake_after=tomorrow", nil).Problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Location != "query.wake_after" {
		t.Fatalf("a bad time: %+v", p)
	}
}
