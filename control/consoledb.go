package control

import (
	"context"
	"errors"
	"fmt"

	"plaita/store"
	"plaita/store/postgres"
	"plaita/store/sqlite"
)

// The console database's migrations by hand (plaita migrate; migrations/README.md): open the
// database as it is, read its schema version against this binary's migrations, move it up or
// down. The console itself migrates up at every start.

// Migration is one migration of this binary.
type Migration struct {
	Version uint   `json:"version"`
	Name    string `json:"name"`
}

// Migrations lists this binary's migrations in order.
func Migrations() []Migration {
	var out []Migration
	for _, m := range sqlite.Migrations() {
		out = append(out, Migration{Version: m.Version, Name: m.Name})
	}
	return out
}

// LatestMigration is the version of this binary's last migration.
func LatestMigration() uint { return sqlite.Latest() }

// SchemaVersion is a database's migration version.
type SchemaVersion struct {
	Version uint `json:"version"` // 0: no migration applied
	Dirty   bool `json:"dirty"`   // a migration to Version failed half-way
}

// AppliedMigration is one migration a Migrate ran.
type AppliedMigration struct {
	Version   uint   `json:"version"`
	Name      string `json:"name"`
	Direction string `json:"direction"` // up or down
}

// MigrateResult says what a Migrate did.
type MigrateResult struct {
	From    SchemaVersion      `json:"from"`
	To      SchemaVersion      `json:"to"`
	Latest  uint               `json:"latest"`
	Applied []AppliedMigration `json:"applied"` // in the order they ran; empty when nothing changed
}

// MigrateTarget is where a Migrate goes: MigrateUp, MigrateUpTo, MigrateDown or MigrateDownTo.
type MigrateTarget struct{ t sqlite.Target }

// MigrateUp goes to the latest version.
func MigrateUp() MigrateTarget { return MigrateTarget{sqlite.Up()} }

// MigrateUpTo goes up to version v (a version of this binary, not below the current one).
func MigrateUpTo(v uint) MigrateTarget { return MigrateTarget{sqlite.UpTo(v)} }

// MigrateDown rolls back the last steps migrations (at least one, at most the applied ones).
func MigrateDown(steps uint) MigrateTarget { return MigrateTarget{sqlite.Down(steps)} }

// MigrateDownTo rolls back to version v (0: every migration; not above the current one).
func MigrateDownTo(v uint) MigrateTarget { return MigrateTarget{sqlite.DownTo(v)} }

// String says where the target goes.
func (t MigrateTarget) String() string { return t.t.String() }

// The schema of a console database against this binary's migrations (SchemaState.Status).
const (
	// SchemaMissing: there is no database file yet (the console creates it at start).
	SchemaMissing = "missing"
	// SchemaCurrent: at the latest version, clean.
	SchemaCurrent = "current"
	// SchemaBehind: at an older version: MigrateUp brings it up.
	SchemaBehind = "behind"
	// SchemaDirty: a migration failed half-way: nothing runs on it.
	SchemaDirty = "dirty"
	// SchemaTooNew: at a version this binary does not have (a newer one migrated it).
	SchemaTooNew = "too_new"
	// SchemaUnversioned: tables but no migration version: not a plaita console database.
	SchemaUnversioned = "unversioned"
)

// SchemaState is a console database's schema: its version, its status (Schema…), the
// migrations MigrateUp would apply when it is behind, and why it is refused when it is dirty,
// too new or unversioned.
type SchemaState struct {
	SchemaVersion
	Status  string
	Pending []Migration
	Problem error
}

// ConsoleDB is the console's database opened as it is, for its migrations. Close it.
type ConsoleDB struct{ db *sqlite.DB }

// consoleDBRefusal classes an error of the console database: a URL, a target or a directory
// that cannot be is Invalid, a missing database (mustExist) is NotFound; the rest fails as it
// is.
func consoleDBRefusal(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sqlite.ErrNoDatabase):
		return refuse(NotFound, "console_db_missing", err, "%v", err)
	case errors.Is(err, store.ErrInvalid):
		return refuse(Invalid, "console_db_invalid", err, "%v", err)
	}
	return err
}

// OpenConsoleStore opens the console's database url names — a SQLite file (sqlite://) or a
// PostgreSQL database (postgres://, postgresql://) — migrated up unless opt says otherwise.
// A PostgreSQL database that does not answer or refuses fails by name within its connect
// budget (store/postgres).
func OpenConsoleStore(ctx context.Context, url string, opt ...sqlite.Option) (*sqlite.DB, error) {
	if postgres.IsURL(url) {
		return postgres.Open(ctx, url, opt...)
	}
	return sqlite.Open(ctx, url, opt...)
}

// ConsoleDBPath checks a console database URL (PLAITA_CONSOLE_DB_URL) and returns the absolute
// path of the file it names ("" for an in-memory database and for a PostgreSQL one).
func ConsoleDBPath(url string) (string, error) {
	if postgres.IsURL(url) {
		return "", nil
	}
	loc, err := sqlite.ParseURL(url)
	if err != nil {
		return "", consoleDBRefusal(err)
	}
	return loc.Path, nil
}

// OpenConsoleDB opens the console database url names without migrating it (creating an empty
// file unless mustExist: then a missing file is a NotFound refusal; a PostgreSQL database
// must exist either way).
func OpenConsoleDB(ctx context.Context, url string, mustExist bool) (*ConsoleDB, error) {
	opts := []sqlite.Option{sqlite.WithoutMigrate()}
	if mustExist {
		opts = append(opts, sqlite.MustExist())
	}
	db, err := OpenConsoleStore(ctx, url, opts...)
	if err != nil {
		return nil, consoleDBRefusal(err)
	}
	return &ConsoleDB{db: db}, nil
}

// Close closes the database.
func (d *ConsoleDB) Close() error { return d.db.Close() }

// Name is the database's file, or its URL (the password masked) when it is in memory or on a
// server.
func (d *ConsoleDB) Name() string {
	if loc := d.db.Location(); loc.Path != "" {
		return loc.Path
	}
	return d.db.Location().URL
}

// Migrate moves the schema to target and says what it ran, also when it fails half-way. A
// target this binary has no migration for, or one in the wrong direction, is an Invalid
// refusal; a dirty database, one too new and one that is not plaita's are refused before
// anything runs.
func (d *ConsoleDB) Migrate(ctx context.Context, target MigrateTarget) (MigrateResult, error) {
	res, err := d.db.Migrate(ctx, target.t)
	out := MigrateResult{From: SchemaVersion(res.From), To: SchemaVersion(res.To), Latest: res.Latest}
	if res.Applied != nil {
		out.Applied = make([]AppliedMigration, 0, len(res.Applied))
	}
	for _, a := range res.Applied {
		out.Applied = append(out.Applied, AppliedMigration(a))
	}
	return out, consoleDBRefusal(err)
}

// Schema reads the database's version and says whether this binary can use it, changing
// nothing. The error is a failure to read it; a schema this binary refuses is a status, with
// its Problem.
func (d *ConsoleDB) Schema(ctx context.Context) (SchemaState, error) {
	v, err := d.db.Version(ctx)
	s := SchemaState{SchemaVersion: SchemaVersion(v)}
	if err == nil {
		err = d.db.CheckSchema(ctx)
	}
	var behind *sqlite.BehindError
	var dirty *sqlite.DirtyError
	var tooNew *sqlite.TooNewError
	var unversioned *sqlite.UnversionedError
	switch {
	case err == nil:
		s.Status = SchemaCurrent
		return s, nil
	case errors.As(err, &behind):
		s.Status = SchemaBehind
		for _, m := range Migrations() {
			if m.Version > v.Version {
				s.Pending = append(s.Pending, m)
			}
		}
		return s, nil
	case errors.As(err, &dirty):
		s.Status = SchemaDirty
	case errors.As(err, &tooNew):
		s.Status = SchemaTooNew
	case errors.As(err, &unversioned):
		s.Status = SchemaUnversioned
	default:
		return s, err
	}
	s.Problem = err
	return s, nil
}

// Moving a console's data to another database (plaita migrate copy): the console's tables,
// verified by counts and checksums (store/sqlite/copy.go).
type (
	// CopyReport is what a copy did, table by table, and whether it is verified.
	CopyReport = sqlite.CopyReport
	// TableCopy is one table's copy.
	TableCopy = sqlite.TableCopy
)

// CopyOptions change a copy: Batch rows per transaction (0: 500); LeaveLocal copies even when
// the source holds local mode's executions or tasks, which stay behind; Progress hears each
// table's rows copied of its total.
type CopyOptions = sqlite.CopyOptions

// CopyConsoleDB copies the console's data from the database at from (which must exist and be
// at this binary's latest migration; only read) into the one at to (created and migrated up
// when it is new), then verifies every table by its rows and checksum. Run again after a
// failure, it goes on where it stopped. A source holding local mode's state is a Conflict
// refusal local_state_in_source unless o.LeaveLocal; a target that differs after the copy
// (rows of its own) is a Conflict refusal copy_unverified, with the report.
func CopyConsoleDB(ctx context.Context, from, to string, o CopyOptions) (CopyReport, error) {
	src, err := OpenConsoleStore(ctx, from, sqlite.WithoutMigrate(), sqlite.MustExist())
	if err != nil {
		return CopyReport{}, consoleDBRefusal(fmt.Errorf("the source: %w", err))
	}
	defer src.Close()
	dst, err := OpenConsoleStore(ctx, to)
	if err != nil {
		return CopyReport{}, consoleDBRefusal(fmt.Errorf("the target: %w", err))
	}
	defer dst.Close()
	rep, err := sqlite.Copy(ctx, src, dst, o)
	switch {
	case errors.Is(err, sqlite.ErrLocalState):
		return rep, refuse(Conflict, "local_state_in_source", err, "%v; or pass --leave-local to copy the console's tables only", err)
	case errors.Is(err, sqlite.ErrCopyUnverified):
		return rep, refuse(Conflict, "copy_unverified", err, "%v: the target has rows the source lacks (point --to at a new database)", err)
	}
	return rep, consoleDBRefusal(err)
}
