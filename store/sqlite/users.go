package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// NewUser is what CreateUser takes.
type NewUser struct {
	Login         string // an e-mail address or a name: 1 to 254 printable characters, no spaces
	Name          string // display name ("" is the login)
	Password      string // MinPasswordLen to MaxPasswordLen bytes
	PlatformAdmin bool
}

// MaxLoginLen bounds a login.
const MaxLoginLen = 254

// NormalizeLogin is the login as stored: trimmed and lower-cased; store.ErrInvalid when it is
// empty, too long, not UTF-8, or holds spaces or control characters.
func NormalizeLogin(login string) (string, error) {
	l := strings.ToLower(strings.TrimSpace(login))
	if l == "" || len(l) > MaxLoginLen || !utf8.ValidString(l) ||
		strings.IndexFunc(l, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "", invalid("login %q: use 1 to %d characters without spaces", login, MaxLoginLen)
	}
	return l, nil
}

const userCols = "id, login, display_name, platform_admin, failed_logins, locked_until, created_at, updated_at"

func scanUser(s scanner) (User, error) {
	var u User
	var locked, created, updated int64
	if err := s.Scan(&u.ID, &u.Login, &u.Name, &u.PlatformAdmin, &u.FailedLogins, &locked, &created, &updated); err != nil {
		return User{}, err
	}
	u.LockedUntil, u.CreatedAt, u.UpdatedAt = fromMS(locked), fromMS(created), fromMS(updated)
	return u, nil
}

// CreateUser creates a user with an argon2id hash of the password; a login that exists is
// ErrLoginTaken.
func (db *DB) CreateUser(ctx context.Context, nu NewUser) (User, error) {
	login, err := NormalizeLogin(nu.Login)
	if err != nil {
		return User{}, err
	}
	name := nu.Name
	if name == "" {
		name = login
	}
	if err := checkName("user name", name); err != nil {
		return User{}, err
	}
	if err := checkPassword(nu.Password); err != nil {
		return User{}, err
	}
	hash, err := db.hashPassword(ctx, nu.Password)
	if err != nil {
		return User{}, err
	}
	return db.insertUser(ctx, db.w, login, name, hash, nu.PlatformAdmin)
}

// execQueryer is the writer pool or a write transaction.
type execQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (db *DB) insertUser(ctx context.Context, q execQueryer, login, name, hash string, admin bool) (User, error) {
	now := ms(db.now())
	u, err := scanUser(q.QueryRowContext(ctx,
		"INSERT INTO users (id, login, display_name, password_hash, platform_admin, failed_logins, locked_until, created_at, updated_at) "+
			"VALUES (?, ?, ?, ?, ?, 0, 0, ?, ?) RETURNING "+userCols,
		newID("usr"), login, name, hash, admin, now, now))
	if err != nil {
		return User{}, dbErr("create user "+login, err, ErrLoginTaken, nil)
	}
	return u, nil
}

// User reads a user by id; ErrUserNotFound when there is none.
func (db *DB) User(ctx context.Context, id string) (User, error) {
	return db.userWhere(ctx, "id", id)
}

// UserByLogin reads a user by login (normalized first); ErrUserNotFound when there is none.
func (db *DB) UserByLogin(ctx context.Context, login string) (User, error) {
	l, err := NormalizeLogin(login)
	if err != nil {
		return User{}, err
	}
	return db.userWhere(ctx, "login", l)
}

func (db *DB) userWhere(ctx context.Context, col, v string) (User, error) {
	u, err := scanUser(db.r.QueryRowContext(ctx, "SELECT "+userCols+" FROM users WHERE "+col+" = ?", v))
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, fmt.Errorf("%w: %s %s", ErrUserNotFound, col, v)
	}
	if err != nil {
		return User{}, failed("read user", err)
	}
	return u, nil
}

// ListUsers pages the users by login.
func (db *DB) ListUsers(ctx context.Context, o ListOptions) (Page[User], error) {
	limit, err := pageLimit(o.Limit, DefaultLimit, MaxLimit)
	if err != nil {
		return Page[User]{}, err
	}
	after, err := decodeCursor("users", o.Cursor, 1)
	if err != nil {
		return Page[User]{}, err
	}
	q, args := "SELECT "+userCols+" FROM users", []any{}
	if after != nil {
		q, args = q+" WHERE login > ?", append(args, after[0])
	}
	rows, err := queryAll(ctx, db.r, "list users", q+" ORDER BY login LIMIT ?", append(args, limit+1), scanUser)
	if err != nil {
		return Page[User]{}, err
	}
	return page(rows, limit, "users", func(u User) []string { return []string{u.Login} }), nil
}

// SetPlatformAdmin grants or withdraws platform administration.
func (db *DB) SetPlatformAdmin(ctx context.Context, id string, admin bool) (User, error) {
	return db.updateUser(ctx, id, "set platform admin", "platform_admin = ?", admin)
}

// SetPassword replaces a user's password and clears a lock-out. The caller decides whether the
// user's sessions go too (DeleteUserSessions).
func (db *DB) SetPassword(ctx context.Context, id, password string) (User, error) {
	if err := checkPassword(password); err != nil {
		return User{}, err
	}
	hash, err := db.hashPassword(ctx, password)
	if err != nil {
		return User{}, err
	}
	return db.updateUser(ctx, id, "set password", "password_hash = ?, failed_logins = 0, locked_until = 0", hash)
}

// UnlockUser clears a lock-out and the failed-login count.
func (db *DB) UnlockUser(ctx context.Context, id string) (User, error) {
	return db.updateUser(ctx, id, "unlock user", "failed_logins = 0, locked_until = 0")
}

func (db *DB) updateUser(ctx context.Context, id, what, set string, args ...any) (User, error) {
	args = append(args, ms(db.now()), id)
	u, err := scanUser(db.w.QueryRowContext(ctx, "UPDATE users SET "+set+", updated_at = ? WHERE id = ? RETURNING "+userCols, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, fmt.Errorf("%w: id %s", ErrUserNotFound, id)
	}
	if err != nil {
		return User{}, failed(what+" of user "+id, err)
	}
	return u, nil
}

// DeleteUser deletes a user with its memberships and sessions.
func (db *DB) DeleteUser(ctx context.Context, id string) error {
	res, err := db.w.ExecContext(ctx, "DELETE FROM users WHERE id = ?", id)
	if err != nil {
		return failed("delete user "+id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: id %s", ErrUserNotFound, id)
	}
	return nil
}

// VerifyPassword checks a login's password and returns the user. Every failure is
// ErrUnauthenticated and says nothing about which part was wrong: an unknown login and a wrong
// password are both ErrBadCredentials (and take the same time: an unknown login is checked
// against a dummy hash). With WithLockout, a locked account is a *LockedError and its password
// is not checked, and a wrong password counts a failed login: the one that reaches the maximum
// locks the account for its period (that attempt returns the *LockedError) and starts the count
// again; without it (the default) nothing is counted or locked. A right password clears the
// count, and re-hashes the password when its hash has other parameters
// than the current ones. At most WithHashConcurrency verifications run at once; the others
// wait (bounded by ctx).
func (db *DB) VerifyPassword(ctx context.Context, login, password string) (User, error) {
	l, err := NormalizeLogin(login)
	if err != nil || len(password) > MaxPasswordLen {
		// Not a login or a password anyone has: the same answer as a wrong one, after the
		// same work.
		_ = db.withHashSlot(ctx, func() { db.dummyHash().matches(password) })
		return User{}, ErrBadCredentials
	}
	var u User
	var encoded string
	var locked, created, updated int64
	err = db.r.QueryRowContext(ctx, "SELECT id, login, display_name, platform_admin, failed_logins, locked_until, created_at, updated_at, password_hash FROM users WHERE login = ?", l).
		Scan(&u.ID, &u.Login, &u.Name, &u.PlatformAdmin, &u.FailedLogins, &locked, &created, &updated, &encoded)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if err := db.withHashSlot(ctx, func() { db.dummyHash().matches(password) }); err != nil {
			return User{}, err
		}
		return User{}, ErrBadCredentials
	case err != nil:
		return User{}, failed("read user "+l, err)
	}
	u.LockedUntil, u.CreatedAt, u.UpdatedAt = fromMS(locked), fromMS(created), fromMS(updated)
	now := db.now()
	lockout := db.opts.maxFailures >= 1
	if lockout && u.Locked(now) {
		return User{}, &LockedError{Login: l, Until: u.LockedUntil}
	}
	h, err := parsePasswordHash(encoded)
	if err != nil {
		return User{}, fmt.Errorf("%w (user %s)", err, u.ID)
	}
	var ok bool
	if err := db.withHashSlot(ctx, func() { ok = h.matches(password) }); err != nil {
		return User{}, err
	}
	switch {
	case !ok && lockout:
		return User{}, db.failedLogin(ctx, u, now)
	case !ok:
		return User{}, ErrBadCredentials
	}
	if h.params != db.opts.password || u.FailedLogins != 0 || !u.LockedUntil.IsZero() {
		set, args := "failed_logins = 0, locked_until = 0", []any{}
		if h.params != db.opts.password {
			rehash, err := db.hashPassword(ctx, password)
			if err != nil {
				return User{}, err
			}
			set, args = set+", password_hash = ?", append(args, rehash)
		}
		return db.updateUser(ctx, u.ID, "clear failed logins", set, args...)
	}
	return u, nil
}

// failedLogin counts a failed login of u, and locks the account when it reaches the maximum.
// The count and the lock are one statement: concurrent failures are all counted.
func (db *DB) failedLogin(ctx context.Context, u User, now time.Time) error {
	maxFailures := db.opts.maxFailures
	var count int
	var locked int64
	err := db.w.QueryRowContext(ctx,
		"UPDATE users SET "+
			"locked_until = CASE WHEN failed_logins + 1 >= ? THEN ? ELSE locked_until END, "+
			"failed_logins = CASE WHEN failed_logins + 1 >= ? THEN 0 ELSE failed_logins + 1 END, "+
			"updated_at = ? WHERE id = ? RETURNING failed_logins, locked_until",
		maxFailures, ms(now.Add(db.opts.lockout)), maxFailures, ms(now), u.ID).Scan(&count, &locked)
	if err != nil {
		return failed("count a failed login of "+u.Login, err)
	}
	if until := fromMS(locked); now.Before(until) {
		return &LockedError{Login: u.Login, Until: until}
	}
	return ErrBadCredentials
}

// EnsureBootstrapAdmin creates the first platform admin (PLAITA_CONSOLE_ADMIN_PASSWORD) when,
// and only when, the database has no user at all; created is false (and the user zero) when
// there are users already, whatever their logins.
func (db *DB) EnsureBootstrapAdmin(ctx context.Context, login, password string) (u User, created bool, err error) {
	l, err := NormalizeLogin(login)
	if err != nil {
		return User{}, false, err
	}
	if err := checkPassword(password); err != nil {
		return User{}, false, err
	}
	var n int
	if err := db.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM users").Scan(&n); err != nil {
		return User{}, false, failed("count users", err)
	}
	if n > 0 {
		return User{}, false, nil
	}
	hash, err := db.hashPassword(ctx, password)
	if err != nil {
		return User{}, false, err
	}
	err = db.write(ctx, "create the bootstrap admin", func(tx *sql.Tx) error {
		// Counted again in the write transaction: two consoles starting at once create one.
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM users").Scan(&n); err != nil {
			return failed("count users", err)
		}
		if n > 0 {
			return nil
		}
		u, err = db.insertUser(ctx, tx, l, l, hash, true)
		created = err == nil
		return err
	})
	return u, created, err
}
