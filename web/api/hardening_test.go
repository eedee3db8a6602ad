package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// The console attacked as an outsider would: what an anonymous caller, a viewer or an editor
// can make it do, read or answer. Each test holds one of the breaks the attacks found.

// TestPublicHealthNamesNoTenantHostOrPath: GET /health answers anyone, so it names no tenant (it
// listed every one, undoing the uniform not_a_member), no Redis host or port; the admin key
// reads the whole report.
func TestPublicHealthNamesNoTenantHostOrPath(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "secret-acme")
	f.Admin("").Want(t, http.StatusOK, http.MethodPost, "/api/cluster/tenant-status/reconcile", nil)
	r := f.Client(nil).Want(t, http.StatusOK, http.MethodGet, "/health", nil)
	if strings.Contains(string(r.Raw), "secret-acme") {
		t.Fatalf("the public /health names a tenant: %s", r.Raw)
	}
	var h api.HealthReport
	r.Decode(t, &h)
	if h.TenantStatus == nil || h.TenantStatus.Last == nil || h.TenantStatus.Last.PublishedCount < 2 || !h.TenantStatus.Last.OK {
		t.Fatalf("the public /health lost the reconcile's counts: %s", r.Raw)
	}
	if r := f.Admin("").Want(t, http.StatusOK, http.MethodGet, "/health", nil); !strings.Contains(string(r.Raw), "secret-acme") {
		t.Fatalf("the admin's /health lacks the tenants: %s", r.Raw)
	}

	down := errors.New("connect to redis at 10.9.8.7:6390: dial tcp 10.9.8.7:6390: connect: connection refused")
	for name, opt := range map[string]webtest.Option{"local": webtest.WithLocal(), "no-redis": webtest.WithoutRedis()} {
		f := webtest.New(t, opt, webtest.Unreachable(down))
		r := f.Client(nil).Want(t, http.StatusOK, http.MethodGet, "/health", nil)
		for _, leak := range []string{"10.9.8.7", "6390", f.DB.Location().Path} {
			if strings.Contains(string(r.Raw), leak) {
				t.Errorf("%s: the public /health names %q: %s", name, leak, r.Raw)
			}
		}
		if r := f.Admin("").Want(t, http.StatusOK, http.MethodGet, "/health", nil); !strings.Contains(string(r.Raw), "10.9.8.7:6390") {
			t.Errorf("%s: the admin's /health lacks why Redis was unreachable: %s", name, r.Raw)
		}
	}
}

// TestStreamSlotsPerTenant: one tenant's viewers cannot hold every live stream of the console
// (the bound was global: tenant B got 503 too_many_streams while A's viewer held them all).
func TestStreamSlotsPerTenant(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithSettings(func(s *api.Settings) {
		s.Live = api.LiveSettings{MaxStreams: 3, MaxPerTenant: 2, Heartbeat: time.Minute}
	}))
	f.Tenant(t, "ta")
	f.Tenant(t, "tb")
	f.Save(t, webtest.LiveState("ta", "ex_a", 1, state.Suspended))
	f.Save(t, webtest.LiveState("tb", "ex_b", 1, state.Suspended))
	va, vb := f.Key(f.APIKey(t, "ta", sqlite.RoleViewer)), f.Key(f.APIKey(t, "tb", sqlite.RoleViewer))
	for i := range 2 {
		s, r := va.Stream(t, "/api/executions/ex_a/events")
		if s == nil {
			t.Fatalf("tenant ta's stream %d: %d %s", i, r.Status, r.Raw)
		}
		s.Next(t, eventWait)
	}
	if _, r := va.Stream(t, "/api/executions/ex_a/events"); r.Status != http.StatusServiceUnavailable || r.Body["code"] != "too_many_streams" ||
		!strings.Contains(fmt.Sprint(r.Body["detail"]), "PLAITA_CONSOLE_MAX_STREAMS_PER_TENANT") {
		t.Fatalf("tenant ta's third stream: %d %s", r.Status, r.Raw)
	}
	s, r := vb.Stream(t, "/api/executions/ex_b/events")
	if s == nil {
		t.Fatalf("tenant tb's stream while ta holds its share: %d %s", r.Status, r.Raw)
	}
	s.Next(t, eventWait)
}

// TestRefusalsAreAuditedInTheCallersTrail: a request for another tenant is recorded in the
// caller's own trail (the platform's for a person, the key's tenant's for a key), not in the
// trail of the tenant asked for, whose admins would learn another tenant's logins from it.
func TestRefusalsAreAuditedInTheCallersTrail(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "ta")
	f.Tenant(t, "tb")
	alice := f.User(t, "alice-of-ta", "ta", sqlite.RoleAdmin)
	alice.Want(t, http.StatusForbidden, http.MethodGet, "/api/flows", nil, api.HeaderTenant, "tb")
	key := f.Key(f.APIKey(t, "ta", sqlite.RoleAdmin))
	key.Want(t, http.StatusForbidden, http.MethodGet, "/api/flows", nil, api.HeaderTenant, "tb")
	admin := f.User(t, "bob-of-tb", "tb", sqlite.RoleAdmin)
	var trail sqlite.AuditPage
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/audit?limit=1000", nil, api.HeaderTenant, "tb").Decode(t, &trail)
	for _, e := range trail.Entries {
		if strings.Contains(e.Actor, "alice") || strings.HasPrefix(e.Actor, "plk_") {
			t.Fatalf("tenant tb's trail records a caller of ta: %+v", e)
		}
	}
	found := map[string]string{}
	for _, e := range f.AuditRows(t) {
		if e.Action == "flow-list.denied" {
			found[e.Actor] = e.Tenant
			if !strings.Contains(string(e.Details), `"asked_tenant":"tb"`) {
				t.Errorf("the denial does not say which tenant was asked for: %+v", e)
			}
		}
	}
	if tenant, ok := found["alice-of-ta"]; !ok || tenant != "" {
		t.Errorf("alice's refusal: recorded %t in tenant %q, want the platform's trail", ok, tenant)
	}
	var keyTenant string
	for actor, tenant := range found {
		if strings.HasPrefix(actor, "plk_") {
			keyTenant = tenant
		}
	}
	if keyTenant != "ta" {
		t.Errorf("the key's refusal is in tenant %q's trail, want ta's (%v)", keyTenant, found)
	}
}

// TestProblemsNameNoStorageKey: a problem says what is wrong without the key space's names
// ("no versions in plaita:tb:flow_versions:nope" told a caller the root and other tenants'
// prefixes). The helper's check (client.do) holds every test's problems to it as well.
func TestProblemsNameNoStorageKey(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "tb")
	boss := f.Admin("tb")
	for _, call := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/api/flows/nope", nil},
		{http.MethodGet, "/api/flows/nope?version=3", nil},
		{http.MethodPost, "/api/executions", map[string]any{"flow_id": "nope"}},
		{http.MethodGet, "/api/executions/ex_nope", nil},
	} {
		r := boss.Do(t, call.method, call.path, call.body)
		if r.Status < 400 || strings.Contains(string(r.Raw), f.Root) {
			t.Errorf("%s %s: %d %s", call.method, call.path, r.Status, r.Raw)
		}
	}
}

// TestSessionTTLSetting: a login lasts SessionTTL (PLAITA_CONSOLE_SESSION_TTL), not a fixed 12 h.
func TestSessionTTLSetting(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithSettings(func(s *api.Settings) { s.SessionTTL = 90 * time.Second }))
	if _, err := f.DB.CreateUser(context.Background(), sqlite.NewUser{Login: "sam", Password: "password-sam"}); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	r := f.Client(nil).Login(t, "sam", "password-sam")
	var s api.SessionInfo
	r.Decode(t, &s)
	if !strings.Contains(r.Header.Get("Set-Cookie"), "Max-Age=90") || s.ExpiresAt.Before(before.Add(89*time.Second)) || s.ExpiresAt.After(time.Now().Add(91*time.Second)) {
		t.Fatalf("a 90 s session: cookie %q, expires %s", r.Header.Get("Set-Cookie"), s.ExpiresAt)
	}
}
