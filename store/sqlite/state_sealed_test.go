package sqlite

import (
	"errors"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/internal/keyring"
	"plaita/store"
	"plaita/store/storetest"
)

// sealedDB is a database whose execution states are sealed under *ring.
func sealedDB(t *testing.T, ring *keyring.Ring) *DB {
	t.Helper()
	fields := keyring.Fields{Keys: func() (keyring.Ring, error) { return *ring, nil }, Purpose: "console-fields"}
	db, err := Open(ctx(t), fileURL(t.TempDir(), "console.db"), WithPasswordParams(cheapPasswords), WithFieldCipher(fields))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// The execution storage contract holds with the states sealed at rest.
func TestStateContractSQLiteSealed(t *testing.T) {
	storetest.StateContract(t, storetest.StateBackend{Name: "sqlite-sealed", Open: func(t *testing.T, leaseTTL time.Duration) *store.Redis {
		s := store.DefaultSettings()
		s.LeaseTTL = leaseTTL
		ring := keyring.Ring{Current: keyring.NewKey()}
		return store.NewStore(sealedDB(t, &ring).StoreDrivers(), s, "")
	}})
}

// A sealed state: its row holds no byte of the input or the context; it reads back whole; a
// row written before the cipher still reads; a ring without the state's key reads nothing and
// a replacement with it writes nothing.
func TestStatesSealedAtRest(t *testing.T) {
	t.Parallel()
	ring := keyring.Ring{Current: keyring.NewKey()}
	db := sealedDB(t, &ring)
	st := store.NewStore(db.StoreDrivers(), store.DefaultSettings(), "")
	ts, err := st.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	ex := &state.Execution{ExecutionID: "ex_sealed", TenantID: "acme", FlowID: "f", FlowVersion: "1", Status: state.Suspended,
		CurrentNode: "n", Input: map[string]any{"card": "4111-1111-SECRET"}, Context: map[string]any{"vars": map[string]any{"pin": "PIN-9876"}},
		StartTime: now, LastUpdate: now, Suspend: &state.Suspend{Kind: state.SuspendApproval, Node: "n", Since: now}}
	if err := ts.Save(ctx(t), ex); err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := db.r.QueryRowContext(ctx(t), `SELECT state FROM exec_states WHERE execution_id = 'ex_sealed'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(raw, "pk1.") || strings.Contains(raw, "SECRET") || strings.Contains(raw, "PIN-9876") {
		t.Fatalf("the row: %.80s", raw)
	}
	got, err := ts.Load(ctx(t), "ex_sealed")
	if err != nil || got.Input.(map[string]any)["card"] != "4111-1111-SECRET" {
		t.Fatalf("load: %+v %v", got, err)
	}
	// A row from before the cipher.
	if _, err := db.w.ExecContext(ctx(t), `INSERT INTO exec_states (tenant, execution_id, state, started_at, expires_at) VALUES ('acme', 'ex_plain', ?, 1, 0)`,
		strings.Replace(raw[:0]+mustEncode(t, ex), "ex_sealed", "ex_plain", 1)); err != nil {
		t.Fatal(err)
	}
	if got, err := ts.Load(ctx(t), "ex_plain"); err != nil || got.ExecutionID != "ex_plain" {
		t.Fatalf("a row from before the cipher: %+v %v", got, err)
	}
	// Another key: nothing opens, nothing is written.
	ring = keyring.Ring{Current: keyring.NewKey()}
	if _, err := ts.Load(ctx(t), "ex_sealed"); !errors.Is(err, keyring.ErrWrongKey) {
		t.Fatalf("load with another key: %v", err)
	}
	snap, err := ts.Snapshot(ctx(t), "ex_sealed")
	if err == nil {
		t.Fatalf("a snapshot with another key: %+v", snap)
	}
	var after string
	if err := db.r.QueryRowContext(ctx(t), `SELECT state FROM exec_states WHERE execution_id = 'ex_sealed'`).Scan(&after); err != nil || after != raw {
		t.Fatalf("the row changed: %v", err)
	}
}

func mustEncode(t *testing.T, ex *state.Execution) string {
	t.Helper()
	b, err := store.Encode(ex)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
