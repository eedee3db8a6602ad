package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"plaita/store/sqlite"
	"plaita/store/sqlite/consoletest"
)

// The console store's contract on SQLite: a database file per case (store/postgres runs the
// same suite on PostgreSQL).
func TestConsoleContractSQLite(t *testing.T) {
	t.Parallel()
	consoletest.Run(t, func(t testing.TB, opt ...sqlite.Option) *sqlite.DB {
		db, err := sqlite.Open(context.Background(), "sqlite:///"+filepath.Join(t.TempDir(), "console.db"), opt...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}
