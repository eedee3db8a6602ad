package api

import (
	"cmp"
	"context"
	"net/http"

	"plaita/control"
)

// Dead letters: adapters over control's dead-letter operations, the ones `plaita dlq
// list|show|replay` run. The dead-letter stream is shared by every tenant; a caller sees the
// entries of the tenant it acts in, another tenant's entry is a 404, and only a platform
// admin may ask for every tenant's (all_tenants=true). A replay enqueues the entry again
// once: a second replay answers already_replayed and enqueues nothing.

type deadLetterListIn struct {
	AllTenants bool   `query:"all_tenants" doc:"platform admins: every tenant's dead letters"`
	Reason     string `query:"reason" maxLength:"200" doc:"only dead letters of this reason"`
	Kind       string `query:"kind" enum:"start,resume" doc:"only dead letters of this task kind"`
	FlowID     string `query:"flow_id" maxLength:"200" doc:"only dead letters of a task of this flow (as its payload names it)"`
	Cursor     string `query:"cursor" maxLength:"64" doc:"the next_cursor of the page before"`
	Limit      int    `query:"limit" minimum:"1" maximum:"1000" default:"50"` // control.MaxListLimit, control.DefaultListLimit
}

type deadLetterListOut struct{ Body DeadLetterList }

// allTenants refuses all_tenants to anyone but a platform admin.
func allTenants(c *Call, asked bool) error {
	if asked && !c.Principal.Platform {
		return NewProblem(http.StatusForbidden, "forbidden", "all_tenants is for platform admins")
	}
	return nil
}

func (a *API) listDeadLetters(ctx context.Context, c *Call, in *deadLetterListIn) (*deadLetterListOut, error) {
	if err := allTenants(c, in.AllTenants); err != nil {
		return nil, err
	}
	page, err := a.d.Plane.DeadLetterPage(ctx, control.DeadLetterList{Tenant: c.Tenant, All: in.AllTenants, Cursor: in.Cursor, Limit: in.Limit,
		Filter: control.DeadLetterFilter{Reason: in.Reason, Kind: in.Kind, FlowID: in.FlowID}})
	if err != nil {
		return nil, err
	}
	out := DeadLetterList{TenantID: page.TenantID, AllTenants: page.AllTenants,
		Page: control.Page[DeadLetter]{Items: make([]DeadLetter, 0, len(page.Items)), NextCursor: page.NextCursor}}
	for _, e := range page.Items {
		out.Items = append(out.Items, deadLetterOf(e))
	}
	return &deadLetterListOut{Body: out}, nil
}

type deadLetterIn struct {
	// A stream id: what the dead-letter stream names its entries by.
	ID         string `path:"id" pattern:"^[0-9]{1,20}-[0-9]{1,20}$" doc:"the dead letter's stream id"`
	AllTenants bool   `query:"all_tenants" doc:"platform admins: a dead letter of any tenant"`
}

type deadLetterOut struct{ Body DeadLetter }

func (a *API) getDeadLetter(ctx context.Context, c *Call, in *deadLetterIn) (*deadLetterOut, error) {
	if err := allTenants(c, in.AllTenants); err != nil {
		return nil, err
	}
	e, err := a.d.Plane.DeadLetter(ctx, c.Tenant, in.AllTenants, in.ID)
	if err != nil {
		return nil, err
	}
	return &deadLetterOut{Body: deadLetterOf(e)}, nil
}

type replayOut struct{ Body ReplayResult }

// replayDeadLetter enqueues a dead letter again, once. Its audit row (dlq.replay, also for a
// refusal or an unknown entry) is in the tenant the entry belongs to, which it names as
// target_tenant, with the caller, its key's fingerprint and the request id: which key replayed
// which tenant's dead letter, and when.
func (a *API) replayDeadLetter(ctx context.Context, c *Call, in *deadLetterIn) (*replayOut, error) {
	c.Audit.Target = in.ID
	if err := allTenants(c, in.AllTenants); err != nil {
		return nil, err
	}
	res, err := a.d.Plane.ReplayDeadLetter(ctx, c.Tenant, in.AllTenants, in.ID)
	if res.TenantID != "" {
		c.Audit.Tenant = res.TenantID
	}
	c.Note("target_tenant", cmp.Or(res.TenantID, c.Tenant))
	if in.AllTenants {
		c.Note("all_tenants", true)
	}
	if err != nil {
		return nil, err
	}
	c.Note("status", res.Status)
	c.Note("execution_id", res.ExecutionID)
	c.Note("queue_id", res.QueueID)
	return &replayOut{Body: ReplayResult{Status: string(res.Status), DLQID: res.DLQID, QueueID: res.QueueID, SourceMessageID: res.SourceMessageID,
		ExecutionID: res.ExecutionID, DerivedExecutionID: res.DerivedExecutionID, SchemaVersion: res.SchemaVersion, TenantID: res.TenantID}}, nil
}
