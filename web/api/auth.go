package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"plaita/control"
	"plaita/model"

	"github.com/danielgtaylor/huma/v2"
)

// Who may call what (docs/console.md, "Auth"). A request carries at most one credential, taken
// in this order: X-Admin-API-Key (platform automation), Authorization: Bearer plk_… (a tenant's
// API key), the session cookie (a person who logged in). Roles are per tenant, viewer < editor
// < admin (store/sqlite Role); a platform admin (a user with the flag, or the admin key) is an
// admin of every tenant and the only one who manages tenants and users.

// Access is what a route requires of its caller.
type Access int

const (
	// Public: no credential (login, health, the OpenAPI document).
	Public Access = iota
	// Authenticated: any credential, no tenant (who am I, logout).
	Authenticated
	// TenantViewer, TenantEditor, TenantAdmin: that role (or more) in the request's tenant.
	TenantViewer
	TenantEditor
	TenantAdmin
	// Platform: a platform admin — a user with the flag, or the admin API key.
	Platform
)

func (a Access) String() string {
	return [...]string{"public", "authenticated", "viewer", "editor", "admin", "platform admin"}[a]
}

// role is the tenant role an access needs ("" for the others).
func (a Access) role() model.Role {
	switch a {
	case TenantViewer:
		return model.RoleViewer
	case TenantEditor:
		return model.RoleEditor
	case TenantAdmin:
		return model.RoleAdmin
	}
	return ""
}

// Credential headers and the session cookie.
const (
	HeaderAdminKey  = "X-Admin-API-Key"
	HeaderTenant    = "X-Tenant-ID"
	HeaderCSRF      = "X-CSRF-Token"
	HeaderRequestID = "X-Request-Id"
	SessionCookie   = "plaita_session"
)

// Principal is who a request is.
type Principal struct {
	Kind model.ActorKind
	// Actor names it in audit rows: a login, an API key's prefix, the admin key's fingerprint.
	Actor string
	// Fingerprint is the credential's public name: an API key's or the admin key's (the
	// audit's key fingerprint); "" for a session.
	Fingerprint string
	User        *model.User // a session's user
	Key         *model.APIKey
	// Platform: a platform admin user or the admin key.
	Platform bool
	// token is the session token (logout, CSRF); cookie: the credential came in a cookie.
	token  string
	cookie bool
}

var anonymous = Principal{Kind: model.ActorAnonymous, Actor: "anonymous"}

// denial is a refused request: its problem and the audit reason.
type denial struct {
	p      *Problem
	reason string
}

func deny(status int, code, format string, a ...any) *denial {
	return &denial{p: NewProblem(status, code, format, a...), reason: code}
}

// adminKeyState is what the admin API key configuration allows.
type adminKeyState int

const (
	adminKeyOff      adminKeyState = iota // no key, insecure not allowed: the admin API answers 503
	adminKeyRequired                      // PLAITA_CONSOLE_ADMIN_API_KEY is set
	adminKeyInsecure                      // no key, PLAITA_CONSOLE_ALLOW_INSECURE_ADMIN: any value passes
)

func (s Settings) adminKey() adminKeyState {
	switch {
	case s.AdminAPIKey != "":
		return adminKeyRequired
	case s.AllowInsecureAdmin:
		return adminKeyInsecure
	}
	return adminKeyOff
}

// adminOff is the 503 of the admin API when it has no key.
func adminOff() *denial {
	d := deny(http.StatusServiceUnavailable, "admin_api_disabled",
		"the admin API is off: PLAITA_CONSOLE_ADMIN_API_KEY is not set (and PLAITA_CONSOLE_ALLOW_INSECURE_ADMIN is not)")
	d.p.Unblock = "set PLAITA_CONSOLE_ADMIN_API_KEY and restart the console, or log in as a platform admin"
	return d
}

// authenticate finds the request's principal; a credential that is given and does not
// authenticate is a denial (never a fall back to anonymous).
func (a *API) authenticate(ctx context.Context, hc huma.Context) (Principal, *denial) {
	if v, ok := headerSet(hc, HeaderAdminKey); ok {
		switch a.s.adminKey() {
		case adminKeyOff:
			return anonymous, adminOff()
		case adminKeyInsecure:
			return Principal{Kind: model.ActorAdminKey, Actor: "insecure-admin", Platform: true}, nil
		}
		if subtle.ConstantTimeCompare([]byte(v), []byte(a.s.AdminAPIKey)) != 1 {
			return anonymous, deny(http.StatusUnauthorized, "bad_admin_key", "%s does not match PLAITA_CONSOLE_ADMIN_API_KEY", HeaderAdminKey)
		}
		fp := control.Fingerprint(v)
		return Principal{Kind: model.ActorAdminKey, Actor: "admin-key:" + fp, Fingerprint: fp, Platform: true}, nil
	}
	if auth := hc.Header("Authorization"); auth != "" {
		token, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok {
			return anonymous, deny(http.StatusUnauthorized, "bad_authorization", "Authorization: use Bearer plk_… (a tenant API key)")
		}
		k, err := a.d.Accounts.AuthenticateAPIKey(ctx, strings.TrimSpace(token))
		switch {
		case errors.Is(err, control.ErrUnauthenticated):
			return anonymous, deny(http.StatusUnauthorized, "bad_api_key", "the API key is unknown, malformed or revoked")
		case err != nil:
			return anonymous, &denial{p: problemFor(err), reason: "error"}
		}
		// The fingerprint from the key itself: a key stored with a shorter one (before it had 16
		// digits) is named in the audit as every other is.
		return Principal{Kind: model.ActorAPIKey, Actor: k.Prefix, Fingerprint: control.Fingerprint(strings.TrimSpace(token)), Key: &k}, nil
	}
	if c, err := huma.ReadCookie(hc, SessionCookie); err == nil && c.Value != "" {
		u, err := a.d.Accounts.SessionUser(ctx, c.Value)
		switch {
		case errors.Is(err, control.ErrUnauthenticated):
			return anonymous, deny(http.StatusUnauthorized, "session_expired", "the session is unknown or expired: log in again")
		case err != nil:
			return anonymous, &denial{p: problemFor(err), reason: "error"}
		}
		return Principal{Kind: model.ActorUser, Actor: u.Login, User: &u, Platform: u.PlatformAdmin, token: c.Value, cookie: true}, nil
	}
	return anonymous, nil
}

// HasSession reports whether a page's request carries the cookie of a live session (the
// pages' gate: who has none is sent to log in before anything else is done for them).
func (a *API) HasSession(r *http.Request) bool {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return false
	}
	_, err = a.d.Accounts.SessionUser(r.Context(), c.Value)
	return err == nil
}

// headerSet is a header's value and whether the request has it at all (an empty admin key is
// still an attempt at the admin API).
func headerSet(hc huma.Context, name string) (string, bool) {
	found, v := false, ""
	hc.EachHeader(func(n, val string) {
		if !found && strings.EqualFold(n, name) {
			found, v = true, val
		}
	})
	return v, found
}

// authorize decides whether p may call r, and in which tenant: the tenant and the role it
// acts with there.
func (a *API) authorize(ctx context.Context, hc huma.Context, r *Route, p Principal) (string, model.Role, *denial) {
	need := r.Access
	if need == Public {
		return "", "", nil
	}
	if p.Kind == model.ActorAnonymous {
		if need == Platform && a.s.adminKey() == adminKeyOff {
			return "", "", adminOff()
		}
		return "", "", deny(http.StatusUnauthorized, "unauthenticated", "log in (POST /api/login), or send an API key (Authorization: Bearer plk_…)")
	}
	if need == Authenticated {
		return "", "", nil
	}
	if need == Platform {
		if !p.Platform {
			if a.s.adminKey() == adminKeyOff {
				return "", "", adminOff()
			}
			return "", "", deny(http.StatusForbidden, "forbidden", "%s needs a platform admin (a platform admin's session or %s)", r.ID, HeaderAdminKey)
		}
		return "", "", nil
	}
	tenant, d := a.requestTenant(hc, p)
	if d != nil {
		return "", "", d
	}
	role, status, d := a.tenantRole(ctx, p, tenant)
	if d != nil {
		return tenant, "", d
	}
	if status == model.TenantDisabled && (!p.Platform || !IsRead(hc.Method())) {
		return tenant, role, deny(http.StatusForbidden, "tenant_disabled", "tenant %s is disabled", tenant)
	}
	if !role.AtLeast(need.role()) {
		return tenant, role, deny(http.StatusForbidden, "forbidden", "%s needs the %s role in tenant %s; you have %s", r.ID, need.role(), tenant, roleName(role))
	}
	return tenant, role, nil
}

func roleName(r model.Role) string {
	if r == "" {
		return "none"
	}
	return string(r)
}

// requestTenant is the tenant a request acts in: an API key's own (X-Tenant-ID may only repeat
// it), else X-Tenant-ID, else the default tenant.
func (a *API) requestTenant(hc huma.Context, p Principal) (string, *denial) {
	asked := strings.TrimSpace(hc.Header(HeaderTenant))
	var tenant string
	if asked != "" {
		t, err := control.NormalizeTenant(asked)
		if err != nil {
			return "", deny(http.StatusBadRequest, "invalid_tenant", "%s %q: %v", HeaderTenant, asked, err)
		}
		tenant = t
	}
	if p.Key != nil {
		if tenant != "" && tenant != p.Key.Tenant {
			return "", deny(http.StatusForbidden, "tenant_mismatch", "the API key belongs to tenant %s, not %s", p.Key.Tenant, tenant)
		}
		return p.Key.Tenant, nil
	}
	if tenant == "" {
		tenant = control.DefaultTenant
	}
	return tenant, nil
}

// tenantRole is p's role in tenant and the tenant's status.
func (a *API) tenantRole(ctx context.Context, p Principal, tenant string) (model.Role, model.TenantStatus, *denial) {
	if p.Key != nil {
		return p.Key.Role, p.Key.TenantStatus, nil
	}
	if p.Platform {
		t, err := a.d.Accounts.Tenant(ctx, tenant)
		if errors.Is(err, control.ErrTenantNotFound) {
			return "", "", deny(http.StatusNotFound, "tenant_not_found", "no tenant %s", tenant)
		} else if err != nil {
			return "", "", &denial{p: problemFor(err), reason: "error"}
		}
		return model.RoleAdmin, t.Status, nil
	}
	m, err := a.d.Accounts.Membership(ctx, p.User.ID, tenant)
	if errors.Is(err, control.ErrMemberNotFound) || errors.Is(err, control.ErrTenantNotFound) {
		// One answer for "no such tenant" and "not yours": a member of one tenant learns
		// nothing of the others.
		return "", "", deny(http.StatusForbidden, "not_a_member", "you are not a member of tenant %s", tenant)
	} else if err != nil {
		return "", "", &denial{p: problemFor(err), reason: "error"}
	}
	return m.Role, m.TenantStatus, nil
}

// IsRead reports whether a method only reads: it needs no CSRF token, and a page's gate reads
// no form for it.
func IsRead(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// csrfToken is a session's CSRF token: derived from the session token, so it needs no storage,
// dies with the session, and cannot be computed by a page that cannot read the cookie.
func csrfToken(session string) string {
	sum := sha256.Sum256([]byte("plaita-csrf\x00" + session))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// checkCSRF refuses a write made with the session cookie without the session's X-CSRF-Token
// (a form another site posts carries the cookie but cannot know the token).
func checkCSRF(hc huma.Context, p Principal) *denial {
	if !p.cookie || IsRead(hc.Method()) {
		return nil
	}
	got := hc.Header(HeaderCSRF)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(csrfToken(p.token))) != 1 {
		return deny(http.StatusForbidden, "csrf", "a write with the session cookie needs the session's %s (returned by POST /api/login and GET /api/session)", HeaderCSRF)
	}
	return nil
}

// secureRequest reports whether the request came over TLS, directly or through a proxy that
// says so: every cookie the console sets is then Secure.
func secureRequest(hc huma.Context) bool {
	return isSecure(hc.TLS() != nil, hc.Header("X-Forwarded-Proto"))
}

// SecureHTTP is secureRequest of a page's request: the page's own cookies are Secure as the
// session's is.
func SecureHTTP(r *http.Request) bool {
	return isSecure(r.TLS != nil, r.Header.Get("X-Forwarded-Proto"))
}

func isSecure(tls bool, forwardedProto string) bool {
	return tls || strings.EqualFold(strings.TrimSpace(forwardedProto), "https")
}
