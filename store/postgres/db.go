// Package postgres is the console's database on PostgreSQL (docs/console.md): the driver —
// sqlite.Server — under the console store of package sqlite, whose queries are written once
// for both databases and held to one contract suite (store/sqlite/consoletest). It brings the
// connection with the runbook's budgets and failures (a connect timeout, an acquire timeout,
// lock_timeout and statement_timeout on every connection, a black-holed or refusing server
// named within seconds, the URL's password never in an error), the ? placeholders rebound to
// PostgreSQL's, serializable write transactions run again after a serialization failure, and
// the PostgreSQL migration line (migrations/postgres) through golang-migrate's pgx/v5 driver.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-migrate/migrate/v4/database"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"plaita/migrations"
	"plaita/model"
	"plaita/store/sqlite"
)

// Budgets of a connection (the runbook's PLAITA_CONSOLE_DB_URL row: 5 s by default).
const (
	ConnectTimeout   = 5 * time.Second
	LockTimeout      = 5 * time.Second
	StatementTimeout = 30 * time.Second
	AcquireTimeout   = 5 * time.Second // to take a connection from the pool
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

// server is the PostgreSQL a console database runs on (sqlite.Server): a pgx pool, a
// database/sql view of it whose connections take ? placeholders (rebind.go), and the
// PostgreSQL migration line.
type server struct {
	pool *pgxpool.Pool
	sql  *sql.DB
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

// IsURL says whether raw names a PostgreSQL database (postgres:// or postgresql://).
func IsURL(raw string) bool {
	return strings.HasPrefix(raw, "postgres://") || strings.HasPrefix(raw, "postgresql://")
}

// Open opens the console database at raw (postgres:// or postgresql://) as sqlite.Open does a
// file — migrated up unless sqlite.WithoutMigrate is given, its schema checked — with the
// budgets of the runbook on every connection: ConnectTimeout, lock_timeout, statement_timeout,
// and AcquireTimeout to take a connection from the pool. A server that does not answer within
// the connect budget is ErrUnreachable, one that refuses ErrRefused, each naming the redacted
// URL.
func Open(ctx context.Context, raw string, opt ...sqlite.Option) (*sqlite.DB, error) {
	srv, err := connect(ctx, raw)
	if err != nil {
		return nil, err
	}
	return sqlite.OpenServer(ctx, srv, opt...)
}

// connect makes the pool and checks the server answers.
func connect(ctx context.Context, raw string) (*server, error) {
	redacted := Redact(raw)
	if !IsURL(raw) {
		return nil, fmt.Errorf("%w: %s: use postgres://user:password@host:5432/database", ErrBadURL, redacted)
	}
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
	s := &server{pool: pool, url: redacted}
	if err := s.ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	db := sql.OpenDB(rebinder{Connector: stdlib.GetPoolConnector(pool), cache: &sync.Map{}})
	db.SetMaxIdleConns(0) // the pool keeps the idle connections (stdlib.OpenDBFromPool's rule)
	s.sql = db
	return s, nil
}

// ping checks the database answers within the connect budget.
func (s *server) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		return s.classify(err)
	}
	return nil
}

// classify names a connection failure.
func (s *server) classify(err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code[:2] {
		case "28", "3D": // invalid authorization; invalid catalog name (no such database)
			return fmt.Errorf("%w: %s: %s (SQLSTATE %s)", ErrRefused, s.url, pg.Message, pg.Code)
		}
		return fmt.Errorf("console database %s: %s (SQLSTATE %s)", s.url, pg.Message, pg.Code)
	}
	return fmt.Errorf("%w: %s within %s", ErrUnreachable, s.url, ConnectTimeout)
}

func (s *server) Engine() string { return "postgres" }

func (s *server) URL() string { return s.url }

func (s *server) SQL() *sql.DB { return s.sql }

// WriteTx is serializable: a console's write transaction reads and writes as if it ran
// alone, as it does on SQLite's one writer, whichever replica runs beside it.
func (s *server) WriteTx() *sql.TxOptions { return &sql.TxOptions{Isolation: sql.LevelSerializable} }

// Retry: a serialization failure or a deadlock — the transaction lost to another one and
// can run again.
func (s *server) Retry(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (pg.Code == pgerrcode.SerializationFailure || pg.Code == pgerrcode.DeadlockDetected)
}

func (s *server) Migrations() fs.FS { return migrations.Postgres() }

// MigrationDriver is golang-migrate's pgx/v5 driver on a database/sql view of the pool of its
// own (closing it leaves the pool open). It takes its advisory lock while it migrates, so two
// consoles starting at once migrate one after the other.
func (s *server) MigrationDriver(ctx context.Context) (database.Driver, error) {
	return pgxmigrate.WithInstance(stdlib.OpenDBFromPool(s.pool), &pgxmigrate.Config{})
}

// Tables lists the tables of the connection's schema (current_schema(): the search path's
// first, public by default).
func (s *server) Tables(ctx context.Context) ([]string, error) {
	rows, err := s.sql.QueryContext(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// SyncIdentity sets the sequence of an identity column to follow its largest value.
func (s *server) SyncIdentity(ctx context.Context, table, column string) error {
	q := "SELECT setval(pg_get_serial_sequence(?, ?), COALESCE((SELECT MAX(" + pgx.Identifier{column}.Sanitize() + ") FROM " +
		pgx.Identifier{table}.Sanitize() + "), 0) + 1, false)"
	_, err := s.sql.ExecContext(ctx, q, table, column)
	return err
}

// Close closes the database/sql view, then the pool.
func (s *server) Close() error {
	err := s.sql.Close()
	s.pool.Close()
	return err
}
