package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"plaita/control"
	"plaita/store/sqlite"
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
	f := newFixture(t)
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	ed := f.user(t, "eve", "acme", sqlite.RoleEditor)
	viewer := f.user(t, "vic", "acme", sqlite.RoleViewer)
	other := f.key(f.apiKey(t, "globex", sqlite.RoleAdmin))

	// A draft need not be valid: this one has no nodes yet.
	var d sqlite.Draft
	r := ed.want(t, http.StatusCreated, http.MethodPost, "/api/flows/drafts", map[string]any{"definition": json.RawMessage(`{"id":"ask","start":"ask"}`)})
	r.decode(t, &d)
	if d.FlowID != "ask" || d.Revision != 1 || d.UpdatedBy != "eve" || r.header.Get("ETag") != `"1"` {
		t.Fatalf("create: %+v, ETag %q", d, r.header.Get("ETag"))
	}
	if e, ok := f.audited(t, "draft.create"); !ok || e.Tenant != "acme" || e.Target != "ask" || e.Actor != "eve" {
		t.Fatalf("create audit: %+v", e)
	}
	if p := ed.want(t, http.StatusConflict, http.MethodPost, "/api/flows/drafts", map[string]any{"definition": draftDef("1")}).problem(t); p.Code != "draft_exists" {
		t.Fatalf("create twice: %+v", p)
	}
	if p := ed.want(t, http.StatusBadRequest, http.MethodPost, "/api/flows/drafts", map[string]any{"definition": json.RawMessage(`{"start":"a"}`)}).problem(t); p.Code != "invalid_draft" {
		t.Fatalf("no flow id: %+v", p)
	}
	viewer.want(t, http.StatusForbidden, http.MethodPost, "/api/flows/drafts", map[string]any{"flow_id": "v", "definition": draftDef("1")})
	viewer.want(t, http.StatusForbidden, http.MethodPut, "/api/flows/drafts/ask", map[string]any{"definition": draftDef("1")})
	viewer.want(t, http.StatusForbidden, http.MethodPost, "/api/flows/drafts/ask/publish", nil)
	viewer.want(t, http.StatusForbidden, http.MethodDelete, "/api/flows/drafts/ask", nil)

	// Publishing the invalid draft: refused as POST /api/flows refuses it.
	if p := ed.want(t, http.StatusBadRequest, http.MethodPost, "/api/flows/drafts/ask/publish", nil).problem(t); p.Code != "invalid_flow" {
		t.Fatalf("publish an invalid draft: %+v", p)
	}
	// Save over revision 1; a second editor still at revision 1 is refused.
	r = ed.want(t, http.StatusOK, http.MethodPut, "/api/flows/drafts/ask", map[string]any{"definition": draftDef("1")}, "If-Match", `"1"`)
	if r.header.Get("ETag") != `"2"` {
		t.Fatalf("save: ETag %q: %s", r.header.Get("ETag"), r.raw)
	}
	if p := ed.want(t, http.StatusPreconditionFailed, http.MethodPut, "/api/flows/drafts/ask", map[string]any{"definition": draftDef("9")}, "If-Match", `"1"`).problem(t); p.Code != "draft_changed" || p.Unblock == "" {
		t.Fatalf("stale save: %+v", p)
	}
	if e, ok := f.audited(t, "draft.save"); !ok || e.Outcome != sqlite.OutcomeDeny || e.Reason != "draft_changed" {
		t.Fatalf("stale save audit: %+v", e)
	}
	if p := ed.want(t, http.StatusBadRequest, http.MethodPut, "/api/flows/drafts/ask", map[string]any{"definition": draftDef("9")}, "If-Match", "latest").problem(t); p.Code != "invalid_if_match" {
		t.Fatalf("bad If-Match: %+v", p)
	}
	if p := ed.want(t, http.StatusBadRequest, http.MethodPut, "/api/flows/drafts/other", map[string]any{"definition": draftDef("9")}).problem(t); p.Code != "draft_id_mismatch" {
		t.Fatalf("another flow's definition: %+v", p)
	}
	// Readers: the tenant's viewers; another tenant has none.
	var list DraftList
	viewer.want(t, http.StatusOK, http.MethodGet, "/api/flows/drafts", nil).decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].Revision != 2 || list.Items[0].Definition != nil {
		t.Fatalf("list: %+v", list)
	}
	r = viewer.want(t, http.StatusOK, http.MethodGet, "/api/flows/drafts/ask", nil)
	r.decode(t, &d)
	if d.Revision != 2 || !strings.Contains(string(d.Definition), `"version":"1"`) || r.header.Get("ETag") != `"2"` {
		t.Fatalf("read: %+v", d)
	}
	other.want(t, http.StatusNotFound, http.MethodGet, "/api/flows/drafts/ask", nil)
	// Another tenant's key cannot act in this one, to read or to write its drafts.
	other.want(t, http.StatusForbidden, http.MethodGet, "/api/flows/drafts/ask", nil, HeaderTenant, "acme")
	other.want(t, http.StatusForbidden, http.MethodPut, "/api/flows/drafts/ask", map[string]any{"definition": draftDef("9")}, HeaderTenant, "acme")
	other.want(t, http.StatusForbidden, http.MethodPost, "/api/flows/drafts/ask/publish", nil, HeaderTenant, "acme")
	other.want(t, http.StatusForbidden, http.MethodDelete, "/api/flows/drafts/ask", nil, HeaderTenant, "acme")
	other.want(t, http.StatusOK, http.MethodGet, "/api/flows/drafts", nil).decode(t, &list)
	if len(list.Items) != 0 {
		t.Fatalf("another tenant's list: %+v", list)
	}
	if p := viewer.want(t, http.StatusBadRequest, http.MethodGet, "/api/flows/drafts?cursor=forged", nil).problem(t); p.Code != "invalid_cursor" {
		t.Fatalf("bad cursor: %+v", p)
	}

	// Publish revision 2; naming revision 1 is a 412.
	ed.want(t, http.StatusPreconditionFailed, http.MethodPost, "/api/flows/drafts/ask/publish", nil, "If-Match", "1")
	var pub DraftPublished
	ed.want(t, http.StatusCreated, http.MethodPost, "/api/flows/drafts/ask/publish", nil, "If-Match", `"2"`).decode(t, &pub)
	if pub.FlowID != "ask" || pub.Version != "1" || pub.DraftRevision != 2 || pub.PublishedBy != "eve" {
		t.Fatalf("publish: %+v", pub)
	}
	e, ok := f.audited(t, "flow.publish")
	if !ok || e.Outcome != sqlite.OutcomeAllow || e.Target != "ask@1" || !strings.Contains(string(e.Details), `"draft_revision":2`) {
		t.Fatalf("publish audit: %+v", e)
	}
	// A second version from the draft, with a version given in the body.
	ed.want(t, http.StatusOK, http.MethodPut, "/api/flows/drafts/ask", map[string]any{"definition": json.RawMessage(strings.Replace(approvalFlow, `"version":"1",`, "", 1))})
	ed.want(t, http.StatusCreated, http.MethodPost, "/api/flows/drafts/ask/publish", map[string]any{"version": "2"}).decode(t, &pub)
	if pub.Version != "2" || pub.DraftRevision != 3 {
		t.Fatalf("publish v2: %+v", pub)
	}

	// The versions: Redis's, with the console's record of who published each.
	var shown control.FlowShown
	viewer.want(t, http.StatusOK, http.MethodGet, "/api/flows/ask", nil).decode(t, &shown)
	if len(shown.Versions) != 2 || shown.Versions[0].Version != "2" || shown.Versions[0].PublishedBy != "eve" || !shown.Versions[0].Recorded ||
		!shown.Versions[0].Engine || shown.Versions[1].Seq != 1 || shown.Versions[1].Hash == "" {
		t.Fatalf("versions: %+v", shown.Versions)
	}
	// A version Redis lost is still listed, from the record (the engine sync writes it back).
	if err := f.c.Do(context.Background(), f.c.B().Zrem().Key(f.root+":acme:flow_versions:ask").Member("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	viewer.want(t, http.StatusOK, http.MethodGet, "/api/flows/ask", nil).decode(t, &shown)
	if len(shown.Versions) != 2 || shown.Versions[1].Version != "1" || shown.Versions[1].Engine || !shown.Versions[1].Recorded {
		t.Fatalf("a version Redis lost: %+v", shown.Versions)
	}

	ed.want(t, http.StatusNoContent, http.MethodDelete, "/api/flows/drafts/ask", nil)
	ed.want(t, http.StatusNotFound, http.MethodGet, "/api/flows/drafts/ask", nil)
	if e, ok := f.audited(t, "draft.delete"); !ok || e.Target != "ask" || e.Outcome != sqlite.OutcomeAllow {
		t.Fatalf("delete audit: %+v", e)
	}
	ed.want(t, http.StatusNotFound, http.MethodDelete, "/api/flows/drafts/ask", nil)
	// The published versions stay.
	viewer.want(t, http.StatusOK, http.MethodGet, "/api/flows/ask?version=2", nil)
}

// TestDraftsWithoutRedis: drafts live in the console database, so they work while Redis is
// away; publishing one answers 503.
func TestDraftsWithoutRedis(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withoutRedis())
	ed := f.admin("")
	ed.want(t, http.StatusCreated, http.MethodPost, "/api/flows/drafts", map[string]any{"definition": draftDef("1")})
	ed.want(t, http.StatusOK, http.MethodGet, "/api/flows/drafts/ask", nil)
	if p := ed.want(t, http.StatusServiceUnavailable, http.MethodPost, "/api/flows/drafts/ask/publish", nil).problem(t); p.Code != "redis_unavailable" {
		t.Fatalf("publish without Redis: %+v", p)
	}
}

// TestFlowListPagesByCursor: GET /api/flows a page at a time with next_cursor; a forged cursor
// is a 400.
func TestFlowListPagesByCursor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ed := f.admin("")
	for _, id := range []string{"a", "b", "c"} {
		ed.want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(strings.Replace(approvalFlow, `"id":"ask"`, `"id":"`+id+`"`, 1))})
	}
	var page FlowList
	ed.want(t, http.StatusOK, http.MethodGet, "/api/flows?limit=2", nil).decode(t, &page)
	if len(page.Items) != 2 || page.NextCursor == "" {
		t.Fatalf("page 1: %+v", page)
	}
	seen := map[string]bool{page.Items[0].FlowID: true, page.Items[1].FlowID: true}
	cursor := page.NextCursor
	page = FlowList{}
	ed.want(t, http.StatusOK, http.MethodGet, "/api/flows?limit=2&cursor="+cursor, nil).decode(t, &page)
	if len(page.Items) != 1 || seen[page.Items[0].FlowID] || page.NextCursor != "" {
		t.Fatalf("page 2: %+v (seen %v)", page, seen)
	}
	if p := ed.want(t, http.StatusBadRequest, http.MethodGet, "/api/flows?cursor=forged", nil).problem(t); p.Code != "invalid_cursor" {
		t.Fatalf("bad cursor: %+v", p)
	}
}
