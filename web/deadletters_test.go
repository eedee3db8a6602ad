package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"plaita/engine"
	"plaita/queue"
	"plaita/store/sqlite"
)

// deadLetters enqueues one start per tenant given and dead-letters them, as a worker that gave
// up on them would; it returns the dead letters' ids by tenant, newest last.
func (f *fixture) deadLetters(t testing.TB, tenants ...string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	stream := f.root + ":flow:queue"
	p := queue.NewProducer(f.c, stream, queue.Generations{}, 1<<20, nil)
	for _, tenant := range tenants {
		if _, err := p.Enqueue(ctx, queue.Envelope{Kind: queue.KindStart, TenantID: tenant, FlowID: "f", FlowVersion: "1",
			ExecutionID: engine.NewExecutionID(), Input: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := f.q.Read(ctx, "c", len(tenants), 0)
	if err != nil || len(ds) != len(tenants) {
		t.Fatalf("read %d of %d: %v", len(ds), len(tenants), err)
	}
	for _, d := range ds {
		if err := f.q.DeadLetter(ctx, d, "test"); err != nil {
			t.Fatal(err)
		}
	}
	es, err := f.q.ListDLQ(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for i := len(es) - 1; i >= 0; i-- {
		out[es[i].TenantID] = append(out[es[i].TenantID], es[i].ID)
	}
	return out
}

// streamEntries is the task stream's entries (the replays).
func (f *fixture) streamEntries(t testing.TB) []queue.Envelope {
	t.Helper()
	es, err := f.c.Do(context.Background(), f.c.B().Xrange().Key(f.root+":flow:queue").Start("-").End("+").Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	var out []queue.Envelope
	for _, e := range es {
		var env queue.Envelope
		if err := json.Unmarshal([]byte(e.FieldValues[queue.PayloadField]), &env); err != nil {
			t.Fatal(err)
		}
		out = append(out, env)
	}
	return out
}

// TestDeadLetters: a tenant lists, reads and replays its own dead letters only (another
// tenant's is a 404), a replay enqueues once and is audited in the entry's tenant, and only a
// platform admin reaches every tenant's.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.tenant(t, "acme")
	f.tenant(t, "globex")
	ids := f.deadLetters(t, "acme", "globex", "acme", "acme")
	viewer := f.user(t, "vic", "acme", sqlite.RoleViewer)
	editor := f.key(f.apiKey(t, "acme", sqlite.RoleEditor))
	adminKey := f.apiKey(t, "acme", sqlite.RoleAdmin)
	admin := f.key(adminKey)
	globex := f.key(f.apiKey(t, "globex", sqlite.RoleAdmin))
	boss := f.admin("")

	// Pages of acme's: newest first, none of globex's.
	var seen []string
	cursor := ""
	for range 5 {
		var page struct {
			TenantID   string           `json:"tenant_id"`
			Items      []queue.DLQEntry `json:"items"`
			NextCursor string           `json:"next_cursor"`
		}
		viewer.want(t, http.StatusOK, http.MethodGet, "/api/dead-letters?limit=2&cursor="+cursor, nil).decode(t, &page)
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
	viewer.want(t, http.StatusOK, http.MethodGet, "/api/dead-letters/"+ids["acme"][0], nil).decode(t, &one)
	if one.ID != ids["acme"][0] || !one.HasPayload || one.Reason != "test" {
		t.Fatalf("show: %+v", one)
	}
	var theirs struct{ Items []queue.DLQEntry }
	globex.want(t, http.StatusOK, http.MethodGet, "/api/dead-letters", nil).decode(t, &theirs)
	if len(theirs.Items) != 1 || theirs.Items[0].ID != ids["globex"][0] {
		t.Fatalf("globex's: %+v", theirs)
	}
	for _, c := range []*client{viewer, admin} {
		if p := c.want(t, http.StatusNotFound, http.MethodGet, "/api/dead-letters/"+ids["globex"][0], nil).problem(t); p.Code != "dead_letter_not_found" {
			t.Fatalf("another tenant's dead letter: %+v", p)
		}
		c.want(t, http.StatusForbidden, http.MethodGet, "/api/dead-letters?all_tenants=true", nil)
	}
	var every struct{ Items []queue.DLQEntry }
	boss.want(t, http.StatusOK, http.MethodGet, "/api/dead-letters?all_tenants=true", nil).decode(t, &every)
	if len(every.Items) != 4 {
		t.Fatalf("every tenant's: %+v", every)
	}

	// Replay: a tenant admin's, of its own entry, once.
	acme0 := "/api/dead-letters/" + ids["acme"][0] + "/replay"
	viewer.want(t, http.StatusForbidden, http.MethodPost, acme0, nil)
	editor.want(t, http.StatusForbidden, http.MethodPost, acme0, nil)
	admin.want(t, http.StatusNotFound, http.MethodPost, "/api/dead-letters/"+ids["globex"][0]+"/replay", nil)
	if e, ok := f.audited(t, "dlq.replay"); !ok || e.Outcome != sqlite.OutcomeDeny || e.Reason != "dead_letter_not_found" || e.Tenant != "acme" {
		t.Fatalf("refused replay audit: %+v", e)
	}
	if n := len(f.streamEntries(t)); n != 0 {
		t.Fatalf("%d entries enqueued by refused replays", n)
	}
	var res queue.ReplayResult
	r := admin.want(t, http.StatusOK, http.MethodPost, acme0, nil)
	r.decode(t, &res)
	if res.Status != queue.ReplayDone || res.TenantID != "acme" || res.QueueID == "" {
		t.Fatalf("replay: %+v", res)
	}
	envs := f.streamEntries(t)
	if len(envs) != 1 || envs[0].ExecutionID != res.ExecutionID || envs[0].Tenant() != "acme" || envs[0].SourceMessageID == "" {
		t.Fatalf("the stream after the replay: %+v", envs)
	}
	e, ok := f.audited(t, "dlq.replay")
	if !ok || e.Outcome != sqlite.OutcomeAllow || e.Tenant != "acme" || e.Target != ids["acme"][0] || e.ActorKind != sqlite.ActorAPIKey ||
		e.RequestID != r.header.Get(HeaderRequestID) || !strings.Contains(string(e.Details), `"target_tenant":"acme"`) {
		t.Fatalf("replay audit: %+v %s", e, e.Details)
	}
	// The key's fingerprint: the first 16 hex digits of its sha256 (the runbook's key_fingerprint).
	sum := sha256.Sum256([]byte(adminKey))
	if want := `"key_fingerprint":"` + hex.EncodeToString(sum[:])[:16] + `"`; !strings.Contains(string(e.Details), want) {
		t.Fatalf("replay audit: no %s in %s", want, e.Details)
	}
	admin.want(t, http.StatusOK, http.MethodPost, acme0, nil).decode(t, &res)
	if res.Status != queue.ReplayAlreadyReplayed || len(f.streamEntries(t)) != 1 {
		t.Fatalf("second replay: %+v, %d entries", res, len(f.streamEntries(t)))
	}

	// A platform admin replays globex's from the default tenant: the row is globex's.
	boss.want(t, http.StatusNotFound, http.MethodPost, "/api/dead-letters/"+ids["globex"][0]+"/replay", nil)
	boss.want(t, http.StatusOK, http.MethodPost, "/api/dead-letters/"+ids["globex"][0]+"/replay?all_tenants=true", nil).decode(t, &res)
	if e, ok := f.audited(t, "dlq.replay"); !ok || res.Status != queue.ReplayDone || e.Tenant != "globex" || e.ActorKind != sqlite.ActorAdminKey ||
		!strings.Contains(string(e.Details), `"target_tenant":"globex"`) {
		t.Fatalf("platform replay: %+v %+v", res, e)
	}

	for _, q := range []string{"/api/dead-letters?cursor=zz", "/api/dead-letters?limit=0", "/api/dead-letters?limit=1001", "/api/dead-letters?tenant=x",
		"/api/dead-letters/not-an-id"} {
		if p := viewer.want(t, http.StatusBadRequest, http.MethodGet, q, nil).problem(t); p.Detail == "" {
			t.Fatalf("%s: %+v", q, p)
		}
	}
	admin.want(t, http.StatusBadRequest, http.MethodPost, "/api/dead-letters/1-2-3/replay", nil)

	// A dead letter this build cannot replay (it kept no payload): 409, nothing enqueued.
	bare, err := f.c.Do(context.Background(), f.c.B().Xadd().Key(f.root+":flow:queue:dlq").Id("*").FieldValue().
		FieldValue("reason", "poison").FieldValue("tenant_id", "acme").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	before := len(f.streamEntries(t))
	if p := admin.want(t, http.StatusConflict, http.MethodPost, "/api/dead-letters/"+bare+"/replay", nil).problem(t); p.Code != "replay_refused" ||
		!strings.Contains(p.Detail, "no payload") {
		t.Fatalf("a dead letter without payload: %+v", p)
	}
	if n := len(f.streamEntries(t)); n != before {
		t.Fatalf("a refused replay enqueued %d task(s)", n-before)
	}
}
