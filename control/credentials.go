package control

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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

// KeySource gives the master keys each time they are needed (the key file is read again: a
// replaced file takes effect without a restart); an error says why there are none. The ring's
// current key seals; all of its keys open (a rotation in progress).
type KeySource func() (keyring.Ring, error)

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

// masterKeys are the keys, or the refusal that says why there are none.
func (c *Credentials) masterKeys() (keyring.Ring, error) {
	r, err := c.key()
	if err != nil {
		return keyring.Ring{}, refuse(Unavailable, "credentials_key_unavailable", err, "the credentials key: %v", err)
	}
	return r, nil
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
	ring, err := c.masterKeys()
	if err != nil {
		return "", "", err
	}
	k, ad := ring.Current, credentialAD(tenant, name)
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
	ring, err := c.masterKeys()
	if err != nil {
		return nil, err
	}
	v, err := ring.Open(credentialPurpose, credentialAD(t, name), rec.Sealed)
	if err != nil {
		return nil, refuse(Conflict, "credential_unreadable", err, "credential %s of tenant %s does not open: %v", name, t, err)
	}
	return v, nil
}

// KeyRotation is what RotateKey did (or, dry, would do).
type KeyRotation struct {
	DryRun      bool   `json:"dry_run"`
	CurrentKey  string `json:"current_key"`
	Tenants     int    `json:"tenants"`
	Credentials int    `json:"credentials"`
	// Rewrapped were moved to the current key (dry: would be); Already were under it.
	Rewrapped int `json:"rewrapped"`
	Already   int `json:"already"`
	// Unopenable are the credentials (tenant/name) under a key the ring lacks: they stay as they
	// are, and the old key cannot be retired while any is left.
	Unopenable []string `json:"unopenable,omitempty"`
	// ByKey counts the credentials under each key after the rotation (dry: as they are): an
	// older key with none left can be dropped from the ring.
	ByKey map[string]int `json:"by_key"`
}

// RotateKey moves every credential of tenants to the ring's current key: each data key is
// re-wrapped (the values are not decrypted), each record replaced at the revision read, so a
// credential set meanwhile is read again and moved then. It is resumable: a run cut short (kill
// -9) left every credential under one key or the other, and the next run moves what is left.
// progress, when set, hears each tenant's figures.
func (c *Credentials) RotateKey(ctx context.Context, tenants []string, dryRun bool, progress func(tenant string, r KeyRotation)) (KeyRotation, error) {
	ring, err := c.masterKeys()
	if err != nil {
		return KeyRotation{}, err
	}
	rep := KeyRotation{DryRun: dryRun, CurrentKey: ring.Current.ID(), ByKey: map[string]int{}}
	for _, tenant := range tenants {
		t, err := tenantOf(tenant)
		if err != nil {
			return rep, err
		}
		recs, err := c.store.List(ctx, t)
		if err != nil {
			return rep, err
		}
		rep.Tenants++
		for _, rec := range recs {
			rep.Credentials++
			if err := c.rotateOne(ctx, ring, t, rec, dryRun, &rep); err != nil {
				return rep, err
			}
		}
		if progress != nil {
			progress(t, rep)
		}
	}
	return rep, nil
}

// rotateOne moves one credential, reading it again when it changed under the replacement.
func (c *Credentials) rotateOne(ctx context.Context, ring keyring.Ring, tenant string, rec store.StoredCredential, dryRun bool, rep *KeyRotation) error {
	for attempt := 0; ; attempt++ {
		moved, changed, err := ring.RewrapTo(credentialPurpose, credentialAD(tenant, rec.Name), rec.Sealed)
		switch {
		case errors.Is(err, keyring.ErrWrongKey):
			id, _ := keyring.KeyID(rec.Sealed)
			rep.Unopenable = append(rep.Unopenable, tenant+"/"+rec.Name)
			rep.ByKey[id]++
			return nil
		case err != nil:
			return fmt.Errorf("credential %s of tenant %s: %w", rec.Name, tenant, err)
		case !changed:
			rep.Already++
			rep.ByKey[ring.Current.ID()]++
			return nil
		case dryRun:
			rep.Rewrapped++
			id, _ := keyring.KeyID(rec.Sealed)
			rep.ByKey[id]++
			return nil
		}
		rec.Sealed = moved
		_, err = c.store.Replace(ctx, tenant, rec, rec.Rev)
		if err == nil {
			rep.Rewrapped++
			rep.ByKey[ring.Current.ID()]++
			return nil
		}
		if !errors.Is(err, store.ErrCredentialChanged) || attempt >= 3 {
			return fmt.Errorf("credential %s of tenant %s: %w", rec.Name, tenant, err)
		}
		if rec, err = c.store.Get(ctx, tenant, rec.Name); errors.Is(err, store.ErrCredentialNotFound) {
			return nil // deleted meanwhile: nothing to move
		} else if err != nil {
			return err
		}
	}
}
