package postgres

import (
	"context"
	"testing"

	"plaita/store/sqlite"
	"plaita/store/sqlite/consoletest"
)

// The console store's contract on PostgreSQL: a database per case on the test server, dropped
// after it (store/sqlite runs the same suite on SQLite).
func TestConsoleContractPostgres(t *testing.T) {
	t.Parallel()
	consoletest.Run(t, func(t testing.TB, opt ...sqlite.Option) *sqlite.DB {
		db, err := Open(context.Background(), newDatabase(t), opt...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}
