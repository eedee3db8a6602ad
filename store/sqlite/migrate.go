package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	msqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"plaita/migrations"
)

// The schema is golang-migrate's: the SQL files of package migrations, applied through its iofs
// source and its pure-Go sqlite driver, with the version in schema_migrations (version,
// dirty). Version 0 is a database where no migration is applied.

// Migration is one migration of the binary.
type Migration struct {
	Version uint   `json:"version"`
	Name    string `json:"name"`
}

var migrationName = regexp.MustCompile(`^([0-9]+)_([a-z0-9_]+)\.(up|down)\.sql$`)

// Migrations lists the binary's migrations in order. A file that does not follow the naming
// (NNNN_name.up.sql with its .down.sql) is a build mistake the migrations tests catch.
func Migrations() []Migration {
	entries, _ := fs.ReadDir(migrations.SQLite(), ".")
	seen := map[uint]bool{}
	var out []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		v, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil || seen[uint(v)] {
			continue
		}
		seen[uint(v)] = true
		out = append(out, Migration{Version: uint(v), Name: m[2]})
	}
	slices.SortFunc(out, func(a, b Migration) int { return int(a.Version) - int(b.Version) })
	return out
}

// Latest is the version of the binary's last migration.
func Latest() uint {
	all := Migrations()
	if len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Version
}

// SchemaVersion is a database's migration version.
type SchemaVersion struct {
	Version uint `json:"version"` // 0: no migration applied
	Dirty   bool `json:"dirty"`   // a migration to Version failed half-way
}

// Target is where Migrate goes: Up, UpTo, Down or DownTo.
type Target struct {
	kind  string // up, up-to, down, down-to
	n     uint
	label string
}

// Up migrates to the latest version.
func Up() Target { return Target{kind: "up", label: "up"} }

// UpTo migrates up to version v (a version of the binary, not below the current one).
func UpTo(v uint) Target { return Target{kind: "up-to", n: v, label: fmt.Sprintf("up to %d", v)} }

// Down rolls back the last steps migrations (steps >= 1, at most the applied ones).
func Down(steps uint) Target {
	return Target{kind: "down", n: steps, label: fmt.Sprintf("down %d step(s)", steps)}
}

// DownTo rolls back to version v (0: every migration; not above the current one).
func DownTo(v uint) Target { return Target{kind: "down-to", n: v, label: fmt.Sprintf("down to %d", v)} }

// String says where the target goes.
func (t Target) String() string { return t.label }

// Applied is one migration Migrate ran.
type Applied struct {
	Version   uint   `json:"version"`
	Name      string `json:"name"`
	Direction string `json:"direction"` // up or down
}

// MigrateResult says what Migrate did.
type MigrateResult struct {
	From    SchemaVersion `json:"from"`
	To      SchemaVersion `json:"to"`
	Latest  uint          `json:"latest"`
	Applied []Applied     `json:"applied"` // in the order they ran; empty when nothing changed
}

// Version reads the database's migration version without changing anything. A database with
// tables but no version is an *UnversionedError.
func (db *DB) Version(ctx context.Context) (SchemaVersion, error) {
	tables, err := db.tableNames(ctx)
	if err != nil {
		return SchemaVersion{}, err
	}
	var v SchemaVersion
	if slices.Contains(tables, "schema_migrations") {
		var version int64
		var dirty bool
		err := db.r.QueryRowContext(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return SchemaVersion{}, failed("read the schema version", err)
		case version >= 0:
			v = SchemaVersion{Version: uint(version), Dirty: dirty}
		default: // golang-migrate's nil version, dirty: the first migration's down failed
			v = SchemaVersion{Version: 0, Dirty: dirty}
		}
	}
	if v.Version == 0 && !v.Dirty {
		var ours []string
		for _, t := range tables {
			if t != "schema_migrations" && t != "sqlite_sequence" {
				ours = append(ours, t)
			}
		}
		if len(ours) > 0 {
			return v, &UnversionedError{Path: db.name(), Tables: ours}
		}
	}
	return v, nil
}

// tables lists the database's tables.
func (db *DB) tables(ctx context.Context) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
	if err != nil {
		return nil, failed("list the tables", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, failed("list the tables", err)
		}
		out = append(out, name)
	}
	if err := rows.Err(); err != nil {
		return nil, failed("list the tables", err)
	}
	return out, nil
}

// CheckSchema is nil when the database is at the binary's latest version and clean, else the
// reason: an ErrSchema error (dirty, too new, unversioned) or a *BehindError.
func (db *DB) CheckSchema(ctx context.Context) error {
	v, err := db.Version(ctx)
	if err != nil {
		return err
	}
	if err := checkVersion(v); err != nil {
		return err
	}
	if latest := Latest(); v.Version < latest {
		return &BehindError{Version: v.Version, Latest: latest}
	}
	return nil
}

// BehindError: the database is at an older version than the binary's latest (`plaita migrate
// up` or a console start brings it up). It matches ErrSchema.
type BehindError struct{ Version, Latest uint }

func (e *BehindError) Error() string {
	return fmt.Sprintf("%v: the database is at version %d, this binary's latest is %d: run plaita migrate up", ErrSchema, e.Version, e.Latest)
}

// Unwrap makes errors.Is(err, ErrSchema) hold.
func (e *BehindError) Unwrap() error { return ErrSchema }

// checkVersion refuses a dirty version and one the binary does not have.
func checkVersion(v SchemaVersion) error {
	if v.Dirty {
		return &DirtyError{Version: v.Version}
	}
	if v.Version == 0 {
		return nil
	}
	if latest := Latest(); v.Version > latest {
		return &TooNewError{Version: v.Version, Latest: latest}
	}
	if indexOf(v.Version) < 0 {
		return fmt.Errorf("%w: the database is at version %d, which is not one of this binary's migrations", ErrSchema, v.Version)
	}
	return nil
}

// indexOf is the position of version v among the migrations (-1: none).
func indexOf(v uint) int {
	return slices.IndexFunc(Migrations(), func(m Migration) bool { return m.Version == v })
}

// Migrate moves the schema to target and says what it ran. A dirty database, one newer than
// the binary and one with tables but no version are refused before anything runs (ErrSchema);
// a target the binary has no migration for, or one in the wrong direction, is
// ErrMigrationNotFound or store.ErrInvalid. A migration that fails leaves the database dirty at
// its version (golang-migrate's rule) and returns a *DirtyError with the cause. Each migration
// runs in its own transaction on the writer connection; cancelling ctx stops after the
// migration that is running.
func (db *DB) Migrate(ctx context.Context, target Target) (MigrateResult, error) {
	from, err := db.Version(ctx)
	if err != nil {
		return MigrateResult{From: from}, err
	}
	res := MigrateResult{From: from, To: from, Latest: Latest(), Applied: []Applied{}}
	if err := checkVersion(from); err != nil {
		return res, err
	}
	all := Migrations()
	cur := indexOf(from.Version) // -1 at version 0
	goal, err := goalIndex(all, cur, target)
	if err != nil {
		return res, err
	}
	if goal == cur {
		return res, nil
	}
	m, err := db.migrator(ctx)
	if err != nil {
		return res, err
	}
	defer m.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-ctx.Done():
			select {
			case m.GracefulStop <- true:
			default:
			}
		case <-stop:
		}
	}()
	var runErr error
	if goal < 0 {
		runErr = m.Down()
	} else {
		runErr = m.Migrate(all[goal].Version)
	}
	if errors.Is(runErr, migrate.ErrNoChange) {
		runErr = nil
	}
	to, verr := db.Version(ctx)
	if verr != nil {
		return res, verr
	}
	res.To = to
	res.Applied = appliedBetween(all, cur, indexOf(to.Version), to)
	switch {
	case to.Dirty:
		cause := "unknown cause"
		if runErr != nil {
			cause = runErr.Error()
		}
		return res, &DirtyError{Version: to.Version, Cause: cause}
	case runErr != nil:
		return res, failed("migrate "+target.String(), runErr)
	case ctx.Err() != nil && to != (SchemaVersion{Version: versionAt(all, goal)}):
		return res, failed("migrate "+target.String()+" (stopped)", ctx.Err())
	}
	return res, nil
}

// goalIndex is the index of the migration the target ends at (-1: version 0).
func goalIndex(all []Migration, cur int, t Target) (int, error) {
	switch t.kind {
	case "up":
		return len(all) - 1, nil
	case "down":
		if cur < 0 {
			return 0, invalid("the database is at version 0: nothing to roll back")
		}
		if t.n < 1 || int(t.n) > cur+1 {
			return 0, invalid("migrate down %d step(s): %d migration(s) are applied", t.n, cur+1)
		}
		return cur - int(t.n), nil
	case "up-to", "down-to":
		goal := -1
		if t.n != 0 {
			if goal = indexOf(t.n); goal < 0 {
				return 0, fmt.Errorf("%w: %d (the binary's migrations go up to %d)", ErrMigrationNotFound, t.n, Latest())
			}
		}
		if t.kind == "up-to" && goal < cur {
			return 0, invalid("migrate up to %d: the database is at %d, above it (roll back with down)", t.n, versionAt(all, cur))
		}
		if t.kind == "down-to" && goal > cur {
			return 0, invalid("migrate down to %d: the database is at %d, below it (go forward with up)", t.n, versionAt(all, cur))
		}
		return goal, nil
	}
	return 0, invalid("unknown migration target %q", t.kind)
}

func versionAt(all []Migration, i int) uint {
	if i < 0 {
		return 0
	}
	return all[i].Version
}

// appliedBetween lists the migrations that took the schema from index from to index to (a
// dirty end is the one that failed: not applied).
func appliedBetween(all []Migration, from, to int, end SchemaVersion) []Applied {
	out := []Applied{}
	if to < 0 && end.Version != 0 {
		return out
	}
	switch {
	case to > from:
		last := to
		if end.Dirty {
			last--
		}
		for i := from + 1; i <= last; i++ {
			out = append(out, Applied{Version: all[i].Version, Name: all[i].Name, Direction: "up"})
		}
	case to < from:
		first := to + 1
		if end.Dirty {
			first++
		}
		for i := from; i >= first; i-- {
			out = append(out, Applied{Version: all[i].Version, Name: all[i].Name, Direction: "down"})
		}
	}
	return out
}

// migrator is golang-migrate over the database's embedded line and its connection: SQLite's
// writer, or the server's own driver. Its Close leaves the DB's connections open (the SQLite
// driver is wrapped so that it does).
func (db *DB) migrator(ctx context.Context) (*migrate.Migrate, error) {
	line := migrations.SQLite()
	if db.srv != nil {
		line = db.srv.Migrations()
	}
	src, err := iofs.New(line, ".")
	if err != nil {
		return nil, fmt.Errorf("%w: read the embedded migrations: %w", ErrSchema, err)
	}
	var drv database.Driver
	if db.srv != nil {
		drv, err = db.srv.MigrationDriver(ctx)
	} else {
		var d database.Driver
		d, err = msqlite.WithInstance(db.w, &msqlite.Config{})
		drv = keepOpen{d}
	}
	if err != nil {
		src.Close()
		return nil, failed("prepare the migrations", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, db.Engine(), drv)
	if err != nil {
		src.Close()
		return nil, failed("prepare the migrations", err)
	}
	return m, nil
}

// keepOpen is a database driver whose Close leaves the *sql.DB open: the DB owns it.
type keepOpen struct{ database.Driver }

func (keepOpen) Close() error { return nil }
