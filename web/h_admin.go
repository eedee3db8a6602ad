package web

import (
	"context"
	"errors"
	"net/http"

	"plaita/store/sqlite"
)

// Tenants and users (platform admins), members and API keys (a tenant's admins): adapters over
// store/sqlite. A tenant's status is the database's; every change is published to Redis
// (store.Redis.PublishTenantStatus) where the workers, the filter and the schedule role read it.

type pageIn struct {
	Cursor string `query:"cursor" maxLength:"2048" doc:"the next of the page before"`
	Limit  int    `query:"limit" minimum:"1" maximum:"500" default:"50"`
}

func (p pageIn) options() sqlite.ListOptions {
	return sqlite.ListOptions{Cursor: p.Cursor, Limit: p.Limit}
}

type slugIn struct {
	Slug string `path:"slug" minLength:"1" maxLength:"64"`
}

// Published says whether a tenant status reached Redis.
type Published struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty" doc:"why not: the database has the status; a restart of the console publishes every tenant's"`
}

// publishStatus copies a tenant's status to Redis.
func (a *api) publishStatus(ctx context.Context, c *Call, t sqlite.Tenant) Published {
	if a.d.Redis == nil {
		return Published{Error: errNoRedis.Error()}
	}
	if err := a.d.Redis.PublishTenantStatus(ctx, t.Slug, string(t.Status), a.s.DeploymentEpoch); err != nil {
		a.d.Log.Warn().Str("event", "console.tenant_status_publish_failed").Str("tenant", t.Slug).Str("status", string(t.Status)).
			Str("request_id", c.RequestID).Err(err).Msg("tenant status not published to Redis")
		return Published{Error: err.Error()}
	}
	return Published{OK: true}
}

type tenantListOut struct{ Body sqlite.Page[sqlite.Tenant] }

func (a *api) listTenants(ctx context.Context, _ *Call, in *pageIn) (*tenantListOut, error) {
	p, err := a.d.DB.ListTenants(ctx, in.options())
	return &tenantListOut{Body: p}, err
}

type tenantCreateIn struct {
	Body struct {
		Slug string `json:"slug" minLength:"1" maxLength:"64" doc:"lower-case letters, digits, _ and -"`
		Name string `json:"name,omitempty" maxLength:"200"`
	}
}

// TenantChanged is a tenant after a change, and whether Redis has its status.
type TenantChanged struct {
	Tenant    sqlite.Tenant       `json:"tenant"`
	Changed   bool                `json:"changed"`
	Previous  sqlite.TenantStatus `json:"previous,omitempty"`
	Published Published           `json:"published"`
	// SchedulesDisabled are the schedules a disable turned off.
	SchedulesDisabled []string `json:"schedules_disabled,omitempty"`
	SchedulesError    string   `json:"schedules_error,omitempty"`
}

type tenantChangedOut struct{ Body TenantChanged }

func (a *api) createTenant(ctx context.Context, c *Call, in *tenantCreateIn) (*tenantChangedOut, error) {
	c.Audit.Target, c.Audit.Tenant = in.Body.Slug, ""
	t, err := a.d.DB.CreateTenant(ctx, sqlite.NewTenant{Slug: in.Body.Slug, Name: in.Body.Name})
	if err != nil {
		return nil, err
	}
	c.Audit.Tenant = t.Slug
	return &tenantChangedOut{Body: TenantChanged{Tenant: t, Changed: true, Published: a.publishStatus(ctx, c, t)}}, nil
}

type tenantOut struct{ Body sqlite.Tenant }

func (a *api) getTenant(ctx context.Context, _ *Call, in *slugIn) (*tenantOut, error) {
	t, err := a.d.DB.Tenant(ctx, in.Slug)
	return &tenantOut{Body: t}, err
}

type tenantRenameIn struct {
	Slug string `path:"slug" minLength:"1" maxLength:"64"`
	Body struct {
		Name string `json:"name" minLength:"1" maxLength:"200"`
	}
}

func (a *api) renameTenant(ctx context.Context, c *Call, in *tenantRenameIn) (*tenantOut, error) {
	c.Audit.Target = in.Slug
	t, err := a.d.DB.RenameTenant(ctx, in.Slug, in.Body.Name)
	if err == nil {
		c.Audit.Tenant = t.Slug
	}
	return &tenantOut{Body: t}, err
}

// setTenantStatus enables or disables a tenant: the database first (the authority: a disabled
// tenant's sessions and keys are refused from the next request on), then Redis, then — on
// disable — its schedules.
func (a *api) setTenantStatus(enable bool) func(context.Context, *Call, *slugIn) (*tenantChangedOut, error) {
	status := sqlite.TenantDisabled
	if enable {
		status = sqlite.TenantActive
	}
	return func(ctx context.Context, c *Call, in *slugIn) (*tenantChangedOut, error) {
		c.Audit.Target = in.Slug
		ch, err := a.d.DB.SetTenantStatus(ctx, in.Slug, status)
		if err != nil {
			return nil, err
		}
		c.Audit.Tenant = ch.Tenant.Slug
		out := TenantChanged{Tenant: ch.Tenant, Changed: ch.Changed, Previous: ch.Previous, Published: a.publishStatus(ctx, c, ch.Tenant)}
		if !enable && a.d.Plane != nil {
			ids, err := a.d.Plane.DisableSchedules(ctx, ch.Tenant.Slug)
			out.SchedulesDisabled = ids
			if err != nil {
				out.SchedulesError = err.Error()
				a.d.Log.Warn().Str("event", "console.tenant_schedules_failed").Str("tenant", ch.Tenant.Slug).Err(err).
					Msg("not every schedule of the disabled tenant was disabled (the schedule role refuses its ticks anyway)")
			}
		}
		c.Note("changed", ch.Changed)
		c.Note("published", out.Published.OK)
		c.Note("schedules_disabled", len(out.SchedulesDisabled))
		return &tenantChangedOut{Body: out}, nil
	}
}

func (a *api) deleteTenant(ctx context.Context, c *Call, in *slugIn) (*struct{}, error) {
	c.Audit.Target = in.Slug
	if err := a.d.DB.DeleteTenant(ctx, in.Slug); err != nil {
		return nil, err
	}
	if slug, err := sqlite.NormalizeTenant(in.Slug); err == nil {
		c.Audit.Tenant = slug
		// It was disabled, and stays so in Redis: a tombstone, so that a stale "active" cannot
		// re-admit it.
		a.publishStatus(ctx, c, sqlite.Tenant{Slug: slug, Status: sqlite.TenantDisabled})
	}
	return &struct{}{}, nil
}

// ---- users ----

type userListOut struct{ Body sqlite.Page[sqlite.User] }

func (a *api) listUsers(ctx context.Context, _ *Call, in *pageIn) (*userListOut, error) {
	p, err := a.d.DB.ListUsers(ctx, in.options())
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

type userOut struct{ Body sqlite.User }

func (a *api) createUser(ctx context.Context, c *Call, in *userCreateIn) (*userOut, error) {
	c.Audit.Target = in.Body.Login
	u, err := a.d.DB.CreateUser(ctx, sqlite.NewUser{Login: in.Body.Login, Name: in.Body.Name, Password: in.Body.Password,
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
	sqlite.User
	Memberships []sqlite.Membership `json:"memberships"`
}

type userShownOut struct{ Body UserShown }

func (a *api) getUser(ctx context.Context, _ *Call, in *userIDIn) (*userShownOut, error) {
	u, err := a.d.DB.User(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	ms, err := a.d.DB.UserMemberships(ctx, u.ID)
	if ms == nil {
		ms = []sqlite.Membership{}
	}
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

func (a *api) updateUser(ctx context.Context, c *Call, in *userUpdateIn) (*userOut, error) {
	c.Audit.Target = in.ID
	u, err := a.d.DB.User(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if p := in.Body.Password; p != nil {
		if u, err = a.d.DB.SetPassword(ctx, in.ID, *p); err != nil {
			return nil, err
		}
		n, err := a.d.DB.DeleteUserSessions(ctx, in.ID)
		if err != nil {
			return nil, err
		}
		c.Note("password", "changed")
		c.Note("sessions_ended", n)
	}
	if v := in.Body.PlatformAdmin; v != nil {
		if u, err = a.d.DB.SetPlatformAdmin(ctx, in.ID, *v); err != nil {
			return nil, err
		}
		c.Note("platform_admin", *v)
	}
	if in.Body.Unlock {
		if u, err = a.d.DB.UnlockUser(ctx, in.ID); err != nil {
			return nil, err
		}
		a.logins.forget(u.Login)
		c.Note("unlocked", true)
	}
	return &userOut{Body: u}, nil
}

func (a *api) deleteUser(ctx context.Context, c *Call, in *userIDIn) (*struct{}, error) {
	c.Audit.Target = in.ID
	if c.Principal.User != nil && c.Principal.User.ID == in.ID {
		return nil, newProblem(http.StatusConflict, "self_delete", "you cannot delete yourself: another platform admin can")
	}
	return &struct{}{}, a.d.DB.DeleteUser(ctx, in.ID)
}

// ---- members ----

type memberListOut struct {
	Body sqlite.Page[sqlite.Membership]
}

func (a *api) listMembers(ctx context.Context, c *Call, in *pageIn) (*memberListOut, error) {
	p, err := a.d.DB.ListMembers(ctx, c.Tenant, in.options())
	return &memberListOut{Body: p}, err
}

type memberSetIn struct {
	Body struct {
		UserID string      `json:"user_id,omitempty" maxLength:"64" doc:"the user, by id (or give login)"`
		Login  string      `json:"login,omitempty" maxLength:"254" doc:"the user, by login (or give user_id)"`
		Role   sqlite.Role `json:"role" enum:"viewer,editor,admin"`
	}
}

type memberOut struct{ Body sqlite.Membership }

func (a *api) setMember(ctx context.Context, c *Call, in *memberSetIn) (*memberOut, error) {
	id := in.Body.UserID
	if (id == "") == (in.Body.Login == "") {
		return nil, newProblem(http.StatusBadRequest, "invalid_request", "name the user by user_id or by login (one of them)")
	}
	if !c.Principal.Platform {
		// A tenant admin changes the roles of the tenant's members; adding a user to a tenant
		// is a platform admin's (the user did not ask to join, and a tenant admin who could add
		// anyone by login could also learn every login of the platform from the answers). One
		// answer for a login that is not a member, whether it exists or not.
		m, err := a.tenantMember(ctx, c.Tenant, id, in.Body.Login)
		if errors.Is(err, sqlite.ErrMemberNotFound) || errors.Is(err, sqlite.ErrUserNotFound) {
			p := newProblem(http.StatusForbidden, "not_a_member", "%s is not a member of tenant %s: a tenant admin changes the roles of "+
				"the tenant's members, and only a platform admin adds a user to a tenant", cmpOrString(in.Body.Login, id), c.Tenant)
			p.Unblock = "ask a platform admin to add the user (PUT /api/members with their session or the admin key)"
			return nil, p
		} else if err != nil {
			return nil, err
		}
		id = m.UserID
	} else if id == "" {
		u, err := a.d.DB.UserByLogin(ctx, in.Body.Login)
		if err != nil {
			return nil, err
		}
		id = u.ID
	}
	c.Audit.Target, c.Audit.Tenant = id, c.Tenant
	c.Note("role", in.Body.Role)
	m, err := a.d.DB.SetMembership(ctx, id, c.Tenant, in.Body.Role)
	return &memberOut{Body: m}, err
}

// tenantMember is the membership in tenant of the user named by id or by login.
func (a *api) tenantMember(ctx context.Context, tenant, id, login string) (sqlite.Membership, error) {
	if id == "" {
		u, err := a.d.DB.UserByLogin(ctx, login)
		if err != nil {
			return sqlite.Membership{}, err
		}
		id = u.ID
	}
	return a.d.DB.Membership(ctx, id, tenant)
}

type memberRemoveIn struct {
	UserID string `path:"user_id" minLength:"1" maxLength:"64"`
}

func (a *api) removeMember(ctx context.Context, c *Call, in *memberRemoveIn) (*struct{}, error) {
	c.Audit.Target, c.Audit.Tenant = in.UserID, c.Tenant
	return &struct{}{}, a.d.DB.RemoveMembership(ctx, in.UserID, c.Tenant)
}

// ---- API keys ----

type apiKeyListOut struct{ Body sqlite.Page[sqlite.APIKey] }

func (a *api) listAPIKeys(ctx context.Context, c *Call, in *pageIn) (*apiKeyListOut, error) {
	p, err := a.d.DB.ListAPIKeys(ctx, c.Tenant, in.options())
	return &apiKeyListOut{Body: p}, err
}

type apiKeyCreateIn struct {
	Body struct {
		Name string      `json:"name" minLength:"1" maxLength:"200"`
		Role sqlite.Role `json:"role" enum:"viewer,editor,admin"`
	}
}

// APIKeyCreated is a new key: Key is shown here once, and never again.
type APIKeyCreated struct {
	Key    string        `json:"key" doc:"the key: send it as Authorization: Bearer <key>; it is not shown again"`
	APIKey sqlite.APIKey `json:"api_key"`
}

type apiKeyCreatedOut struct{ Body APIKeyCreated }

func (a *api) createAPIKey(ctx context.Context, c *Call, in *apiKeyCreateIn) (*apiKeyCreatedOut, error) {
	if !c.Role.AtLeast(in.Body.Role) {
		return nil, newProblem(http.StatusForbidden, "forbidden", "a key cannot have more than your role (%s)", c.Role)
	}
	key, k, err := a.d.DB.CreateAPIKey(ctx, sqlite.NewAPIKey{Tenant: c.Tenant, Name: in.Body.Name, Role: in.Body.Role, CreatedBy: c.Principal.Actor})
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

type apiKeyOut struct{ Body sqlite.APIKey }

func (a *api) revokeAPIKey(ctx context.Context, c *Call, in *apiKeyIDIn) (*apiKeyOut, error) {
	c.Audit.Target = in.ID
	k, err := a.d.DB.RevokeAPIKey(ctx, c.Tenant, in.ID)
	return &apiKeyOut{Body: k}, err
}

// ---- audit ----

type auditIn struct {
	Limit    int   `query:"limit" minimum:"1" maximum:"1000" default:"200"`
	BeforeID int64 `query:"before_id" minimum:"0" doc:"the next_before_id of the page before (0: from the newest)"`
	// AllTenants is a platform admin's: every tenant's rows and the platform's.
	AllTenants bool `query:"all_tenants" doc:"platform admins: every tenant's rows and the platform's"`
}

type auditOut struct{ Body sqlite.AuditPage }

// listAudit reads the tenant's audit rows; the read itself is audited (audit.read, with the
// query and the row count).
func (a *api) listAudit(ctx context.Context, c *Call, in *auditIn) (*auditOut, error) {
	if in.AllTenants && !c.Principal.Platform {
		return nil, newProblem(http.StatusForbidden, "forbidden", "all_tenants is for platform admins")
	}
	p, err := a.d.DB.ListAudit(ctx, sqlite.AuditQuery{Tenant: c.Tenant, AllTenants: in.AllTenants, BeforeID: in.BeforeID, Limit: in.Limit})
	c.Note("query", map[string]any{"limit": in.Limit, "before_id": in.BeforeID, "all_tenants": in.AllTenants})
	c.Note("rows", len(p.Entries))
	return &auditOut{Body: p}, err
}
