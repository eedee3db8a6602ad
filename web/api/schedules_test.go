package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"plaita/control"
	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// TestSchedulesCRUD: an editor creates, changes, disables, enables and deletes the tenant's
// schedules in the store the schedule role reads; a viewer reads them; another tenant can
// neither see nor change them; a refused definition is named and writes nothing.
func TestSchedulesCRUD(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ctx := context.Background()
	f.Tenant(t, "acme")
	f.Tenant(t, "globex")
	editor := f.Key(f.APIKey(t, "acme", sqlite.RoleEditor))
	viewer := f.User(t, "vic", "acme", sqlite.RoleViewer)
	globex := f.Key(f.APIKey(t, "globex", sqlite.RoleAdmin))
	stored := func(id string) store.ScheduleRecord {
		t.Helper()
		rec, err := f.Plane.Schedule(ctx, "acme", id)
		if err != nil {
			t.Fatalf("schedule %s: %v", id, err)
		}
		return rec
	}

	var added control.ScheduleAdded
	editor.Want(t, http.StatusCreated, http.MethodPost, "/api/schedules",
		map[string]any{"id": "nightly", "cron": "0 3 * * *", "time_zone": "Europe/Paris", "flow_id": "ask", "input": map[string]any{"n": 1}}).Decode(t, &added)
	if added.ID != "nightly" || added.TenantID != "acme" || !added.Enabled || added.FlowVersion != store.LatestVersion || len(added.Warnings) != 1 {
		t.Fatalf("create: %+v", added)
	}
	if rec := stored("nightly"); rec.Cron != "0 3 * * *" || rec.TimeZone != "Europe/Paris" || string(rec.Input) != `{"n":1}` || rec.Next.IsZero() {
		t.Fatalf("stored: %+v", rec)
	}
	if e, ok := f.Audited(t, "schedule.create"); !ok || e.Target != "nightly" || e.Tenant != "acme" || e.Outcome != sqlite.OutcomeAllow {
		t.Fatalf("create audit: %+v", e)
	}
	if p := editor.Want(t, http.StatusConflict, http.MethodPost, "/api/schedules", map[string]any{"id": "nightly", "cron": "0 * * * *", "flow_id": "ask"}).Problem(t); p.Code != "schedule_exists" {
		t.Fatalf("id taken: %+v", p)
	}
	for i := range 3 {
		editor.Want(t, http.StatusCreated, http.MethodPost, "/api/schedules", map[string]any{"id": fmt.Sprint("s", i), "cron": "@hourly", "flow_id": "ask", "enabled": false})
	}

	// Pages, oldest first; reads are a viewer's.
	var ids []string
	cursor := ""
	for range 5 {
		var page control.SchedulePage
		viewer.Want(t, http.StatusOK, http.MethodGet, "/api/schedules?limit=3&cursor="+cursor, nil).Decode(t, &page)
		for _, rec := range page.Items {
			ids = append(ids, rec.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if strings.Join(ids, " ") != "nightly s0 s1 s2" {
		t.Fatalf("pages: %v", ids)
	}
	var one store.ScheduleRecord
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/schedules/s1", nil).Decode(t, &one)
	if one.ID != "s1" || one.Enabled {
		t.Fatalf("get: %+v", one)
	}

	// Change: the fields given, checked as a creation is.
	var up control.ScheduleUpdated
	editor.Want(t, http.StatusOK, http.MethodPatch, "/api/schedules/nightly", map[string]any{"cron": "*/10 * * * *", "flow_version": "2"}).Decode(t, &up)
	if !up.Changed || up.Rev != 2 || up.Cron != "*/10 * * * *" || up.FlowVersion != "2" || up.TimeZone != "Europe/Paris" {
		t.Fatalf("update: %+v", up)
	}
	if rec := stored("nightly"); rec.Cron != "*/10 * * * *" || rec.FlowVersion != "2" || rec.Rev != 2 {
		t.Fatalf("stored after the update: %+v", rec)
	}
	editor.Want(t, http.StatusOK, http.MethodPatch, "/api/schedules/nightly", map[string]any{}).Decode(t, &up)
	if up.Changed || up.Rev != 2 {
		t.Fatalf("empty update: %+v", up)
	}
	for _, tc := range []struct {
		body any
		code string
	}{
		{map[string]any{"cron": "every day"}, "invalid_cron"},
		{map[string]any{"cron": "@every 1s"}, "invalid_cron"},
		{map[string]any{"time_zone": "Mars/Olympus"}, "invalid_cron"},
		{map[string]any{"flow_id": "a:b"}, "invalid_schedule"},
		{map[string]any{"flow_version": "x y"}, "invalid_schedule"},
		{`{"crn":"* * * * *"}`, "invalid_request"},
		{`{"cron":`, "invalid_request"},
	} {
		if p := editor.Want(t, http.StatusBadRequest, http.MethodPatch, "/api/schedules/nightly", tc.body).Problem(t); p.Code != tc.code {
			t.Errorf("update %v: %+v, want %s", tc.body, p, tc.code)
		}
	}
	if rec := stored("nightly"); rec.Rev != 2 || rec.Cron != "*/10 * * * *" {
		t.Fatalf("a refused update wrote: %+v", rec)
	}
	for _, body := range []any{
		map[string]any{"cron": "0 0 30 2 *", "flow_id": "ask"}, map[string]any{"cron": "@daily", "flow_id": "ask", "id": "a b"},
		map[string]any{"cron": "@daily"}, `{"cron":"@daily","flow_id":"ask","enabeld":true}`,
	} {
		editor.Want(t, http.StatusBadRequest, http.MethodPost, "/api/schedules", body)
	}
	huge := map[string]any{"cron": "@daily", "flow_id": "ask", "input": strings.Repeat("x", api.DefaultMaxBody)}
	if p := editor.Want(t, http.StatusRequestEntityTooLarge, http.MethodPost, "/api/schedules", huge).Problem(t); p.Code != "body_too_large" {
		t.Fatalf("oversize: %+v", p)
	}

	// Disable, enable.
	editor.Want(t, http.StatusOK, http.MethodPost, "/api/schedules/nightly/disable", nil).Decode(t, &up)
	if !up.Changed || up.Enabled || stored("nightly").Enabled {
		t.Fatalf("disable: %+v", up)
	}
	editor.Want(t, http.StatusOK, http.MethodPost, "/api/schedules/nightly/disable", nil).Decode(t, &up)
	if up.Changed {
		t.Fatalf("disable twice: %+v", up)
	}
	editor.Want(t, http.StatusOK, http.MethodPost, "/api/schedules/nightly/enable", nil).Decode(t, &up)
	if !up.Changed || !stored("nightly").Enabled || up.Next.IsZero() {
		t.Fatalf("enable: %+v", up)
	}

	// A viewer writes nothing; globex reaches nothing of acme's.
	viewer.Want(t, http.StatusForbidden, http.MethodPost, "/api/schedules", map[string]any{"cron": "@daily", "flow_id": "ask"})
	viewer.Want(t, http.StatusForbidden, http.MethodPatch, "/api/schedules/nightly", map[string]any{"cron": "@daily"})
	viewer.Want(t, http.StatusForbidden, http.MethodPost, "/api/schedules/nightly/disable", nil)
	viewer.Want(t, http.StatusForbidden, http.MethodDelete, "/api/schedules/nightly", nil)
	var theirs control.SchedulePage
	globex.Want(t, http.StatusOK, http.MethodGet, "/api/schedules", nil).Decode(t, &theirs)
	if len(theirs.Items) != 0 || theirs.TenantID != "globex" {
		t.Fatalf("globex lists: %+v", theirs)
	}
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/api/schedules/nightly", nil}, {http.MethodPatch, "/api/schedules/nightly", map[string]any{"cron": "@daily"}},
		{http.MethodPost, "/api/schedules/nightly/disable", nil}, {http.MethodDelete, "/api/schedules/nightly", nil},
	} {
		if p := globex.Want(t, http.StatusNotFound, r.method, r.path, r.body).Problem(t); p.Code != "schedule_not_found" {
			t.Fatalf("globex %s %s: %+v", r.method, r.path, p)
		}
	}
	if rec := stored("nightly"); !rec.Enabled || rec.Cron != "*/10 * * * *" {
		t.Fatalf("globex changed acme's schedule: %+v", rec)
	}

	// Run now: an editor's, audited with the execution; a viewer's is refused, globex's finds
	// no such schedule; the schedule's firing state is left as it is.
	if _, err := f.Plane.PublishFlow(ctx, "acme", []byte(strings.Replace(webtest.ApprovalFlow, `"version":"1"`, `"version":"2"`, 1)), ""); err != nil { // the version the schedule names now
		t.Fatal(err)
	}
	before := stored("nightly")
	var ran api.ExecutionStarted
	editor.Want(t, http.StatusCreated, http.MethodPost, "/api/schedules/nightly/run", nil).Decode(t, &ran)
	if !strings.HasPrefix(ran.ExecutionID, "ex_") || ran.FlowID != "ask" || ran.TenantID != "acme" {
		t.Fatalf("run: %+v", ran)
	}
	if e, ok := f.Audited(t, "schedule.run"); !ok || e.Target != "nightly" || e.Tenant != "acme" || !strings.Contains(string(e.Details), ran.ExecutionID) {
		t.Fatalf("run audit: %+v", e)
	}
	if after := stored("nightly"); !after.Next.Equal(before.Next) || after.LastFire != before.LastFire {
		t.Fatalf("run moved the schedule's firing: %+v, was %+v", after, before)
	}
	viewer.Want(t, http.StatusForbidden, http.MethodPost, "/api/schedules/nightly/run", nil)
	if p := globex.Want(t, http.StatusNotFound, http.MethodPost, "/api/schedules/nightly/run", nil).Problem(t); p.Code != "schedule_not_found" {
		t.Fatalf("globex runs acme's schedule: %+v", p)
	}

	// Its fire history: a viewer's read (no tick handled yet: none), globex finds no such
	// schedule, a limit outside 1–100 is refused, and an anonymous caller is not let in.
	var fires api.ScheduleFires
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/schedules/nightly/fires", nil).Decode(t, &fires)
	if fires.ScheduleID != "nightly" || fires.Items == nil || len(fires.Items) != 0 {
		t.Fatalf("fires of a schedule that never ticked: %+v", fires)
	}
	if p := globex.Want(t, http.StatusNotFound, http.MethodGet, "/api/schedules/nightly/fires", nil).Problem(t); p.Code != "schedule_not_found" {
		t.Fatalf("globex reads acme's fires: %+v", p)
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?limit=x"} {
		viewer.Want(t, http.StatusBadRequest, http.MethodGet, "/api/schedules/nightly/fires"+q, nil)
	}
	f.Client(nil).Want(t, http.StatusUnauthorized, http.MethodGet, "/api/schedules/nightly/fires", nil)

	// Delete.
	editor.Want(t, http.StatusNoContent, http.MethodDelete, "/api/schedules/nightly", nil)
	editor.Want(t, http.StatusNotFound, http.MethodGet, "/api/schedules/nightly", nil)
	editor.Want(t, http.StatusNotFound, http.MethodDelete, "/api/schedules/nightly", nil)
	if e, ok := f.Audited(t, "schedule.delete"); !ok || e.Outcome != sqlite.OutcomeDeny || e.Reason != "schedule_not_found" {
		t.Fatalf("refused delete audit: %+v", e)
	}
	for _, q := range []string{"?cursor=forged", "?limit=0", "?limit=1001"} {
		viewer.Want(t, http.StatusBadRequest, http.MethodGet, "/api/schedules"+q, nil)
	}
	viewer.Want(t, http.StatusBadRequest, http.MethodGet, "/api/schedules/a:b", nil)
}
