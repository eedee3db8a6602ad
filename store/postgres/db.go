// Package postgres is the console's database on PostgreSQL ([console-pg], docs/console.md):
// today the connection with the runbook's budgets and failures — a connect timeout, a
// lock_timeout and a statement timeout on every connection, a black-holed or refusing server
// named within seconds, the URL's password never in an error. The console store on it, its
// migration line and its contract suite with store/sqlite follow.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"plaita/model"
)

// Budgets of a connection (the runbook's PLAITA_CONSOLE_DB_URL row: 5 s by default).
const (
	ConnectTimeout   = 5 * time.Second
	LockTimeout      = 5 * time.Second
	StatementTimeout = 30 * time.Second
)

// Errors of Open, named for the operator; none holds the URL's password.
var (
	// ErrBadURL: the URL is not a postgres:// one pgx can read.
	ErrBadURL = model.New(model.Invalid, "console_db_bad_url", "PLAITA_CONSOLE_DB_URL is not a PostgreSQL URL")
	// ErrUnreachable: no answer within the connect budget (a stopped server, a black-holed
	// address, a half-open connection).
	ErrUnreachable = model.New(model.Unavailable, "console_db_unreachable", "the console database does not answer")
	// ErrRefused: the server answered and refused (a wrong password or user, no such database).
	ErrRefused = model.New(model.Invalid, "console_db_refused", "the console database refused the connection")
)

// DB is the console's database on PostgreSQL.
type DB struct {
	pool *pgxpool.Pool
	url  string // redacted
}

// Redact is a URL with its password masked, for logs and errors.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unreadable URL)"
	}
	return u.Redacted()
}

// Open connects to the database at raw (postgres:// or postgresql://), every connection with
// ConnectTimeout, lock_timeout and statement_timeout, and checks it answers within the connect
// budget: a server that does not is ErrUnreachable, one that refuses ErrRefused, each naming
// the redacted URL.
func Open(ctx context.Context, raw string) (*DB, error) {
	redacted := Redact(raw)
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadURL, redacted)
	}
	cfg.ConnConfig.ConnectTimeout = ConnectTimeout
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = fmt.Sprint(LockTimeout.Milliseconds())
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(StatementTimeout.Milliseconds())
	cfg.ConnConfig.RuntimeParams["application_name"] = "plaita-console"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadURL, redacted)
	}
	db := &DB{pool: pool, url: redacted}
	if err := db.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// Ping checks the database answers within the connect budget.
func (db *DB) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	if err := db.pool.Ping(ctx); err != nil {
		return db.classify(err)
	}
	return nil
}

// classify names a connection failure.
func (db *DB) classify(err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code[:2] {
		case "28", "3D": // invalid authorization; invalid catalog name (no such database)
			return fmt.Errorf("%w: %s: %s (SQLSTATE %s)", ErrRefused, db.url, pg.Message, pg.Code)
		}
		return fmt.Errorf("console database %s: %s (SQLSTATE %s)", db.url, pg.Message, pg.Code)
	}
	return fmt.Errorf("%w: %s within %s", ErrUnreachable, db.url, ConnectTimeout)
}

// URL is the database's URL, its password masked.
func (db *DB) URL() string { return db.url }

// Close closes the pool.
func (db *DB) Close() { db.pool.Close() }
