package sqlite

import (
	"context"
	"database/sql"
	"time"

	"plaita/store"
)

// ContractKey is a tenant's contract key as stored (migration 0013): its secret sealed.
type ContractKey struct {
	Tenant    string     `json:"tenant_id"`
	ID        string     `json:"key_id"`
	Sealed    string     `json:"-"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by,omitempty"`
	RetiredAt *time.Time `json:"retired_at,omitempty"`
}

// CreateContractKey stores a new contract key.
func (db *DB) CreateContractKey(ctx context.Context, k ContractKey) error {
	tenant, err := NormalizeTenant(k.Tenant)
	if err != nil {
		return err
	}
	return db.write(ctx, "create contract key "+k.ID, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO contract_keys (tenant, key_id, sealed, created_at, created_by) VALUES (?, ?, ?, ?, ?)`,
			tenant, k.ID, k.Sealed, k.CreatedAt.UnixMilli(), k.CreatedBy); err != nil {
			return dbErr("create contract key "+k.ID, err, ErrExists, nil)
		}
		return nil
	})
}

// ContractKeys lists a tenant's contract keys, newest first; activeOnly leaves the retired out.
func (db *DB) ContractKeys(ctx context.Context, tenant string, activeOnly bool) ([]ContractKey, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return nil, err
	}
	q := `SELECT tenant, key_id, sealed, created_at, created_by, retired_at FROM contract_keys WHERE tenant = ?`
	if activeOnly {
		q += ` AND retired_at IS NULL`
	}
	return queryAll(ctx, db.r, "list contract keys", q+` ORDER BY created_at DESC, key_id DESC`, []any{tenant}, func(s scanner) (ContractKey, error) {
		var k ContractKey
		var created int64
		var retired sql.NullInt64
		err := s.Scan(&k.Tenant, &k.ID, &k.Sealed, &created, &k.CreatedBy, &retired)
		k.CreatedAt = time.UnixMilli(created).UTC()
		if retired.Valid {
			t := time.UnixMilli(retired.Int64).UTC()
			k.RetiredAt = &t
		}
		return k, err
	})
}

// RetireContractKey ends a tenant's contract key (store.ErrNotFound: none active of that id).
func (db *DB) RetireContractKey(ctx context.Context, tenant, id string, at time.Time) error {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return err
	}
	return db.write(ctx, "retire contract key "+id, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE contract_keys SET retired_at = ? WHERE tenant = ? AND key_id = ? AND retired_at IS NULL`,
			at.UnixMilli(), tenant, id)
		if err != nil {
			return failed("retire contract key "+id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return store.ErrNotFound
		}
		return nil
	})
}

// ReplaceContractKeySealed writes a key's sealed secret again (a master key rotation) while it
// still holds old; false: it changed, or the key is gone.
func (db *DB) ReplaceContractKeySealed(ctx context.Context, tenant, id, old, sealed string) (bool, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return false, err
	}
	written := false
	err = db.write(ctx, "rewrap contract key "+id, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE contract_keys SET sealed = ? WHERE tenant = ? AND key_id = ? AND sealed = ?`, sealed, tenant, id, old)
		if err != nil {
			return failed("rewrap contract key "+id, err)
		}
		n, _ := res.RowsAffected()
		written = n == 1
		return nil
	})
	return written, err
}
