package model

import (
	"encoding/json"
	"time"
)

// The console's accounts: tenants and their status, users, their memberships and roles, API
// keys, who acts (actor kinds) and the audit trail's rows. The console's database stores them
// (store/sqlite); control/ changes them; the front ends show them.

// Role is what a member (or an API key) may do in one tenant: viewer < editor < admin.
// Platform administration is a user flag (User.PlatformAdmin), not a role.
type Role string

const (
	RoleViewer Role = "viewer" // reads
	RoleEditor Role = "editor" // and writes flows, executions, events, schedules
	RoleAdmin  Role = "admin"  // and manages the tenant's members and keys
)

func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleEditor:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Valid reports whether r is viewer, editor or admin.
func (r Role) Valid() bool { return r.rank() > 0 }

// AtLeast reports whether r allows what min allows (an unknown role allows nothing, and no
// role is at least an unknown one).
func (r Role) AtLeast(min Role) bool { return min.rank() > 0 && r.rank() >= min.rank() }

// Compare orders roles: negative when r is below o, 0 equal, positive above (unknown roles are
// below viewer).
func (r Role) Compare(o Role) int { return r.rank() - o.rank() }

// Membership is a user's role in a tenant, with the tenant's status (a disabled tenant's
// members are refused at once) and the user's login.
type Membership struct {
	UserID       string       `json:"user_id"`
	Login        string       `json:"login"`
	Tenant       string       `json:"tenant"`
	Role         Role         `json:"role"`
	TenantStatus TenantStatus `json:"tenant_status"`
	CreatedAt    time.Time    `json:"created_at"`
	UpdatedAt    time.Time    `json:"updated_at"`
}

// TenantStatus is a tenant's status, the one the console publishes to Redis (store/tenant.go).
type TenantStatus string

const (
	TenantActive   TenantStatus = "active"
	TenantDisabled TenantStatus = "disabled"
)

// Tenant is one tenant. The database is the authority on which tenants exist and their status;
// Redis holds what the console published of it.
type Tenant struct {
	Slug   string       `json:"slug"`
	Name   string       `json:"name"`
	Status TenantStatus `json:"status"`
	// StatusEpoch counts the tenant's status changes (1 at creation): the order of the
	// database's status writes, for a reconcile to tell which one is newer.
	StatusEpoch int64     `json:"status_epoch"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// User is one console user. The password hash never leaves the package.
type User struct {
	ID            string    `json:"id"`
	Login         string    `json:"login"` // lower-cased
	Name          string    `json:"name"`
	PlatformAdmin bool      `json:"platform_admin"`
	FailedLogins  int       `json:"failed_logins"`         // failed logins since the last success or lock
	LockedUntil   time.Time `json:"locked_until,omitzero"` // zero: not locked
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// Locked reports whether the account is locked at now.
func (u User) Locked(now time.Time) bool { return now.Before(u.LockedUntil) }

// SessionMeta is what a session records of the login request (cut to 64 and 512 bytes).
type SessionMeta struct {
	IP        string
	UserAgent string
}

// APIKey is a tenant's API key (its secret is never stored).
type APIKey struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
	Role   Role   `json:"role"`
	// Prefix is the key's public part (plk_<id>), Fingerprint the first 16 hex digits of its
	// sha256 (the audit's key fingerprint; 12 for a key made before).
	Prefix      string `json:"prefix"`
	Fingerprint string `json:"fingerprint"`
	// TenantStatus is the tenant's status when the key was read: a disabled tenant's keys are
	// refused by the console.
	TenantStatus TenantStatus `json:"tenant_status"`
	CreatedBy    string       `json:"created_by,omitempty"`
	CreatedAt    time.Time    `json:"created_at"`
	LastUsedAt   time.Time    `json:"last_used_at,omitzero"`
	RevokedAt    time.Time    `json:"revoked_at,omitzero"`
}

// Revoked reports whether the key was revoked.
func (k APIKey) Revoked() bool { return !k.RevokedAt.IsZero() }

// Outcome is whether the action was allowed.
type Outcome string

const (
	OutcomeAllow Outcome = "allow"
	OutcomeDeny  Outcome = "deny"
)

// ActorKind is who acted.
type ActorKind string

const (
	ActorUser      ActorKind = "user"      // a session's user (Actor: the login)
	ActorAPIKey    ActorKind = "api_key"   // a tenant API key (Actor: its prefix)
	ActorAdminKey  ActorKind = "admin_key" // PLAITA_CONSOLE_ADMIN_API_KEY (Actor: its Fingerprint)
	ActorSystem    ActorKind = "system"    // the console itself (reconciles, start-up)
	ActorAnonymous ActorKind = "anonymous" // no credential, or one that did not authenticate
)

// AuditEntry is one row of the audit trail.
type AuditEntry struct {
	ID int64 `json:"id"`
	// At is when the action happened (AppendAudit: the zero time is the clock's now); LastAt
	// is the newest denial coalesced into the row (At when there is none).
	At        time.Time `json:"at"`
	LastAt    time.Time `json:"last_at"`
	Actor     string    `json:"actor"`
	ActorKind ActorKind `json:"actor_kind"`
	// Tenant is the tenant acted in or on (a member operation: the target tenant); "" is a
	// platform action. It is stored as given: the default tenant is "default".
	Tenant    string  `json:"tenant"`
	Action    string  `json:"action"` // e.g. flow.publish, auth.login_failed, dlq.replay.denied
	Target    string  `json:"target,omitempty"`
	Outcome   Outcome `json:"outcome"`
	Reason    string  `json:"reason,omitempty"`
	IP        string  `json:"ip,omitempty"`
	RequestID string  `json:"request_id,omitempty"`
	// Details is a JSON object ({} when empty); one above MaxAuditDetails bytes is replaced by
	// {"details_dropped_bytes": n}.
	Details    json.RawMessage `json:"details"`
	Suppressed int             `json:"suppressed"` // denials coalesced into this row
}
