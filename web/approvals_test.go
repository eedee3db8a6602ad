package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/sqlite"
)

// waitForApproval leaves execution id of tenant suspended at the approval flow's node, with
// its approval record, as a worker would.
func (f *fixture) waitForApproval(t testing.TB, tenant, id string, since time.Time) {
	t.Helper()
	def, err := engine.Parse([]byte(approvalFlow), engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.plane.PublishFlow(context.Background(), tenant, []byte(approvalFlow), ""); err != nil {
		t.Fatal(err)
	}
	f.save(t, &state.Execution{ExecutionID: id, TenantID: tenant, FlowID: "ask", FlowVersion: "1", FlowHash: def.Hash, FlowHashAlgo: def.HashAlgo,
		Status: state.Suspended, CurrentNode: "ask", Context: map[string]any{}, StartTime: since, LastUpdate: since,
		Suspend: &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: since, Message: "ok?"}})
	ts, err := f.redis.Tenant(tenant)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.PutApproval(context.Background(), store.Approval{ExecutionID: id, FlowID: "ask", FlowVersion: "1", Node: "ask",
		Message: "ok?", Since: since}, time.Hour); err != nil {
		t.Fatal(err)
	}
}

// answers are the approval resumes in the task stream, by execution: who answered, and how.
func (f *fixture) answers(t testing.TB) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, env := range f.streamEntries(t) {
		if env.ResumeType != engine.ResumeApproval {
			continue
		}
		var data map[string]any
		if err := json.Unmarshal(env.ResumeData, &data); err != nil {
			t.Fatal(err)
		}
		out[env.ExecutionID] = data
	}
	return out
}

// TestApprovals: a viewer lists the tenant's pending approvals; an editor answers one, and the
// caller — a user's login, a key's name, the admin key — is who answered, in the resume the
// worker runs and in the audit row; another tenant's approval is not found, and an answer the
// worker would refuse is a 409.
func TestApprovals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i, id := range []string{"ex_a1", "ex_a2", "ex_a3"} {
		f.waitForApproval(t, "acme", id, now.Add(time.Duration(i)*time.Second))
	}
	f.waitForApproval(t, "globex", "ex_g1", now)
	viewer := f.user(t, "vic", "acme", sqlite.RoleViewer)
	editor := f.user(t, "eve", "acme", sqlite.RoleEditor)
	key := f.key(f.apiKey(t, "acme", sqlite.RoleEditor)) // named k-editor
	globex := f.key(f.apiKey(t, "globex", sqlite.RoleAdmin))

	var seen []string
	cursor := ""
	for range 5 {
		var page ApprovalList
		viewer.want(t, http.StatusOK, http.MethodGet, "/api/approvals?limit=2&cursor="+cursor, nil).decode(t, &page)
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
	var theirs ApprovalList
	globex.want(t, http.StatusOK, http.MethodGet, "/api/approvals", nil).decode(t, &theirs)
	if len(theirs.Items) != 1 || theirs.Items[0].ExecutionID != "ex_g1" {
		t.Fatalf("globex's approvals: %+v", theirs)
	}

	viewer.want(t, http.StatusForbidden, http.MethodPost, "/api/approvals/ex_a1", map[string]any{"approved": true})
	globex.want(t, http.StatusNotFound, http.MethodPost, "/api/approvals/ex_a1", map[string]any{"approved": true})
	if n := len(f.answers(t)); n != 0 {
		t.Fatalf("%d answers enqueued by refused requests", n)
	}
	var done map[string]any
	editor.want(t, http.StatusOK, http.MethodPost, "/api/approvals/ex_a1", map[string]any{"approved": true, "comment": "fine"}).decode(t, &done)
	if done["enqueued"] != true || done["resume_type"] != "approval" {
		t.Fatalf("answer: %v", done)
	}
	key.want(t, http.StatusOK, http.MethodPost, "/api/approvals/ex_a2", map[string]any{"approved": false})
	f.admin("acme").want(t, http.StatusOK, http.MethodPost, "/api/approvals/ex_a3", map[string]any{"approved": true})
	got := f.answers(t)
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
	if e, ok := f.audited(t, "approval.answer"); !ok || e.Target != "ex_a3" || e.Tenant != "acme" || e.ActorKind != sqlite.ActorAdminKey ||
		!strings.Contains(string(e.Details), `"by":"admin-key"`) || !strings.Contains(string(e.Details), `"approved":true`) {
		t.Fatalf("answer audit: %+v %s", e, e.Details)
	}

	// An answer the worker would refuse: 409 with what is accepted instead, nothing enqueued.
	f.save(t, &state.Execution{ExecutionID: "ex_done", TenantID: "acme", FlowID: "ask", FlowVersion: "1", Status: state.Completed,
		Context: map[string]any{}, StartTime: now, LastUpdate: now, EndTime: &now})
	if p := editor.want(t, http.StatusConflict, http.MethodPost, "/api/approvals/ex_done", map[string]any{"approved": true}).problem(t); p.Code != "terminal" {
		t.Fatalf("an answer to a completed execution: %+v", p)
	}
	editor.want(t, http.StatusNotFound, http.MethodPost, "/api/approvals/ex_none", map[string]any{"approved": true})
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
		p := editor.want(t, http.StatusBadRequest, http.MethodPost, "/api/approvals/ex_a1", tc.body).problem(t)
		text := p.Detail
		for _, e := range p.Errors {
			text += " " + e.Location
		}
		if !strings.Contains(text, tc.where) {
			t.Errorf("%v: %+v does not name %s", tc.body, p, tc.where)
		}
	}
	editor.want(t, http.StatusBadRequest, http.MethodPost, "/api/approvals/bad:id", map[string]any{"approved": true})
	editor.want(t, http.StatusRequestEntityTooLarge, http.MethodPost, "/api/approvals/ex_a1", map[string]any{"approved": true,
		"comment": strings.Repeat("x", DefaultMaxBody)})
	viewer.want(t, http.StatusBadRequest, http.MethodGet, "/api/approvals?cursor=forged", nil)
	viewer.want(t, http.StatusBadRequest, http.MethodGet, "/api/approvals?limit=0", nil)
	if n := len(f.answers(t)); n != 3 {
		t.Fatalf("%d answers enqueued, want 3", n)
	}
}
