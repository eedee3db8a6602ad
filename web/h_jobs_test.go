package web

import (
	"net/http"
	"testing"
	"time"

	"plaita/control"
	"plaita/engine/state"
	"plaita/store/sqlite"
)

// Bulk jobs over real HTTP with the console's runner: the dry run's count, a run's progress to
// completion with its failures and their codes, tenant isolation, access, one audit row.

// waitJob polls the job until it is finished (its status is the positive signal).
func (c *client) waitJob(t *testing.T, id string) JobView {
	t.Helper()
	var v JobView
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		v = JobView{}
		c.want(t, http.StatusOK, http.MethodGet, "/api/jobs/"+id+"?failures_limit=1", nil).decode(t, &v)
		if sqlite.JobStatus(v.Job.Status).Finished() {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not finish: %+v", id, v.Job)
		}
	}
}

func TestBulkJobsOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.tenant(t, "acme")
	for i, c := range []struct {
		tenant, id string
		status     state.Status
	}{
		{"acme", "ex_j1", state.Running}, {"acme", "ex_j2", state.Suspended}, {"acme", "ex_j3", state.Running},
		{"acme", "ex_j4", state.Completed}, {"acme", "ex_j5", state.Error}, {"default", "ex_j6", state.Running},
	} {
		st := liveState(c.tenant, c.id, 1, c.status)
		st.StartTime = st.StartTime.Add(time.Duration(i) * time.Second)
		f.save(t, st)
	}
	editor := f.key(f.apiKey(t, "acme", sqlite.RoleEditor))
	var dry JobCreated
	editor.want(t, http.StatusOK, http.MethodPost, "/api/jobs", map[string]any{"action": "cancel", "filter": map[string]any{"status": "running"}, "dry_run": true}).decode(t, &dry)
	if !dry.DryRun || dry.Job != nil || dry.Selection.Count != 2 || dry.Selection.MaxItems != control.MaxBulkItems || dry.Selection.MaxScan != control.MaxBulkScan {
		t.Fatalf("dry run %+v", dry)
	}
	var created JobCreated
	editor.want(t, http.StatusCreated, http.MethodPost, "/api/jobs", map[string]any{"action": "cancel", "filter": map[string]any{"flow_id": "ask"}}).decode(t, &created)
	if created.Job == nil || created.Job.Total != 5 || created.Selection.Count != 5 || created.Job.TenantID != "acme" {
		t.Fatalf("created %+v", created)
	}
	id := created.Job.ID
	v := editor.waitJob(t, id)
	if v.Job.Status != string(sqlite.JobCompleted) || v.Job.Succeeded != 3 || v.Job.Failed != 2 || v.Job.Remaining != 0 {
		t.Fatalf("finished %+v", v.Job)
	}
	if len(v.Failures.Items) != 1 || v.Failures.Items[0].Code != "terminal" || v.Failures.NextCursor == "" {
		t.Fatalf("first page of failures %+v", v.Failures)
	}
	var second JobView
	editor.want(t, http.StatusOK, http.MethodGet, "/api/jobs/"+id+"?failures_limit=1&failures_cursor="+v.Failures.NextCursor, nil).decode(t, &second)
	if len(second.Failures.Items) != 1 || second.Failures.Items[0].Code != "terminal" || second.Failures.Items[0].Item == v.Failures.Items[0].Item {
		t.Fatalf("second page of failures %+v", second.Failures)
	}
	var items control.BulkItemPage
	editor.want(t, http.StatusOK, http.MethodGet, "/api/jobs/"+id+"/items?state=done", nil).decode(t, &items)
	if len(items.Items) != 3 || items.Items[0].Result != "cancel_requested" {
		t.Fatalf("done items %+v", items)
	}
	var list control.BulkJobPage
	editor.want(t, http.StatusOK, http.MethodGet, "/api/jobs", nil).decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != id || list.Items[0].Action != control.BulkCancel {
		t.Fatalf("jobs %+v", list)
	}
	if r := editor.want(t, http.StatusConflict, http.MethodPost, "/api/jobs/"+id+"/cancel", nil); r.body["code"] != "job_finished" {
		t.Fatalf("cancel of a finished job: %s", r.raw)
	}

	// The default tenant's execution was not touched; its admin sees none of acme's jobs.
	other := f.admin("")
	if r := other.want(t, http.StatusNotFound, http.MethodGet, "/api/jobs/"+id, nil); r.body["code"] != "job_not_found" {
		t.Fatalf("another tenant's job: %s", r.raw)
	}
	other.want(t, http.StatusOK, http.MethodGet, "/api/jobs", nil).decode(t, &list)
	if len(list.Items) != 0 {
		t.Fatalf("another tenant's jobs listed: %+v", list)
	}
	var view ExecutionView
	other.want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_j6", nil).decode(t, &view)
	if view.Execution.Status != state.Running {
		t.Fatalf("the default tenant's execution: %+v", view.Execution)
	}

	// One audit row for the job (and one for the dry run before it), none per item.
	creates, cancels := 0, 0
	for _, e := range f.auditRows(t) {
		switch e.Action {
		case "job.create":
			creates++
		case "execution.cancel":
			cancels++
		}
	}
	if e, ok := f.audited(t, "job.create"); !ok || e.Target != id || e.Tenant != "acme" || creates != 2 || cancels != 0 {
		t.Fatalf("audit: %+v, %d job.create rows, %d execution.cancel rows", e, creates, cancels)
	}
}

func TestBulkJobsAccessAndBadRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withSettings(func(s *Settings) { s.Env = "prod" }))
	f.tenant(t, "acme")
	viewer := f.key(f.apiKey(t, "acme", sqlite.RoleViewer))
	editor := f.key(f.apiKey(t, "acme", sqlite.RoleEditor))
	admin := f.key(f.apiKey(t, "acme", sqlite.RoleAdmin))
	viewer.want(t, http.StatusForbidden, http.MethodPost, "/api/jobs", map[string]any{"action": "cancel", "dry_run": true})
	viewer.want(t, http.StatusOK, http.MethodGet, "/api/jobs", nil)
	if r := editor.want(t, http.StatusForbidden, http.MethodPost, "/api/jobs", map[string]any{"action": "delete", "dry_run": true}); r.body["code"] != "forbidden" {
		t.Fatalf("an editor's bulk delete in prod: %s", r.raw)
	}
	admin.want(t, http.StatusOK, http.MethodPost, "/api/jobs", map[string]any{"action": "delete", "dry_run": true})
	for _, body := range []any{
		map[string]any{"action": "purge"},
		map[string]any{"action": "cancel", "filter": map[string]any{"status": "lost"}},
		map[string]any{"action": "cancel", "filter": map[string]any{"colour": "red"}},
		map[string]any{"action": "cancel", "unknown": 1},
		map[string]any{"action": "cancel", "max_items": 10001},
		`{"action":`,
	} {
		if r := editor.do(t, http.MethodPost, "/api/jobs", body); r.status != http.StatusBadRequest {
			t.Errorf("%v: %d %s", body, r.status, r.raw)
		}
	}
	// A bulk replay needs an admin, as a single replay does; a dead letter has no status.
	if r := editor.want(t, http.StatusForbidden, http.MethodPost, "/api/jobs", map[string]any{"action": "replay", "dry_run": true}); r.body["code"] != "forbidden" {
		t.Fatalf("an editor's bulk replay: %s", r.raw)
	}
	admin.want(t, http.StatusBadRequest, http.MethodPost, "/api/jobs", map[string]any{"action": "replay", "filter": map[string]any{"status": "error"}})
	editor.want(t, http.StatusNotFound, http.MethodGet, "/api/jobs/job_nope", nil)
	editor.want(t, http.StatusNotFound, http.MethodPost, "/api/jobs/job_nope/cancel", nil)
	editor.want(t, http.StatusBadRequest, http.MethodGet, "/api/jobs?cursor=bogus", nil)
}
