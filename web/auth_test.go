package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"plaita/store/sqlite"
)

func TestLoginSessionCSRFAndLogout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.db.CreateUser(ctx, sqlite.NewUser{Login: "sam", Password: "password-sam"}); err != nil {
		t.Fatal(err)
	}
	c := f.client(nil)
	// A wrong password: 401, audited with the login tried.
	p := c.want(t, http.StatusUnauthorized, http.MethodPost, "/api/login", map[string]string{"login": "sam", "password": "nope"}).problem(t)
	if p.Code != "bad_credentials" {
		t.Fatalf("wrong password: %+v", p)
	}
	if e, ok := f.audited(t, "auth.login_failed"); !ok || e.Actor != "sam" || e.Reason != "bad_credentials" || e.Outcome != sqlite.OutcomeDeny {
		t.Fatalf("failed login audit: %+v %v", e, ok)
	}

	r := c.login(t, "sam", "password-sam")
	cookie := r.header.Get("Set-Cookie")
	for _, want := range []string{SessionCookie + "=pls_", "HttpOnly", "SameSite=Lax", "Path=/"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("cookie %q lacks %q", cookie, want)
		}
	}
	if strings.Contains(cookie, "Secure") {
		t.Errorf("a plain-HTTP login's cookie is Secure: %q", cookie)
	}
	if c.csrf == "" {
		t.Fatal("no CSRF token at login")
	}
	var s SessionInfo
	c.want(t, http.StatusOK, http.MethodGet, "/api/session", nil).decode(t, &s)
	if s.Kind != sqlite.ActorUser || s.Actor != "sam" || s.CSRFToken != c.csrf || s.Platform {
		t.Fatalf("session: %+v", s)
	}
	// Behind a TLS proxy the cookie is Secure.
	behind := f.client(nil)
	r = behind.want(t, http.StatusOK, http.MethodPost, "/api/login", map[string]string{"login": "sam", "password": "password-sam"}, "X-Forwarded-Proto", "https")
	if !strings.Contains(r.header.Get("Set-Cookie"), "Secure") {
		t.Errorf("cookie behind https is not Secure: %q", r.header.Get("Set-Cookie"))
	}

	// A cookie write without the token, or with a forged one: 403, audited.
	token := c.csrf
	c.csrf = ""
	if p := c.want(t, http.StatusForbidden, http.MethodPost, "/api/logout", nil).problem(t); p.Code != "csrf" {
		t.Fatalf("no token: %+v", p)
	}
	c.csrf = csrfToken("pls_forged")
	c.want(t, http.StatusForbidden, http.MethodPost, "/api/logout", nil)
	if e, ok := f.audited(t, "auth.logout.denied"); !ok || e.Reason != "csrf" || e.Suppressed != 1 {
		t.Fatalf("csrf denials: %+v %v (two denials, one row)", e, ok)
	}
	c.csrf = token
	c.want(t, http.StatusNoContent, http.MethodPost, "/api/logout", nil)
	if p := c.want(t, http.StatusUnauthorized, http.MethodGet, "/api/session", nil).problem(t); p.Code != "unauthenticated" {
		t.Fatalf("after logout: %+v", p)
	}

	// The login guard (3 failures of one login from one network here): 429 with Retry-After,
	// the right password too, from this network only.
	for range 2 {
		c.want(t, http.StatusUnauthorized, http.MethodPost, "/api/login", map[string]string{"login": "sam", "password": "nope"})
	}
	r = c.want(t, http.StatusUnauthorized, http.MethodPost, "/api/login", map[string]string{"login": "sam", "password": "nope"})
	r = c.want(t, http.StatusTooManyRequests, http.MethodPost, "/api/login", map[string]string{"login": "sam", "password": "password-sam"})
	if p := r.problem(t); p.Code != "login_throttled" || r.header.Get("Retry-After") == "" || p.RetryAfter < 1 {
		t.Fatalf("lock-out: %+v %v", p, r.header)
	}
	if e, ok := f.audited(t, "auth.login_failed"); !ok || e.Reason != "locked" {
		t.Fatalf("locked audit: %+v", e)
	}
	f.clientFrom("127.0.0.2", nil).login(t, "sam", "password-sam")
}

func TestAdminAPIKey(t *testing.T) {
	t.Parallel()
	// No key and no insecure switch: every platform route answers 503, whoever asks.
	off := newFixture(t, withSettings(func(s *Settings) { s.AdminAPIKey = "" }))
	for _, c := range []*client{off.client(nil), off.admin(""), off.client(map[string]string{HeaderAdminKey: ""})} {
		if p := c.want(t, http.StatusServiceUnavailable, http.MethodGet, "/api/tenants", nil).problem(t); p.Code != "admin_api_disabled" || p.Unblock == "" {
			t.Fatalf("no admin key: %+v", p)
		}
	}
	// A platform admin's session still works.
	ctx := context.Background()
	if _, _, err := off.db.EnsureBootstrapAdmin(ctx, "admin", "bootstrap-pw"); err != nil {
		t.Fatal(err)
	}
	boss := off.client(nil)
	boss.login(t, "admin", "bootstrap-pw")
	boss.want(t, http.StatusOK, http.MethodGet, "/api/tenants", nil)

	f := newFixture(t)
	if p := f.client(map[string]string{HeaderAdminKey: "wrong"}).want(t, http.StatusUnauthorized, http.MethodGet, "/api/tenants", nil).problem(t); p.Code != "bad_admin_key" {
		t.Fatalf("wrong admin key: %+v", p)
	}
	if p := f.client(nil).want(t, http.StatusUnauthorized, http.MethodGet, "/api/tenants", nil).problem(t); p.Code != "unauthenticated" {
		t.Fatalf("no credential: %+v", p)
	}
	f.admin("").want(t, http.StatusOK, http.MethodGet, "/api/tenants", nil)
	// A tenant admin is no platform admin.
	f.tenant(t, "acme")
	tenantAdmin := f.key(f.apiKey(t, "acme", sqlite.RoleAdmin))
	if p := tenantAdmin.want(t, http.StatusForbidden, http.MethodGet, "/api/tenants", nil).problem(t); p.Code != "forbidden" {
		t.Fatalf("tenant admin on a platform route: %+v", p)
	}

	// Insecure admin, for a laptop: any X-Admin-API-Key value is the admin.
	open := newFixture(t, withSettings(func(s *Settings) { s.AdminAPIKey, s.AllowInsecureAdmin = "", true }))
	open.client(map[string]string{HeaderAdminKey: "anything"}).want(t, http.StatusOK, http.MethodGet, "/api/tenants", nil)
	open.client(nil).want(t, http.StatusUnauthorized, http.MethodGet, "/api/tenants", nil)
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.tenant(t, "acme")
	key := f.apiKey(t, "acme", sqlite.RoleViewer)
	if !strings.HasPrefix(key, "plk_") {
		t.Fatalf("key %q", key)
	}
	viewer := f.key(key)
	var s SessionInfo
	viewer.want(t, http.StatusOK, http.MethodGet, "/api/session", nil).decode(t, &s)
	if s.Kind != sqlite.ActorAPIKey || s.Tenant != "acme" || s.Role != sqlite.RoleViewer {
		t.Fatalf("key session: %+v", s)
	}
	// Keys are listed without their secret.
	r := f.admin("acme").want(t, http.StatusOK, http.MethodGet, "/api/api-keys", nil)
	if strings.Contains(string(r.raw), key) || len(r.body["items"].([]any)) != 1 {
		t.Fatalf("list: %s", r.raw)
	}
	// A wrong key, a malformed one, a key of the wrong tenant.
	last := "x" // one character changed: never the key itself
	if strings.HasSuffix(key, last) {
		last = "y"
	}
	for _, bad := range []string{key[:len(key)-1] + last, "plk_nope", "nonsense"} {
		if p := f.key(bad).want(t, http.StatusUnauthorized, http.MethodGet, "/api/flows", nil).problem(t); p.Code != "bad_api_key" {
			t.Fatalf("key %q: %+v", bad, p)
		}
	}
	if p := f.client(map[string]string{"Authorization": "Basic abc"}).want(t, http.StatusUnauthorized, http.MethodGet, "/api/flows", nil).problem(t); p.Code != "bad_authorization" {
		t.Fatalf("basic auth: %+v", p)
	}
	other := f.client(map[string]string{"Authorization": "Bearer " + key, HeaderTenant: "default"})
	if p := other.want(t, http.StatusForbidden, http.MethodGet, "/api/flows", nil).problem(t); p.Code != "tenant_mismatch" {
		t.Fatalf("key in another tenant: %+v", p)
	}
	// An editor cannot make an admin key; revoking ends a key at once.
	editor := f.key(f.apiKey(t, "acme", sqlite.RoleEditor))
	editor.want(t, http.StatusForbidden, http.MethodPost, "/api/api-keys", map[string]string{"name": "x", "role": "viewer"})
	var k APIKeyCreated
	f.admin("acme").want(t, http.StatusCreated, http.MethodPost, "/api/api-keys", map[string]string{"name": "temp", "role": "viewer"}).decode(t, &k)
	f.key(k.Key).want(t, http.StatusOK, http.MethodGet, "/api/session", nil)
	f.admin("acme").want(t, http.StatusOK, http.MethodDelete, "/api/api-keys/"+k.APIKey.ID, nil)
	f.key(k.Key).want(t, http.StatusUnauthorized, http.MethodGet, "/api/session", nil)
	if e, ok := f.audited(t, "api_key.revoke"); !ok || e.Target != k.APIKey.ID || e.Tenant != "acme" || e.ActorKind != sqlite.ActorAdminKey {
		t.Fatalf("revoke audit: %+v", e)
	}
}
