package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
	"plaita/test/webtest"
)

// TestStartAtTheQuotaIs429: a start of a tenant whose running slots are at its limit is a 429
// with Retry-After, the reason and how to raise the limit, audited, and enqueues nothing;
// once a slot frees, the same start passes.
func TestStartAtTheQuotaIs429(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ctx := context.Background()
	f.Tenant(t, "acme")
	ed := f.Key(f.APIKey(t, "acme", sqlite.RoleEditor))
	ed.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(webtest.ApprovalFlow)})
	if err := f.C.Do(ctx, f.C.B().Hset().Key(keys.MustFor(f.Root, "").TenantQuota()).FieldValue().FieldValue("acme", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Redis.AdmitRunning(ctx, store.RunningAdmit{Tenant: "acme", ExecutionID: "ex_busy", Now: time.Now(), TTL: time.Hour, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	r := ed.Want(t, http.StatusTooManyRequests, http.MethodPost, "/api/executions", map[string]any{"flow_id": "ask"})
	p := r.Problem(t)
	if p.Code != "tenant_quota" || r.Header.Get("Retry-After") == "" || p.RetryAfter < 1 || !strings.Contains(p.Detail, "tenant acme runs 1") ||
		!strings.Contains(p.Unblock, "HSET") || p.Fields["limit"] != float64(1) || p.Fields["running"] != float64(1) {
		t.Fatalf("429: %+v %v", p, r.Header)
	}
	if e, ok := f.Audited(t, "execution.start"); !ok || e.Outcome != sqlite.OutcomeDeny || e.Reason != "tenant_quota" || e.Tenant != "acme" {
		t.Fatalf("audit: %+v", e)
	}
	if n := len(f.StreamEntries(t)); n != 0 {
		t.Fatalf("a refused start enqueued %d task(s)", n)
	}
	if err := f.Redis.ReleaseRunning(ctx, "acme", "ex_busy"); err != nil {
		t.Fatal(err)
	}
	ed.Want(t, http.StatusCreated, http.MethodPost, "/api/executions", map[string]any{"flow_id": "ask"})
	if n := len(f.StreamEntries(t)); n != 1 {
		t.Fatalf("%d task(s) after the slot freed, want 1", n)
	}
}
