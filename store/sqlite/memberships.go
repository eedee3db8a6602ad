package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ParseRole reads viewer, editor or admin.
func ParseRole(s string) (Role, error) {
	if r := Role(s); r.Valid() {
		return r, nil
	}
	return "", invalid("role %q: use viewer, editor or admin", s)
}

const membershipSelect = "SELECT m.user_id, u.login, m.tenant, m.role, t.status, m.created_at, m.updated_at " +
	"FROM memberships m JOIN users u ON u.id = m.user_id JOIN tenants t ON t.slug = m.tenant"

func scanMembership(s scanner) (Membership, error) {
	var m Membership
	var role, status string
	var created, updated int64
	if err := s.Scan(&m.UserID, &m.Login, &m.Tenant, &role, &status, &created, &updated); err != nil {
		return Membership{}, err
	}
	m.Role, m.TenantStatus, m.CreatedAt, m.UpdatedAt = Role(role), TenantStatus(status), fromMS(created), fromMS(updated)
	return m, nil
}

// SetMembership adds a user to a tenant with a role, or changes the role of a member. An
// unknown user is ErrUserNotFound, an unknown tenant ErrTenantNotFound.
func (db *DB) SetMembership(ctx context.Context, userID, tenant string, role Role) (Membership, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Membership{}, err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return Membership{}, err
	}
	var m Membership
	err = db.write(ctx, "set membership", func(tx *sql.Tx) error {
		if err := exists(ctx, tx, "users", "id", userID, ErrUserNotFound); err != nil {
			return err
		}
		if err := exists(ctx, tx, "tenants", "slug", tenant, ErrTenantNotFound); err != nil {
			return err
		}
		now := ms(db.now())
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO memberships (user_id, tenant, role, created_at, updated_at) VALUES (?, ?, ?, ?, ?) "+
				"ON CONFLICT (user_id, tenant) DO UPDATE SET role = excluded.role, updated_at = excluded.updated_at",
			userID, tenant, string(role), now, now); err != nil {
			return failed("set membership", err)
		}
		var err error
		m, err = scanMembership(tx.QueryRowContext(ctx, membershipSelect+" WHERE m.user_id = ? AND m.tenant = ?", userID, tenant))
		if err != nil {
			return failed("read membership", err)
		}
		return nil
	})
	return m, err
}

// exists refuses with notFound when table has no row whose col is v.
func exists(ctx context.Context, tx *sql.Tx, table, col, v string, notFound error) error {
	var one int
	err := tx.QueryRowContext(ctx, "SELECT 1 FROM "+table+" WHERE "+col+" = ?", v).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %s", notFound, v)
	}
	if err != nil {
		return failed("read "+table, err)
	}
	return nil
}

// Membership reads one user's membership of a tenant; ErrMemberNotFound when the user is not
// a member.
func (db *DB) Membership(ctx context.Context, userID, tenant string) (Membership, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Membership{}, err
	}
	m, err := scanMembership(db.r.QueryRowContext(ctx, membershipSelect+" WHERE m.user_id = ? AND m.tenant = ?", userID, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return Membership{}, fmt.Errorf("%w: user %s in tenant %s", ErrMemberNotFound, userID, tenant)
	}
	if err != nil {
		return Membership{}, failed("read membership", err)
	}
	return m, nil
}

// RemoveMembership removes a user from a tenant; ErrMemberNotFound when it was not a member.
func (db *DB) RemoveMembership(ctx context.Context, userID, tenant string) error {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return err
	}
	res, err := db.w.ExecContext(ctx, "DELETE FROM memberships WHERE user_id = ? AND tenant = ?", userID, tenant)
	if err != nil {
		return failed("remove membership", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: user %s in tenant %s", ErrMemberNotFound, userID, tenant)
	}
	return nil
}

// ListMembers pages a tenant's members by login. An unknown tenant has no members (an empty
// page).
func (db *DB) ListMembers(ctx context.Context, tenant string, o ListOptions) (Page[Membership], error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Page[Membership]{}, err
	}
	limit, err := pageLimit(o.Limit, DefaultLimit, MaxLimit)
	if err != nil {
		return Page[Membership]{}, err
	}
	after, err := decodeCursor("members", o.Cursor, 1)
	if err != nil {
		return Page[Membership]{}, err
	}
	q, args := membershipSelect+" WHERE m.tenant = ?", []any{tenant}
	if after != nil {
		q, args = q+" AND u.login > ?", append(args, after[0])
	}
	rows, err := queryAll(ctx, db.r, "list members", q+" ORDER BY u.login LIMIT ?", append(args, limit+1), scanMembership)
	if err != nil {
		return Page[Membership]{}, err
	}
	return page(rows, limit, "members", func(m Membership) []string { return []string{m.Login} }), nil
}

// UserMemberships lists every tenant a user is a member of, by tenant (what a session may act
// in; a user is a member of few tenants, so the list is not paged).
func (db *DB) UserMemberships(ctx context.Context, userID string) ([]Membership, error) {
	out, err := queryAll(ctx, db.r, "list memberships", membershipSelect+" WHERE m.user_id = ? ORDER BY m.tenant", []any{userID}, scanMembership)
	if out == nil && err == nil {
		out = []Membership{}
	}
	return out, err
}
