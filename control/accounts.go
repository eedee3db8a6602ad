package control

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"plaita/model"
	"plaita/store"
	"plaita/store/sqlite"
)

// Accounts are the console's tenants (with their status, published to Redis where the workers,
// the filter and the schedule role read it), users, memberships, API keys, sessions and audit
// trail — the one way a front end reads or changes them. The console's database is the
// authority; Redis has what was published of it.
type Accounts struct {
	db    *sqlite.DB
	redis *store.Redis // nil: no Redis (local mode)
	plane *Plane       // nil: no Redis; a disable then stops no schedule
	s     AccountsSettings

	// The tenant-status reconcile (tenantstatus.go): run keeps two from overlapping, mu guards
	// the last report.
	run, mu sync.Mutex
	last    *TenantStatusReport
}

// AccountsSettings are the console's settings of its accounts.
type AccountsSettings struct {
	// Epoch is PLAITA_DEPLOYMENT_EPOCH, written with every tenant status.
	Epoch string
	Log   zerolog.Logger
	Now   func() time.Time // nil: time.Now
}

// NewAccounts is the accounts of the console's database db; redis and plane are nil when the
// console has no Redis.
func NewAccounts(db *sqlite.DB, redis *store.Redis, plane *Plane, s AccountsSettings) *Accounts {
	if s.Now == nil {
		s.Now = time.Now
	}
	return &Accounts{db: db, redis: redis, plane: plane, s: s}
}

// The refusals of the accounts a front end tells apart (each is also of a class: model).
var (
	ErrUnauthenticated = sqlite.ErrUnauthenticated
	ErrTenantNotFound  = sqlite.ErrTenantNotFound
	ErrUserNotFound    = sqlite.ErrUserNotFound
	ErrMemberNotFound  = sqlite.ErrMemberNotFound
)

// LockedError is a login refused while its account is locked (it is ErrUnauthenticated).
type LockedError = sqlite.LockedError

// DefaultSessionMaxAge is how long a login lasts unless the console says otherwise.
const DefaultSessionMaxAge = sqlite.DefaultSessionMaxAge

// Fingerprint names a secret (a key, a token) without being able to use it: the audit's key
// fingerprint.
func Fingerprint(secret string) string { return sqlite.Fingerprint(secret) }

// NormalizeTenant is the slug a tenant is stored under ("" is the default tenant).
func NormalizeTenant(slug string) (string, error) { return sqlite.NormalizeTenant(slug) }

// NormalizeLogin is a login as stored (trimmed, lower-cased).
func NormalizeLogin(login string) (string, error) { return sqlite.NormalizeLogin(login) }

// PageRequest asks for one page of a list: Cursor is the NextCursor of the page before ("" for
// the first), Limit the items per page (ListLimit's policy).
type PageRequest struct {
	Cursor string
	Limit  int
}

func (r PageRequest) options() sqlite.ListOptions {
	return sqlite.ListOptions{Cursor: r.Cursor, Limit: ListLimit(r.Limit, MaxListLimit)}
}

// page is a database page in the one page shape.
func page[T any](p sqlite.Page[T], err error) (Page[T], error) {
	if p.Items == nil {
		p.Items = []T{}
	}
	return Page[T]{Items: p.Items, NextCursor: p.Next}, err
}

// HasRedis reports whether the accounts publish to Redis.
func (a *Accounts) HasRedis() bool { return a.redis != nil }

// PingDB and PingRedis probe the two stores (PingRedis: ErrNoRedis without one).
func (a *Accounts) PingDB(ctx context.Context) error { return a.db.Ping(ctx) }

// PingRedis probes Redis.
func (a *Accounts) PingRedis(ctx context.Context) error {
	if a.redis == nil {
		return ErrNoRedis
	}
	return a.redis.Ping(ctx)
}

// ErrNoRedis: the console has no Redis (it was unreachable at start).
var ErrNoRedis = errors.New("no Redis: it was unreachable when the console started; restart the console once Redis answers")

// ---- tenants ----

// StatusPublished says whether a tenant status reached Redis.
type StatusPublished struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty" doc:"why not: the database has the status; a restart of the console publishes every tenant's"`
}

// TenantChange is a tenant after a change, and what reached Redis.
type TenantChange struct {
	Tenant    model.Tenant       `json:"tenant"`
	Changed   bool               `json:"changed"`
	Previous  model.TenantStatus `json:"previous,omitempty"`
	Published StatusPublished    `json:"published"`
	// SchedulesDisabled are the schedules a disable turned off; SchedulesError why not all.
	SchedulesDisabled []string `json:"schedules_disabled,omitempty"`
	SchedulesError    string   `json:"schedules_error,omitempty"`
}

// publish copies a tenant's status to Redis; a failure is reported, not returned: the database
// has the status, and the next reconcile publishes it.
func (a *Accounts) publish(ctx context.Context, t model.Tenant, requestID string) StatusPublished {
	if a.redis == nil {
		return StatusPublished{Error: ErrNoRedis.Error()}
	}
	if err := a.redis.PublishTenantStatus(ctx, t.Slug, string(t.Status), a.s.Epoch); err != nil {
		a.s.Log.Warn().Str("event", "console.tenant_status_publish_failed").Str("tenant", t.Slug).Str("status", string(t.Status)).
			Str("request_id", requestID).Err(err).Msg("tenant status not published to Redis")
		return StatusPublished{Error: err.Error()}
	}
	return StatusPublished{OK: true}
}

// ListTenants is a page of the tenants.
func (a *Accounts) ListTenants(ctx context.Context, r PageRequest) (Page[model.Tenant], error) {
	return page(a.db.ListTenants(ctx, r.options()))
}

// AllTenants are every tenant (a platform admin's tenant picker).
func (a *Accounts) AllTenants(ctx context.Context) ([]model.Tenant, error) {
	return a.db.AllTenants(ctx)
}

// Tenant is one tenant (ErrTenantNotFound).
func (a *Accounts) Tenant(ctx context.Context, slug string) (model.Tenant, error) {
	return a.db.Tenant(ctx, slug)
}

// CreateTenant creates an active tenant and publishes its status.
func (a *Accounts) CreateTenant(ctx context.Context, slug, name, requestID string) (TenantChange, error) {
	t, err := a.db.CreateTenant(ctx, sqlite.NewTenant{Slug: slug, Name: name})
	if err != nil {
		return TenantChange{}, err
	}
	return TenantChange{Tenant: t, Changed: true, Published: a.publish(ctx, t, requestID)}, nil
}

// RenameTenant changes a tenant's display name.
func (a *Accounts) RenameTenant(ctx context.Context, slug, name string) (model.Tenant, error) {
	return a.db.RenameTenant(ctx, slug, name)
}

// SetTenantStatus enables or disables a tenant: the database first (the authority: a disabled
// tenant's sessions and keys are refused from the next request on), then Redis, then — on
// disable — its schedules (the schedule role refuses a disabled tenant's ticks anyway).
func (a *Accounts) SetTenantStatus(ctx context.Context, slug string, enable bool, requestID string) (TenantChange, error) {
	status := model.TenantDisabled
	if enable {
		status = model.TenantActive
	}
	ch, err := a.db.SetTenantStatus(ctx, slug, status)
	if err != nil {
		return TenantChange{}, err
	}
	out := TenantChange{Tenant: ch.Tenant, Changed: ch.Changed, Previous: ch.Previous, Published: a.publish(ctx, ch.Tenant, requestID)}
	if !enable && a.plane != nil {
		ids, err := a.plane.DisableSchedules(ctx, ch.Tenant.Slug)
		out.SchedulesDisabled = ids
		if err != nil {
			out.SchedulesError = err.Error()
			a.s.Log.Warn().Str("event", "console.tenant_schedules_failed").Str("tenant", ch.Tenant.Slug).Err(err).
				Msg("not every schedule of the disabled tenant was disabled (the schedule role refuses its ticks anyway)")
		}
	}
	return out, nil
}

// DeleteTenant deletes a disabled tenant and returns its slug. It stays disabled in Redis: a
// tombstone, so that a stale "active" cannot re-admit it.
func (a *Accounts) DeleteTenant(ctx context.Context, slug, requestID string) (string, error) {
	if err := a.db.DeleteTenant(ctx, slug); err != nil {
		return "", err
	}
	norm, err := sqlite.NormalizeTenant(slug)
	if err != nil {
		return slug, nil
	}
	a.publish(ctx, model.Tenant{Slug: norm, Status: model.TenantDisabled}, requestID)
	return norm, nil
}

// ---- users ----

// NewUser is what CreateUser takes.
type NewUser = sqlite.NewUser

// ListUsers is a page of the users.
func (a *Accounts) ListUsers(ctx context.Context, r PageRequest) (Page[model.User], error) {
	return page(a.db.ListUsers(ctx, r.options()))
}

// CreateUser creates a user.
func (a *Accounts) CreateUser(ctx context.Context, nu NewUser) (model.User, error) {
	return a.db.CreateUser(ctx, nu)
}

// User is one user (ErrUserNotFound).
func (a *Accounts) User(ctx context.Context, id string) (model.User, error) {
	return a.db.User(ctx, id)
}

// UserByLogin is the user of a login (ErrUserNotFound).
func (a *Accounts) UserByLogin(ctx context.Context, login string) (model.User, error) {
	return a.db.UserByLogin(ctx, login)
}

// UserMemberships are a user's memberships (never nil).
func (a *Accounts) UserMemberships(ctx context.Context, userID string) ([]model.Membership, error) {
	ms, err := a.db.UserMemberships(ctx, userID)
	if ms == nil {
		ms = []model.Membership{}
	}
	return ms, err
}

// UserUpdate is what UpdateUser changes (nil: unchanged).
type UserUpdate struct {
	// Password is a new password: every session of the user ends.
	Password      *string
	PlatformAdmin *bool
	// Unlock clears the failed logins and the lock of the account.
	Unlock bool
}

// UserUpdated is a user after UpdateUser, and the sessions a new password ended.
type UserUpdated struct {
	User          model.User
	SessionsEnded int64
}

// UpdateUser changes a user's password, platform admin flag or lock, in that order.
func (a *Accounts) UpdateUser(ctx context.Context, id string, up UserUpdate) (UserUpdated, error) {
	u, err := a.db.User(ctx, id)
	if err != nil {
		return UserUpdated{}, err
	}
	out := UserUpdated{User: u}
	if p := up.Password; p != nil {
		if out.User, err = a.db.SetPassword(ctx, id, *p); err != nil {
			return UserUpdated{}, err
		}
		if out.SessionsEnded, err = a.db.DeleteUserSessions(ctx, id); err != nil {
			return UserUpdated{}, err
		}
	}
	if v := up.PlatformAdmin; v != nil {
		if out.User, err = a.db.SetPlatformAdmin(ctx, id, *v); err != nil {
			return UserUpdated{}, err
		}
	}
	if up.Unlock {
		if out.User, err = a.db.UnlockUser(ctx, id); err != nil {
			return UserUpdated{}, err
		}
	}
	return out, nil
}

// DeleteUser deletes a user, with their memberships and sessions.
func (a *Accounts) DeleteUser(ctx context.Context, id string) error { return a.db.DeleteUser(ctx, id) }

// ---- members ----

// ListMembers is a page of a tenant's members.
func (a *Accounts) ListMembers(ctx context.Context, tenant string, r PageRequest) (Page[model.Membership], error) {
	return page(a.db.ListMembers(ctx, tenant, r.options()))
}

// Membership is a user's membership in a tenant (ErrMemberNotFound).
func (a *Accounts) Membership(ctx context.Context, userID, tenant string) (model.Membership, error) {
	return a.db.Membership(ctx, userID, tenant)
}

// MemberOf is the membership in tenant of the user named by id or, when id is "", by login.
func (a *Accounts) MemberOf(ctx context.Context, tenant, id, login string) (model.Membership, error) {
	if id == "" {
		u, err := a.db.UserByLogin(ctx, login)
		if err != nil {
			return model.Membership{}, err
		}
		id = u.ID
	}
	return a.db.Membership(ctx, id, tenant)
}

// SetMembership gives a user a role in a tenant.
func (a *Accounts) SetMembership(ctx context.Context, userID, tenant string, role model.Role) (model.Membership, error) {
	return a.db.SetMembership(ctx, userID, tenant, role)
}

// RemoveMembership takes a user out of a tenant.
func (a *Accounts) RemoveMembership(ctx context.Context, userID, tenant string) error {
	return a.db.RemoveMembership(ctx, userID, tenant)
}

// ---- API keys ----

// ListAPIKeys is a page of a tenant's API keys.
func (a *Accounts) ListAPIKeys(ctx context.Context, tenant string, r PageRequest) (Page[model.APIKey], error) {
	return page(a.db.ListAPIKeys(ctx, tenant, r.options()))
}

// NewAPIKey is what CreateAPIKey takes.
type NewAPIKey = sqlite.NewAPIKey

// CreateAPIKey makes a key and returns it, once (only its hash is kept).
func (a *Accounts) CreateAPIKey(ctx context.Context, nk NewAPIKey) (string, model.APIKey, error) {
	return a.db.CreateAPIKey(ctx, nk)
}

// RevokeAPIKey revokes a tenant's key.
func (a *Accounts) RevokeAPIKey(ctx context.Context, tenant, id string) (model.APIKey, error) {
	return a.db.RevokeAPIKey(ctx, tenant, id)
}

// AuthenticateAPIKey is the key a bearer token is (ErrUnauthenticated).
func (a *Accounts) AuthenticateAPIKey(ctx context.Context, key string) (model.APIKey, error) {
	return a.db.AuthenticateAPIKey(ctx, key)
}

// ---- sessions ----

// VerifyPassword is the user of a login and password (ErrUnauthenticated, *LockedError).
func (a *Accounts) VerifyPassword(ctx context.Context, login, password string) (model.User, error) {
	return a.db.VerifyPassword(ctx, login, password)
}

// The login guard's failures (web/api/throttle.go) are kept in the database, so that a
// (login, client network) pair locked on one console is locked on every console on it.

// LoginLockedUntil is when the lock of a (login, network) pair ends (zero: not locked).
func (a *Accounts) LoginLockedUntil(ctx context.Context, login, network string) (time.Time, error) {
	return a.db.LoginLockedUntil(ctx, login, network)
}

// RecordLoginFailure counts a failed login of the pair; the one that reaches max locks it for
// lockFor. It returns when the lock ends (zero: not locked).
func (a *Accounts) RecordLoginFailure(ctx context.Context, login, network string, max int, lockFor time.Duration) (time.Time, error) {
	return a.db.RecordLoginFailure(ctx, login, network, max, lockFor)
}

// ClearLoginFailures forgets the pair's failures (network "": every network of the login).
func (a *Accounts) ClearLoginFailures(ctx context.Context, login, network string) error {
	return a.db.ClearLoginFailures(ctx, login, network)
}

// PruneLoginFailures deletes the pairs with no failure since before and no lock.
func (a *Accounts) PruneLoginFailures(ctx context.Context, before time.Time) (int64, error) {
	return a.db.PruneLoginFailures(ctx, before)
}

// Session is a session just started: its token (given once: only its hash is kept), its id
// (the token's fingerprint, for the record) and when it ends.
type Session struct {
	Token     string
	ID        string
	ExpiresAt time.Time
}

// CreateSession starts a session of a user for ttl (0: DefaultSessionMaxAge).
func (a *Accounts) CreateSession(ctx context.Context, userID string, ttl time.Duration, meta model.SessionMeta) (Session, error) {
	token, s, err := a.db.CreateSession(ctx, userID, ttl, meta)
	return Session{Token: token, ID: s.ID, ExpiresAt: s.ExpiresAt}, err
}

// SessionUser is the user of a live session (ErrUnauthenticated).
func (a *Accounts) SessionUser(ctx context.Context, token string) (model.User, error) {
	_, u, err := a.db.LookupSession(ctx, token)
	return u, err
}

// DeleteSession ends a session.
func (a *Accounts) DeleteSession(ctx context.Context, token string) error {
	return a.db.DeleteSession(ctx, token)
}

// ---- audit ----

// AppendAudit writes one row of the audit trail (a denial within the window of the same one is
// coalesced into it).
func (a *Accounts) AppendAudit(ctx context.Context, e model.AuditEntry) error {
	_, err := a.db.AppendAudit(ctx, e)
	return err
}

// AuditRequest asks for a page of the audit trail, newest first: the tenant's rows, or every
// row (a platform admin's AllTenants).
type AuditRequest struct {
	Tenant     string
	AllTenants bool
	Cursor     string // the NextCursor of the page before
	Limit      int    // 0: DefaultAuditLimit; at most MaxListLimit
	// The filters ("" or zero: none): Actor and Target exactly, Action that action or its
	// family ("flow": flow.save, flow.publish.denied …), Outcome allow or deny, Since and Until
	// the row's time (Since included).
	Actor, Action, Target string
	Outcome               model.Outcome
	Since, Until          time.Time
}

// DefaultAuditLimit is the rows of an audit page asked without a limit.
const DefaultAuditLimit = sqlite.DefaultAuditLimit

// ListAudit is a page of the audit trail, newest first.
func (a *Accounts) ListAudit(ctx context.Context, r AuditRequest) (Page[model.AuditEntry], error) {
	var before int64
	if r.Cursor != "" {
		n, err := strconv.ParseInt(r.Cursor, 10, 64)
		if err != nil || n <= 0 {
			return Page[model.AuditEntry]{}, fmt.Errorf("%w: audit cursor %q: pass the next_cursor of the page before", store.ErrInvalid, r.Cursor)
		}
		before = n
	}
	limit := r.Limit
	if limit <= 0 {
		limit = DefaultAuditLimit
	}
	p, err := a.db.ListAudit(ctx, sqlite.AuditQuery{Tenant: r.Tenant, AllTenants: r.AllTenants, BeforeID: before, Limit: min(limit, MaxListLimit),
		Actor: r.Actor, Action: r.Action, Target: r.Target, Outcome: r.Outcome, Since: r.Since, Until: r.Until})
	out := Page[model.AuditEntry]{Items: p.Entries}
	if out.Items == nil {
		out.Items = []model.AuditEntry{}
	}
	if p.NextBeforeID > 0 {
		out.NextCursor = strconv.FormatInt(p.NextBeforeID, 10)
	}
	return out, err
}
