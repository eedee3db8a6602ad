package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"plaita/queue"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// TestDeadLetters: a tenant lists, reads and replays its own dead letters only (another
// tenant's is a 404), a replay enqueues once and is audited in the entry's tenant, and only a
// platform admin reaches every tenant's.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	f.Tenant(t, "globex")
	ids := f.DeadLetters(t, "acme", "globex", "acme", "acme")
	viewer := f.User(t, "vic", "acme", sqlite.RoleViewer)
	editor := f.Key(f.APIKey(t, "acme", sqlite.RoleEditor))
	adminKey := f.APIKey(t, "acme", sqlite.RoleAdmin)
	admin := f.Key(adminKey)
	globex := f.Key(f.APIKey(t, "globex", sqlite.RoleAdmin))
	boss := f.Admin("")

	// Pages of acme's: newest first, none of globex's.
	var seen []string
	cursor := ""
	for range 5 {
		var page struct {
			TenantID   string           `json:"tenant_id"`
			Items      []queue.DLQEntry `json:"items"`
			NextCursor string           `json:"next_cursor"`
		}
		viewer.Want(t, http.StatusOK, http.MethodGet, "/api/dead-letters?limit=2&cursor="+cursor, nil).Decode(t, &page)
		for _, e := range page.Items {
			if e.TenantID != "acme" {
				t.Fatalf("acme lists %+v", e)
			}
			seen = append(seen, e.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if want := []string{ids["acme"][2], ids["acme"][1], ids["acme"][0]}; strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Fatalf("acme's pages: %v, want %v", seen, want)
	}
	var one queue.DLQEntry
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/dead-letters/"+ids["acme"][0], nil).Decode(t, &one)
	if one.ID != ids["acme"][0] || !one.HasPayload || one.Reason != "test" {
		t.Fatalf("show: %+v", one)
	}
	var theirs struct{ Items []queue.DLQEntry }
	globex.Want(t, http.StatusOK, http.MethodGet, "/api/dead-letters", nil).Decode(t, &theirs)
	if len(theirs.Items) != 1 || theirs.Items[0].ID != ids["globex"][0] {
		t.Fatalf("globex's: %+v", theirs)
	}
	for _, c := range []*webtest.Client{viewer, admin} {
		if p := c.Want(t, http.StatusNotFound, http.MethodGet, "/api/dead-letters/"+ids["globex"][0], nil).Problem(t); p.Code != "dead_letter_not_found" {
			t.Fatalf("another tenant's dead letter: %+v", p)
		}
		c.Want(t, http.StatusForbidden, http.MethodGet, "/api/dead-letters?all_tenants=true", nil)
	}
	var every struct{ Items []queue.DLQEntry }
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/dead-letters?all_tenants=true", nil).Decode(t, &every)
	if len(every.Items) != 4 {
		t.Fatalf("every tenant's: %+v", every)
	}

	// Replay: a tenant admin's, of its own entry, once.
	acme0 := "/api/dead-letters/" + ids["acme"][0] + "/replay"
	viewer.Want(t, http.StatusForbidden, http.MethodPost, acme0, nil)
	editor.Want(t, http.StatusForbidden, http.MethodPost, acme0, nil)
	admin.Want(t, http.StatusNotFound, http.MethodPost, "/api/dead-letters/"+ids["globex"][0]+"/replay", nil)
	if e, ok := f.Audited(t, "dlq.replay"); !ok || e.Outcome != sqlite.OutcomeDeny || e.Reason != "dead_letter_not_found" || e.Tenant != "acme" {
		t.Fatalf("refused replay audit: %+v", e)
	}
	if n := len(f.StreamEntries(t)); n != 0 {
		t.Fatalf("%d entries enqueued by refused replays", n)
	}
	var res queue.ReplayResult
	r := admin.Want(t, http.StatusOK, http.MethodPost, acme0, nil)
	r.Decode(t, &res)
	if res.Status != queue.ReplayDone || res.TenantID != "acme" || res.QueueID == "" {
		t.Fatalf("replay: %+v", res)
	}
	envs := f.StreamEntries(t)
	if len(envs) != 1 || envs[0].ExecutionID != res.ExecutionID || envs[0].Tenant() != "acme" || envs[0].SourceMessageID == "" {
		t.Fatalf("the stream after the replay: %+v", envs)
	}
	e, ok := f.Audited(t, "dlq.replay")
	if !ok || e.Outcome != sqlite.OutcomeAllow || e.Tenant != "acme" || e.Target != ids["acme"][0] || e.ActorKind != sqlite.ActorAPIKey ||
		e.RequestID != r.Header.Get(api.HeaderRequestID) || !strings.Contains(string(e.Details), `"target_tenant":"acme"`) {
		t.Fatalf("replay audit: %+v %s", e, e.Details)
	}
	// The key's fingerprint: the first 16 hex digits of its sha256 (the runbook's key_fingerprint).
	sum := sha256.Sum256([]byte(adminKey))
	if want := `"key_fingerprint":"` + hex.EncodeToString(sum[:])[:16] + `"`; !strings.Contains(string(e.Details), want) {
		t.Fatalf("replay audit: no %s in %s", want, e.Details)
	}
	admin.Want(t, http.StatusOK, http.MethodPost, acme0, nil).Decode(t, &res)
	if res.Status != queue.ReplayAlreadyReplayed || len(f.StreamEntries(t)) != 1 {
		t.Fatalf("second replay: %+v, %d entries", res, len(f.StreamEntries(t)))
	}

	// A platform admin replays globex's from the default tenant: the row is globex's.
	boss.Want(t, http.StatusNotFound, http.MethodPost, "/api/dead-letters/"+ids["globex"][0]+"/replay", nil)
	boss.Want(t, http.StatusOK, http.MethodPost, "/api/dead-letters/"+ids["globex"][0]+"/replay?all_tenants=true", nil).Decode(t, &res)
	if e, ok := f.Audited(t, "dlq.replay"); !ok || res.Status != queue.ReplayDone || e.Tenant != "globex" || e.ActorKind != sqlite.ActorAdminKey ||
		!strings.Contains(string(e.Details), `"target_tenant":"globex"`) {
		t.Fatalf("platform replay: %+v %+v", res, e)
	}

	for _, q := range []string{"/api/dead-letters?cursor=zz", "/api/dead-letters?limit=0", "/api/dead-letters?limit=1001", "/api/dead-letters?tenant=x",
		"/api/dead-letters/not-an-id"} {
		if p := viewer.Want(t, http.StatusBadRequest, http.MethodGet, q, nil).Problem(t); p.Detail == "" {
			t.Fatalf("%s: %+v", q, p)
		}
	}
	admin.Want(t, http.StatusBadRequest, http.MethodPost, "/api/dead-letters/1-2-3/replay", nil)

	// A dead letter this build cannot replay (it kept no payload): 409, nothing enqueued.
	bare, err := f.C.Do(context.Background(), f.C.B().Xadd().Key(f.Root+":flow:queue:dlq").Id("*").FieldValue().
		FieldValue("reason", "poison").FieldValue("tenant_id", "acme").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	before := len(f.StreamEntries(t))
	if p := admin.Want(t, http.StatusConflict, http.MethodPost, "/api/dead-letters/"+bare+"/replay", nil).Problem(t); p.Code != "replay_refused" ||
		!strings.Contains(p.Detail, "no payload") {
		t.Fatalf("a dead letter without payload: %+v", p)
	}
	if n := len(f.StreamEntries(t)); n != before {
		t.Fatalf("a refused replay enqueued %d task(s)", n-before)
	}
}
