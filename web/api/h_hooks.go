package api

import (
	"context"

	"plaita/control"
)

// Signed triggers (docs/credentials.md, "Signed triggers"): an external system starts a flow or
// publishes an event with a request signed under a contract key (control/hooks.go). The hook
// routes are public — the signature is the authentication — and every call is audited, a
// refusal by its name (hook_bad_signature, hook_stale …; denials coalesce as every denial does).

// hookIn is a signed request as the handlers share it.
type hookIn struct {
	Tenant, ID, Timestamp, Signature string
	RawBody                          []byte
}

// hookStartIn and hookEventIn are hookIn with their path's name (huma reads the fields of the
// input struct itself, not of an embedded one).
type hookStartIn struct {
	Tenant    string `path:"tenant" minLength:"1" maxLength:"64"`
	FlowID    string `path:"flow_id" minLength:"1" maxLength:"200"`
	ID        string `header:"webhook-id" doc:"the message's id: it is acted on once"`
	Timestamp string `header:"webhook-timestamp" doc:"Unix seconds, within 5 minutes of the server's clock"`
	Signature string `header:"webhook-signature" doc:"v1,<base64 HMAC-SHA256 of id.timestamp.body>, several separated by spaces"`
	RawBody   []byte
}

type hookEventIn struct {
	Tenant    string `path:"tenant" minLength:"1" maxLength:"64"`
	Type      string `path:"type" minLength:"1" maxLength:"200"`
	ID        string `header:"webhook-id" doc:"the message's id: it is acted on once"`
	Timestamp string `header:"webhook-timestamp" doc:"Unix seconds, within 5 minutes of the server's clock"`
	Signature string `header:"webhook-signature" doc:"v1,<base64 HMAC-SHA256 of id.timestamp.body>, several separated by spaces"`
	RawBody   []byte
}

type hookOut struct{ Body control.Triggered }

func (a *API) hook(ctx context.Context, c *Call, in hookIn, global bool, flowID, eventType string) (*hookOut, error) {
	c.Audit.Tenant, c.Audit.Target = in.Tenant, flowID+eventType
	if a.d.Hooks == nil {
		return nil, errNoRedis
	}
	out, err := a.d.Hooks.Handle(ctx, control.Trigger{Tenant: in.Tenant, Global: global, FlowID: flowID, EventType: eventType,
		Headers: control.SignedHeaders{ID: in.ID, Timestamp: in.Timestamp, Signature: in.Signature}, Body: in.RawBody})
	c.Note("message_id", in.ID)
	if out.Key != "" {
		c.Note("contract_key", out.Key)
	}
	if err != nil {
		return nil, err
	}
	c.Note("replayed", out.Replayed)
	return &hookOut{Body: out}, nil
}

func (a *API) hookStart(global bool) func(context.Context, *Call, *hookStartIn) (*hookOut, error) {
	return func(ctx context.Context, c *Call, in *hookStartIn) (*hookOut, error) {
		return a.hook(ctx, c, hookIn{in.Tenant, in.ID, in.Timestamp, in.Signature, in.RawBody}, global, in.FlowID, "")
	}
}

func (a *API) hookEvent(global bool) func(context.Context, *Call, *hookEventIn) (*hookOut, error) {
	return func(ctx context.Context, c *Call, in *hookEventIn) (*hookOut, error) {
		return a.hook(ctx, c, hookIn{in.Tenant, in.ID, in.Timestamp, in.Signature, in.RawBody}, global, "", in.Type)
	}
}

type contractKeyListOut struct {
	Body struct {
		TenantID string                `json:"tenant_id"`
		Items    []control.ContractKey `json:"items"`
	}
}

func (a *API) listContractKeys(ctx context.Context, c *Call, _ *struct{}) (*contractKeyListOut, error) {
	if a.d.Hooks == nil {
		return nil, errNoRedis
	}
	items, err := a.d.Hooks.ContractKeys(ctx, c.Tenant)
	if err != nil {
		return nil, err
	}
	out := &contractKeyListOut{}
	out.Body.TenantID, out.Body.Items = c.Tenant, items
	return out, nil
}

type contractKeyCreatedOut struct{ Body control.ContractKeyCreated }

func (a *API) createContractKey(ctx context.Context, c *Call, _ *struct{}) (*contractKeyCreatedOut, error) {
	if a.d.Hooks == nil {
		return nil, errNoRedis
	}
	k, err := a.d.Hooks.CreateContractKey(ctx, c.Tenant, c.Principal.Actor)
	if err != nil {
		return nil, err
	}
	c.Audit.Target = k.ID
	return &contractKeyCreatedOut{Body: k}, nil
}

type contractKeyIDIn struct {
	ID string `path:"id" minLength:"1" maxLength:"64"`
}

func (a *API) retireContractKey(ctx context.Context, c *Call, in *contractKeyIDIn) (*struct{}, error) {
	if a.d.Hooks == nil {
		return nil, errNoRedis
	}
	c.Audit.Target = in.ID
	return &struct{}{}, a.d.Hooks.RetireContractKey(ctx, c.Tenant, in.ID)
}
