package sqlite

import (
	"testing"

	"plaita/store"
	"plaita/store/storetest"
)

// The credentials' contract on the console's database: local mode's credentials are held to
// the cases Redis passes (store/contracts_test.go), each on a migrated file of its own.
func TestCredentialsContractSQLite(t *testing.T) {
	storetest.CredentialsContract(t, storetest.CredentialsBackend{Name: "sqlite", Open: func(t *testing.T) *store.Credentials {
		return store.NewCredentials(realClockDB(t).Credentials(), "")
	}})
}
