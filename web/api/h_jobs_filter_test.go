package api_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// POST /api/jobs takes every filter of the list it acts on — the executions list's due times
// and indexed fields too, the dead-letters list's reason, kind and flow — and counts exactly
// what that list shows; a filter field the action's selection cannot honour is a 400 that
// names it, never a wider selection.

// TestBulkJobsTakeTheListsFilter: a dry run with the list's filter counts what the list
// shows, for due times, indexed fields and dead letters; a field the selection cannot honour
// is refused by name.
func TestBulkJobsTakeTheListsFilter(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	flow, err := engine.Parse([]byte(`{"id": "shop", "start": "done", "index": ["order_id"], "nodes": [{"id": "done", "type": "end"}]}`),
		engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	for i := range 24 {
		st, err := engine.NewState(flow, engine.StartRequest{ExecutionID: "ex_" + string(rune('a'+i)), TenantID: "default",
			Input: map[string]any{"order_id": []string{"ord-1", "ord-2", "ord-3"}[i%3]}}, now.Add(-time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		st.Status = state.Running
		if i%2 == 0 {
			due := now.Add(time.Duration(i) * time.Minute)
			st.Status, st.Suspend = state.Suspended, &state.Suspend{Kind: state.SuspendDelay, Node: "done", Since: now, Due: &due}
		}
		f.Save(t, st)
	}
	admin := f.Key(f.APIKey(t, "default", sqlite.RoleAdmin))
	dry := func(action string, filter map[string]any) int {
		t.Helper()
		var out api.JobCreated
		admin.Want(t, http.StatusOK, http.MethodPost, "/api/jobs", map[string]any{"action": action, "filter": filter, "dry_run": true}).Decode(t, &out)
		return out.Selection.Count
	}
	wakeAfter, wakeBefore := now.Add(5*time.Minute).Format(time.RFC3339), now.Add(17*time.Minute).Format(time.RFC3339)
	for _, c := range []struct {
		list   url.Values
		filter map[string]any
	}{
		{url.Values{"wake_before": {wakeBefore}}, map[string]any{"wake_before": wakeBefore}},
		{url.Values{"wake_after": {wakeAfter}, "wake_before": {wakeBefore}}, map[string]any{"wake_after": wakeAfter, "wake_before": wakeBefore}},
		{url.Values{"index[order_id]": {"ord-2"}}, map[string]any{"index": map[string]string{"order_id": "ord-2"}}},
		{url.Values{"index[order_id]": {"ord-1"}, "wake_after": {wakeAfter}, "status": {"suspended"}},
			map[string]any{"index": map[string]string{"order_id": "ord-1"}, "wake_after": wakeAfter, "status": "suspended"}},
	} {
		listed := webtest.ListedIDs(t, admin, c.list)
		if len(listed) == 0 || len(listed) == 24 {
			t.Fatalf("the list %v shows %d: not a filter that tells", c.list, len(listed))
		}
		if n := dry("cancel", c.filter); n != len(listed) {
			t.Errorf("filter %v: the job counts %d, the list shows %d", c.filter, n, len(listed))
		}
	}

	// Dead letters: the list by reason and flow, and the replay with the same filter.
	for i := range 6 {
		f.DeadLetter(t, []string{"shop", "mail"}[i%2], []string{"poison", "max_deliveries", "poison"}[i%3])
	}
	var page control.DeadLetterPage
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/dead-letters?reason=poison&flow_id=shop&kind=start", nil).Decode(t, &page)
	if len(page.Items) != 2 {
		t.Fatalf("the poison dead letters of shop: %+v", page.Items)
	}
	if n := dry("replay", map[string]any{"reason": "poison", "flow_id": "shop", "kind": "start"}); n != len(page.Items) {
		t.Errorf("the replay counts %d, the list shows %d", n, len(page.Items))
	}
	admin.Want(t, http.StatusBadRequest, http.MethodGet, "/api/dead-letters?kind=stop", nil)

	// A field the action does not select by, one no filter has, a value the list refuses.
	for _, c := range []struct {
		body   map[string]any
		naming string
	}{
		{map[string]any{"action": "replay", "filter": map[string]any{"wake_before": time.Now().UTC().Format(time.RFC3339)}}, "wake_before"},
		{map[string]any{"action": "replay", "filter": map[string]any{"index": map[string]string{"order_id": "ord-1"}}}, "index"},
		{map[string]any{"action": "cancel", "filter": map[string]any{"reason": "poison"}}, "reason"},
		{map[string]any{"action": "cancel", "filter": map[string]any{"all_tenants": true}}, "all_tenants"},
		{map[string]any{"action": "cancel", "filter": map[string]any{"index": map[string]string{"9bad": "x"}}}, "9bad"},
	} {
		c.body["dry_run"] = true
		r := admin.Want(t, http.StatusBadRequest, http.MethodPost, "/api/jobs", c.body)
		if !strings.Contains(string(r.Raw), c.naming) {
			t.Errorf("%v: refused without naming %s: %s", c.body, c.naming, r.Raw)
		}
	}
}

// TestBulkFilterInOpenAPI: the document describes every filter a job takes, refuses any other
// field, and the dead-letters list's filters.
func TestBulkFilterInOpenAPI(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct{ Name string }
		}
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Description   string
					MaxProperties int
				}
				AdditionalProperties *bool
			}
		}
	}
	f.Client(nil).Want(t, http.StatusOK, http.MethodGet, "/api/openapi.json", nil).Decode(t, &doc)
	filter, ok := doc.Components.Schemas["BulkFilter"]
	if !ok || filter.AdditionalProperties == nil || *filter.AdditionalProperties {
		t.Fatalf("the filter's schema is not strict: %+v", filter)
	}
	for _, name := range []string{"status", "flow_id", "started_after", "started_before", "wake_after", "wake_before", "index", "reason", "kind", "force"} {
		if p, ok := filter.Properties[name]; !ok || p.Description == "" {
			t.Errorf("the filter's %s is not documented: %+v", name, filter.Properties)
		}
	}
	if filter.Properties["index"].MaxProperties != engine.MaxIndexFields {
		t.Errorf("index: at most %d fields, the document says %d", engine.MaxIndexFields, filter.Properties["index"].MaxProperties)
	}
	var params []string
	for _, p := range doc.Paths["/api/dead-letters"]["get"].Parameters {
		params = append(params, p.Name)
	}
	for _, name := range []string{"reason", "kind", "flow_id"} {
		if !slices.Contains(params, name) {
			t.Errorf("GET /api/dead-letters has no %s: %v", name, params)
		}
	}
}
