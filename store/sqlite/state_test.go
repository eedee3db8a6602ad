package sqlite

import (
	"testing"
	"time"

	"plaita/store"
	"plaita/store/storetest"
)

// The execution storage's lease and fencing contract on the console's database (local mode),
// the cases Redis passes (store/contracts_test.go).
func TestStateContractSQLite(t *testing.T) {
	storetest.StateContract(t, storetest.StateBackend{Name: "sqlite", Open: func(t *testing.T, leaseTTL time.Duration) *store.Redis {
		s := store.DefaultSettings()
		s.LeaseTTL = leaseTTL
		return store.NewStore(realClockDB(t).StoreDrivers(), s, "")
	}})
}

// The execution storage contract every backend passes, on the driver: unfenced and through a
// lease.
func TestStatesStorageContract(t *testing.T) {
	t.Parallel()
	s := store.DefaultSettings()
	s.MaxStateBytes = storetest.MaxStateBytes
	open := func(db *DB) *store.TenantStore {
		ts, err := store.NewStore(db.StoreDrivers(), s, "").Tenant("")
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	ts := open(setup(t).DB)
	closed := setup(t)
	down := open(closed.DB)
	closed.Close()
	lease, err := ts.Acquire(ctx(t), "c-sqlite-states-fenced", "conformance")
	if err != nil {
		t.Fatal(err)
	}
	storetest.Contract(t, storetest.Backend{Name: "sqlite-states", Storage: ts, Down: down})
	storetest.Contract(t, storetest.Backend{Name: "sqlite-states-fenced", Storage: lease.Storage(), Down: down})
}

// The wake-up records' contract on the console's database (local mode).
func TestWakeupContractSQLite(t *testing.T) {
	storetest.WakeupContract(t, storetest.WakeupBackend{Name: "sqlite", Open: func(t *testing.T) *store.Redis {
		return store.NewStore(realClockDB(t).StoreDrivers(), store.DefaultSettings(), "")
	}})
}

// The tenant gates' contract on the console's database (local mode).
func TestTenantContractSQLite(t *testing.T) {
	storetest.TenantContract(t, storetest.TenantBackend{Name: "sqlite", Open: func(t *testing.T) *store.Redis {
		return store.NewStore(realClockDB(t).StoreDrivers(), store.DefaultSettings(), "")
	}})
}

// The listings' contract on the console's database (local mode).
func TestListContractSQLite(t *testing.T) {
	storetest.ListContract(t, storetest.ListBackend{Name: "sqlite", Open: func(t *testing.T) *store.Redis {
		return store.NewStore(realClockDB(t).StoreDrivers(), store.DefaultSettings(), "")
	}})
}
