package sqlite

import (
	"errors"
	"fmt"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"plaita/store"
)

// Failure classes. Every error a method of this package returns matches exactly one class
// (errors.Is), and IsTransient tells the two kinds apart. The classes of package store are
// reused where they mean the same thing; the others are this package's own.
//
// Permanent (retrying the same call cannot succeed):
//   - store.ErrNotFound: no such row (tenant, user, session, key, draft, version, job,
//     execution). HTTP: 404.
//   - store.ErrInvalid: the request itself is wrong: a bad slug, login, role, limit or cursor,
//     a short password, a definition that is not JSON. HTTP: 400/422.
//   - ErrExists: a unique name is taken (tenant slug, login, a version published with another
//     definition). HTTP: 409.
//   - ErrPrecondition: the row is not in the state the call requires (a draft saved against a
//     stale revision, an active tenant to delete, a finished job to update, an execution that
//     changed under a compare-and-swap). HTTP: 409 or 412.
//   - ErrUnauthenticated: a credential does not authenticate (wrong password, unknown, expired
//     or revoked session or key, a locked account: LockedError). HTTP: 401 (429 when locked).
//   - ErrSchema: the database schema is not one this binary can use (dirty, newer than the
//     binary, tables without a version: DirtyError, TooNewError, UnversionedError).
//   - store.ErrStateSerialization, store.ErrStateTooLarge, store.ErrStateCorrupt: local
//     executions, exactly as every execution backend classes them (store/store.go).
//
// Transient (the same call later can succeed):
//   - ErrDB: the database did not answer or failed (I/O, a lock held past the busy timeout, a
//     closed handle, a cancelled context). HTTP: 503.
//
// Every other error is typed and unwraps to exactly one class: a sentinel with its own message
// (classed), or an error with details. errors_test.go checks every Err… variable declared here.
var (
	// ErrExists: the name is taken. Permanent.
	ErrExists = errors.New("already exists")
	// ErrPrecondition: the row is not in the state the call requires. Permanent.
	ErrPrecondition = errors.New("precondition failed")
	// ErrUnauthenticated: the credential does not authenticate. Permanent.
	ErrUnauthenticated = errors.New("not authenticated")
	// ErrSchema: the schema is not one this binary can use. Permanent.
	ErrSchema = errors.New("console database schema")
	// ErrDB: the database failed. Transient.
	ErrDB = errors.New("console database failed (transient)")
)

// Sentinels of one class each.
var (
	ErrTenantNotFound    = classed("no such tenant", store.ErrNotFound)
	ErrTenantExists      = classed("tenant already exists", ErrExists)
	ErrTenantActive      = classed("tenant is active: disable it before deleting it", ErrPrecondition)
	ErrDefaultTenant     = classed("the default tenant cannot be deleted", store.ErrInvalid)
	ErrUserNotFound      = classed("no such user", store.ErrNotFound)
	ErrLoginTaken        = classed("login already taken", ErrExists)
	ErrBadCredentials    = classed("wrong login or password", ErrUnauthenticated)
	ErrMemberNotFound    = classed("no such membership", store.ErrNotFound)
	ErrSessionInvalid    = classed("no such session, or it expired", ErrUnauthenticated)
	ErrAPIKeyInvalid     = classed("no such API key, or it was revoked", ErrUnauthenticated)
	ErrAPIKeyNotFound    = classed("no such API key", store.ErrNotFound)
	ErrDraftNotFound     = classed("no such flow draft", store.ErrNotFound)
	ErrDraftChanged      = classed("the flow draft changed since that revision", ErrPrecondition)
	ErrDraftExists       = classed("the flow has a draft already", ErrExists)
	ErrVersionNotFound   = classed("no such flow version", store.ErrNotFound)
	ErrVersionExists     = classed("flow version already published with a different definition", ErrExists)
	ErrJobNotFound       = classed("no such job", store.ErrNotFound)
	ErrJobFinished       = classed("the job is finished", ErrPrecondition)
	ErrJobLeased         = classed("the job is run by another console", ErrPrecondition)
	ErrExecutionChanged  = classed("the execution changed since it was read", ErrPrecondition)
	ErrBadCursor         = classed("malformed list cursor", store.ErrInvalid)
	ErrBadPasswordHash   = classed("malformed password hash", store.ErrInvalid)
	ErrBadURL            = classed("not a usable sqlite:// URL", store.ErrInvalid)
	ErrNoDatabase        = classed("no console database at that path", store.ErrNotFound)
	ErrMigrationNotFound = classed("no such migration version", store.ErrInvalid)
)

// classError is a sentinel with its own message that belongs to one class.
type classError struct {
	msg   string
	class error
}

func classed(msg string, class error) error { return &classError{msg: msg, class: class} }

func (e *classError) Error() string { return e.msg }
func (e *classError) Unwrap() error { return e.class }

// LockedError: the account is locked after too many failed logins, until Until. It matches
// ErrUnauthenticated. Nothing was checked: a locked account does not say whether the password
// was right.
type LockedError struct {
	Login string
	Until time.Time
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%v: account %q is locked until %s after too many failed logins", ErrUnauthenticated, e.Login, e.Until.UTC().Format(time.RFC3339))
}

// Unwrap makes errors.Is(err, ErrUnauthenticated) hold.
func (e *LockedError) Unwrap() error { return ErrUnauthenticated }

// DirtyError: a migration to Version failed half-way (golang-migrate marked it dirty). Nothing
// runs on such a database: repair it by hand and force the version with golang-migrate's CLI,
// or restore a backup. It matches ErrSchema.
type DirtyError struct {
	Version uint
	Cause   string // why the migration failed, when this call ran it ("" when found dirty)
}

func (e *DirtyError) Error() string {
	msg := fmt.Sprintf("%v: the database is dirty at version %d: a migration to it failed half-way; repair the schema by hand and force the version, or restore a backup",
		ErrSchema, e.Version)
	if e.Cause != "" {
		msg += " (the migration failed: " + e.Cause + ")"
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrSchema) hold.
func (e *DirtyError) Unwrap() error { return ErrSchema }

// TooNewError: the database is at a version this binary does not have (a newer binary
// migrated it). It matches ErrSchema.
type TooNewError struct{ Version, Latest uint }

func (e *TooNewError) Error() string {
	return fmt.Sprintf("%v: the database is at version %d, newer than this binary's latest migration %d: run a newer plaita, or migrate down with the binary that migrated it up",
		ErrSchema, e.Version, e.Latest)
}

// Unwrap makes errors.Is(err, ErrSchema) hold.
func (e *TooNewError) Unwrap() error { return ErrSchema }

// UnversionedError: the database has tables but no migration version: it was not created by
// plaita's migrations, and none are applied over it. It matches ErrSchema.
type UnversionedError struct {
	Path   string
	Tables []string
}

func (e *UnversionedError) Error() string {
	return fmt.Sprintf("%v: %s has tables (%v) but no schema_migrations version: not a plaita console database; point PLAITA_CONSOLE_DB_URL at a new file",
		ErrSchema, e.Path, e.Tables)
}

// Unwrap makes errors.Is(err, ErrSchema) hold.
func (e *UnversionedError) Unwrap() error { return ErrSchema }

// permanentClasses and transientClasses are the classes (see the top of this file).
var (
	permanentClasses = []error{store.ErrNotFound, store.ErrInvalid, ErrExists, ErrPrecondition, ErrUnauthenticated, ErrSchema,
		store.ErrStateSerialization, store.ErrStateTooLarge, store.ErrStateCorrupt}
	transientClasses = []error{ErrDB}
)

// IsTransient reports whether err is worth retrying: false for nil and for the permanent
// classes, true for ErrDB and for any error of no class. Use it, not store.IsTransient, for
// this package's errors: package store does not know ErrExists, ErrPrecondition,
// ErrUnauthenticated and ErrSchema (the two agree on every error of Executions).
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	for _, p := range permanentClasses {
		if errors.Is(err, p) {
			return false
		}
	}
	return true
}

// invalid is a store.ErrInvalid with what is wrong.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{store.ErrInvalid}, args...)...)
}

// dbErr classes an error of a database call made for what: a constraint the schema enforces
// becomes the class its caller names for it (unique: exists; foreign key: the missing parent),
// anything else is ErrDB (transient) with its cause.
func dbErr(what string, err error, unique, foreign error) error {
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			if unique != nil {
				return fmt.Errorf("%w: %s", unique, what)
			}
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			if foreign != nil {
				return fmt.Errorf("%w: %s", foreign, what)
			}
		}
	}
	// A cancelled or expired context, a closed handle, I/O, SQLITE_BUSY past the timeout.
	return fmt.Errorf("%w: %s: %w", ErrDB, what, err)
}

// failed is dbErr for a call that violates no constraint the caller expects.
func failed(what string, err error) error { return dbErr(what, err, nil, nil) }
