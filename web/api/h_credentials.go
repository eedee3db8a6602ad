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
