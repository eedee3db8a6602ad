package ui_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/sqlite"
	"plaita/test/webtest"
)

// A console on Redis whose database holds executions a console ran in local mode: the API's
// list and read show them marked runtime local, a cancel is refused by name; the UI's list
// marks them and the execution page offers no action on them.
func TestLocalExecutionsOnRedisOverHTTP(t *testing.T) {
	f := webtest.New(t, webtest.WithLocalRuns())
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	local := &state.Execution{ExecutionID: "ex_ranlocal", TenantID: "default", FlowID: "ask", FlowVersion: "1", Status: state.Suspended,
		CurrentNode: "ask", Context: map[string]any{}, StartTime: now, LastUpdate: now,
		Suspend: &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: now}}
	if err := f.DB.Executions().Save(ctx, local); err != nil {
		t.Fatal(err)
	}
	f.Save(t, &state.Execution{ExecutionID: "ex_onredis", TenantID: "default", FlowID: "ask", FlowVersion: "1", Status: state.Completed,
		CurrentNode: "done", Context: map[string]any{}, StartTime: now.Add(-time.Second), LastUpdate: now})

	admin := f.Admin("")
	r := admin.Do(t, http.MethodGet, "/api/executions?limit=1", nil)
	items, _ := r.Body["items"].([]any)
	if r.Status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["execution_id"] != "ex_ranlocal" ||
		items[0].(map[string]any)["runtime"] != "local" || r.Body["next_cursor"] == nil {
		t.Fatalf("first page: %d %s", r.Status, r.Raw)
	}
	r = admin.Do(t, http.MethodGet, "/api/executions?limit=1&cursor="+r.Body["next_cursor"].(string), nil)
	items, _ = r.Body["items"].([]any)
	if r.Status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["execution_id"] != "ex_onredis" ||
		items[0].(map[string]any)["runtime"] != nil {
		t.Fatalf("second page: %d %s", r.Status, r.Raw)
	}
	if next, _ := r.Body["next_cursor"].(string); next != "" { // Redis's listing may end on an empty page
		r = admin.Do(t, http.MethodGet, "/api/executions?limit=1&cursor="+next, nil)
		if items, _ := r.Body["items"].([]any); r.Status != http.StatusOK || len(items) != 0 || r.Body["next_cursor"] != nil {
			t.Fatalf("last page: %d %s", r.Status, r.Raw)
		}
	}
	r = admin.Do(t, http.MethodGet, "/api/executions/ex_ranlocal", nil)
	if r.Status != http.StatusOK || r.Body["runtime"] != "local" || r.Body["read_only"] == nil || r.Body["hints"] != nil {
		t.Fatalf("read: %d %s", r.Status, r.Raw)
	}
	r = admin.Do(t, http.MethodPost, "/api/executions/ex_ranlocal/cancel", nil)
	if p := r.Problem(t); r.Status != http.StatusConflict || p.Code != "ran_in_local_mode" || p.Execution == nil || p.Unblock == "" {
		t.Fatalf("cancel: %d %s", r.Status, r.Raw)
	}

	ui := uiUser(t, f, "ed", "default", sqlite.RoleEditor)
	_, body := ui.get(t, "/ui/executions", http.StatusOK)
	row := regexp.MustCompile(`(?s)<tr data-status="suspended" data-id="ex_ranlocal">.*?</tr>`).FindString(body)
	if !strings.Contains(row, "local mode") || !strings.Contains(body, `data-id="ex_onredis"`) {
		t.Fatalf("the UI's list: %s", body)
	}
	_, body = ui.get(t, "/ui/executions/ex_ranlocal", http.StatusOK)
	if !strings.Contains(body, `id="exec-read-only"`) || !strings.Contains(body, `id="exec-runtime"`) || strings.Contains(body, `id="cancel-button"`) ||
		strings.Contains(body, `id="approve-button"`) {
		t.Fatalf("the UI's execution page: %s", body)
	}
}
