package sqlite

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/storetest"
)

// The published flows' contract on the console's database: local mode's flow store is held to
// the cases Redis passes (store/contracts_test.go), each on a migrated file of its own.
func TestFlowsContractSQLite(t *testing.T) {
	storetest.FlowsContract(t, storetest.FlowsBackend{Name: "sqlite", Open: func(t *testing.T) *store.Flows {
		return store.NewFlows(realClockDB(t).FlowStore(), "")
	}})
}

// A publication interrupted between its two writes (the version stored, not registered) is
// read by Get but listed nowhere, and the next publication of the same definition completes
// it at its own time — as on Redis, where the definition key exists without its flow_versions
// member.
func TestFlowStoreCompletesAnInterruptedPublication(t *testing.T) {
	t.Parallel()
	db := realClockDB(t)
	c := ctx(t)
	fs, fl := db.FlowStore(), store.NewFlows(db.FlowStore(), "")
	def := []byte(`{"id":"order"}`)
	if created, err := fs.Put(c, keys.MustFor("", "acme"), "order", "1", def); err != nil || !created {
		t.Fatalf("put: %v %v", created, err)
	}
	if got, err := fl.Get(c, "acme", "order", "1"); err != nil || !bytes.Equal(got, def) {
		t.Fatalf("get of the stored version: %s %v", got, err)
	}
	if _, err := fl.Latest(c, "acme", "order"); !errors.Is(err, store.ErrFlowNotFound) {
		t.Fatalf("latest of an unregistered version: %v, want ErrFlowNotFound", err)
	}
	if items, err := fl.List(c, "acme", 10); err != nil || len(items) != 0 {
		t.Fatalf("list with an unregistered version: %+v %v", items, err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if r, err := fl.Publish(c, "acme", "order", "1", def, at, func(s []byte) (bool, error) { return bytes.Equal(s, def), nil }); err != nil || r != store.AlreadyPublished {
		t.Fatalf("publish again: %v %v", r, err)
	}
	if vs, err := fl.Versions(c, "acme", "order"); err != nil || len(vs) != 1 || !vs[0].PublishedAt.Equal(at) {
		t.Fatalf("versions once completed: %+v %v", vs, err)
	}
	if items, err := fl.List(c, "acme", 10); err != nil || len(items) != 1 || items[0].Latest != "1" || !items[0].PublishedAt.Equal(at) {
		t.Fatalf("list once completed: %+v %v", items, err)
	}
	// Registering what is not stored is refused (store.Flows never asks it).
	err := fs.Register(c, keys.MustFor("", "acme"), "order", "2", at, false)
	if !errors.Is(err, store.ErrFlowNotFound) || model.ClassOf(err) != model.NotFound {
		t.Fatalf("register of an unstored version: %v, want ErrFlowNotFound", err)
	}
}

// Every failure of the database is ErrDB, transient, through every operation.
func TestFlowStoreFailuresAreTransient(t *testing.T) {
	t.Parallel()
	db := realClockDB(t)
	c := ctx(t)
	fl := store.NewFlows(db.FlowStore(), "")
	db.Close()
	def := []byte(`{}`)
	_, getErr := fl.Get(c, "acme", "f", "1")
	_, latestErr := fl.Latest(c, "acme", "f")
	_, versionsErr := fl.Versions(c, "acme", "f")
	_, pageErr := fl.Page(c, "acme", "", 10)
	_, publishErr := fl.Publish(c, "acme", "f", "1", def, time.Now(), func([]byte) (bool, error) { return true, nil })
	out := fl.Restore(c, []store.FlowRestore{{Tenant: "acme", FlowID: "f", Version: "1", Definition: def, PublishedAt: time.Now()},
		{Tenant: "acme", FlowID: "g", Version: "1", Definition: def, PublishedAt: time.Now()}})
	errs := map[string]error{"get": getErr, "latest": latestErr, "versions": versionsErr, "page": pageErr, "publish": publishErr,
		"restore 0": out[0].Err, "restore 1": out[1].Err}
	for what, err := range errs {
		if !errors.Is(err, ErrDB) || !model.IsTransient(err) {
			t.Errorf("%s on a closed database: %v, want ErrDB, transient", what, err)
		}
	}
	if out[0].Written || out[1].Written {
		t.Errorf("a failed restore says written: %+v", out)
	}
}
