package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the pure-Go driver "sqlite"
)

// DB is the console database: one writer connection (SQLite takes one writer at a time;
// queuing writers in the pool instead of in SQLite's lock is what keeps SQLITE_BUSY away) and a
// pool of read-only connections (WAL lets them read while the writer writes). Its methods are
// safe for concurrent use. Close it once at shutdown.
type DB struct {
	loc  Location
	w    *sql.DB // the writer: one connection, BEGIN IMMEDIATE
	r    *sql.DB // readers: query_only (the writer itself for an in-memory database)
	opts options

	hash      chan struct{} // slots for password hashing (argon2id's memory is bounded by them)
	dummyOnce sync.Once
	dummy     string // a hash verified for unknown logins, so they cost what known ones do

	closeOnce sync.Once
	closeErr  error

	srv Server // the database server it runs on; nil: a SQLite file

	brokerOnce sync.Once
	broker     *Broker // the embedded broker (Broker): one per database, its readers wait on its writes

	// beforeOrphanUpdate, when set by a test, runs between the read and the compare-and-swap
	// of one orphan's reconcile.
	beforeOrphanUpdate func(executionID string)
}

// Location is what a sqlite:// URL names.
type Location struct {
	URL string
	// Path is the absolute path of the database file ("" for an in-memory database).
	Path string
	// Memory: sqlite://:memory:, a database that lives as long as the DB (tests).
	Memory bool
	// Relative: the URL named a path relative to the working directory, which Path resolves;
	// the configuration warns about it (a process started elsewhere opens another file).
	Relative bool
}

// ParseURL reads a PLAITA_CONSOLE_DB_URL: sqlite:////absolute/path.db, sqlite:///relative/path.db
// (resolved against the working directory, as SQLAlchemy does and config/registry.go says) or
// sqlite://:memory:. Query parameters are refused: the store sets its own (WAL, busy timeout,
// foreign keys).
func ParseURL(raw string) (Location, error) {
	rest, ok := strings.CutPrefix(raw, "sqlite://")
	switch {
	case !ok:
		return Location{}, fmt.Errorf("%w: %q does not start with sqlite://", ErrBadURL, raw)
	case rest == ":memory:" || rest == "/:memory:":
		return Location{URL: raw, Memory: true}, nil
	case strings.ContainsAny(rest, "?#"):
		return Location{}, fmt.Errorf("%w: %q has query parameters or a fragment; the store sets its own (WAL, busy timeout, foreign keys)", ErrBadURL, raw)
	case strings.ContainsRune(rest, 0):
		return Location{}, fmt.Errorf("%w: %q holds a NUL byte", ErrBadURL, raw)
	case !strings.HasPrefix(rest, "/"):
		return Location{}, fmt.Errorf("%w: %q: use sqlite:////absolute/path.db or sqlite:///relative/path.db", ErrBadURL, raw)
	}
	path, relative := rest[1:], !strings.HasPrefix(rest, "//")
	if path == "" || strings.HasSuffix(path, "/") || filepath.Base(path) == "." || filepath.Base(path) == ".." {
		return Location{}, fmt.Errorf("%w: %q names no file", ErrBadURL, raw)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Location{}, fmt.Errorf("%w: %q: %w", ErrBadURL, raw, err)
	}
	return Location{URL: raw, Path: abs, Relative: relative}, nil
}

// absoluteMeant is what the error of a database whose directory is missing adds when the URL
// is relative (three slashes) and its directory does not exist, but the same path taken as
// absolute does: the likely intent was the absolute path, which takes four slashes. The rule
// itself stays: sqlite:///abs/dir is abs/dir under the working directory. "" otherwise.
func absoluteMeant(loc Location) string {
	rel, ok := strings.CutPrefix(loc.URL, "sqlite:///")
	if !loc.Relative || !ok || isDir(filepath.Dir(loc.Path)) {
		return ""
	}
	abs := "/" + rel
	if !isDir(filepath.Dir(abs)) {
		return ""
	}
	return fmt.Sprintf(": %s is the relative path %s; for %s write sqlite:///%s (four slashes)", loc.URL, rel, abs, abs)
}

// isDir reports whether path is a directory (following symbolic links).
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// options are Open's settings; Option functions change them.
type options struct {
	now           func() time.Time
	readers       int
	busyTimeout   time.Duration
	migrate       bool
	mustExist     bool
	maxFailures   int
	lockout       time.Duration
	password      PasswordParams
	hashSlots     int
	auditWindow   time.Duration
	maxStateBytes int
	fields        FieldCipher
}

// Defaults of the options.
const (
	DefaultReaders       = 4
	DefaultBusyTimeout   = 5 * time.Second
	DefaultLockout       = 15 * time.Minute // how long a locked account stays locked (WithLockout)
	DefaultHashSlots     = 2                // concurrent argon2id computations (one per core here)
	DefaultAuditWindow   = 60 * time.Second // denials of one key within it are one audit row
	DefaultSessionMaxAge = 12 * time.Hour
)

func defaultOptions() options {
	return options{
		now: time.Now, readers: DefaultReaders, busyTimeout: DefaultBusyTimeout, migrate: true,
		lockout: DefaultLockout, password: DefaultPasswordParams(),
		hashSlots: DefaultHashSlots, auditWindow: DefaultAuditWindow,
	}
}

// Option changes a setting of Open.
type Option func(*options)

// WithClock sets the clock every method reads (tests pass a fake one). Default time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithReaders sets the size of the read pool (n < 1: DefaultReaders).
func WithReaders(n int) Option { return func(o *options) { o.readers = n } }

// WithBusyTimeout sets how long a connection waits for another process's lock on the file
// before the call fails with ErrDB (d <= 0: DefaultBusyTimeout).
func WithBusyTimeout(d time.Duration) Option { return func(o *options) { o.busyTimeout = d } }

// WithoutMigrate opens the database as it is: Open neither migrates nor checks the schema
// (`plaita migrate` does that itself). By default Open migrates up to the latest version.
func WithoutMigrate() Option { return func(o *options) { o.migrate = false } }

// MustExist makes Open fail with ErrNoDatabase instead of creating a missing file.
func MustExist() Option { return func(o *options) { o.mustExist = true } }

// WithLockout sets how many failed logins in a row lock an account (maxFailures < 1: never)
// and for how long (period <= 0: DefaultLockout). Default: never. A lock of the account itself
// lets anyone who knows a login lock its owner out, and tells them the login exists; the
// console guards its logins per (login, client network) instead (web/api/throttle.go) and does not
// set this.
func WithLockout(maxFailures int, period time.Duration) Option {
	return func(o *options) { o.maxFailures, o.lockout = maxFailures, period }
}

// FieldCipher seals what the database keeps of executions at rest (local mode's states: their
// input and context), bound to the row's keys (ad): a sealed value moved to another row does
// not open. internal/keyring.Fields is the one the console passes.
type FieldCipher interface {
	Seal(ad string, plain []byte) ([]byte, error)
	// Open opens what Seal wrote; a value Seal did not write (a row from before the cipher) is
	// returned as it is.
	Open(ad string, stored []byte) ([]byte, error)
}

// WithFieldCipher seals local mode's execution states at rest (nil: kept as they are).
func WithFieldCipher(c FieldCipher) Option { return func(o *options) { o.fields = c } }

// WithPasswordParams sets the argon2id parameters of new hashes (tests use cheap ones). Stored
// hashes keep their own and are re-hashed at the next successful login.
func WithPasswordParams(p PasswordParams) Option { return func(o *options) { o.password = p } }

// WithHashConcurrency bounds the argon2id computations running at once (each takes
// PasswordParams.MemoryKiB of memory): a login flood queues instead of exhausting memory
// (n < 1: DefaultHashSlots).
func WithHashConcurrency(n int) Option { return func(o *options) { o.hashSlots = n } }

// WithAuditWindow sets the window in which denials of one (action, actor, ip, tenant, reason)
// are coalesced into one audit row (d <= 0: DefaultAuditWindow).
func WithAuditWindow(d time.Duration) Option { return func(o *options) { o.auditWindow = d } }

// WithMaxStateBytes bounds an encoded local execution state, as PLAITA_EXECUTION_STATE_MAX_BYTES
// does (n < 1: store.DefaultMaxStateBytes).
func WithMaxStateBytes(n int) Option { return func(o *options) { o.maxStateBytes = n } }

// Open opens (creating it unless MustExist) the database a sqlite:// URL names, with WAL,
// a busy timeout, foreign keys, one writer connection and a pool of readers, and migrates it
// up to the latest version unless WithoutMigrate is given. A database it cannot use (dirty,
// newer than this binary, tables that are not plaita's) is an ErrSchema error naming why.
func Open(ctx context.Context, rawURL string, opt ...Option) (*DB, error) {
	o, err := resolveOptions(opt)
	if err != nil {
		return nil, err
	}
	loc, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if !loc.Memory {
		if _, err := os.Stat(loc.Path); errors.Is(err, fs.ErrNotExist) && o.mustExist {
			return nil, fmt.Errorf("%w: %s%s", ErrNoDatabase, loc.Path, absoluteMeant(loc))
		}
		if !isDir(filepath.Dir(loc.Path)) {
			return nil, invalid("%s: the directory %s does not exist%s", loc.URL, filepath.Dir(loc.Path), absoluteMeant(loc))
		}
	}
	db := &DB{loc: loc, opts: o, hash: make(chan struct{}, o.hashSlots)}
	if err := db.connect(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if o.migrate {
		if _, err := db.Migrate(ctx, Up()); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// resolveOptions applies opt to the defaults and checks the result.
func resolveOptions(opt []Option) (options, error) {
	o := defaultOptions()
	for _, f := range opt {
		f(&o)
	}
	o.readers = cmpPositive(o.readers, DefaultReaders)
	o.hashSlots = cmpPositive(o.hashSlots, DefaultHashSlots)
	if o.busyTimeout <= 0 {
		o.busyTimeout = DefaultBusyTimeout
	}
	if o.lockout <= 0 {
		o.lockout = DefaultLockout
	}
	if o.auditWindow <= 0 {
		o.auditWindow = DefaultAuditWindow
	}
	if err := o.password.validate(); err != nil {
		return o, err
	}
	return o, nil
}

func cmpPositive(n, def int) int {
	if n < 1 {
		return def
	}
	return n
}

// connect opens the writer, then the readers (the writer sets WAL, which the file keeps).
func (db *DB) connect(ctx context.Context) error {
	busy := strconv.FormatInt(db.opts.busyTimeout.Milliseconds(), 10)
	params := url.Values{"_busy_timeout": {busy}, "_foreign_keys": {"1"}}
	var writerDSN, readerDSN string
	if db.loc.Memory {
		// One connection serves everything: a second one would open another, empty database.
		params.Set("_txlock", "immediate")
		writerDSN = ":memory:?" + params.Encode()
	} else {
		base := (&url.URL{Scheme: "file", Path: db.loc.Path}).String()
		w := url.Values{"_journal_mode": {"WAL"}, "_synchronous": {"NORMAL"}, "_txlock": {"immediate"}}
		for k, v := range params {
			w[k] = v
		}
		writerDSN = base + "?" + w.Encode()
		r := url.Values{"_query_only": {"1"}}
		for k, v := range params {
			r[k] = v
		}
		readerDSN = base + "?" + r.Encode()
	}
	w, err := sql.Open("sqlite", writerDSN)
	if err != nil {
		return failed("open "+db.name(), err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	db.w = w
	if err := w.PingContext(ctx); err != nil {
		return failed("open "+db.name(), err)
	}
	if db.loc.Memory {
		db.r = w
		return nil
	}
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return failed("read the journal mode of "+db.name(), err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("%w: %s: journal mode is %q, not WAL (a file system without shared memory?)", ErrDB, db.name(), mode)
	}
	r, err := sql.Open("sqlite", readerDSN)
	if err != nil {
		return failed("open "+db.name()+" for reading", err)
	}
	r.SetMaxOpenConns(db.opts.readers)
	r.SetMaxIdleConns(db.opts.readers)
	db.r = r
	if err := r.PingContext(ctx); err != nil {
		return failed("open "+db.name()+" for reading", err)
	}
	return nil
}

// Location is where the database is.
func (db *DB) Location() Location { return db.loc }

// Ping checks that the writer and a reader answer (readiness): ErrDB when one does not.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.w.PingContext(ctx); err != nil {
		return failed("ping "+db.name(), err)
	}
	if err := db.r.PingContext(ctx); err != nil {
		return failed("ping "+db.name()+" for reading", err)
	}
	return nil
}

func (db *DB) name() string {
	if db.srv != nil {
		return db.srv.URL()
	}
	if db.loc.Memory {
		return "the in-memory database"
	}
	return db.loc.Path
}

// Close closes every connection. Safe to call twice.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		var errs []error
		if db.srv != nil {
			db.closeErr = db.srv.Close()
			return
		}
		if db.r != nil && db.r != db.w {
			errs = append(errs, db.r.Close())
		}
		if db.w != nil {
			errs = append(errs, db.w.Close())
		}
		db.closeErr = errors.Join(errs...)
	})
	return db.closeErr
}

// now is the clock, in UTC and at the millisecond the columns keep.
func (db *DB) now() time.Time { return db.opts.now().UTC().Truncate(time.Millisecond) }

// write runs fn in one write transaction and commits it; an error of fn rolls it back and is
// returned as fn classed it. On SQLite the transaction is BEGIN IMMEDIATE on the one writer
// connection; on a server it is serializable, and one that failed only because another ran
// beside it (Server.Retry) runs again, so fn sees the database as if it ran alone either way.
// fn may run more than once: it must do nothing but its statements.
func (db *DB) write(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	var opts *sql.TxOptions
	if db.srv != nil {
		opts = db.srv.WriteTx()
	}
	backoff := time.Millisecond
	var until time.Time
	for {
		err := db.writeOnce(ctx, what, opts, fn)
		if err == nil || !db.retryable(err) {
			return err
		}
		if until.IsZero() {
			until = time.Now().Add(retryWritesFor)
		}
		// The writers that collided wait apart (a random pause up to a doubling bound), so
		// the next round does not collide again.
		pause := mrand.N(backoff) + time.Millisecond
		if time.Now().Add(pause).After(until) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, retryPauseMax)
	}
}

func (db *DB) writeOnce(ctx context.Context, what string, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, opts)
	if err != nil {
		return failed(what, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return failed(what, err)
	}
	return nil
}

// ms is a time as the columns keep it: unix milliseconds, 0 for the zero time.
func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// fromMS is the time of a column: the zero time for 0.
func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// newID is a random id: prefix, "_", 26 lower-case base32 characters (128 bits).
func newID(prefix string) string { return prefix + "_" + strings.ToLower(rand.Text()) }
