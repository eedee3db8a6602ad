package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

func TestLoginSessionCSRFAndLogout(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ctx := context.Background()
	if _, err := f.DB.CreateUser(ctx, sqlite.NewUser{Login: "sam", Password: "password-sam"}); err != nil {
		t.Fatal(err)
	}
	c := f.Client(nil)
	// A wrong password: 401, audited with the login tried.
	p := c.Want(t, http.StatusUnauthorized, http.MethodPost, "/api/login", map[string]string{"login": "sam", "password": "nope"}).Problem(t)
	if p.Code != "bad_credentials" {
		t.Fatalf("wrong password: %+v", p)
	}
	if e, ok := f.Audited(t, "auth.login_failed"); !ok || e.Actor != "sam" || e.Reason != "bad_credentials" || e.Outcome != sqlite.OutcomeDeny {
		t.Fatalf("failed login audit: %+v %v", e, ok)
	}

	r := c.Login(t, "sam", "password-sam")
	cookie := r.Header.Get("Set-Cookie")
	for _, want := range []string{api.SessionCookie + "=pls_", "HttpOnly", "SameSite=Lax", "Path=/"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("cookie %q lacks %q", cookie, want)
		}
	}
	if strings.Contains(cookie, "Secure") {
		t.Errorf("a plain-HTTP login's cookie is Secure: %q", cookie)
	}
	if c.CSRF == "" {
		t.Fatal("no CSRF token at login")
	}
	var s api.SessionInfo
	c.Want(t, http.StatusOK, http.MethodGet, "/api/session", nil).Decode(t, &s)
	if s.Kind != sqlite.ActorUser || s.Actor != "sam" || s.CSRFToken != c.CSRF || s.Platform {
		t.Fatalf("session: %+v", s)
	}
	// Behind a TLS proxy the cookie is Secure.
	behind := f.Client(nil)
	r = behind.Want(t, http.StatusOK, http.MethodPost, "/api/login", map[string]string{"login": "sam", "password": "password-sam"}, "X-Forwarded-Proto", "https")
	if !strings.Contains(r.Header.Get("Set-Cookie"), "Secure") {
		t.Errorf("cookie behind https is not Secure: %q", r.Header.Get("Set-Cookie"))
	}

	// A cookie write without the token, or with a forged one: 403, audited.
	token := c.CSRF
	c.CSRF = ""
	if p := c.Want(t, http.StatusForbidden, http.MethodPost, "/api/logout", nil).Problem(t); p.Code != "csrf" {
		t.Fatalf("no token: %+v", p)
	}
	c.CSRF = api.CSRFToken("pls_forged")
	c.Want(t, http.StatusForbidden, http.MethodPost, "/api/logout", nil)
	if e, ok := f.Audited(t, "auth.logout.denied"); !ok || e.Reason != "csrf" || e.Suppressed != 1 {
		t.Fatalf("csrf denials: %+v %v (two denials, one row)", e, ok)
	}
	c.CSRF = token
	c.Want(t, http.StatusNoContent, http.MethodPost, "/api/logout", nil)
	if p := c.Want(t, http.StatusUnauthorized, http.MethodGet, "/api/session", nil).Problem(t); p.Code != "unauthenticated" {
		t.Fatalf("after logout: %+v", p)
	}

	// The login guard (3 failures of one login from one network here): 429 with Retry-After,
	// the right password too, from this network only.
	for range 2 {
		c.Want(t, http.StatusUnauthorized, http.MethodPost, "/api/login", map[string]string{"login": "sam", "password": "nope"})
	}
	r = c.Want(t, http.StatusUnauthorized, http.MethodPost, "/api/login", map[string]string{"login": "sam", "password": "nope"})
	r = c.Want(t, http.StatusTooManyRequests, http.MethodPost, "/api/login", map[string]string{"login": "sam", "password": "password-sam"})
	if p := r.Problem(t); p.Code != "login_throttled" || r.Header.Get("Retry-After") == "" || p.RetryAfter < 1 {
		t.Fatalf("lock-out: %+v %v", p, r.Header)
	}
	if e, ok := f.Audited(t, "auth.login_failed"); !ok || e.Reason != "locked" {
		t.Fatalf("locked audit: %+v", e)
	}
	f.ClientFrom("127.0.0.2", nil).Login(t, "sam", "password-sam")
}

func TestAdminAPIKey(t *testing.T) {
	t.Parallel()
	// No key and no insecure switch: every platform route answers 503, whoever asks.
	off := webtest.New(t, webtest.WithSettings(func(s *api.Settings) { s.AdminAPIKey = "" }))
	for _, c := range []*webtest.Client{off.Client(nil), off.Admin(""), off.Client(map[string]string{api.HeaderAdminKey: ""})} {
		if p := c.Want(t, http.StatusServiceUnavailable, http.MethodGet, "/api/tenants", nil).Problem(t); p.Code != "admin_api_disabled" || p.Unblock == "" {
			t.Fatalf("no admin key: %+v", p)
		}
	}
	// A platform admin's session still works.
	ctx := context.Background()
	if _, _, err := off.DB.EnsureBootstrapAdmin(ctx, "admin", "bootstrap-pw"); err != nil {
		t.Fatal(err)
	}
	boss := off.Client(nil)
	boss.Login(t, "admin", "bootstrap-pw")
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/tenants", nil)

	f := webtest.New(t)
	if p := f.Client(map[string]string{api.HeaderAdminKey: "wrong"}).Want(t, http.StatusUnauthorized, http.MethodGet, "/api/tenants", nil).Problem(t); p.Code != "bad_admin_key" {
		t.Fatalf("wrong admin key: %+v", p)
	}
	if p := f.Client(nil).Want(t, http.StatusUnauthorized, http.MethodGet, "/api/tenants", nil).Problem(t); p.Code != "unauthenticated" {
		t.Fatalf("no credential: %+v", p)
	}
	f.Admin("").Want(t, http.StatusOK, http.MethodGet, "/api/tenants", nil)
	// A tenant admin is no platform admin.
	f.Tenant(t, "acme")
	tenantAdmin := f.Key(f.APIKey(t, "acme", sqlite.RoleAdmin))
	if p := tenantAdmin.Want(t, http.StatusForbidden, http.MethodGet, "/api/tenants", nil).Problem(t); p.Code != "forbidden" {
		t.Fatalf("tenant admin on a platform route: %+v", p)
	}

	// Insecure admin, for a laptop: any X-Admin-API-Key value is the admin.
	open := webtest.New(t, webtest.WithSettings(func(s *api.Settings) { s.AdminAPIKey, s.AllowInsecureAdmin = "", true }))
	open.Client(map[string]string{api.HeaderAdminKey: "anything"}).Want(t, http.StatusOK, http.MethodGet, "/api/tenants", nil)
	open.Client(nil).Want(t, http.StatusUnauthorized, http.MethodGet, "/api/tenants", nil)
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	key := f.APIKey(t, "acme", sqlite.RoleViewer)
	if !strings.HasPrefix(key, "plk_") {
		t.Fatalf("key %q", key)
	}
	viewer := f.Key(key)
	var s api.SessionInfo
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/session", nil).Decode(t, &s)
	if s.Kind != sqlite.ActorAPIKey || s.Tenant != "acme" || s.Role != sqlite.RoleViewer {
		t.Fatalf("key session: %+v", s)
	}
	// Keys are listed without their secret.
	r := f.Admin("acme").Want(t, http.StatusOK, http.MethodGet, "/api/api-keys", nil)
	if strings.Contains(string(r.Raw), key) || len(r.Body["items"].([]any)) != 1 {
		t.Fatalf("list: %s", r.Raw)
	}
	// A wrong key, a malformed one, a key of the wrong tenant.
	last := "x" // one character changed: never the key itself
	if strings.HasSuffix(key, last) {
		last = "y"
	}
	for _, bad := range []string{key[:len(key)-1] + last, "plk_nope", "nonsense"} {
		if p := f.Key(bad).Want(t, http.StatusUnauthorized, http.MethodGet, "/api/flows", nil).Problem(t); p.Code != "bad_api_key" {
			t.Fatalf("key %q: %+v", bad, p)
		}
	}
	if p := f.Client(map[string]string{"Authorization": "Basic abc"}).Want(t, http.StatusUnauthorized, http.MethodGet, "/api/flows", nil).Problem(t); p.Code != "bad_authorization" {
		t.Fatalf("basic auth: %+v", p)
	}
	other := f.Client(map[string]string{"Authorization": "Bearer " + key, api.HeaderTenant: "default"})
	if p := other.Want(t, http.StatusForbidden, http.MethodGet, "/api/flows", nil).Problem(t); p.Code != "tenant_mismatch" {
		t.Fatalf("key in another tenant: %+v", p)
	}
	// An editor cannot make an admin key; revoking ends a key at once.
	editor := f.Key(f.APIKey(t, "acme", sqlite.RoleEditor))
	editor.Want(t, http.StatusForbidden, http.MethodPost, "/api/api-keys", map[string]string{"name": "x", "role": "viewer"})
	var k api.APIKeyCreated
	f.Admin("acme").Want(t, http.StatusCreated, http.MethodPost, "/api/api-keys", map[string]string{"name": "temp", "role": "viewer"}).Decode(t, &k)
	f.Key(k.Key).Want(t, http.StatusOK, http.MethodGet, "/api/session", nil)
	f.Admin("acme").Want(t, http.StatusOK, http.MethodDelete, "/api/api-keys/"+k.APIKey.ID, nil)
	f.Key(k.Key).Want(t, http.StatusUnauthorized, http.MethodGet, "/api/session", nil)
	if e, ok := f.Audited(t, "api_key.revoke"); !ok || e.Target != k.APIKey.ID || e.Tenant != "acme" || e.ActorKind != sqlite.ActorAdminKey {
		t.Fatalf("revoke audit: %+v", e)
	}
}
