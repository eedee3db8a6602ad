package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"slices"
	"time"

	"github.com/golang-migrate/migrate/v4/database"

	"plaita/store"
)

// A DB runs on a SQLite file (Open) or on a database server (OpenServer: store/postgres is
// the one). The console's queries are written once, in the SQL both take (doc.go: Portable
// SQL), and held to one contract suite on both (consoletest); what differs is the driver — the
// Server below: its connections, its migration line (migrations/sqlite, migrations/postgres),
// the list of its tables, and how a write transaction begins and when it is run again. Local
// mode's embedded backend (the broker, the execution states, the event bus …) runs on SQLite
// only: a console on a server database runs with Redis.

// Server is a database server a DB runs on instead of a SQLite file.
type Server interface {
	// Engine names the server in messages: "postgres".
	Engine() string
	// URL is where it is, its password masked.
	URL() string
	// SQL is the pool every query runs on; it takes the ? placeholders the queries are
	// written with.
	SQL() *sql.DB
	// WriteTx is how a write transaction begins: the isolation that makes it as if it ran
	// alone (on SQLite there is one writer).
	WriteTx() *sql.TxOptions
	// Retry says a write transaction failed only because another one ran beside it (a
	// serialization failure, a deadlock): running it again can succeed.
	Retry(err error) bool
	// Migrations is the server's migration line (the same versions and names as SQLite's).
	Migrations() fs.FS
	// MigrationDriver is golang-migrate's driver for the server, over its own connection;
	// its Close leaves SQL open.
	MigrationDriver(ctx context.Context) (database.Driver, error)
	// Tables lists the tables of the database's schema, by name.
	Tables(ctx context.Context) ([]string, error)
	// SyncIdentity moves the identity sequence of table's column past its largest value (after
	// a copy wrote ids of its own).
	SyncIdentity(ctx context.Context, table, column string) error
	// Close closes the pool.
	Close() error
}

// OpenServer opens the console database on srv, as Open does a file: it migrates it up to
// the latest version unless WithoutMigrate is given, and refuses a schema it cannot use. The
// DB closes srv.
func OpenServer(ctx context.Context, srv Server, opt ...Option) (*DB, error) {
	o, err := resolveOptions(opt)
	if err != nil {
		srv.Close()
		return nil, err
	}
	db := &DB{loc: Location{URL: srv.URL()}, opts: o, hash: make(chan struct{}, o.hashSlots),
		srv: srv, w: srv.SQL(), r: srv.SQL()}
	if o.migrate {
		if _, err := db.Migrate(ctx, Up()); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// Engine names the database the DB runs on: "sqlite", or its server's ("postgres").
func (db *DB) Engine() string {
	if db.srv != nil {
		return db.srv.Engine()
	}
	return "sqlite"
}

// Embedded says whether the DB is a SQLite file, which can also hold local mode's backend.
func (db *DB) Embedded() bool { return db.srv == nil }

// ErrNotEmbedded: local mode's backend was asked of a database server. Permanent.
var ErrNotEmbedded = store.ErrInvalid.Kind("local_mode_needs_sqlite",
	"local mode runs on a SQLite console database only: a console on a database server runs with Redis")

// retryWritesFor bounds how long one write transaction that keeps failing with a
// serialization failure (Server.Retry) runs again: as long as PostgreSQL's lock_timeout,
// the time a write may wait for a lock anyway. A count would not do: writers of one row at
// once (a burst of denials coalescing into one audit row) each lose every round but one,
// and on a loaded host twenty of them lost sixteen rounds in a row.
const retryWritesFor = 5 * time.Second

// retryPauseMax caps the random pause between two runs of a write transaction.
const retryPauseMax = 100 * time.Millisecond

// retryable says whether err, from a write transaction, may succeed if run again.
func (db *DB) retryable(err error) bool {
	return db.srv != nil && db.srv.Retry(err)
}

// tableNames lists the database's tables.
func (db *DB) tableNames(ctx context.Context) ([]string, error) {
	if db.srv != nil {
		t, err := db.srv.Tables(ctx)
		if err != nil {
			return nil, failed("list the tables", err)
		}
		slices.Sort(t)
		return t, nil
	}
	return db.tables(ctx)
}

// sqlState is an error of a database server that carries its SQLSTATE (pgconn.PgError does).
type sqlState interface{ SQLState() string }

// stateOf is the SQLSTATE of a server's error ("" for none).
func stateOf(err error) string {
	var s sqlState
	if errors.As(err, &s) {
		return s.SQLState()
	}
	return ""
}

// CountRows is the number of rows of one of the database's tables (the contract suite and
// `plaita migrate copy` check by it). A name that is not a table of the database is
// store.ErrInvalid.
func (db *DB) CountRows(ctx context.Context, table string) (int64, error) {
	tables, err := db.tableNames(ctx)
	if err != nil {
		return 0, err
	}
	if !slices.Contains(tables, table) {
		return 0, invalid("%q is not a table of the console database", table)
	}
	var n int64
	// table is one of the schema's own names, read from it above: safe to write into the query.
	if err := db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM "`+table+`"`).Scan(&n); err != nil {
		return 0, failed("count the rows of "+table, err)
	}
	return n, nil
}
