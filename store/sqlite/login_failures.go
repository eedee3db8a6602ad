package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// The login guard's failures (web/api/throttle.go) are the database's, so that its lock of a
// (login, client network) pair holds on every console that shares it: login_failures,
// migration 0014. The login is kept as logins are compared (trimmed, lower-cased); a login
// that exists and one that does not are counted alike.

// loginKey is a login as the failures are kept.
func loginKey(login string) string { return strings.ToLower(strings.TrimSpace(login)) }

// LoginLockedUntil is when the lock of the pair ends (the zero time: not locked now).
func (db *DB) LoginLockedUntil(ctx context.Context, login, network string) (time.Time, error) {
	var until int64
	err := db.r.QueryRowContext(ctx, "SELECT locked_until FROM login_failures WHERE login = ? AND network = ?", loginKey(login), network).Scan(&until)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, failed("read a login's failures", err)
	}
	if t := fromMS(until); t.After(db.now()) {
		return t, nil
	}
	return time.Time{}, nil
}

// RecordLoginFailure counts a failed login of the pair: failures older than lockFor start a new
// count, and the one that reaches max locks the pair for lockFor (the count starts again). It
// returns when the lock ends (the zero time: not locked).
func (db *DB) RecordLoginFailure(ctx context.Context, login, network string, max int, lockFor time.Duration) (time.Time, error) {
	if max < 1 || lockFor <= 0 {
		return time.Time{}, invalid("login failures: a limit of %d in %s", max, lockFor)
	}
	key := loginKey(login)
	var locked time.Time
	err := db.write(ctx, "count a failed login", func(tx *sql.Tx) error {
		now := db.now()
		var n int
		var last, until int64
		err := tx.QueryRowContext(ctx, "SELECT failures, last_at, locked_until FROM login_failures WHERE login = ? AND network = ?", key, network).
			Scan(&n, &last, &until)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return failed("read a login's failures", err)
		}
		if now.Sub(fromMS(last)) >= lockFor {
			n = 0 // the earlier failures are old: a new count
		}
		n++
		if n >= max {
			n, until = 0, ms(now.Add(lockFor))
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO login_failures (login, network, failures, last_at, locked_until) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (login, network) DO UPDATE SET failures = excluded.failures, last_at = excluded.last_at, locked_until = excluded.locked_until`,
			key, network, n, ms(now), until); err != nil {
			return failed("count a failed login", err)
		}
		if t := fromMS(until); t.After(now) {
			locked = t
		}
		return nil
	})
	return locked, err
}

// ClearLoginFailures forgets the failures of the pair (a login that worked), or of every
// network of the login when network is "" (a platform admin unlocked the user).
func (db *DB) ClearLoginFailures(ctx context.Context, login, network string) error {
	q, args := "DELETE FROM login_failures WHERE login = ? AND network = ?", []any{loginKey(login), network}
	if network == "" {
		q, args = "DELETE FROM login_failures WHERE login = ?", args[:1]
	}
	if _, err := db.w.ExecContext(ctx, q, args...); err != nil {
		return failed("forget a login's failures", err)
	}
	return nil
}

// PruneLoginFailures deletes the pairs that hold nothing any more — no failure since before
// and no lock — and says how many.
func (db *DB) PruneLoginFailures(ctx context.Context, before time.Time) (int64, error) {
	res, err := db.w.ExecContext(ctx, "DELETE FROM login_failures WHERE last_at < ? AND locked_until <= ?", ms(before), ms(db.now()))
	if err != nil {
		return 0, failed("prune the login failures", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
