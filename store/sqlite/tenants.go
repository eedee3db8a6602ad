package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"plaita/store/keys"
)

// ParseTenantStatus reads "active" or "disabled".
func ParseTenantStatus(s string) (TenantStatus, error) {
	switch st := TenantStatus(s); st {
	case TenantActive, TenantDisabled:
		return st, nil
	}
	return "", invalid("tenant status %q: use active or disabled", s)
}

// NewTenant is what CreateTenant takes.
type NewTenant struct {
	Slug   string       // store/keys ValidTenant: lower-case letters, digits, _ and -
	Name   string       // "" is the slug
	Status TenantStatus // "" is active
}

// NormalizeTenant is the slug a tenant is stored under: "" is the default tenant ("default");
// anything store/keys refuses is store.ErrInvalid.
func NormalizeTenant(slug string) (string, error) {
	if slug == "" {
		return keys.DefaultTenant, nil
	}
	if err := keys.ValidTenant(slug); err != nil {
		return "", invalid("%v", err)
	}
	return slug, nil
}

// MaxNameLen bounds a display name (tenant, user, API key).
const MaxNameLen = 200

// checkName refuses a display name that is empty, too long, not UTF-8 or holds control
// characters.
func checkName(what, s string) error {
	if s == "" || len(s) > MaxNameLen || !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return invalid("%s %q: use 1 to %d printable characters", what, s, MaxNameLen)
	}
	return nil
}

const tenantCols = "slug, name, status, status_epoch, created_at, updated_at"

type scanner interface{ Scan(dest ...any) error }

func scanTenant(s scanner) (Tenant, error) {
	var t Tenant
	var status string
	var created, updated int64
	if err := s.Scan(&t.Slug, &t.Name, &status, &t.StatusEpoch, &created, &updated); err != nil {
		return Tenant{}, err
	}
	t.Status, t.CreatedAt, t.UpdatedAt = TenantStatus(status), fromMS(created), fromMS(updated)
	return t, nil
}

// CreateTenant creates a tenant; a slug that exists is ErrTenantExists.
func (db *DB) CreateTenant(ctx context.Context, nt NewTenant) (Tenant, error) {
	slug, err := NormalizeTenant(nt.Slug)
	if err != nil {
		return Tenant{}, err
	}
	name := nt.Name
	if name == "" {
		name = slug
	}
	if err := checkName("tenant name", name); err != nil {
		return Tenant{}, err
	}
	status := nt.Status
	if status == "" {
		status = TenantActive
	}
	if _, err := ParseTenantStatus(string(status)); err != nil {
		return Tenant{}, err
	}
	now := ms(db.now())
	row := db.w.QueryRowContext(ctx, "INSERT INTO tenants ("+tenantCols+") VALUES (?, ?, ?, 1, ?, ?) RETURNING "+tenantCols,
		slug, name, string(status), now, now)
	t, err := scanTenant(row)
	if err != nil {
		return Tenant{}, dbErr("create tenant "+slug, err, ErrTenantExists, nil)
	}
	return t, nil
}

// Tenant reads one tenant ("" is the default tenant); ErrTenantNotFound when there is none.
func (db *DB) Tenant(ctx context.Context, slug string) (Tenant, error) {
	slug, err := NormalizeTenant(slug)
	if err != nil {
		return Tenant{}, err
	}
	t, err := scanTenant(db.r.QueryRowContext(ctx, "SELECT "+tenantCols+" FROM tenants WHERE slug = ?", slug))
	if errors.Is(err, sql.ErrNoRows) {
		return Tenant{}, fmt.Errorf("%w: %s", ErrTenantNotFound, slug)
	}
	if err != nil {
		return Tenant{}, failed("read tenant "+slug, err)
	}
	return t, nil
}

// ListTenants pages the tenants by slug.
func (db *DB) ListTenants(ctx context.Context, o ListOptions) (Page[Tenant], error) {
	limit, err := pageLimit(o.Limit, DefaultLimit, MaxLimit)
	if err != nil {
		return Page[Tenant]{}, err
	}
	after, err := decodeCursor("tenants", o.Cursor, 1)
	if err != nil {
		return Page[Tenant]{}, err
	}
	q, args := "SELECT "+tenantCols+" FROM tenants", []any{}
	if after != nil {
		q, args = q+" WHERE slug > ?", append(args, after[0])
	}
	rows, err := queryAll(ctx, db.r, "list tenants", q+" ORDER BY slug LIMIT ?", append(args, limit+1), scanTenant)
	if err != nil {
		return Page[Tenant]{}, err
	}
	return page(rows, limit, "tenants", func(t Tenant) []string { return []string{t.Slug} }), nil
}

// AllTenants reads every tenant, by slug: what the console publishes to Redis at start and at
// each tenant-status reconcile.
func (db *DB) AllTenants(ctx context.Context) ([]Tenant, error) {
	return queryAll(ctx, db.r, "list tenants", "SELECT "+tenantCols+" FROM tenants ORDER BY slug", nil, scanTenant)
}

// RenameTenant changes a tenant's display name.
func (db *DB) RenameTenant(ctx context.Context, slug, name string) (Tenant, error) {
	slug, err := NormalizeTenant(slug)
	if err != nil {
		return Tenant{}, err
	}
	if err := checkName("tenant name", name); err != nil {
		return Tenant{}, err
	}
	t, err := scanTenant(db.w.QueryRowContext(ctx, "UPDATE tenants SET name = ?, updated_at = ? WHERE slug = ? RETURNING "+tenantCols,
		name, ms(db.now()), slug))
	if errors.Is(err, sql.ErrNoRows) {
		return Tenant{}, fmt.Errorf("%w: %s", ErrTenantNotFound, slug)
	}
	if err != nil {
		return Tenant{}, failed("rename tenant "+slug, err)
	}
	return t, nil
}

// StatusChange is what SetTenantStatus did.
type StatusChange struct {
	Tenant   Tenant       `json:"tenant"` // as it is now: Status and StatusEpoch to publish
	Previous TenantStatus `json:"previous"`
	Changed  bool         `json:"changed"` // false: it had that status already (the epoch did not move)
}

// SetTenantStatus sets a tenant's status. A change moves StatusEpoch on by one; setting the
// status it has changes nothing (Changed false). The console then publishes the tenant's
// status to Redis, and on disable stops its schedules and refuses its sessions.
func (db *DB) SetTenantStatus(ctx context.Context, slug string, status TenantStatus) (StatusChange, error) {
	slug, err := NormalizeTenant(slug)
	if err != nil {
		return StatusChange{}, err
	}
	if _, err := ParseTenantStatus(string(status)); err != nil {
		return StatusChange{}, err
	}
	var out StatusChange
	err = db.write(ctx, "set the status of tenant "+slug, func(tx *sql.Tx) error {
		before, err := scanTenant(tx.QueryRowContext(ctx, "SELECT "+tenantCols+" FROM tenants WHERE slug = ?", slug))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrTenantNotFound, slug)
		}
		if err != nil {
			return failed("read tenant "+slug, err)
		}
		out = StatusChange{Tenant: before, Previous: before.Status}
		if before.Status == status {
			return nil
		}
		after, err := scanTenant(tx.QueryRowContext(ctx,
			"UPDATE tenants SET status = ?, status_epoch = status_epoch + 1, updated_at = ? WHERE slug = ? RETURNING "+tenantCols,
			string(status), ms(db.now()), slug))
		if err != nil {
			return failed("set the status of tenant "+slug, err)
		}
		out.Tenant, out.Changed = after, true
		return nil
	})
	return out, err
}

// DeleteTenant deletes a disabled tenant with its memberships, API keys, flow drafts and
// version records (its audit rows, jobs and local executions stay: they are history). An
// active tenant is ErrTenantActive (disable it first, so that the workers refuse it before
// it goes); the default tenant is ErrDefaultTenant.
func (db *DB) DeleteTenant(ctx context.Context, slug string) error {
	slug, err := NormalizeTenant(slug)
	if err != nil {
		return err
	}
	if slug == keys.DefaultTenant {
		return ErrDefaultTenant
	}
	return db.write(ctx, "delete tenant "+slug, func(tx *sql.Tx) error {
		var status string
		err := tx.QueryRowContext(ctx, "SELECT status FROM tenants WHERE slug = ?", slug).Scan(&status)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%w: %s", ErrTenantNotFound, slug)
		case err != nil:
			return failed("read tenant "+slug, err)
		case TenantStatus(status) == TenantActive:
			return fmt.Errorf("%w: %s", ErrTenantActive, slug)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM tenants WHERE slug = ?", slug); err != nil {
			return failed("delete tenant "+slug, err)
		}
		return nil
	})
}

// queryer is a pool or a transaction.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryAll runs a query and scans every row.
func queryAll[T any](ctx context.Context, q queryer, what, query string, args []any, scan func(scanner) (T, error)) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, failed(what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, failed(what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, failed(what, err)
	}
	return out, nil
}
