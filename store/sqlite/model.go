package sqlite

import "plaita/model"

// The account types this package stores are the domain's (package model).
type (
	Role         = model.Role
	Membership   = model.Membership
	TenantStatus = model.TenantStatus
	Tenant       = model.Tenant
	User         = model.User
	SessionMeta  = model.SessionMeta
	APIKey       = model.APIKey
	Outcome      = model.Outcome
	ActorKind    = model.ActorKind
	AuditEntry   = model.AuditEntry
)

// The values of the account types (package model).
const (
	RoleViewer     = model.RoleViewer
	RoleEditor     = model.RoleEditor
	RoleAdmin      = model.RoleAdmin
	TenantActive   = model.TenantActive
	TenantDisabled = model.TenantDisabled
	OutcomeAllow   = model.OutcomeAllow
	OutcomeDeny    = model.OutcomeDeny
	ActorUser      = model.ActorUser
	ActorAPIKey    = model.ActorAPIKey
	ActorAdminKey  = model.ActorAdminKey
	ActorSystem    = model.ActorSystem
	ActorAnonymous = model.ActorAnonymous
)
