package api

import (
	"context"

	"plaita/control"
)

// Credentials (docs/credentials.md): adapters over control.Credentials, the operations `plaita
// credentials` runs too. A value goes in (create, set) and never comes back: every answer is a
// control.CredentialView — its fingerprint, the key it is sealed under, its revision — and the
// audit records the name and the fingerprint, never the value.

// errNoCredentials is what the credential routes answer on a console built without them.
var errNoCredentials = control.ErrNoRedis

type credentialNameIn struct {
	Name string `path:"name" minLength:"1" maxLength:"128"`
}

type credentialListOut struct {
	Body struct {
		TenantID string                   `json:"tenant_id"`
		Items    []control.CredentialView `json:"items"`
	}
}

func (a *API) listCredentials(ctx context.Context, c *Call, _ *struct{}) (*credentialListOut, error) {
	if a.d.Credentials == nil {
		return nil, errNoCredentials
	}
	items, err := a.d.Credentials.List(ctx, c.Tenant)
	if err != nil {
		return nil, err
	}
	out := &credentialListOut{}
	out.Body.TenantID, out.Body.Items = c.Tenant, items
	return out, nil
}

type credentialOut struct{ Body control.CredentialView }

func (a *API) getCredential(ctx context.Context, c *Call, in *credentialNameIn) (*credentialOut, error) {
	if a.d.Credentials == nil {
		return nil, errNoCredentials
	}
	v, err := a.d.Credentials.Get(ctx, c.Tenant, in.Name)
	if err != nil {
		return nil, err
	}
	return &credentialOut{Body: v}, nil
}

type credentialCreateIn struct {
	Body struct {
		Name  string `json:"name" minLength:"1" maxLength:"128" doc:"letters, digits and _ . -, starting with a letter: what flows name"`
		Value string `json:"value" minLength:"1" maxLength:"65536" doc:"the secret: sealed at once, never answered back" writeOnly:"true"`
	}
}

func (a *API) createCredential(ctx context.Context, c *Call, in *credentialCreateIn) (*credentialOut, error) {
	if a.d.Credentials == nil {
		return nil, errNoCredentials
	}
	c.Audit.Target = in.Body.Name
	v, err := a.d.Credentials.Create(ctx, c.Tenant, in.Body.Name, []byte(in.Body.Value), c.Principal.Actor)
	if err != nil {
		return nil, err
	}
	c.Note("fingerprint", v.Fingerprint)
	c.Note("key_id", v.KeyID)
	return &credentialOut{Body: v}, nil
}

type credentialSetIn struct {
	Name string `path:"name" minLength:"1" maxLength:"128"`
	Body struct {
		Value string `json:"value" minLength:"1" maxLength:"65536" doc:"the new secret: sealed at once, never answered back" writeOnly:"true"`
	}
}

func (a *API) setCredential(ctx context.Context, c *Call, in *credentialSetIn) (*credentialOut, error) {
	if a.d.Credentials == nil {
		return nil, errNoCredentials
	}
	c.Audit.Target = in.Name
	v, err := a.d.Credentials.SetValue(ctx, c.Tenant, in.Name, []byte(in.Body.Value), c.Principal.Actor)
	if err != nil {
		return nil, err
	}
	c.Note("fingerprint", v.Fingerprint)
	c.Note("rev", v.Rev)
	return &credentialOut{Body: v}, nil
}

func (a *API) deleteCredential(ctx context.Context, c *Call, in *credentialNameIn) (*struct{}, error) {
	if a.d.Credentials == nil {
		return nil, errNoCredentials
	}
	c.Audit.Target = in.Name
	return &struct{}{}, a.d.Credentials.Delete(ctx, c.Tenant, in.Name)
}

type rotateKeyIn struct {
	DryRun bool `query:"dry_run" doc:"say what would move, write nothing"`
}

// KeyRotationReport is a master key rotation over every tenant of the console.
type KeyRotationReport struct {
	Credentials  control.KeyRotation         `json:"credentials"`
	ContractKeys control.ContractKeyRotation `json:"contract_keys"`
}

type rotateKeyOut struct{ Body KeyRotationReport }

// rotateKey moves every credential and contract key of the console's tenants to the current
// master key (docs/credentials.md, "The master key"): the console's ring must hold the old key
// after the new one while it runs.
func (a *API) rotateKey(ctx context.Context, c *Call, in *rotateKeyIn) (*rotateKeyOut, error) {
	if a.d.Credentials == nil || a.d.Hooks == nil {
		return nil, errNoCredentials
	}
	all, err := a.d.Accounts.AllTenants(ctx)
	if err != nil {
		return nil, err
	}
	tenants := []string{control.DefaultTenant}
	for _, t := range all {
		if t.Slug != control.DefaultTenant {
			tenants = append(tenants, t.Slug)
		}
	}
	var out KeyRotationReport
	if out.Credentials, err = a.d.Credentials.RotateKey(ctx, tenants, in.DryRun, nil); err != nil {
		return nil, err
	}
	if out.ContractKeys, err = a.d.Hooks.RotateKey(ctx, tenants, in.DryRun); err != nil {
		return nil, err
	}
	c.Note("dry_run", in.DryRun)
	c.Note("current_key", out.Credentials.CurrentKey)
	c.Note("rewrapped", out.Credentials.Rewrapped+out.ContractKeys.Rewrapped)
	c.Note("unopenable", len(out.Credentials.Unopenable)+len(out.ContractKeys.Unopenable))
	return &rotateKeyOut{Body: out}, nil
}
