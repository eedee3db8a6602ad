package store

import (
	"context"
	"fmt"

	"plaita/model"
	"plaita/store/keys"
)

// Credentials are the tenants' credentials as stored: sealed values (control/credentials.go
// seals and opens them), each under a name, with a revision that every change checks. The
// policy is here; the storage is a CredentialsDriver (Redis, or the console's database).
type Credentials struct {
	d    CredentialsDriver
	root string
}

// Credential errors.
var (
	// ErrCredentialNotFound: no credential of that name in the tenant (it matches ErrNotFound).
	ErrCredentialNotFound = ErrNotFound.Kind("credential_not_found", "credential not found")
	// ErrCredentialExists: a credential of that name exists already.
	ErrCredentialExists = model.New(model.Conflict, "credential_exists", "a credential of that name exists")
	// ErrCredentialChanged: the credential changed since it was read (another writer).
	ErrCredentialChanged = model.New(model.Conflict, "credential_changed", "the credential changed since it was read")
	// ErrCredentialCorrupt: what is stored under a credential's name is no record.
	ErrCredentialCorrupt = model.New(model.Internal, "credential_corrupt", "the stored credential is not a record")
)

// NewCredentials is the credentials over d, under the key root root ("": keys.DefaultRoot).
func NewCredentials(d CredentialsDriver, root string) *Credentials {
	if root == "" {
		root = keys.DefaultRoot
	}
	return &Credentials{d: d, root: root}
}

// space is tenant's key space; the name is checked as every stored name is.
func (c *Credentials) space(tenant, name string) (keys.Space, error) {
	sp, err := keys.For(c.root, tenant)
	if err != nil {
		return keys.Space{}, err
	}
	if name != "" {
		if err := ValidCredentialName(name); err != nil {
			return keys.Space{}, err
		}
	}
	return sp, nil
}

// ValidCredentialName checks a credential's name (model.ValidCredentialName), as ErrInvalid.
func ValidCredentialName(name string) error {
	if err := model.ValidCredentialName(name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// Get reads one credential.
func (c *Credentials) Get(ctx context.Context, tenant, name string) (StoredCredential, error) {
	sp, err := c.space(tenant, name)
	if err != nil {
		return StoredCredential{}, err
	}
	rec, found, err := c.d.Get(ctx, sp, name)
	if err == nil && !found {
		err = fmt.Errorf("%w: %s in tenant %s", ErrCredentialNotFound, name, sp.Tenant())
	}
	return rec, err
}

// List reads the tenant's credentials, by name.
func (c *Credentials) List(ctx context.Context, tenant string) ([]StoredCredential, error) {
	sp, err := c.space(tenant, "")
	if err != nil {
		return nil, err
	}
	return c.d.List(ctx, sp)
}

// Create stores a new credential (revision 1).
func (c *Credentials) Create(ctx context.Context, tenant string, rec StoredCredential) (StoredCredential, error) {
	if err := ValidCredentialName(rec.Name); err != nil {
		return StoredCredential{}, err
	}
	sp, err := c.space(tenant, rec.Name)
	if err != nil {
		return StoredCredential{}, err
	}
	ok, err := c.d.Put(ctx, sp, rec, 0)
	switch {
	case err != nil:
		return StoredCredential{}, err
	case !ok:
		return StoredCredential{}, fmt.Errorf("%w: %s in tenant %s", ErrCredentialExists, rec.Name, sp.Tenant())
	}
	rec.Rev = 1
	return rec, nil
}

// Replace writes rec over the revision rev it was read at.
func (c *Credentials) Replace(ctx context.Context, tenant string, rec StoredCredential, rev int64) (StoredCredential, error) {
	if err := ValidCredentialName(rec.Name); err != nil {
		return StoredCredential{}, err
	}
	sp, err := c.space(tenant, rec.Name)
	if err != nil {
		return StoredCredential{}, err
	}
	if rev < 1 {
		return StoredCredential{}, fmt.Errorf("%w: a replacement needs the revision read", ErrInvalid)
	}
	ok, err := c.d.Put(ctx, sp, rec, rev)
	switch {
	case err != nil:
		return StoredCredential{}, err
	case !ok:
		return StoredCredential{}, fmt.Errorf("%w: %s in tenant %s (read at revision %d)", ErrCredentialChanged, rec.Name, sp.Tenant(), rev)
	}
	rec.Rev = rev + 1
	return rec, nil
}

// Delete removes a credential; false: there was none.
func (c *Credentials) Delete(ctx context.Context, tenant, name string) (bool, error) {
	sp, err := c.space(tenant, name)
	if err != nil {
		return false, err
	}
	return c.d.Delete(ctx, sp, name, 0)
}
