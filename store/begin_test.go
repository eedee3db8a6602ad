package store_test

import (
	"errors"
	"testing"

	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

// Begin takes the lease and reads, in the same round trip, the state, the tombstone, the
// cancel flag and the deterministic-failure count; the lease's storage serves its first Load
// from that read, reads the cancel flag with every save, and a terminal save can delete the
// lease with the write.
func TestBeginReadsWhatARunNeeds(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)

	b, err := f.ts.Begin(c, "b1", "w1", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.State != nil || b.Tombstoned || b.Cancelled || b.NoFail != 0 || b.Lease.Generation() != 1 {
		t.Fatalf("fresh start: %+v", b)
	}
	storage := b.Lease.Storage()
	if _, err := storage.Load(c, "b1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("first load of a fresh start: %v", err)
	}
	st := newState("b1", state.Running)
	if err := storage.Save(c, st); err != nil {
		t.Fatal(err)
	}
	if got, err := storage.Load(c, "b1"); err != nil || got.Status != state.Running {
		t.Fatalf("second load reads Redis: %+v %v", got, err)
	}
	// Another holder meets the lease.
	if _, err := f.ts.Begin(c, "b1", "w2", false, nil); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("held: %v", err)
	}
	// The cancel flag raised during a step is read by the next save.
	fs := b.Lease.Storage()
	if set, _ := fs.Cancelled(c, "b1"); set {
		t.Fatal("cancelled before the flag")
	}
	if err := f.ts.SetCancel(c, "b1"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Save(c, st); err != nil {
		t.Fatal(err)
	}
	if set, _ := fs.Cancelled(c, "b1"); !set {
		t.Fatal("the save did not read the cancel flag")
	}
	// A terminal save with ReleaseOnTerminal deletes the lease in the same script.
	b.Lease.ReleaseOnTerminal = true
	if err := fs.Save(c, newState("b1", state.Completed)); err != nil {
		t.Fatal(err)
	}
	if f.exists(f.mech(keys.FamLease, "b1")) {
		t.Fatal("the terminal save left the lease")
	}
	if err := b.Lease.Release(c); err != nil {
		t.Fatalf("release after the final save: %v", err)
	}

	// An existing state, its cancel flag and failure count come back with the lease.
	f.do(f.c.B().Set().Key(f.mech(keys.FamNoFail, "b1")).Value("3").Build())
	b2, err := f.ts.Begin(c, "b1", "w2", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b2.State == nil || b2.State.Status != state.Completed || !b2.Cancelled || b2.NoFail != 3 || b2.Lease.Generation() != 2 {
		t.Fatalf("existing: %+v", b2)
	}
	if got, err := b2.Lease.Storage().Load(c, "b1"); err != nil || got.Status != state.Completed {
		t.Fatalf("preloaded load: %+v %v", got, err)
	}
	// A leftover lease of the same holder is taken over when asked, never otherwise.
	if _, err := f.ts.Begin(c, "b1", "w2", false, nil); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("own leftover without takeover: %v", err)
	}
	b3, err := f.ts.Begin(c, "b1", "w2", true, nil)
	if err != nil || !b3.Lease.TookOver() || b3.Lease.Generation() != 3 {
		t.Fatalf("takeover: %+v %v", b3, err)
	}
	if err := b2.Lease.Storage().Save(c, newState("b1", state.Running)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the earlier life still writes: %v", err)
	}
	// A deleted execution says so.
	if err := f.ts.Delete(c, "b1"); err != nil {
		t.Fatal(err)
	}
	b4, err := f.ts.Begin(c, "b1", "w9", false, newState("b1", state.Running))
	if err != nil || !b4.Tombstoned || b4.State != nil {
		t.Fatalf("deleted: %+v %v", b4, err)
	}
	if f.exists(f.key("b1")) {
		t.Fatal("a deleted execution was recreated by a start")
	}
	// A start's new state is written and indexed in Begin, visible while its first step runs.
	fresh := newState("b2", state.Running)
	b5, err := f.ts.Begin(c, "b2", "w1", false, fresh)
	if err != nil || b5.State != fresh {
		t.Fatalf("fresh start: %+v %v", b5, err)
	}
	if got, err := f.ts.Load(c, "b2"); err != nil || got.Status != state.Running {
		t.Fatalf("the new state is not stored: %+v %v", got, err)
	}
	if _, ok := f.indexScore("b2"); !ok {
		t.Fatal("the new state is not indexed")
	}
	if got, err := b5.Lease.Storage().Load(c, "b2"); err != nil || got != fresh {
		t.Fatalf("the first load is not the new state: %+v %v", got, err)
	}
	// A redelivered start meets the state its first delivery wrote.
	f.do(f.c.B().Del().Key(f.mech(keys.FamLease, "b2")).Build())
	b6, err := f.ts.Begin(c, "b2", "w1", false, newState("b2", state.Running))
	if err != nil || b6.State == nil || b6.State == fresh || !b6.State.StartTime.Equal(fresh.StartTime) {
		t.Fatalf("redelivered start: %+v %v", b6, err)
	}
}
