package store

import (
	"context"
	"time"

	"plaita/store/keys"
)

// CredentialsDriver is the storage of a tenant's credentials, each a record under its name: the
// value sealed (package internal/keyring: the store never sees it in clear), its fingerprint,
// a revision and who wrote it when. Credentials keeps the policy (names, the revision rule,
// errors); a driver only stores, one atomic step per method. Two implement it, held to one
// contract (storetest.CredentialsContract): the Redis driver (the cluster: the workers read the
// sealed values where they read everything else) and the console's database (store/sqlite,
// local mode).
type CredentialsDriver interface {
	// Put writes c under c.Name with revision rev+1 while the stored revision is rev (0: none
	// is stored). false: another revision is stored (or one is, when rev is 0); nothing is
	// written.
	Put(ctx context.Context, sp keys.Space, c StoredCredential, rev int64) (bool, error)
	// Get reads one record (found false: none).
	Get(ctx context.Context, sp keys.Space, name string) (c StoredCredential, found bool, err error)
	// List reads every record of the tenant, by name.
	List(ctx context.Context, sp keys.Space) ([]StoredCredential, error)
	// Delete removes name's record while its revision is rev (0: whatever it is). false: there
	// is none, or another revision.
	Delete(ctx context.Context, sp keys.Space, name string, rev int64) (bool, error)
}

// StoredCredential is one credential as stored: never its value in clear.
type StoredCredential struct {
	Name        string    `json:"name"`
	Sealed      string    `json:"sealed"`
	Fingerprint string    `json:"fingerprint"`
	Rev         int64     `json:"rev"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	CreatedBy   string    `json:"created_by,omitempty"`
	UpdatedBy   string    `json:"updated_by,omitempty"`
}
