package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/model"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// TestOpenAPIDocumentsEveryRoute: the document served is generated from the route table, so
// every route is in it and nothing else is; every write is audited; every error response is a
// Problem.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	f.Client(nil).Want(t, http.StatusOK, http.MethodGet, "/api/openapi.json", nil).Decode(t, &doc)
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
			for status, res := range op["responses"].(map[string]any) {
				if status[0] == '4' || status[0] == '5' {
					content := res.(map[string]any)["content"].(map[string]any)
					if _, ok := content["application/problem+json"]; !ok {
						t.Errorf("%s %s %s is not a Problem: %v", method, path, status, content)
					}
				}
			}
		}
	}
	ids := map[string]bool{}
	for _, r := range f.Srv.Routes() {
		key := r.Method + " " + r.Path
		if !documented[key] {
			t.Errorf("route %s is not documented", key)
		}
		delete(documented, key)
		if ids[r.ID] {
			t.Errorf("route id %s twice", r.ID)
		}
		ids[r.ID] = true
		if r.Method != http.MethodGet && r.Action == "" && !r.Safe {
			t.Errorf("write %s %s has no audit action", r.Method, r.Path)
		}
	}
	for key := range documented {
		t.Errorf("%s is documented but no route", key)
	}
	// Every route exists: a request to each answers something other than "no route".
	for _, r := range f.Srv.Routes() {
		path := strings.NewReplacer("{id}", "x", "{slug}", "x", "{user_id}", "x").Replace(r.Path)
		if res := f.Client(nil).Do(t, r.Method, path, nil); res.Status == http.StatusNotFound && res.Body["code"] == "no_route" {
			t.Errorf("%s %s: no route", r.Method, path)
		}
	}
}

func TestTenantsAndMembers(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ctx := context.Background()
	boss := f.Admin("")
	var created api.TenantChanged
	boss.Want(t, http.StatusCreated, http.MethodPost, "/api/tenants", map[string]string{"slug": "acme", "name": "Acme"}).Decode(t, &created)
	if created.Tenant.Slug != "acme" || !created.Published.OK {
		t.Fatalf("create: %+v", created)
	}
	boss.Want(t, http.StatusConflict, http.MethodPost, "/api/tenants", map[string]string{"slug": "acme"})
	boss.Want(t, http.StatusBadRequest, http.MethodPost, "/api/tenants", map[string]string{"slug": "Bad!"})
	status := func(tenant string) string {
		t.Helper()
		r, err := f.Redis.ReadTenantStatus(ctx, tenant, true)
		if err != nil || r.Epoch != "1" {
			t.Fatalf("status of %s: %+v %v", tenant, r, err)
		}
		return r.Status
	}
	if s := status("acme"); s != "active" {
		t.Fatalf("published %q", s)
	}
	boss.Want(t, http.StatusOK, http.MethodPatch, "/api/tenants/acme", map[string]string{"name": "Acme Inc"})
	var list control.Page[model.Tenant]
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/tenants?limit=1", nil).Decode(t, &list)
	if len(list.Items) != 1 || list.NextCursor == "" {
		t.Fatalf("page: %+v", list)
	}
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/tenants?cursor="+list.NextCursor, nil)
	if p := boss.Want(t, http.StatusBadRequest, http.MethodGet, "/api/tenants?cursor=forged", nil).Problem(t); p.Code != "invalid_cursor" {
		t.Fatalf("bad cursor: %+v", p)
	}

	// Members: a platform admin adds a user to a tenant; the tenant admin changes its members'
	// roles, and is answered alike for a login that is not a member, whether it exists or not.
	if _, err := f.DB.CreateUser(ctx, sqlite.NewUser{Login: "ann", Password: "password-ann"}); err != nil {
		t.Fatal(err)
	}
	admin := f.User(t, "adam", "acme", sqlite.RoleAdmin)
	refusedKnown := admin.Want(t, http.StatusForbidden, http.MethodPut, "/api/members", map[string]string{"login": "ann", "role": "viewer"}).Problem(t)
	refusedUnknown := admin.Want(t, http.StatusForbidden, http.MethodPut, "/api/members", map[string]string{"login": "nobody", "role": "viewer"}).Problem(t)
	if refusedKnown.Code != "not_a_member" || refusedUnknown.Code != refusedKnown.Code ||
		strings.ReplaceAll(refusedUnknown.Detail, "nobody", "ann") != refusedKnown.Detail || refusedKnown.Unblock != refusedUnknown.Unblock {
		t.Fatalf("a tenant admin adding a user: %+v / %+v", refusedKnown, refusedUnknown)
	}
	admin.Want(t, http.StatusForbidden, http.MethodPut, "/api/members", map[string]string{"user_id": "usr_nope", "role": "viewer"})
	boss.Want(t, http.StatusNotFound, http.MethodPut, "/api/members", map[string]string{"login": "nobody", "role": "viewer"}, api.HeaderTenant, "acme")
	boss.Want(t, http.StatusOK, http.MethodPut, "/api/members", map[string]string{"login": "ann", "role": "viewer"}, api.HeaderTenant, "acme")
	var m sqlite.Membership
	admin.Want(t, http.StatusOK, http.MethodPut, "/api/members", map[string]string{"login": "ann", "role": "editor"}).Decode(t, &m)
	if m.Tenant != "acme" || m.Role != sqlite.RoleEditor {
		t.Fatalf("member: %+v", m)
	}
	if e, ok := f.Audited(t, "tenant.set_member"); !ok || e.Tenant != "acme" || e.Actor != "adam" || e.Target != m.UserID || e.Outcome != sqlite.OutcomeAllow {
		t.Fatalf("member audit: %+v", e)
	}
	admin.Want(t, http.StatusBadRequest, http.MethodPut, "/api/members", map[string]string{"login": "ann", "role": "owner"})
	admin.Want(t, http.StatusOK, http.MethodPut, "/api/members", map[string]string{"login": "ann", "role": "viewer"})
	ann := f.Client(map[string]string{api.HeaderTenant: "acme"})
	ann.Login(t, "ann", "password-ann")
	ann.Want(t, http.StatusForbidden, http.MethodGet, "/api/members", nil)
	var members sqlite.Page[sqlite.Membership]
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/members", nil).Decode(t, &members)
	if len(members.Items) != 2 {
		t.Fatalf("members: %+v", members)
	}

	// Disabling: the database, at once for sessions and keys; Redis; the schedules.
	key := f.Key(f.APIKey(t, "acme", sqlite.RoleViewer))
	key.Want(t, http.StatusOK, http.MethodGet, "/api/flows", nil)
	if _, err := f.Plane.AddSchedule(ctx, store.Schedule{ID: "nightly", TenantID: "acme", Cron: "0 3 * * *", FlowID: "f", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	var disabled api.TenantChanged
	boss.Want(t, http.StatusOK, http.MethodPost, "/api/tenants/acme/disable", nil).Decode(t, &disabled)
	if !disabled.Changed || !disabled.Published.OK || len(disabled.SchedulesDisabled) != 1 || disabled.SchedulesDisabled[0] != "nightly" {
		t.Fatalf("disable: %+v", disabled)
	}
	if s := status("acme"); s != "disabled" {
		t.Fatalf("published %q after disable", s)
	}
	if rec, err := f.Plane.Schedule(ctx, "acme", "nightly"); err != nil || rec.Enabled {
		t.Fatalf("schedule after disable: %+v %v", rec, err)
	}
	for _, c := range []*webtest.Client{key, ann, admin} {
		if p := c.Want(t, http.StatusForbidden, http.MethodGet, "/api/flows", nil).Problem(t); p.Code != "tenant_disabled" {
			t.Fatalf("disabled tenant: %+v", p)
		}
	}
	if p := boss.Want(t, http.StatusBadRequest, http.MethodDelete, "/api/tenants/default", nil).Problem(t); p.Code != "default_tenant" {
		t.Fatalf("delete the default tenant: %+v", p)
	}
	boss.Want(t, http.StatusOK, http.MethodPost, "/api/tenants/acme/enable", nil)
	key.Want(t, http.StatusOK, http.MethodGet, "/api/flows", nil)
	if s := status("acme"); s != "active" {
		t.Fatalf("published %q after enable", s)
	}
	if p := boss.Want(t, http.StatusConflict, http.MethodDelete, "/api/tenants/acme", nil).Problem(t); p.Code != "tenant_active" {
		t.Fatalf("delete an active tenant: %+v", p)
	}
	boss.Want(t, http.StatusOK, http.MethodPost, "/api/tenants/acme/disable", nil)
	boss.Want(t, http.StatusNoContent, http.MethodDelete, "/api/tenants/acme", nil)
	boss.Want(t, http.StatusNotFound, http.MethodGet, "/api/tenants/acme", nil)
	if s := status("acme"); s != "disabled" {
		t.Fatalf("a deleted tenant's status is %q, not a disabled tombstone", s)
	}
	if e, ok := f.Audited(t, "tenant.delete"); !ok || e.Tenant != "acme" || e.ActorKind != sqlite.ActorAdminKey || !strings.Contains(string(e.Details), "key_fingerprint") {
		t.Fatalf("delete audit: %+v", e)
	}
}

func TestUsers(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	boss := f.Admin("")
	var u sqlite.User
	boss.Want(t, http.StatusCreated, http.MethodPost, "/api/users", map[string]any{"login": "Zoe@Example.com", "password": "long-enough"}).Decode(t, &u)
	if u.Login != "zoe@example.com" {
		t.Fatalf("user: %+v", u)
	}
	boss.Want(t, http.StatusConflict, http.MethodPost, "/api/users", map[string]any{"login": "zoe@example.com", "password": "long-enough"})
	boss.Want(t, http.StatusBadRequest, http.MethodPost, "/api/users", map[string]any{"login": "x", "password": "short"})
	zoe := f.Client(nil)
	zoe.Login(t, "zoe@example.com", "long-enough")
	// A new password ends every session.
	boss.Want(t, http.StatusOK, http.MethodPatch, "/api/users/"+u.ID, map[string]any{"password": "another-one", "platform_admin": true})
	zoe.Want(t, http.StatusUnauthorized, http.MethodGet, "/api/session", nil)
	zoe.Login(t, "zoe@example.com", "another-one")
	// A platform admin user: tenants, and any tenant by X-Tenant-ID.
	zoe.Want(t, http.StatusOK, http.MethodGet, "/api/tenants", nil)
	zoe.Headers[api.HeaderTenant] = "default"
	zoe.Want(t, http.StatusOK, http.MethodGet, "/api/members", nil)
	zoe.Headers[api.HeaderTenant] = "nosuch"
	zoe.Want(t, http.StatusNotFound, http.MethodGet, "/api/members", nil)
	var shown api.UserShown
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/users/"+u.ID, nil).Decode(t, &shown)
	if !shown.PlatformAdmin {
		t.Fatalf("shown: %+v", shown)
	}
	boss.Want(t, http.StatusNoContent, http.MethodDelete, "/api/users/"+u.ID, nil)
	boss.Want(t, http.StatusNotFound, http.MethodGet, "/api/users/"+u.ID, nil)
	zoe.Want(t, http.StatusUnauthorized, http.MethodGet, "/api/session", nil)
}

// TestRoleBoundaries: a viewer reads and cannot write, an editor writes, and a tenant sees
// nothing of another's flows, executions or audit.
func TestRoleBoundaries(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	f.Tenant(t, "globex")
	viewer := f.User(t, "vic", "acme", sqlite.RoleViewer)
	editor := f.User(t, "eve", "acme", sqlite.RoleEditor)
	globex := f.Key(f.APIKey(t, "globex", sqlite.RoleAdmin))
	publish := map[string]any{"definition": json.RawMessage(webtest.ApprovalFlow)}

	if p := viewer.Want(t, http.StatusForbidden, http.MethodPost, "/api/flows", publish).Problem(t); p.Code != "forbidden" {
		t.Fatalf("viewer publish: %+v", p)
	}
	if e, ok := f.Audited(t, "flow.publish.denied"); !ok || e.Actor != "vic" || e.Reason != "forbidden" || e.Tenant != "acme" {
		t.Fatalf("denial audit: %+v", e)
	}
	editor.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", publish)
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/flows/ask", nil)
	var started api.ExecutionStarted
	editor.Want(t, http.StatusCreated, http.MethodPost, "/api/executions", map[string]any{"flow_id": "ask"}).Decode(t, &started)
	viewer.Want(t, http.StatusForbidden, http.MethodPost, "/api/executions", map[string]any{"flow_id": "ask"})
	viewer.Want(t, http.StatusForbidden, http.MethodPost, "/api/executions/"+started.ExecutionID+"/cancel", nil)
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/executions/"+started.ExecutionID, nil)

	// Globex sees none of it, and cannot reach it by naming it.
	globex.Want(t, http.StatusNotFound, http.MethodGet, "/api/flows/ask", nil)
	globex.Want(t, http.StatusNotFound, http.MethodGet, "/api/executions/"+started.ExecutionID, nil)
	globex.Want(t, http.StatusNotFound, http.MethodPost, "/api/executions/"+started.ExecutionID+"/cancel", nil)
	var list api.ExecutionList
	globex.Want(t, http.StatusOK, http.MethodGet, "/api/executions", nil).Decode(t, &list)
	if len(list.Items) != 0 {
		t.Fatalf("globex lists acme's executions: %+v", list)
	}
	var audit control.Page[model.AuditEntry]
	globex.Want(t, http.StatusOK, http.MethodGet, "/api/audit", nil).Decode(t, &audit)
	for _, e := range audit.Items {
		if e.Tenant != "globex" {
			t.Fatalf("globex reads a row of %q: %+v", e.Tenant, e)
		}
	}
	// Nor with X-Tenant-ID: its key is bound, a member is refused in a tenant not theirs.
	globex.Want(t, http.StatusForbidden, http.MethodGet, "/api/executions", nil, api.HeaderTenant, "acme")
	editor.Want(t, http.StatusForbidden, http.MethodGet, "/api/executions", nil, api.HeaderTenant, "globex")
	if p := editor.Want(t, http.StatusForbidden, http.MethodGet, "/api/executions", nil, api.HeaderTenant, "nosuch").Problem(t); p.Code != "not_a_member" {
		t.Fatalf("unknown tenant: %+v", p)
	}
	// Deleting is an editor's outside prod, and only in its own tenant.
	now := time.Now().UTC()
	f.Save(t, &state.Execution{ExecutionID: "ex_acme", TenantID: "acme", FlowID: "ask", FlowVersion: "1", Status: state.Completed,
		Context: map[string]any{}, StartTime: now, LastUpdate: now, EndTime: &now})
	globex.Want(t, http.StatusNotFound, http.MethodDelete, "/api/executions/ex_acme", nil)
	viewer.Want(t, http.StatusForbidden, http.MethodDelete, "/api/executions/ex_acme", nil)
	editor.Want(t, http.StatusOK, http.MethodDelete, "/api/executions/ex_acme", nil)
}

func TestDeleteInProdNeedsAnAdmin(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithSettings(func(s *api.Settings) { s.Env = "prod" }))
	f.Tenant(t, "acme")
	editor := f.Key(f.APIKey(t, "acme", sqlite.RoleEditor))
	admin := f.Key(f.APIKey(t, "acme", sqlite.RoleAdmin))
	now := time.Now().UTC()
	f.Save(t, &state.Execution{ExecutionID: "ex_old", TenantID: "acme", FlowID: "ask", FlowVersion: "1", Status: state.Completed,
		Context: map[string]any{}, StartTime: now, LastUpdate: now, EndTime: &now})
	if p := editor.Want(t, http.StatusForbidden, http.MethodDelete, "/api/executions/ex_old", nil).Problem(t); !strings.Contains(p.Detail, "admin") {
		t.Fatalf("editor delete in prod: %+v", p)
	}
	var done map[string]any
	admin.Want(t, http.StatusOK, http.MethodDelete, "/api/executions/ex_old", nil).Decode(t, &done)
	if done["deleted"] != true {
		t.Fatalf("delete: %v", done)
	}
	admin.Want(t, http.StatusNotFound, http.MethodGet, "/api/executions/ex_old", nil)
}

func TestFlowsAndExecutions(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ed := f.Key(f.APIKey(t, "default", sqlite.RoleEditor))

	// Validate: every problem with its JSON path, as a 200.
	var v api.FlowValidation
	ed.Want(t, http.StatusOK, http.MethodPost, "/api/flows/validate",
		map[string]any{"definition": json.RawMessage(`{"id":"bad","start":"a","nodes":[{"id":"a","type":"nope"},{"id":"b","type":"end","next":"zz"}]}`)}).Decode(t, &v)
	if v.Valid || len(v.Problems) < 2 || v.Problems[0].Path == "" {
		t.Fatalf("validate: %+v", v)
	}
	ed.Want(t, http.StatusOK, http.MethodPost, "/api/flows/validate", map[string]any{"definition": json.RawMessage(webtest.ApprovalFlow)}).Decode(t, &v)
	if !v.Valid || v.FlowID != "ask" || v.Hash == "" {
		t.Fatalf("validate a good flow: %+v", v)
	}
	// Publish an invalid flow: 400 naming each problem.
	p := ed.Want(t, http.StatusBadRequest, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(`{"id":"bad","start":"a","nodes":[{"id":"a","type":"nope"}]}`)}).Problem(t)
	if p.Code != "invalid_flow" || len(p.Errors) == 0 || !strings.HasPrefix(p.Errors[0].Location, "definition") {
		t.Fatalf("publish invalid: %+v", p)
	}
	var pub api.FlowPublished
	ed.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(webtest.ApprovalFlow)}).Decode(t, &pub)
	if pub.Result != string(store.Published) || pub.Version != "1" {
		t.Fatalf("publish: %+v", pub)
	}
	ed.Want(t, http.StatusOK, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(webtest.ApprovalFlow)}).Decode(t, &pub)
	if pub.Result != string(store.AlreadyPublished) {
		t.Fatalf("republish: %+v", pub)
	}
	changed := strings.Replace(webtest.ApprovalFlow, "ok?", "sure?", 1)
	p = ed.Want(t, http.StatusConflict, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(changed)}).Problem(t)
	if p.Code != "flow_version_conflict" || !strings.Contains(p.Unblock, "new version") {
		t.Fatalf("changed version: %+v", p)
	}
	if v, ok := f.DB.FlowVersion(context.Background(), "default", "ask", "1"); ok != nil || v.PublishedBy == "" {
		t.Fatalf("version record: %+v %v", v, ok)
	}
	var flows api.FlowList
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/flows", nil).Decode(t, &flows)
	if len(flows.Items) != 1 || flows.Items[0].FlowID != "ask" {
		t.Fatalf("flows: %+v", flows)
	}
	var shownFlow map[string]any
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/flows/ask", nil).Decode(t, &shownFlow)
	if shownFlow["version"] != "1" || len(shownFlow["versions"].([]any)) != 1 {
		t.Fatalf("flow: %v", shownFlow)
	}
	ed.Want(t, http.StatusNotFound, http.MethodGet, "/api/flows/nosuch", nil)

	// Start, and the same Idempotency-Key again: one execution.
	var s1, s2 api.ExecutionStarted
	ed.Want(t, http.StatusCreated, http.MethodPost, "/api/executions", map[string]any{"flow_id": "ask", "input": map[string]any{"n": 1}},
		"Idempotency-Key", "order-42").Decode(t, &s1)
	if s1.FlowVersion != "1" || s1.Replayed {
		t.Fatalf("start: %+v", s1)
	}
	ed.Want(t, http.StatusOK, http.MethodPost, "/api/executions", map[string]any{"flow_id": "ask"}, "Idempotency-Key", "order-42").Decode(t, &s2)
	if s2.ExecutionID != s1.ExecutionID || !s2.Replayed {
		t.Fatalf("retry: %+v, first %+v", s2, s1)
	}
	if n, err := f.C.Do(context.Background(), f.C.B().Xlen().Key(f.Root+":flow:queue").Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("the stream holds %d starts (%v), want 1", n, err)
	}
	// Queued: no worker has it yet.
	var view api.ExecutionView
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/executions/"+s1.ExecutionID, nil).Decode(t, &view)
	if view.View != "queued" || view.Queued == nil {
		t.Fatalf("queued view: %+v", view)
	}
	ed.Want(t, http.StatusNotFound, http.MethodPost, "/api/executions", map[string]any{"flow_id": "nosuch"})
	if p := ed.Want(t, http.StatusBadRequest, http.MethodPost, "/api/executions", map[string]any{"flow_id": "ask", "input": json.RawMessage(`{"n":9007199254740993}`)}).Problem(t); p.Code != "invalid_input" {
		t.Fatalf("inexact input: %+v", p)
	}

	// A suspended execution: its wake-up report as waiting, its hints; an approval resumes it.
	now := time.Now().UTC()
	def, err := engine.Parse([]byte(webtest.ApprovalFlow), engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	f.Save(t, &state.Execution{ExecutionID: "ex_wait", TenantID: "default", FlowID: "ask", FlowVersion: "1", FlowHash: def.Hash,
		FlowHashAlgo: def.HashAlgo, Status: state.Suspended, CurrentNode: "ask", Context: map[string]any{}, StartTime: now, LastUpdate: now,
		Suspend: &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: now}})
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_wait", nil).Decode(t, &view)
	if view.View != "state" || view.Waiting == nil || view.Waiting.By != "console" || len(view.Hints) == 0 || view.Execution.Status != state.Suspended {
		t.Fatalf("suspended view: %+v", view)
	}
	p = ed.Want(t, http.StatusConflict, http.MethodPost, "/api/executions/ex_wait/resume", map[string]any{"type": "continue"}).Problem(t)
	if p.Code != "resume_refused" || len(p.Accepted) == 0 || p.Execution == nil || p.Execution.ID != "ex_wait" {
		t.Fatalf("refused resume: %+v", p)
	}
	var done map[string]any
	ed.Want(t, http.StatusOK, http.MethodPost, "/api/executions/ex_wait/resume", map[string]any{"type": "approval", "data": map[string]any{"approved": true}}).Decode(t, &done)
	if done["enqueued"] != true || done["resume_type"] != "approval" {
		t.Fatalf("resume: %v", done)
	}
	if e, ok := f.Audited(t, "execution.resume"); !ok || e.Outcome != sqlite.OutcomeAllow || e.Target != "ex_wait" || e.ActorKind != sqlite.ActorAPIKey {
		t.Fatalf("resume audit: %+v", e)
	}
	ed.Want(t, http.StatusOK, http.MethodPost, "/api/executions/ex_wait/cancel", nil).Decode(t, &done)
	if done["result"] != "cancel_requested" {
		t.Fatalf("cancel: %v", done)
	}

	// The list: filters, a cursor, bounds.
	for i := range 3 {
		f.Save(t, &state.Execution{ExecutionID: fmt.Sprintf("ex_done%d", i), TenantID: "default", FlowID: "ask", FlowVersion: "1",
			Status: state.Completed, Context: map[string]any{}, StartTime: now.Add(time.Duration(i) * time.Second), LastUpdate: now, EndTime: &now})
	}
	var page api.ExecutionList
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/executions?status=completed&limit=2", nil).Decode(t, &page)
	if len(page.Items) != 2 || page.NextCursor == "" || page.Items[0].Status != state.Completed {
		t.Fatalf("page: %+v", page)
	}
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/executions?status=completed&limit=2&cursor="+page.NextCursor, nil).Decode(t, &page)
	if len(page.Items) != 1 {
		t.Fatalf("page 2: %+v", page)
	}
	for _, q := range []string{"?cursor=forged", "?limit=0", "?limit=1001", "?status=sleeping", "?flow_id=a:b", "?nosuch=1"} {
		if p := ed.Want(t, http.StatusBadRequest, http.MethodGet, "/api/executions"+q, nil).Problem(t); p.Detail == "" {
			t.Fatalf("%s: %+v", q, p)
		}
	}
}

// TestResumeRefusalsCarryTheHint: an exhausted retry budget is a 409 that says why, which
// counter, its key and how to unblock it — what the CLI prints too (test/e2e's
// cli_hints_inproc_test.go compares them).
func TestResumeRefusalsCarryTheHint(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ctx := context.Background()
	ed := f.Key(f.APIKey(t, "default", sqlite.RoleEditor))
	ed.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(webtest.ApprovalFlow)})
	def, _ := engine.Parse([]byte(webtest.ApprovalFlow), engine.NewRegistry(), engine.DefaultExprLimits)
	now := time.Now().UTC()
	f.Save(t, &state.Execution{ExecutionID: "ex_fail", TenantID: "default", FlowID: "ask", FlowVersion: "1", FlowHash: def.Hash,
		FlowHashAlgo: def.HashAlgo, Status: state.Error, CurrentNode: "ask", Context: map[string]any{}, StartTime: now, LastUpdate: now,
		Error: &state.ErrorInfo{Type: engine.ErrTypeNode, Node: "ask", Message: "boom"}})
	ts, _ := f.Redis.Tenant("")
	for range store.G1MaxWakeups {
		if _, err := ts.Incr(ctx, keys.FamG1Wakeups, "ex_fail"); err != nil {
			t.Fatal(err)
		}
	}
	p := ed.Want(t, http.StatusConflict, http.MethodPost, "/api/executions/ex_fail/resume", map[string]any{"type": "retry"}).Problem(t)
	if p.Code != "retry_budget" || !strings.Contains(p.Detail, "g1wakeups") || !strings.Contains(p.Unblock, "redis-cli DEL") ||
		p.Fields["counter"] != "g1wakeups" || fmt.Sprint(p.Fields["counter_key"]) != control.RedactedKey || len(p.Lines) == 0 {
		t.Fatalf("budget refusal: %+v", p)
	}
	if e, ok := f.Audited(t, "execution.resume"); !ok || e.Outcome != sqlite.OutcomeDeny || e.Reason != "retry_budget" {
		t.Fatalf("refused resume audit: %+v", e)
	}
	if p := ed.Want(t, http.StatusBadRequest, http.MethodPost, "/api/executions/ex_fail/resume", map[string]any{"type": "wake"}).Problem(t); len(p.Errors) == 0 {
		t.Fatalf("bad type: %+v", p)
	}
	ed.Want(t, http.StatusNotFound, http.MethodPost, "/api/executions/ex_none/resume", map[string]any{"type": "retry"})
}

// TestBadInputIsA4xx: malformed, oversize, unknown, mistyped and misplaced input is a 4xx
// Problem that names what is wrong, never a 500.
func TestBadInputIsA4xx(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ed := f.Key(f.APIKey(t, "default", sqlite.RoleEditor))
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		where              string // in the detail or an error's location
	}{
		{"malformed JSON", http.MethodPost, "/api/executions", `{"flow_id":`, 400, "body"},
		{"not an object", http.MethodPost, "/api/executions", `[1,2]`, 400, "body"},
		{"unknown field", http.MethodPost, "/api/executions", `{"flow_id":"f","flowid":"g"}`, 400, "body.flowid"},
		{"wrong type", http.MethodPost, "/api/executions", `{"flow_id":7}`, 400, "body.flow_id"},
		{"missing field", http.MethodPost, "/api/executions", `{}`, 400, "flow_id"},
		{"empty body", http.MethodPost, "/api/executions", nil, 400, "body"},
		{"oversize body", http.MethodPost, "/api/executions", `{"flow_id":"f","input":{"x":"` + strings.Repeat("a", api.DefaultMaxBody) + `"}}`, 413, "too large"},
		{"unknown query", http.MethodGet, "/api/flows?verbose=1", nil, 400, "query.verbose"},
		{"bad limit", http.MethodGet, "/api/flows?limit=abc", nil, 400, "query.limit"},
		{"bad id", http.MethodGet, "/api/executions/bad:id", nil, 400, "execution id"},
		{"bad tenant header", http.MethodGet, "/api/flows", nil, 400, api.HeaderTenant},
		{"no route", http.MethodGet, "/api/nosuch", nil, 404, "no route"},
		{"wrong method", http.MethodPut, "/api/flows", `{}`, 405, "not allowed"},
		{"unknown resume type", http.MethodPost, "/api/executions/ex_1/resume", `{"type":"nap"}`, 400, "body.type"},
		{"audit limit 0", http.MethodGet, "/api/audit?limit=0", nil, 400, "query.limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ed
			if tc.name == "bad tenant header" {
				c = f.Client(map[string]string{"Authorization": ed.Headers["Authorization"], api.HeaderTenant: "Bad Tenant!"})
			}
			if tc.name == "audit limit 0" {
				c = f.Admin("")
			}
			r := c.Do(t, tc.method, tc.path, tc.body)
			p := r.Problem(t)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Raw)
			}
			text := p.Detail
			for _, e := range p.Errors {
				text += " " + e.Location + " " + e.Message
			}
			if !strings.Contains(text, tc.where) {
				t.Fatalf("the problem does not name %q: %s", tc.where, r.Raw)
			}
			if strings.Contains(string(r.Raw), strings.Repeat("a", 1000)) {
				t.Fatal("the problem echoes the body")
			}
		})
	}
}

func TestAuditTrail(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	admin := f.Key(f.APIKey(t, "acme", sqlite.RoleAdmin))
	for i := range 5 {
		admin.Want(t, http.StatusCreated, http.MethodPost, "/api/api-keys", map[string]string{"name": fmt.Sprint("k", i), "role": "viewer"})
	}
	var p1, p2 control.Page[model.AuditEntry]
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/audit?limit=3", nil).Decode(t, &p1)
	if len(p1.Items) != 3 || p1.NextCursor == "" || p1.Items[0].Action != "api_key.create" {
		t.Fatalf("page 1: %+v", p1)
	}
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/audit?limit=3&cursor="+p1.NextCursor, nil).Decode(t, &p2)
	if len(p2.Items) == 0 || p2.Items[0].ID >= p1.Items[2].ID {
		t.Fatalf("page 2: %+v", p2)
	}
	// Each read is itself a row.
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/audit?limit=1", nil).Decode(t, &p1)
	if p1.Items[0].Action != "audit.read" || !strings.Contains(string(p1.Items[0].Details), `"rows":3`) {
		t.Fatalf("the read is not audited: %+v", p1.Items[0])
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?cursor=-1", "?cursor=x", "?before_id=5", "?limit=x"} {
		admin.Want(t, http.StatusBadRequest, http.MethodGet, "/api/audit"+q, nil)
	}
	admin.Want(t, http.StatusForbidden, http.MethodGet, "/api/audit?all_tenants=true", nil)
	f.Admin("").Want(t, http.StatusOK, http.MethodGet, "/api/audit?all_tenants=true", nil)
	viewer := f.Key(f.APIKey(t, "acme", sqlite.RoleViewer))
	viewer.Want(t, http.StatusForbidden, http.MethodGet, "/api/audit", nil)
	// Denials of one key coalesce into one row.
	for range 4 {
		viewer.Want(t, http.StatusForbidden, http.MethodGet, "/api/audit", nil)
	}
	if e, ok := f.Audited(t, "audit.read.denied"); !ok || e.Suppressed != 4 || e.Tenant != "acme" {
		t.Fatalf("coalesced denials: %+v", e)
	}
}

func TestWithoutRedis(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithoutRedis())
	var h api.HealthReport
	f.Client(nil).Want(t, http.StatusOK, http.MethodGet, "/health", nil).Decode(t, &h)
	if h.Mode != "no-redis" || h.Status != "degraded" || !strings.Contains(h.Warning, "restart the console once Redis answers") || !h.Database.OK {
		t.Fatalf("health: %+v", h)
	}
	boss := f.Admin("")
	if p := boss.Want(t, http.StatusServiceUnavailable, http.MethodGet, "/api/flows", nil).Problem(t); p.Code != "redis_unavailable" || p.RetryAfter == 0 {
		t.Fatalf("flows without Redis: %+v", p)
	}
	// What the database holds still works; the status is not published, and says so.
	var ch api.TenantChanged
	boss.Want(t, http.StatusCreated, http.MethodPost, "/api/tenants", map[string]string{"slug": "acme"}).Decode(t, &ch)
	if ch.Published.OK || ch.Published.Error == "" {
		t.Fatalf("published without Redis: %+v", ch)
	}
}

func TestDrainRefusesWrites(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	var h api.HealthReport
	f.Client(nil).Want(t, http.StatusOK, http.MethodGet, "/health", nil).Decode(t, &h)
	if h.Status != "ok" || !h.Redis.OK || !h.Ready {
		t.Fatalf("health: %+v", h)
	}
	f.Client(nil).Want(t, http.StatusOK, http.MethodGet, "/readyz", nil)
	f.Srv.Drain()
	if r := f.Client(nil).Want(t, http.StatusServiceUnavailable, http.MethodGet, "/readyz", nil); !strings.Contains(string(r.Raw), "draining") {
		t.Fatalf("readyz: %s", r.Raw)
	}
	boss := f.Admin("")
	if p := boss.Want(t, http.StatusServiceUnavailable, http.MethodPost, "/api/tenants", map[string]string{"slug": "acme"}).Problem(t); p.Code != "draining" {
		t.Fatalf("write while draining: %+v", p)
	}
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/tenants", nil)
	f.Client(nil).Want(t, http.StatusOK, http.MethodGet, "/healthz", nil)
}
