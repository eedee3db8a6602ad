package api

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"time"

	"plaita/control"
	"plaita/model"
)

// Tenants and users (platform admins), members and API keys (a tenant's admins): adapters over
// control.Accounts. A tenant's status is the database's; every change is published to Redis
// where the workers, the filter and the schedule role read it.

type pageIn struct {
	Cursor string `query:"cursor" maxLength:"2048" doc:"the next_cursor of the page before"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"50" doc:"items per page"`
}

func (p pageIn) request() control.PageRequest {
	return control.PageRequest{Cursor: p.Cursor, Limit: p.Limit}
}

type slugIn struct {
	Slug string `path:"slug" minLength:"1" maxLength:"64"`
}

type tenantListOut struct{ Body control.Page[model.Tenant] }

func (a *API) listTenants(ctx context.Context, _ *Call, in *pageIn) (*tenantListOut, error) {
	p, err := a.d.Accounts.ListTenants(ctx, in.request())
	return &tenantListOut{Body: p}, err
}

type tenantCreateIn struct {
	Body struct {
		Slug string `json:"slug" minLength:"1" maxLength:"64" doc:"lower-case letters, digits, _ and -"`
		Name string `json:"name,omitempty" maxLength:"200"`
	}
}

// TenantChanged is a tenant after a change, and whether Redis has its status.
type TenantChanged = control.TenantChange

type tenantChangedOut struct{ Body TenantChanged }

func (a *API) createTenant(ctx context.Context, c *Call, in *tenantCreateIn) (*tenantChangedOut, error) {
	c.Audit.Target, c.Audit.Tenant = in.Body.Slug, ""
	ch, err := a.d.Accounts.CreateTenant(ctx, in.Body.Slug, in.Body.Name, c.RequestID)
	if err != nil {
		return nil, err
	}
	c.Audit.Tenant = ch.Tenant.Slug
	return &tenantChangedOut{Body: ch}, nil
}

type tenantOut struct{ Body model.Tenant }

func (a *API) getTenant(ctx context.Context, _ *Call, in *slugIn) (*tenantOut, error) {
	t, err := a.d.Accounts.Tenant(ctx, in.Slug)
	return &tenantOut{Body: t}, err
}

type tenantRenameIn struct {
	Slug string `path:"slug" minLength:"1" maxLength:"64"`
	Body struct {
		Name string `json:"name" minLength:"1" maxLength:"200"`
	}
}

func (a *API) renameTenant(ctx context.Context, c *Call, in *tenantRenameIn) (*tenantOut, error) {
	c.Audit.Target = in.Slug
	t, err := a.d.Accounts.RenameTenant(ctx, in.Slug, in.Body.Name)
	if err == nil {
		c.Audit.Tenant = t.Slug
	}
	return &tenantOut{Body: t}, err
}

// setTenantStatus enables or disables a tenant (control.Accounts.SetTenantStatus: the
// database, then Redis, then on disable its schedules).
func (a *API) setTenantStatus(enable bool) func(context.Context, *Call, *slugIn) (*tenantChangedOut, error) {
	return func(ctx context.Context, c *Call, in *slugIn) (*tenantChangedOut, error) {
		c.Audit.Target = in.Slug
		ch, err := a.d.Accounts.SetTenantStatus(ctx, in.Slug, enable, c.RequestID)
		if err != nil {
			return nil, err
		}
		c.Audit.Tenant = ch.Tenant.Slug
		c.Note("changed", ch.Changed)
		c.Note("published", ch.Published.OK)
		c.Note("schedules_disabled", len(ch.SchedulesDisabled))
		return &tenantChangedOut{Body: ch}, nil
	}
}

func (a *API) deleteTenant(ctx context.Context, c *Call, in *slugIn) (*struct{}, error) {
	c.Audit.Target = in.Slug
	slug, err := a.d.Accounts.DeleteTenant(ctx, in.Slug, c.RequestID)
	if err != nil {
		return nil, err
	}
	c.Audit.Tenant = slug
	return &struct{}{}, nil
}

// ---- users ----

type userListOut struct{ Body control.Page[model.User] }

func (a *API) listUsers(ctx context.Context, _ *Call, in *pageIn) (*userListOut, error) {
	p, err := a.d.Accounts.ListUsers(ctx, in.request())
	return &userListOut{Body: p}, err
}

type userCreateIn struct {
	Body struct {
		Login         string `json:"login" minLength:"1" maxLength:"254"`
		Name          string `json:"name,omitempty" maxLength:"200"`
		Password      string `json:"password" minLength:"8" maxLength:"1024"`
		PlatformAdmin bool   `json:"platform_admin,omitempty"`
	}
}

type userOut struct{ Body model.User }

func (a *API) createUser(ctx context.Context, c *Call, in *userCreateIn) (*userOut, error) {
	c.Audit.Target = in.Body.Login
	u, err := a.d.Accounts.CreateUser(ctx, control.NewUser{Login: in.Body.Login, Name: in.Body.Name, Password: in.Body.Password,
		PlatformAdmin: in.Body.PlatformAdmin})
	if err == nil {
		c.Audit.Target = u.ID
		c.Note("login", u.Login)
		c.Note("platform_admin", u.PlatformAdmin)
	}
	return &userOut{Body: u}, err
}

type userIDIn struct {
	ID string `path:"id" minLength:"1" maxLength:"64"`
}

// UserShown is a user with their memberships.
type UserShown struct {
	model.User
	Memberships []model.Membership `json:"memberships"`
}

type userShownOut struct{ Body UserShown }

func (a *API) getUser(ctx context.Context, _ *Call, in *userIDIn) (*userShownOut, error) {
	u, err := a.d.Accounts.User(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	ms, err := a.d.Accounts.UserMemberships(ctx, u.ID)
	return &userShownOut{Body: UserShown{User: u, Memberships: ms}}, err
}

type userUpdateIn struct {
	ID   string `path:"id" minLength:"1" maxLength:"64"`
	Body struct {
		Password      *string `json:"password,omitempty" minLength:"8" maxLength:"1024" doc:"a new password: every session of the user ends"`
		PlatformAdmin *bool   `json:"platform_admin,omitempty"`
		Unlock        bool    `json:"unlock,omitempty" doc:"clear the failed logins and the locks of the login (from every network)"`
	}
}

func (a *API) updateUser(ctx context.Context, c *Call, in *userUpdateIn) (*userOut, error) {
	c.Audit.Target = in.ID
	up, err := a.d.Accounts.UpdateUser(ctx, in.ID, control.UserUpdate{Password: in.Body.Password, PlatformAdmin: in.Body.PlatformAdmin,
		Unlock: in.Body.Unlock})
	if err != nil {
		return nil, err
	}
	if in.Body.Password != nil {
		c.Note("password", "changed")
		c.Note("sessions_ended", up.SessionsEnded)
	}
	if v := in.Body.PlatformAdmin; v != nil {
		c.Note("platform_admin", *v)
	}
	if in.Body.Unlock {
		if err := a.logins.forget(ctx, up.User.Login); err != nil {
			return nil, err
		}
		c.Note("unlocked", true)
	}
	return &userOut{Body: up.User}, nil
}

func (a *API) deleteUser(ctx context.Context, c *Call, in *userIDIn) (*struct{}, error) {
	c.Audit.Target = in.ID
	if c.Principal.User != nil && c.Principal.User.ID == in.ID {
		return nil, NewProblem(http.StatusConflict, "self_delete", "you cannot delete yourself: another platform admin can")
	}
	return &struct{}{}, a.d.Accounts.DeleteUser(ctx, in.ID)
}

// ---- members ----

type memberListOut struct {
	Body control.Page[model.Membership]
}

func (a *API) listMembers(ctx context.Context, c *Call, in *pageIn) (*memberListOut, error) {
	p, err := a.d.Accounts.ListMembers(ctx, c.Tenant, in.request())
	return &memberListOut{Body: p}, err
}

type memberSetIn struct {
	Body struct {
		UserID string     `json:"user_id,omitempty" maxLength:"64" doc:"the user, by id (or give login)"`
		Login  string     `json:"login,omitempty" maxLength:"254" doc:"the user, by login (or give user_id)"`
		Role   model.Role `json:"role" enum:"viewer,editor,admin"`
	}
}

type memberOut struct{ Body model.Membership }

func (a *API) setMember(ctx context.Context, c *Call, in *memberSetIn) (*memberOut, error) {
	id := in.Body.UserID
	if (id == "") == (in.Body.Login == "") {
		return nil, NewProblem(http.StatusBadRequest, "invalid_request", "name the user by user_id or by login (one of them)")
	}
	if !c.Principal.Platform {
		// A tenant admin changes the roles of the tenant's members; adding a user to a tenant
		// is a platform admin's (the user did not ask to join, and a tenant admin who could add
		// anyone by login could also learn every login of the platform from the answers). One
		// answer for a login that is not a member, whether it exists or not.
		m, err := a.d.Accounts.MemberOf(ctx, c.Tenant, id, in.Body.Login)
		if errors.Is(err, control.ErrMemberNotFound) || errors.Is(err, control.ErrUserNotFound) {
			p := NewProblem(http.StatusForbidden, "not_a_member", "%s is not a member of tenant %s: a tenant admin changes the roles of "+
				"the tenant's members, and only a platform admin adds a user to a tenant", cmp.Or(in.Body.Login, id), c.Tenant)
			p.Unblock = "ask a platform admin to add the user (PUT /api/members with their session or the admin key)"
			return nil, p
		} else if err != nil {
			return nil, err
		}
		id = m.UserID
	} else if id == "" {
		u, err := a.d.Accounts.UserByLogin(ctx, in.Body.Login)
		if err != nil {
			return nil, err
		}
		id = u.ID
	}
	c.Audit.Target, c.Audit.Tenant = id, c.Tenant
	c.Note("role", in.Body.Role)
	m, err := a.d.Accounts.SetMembership(ctx, id, c.Tenant, in.Body.Role)
	return &memberOut{Body: m}, err
}

type memberRemoveIn struct {
	UserID string `path:"user_id" minLength:"1" maxLength:"64"`
}

func (a *API) removeMember(ctx context.Context, c *Call, in *memberRemoveIn) (*struct{}, error) {
	c.Audit.Target, c.Audit.Tenant = in.UserID, c.Tenant
	return &struct{}{}, a.d.Accounts.RemoveMembership(ctx, in.UserID, c.Tenant)
}

// ---- API keys ----

type apiKeyListOut struct{ Body control.Page[model.APIKey] }

func (a *API) listAPIKeys(ctx context.Context, c *Call, in *pageIn) (*apiKeyListOut, error) {
	p, err := a.d.Accounts.ListAPIKeys(ctx, c.Tenant, in.request())
	return &apiKeyListOut{Body: p}, err
}

type apiKeyCreateIn struct {
	Body struct {
		Name string     `json:"name" minLength:"1" maxLength:"200"`
		Role model.Role `json:"role" enum:"viewer,editor,admin"`
	}
}

// APIKeyCreated is a new key: Key is shown here once, and never again.
type APIKeyCreated struct {
	Key    string       `json:"key" doc:"the key: send it as Authorization: Bearer <key>; it is not shown again"`
	APIKey model.APIKey `json:"api_key"`
}

type apiKeyCreatedOut struct{ Body APIKeyCreated }

func (a *API) createAPIKey(ctx context.Context, c *Call, in *apiKeyCreateIn) (*apiKeyCreatedOut, error) {
	if !c.Role.AtLeast(in.Body.Role) {
		return nil, NewProblem(http.StatusForbidden, "forbidden", "a key cannot have more than your role (%s)", c.Role)
	}
	key, k, err := a.d.Accounts.CreateAPIKey(ctx, control.NewAPIKey{Tenant: c.Tenant, Name: in.Body.Name, Role: in.Body.Role, CreatedBy: c.Principal.Actor})
	if err != nil {
		return nil, err
	}
	c.Audit.Target = k.ID
	c.Note("key_fingerprint_created", k.Fingerprint)
	c.Note("role", k.Role)
	return &apiKeyCreatedOut{Body: APIKeyCreated{Key: key, APIKey: k}}, nil
}

type apiKeyIDIn struct {
	ID string `path:"id" minLength:"1" maxLength:"64"`
}

type apiKeyOut struct{ Body model.APIKey }

func (a *API) revokeAPIKey(ctx context.Context, c *Call, in *apiKeyIDIn) (*apiKeyOut, error) {
	c.Audit.Target = in.ID
	k, err := a.d.Accounts.RevokeAPIKey(ctx, c.Tenant, in.ID)
	return &apiKeyOut{Body: k}, err
}

// ---- audit ----

type auditIn struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"200" doc:"rows per page"`
	Cursor string `query:"cursor" maxLength:"32" doc:"the next_cursor of the page before (none: from the newest)"`
	// AllTenants is a platform admin's: every tenant's rows and the platform's.
	AllTenants bool      `query:"all_tenants" doc:"platform admins: every tenant's rows and the platform's"`
	Actor      string    `query:"actor" maxLength:"256" doc:"who acted, exactly (a login, admin-key:<fingerprint> …)"`
	Action     string    `query:"action" maxLength:"256" doc:"an action or its family: flow keeps flow.save, flow.publish.denied …"`
	Target     string    `query:"target" maxLength:"256" doc:"what was acted on, exactly"`
	Outcome    string    `query:"outcome" maxLength:"8" doc:"allow or deny"`
	Since      time.Time `query:"since" doc:"rows at or after this time (RFC 3339)"`
	Until      time.Time `query:"until" doc:"rows before this time (RFC 3339)"`
}

type auditOut struct {
	Body control.Page[model.AuditEntry]
}

// listAudit reads the tenant's audit rows; the read itself is audited (audit.read, with the
// query and the row count).
func (a *API) listAudit(ctx context.Context, c *Call, in *auditIn) (*auditOut, error) {
	if in.AllTenants && !c.Principal.Platform {
		return nil, NewProblem(http.StatusForbidden, "forbidden", "all_tenants is for platform admins")
	}
	p, err := a.d.Accounts.ListAudit(ctx, control.AuditRequest{Tenant: c.Tenant, AllTenants: in.AllTenants, Cursor: in.Cursor, Limit: in.Limit,
		Actor: in.Actor, Action: in.Action, Target: in.Target, Outcome: model.Outcome(in.Outcome), Since: in.Since, Until: in.Until})
	c.Note("query", map[string]any{"limit": in.Limit, "cursor": in.Cursor, "all_tenants": in.AllTenants, "actor": in.Actor, "action": in.Action,
		"target": in.Target, "outcome": in.Outcome, "since": in.Since, "until": in.Until})
	c.Note("rows", len(p.Items))
	return &auditOut{Body: p}, err
}
