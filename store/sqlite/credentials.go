package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"plaita/store"
	"plaita/store/keys"
)

// CredentialStore is store.CredentialsDriver on the console's database (migration 0012): local
// mode's credentials, sealed as the cluster's are.
type CredentialStore struct{ db *DB }

// Credentials is the database's credentials driver.
func (db *DB) Credentials() *CredentialStore { return &CredentialStore{db: db} }

var _ store.CredentialsDriver = (*CredentialStore)(nil)

const credentialCols = "name, sealed, fingerprint, rev, created_at, updated_at, created_by, updated_by"

func scanCredential(s scanner) (store.StoredCredential, error) {
	var c store.StoredCredential
	var created, updated int64
	err := s.Scan(&c.Name, &c.Sealed, &c.Fingerprint, &c.Rev, &created, &updated, &c.CreatedBy, &c.UpdatedBy)
	c.CreatedAt, c.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return c, err
}

// Put writes c with revision rev+1 while the stored revision is rev (0: none).
func (s *CredentialStore) Put(ctx context.Context, sp keys.Space, c store.StoredCredential, rev int64) (bool, error) {
	written := false
	err := s.db.write(ctx, "write credential "+c.Name, func(tx *sql.Tx) error {
		var cur int64
		err := tx.QueryRowContext(ctx, `SELECT rev FROM credentials WHERE tenant = ? AND name = ?`, sp.Tenant(), c.Name).Scan(&cur)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if rev != 0 {
				return nil
			}
		case err != nil:
			return failed("read credential "+c.Name, err)
		case cur != rev:
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO credentials (tenant, `+credentialCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant, name) DO UPDATE SET sealed = excluded.sealed, fingerprint = excluded.fingerprint, rev = excluded.rev,
			created_at = excluded.created_at, updated_at = excluded.updated_at, created_by = excluded.created_by, updated_by = excluded.updated_by`,
			sp.Tenant(), c.Name, c.Sealed, c.Fingerprint, rev+1, c.CreatedAt.UnixMilli(), c.UpdatedAt.UnixMilli(), c.CreatedBy, c.UpdatedBy); err != nil {
			return failed("write credential "+c.Name, err)
		}
		written = true
		return nil
	})
	return written, err
}

// Get reads one record.
func (s *CredentialStore) Get(ctx context.Context, sp keys.Space, name string) (store.StoredCredential, bool, error) {
	c, err := scanCredential(s.db.r.QueryRowContext(ctx, `SELECT `+credentialCols+` FROM credentials WHERE tenant = ? AND name = ?`, sp.Tenant(), name))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.StoredCredential{}, false, nil
	case err != nil:
		return store.StoredCredential{}, false, failed("read credential "+name, err)
	}
	return c, true, nil
}

// List reads the tenant's records, by name.
func (s *CredentialStore) List(ctx context.Context, sp keys.Space) ([]store.StoredCredential, error) {
	return queryAll(ctx, s.db.r, "list credentials", `SELECT `+credentialCols+` FROM credentials WHERE tenant = ? ORDER BY name`,
		[]any{sp.Tenant()}, scanCredential)
}

// Delete removes name's record while its revision is rev (0: any).
func (s *CredentialStore) Delete(ctx context.Context, sp keys.Space, name string, rev int64) (bool, error) {
	deleted := false
	err := s.db.write(ctx, "delete credential "+name, func(tx *sql.Tx) error {
		q, args := `DELETE FROM credentials WHERE tenant = ? AND name = ?`, []any{sp.Tenant(), name}
		if rev != 0 {
			q, args = q+` AND rev = ?`, append(args, rev)
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return failed("delete credential "+name, err)
		}
		n, _ := res.RowsAffected()
		deleted = n == 1
		return nil
	})
	return deleted, err
}
