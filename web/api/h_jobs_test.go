package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"plaita/control"
	"plaita/engine/state"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// Bulk jobs over real HTTP with the console's runner: the dry run's count, a run's progress to
// completion with its failures and their codes, tenant isolation, access, one audit row.

func TestBulkJobsOverHTTP(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	for i, c := range []struct {
		tenant, id string
		status     state.Status
	}{
		{"acme", "ex_j1", state.Running}, {"acme", "ex_j2", state.Suspended}, {"acme", "ex_j3", state.Running},
		{"acme", "ex_j4", state.Completed}, {"acme", "ex_j5", state.Error}, {"default", "ex_j6", state.Running},
	} {
		st := webtest.LiveState(c.tenant, c.id, 1, c.status)
		st.StartTime = st.StartTime.Add(time.Duration(i) * time.Second)
		f.Save(t, st)
	}
	editor := f.Key(f.APIKey(t, "acme", sqlite.RoleEditor))
	var dry api.JobCreated
	editor.Want(t, http.StatusOK, http.MethodPost, "/api/jobs", map[string]any{"action": "cancel", "filter": map[string]any{"status": "running"}, "dry_run": true}).Decode(t, &dry)
	if !dry.DryRun || dry.Job != nil || dry.Selection.Count != 2 || dry.Selection.MaxItems != control.MaxBulkItems || dry.Selection.MaxScan != control.MaxBulkScan {
		t.Fatalf("dry run %+v", dry)
	}
	if fc := dry.Selection.Forecast; fc == nil || fc.WillApply != 2 || fc.NothingToDo != 0 || len(fc.Refused) != 0 {
		t.Fatalf("dry run's forecast %+v", fc)
	}
	var created api.JobCreated
	editor.Want(t, http.StatusCreated, http.MethodPost, "/api/jobs", map[string]any{"action": "cancel", "filter": map[string]any{"flow_id": "ask"}}).Decode(t, &created)
	if created.Job == nil || created.Job.Total != 5 || created.Selection.Count != 5 || created.Job.TenantID != "acme" || created.Selection.Forecast != nil {
		t.Fatalf("created %+v", created)
	}
	id := created.Job.ID
	v := editor.WaitJob(t, id)
	if v.Job.Status != string(sqlite.JobCompleted) || v.Job.Succeeded != 3 || v.Job.Failed != 2 || v.Job.Remaining != 0 {
		t.Fatalf("finished %+v", v.Job)
	}
	if len(v.Failures.Items) != 1 || v.Failures.Items[0].Code != "terminal" || v.Failures.NextCursor == "" {
		t.Fatalf("first page of failures %+v", v.Failures)
	}
	var second api.JobView
	editor.Want(t, http.StatusOK, http.MethodGet, "/api/jobs/"+id+"?failures_limit=1&failures_cursor="+v.Failures.NextCursor, nil).Decode(t, &second)
	if len(second.Failures.Items) != 1 || second.Failures.Items[0].Code != "terminal" || second.Failures.Items[0].Item == v.Failures.Items[0].Item {
		t.Fatalf("second page of failures %+v", second.Failures)
	}
	var items control.BulkItemPage
	editor.Want(t, http.StatusOK, http.MethodGet, "/api/jobs/"+id+"/items?state=done", nil).Decode(t, &items)
	if len(items.Items) != 3 || items.Items[0].Result != "cancel_requested" {
		t.Fatalf("done items %+v", items)
	}
	var list control.BulkJobPage
	editor.Want(t, http.StatusOK, http.MethodGet, "/api/jobs", nil).Decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != id || list.Items[0].Action != control.BulkCancel {
		t.Fatalf("jobs %+v", list)
	}
	if r := editor.Want(t, http.StatusConflict, http.MethodPost, "/api/jobs/"+id+"/cancel", nil); r.Body["code"] != "job_finished" {
		t.Fatalf("cancel of a finished job: %s", r.Raw)
	}

	// The default tenant's execution was not touched; its admin sees none of acme's jobs.
	other := f.Admin("")
	if r := other.Want(t, http.StatusNotFound, http.MethodGet, "/api/jobs/"+id, nil); r.Body["code"] != "job_not_found" {
		t.Fatalf("another tenant's job: %s", r.Raw)
	}
	other.Want(t, http.StatusOK, http.MethodGet, "/api/jobs", nil).Decode(t, &list)
	if len(list.Items) != 0 {
		t.Fatalf("another tenant's jobs listed: %+v", list)
	}
	var view api.ExecutionView
	other.Want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_j6", nil).Decode(t, &view)
	if view.Execution.Status != state.Running {
		t.Fatalf("the default tenant's execution: %+v", view.Execution)
	}

	// One audit row for the job and one for the dry run before it (named so: it created
	// nothing), none per item.
	creates, dryRuns, cancels := 0, 0, 0
	for _, e := range f.AuditRows(t) {
		switch e.Action {
		case "job.create":
			creates++
		case "job.dry_run":
			dryRuns++
		case "execution.cancel":
			cancels++
		}
	}
	if e, ok := f.Audited(t, "job.create"); !ok || e.Target != id || e.Tenant != "acme" || creates != 1 || dryRuns != 1 || cancels != 0 {
		t.Fatalf("audit: %+v, %d job.create rows, %d job.dry_run rows, %d execution.cancel rows", e, creates, dryRuns, cancels)
	}
}

// TestBulkDryRunForecastOverHTTP: a dry run's count splits into what the job would do — act,
// nothing to do, or be refused by code — under selection.forecast; a created job's selection
// has none (its items' outcomes are recorded instead).
func TestBulkDryRunForecastOverHTTP(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	for i, s := range []state.Status{state.Running, state.Suspended, state.Completed, state.Error, state.Cancelled} {
		st := webtest.LiveState("default", fmt.Sprintf("ex_f%d", i), 1, s)
		st.StartTime = st.StartTime.Add(time.Duration(i) * time.Second)
		f.Save(t, st)
	}
	editor := f.Key(f.APIKey(t, "default", sqlite.RoleEditor))
	for _, c := range []struct {
		action string
		want   string
	}{
		// The flow ask is not published: the one in error takes no retry either.
		{"retry", `{"nothing_to_do":0,"refused":{"resume_refused":3,"terminal":2},"will_apply":0}`},
		{"cancel", `{"nothing_to_do":1,"refused":{"terminal":2},"will_apply":2}`},
	} {
		r := editor.Want(t, http.StatusOK, http.MethodPost, "/api/jobs", map[string]any{"action": c.action, "dry_run": true})
		got, _ := json.Marshal(r.Body["selection"].(map[string]any)["forecast"]) // its keys sorted
		if string(got) != c.want {
			t.Errorf("%s dry run's forecast: %s, want %s", c.action, got, c.want)
		}
	}
	r := editor.Want(t, http.StatusCreated, http.MethodPost, "/api/jobs", map[string]any{"action": "cancel"})
	if _, ok := r.Body["selection"].(map[string]any)["forecast"]; ok {
		t.Errorf("a created job's selection has a forecast: %s", r.Raw)
	}
}

func TestBulkJobsAccessAndBadRequests(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithSettings(func(s *api.Settings) { s.Env = "prod" }))
	f.Tenant(t, "acme")
	viewer := f.Key(f.APIKey(t, "acme", sqlite.RoleViewer))
	editor := f.Key(f.APIKey(t, "acme", sqlite.RoleEditor))
	admin := f.Key(f.APIKey(t, "acme", sqlite.RoleAdmin))
	viewer.Want(t, http.StatusForbidden, http.MethodPost, "/api/jobs", map[string]any{"action": "cancel", "dry_run": true})
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/jobs", nil)
	if r := editor.Want(t, http.StatusForbidden, http.MethodPost, "/api/jobs", map[string]any{"action": "delete", "dry_run": true}); r.Body["code"] != "forbidden" {
		t.Fatalf("an editor's bulk delete in prod: %s", r.Raw)
	}
	admin.Want(t, http.StatusOK, http.MethodPost, "/api/jobs", map[string]any{"action": "delete", "dry_run": true})
	for _, body := range []any{
		map[string]any{"action": "purge"},
		map[string]any{"action": "cancel", "filter": map[string]any{"status": "lost"}},
		map[string]any{"action": "cancel", "filter": map[string]any{"colour": "red"}},
		map[string]any{"action": "cancel", "unknown": 1},
		map[string]any{"action": "cancel", "max_items": 10001},
		`{"action":`,
	} {
		if r := editor.Do(t, http.MethodPost, "/api/jobs", body); r.Status != http.StatusBadRequest {
			t.Errorf("%v: %d %s", body, r.Status, r.Raw)
		}
	}
	// A bulk replay needs an admin, as a single replay does; a dead letter has no status.
	if r := editor.Want(t, http.StatusForbidden, http.MethodPost, "/api/jobs", map[string]any{"action": "replay", "dry_run": true}); r.Body["code"] != "forbidden" {
		t.Fatalf("an editor's bulk replay: %s", r.Raw)
	}
	admin.Want(t, http.StatusBadRequest, http.MethodPost, "/api/jobs", map[string]any{"action": "replay", "filter": map[string]any{"status": "error"}})
	editor.Want(t, http.StatusNotFound, http.MethodGet, "/api/jobs/job_nope", nil)
	editor.Want(t, http.StatusNotFound, http.MethodPost, "/api/jobs/job_nope/cancel", nil)
	editor.Want(t, http.StatusBadRequest, http.MethodGet, "/api/jobs?cursor=bogus", nil)
}
