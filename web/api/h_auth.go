package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"plaita/control"
	"plaita/model"
)

type loginIn struct {
	Body struct {
		Login    string `json:"login" minLength:"1" maxLength:"254"`
		Password string `json:"password" minLength:"1" maxLength:"1024"`
	}
}

// SessionInfo is who a caller is.
type SessionInfo struct {
	Kind     model.ActorKind `json:"kind" doc:"user, api_key or admin_key"`
	Actor    string          `json:"actor"`
	Platform bool            `json:"platform_admin"`
	User     *model.User     `json:"user,omitempty"`
	// Memberships are a user's tenants and roles.
	Memberships []model.Membership `json:"memberships,omitempty"`
	// Tenant and Role are an API key's.
	Tenant string     `json:"tenant,omitempty"`
	Role   model.Role `json:"role,omitempty"`
	// CSRFToken goes in X-CSRF-Token with every write made with the session cookie.
	CSRFToken string    `json:"csrf_token,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

type sessionOut struct {
	SetCookie http.Cookie `header:"Set-Cookie"`
	Body      SessionInfo
}

// login checks a password (argon2id) and starts a session: the cookie, and in the body the CSRF
// token its writes need. The login guard (throttle.go) comes first: a client network that
// tried too often, or a (login, network) pair with too many failures, is answered 429
// login_throttled with Retry-After before any password is checked — the same answer whether
// the login exists or not. It writes its own audit rows: auth.login, or auth.login_failed with
// the reason (throttled, locked, bad_credentials).
func (a *API) login(ctx context.Context, c *Call, in *loginIn) (*sessionOut, error) {
	c.Audit.Skip = true
	login := in.Body.Login
	if l, err := control.NormalizeLogin(login); err == nil {
		login = l
	}
	failed := func(reason string, err error) error {
		who := *c
		who.Principal = Principal{Kind: model.ActorAnonymous, Actor: login}
		a.audit(ctx, AuditRecord{Call: &who, Action: "auth.login_failed", Outcome: model.OutcomeDeny, Reason: reason, Target: login})
		return err
	}
	refused, wait, err := a.logins.admit(ctx, login, c.IP)
	if err != nil {
		return nil, err
	}
	if refused != "" {
		return nil, failed(refused, NewProblem(http.StatusTooManyRequests, "login_throttled",
			"too many login attempts from this network, or too many failed ones of this login from it; try again later").WithRetryAfter(wait))
	}
	u, err := a.d.Accounts.VerifyPassword(ctx, in.Body.Login, in.Body.Password)
	var locked *control.LockedError
	switch {
	case errors.Is(err, control.ErrUnauthenticated) || errors.As(err, &locked):
		// A lock the database keeps (an embedding that sets one) answers as a wrong password
		// does: a different answer would say that the login exists.
		if err := a.logins.failed(ctx, login, c.IP); err != nil {
			return nil, err
		}
		return nil, failed("bad_credentials", NewProblem(http.StatusUnauthorized, "bad_credentials", "wrong login or password"))
	case err != nil:
		return nil, err
	}
	if err := a.logins.succeeded(ctx, login, c.IP); err != nil {
		return nil, err
	}
	ttl := a.s.SessionTTL
	if ttl <= 0 {
		ttl = control.DefaultSessionMaxAge
	}
	s, err := a.d.Accounts.CreateSession(ctx, u.ID, ttl, model.SessionMeta{IP: c.IP, UserAgent: c.hc.Header("User-Agent")})
	if err != nil {
		return nil, err
	}
	ms, err := a.d.Accounts.UserMemberships(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	c.Principal = Principal{Kind: model.ActorUser, Actor: u.Login, User: &u, Platform: u.PlatformAdmin}
	a.audit(ctx, AuditRecord{Call: c, Action: "auth.login", Outcome: model.OutcomeAllow, Target: u.Login,
		Details: map[string]any{"session": s.ID}})
	return &sessionOut{
		SetCookie: http.Cookie{Name: SessionCookie, Value: s.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
			Secure: c.Secure, Expires: s.ExpiresAt, MaxAge: int(ttl / time.Second)},
		Body: SessionInfo{Kind: model.ActorUser, Actor: u.Login, Platform: u.PlatformAdmin, User: &u, Memberships: ms,
			CSRFToken: csrfToken(s.Token), ExpiresAt: s.ExpiresAt},
	}, nil
}

type logoutOut struct {
	SetCookie http.Cookie `header:"Set-Cookie"`
}

// logout ends the session of the cookie (a key has no session: nothing to end) and clears
// the cookie.
func (a *API) logout(ctx context.Context, c *Call, _ *struct{}) (*logoutOut, error) {
	if c.Principal.token != "" {
		if err := a.d.Accounts.DeleteSession(ctx, c.Principal.token); err != nil {
			return nil, err
		}
	}
	return &logoutOut{SetCookie: http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: c.Secure, MaxAge: -1}}, nil
}

type sessionInfoOut struct{ Body SessionInfo }

func (a *API) session(ctx context.Context, c *Call, _ *struct{}) (*sessionInfoOut, error) {
	p := c.Principal
	info := SessionInfo{Kind: p.Kind, Actor: p.Actor, Platform: p.Platform, User: p.User}
	if p.User != nil {
		ms, err := a.d.Accounts.UserMemberships(ctx, p.User.ID)
		if err != nil {
			return nil, err
		}
		info.Memberships = ms
	}
	if p.Key != nil {
		info.Tenant, info.Role = p.Key.Tenant, p.Key.Role
	}
	if p.token != "" {
		info.CSRFToken = csrfToken(p.token)
	}
	return &sessionInfoOut{Body: info}, nil
}
