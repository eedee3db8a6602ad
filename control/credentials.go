package control

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"plaita/internal/keyring"
	"plaita/store"
	"plaita/store/keys"
)

// Credentials (docs/credentials.md): a tenant's named secrets, sealed under the master key
// (internal/keyring) with the tenant and the name bound, so a sealed value moved to another
// tenant or name does not open. The value goes in once — created, or replaced — and never comes
// back out of an operation: what is shown is its fingerprint (a keyed HMAC, so a guess cannot
// be checked against it), the id of the key it is sealed under, its revision and who wrote it
// when. The only reader of the value is Resolve, the worker's, at the moment a node sends it.
type Credentials struct {
	store *store.Credentials
	key   KeySource
	now   func() time.Time
}

// KeySource gives the master key each time one is needed (the key file is read again: a
// replaced file takes effect without a restart); an error says why there is none.
type KeySource func() (keyring.Key, error)

// NewCredentials is the credentials of st, sealed under key.
func NewCredentials(st *store.Credentials, key KeySource) *Credentials {
	return &Credentials{store: st, key: key, now: time.Now}
}

// credentialPurpose is the keyring purpose of credentials' seals; fingerprintPurpose keys their
// fingerprints.
const (
	credentialPurpose  = "credentials"
	fingerprintPurpose = "credential-fingerprint"
)

// MaxCredentialBytes bounds a credential's value.
const MaxCredentialBytes = 64 << 10

// CredentialView is a credential as every operation shows it: never its value.
type CredentialView struct {
	Tenant      string    `json:"tenant_id"`
	Name        string    `json:"name"`
	Fingerprint string    `json:"fingerprint" doc:"a keyed HMAC-SHA256 of the value: equal for equal values under one key"`
	KeyID       string    `json:"key_id" doc:"the master key the value is sealed under"`
	Rev         int64     `json:"rev"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	CreatedBy   string    `json:"created_by,omitempty"`
	UpdatedBy   string    `json:"updated_by,omitempty"`
}

func viewOf(tenant string, c store.StoredCredential) CredentialView {
	id, _ := keyring.KeyID(c.Sealed)
	return CredentialView{Tenant: tenant, Name: c.Name, Fingerprint: c.Fingerprint, KeyID: id, Rev: c.Rev, CreatedAt: c.CreatedAt,
		UpdatedAt: c.UpdatedAt, CreatedBy: c.CreatedBy, UpdatedBy: c.UpdatedBy}
}

// credentialAD is what a credential's seal is bound to: its tenant and its name.
func credentialAD(tenant, name string) []byte { return []byte(tenant + "\x00" + name) }

// tenantOf is the tenant's slug as the seals bind it ("" is "default").
func tenantOf(tenant string) (string, error) {
	sp, err := keys.For(keys.DefaultRoot, tenant)
	if err != nil {
		return "", refuse(Invalid, "invalid_tenant", err, "%v", err)
	}
	return sp.Tenant(), nil
}

// masterKey is the key, or the refusal that says why there is none.
func (c *Credentials) masterKey() (keyring.Key, error) {
	k, err := c.key()
	if err != nil {
		return keyring.Key{}, refuse(Unavailable, "credentials_key_unavailable", err, "the credentials key: %v", err)
	}
	return k, nil
}

// seal seals value for tenant's name and fingerprints it.
func (c *Credentials) seal(tenant, name string, value []byte) (sealed, fingerprint string, err error) {
	switch {
	case len(value) == 0:
		return "", "", refuse(Invalid, "invalid_credential", nil, "credential %s: the value is empty", name)
	case len(value) > MaxCredentialBytes:
		return "", "", refuse(Invalid, "invalid_credential", nil, "credential %s: the value is %d bytes, at most %d", name, len(value), MaxCredentialBytes)
	}
	if err := store.ValidCredentialName(name); err != nil {
		return "", "", refuse(Invalid, "invalid_credential", err, "%v", err)
	}
	k, err := c.masterKey()
	if err != nil {
		return "", "", err
	}
	ad := credentialAD(tenant, name)
	if sealed, err = k.Seal(credentialPurpose, ad, value); err != nil {
		return "", "", err
	}
	mac := hmac.New(sha256.New, k.Subkey(fingerprintPurpose))
	mac.Write(ad)
	mac.Write([]byte{0})
	mac.Write(value)
	return sealed, "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil)[:12]), nil
}

// Create stores a new credential of tenant; the value is sealed before it leaves this call.
func (c *Credentials) Create(ctx context.Context, tenant, name string, value []byte, by string) (CredentialView, error) {
	t, err := tenantOf(tenant)
	if err != nil {
		return CredentialView{}, err
	}
	sealed, fp, err := c.seal(t, name, value)
	if err != nil {
		return CredentialView{}, err
	}
	now := c.now().UTC().Truncate(time.Millisecond)
	rec, err := c.store.Create(ctx, t, store.StoredCredential{Name: name, Sealed: sealed, Fingerprint: fp, CreatedAt: now, UpdatedAt: now,
		CreatedBy: by, UpdatedBy: by})
	if errors.Is(err, store.ErrCredentialExists) {
		return CredentialView{}, refuse(Conflict, "credential_exists", err, "credential %s exists in tenant %s: set its value instead", name, t)
	}
	if err != nil {
		return CredentialView{}, err
	}
	return viewOf(t, rec), nil
}

// SetValue replaces the value of an existing credential (a rotation of the secret itself).
func (c *Credentials) SetValue(ctx context.Context, tenant, name string, value []byte, by string) (CredentialView, error) {
	t, err := tenantOf(tenant)
	if err != nil {
		return CredentialView{}, err
	}
	cur, err := c.get(ctx, t, name)
	if err != nil {
		return CredentialView{}, err
	}
	sealed, fp, err := c.seal(t, name, value)
	if err != nil {
		return CredentialView{}, err
	}
	cur.Sealed, cur.Fingerprint, cur.UpdatedAt, cur.UpdatedBy = sealed, fp, c.now().UTC().Truncate(time.Millisecond), by
	rec, err := c.store.Replace(ctx, t, cur, cur.Rev)
	if errors.Is(err, store.ErrCredentialChanged) {
		return CredentialView{}, refuse(Conflict, "credential_changed", err, "credential %s changed while it was set: read it and try again", name)
	}
	if err != nil {
		return CredentialView{}, err
	}
	return viewOf(t, rec), nil
}

// List is the tenant's credentials, by name.
func (c *Credentials) List(ctx context.Context, tenant string) ([]CredentialView, error) {
	t, err := tenantOf(tenant)
	if err != nil {
		return nil, err
	}
	recs, err := c.store.List(ctx, t)
	if err != nil {
		return nil, err
	}
	out := make([]CredentialView, 0, len(recs))
	for _, r := range recs {
		out = append(out, viewOf(t, r))
	}
	return out, nil
}

// Get is one credential.
func (c *Credentials) Get(ctx context.Context, tenant, name string) (CredentialView, error) {
	t, err := tenantOf(tenant)
	if err != nil {
		return CredentialView{}, err
	}
	rec, err := c.get(ctx, t, name)
	if err != nil {
		return CredentialView{}, err
	}
	return viewOf(t, rec), nil
}

func (c *Credentials) get(ctx context.Context, tenant, name string) (store.StoredCredential, error) {
	rec, err := c.store.Get(ctx, tenant, name)
	switch {
	case errors.Is(err, store.ErrCredentialNotFound):
		return rec, refuse(NotFound, "credential_not_found", err, "no credential %s in tenant %s", name, tenant)
	case errors.Is(err, store.ErrInvalid):
		return rec, refuse(Invalid, "invalid_credential", err, "%v", err)
	}
	return rec, err
}

// Delete removes a credential.
func (c *Credentials) Delete(ctx context.Context, tenant, name string) error {
	t, err := tenantOf(tenant)
	if err != nil {
		return err
	}
	ok, err := c.store.Delete(ctx, t, name)
	switch {
	case errors.Is(err, store.ErrInvalid):
		return refuse(Invalid, "invalid_credential", err, "%v", err)
	case err != nil:
		return err
	case !ok:
		return refuse(NotFound, "credential_not_found", nil, "no credential %s in tenant %s", name, t)
	}
	return nil
}

// Resolve opens tenant's credential name: the worker's engine.CredentialResolver, called when a
// node sends it. Errors name the credential, never a value.
func (c *Credentials) Resolve(ctx context.Context, tenant, name string) ([]byte, error) {
	t, err := tenantOf(tenant)
	if err != nil {
		return nil, err
	}
	rec, err := c.get(ctx, t, name)
	if err != nil {
		return nil, err
	}
	k, err := c.masterKey()
	if err != nil {
		return nil, err
	}
	v, err := k.Open(credentialPurpose, credentialAD(t, name), rec.Sealed)
	if err != nil {
		return nil, refuse(Conflict, "credential_unreadable", err, "credential %s of tenant %s does not open: %v", name, t, err)
	}
	return v, nil
}
