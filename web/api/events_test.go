package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"plaita/control"
	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// TestEventsPublishAndList: an editor publishes (201 new, 200 the same again, 409 the id with
// other data), a viewer lists (by type, by cursor) and cannot publish, and a tenant sees and
// changes none of another's events.
func TestEventsPublishAndList(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ctx := context.Background()
	f.Tenant(t, "acme")
	f.Tenant(t, "globex")
	editor := f.Key(f.APIKey(t, "acme", sqlite.RoleEditor))
	viewer := f.User(t, "vic", "acme", sqlite.RoleViewer)
	globex := f.Key(f.APIKey(t, "globex", sqlite.RoleAdmin))

	var pub control.EventPublished
	editor.Want(t, http.StatusCreated, http.MethodPost, "/api/events",
		map[string]any{"type": "order.paid", "id": "evt-1", "data": map[string]any{"order": 7}}).Decode(t, &pub)
	if pub.ID != "evt-1" || pub.TenantID != "acme" || pub.Duplicate || pub.Waiting != 0 || pub.FiltersAlive != 0 || pub.Text == "" {
		t.Fatalf("publish: %+v", pub)
	}
	stored, err := f.Events.Get(ctx, "acme", "evt-1")
	if err != nil || stored.Type != "order.paid" || string(stored.Data) != `{"order":7}` {
		t.Fatalf("stored: %+v %v", stored, err)
	}
	if e, ok := f.Audited(t, "event.publish"); !ok || e.Target != "evt-1" || e.Tenant != "acme" || e.Outcome != sqlite.OutcomeAllow ||
		!strings.Contains(string(e.Details), `"type":"order.paid"`) {
		t.Fatalf("publish audit: %+v", e)
	}
	editor.Want(t, http.StatusOK, http.MethodPost, "/api/events",
		map[string]any{"type": "order.paid", "id": "evt-1", "data": map[string]any{"order": 7}}).Decode(t, &pub)
	if !pub.Duplicate {
		t.Fatalf("republish: %+v", pub)
	}
	if p := editor.Want(t, http.StatusConflict, http.MethodPost, "/api/events",
		map[string]any{"type": "order.paid", "id": "evt-1", "data": map[string]any{"order": 8}}).Problem(t); p.Code != "event_conflict" {
		t.Fatalf("conflicting republish: %+v", p)
	}
	if stored, _ := f.Events.Get(ctx, "acme", "evt-1"); string(stored.Data) != `{"order":7}` {
		t.Fatalf("a refused publish changed the event: %s", stored.Data)
	}
	for i := range 4 {
		editor.Want(t, http.StatusCreated, http.MethodPost, "/api/events", map[string]any{"type": "ping", "data": i})
	}

	// A viewer reads; pages by cursor; filters by type.
	if p := viewer.Want(t, http.StatusForbidden, http.MethodPost, "/api/events", map[string]any{"type": "ping"}).Problem(t); p.Code != "forbidden" {
		t.Fatalf("viewer publish: %+v", p)
	}
	var all []string
	cursor := ""
	for pages := 0; ; pages++ {
		var page api.EventList
		viewer.Want(t, http.StatusOK, http.MethodGet, "/api/events?limit=2&cursor="+cursor, nil).Decode(t, &page)
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
	var typed api.EventList
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/events?type=order.paid", nil).Decode(t, &typed)
	if len(typed.Items) != 1 || typed.Items[0].ID != "evt-1" || typed.TenantID != "acme" || typed.Degraded {
		t.Fatalf("by type: %+v", typed)
	}

	// Globex: sees nothing of acme's, and its own evt-1 is its own.
	var theirs api.EventList
	globex.Want(t, http.StatusOK, http.MethodGet, "/api/events", nil).Decode(t, &theirs)
	if len(theirs.Items) != 0 {
		t.Fatalf("globex lists acme's events: %+v", theirs)
	}
	globex.Want(t, http.StatusForbidden, http.MethodGet, "/api/events", nil, api.HeaderTenant, "acme")
	globex.Want(t, http.StatusCreated, http.MethodPost, "/api/events", map[string]any{"type": "other", "id": "evt-1"})
	if stored, _ := f.Events.Get(ctx, "acme", "evt-1"); stored.Type != "order.paid" {
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
		r := editor.Do(t, tc.method, tc.path, tc.body)
		p := r.Problem(t)
		text := p.Detail
		for _, e := range p.Errors {
			text += " " + e.Location + " " + e.Message
		}
		if r.Status != tc.status || !strings.Contains(text, tc.where) {
			t.Errorf("%s %s %.40v: %d %s, want %d naming %q", tc.method, tc.path, tc.body, r.Status, r.Raw, tc.status, tc.where)
		}
	}
	page, err := f.Events.List(ctx, "acme", "", 100)
	if err != nil || len(page.Events) != 5 {
		t.Fatalf("acme's events after the bad requests: %d %v", len(page.Events), err)
	}
}
