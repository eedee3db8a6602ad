package sqlite

import (
	"errors"
	"fmt"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"plaita/model"
	"plaita/store"
)

// Failure classes. Every error a method of this package returns is of exactly one class of
// package model, and model.IsTransient tells the two kinds apart. The sentinels of package store
// are reused where they mean the same thing; the others are this package's own.
//
// Permanent (retrying the same call cannot succeed):
//   - store.ErrNotFound (NotFound): no such row (tenant, user, session, key, draft, version,
//     job, execution). HTTP: 404.
//   - store.ErrInvalid (Invalid): the request itself is wrong: a bad slug, login, role, limit
//     or cursor, a short password, a definition that is not JSON. HTTP: 400.
//   - ErrExists (Conflict): a unique name is taken (tenant slug, login, a version published
//     with another definition). HTTP: 409.
//   - ErrPrecondition (Conflict): the row is not in the state the call requires (a draft saved
//     against a stale revision, an active tenant to delete, a finished job to update, an
//     execution that changed under a compare-and-swap). HTTP: 409.
//   - ErrUnauthenticated (Unauthenticated): a credential does not authenticate (wrong
//     password, unknown, expired or revoked session or key). HTTP: 401. A locked account
//     (LockedError) matches it too, but its class is Limited: HTTP 429.
//   - ErrSchema (Internal): the database schema is not one this binary can use (dirty, newer
//     than the binary, tables without a version: DirtyError, TooNewError, UnversionedError).
//   - store.ErrStateSerialization, store.ErrStateTooLarge, store.ErrStateCorrupt (Internal):
//     local executions, exactly as every execution backend classes them (store/store.go).
//
// Transient (the same call later can succeed):
//   - ErrDB (Unavailable): the database did not answer or failed (I/O, a lock held past the
//     busy timeout, a closed handle, a cancelled context). HTTP: 503.
//
// Every other error is typed and matches one of these: a sentinel with its own message declared
// a kind of one (its code, when it has one, is what the console's API answers), or an error
// with details that unwraps to one. The module's errors test (errors_test.go at the root)
// checks every Err… variable declared here.
var (
	// ErrExists: the name is taken. Permanent.
	ErrExists = model.New(model.Conflict, "exists", "already exists")
	// ErrPrecondition: the row is not in the state the call requires. Permanent.
	ErrPrecondition = model.New(model.Conflict, "precondition_failed", "precondition failed")
	// ErrUnauthenticated: the credential does not authenticate. Permanent.
	ErrUnauthenticated = model.New(model.Unauthenticated, "", "not authenticated")
	// ErrSchema: the schema is not one this binary can use. Permanent.
	ErrSchema = model.New(model.Internal, "", "console database schema")
	// ErrDB: the database failed. Transient.
	ErrDB = model.New(model.Unavailable, "database_unavailable", "console database failed (transient)")
)

// Sentinels of one class each.
var (
	ErrTenantNotFound    = store.ErrNotFound.Kind("tenant_not_found", "no such tenant")
	ErrTenantExists      = ErrExists.Kind("tenant_exists", "tenant already exists")
	ErrTenantActive      = ErrPrecondition.Kind("tenant_active", "tenant is active: disable it before deleting it")
	ErrDefaultTenant     = store.ErrInvalid.Kind("default_tenant", "the default tenant cannot be deleted")
	ErrUserNotFound      = store.ErrNotFound.Kind("user_not_found", "no such user")
	ErrLoginTaken        = ErrExists.Kind("login_taken", "login already taken")
	ErrBadCredentials    = ErrUnauthenticated.Kind("", "wrong login or password")
	ErrMemberNotFound    = store.ErrNotFound.Kind("member_not_found", "no such membership")
	ErrSessionInvalid    = ErrUnauthenticated.Kind("", "no such session, or it expired")
	ErrAPIKeyInvalid     = ErrUnauthenticated.Kind("", "no such API key, or it was revoked")
	ErrAPIKeyNotFound    = store.ErrNotFound.Kind("api_key_not_found", "no such API key")
	ErrDraftNotFound     = store.ErrNotFound.Kind("", "no such flow draft")
	ErrDraftChanged      = ErrPrecondition.Kind("", "the flow draft changed since that revision")
	ErrDraftExists       = ErrExists.Kind("", "the flow has a draft already")
	ErrVersionNotFound   = store.ErrNotFound.Kind("", "no such flow version")
	ErrVersionExists     = ErrExists.Kind("", "flow version already published with a different definition")
	ErrJobNotFound       = store.ErrNotFound.Kind("", "no such job")
	ErrJobFinished       = ErrPrecondition.Kind("", "the job is finished")
	ErrJobLeased         = ErrPrecondition.Kind("", "the job is run by another console")
	ErrExecutionChanged  = ErrPrecondition.Kind("", "the execution changed since it was read")
	ErrBadCursor         = store.ErrInvalid.Kind("invalid_cursor", "malformed list cursor")
	ErrBadPasswordHash   = store.ErrInvalid.Kind("", "malformed password hash")
	ErrBadURL            = store.ErrInvalid.Kind("", "not a usable sqlite:// URL")
	ErrNoDatabase        = store.ErrNotFound.Kind("", "no console database at that path")
	ErrMigrationNotFound = store.ErrInvalid.Kind("", "no such migration version")
)

// LockedError: the account is locked after too many failed logins, until Until. It matches
// ErrUnauthenticated, and its class is Limited (the same login may pass after Until): HTTP 429.
// Nothing was checked: a locked account does not say whether the password was right.
type LockedError struct {
	Login string
	Until time.Time
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%v: account %q is locked until %s after too many failed logins", ErrUnauthenticated, e.Login, e.Until.UTC().Format(time.RFC3339))
}

// Unwrap makes errors.Is(err, ErrUnauthenticated) hold.
func (e *LockedError) Unwrap() error { return ErrUnauthenticated }

// ErrorClass is Limited: a limit refuses the login for now (model.Classed).
func (e *LockedError) ErrorClass() model.Class { return model.Limited }

// ErrorCode names the refusal for programs (model.Classed).
func (e *LockedError) ErrorCode() string { return "locked" }

// RetryAt is when the lock ends: a front end says when to try again.
func (e *LockedError) RetryAt() time.Time { return e.Until }

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
	return fmt.Sprintf("%v: %s has tables (%v) but no schema_migrations version: not a plaita console database; point PLAITA_CONSOLE_DB_URL at a new file or database",
		ErrSchema, e.Path, e.Tables)
}

// Unwrap makes errors.Is(err, ErrSchema) hold.
func (e *UnversionedError) Unwrap() error { return ErrSchema }

// invalid is a store.ErrInvalid with what is wrong.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{store.ErrInvalid}, args...)...)
}

// dbErr classes an error of a database call made for what: a constraint the schema enforces
// becomes the class its caller names for it (unique: exists; foreign key: the missing parent),
// anything else is ErrDB (transient) with its cause.
func dbErr(what string, err error, unique, foreign error) error {
	var isUnique, isForeign bool
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			isUnique = true
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			isForeign = true
		}
	}
	switch stateOf(err) { // a server's SQLSTATE (the standard's classes)
	case "23505": // unique_violation
		isUnique = true
	case "23503": // foreign_key_violation
		isForeign = true
	}
	switch {
	case isUnique && unique != nil:
		return fmt.Errorf("%w: %s", unique, what)
	case isForeign && foreign != nil:
		return fmt.Errorf("%w: %s", foreign, what)
	}
	// A cancelled or expired context, a closed handle, I/O, SQLITE_BUSY past the timeout; on a
	// server also a serialization failure (db.write runs those again), a lock or statement
	// timeout, a lost connection. err stays in the chain: db.write reads its SQLSTATE.
	return fmt.Errorf("%w: %s: %w", ErrDB, what, err)
}

// failed is dbErr for a call that violates no constraint the caller expects.
func failed(what string, err error) error { return dbErr(what, err, nil, nil) }
