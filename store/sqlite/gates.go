package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"time"

	"plaita/store"
	"plaita/store/keys"
)

// Gates is store.TenantDriver on the console's database (migration 0009): local mode's copy of
// the tenants' statuses, their running-limit overrides and running slots.
type Gates struct{ db *DB }

// Gates is the database's tenant gates driver.
func (db *DB) Gates() *Gates { return &Gates{db: db} }

var _ store.TenantDriver = (*Gates)(nil)

// Status reads a tenant's status and, with withEpoch, the epoch.
func (g *Gates) Status(ctx context.Context, sp keys.Space, withEpoch bool) (store.TenantStatusRead, error) {
	var out store.TenantStatusRead
	err := g.db.r.QueryRowContext(ctx, `SELECT status FROM gate_status WHERE tenant = ?`, sp.Tenant()).Scan(&out.Status)
	switch {
	case err == nil:
		out.Found = true
	case !errors.Is(err, sql.ErrNoRows):
		return store.TenantStatusRead{}, failed("read the status of "+sp.Tenant(), err)
	}
	if !withEpoch {
		return out, nil
	}
	err = g.db.r.QueryRowContext(ctx, `SELECT value FROM gate_settings WHERE name = 'epoch'`).Scan(&out.Epoch)
	switch {
	case err == nil:
		out.EpochFound = true
	case !errors.Is(err, sql.ErrNoRows):
		return store.TenantStatusRead{}, failed("read the deployment epoch", err)
	}
	return out, nil
}

// StatusTenants lists the tenants with a status.
func (g *Gates) StatusTenants(ctx context.Context, _ keys.Space) ([]string, error) {
	rows, err := g.db.r.QueryContext(ctx, `SELECT tenant FROM gate_status ORDER BY tenant`)
	if err != nil {
		return nil, failed("list the tenant statuses", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, failed("list the tenant statuses", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, failed("list the tenant statuses", err)
	}
	return out, nil
}

// WriteStatuses writes the statuses and the epoch in one transaction.
func (g *Gates) WriteStatuses(ctx context.Context, _ keys.Space, statuses map[string]string, epoch string) error {
	return g.db.write(ctx, "write the tenant statuses", func(tx *sql.Tx) error {
		for _, tenant := range slices.Sorted(maps.Keys(statuses)) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO gate_status (tenant, status) VALUES (?, ?)
				ON CONFLICT (tenant) DO UPDATE SET status = excluded.status`, tenant, statuses[tenant]); err != nil {
				return failed("write the status of "+tenant, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO gate_settings (name, value) VALUES ('epoch', ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, epoch); err != nil {
			return failed("write the deployment epoch", err)
		}
		return nil
	})
}

// QuotaOverride reads a tenant's override.
func (g *Gates) QuotaOverride(ctx context.Context, sp keys.Space) (string, bool, error) {
	var raw string
	err := g.db.r.QueryRowContext(ctx, `SELECT raw FROM gate_quota WHERE tenant = ?`, sp.Tenant()).Scan(&raw)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, failed("read the quota of "+sp.Tenant(), err)
	}
	return raw, true, nil
}

// Admit prunes the expired slots and takes or refreshes one, in one transaction.
func (g *Gates) Admit(ctx context.Context, sp keys.Space, req store.RunningAdmit) (store.RunningAdmission, error) {
	var out store.RunningAdmission
	tenant, now := sp.Tenant(), req.Now.UnixMilli()
	expiry := now + req.TTL.Milliseconds()
	err := g.db.write(ctx, "admit a running slot of "+req.ExecutionID, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM gate_running WHERE tenant = ? AND expires_at <= ?`, tenant, now); err != nil {
			return failed("prune the running slots of "+tenant, err)
		}
		var n, mine int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(execution_id = ?), 0) FROM gate_running WHERE tenant = ?`,
			req.ExecutionID, tenant).Scan(&n, &mine); err != nil {
			return failed("count the running slots of "+tenant, err)
		}
		switch {
		case mine > 0:
			out = store.RunningAdmission{Admitted: true, Running: n}
		case req.Limit > 0 && n >= req.Limit && !req.Force:
			out = store.RunningAdmission{Running: n}
			return nil
		default:
			out = store.RunningAdmission{Admitted: true, Running: n + 1, Over: req.Limit > 0 && n >= req.Limit}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO gate_running (tenant, execution_id, expires_at) VALUES (?, ?, ?)
			ON CONFLICT (tenant, execution_id) DO UPDATE SET expires_at = excluded.expires_at`, tenant, req.ExecutionID, expiry); err != nil {
			return failed("take a running slot of "+req.ExecutionID, err)
		}
		return nil
	})
	return out, err
}

// Release frees a slot.
func (g *Gates) Release(ctx context.Context, sp keys.Space, executionID string) error {
	return g.db.write(ctx, "release the running slot of "+executionID, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM gate_running WHERE tenant = ? AND execution_id = ?`, sp.Tenant(), executionID); err != nil {
			return failed("release the running slot of "+executionID, err)
		}
		return nil
	})
}

// CountRunning counts the slots alive after now.
func (g *Gates) CountRunning(ctx context.Context, sp keys.Space, now time.Time) (int, error) {
	var n int
	if err := g.db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM gate_running WHERE tenant = ? AND expires_at > ?`,
		sp.Tenant(), now.UnixMilli()).Scan(&n); err != nil {
		return 0, failed("count the running slots of "+sp.Tenant(), err)
	}
	return n, nil
}
