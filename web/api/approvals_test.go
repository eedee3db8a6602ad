package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// TestApprovals: a viewer lists the tenant's pending approvals; an editor answers one, and the
// caller — a user's login, a key's name, the admin key — is who answered, in the resume the
// worker runs and in the audit row; another tenant's approval is not found, and an answer the
// worker would refuse is a 409.
func TestApprovals(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	f.Tenant(t, "globex")
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i, id := range []string{"ex_a1", "ex_a2", "ex_a3"} {
		f.WaitForApproval(t, "acme", id, now.Add(time.Duration(i)*time.Second))
	}
	f.WaitForApproval(t, "globex", "ex_g1", now)
	viewer := f.User(t, "vic", "acme", sqlite.RoleViewer)
	editor := f.User(t, "eve", "acme", sqlite.RoleEditor)
	key := f.Key(f.APIKey(t, "acme", sqlite.RoleEditor)) // named k-editor
	globex := f.Key(f.APIKey(t, "globex", sqlite.RoleAdmin))

	var seen []string
	cursor := ""
	for range 5 {
		var page api.ApprovalList
		viewer.Want(t, http.StatusOK, http.MethodGet, "/api/approvals?limit=2&cursor="+cursor, nil).Decode(t, &page)
		for _, it := range page.Items {
			seen = append(seen, it.ExecutionID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if strings.Join(seen, " ") != "ex_a3 ex_a2 ex_a1" {
		t.Fatalf("pending approvals: %v", seen)
	}
	var theirs api.ApprovalList
	globex.Want(t, http.StatusOK, http.MethodGet, "/api/approvals", nil).Decode(t, &theirs)
	if len(theirs.Items) != 1 || theirs.Items[0].ExecutionID != "ex_g1" {
		t.Fatalf("globex's approvals: %+v", theirs)
	}

	viewer.Want(t, http.StatusForbidden, http.MethodPost, "/api/approvals/ex_a1", map[string]any{"approved": true})
	globex.Want(t, http.StatusNotFound, http.MethodPost, "/api/approvals/ex_a1", map[string]any{"approved": true})
	if n := len(f.Answers(t)); n != 0 {
		t.Fatalf("%d answers enqueued by refused requests", n)
	}
	var done map[string]any
	editor.Want(t, http.StatusOK, http.MethodPost, "/api/approvals/ex_a1", map[string]any{"approved": true, "comment": "fine"}).Decode(t, &done)
	if done["enqueued"] != true || done["resume_type"] != "approval" {
		t.Fatalf("answer: %v", done)
	}
	key.Want(t, http.StatusOK, http.MethodPost, "/api/approvals/ex_a2", map[string]any{"approved": false})
	f.Admin("acme").Want(t, http.StatusOK, http.MethodPost, "/api/approvals/ex_a3", map[string]any{"approved": true})
	got := f.Answers(t)
	for id, want := range map[string]map[string]any{
		"ex_a1": {"by": "eve", "approved": true, "comment": "fine"},
		"ex_a2": {"by": "k-editor", "approved": false, "comment": ""},
		"ex_a3": {"by": "admin-key", "approved": true, "comment": ""},
	} {
		for k, v := range want {
			if got[id][k] != v {
				t.Errorf("%s: the answer's %s is %v, want %v (%v)", id, k, got[id][k], v, got[id])
			}
		}
	}
	if e, ok := f.Audited(t, "approval.answer"); !ok || e.Target != "ex_a3" || e.Tenant != "acme" || e.ActorKind != sqlite.ActorAdminKey ||
		!strings.Contains(string(e.Details), `"by":"admin-key"`) || !strings.Contains(string(e.Details), `"approved":true`) {
		t.Fatalf("answer audit: %+v %s", e, e.Details)
	}

	// An answer the worker would refuse: 409 with what is accepted instead, nothing enqueued.
	f.Save(t, &state.Execution{ExecutionID: "ex_done", TenantID: "acme", FlowID: "ask", FlowVersion: "1", Status: state.Completed,
		Context: map[string]any{}, StartTime: now, LastUpdate: now, EndTime: &now})
	if p := editor.Want(t, http.StatusConflict, http.MethodPost, "/api/approvals/ex_done", map[string]any{"approved": true}).Problem(t); p.Code != "terminal" {
		t.Fatalf("an answer to a completed execution: %+v", p)
	}
	editor.Want(t, http.StatusNotFound, http.MethodPost, "/api/approvals/ex_none", map[string]any{"approved": true})
	for _, tc := range []struct {
		body  any
		where string
	}{
		{`{}`, "approved"},
		{`{"approved":"yes"}`, "body.approved"},
		{`{"approved":true,"commment":"x"}`, "body.commment"},
		{map[string]any{"approved": true, "comment": strings.Repeat("x", 4097)}, "body.comment"},
		{`{"approved":`, "body"},
	} {
		p := editor.Want(t, http.StatusBadRequest, http.MethodPost, "/api/approvals/ex_a1", tc.body).Problem(t)
		text := p.Detail
		for _, e := range p.Errors {
			text += " " + e.Location
		}
		if !strings.Contains(text, tc.where) {
			t.Errorf("%v: %+v does not name %s", tc.body, p, tc.where)
		}
	}
	editor.Want(t, http.StatusBadRequest, http.MethodPost, "/api/approvals/bad:id", map[string]any{"approved": true})
	editor.Want(t, http.StatusRequestEntityTooLarge, http.MethodPost, "/api/approvals/ex_a1", map[string]any{"approved": true,
		"comment": strings.Repeat("x", api.DefaultMaxBody)})
	viewer.Want(t, http.StatusBadRequest, http.MethodGet, "/api/approvals?cursor=forged", nil)
	viewer.Want(t, http.StatusBadRequest, http.MethodGet, "/api/approvals?limit=0", nil)
	if n := len(f.Answers(t)); n != 3 {
		t.Fatalf("%d answers enqueued, want 3", n)
	}
}
