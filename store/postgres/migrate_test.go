package postgres

import (
	"context"
	"errors"
	"testing"

	"plaita/store/sqlite"
)

// Every migration of the PostgreSQL line runs up, and its down restores exactly the schema
// before it; down to 0 leaves no table of ours, and up again makes the same schema.
func TestEveryMigrationUpAndDownPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := newDatabase(t)
	db, err := Open(ctx, url, sqlite.WithoutMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	same := func(a, b map[string]table) bool {
		if len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if w, ok := b[k]; !ok || w.String() != v.String() {
				return false
			}
		}
		return true
	}
	for _, m := range sqlite.Migrations() {
		before := postgresSchema(t, url)
		res, err := db.Migrate(ctx, sqlite.UpTo(m.Version))
		if err != nil || len(res.Applied) != 1 || res.Applied[0] != (sqlite.Applied{Version: m.Version, Name: m.Name, Direction: "up"}) {
			t.Fatalf("up to %d: %+v %v", m.Version, res, err)
		}
		res, err = db.Migrate(ctx, sqlite.Down(1))
		if err != nil || len(res.Applied) != 1 || res.Applied[0].Direction != "down" || res.Applied[0].Version != m.Version {
			t.Fatalf("down from %d: %+v %v", m.Version, res, err)
		}
		if got := postgresSchema(t, url); !same(got, before) {
			t.Errorf("down of %d leaves\n%v\nwant\n%v", m.Version, got, before)
		}
		if _, err := db.Migrate(ctx, sqlite.UpTo(m.Version)); err != nil {
			t.Fatal(err)
		}
	}
	full := postgresSchema(t, url)
	if v, err := db.Version(ctx); err != nil || v != (sqlite.SchemaVersion{Version: sqlite.Latest()}) {
		t.Fatalf("at the top: %+v %v", v, err)
	}
	if err := db.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx, sqlite.DownTo(0)); err != nil {
		t.Fatal(err)
	}
	if left := postgresSchema(t, url); len(left) != 0 {
		t.Fatalf("tables left at version 0: %v", left)
	}
	if _, err := db.Migrate(ctx, sqlite.Up()); err != nil {
		t.Fatal(err)
	}
	if got := postgresSchema(t, url); !same(got, full) {
		t.Errorf("the schema made again differs:\n%v\nwant\n%v", got, full)
	}
}

// A PostgreSQL database with tables of its own and no version is not taken over; one a newer
// binary migrated is refused; both by name.
func TestOpenRefusesSchemasItCannotUsePostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := newDatabase(t)
	srv, err := connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SQL().ExecContext(ctx, "CREATE TABLE orders (id TEXT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	var unversioned *sqlite.UnversionedError
	if _, err := Open(ctx, url); !errors.As(err, &unversioned) || !errors.Is(err, sqlite.ErrSchema) {
		t.Fatalf("a database with another program's tables: %v", err)
	}

	url = newDatabase(t)
	db, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	srv, err = connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SQL().ExecContext(ctx, "UPDATE schema_migrations SET version = ?", sqlite.Latest()+1); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	var tooNew *sqlite.TooNewError
	if _, err := Open(ctx, url); !errors.As(err, &tooNew) {
		t.Fatalf("a database a newer binary migrated: %v", err)
	}
}
