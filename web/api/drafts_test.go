package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"plaita/control"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

const draftFlow = `{"id":"ask","version":"%s","start":"ask","nodes":[
	{"id":"ask","type":"approval","params":{"message":"ok?"},"next":"done"},
	{"id":"done","type":"end"}]}`

func draftDef(version string) json.RawMessage {
	return json.RawMessage(strings.Replace(draftFlow, "%s", version, 1))
}

// TestDrafts: editors create, save and delete a flow's drafts and publish one, viewers read
// them, another tenant sees none; a save or a publication that names a revision someone saved
// over (If-Match) is a 412; every write is audited; the version published from the draft says
// who published it in GET /api/flows/{id}.
func TestDrafts(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	f.Tenant(t, "globex")
	ed := f.User(t, "eve", "acme", sqlite.RoleEditor)
	viewer := f.User(t, "vic", "acme", sqlite.RoleViewer)
	other := f.Key(f.APIKey(t, "globex", sqlite.RoleAdmin))

	// A draft need not be valid: this one has no nodes yet.
	var d sqlite.Draft
	r := ed.Want(t, http.StatusCreated, http.MethodPost, "/api/flows/drafts", map[string]any{"definition": json.RawMessage(`{"id":"ask","start":"ask"}`)})
	r.Decode(t, &d)
	if d.FlowID != "ask" || d.Revision != 1 || d.UpdatedBy != "eve" || r.Header.Get("ETag") != `"1"` {
		t.Fatalf("create: %+v, ETag %q", d, r.Header.Get("ETag"))
	}
	if e, ok := f.Audited(t, "draft.create"); !ok || e.Tenant != "acme" || e.Target != "ask" || e.Actor != "eve" {
		t.Fatalf("create audit: %+v", e)
	}
	if p := ed.Want(t, http.StatusConflict, http.MethodPost, "/api/flows/drafts", map[string]any{"definition": draftDef("1")}).Problem(t); p.Code != "draft_exists" {
		t.Fatalf("create twice: %+v", p)
	}
	if p := ed.Want(t, http.StatusBadRequest, http.MethodPost, "/api/flows/drafts", map[string]any{"definition": json.RawMessage(`{"start":"a"}`)}).Problem(t); p.Code != "invalid_draft" {
		t.Fatalf("no flow id: %+v", p)
	}
	viewer.Want(t, http.StatusForbidden, http.MethodPost, "/api/flows/drafts", map[string]any{"flow_id": "v", "definition": draftDef("1")})
	viewer.Want(t, http.StatusForbidden, http.MethodPut, "/api/flows/drafts/ask", map[string]any{"definition": draftDef("1")})
	viewer.Want(t, http.StatusForbidden, http.MethodPost, "/api/flows/drafts/ask/publish", nil)
	viewer.Want(t, http.StatusForbidden, http.MethodDelete, "/api/flows/drafts/ask", nil)

	// Publishing the invalid draft: refused as POST /api/flows refuses it.
	if p := ed.Want(t, http.StatusBadRequest, http.MethodPost, "/api/flows/drafts/ask/publish", nil).Problem(t); p.Code != "invalid_flow" {
		t.Fatalf("publish an invalid draft: %+v", p)
	}
	// Save over revision 1; a second editor still at revision 1 is refused.
	r = ed.Want(t, http.StatusOK, http.MethodPut, "/api/flows/drafts/ask", map[string]any{"definition": draftDef("1")}, "If-Match", `"1"`)
	if r.Header.Get("ETag") != `"2"` {
		t.Fatalf("save: ETag %q: %s", r.Header.Get("ETag"), r.Raw)
	}
	if p := ed.Want(t, http.StatusPreconditionFailed, http.MethodPut, "/api/flows/drafts/ask", map[string]any{"definition": draftDef("9")}, "If-Match", `"1"`).Problem(t); p.Code != "draft_changed" || p.Unblock == "" {
		t.Fatalf("stale save: %+v", p)
	}
	if e, ok := f.Audited(t, "draft.save"); !ok || e.Outcome != sqlite.OutcomeDeny || e.Reason != "draft_changed" {
		t.Fatalf("stale save audit: %+v", e)
	}
	if p := ed.Want(t, http.StatusBadRequest, http.MethodPut, "/api/flows/drafts/ask", map[string]any{"definition": draftDef("9")}, "If-Match", "latest").Problem(t); p.Code != "invalid_if_match" {
		t.Fatalf("bad If-Match: %+v", p)
	}
	if p := ed.Want(t, http.StatusBadRequest, http.MethodPut, "/api/flows/drafts/other", map[string]any{"definition": draftDef("9")}).Problem(t); p.Code != "draft_id_mismatch" {
		t.Fatalf("another flow's definition: %+v", p)
	}
	// Readers: the tenant's viewers; another tenant has none.
	var list api.DraftList
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/flows/drafts", nil).Decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].Revision != 2 || list.Items[0].Definition != nil {
		t.Fatalf("list: %+v", list)
	}
	r = viewer.Want(t, http.StatusOK, http.MethodGet, "/api/flows/drafts/ask", nil)
	r.Decode(t, &d)
	if d.Revision != 2 || !strings.Contains(string(d.Definition), `"version":"1"`) || r.Header.Get("ETag") != `"2"` {
		t.Fatalf("read: %+v", d)
	}
	other.Want(t, http.StatusNotFound, http.MethodGet, "/api/flows/drafts/ask", nil)
	// Another tenant's key cannot act in this one, to read or to write its drafts.
	other.Want(t, http.StatusForbidden, http.MethodGet, "/api/flows/drafts/ask", nil, api.HeaderTenant, "acme")
	other.Want(t, http.StatusForbidden, http.MethodPut, "/api/flows/drafts/ask", map[string]any{"definition": draftDef("9")}, api.HeaderTenant, "acme")
	other.Want(t, http.StatusForbidden, http.MethodPost, "/api/flows/drafts/ask/publish", nil, api.HeaderTenant, "acme")
	other.Want(t, http.StatusForbidden, http.MethodDelete, "/api/flows/drafts/ask", nil, api.HeaderTenant, "acme")
	other.Want(t, http.StatusOK, http.MethodGet, "/api/flows/drafts", nil).Decode(t, &list)
	if len(list.Items) != 0 {
		t.Fatalf("another tenant's list: %+v", list)
	}
	if p := viewer.Want(t, http.StatusBadRequest, http.MethodGet, "/api/flows/drafts?cursor=forged", nil).Problem(t); p.Code != "invalid_cursor" {
		t.Fatalf("bad cursor: %+v", p)
	}

	// Publish revision 2; naming revision 1 is a 412.
	ed.Want(t, http.StatusPreconditionFailed, http.MethodPost, "/api/flows/drafts/ask/publish", nil, "If-Match", "1")
	var pub api.DraftPublished
	ed.Want(t, http.StatusCreated, http.MethodPost, "/api/flows/drafts/ask/publish", nil, "If-Match", `"2"`).Decode(t, &pub)
	if pub.FlowID != "ask" || pub.Version != "1" || pub.DraftRevision != 2 || pub.PublishedBy != "eve" {
		t.Fatalf("publish: %+v", pub)
	}
	e, ok := f.Audited(t, "flow.publish")
	if !ok || e.Outcome != sqlite.OutcomeAllow || e.Target != "ask@1" || !strings.Contains(string(e.Details), `"draft_revision":2`) {
		t.Fatalf("publish audit: %+v", e)
	}
	// A second version from the draft, with a version given in the body.
	ed.Want(t, http.StatusOK, http.MethodPut, "/api/flows/drafts/ask", map[string]any{"definition": json.RawMessage(strings.Replace(webtest.ApprovalFlow, `"version":"1",`, "", 1))})
	ed.Want(t, http.StatusCreated, http.MethodPost, "/api/flows/drafts/ask/publish", map[string]any{"version": "2"}).Decode(t, &pub)
	if pub.Version != "2" || pub.DraftRevision != 3 {
		t.Fatalf("publish v2: %+v", pub)
	}

	// The versions: Redis's, with the console's record of who published each.
	var shown control.FlowShown
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/flows/ask", nil).Decode(t, &shown)
	if len(shown.Versions) != 2 || shown.Versions[0].Version != "2" || shown.Versions[0].PublishedBy != "eve" || !shown.Versions[0].Recorded ||
		!shown.Versions[0].Engine || shown.Versions[1].Seq != 1 || shown.Versions[1].Hash == "" {
		t.Fatalf("versions: %+v", shown.Versions)
	}
	// A version Redis lost is still listed, from the record (the engine sync writes it back).
	if err := f.C.Do(context.Background(), f.C.B().Zrem().Key(f.Root+":acme:flow_versions:ask").Member("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/flows/ask", nil).Decode(t, &shown)
	if len(shown.Versions) != 2 || shown.Versions[1].Version != "1" || shown.Versions[1].Engine || !shown.Versions[1].Recorded {
		t.Fatalf("a version Redis lost: %+v", shown.Versions)
	}

	ed.Want(t, http.StatusNoContent, http.MethodDelete, "/api/flows/drafts/ask", nil)
	ed.Want(t, http.StatusNotFound, http.MethodGet, "/api/flows/drafts/ask", nil)
	if e, ok := f.Audited(t, "draft.delete"); !ok || e.Target != "ask" || e.Outcome != sqlite.OutcomeAllow {
		t.Fatalf("delete audit: %+v", e)
	}
	ed.Want(t, http.StatusNotFound, http.MethodDelete, "/api/flows/drafts/ask", nil)
	// The published versions stay.
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/flows/ask?version=2", nil)
}

// TestDraftsWithoutRedis: drafts live in the console database, so they work while Redis is
// away; publishing one answers 503.
func TestDraftsWithoutRedis(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithoutRedis())
	ed := f.Admin("")
	ed.Want(t, http.StatusCreated, http.MethodPost, "/api/flows/drafts", map[string]any{"definition": draftDef("1")})
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/flows/drafts/ask", nil)
	if p := ed.Want(t, http.StatusServiceUnavailable, http.MethodPost, "/api/flows/drafts/ask/publish", nil).Problem(t); p.Code != "redis_unavailable" {
		t.Fatalf("publish without Redis: %+v", p)
	}
}

// TestFlowListPagesByCursor: GET /api/flows a page at a time with next_cursor; a forged cursor
// is a 400.
func TestFlowListPagesByCursor(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ed := f.Admin("")
	for _, id := range []string{"a", "b", "c"} {
		ed.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(strings.Replace(webtest.ApprovalFlow, `"id":"ask"`, `"id":"`+id+`"`, 1))})
	}
	var page api.FlowList
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/flows?limit=2", nil).Decode(t, &page)
	if len(page.Items) != 2 || page.NextCursor == "" {
		t.Fatalf("page 1: %+v", page)
	}
	seen := map[string]bool{page.Items[0].FlowID: true, page.Items[1].FlowID: true}
	cursor := page.NextCursor
	page = api.FlowList{}
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/flows?limit=2&cursor="+cursor, nil).Decode(t, &page)
	if len(page.Items) != 1 || seen[page.Items[0].FlowID] || page.NextCursor != "" {
		t.Fatalf("page 2: %+v (seen %v)", page, seen)
	}
	if p := ed.Want(t, http.StatusBadRequest, http.MethodGet, "/api/flows?cursor=forged", nil).Problem(t); p.Code != "invalid_cursor" {
		t.Fatalf("bad cursor: %+v", p)
	}
}
