package sqlite

import (
	"testing"

	"plaita/queue"
	"plaita/queue/queuetest"
)

// The task queue's contract on the console's database: the embedded broker of local mode is
// held to the cases Redis passes (queue/contract_test.go).
func TestContractSQLite(t *testing.T) {
	queuetest.Contract(t, queuetest.Backend{Name: "sqlite", Open: func(t *testing.T) queuetest.Stream {
		return queuetest.On(realClockDB(t).Broker(), "plaita")
	}})
}

// The delay queue's contract on the console's database.
func TestDelayContractSQLite(t *testing.T) {
	queuetest.DelayContract(t, queuetest.DelayBackend{Name: "sqlite", Open: func(t *testing.T) (*queue.Delay, queuetest.Stream) {
		db := realClockDB(t)
		d, err := queue.NewDelay(db.Delays(), "plaita:delay:queue")
		if err != nil {
			t.Fatal(err)
		}
		return d, queuetest.On(db.Broker(), "plaita")
	}})
}

// realClockDB is a migrated database file on the wall clock: the contract's claim idle time is
// real time.
func realClockDB(t *testing.T) *DB {
	db, err := Open(ctx(t), fileURL(t.TempDir(), "console.db"), WithPasswordParams(cheapPasswords))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
