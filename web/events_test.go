package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"plaita/control"
	"plaita/store"
	"plaita/store/sqlite"
)

// TestEventsPublishAndList: an editor publishes (201 new, 200 the same again, 409 the id with
// other data), a viewer lists (by type, by cursor) and cannot publish, and a tenant sees and
// changes none of another's events.
func TestEventsPublishAndList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	editor := f.key(f.apiKey(t, "acme", sqlite.RoleEditor))
	viewer := f.user(t, "vic", "acme", sqlite.RoleViewer)
	globex := f.key(f.apiKey(t, "globex", sqlite.RoleAdmin))

	var pub control.EventPublished
	editor.want(t, http.StatusCreated, http.MethodPost, "/api/events",
		map[string]any{"type": "order.paid", "id": "evt-1", "data": map[string]any{"order": 7}}).decode(t, &pub)
	if pub.ID != "evt-1" || pub.TenantID != "acme" || pub.Duplicate || pub.Waiting != 0 || pub.FiltersAlive != 0 || pub.Text == "" {
		t.Fatalf("publish: %+v", pub)
	}
	stored, err := f.events.Get(ctx, "acme", "evt-1")
	if err != nil || stored.Type != "order.paid" || string(stored.Data) != `{"order":7}` {
		t.Fatalf("stored: %+v %v", stored, err)
	}
	if e, ok := f.audited(t, "event.publish"); !ok || e.Target != "evt-1" || e.Tenant != "acme" || e.Outcome != sqlite.OutcomeAllow ||
		!strings.Contains(string(e.Details), `"type":"order.paid"`) {
		t.Fatalf("publish audit: %+v", e)
	}
	editor.want(t, http.StatusOK, http.MethodPost, "/api/events",
		map[string]any{"type": "order.paid", "id": "evt-1", "data": map[string]any{"order": 7}}).decode(t, &pub)
	if !pub.Duplicate {
		t.Fatalf("republish: %+v", pub)
	}
	if p := editor.want(t, http.StatusConflict, http.MethodPost, "/api/events",
		map[string]any{"type": "order.paid", "id": "evt-1", "data": map[string]any{"order": 8}}).problem(t); p.Code != "event_conflict" {
		t.Fatalf("conflicting republish: %+v", p)
	}
	if stored, _ := f.events.Get(ctx, "acme", "evt-1"); string(stored.Data) != `{"order":7}` {
		t.Fatalf("a refused publish changed the event: %s", stored.Data)
	}
	for i := range 4 {
		editor.want(t, http.StatusCreated, http.MethodPost, "/api/events", map[string]any{"type": "ping", "data": i})
	}

	// A viewer reads; pages by cursor; filters by type.
	if p := viewer.want(t, http.StatusForbidden, http.MethodPost, "/api/events", map[string]any{"type": "ping"}).problem(t); p.Code != "forbidden" {
		t.Fatalf("viewer publish: %+v", p)
	}
	var all []string
	cursor := ""
	for pages := 0; ; pages++ {
		var page EventList
		viewer.want(t, http.StatusOK, http.MethodGet, "/api/events?limit=2&cursor="+cursor, nil).decode(t, &page)
		for _, ev := range page.Items {
			all = append(all, ev.Type)
		}
		if page.NextCursor == "" || pages > 5 {
			break
		}
		cursor = page.NextCursor
	}
	if strings.Join(all, " ") != "ping ping ping ping order.paid" {
		t.Fatalf("pages: %v", all)
	}
	var typed EventList
	viewer.want(t, http.StatusOK, http.MethodGet, "/api/events?type=order.paid", nil).decode(t, &typed)
	if len(typed.Items) != 1 || typed.Items[0].ID != "evt-1" || typed.TenantID != "acme" || typed.Degraded {
		t.Fatalf("by type: %+v", typed)
	}

	// Globex: sees nothing of acme's, and its own evt-1 is its own.
	var theirs EventList
	globex.want(t, http.StatusOK, http.MethodGet, "/api/events", nil).decode(t, &theirs)
	if len(theirs.Items) != 0 {
		t.Fatalf("globex lists acme's events: %+v", theirs)
	}
	globex.want(t, http.StatusForbidden, http.MethodGet, "/api/events", nil, HeaderTenant, "acme")
	globex.want(t, http.StatusCreated, http.MethodPost, "/api/events", map[string]any{"type": "other", "id": "evt-1"})
	if stored, _ := f.events.Get(ctx, "acme", "evt-1"); stored.Type != "order.paid" {
		t.Fatalf("globex changed acme's event: %+v", stored)
	}

	// Bad input: named, a 4xx, nothing written.
	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		where        string
	}{
		{http.MethodPost, "/api/events", `{"type":`, 400, "body"},
		{http.MethodPost, "/api/events", `{"type":"a","dta":{}}`, 400, "body.dta"},
		{http.MethodPost, "/api/events", `{}`, 400, "type"},
		{http.MethodPost, "/api/events", `{"type":"a b"}`, 400, "event type"},
		{http.MethodPost, "/api/events", `{"type":"a","id":"x y"}`, 400, "event id"},
		{http.MethodPost, "/api/events", `{"type":"a","data":"` + strings.Repeat("x", store.MaxEventDataBytes+64<<10) + `"}`, 413, "too large"},
		{http.MethodGet, "/api/events?cursor=forged", nil, 400, "cursor"},
		{http.MethodGet, "/api/events?limit=0", nil, 400, "query.limit"},
		{http.MethodGet, "/api/events?limit=1001", nil, 400, "query.limit"},
		{http.MethodGet, "/api/events?type=a:b", nil, 400, "event type"},
	} {
		r := editor.do(t, tc.method, tc.path, tc.body)
		p := r.problem(t)
		text := p.Detail
		for _, e := range p.Errors {
			text += " " + e.Location + " " + e.Message
		}
		if r.status != tc.status || !strings.Contains(text, tc.where) {
			t.Errorf("%s %s %.40v: %d %s, want %d naming %q", tc.method, tc.path, tc.body, r.status, r.raw, tc.status, tc.where)
		}
	}
	page, err := f.events.List(ctx, "acme", "", 100)
	if err != nil || len(page.Events) != 5 {
		t.Fatalf("acme's events after the bad requests: %d %v", len(page.Events), err)
	}
}
