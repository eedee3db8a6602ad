package api

import (
	"cmp"
	"context"
	"encoding/json"
	"net"
	"strings"

	"plaita/model"

	"github.com/danielgtaylor/huma/v2"
)

// The audit trail (docs/console.md, "Audit"; store/sqlite/audit.go): every write and every
// denial. A row names the actor, how it authenticated (actor kind), the credential's
// fingerprint when it was a key, the request id and the client address, so that "which key did
// what, when, to which tenant" has an answer; denials are coalesced by the store per (action,
// actor, ip, tenant, reason) and window. An audit write that fails is logged and does not fail
// the request: the action happened (or was refused) either way.

// AuditRecord is one row the console writes.
type AuditRecord struct {
	Call    *Call
	Action  string
	Outcome model.Outcome
	Reason  string
	Target  string
	Tenant  string // "" is the call's tenant
	Details map[string]any
}

// audit appends one row.
func (a *API) audit(ctx context.Context, rec AuditRecord) {
	c := rec.Call
	tenant := rec.Tenant
	if tenant == "" {
		tenant = c.Tenant
	}
	details := map[string]any{}
	for k, v := range rec.Details {
		details[k] = v
	}
	details["auth_source"] = string(c.Principal.Kind)
	if fp := c.Principal.Fingerprint; fp != "" {
		details["key_fingerprint"] = fp
	}
	if rec.Tenant != "" && rec.Tenant != c.Tenant {
		details["target_tenant"] = rec.Tenant
	}
	raw, err := json.Marshal(details)
	if err != nil {
		raw = []byte(`{}`)
	}
	// The audit row must be written even when the request was cancelled (a client that hung up
	// after its write went through).
	err = a.d.Accounts.AppendAudit(context.WithoutCancel(ctx), model.AuditEntry{
		Actor: c.Principal.Actor, ActorKind: c.Principal.Kind, Tenant: tenant, Action: rec.Action, Target: rec.Target,
		Outcome: rec.Outcome, Reason: rec.Reason, IP: c.IP, RequestID: c.RequestID, Details: raw,
	})
	if err != nil {
		a.d.Log.Error().Str("event", "console.audit_failed").Str("action", rec.Action).Str("request_id", c.RequestID).Err(err).
			Msg("could not write an audit row")
	}
}

// auditCall records a write a handler ran: allowed when it succeeded, denied with the problem's
// code when it failed.
func (a *API) auditCall(ctx context.Context, c *Call, err error) {
	rec := AuditRecord{Call: c, Action: cmp.Or(c.Audit.Action, c.Route.Action), Outcome: model.OutcomeAllow, Target: c.Audit.Target,
		Tenant: c.Audit.Tenant, Details: c.Audit.Details}
	if err != nil {
		rec.Outcome, rec.Reason = model.OutcomeDeny, problemFor(err).Code
	}
	a.audit(ctx, rec)
}

// auditDenial records a request the access check refused, under the route's action with
// ".denied" (a read's denial is recorded too: who tried to read what). It is recorded in the
// trail of the tenant asked for only when the caller is someone there (a member with too small
// a role, a platform admin); a caller who is not — another tenant's member, a key of another
// tenant, a tenant that does not exist — is recorded in their own trail: their API key's
// tenant's, else the platform's (tenant ""), with the tenant they asked for. The asked tenant's
// admins must not learn the logins of other tenants from their own trail.
func (a *API) auditDenial(ctx context.Context, c *Call, reason string) {
	action := c.Route.Action
	if action == "" {
		action = c.Route.ID
	}
	who, details := c, map[string]any(nil)
	if c.Role == "" && !c.Principal.Platform && (c.Tenant != "" || c.Principal.Key != nil) {
		own := *c
		own.Tenant = ""
		if c.Principal.Key != nil {
			own.Tenant = c.Principal.Key.Tenant
		}
		asked := c.Tenant
		if asked == "" && c.hc != nil { // refused before the tenant was checked: as the caller sent it
			asked = strings.TrimSpace(c.hc.Header(HeaderTenant))
		}
		if asked != "" {
			details = map[string]any{"asked_tenant": asked}
		}
		who = &own
	}
	a.audit(ctx, AuditRecord{Call: who, Action: action + ".denied", Outcome: model.OutcomeDeny, Reason: reason,
		Target: c.Route.Method + " " + c.Route.Path, Details: details})
}

// clientIP is the client's address: the connection's peer (X-Forwarded-For is not trusted: the
// console does not know which proxies are its own).
func clientIP(hc huma.Context) string {
	addr := hc.RemoteAddr()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return strings.TrimSpace(addr)
}
