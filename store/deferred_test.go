package store_test

import (
	"errors"
	"testing"

	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

// A deferred lease's first save takes the lease, moves the fence generation, writes and
// indexes the state in one script; later saves are ordinary fenced saves; the terminal one
// releases the lease.
func TestDeferredLeaseIsTakenByTheFirstSave(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	l, err := f.ts.Deferred("d1", "worker-a")
	if err != nil || l == nil {
		t.Fatalf("deferred: %v %v", l, err)
	}
	if _, err := l.Storage().Load(c, "d1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("first load of a fresh start: %v", err)
	}
	if f.exists(f.mech(keys.FamLease, "d1")) {
		t.Fatal("the lease is held before any save")
	}
	if err := l.Renew(c); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renew before the first save: %v", err)
	}
	l.ReleaseOnTerminal = true
	st := newState("d1", state.Running)
	if err := l.Storage().Save(c, st); err != nil {
		t.Fatal(err)
	}
	if l.Deferred() || l.Generation() != 1 {
		t.Fatalf("after the first save: deferred %v, generation %d", l.Deferred(), l.Generation())
	}
	if v, _ := f.get(f.mech(keys.FamLease, "d1")); v == "" {
		t.Fatal("the first save did not take the lease")
	}
	if s, ok := f.indexScore("d1"); !ok || s != float64(st.StartTime.UnixMilli()) {
		t.Fatalf("not indexed: %v %v", s, ok)
	}
	if err := l.Renew(c); err != nil {
		t.Fatalf("renew after the first save: %v", err)
	}
	st.Status = state.Completed
	if err := l.Storage().Save(c, st); err != nil {
		t.Fatal(err)
	}
	if f.exists(f.mech(keys.FamLease, "d1")) {
		t.Fatal("the terminal save left the lease")
	}
	got, err := f.ts.Load(c, "d1")
	if err != nil || got.Status != state.Completed {
		t.Fatalf("stored: %v %v", got, err)
	}
}

// What makes a start not fresh is found by the first save in the same step: it writes nothing,
// leaves the fence generation alone and the lease free, and says ErrNotFresh. Another holder's
// lease is a *LeaseHeldError; a leftover lease of the same holder is taken over.
func TestDeferredFirstSaveRefusesWhatIsNotFresh(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	// An existing state.
	if err := f.ts.Save(c, newState("have", state.Completed)); err != nil {
		t.Fatal(err)
	}
	// A tombstone.
	if err := f.ts.Save(c, newState("gone", state.Completed)); err != nil {
		t.Fatal(err)
	}
	if err := f.ts.Delete(c, "gone"); err != nil {
		t.Fatal(err)
	}
	// A cancel flag raised before the start ran.
	if err := f.ts.SetCancel(c, "cancel"); err != nil {
		t.Fatal(err)
	}
	// Counted crashes.
	if _, err := f.ts.Incr(c, keys.FamNoFail, "crashed"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"have", "gone", "cancel", "crashed"} {
		gen0, _ := f.get(f.mech(keys.FamFenceGen, id))
		before, _ := f.get(f.key(id))
		l, err := f.ts.Deferred(id, "worker-a")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Storage().Save(c, newState(id, state.Running)); !errors.Is(err, store.ErrNotFresh) {
			t.Fatalf("%s: first save: %v, want ErrNotFresh", id, err)
		}
		if after, _ := f.get(f.key(id)); after != before {
			t.Errorf("%s: the state changed", id)
		}
		if gen1, _ := f.get(f.mech(keys.FamFenceGen, id)); gen1 != gen0 {
			t.Errorf("%s: fence generation %q → %q", id, gen0, gen1)
		}
		if f.exists(f.mech(keys.FamLease, id)) {
			t.Errorf("%s: the lease is left held", id)
		}
		if !l.Deferred() {
			t.Errorf("%s: the lease counts as taken", id)
		}
	}
	// Another holder's lease.
	other := f.acquire("busy", "worker-b")
	l, _ := f.ts.Deferred("busy", "worker-a")
	var held *store.LeaseHeldError
	if err := l.Storage().Save(c, newState("busy", state.Running)); !errors.As(err, &held) || held.Holder != "worker-b" {
		t.Fatalf("held by another: %v", err)
	}
	if err := other.Release(c); err != nil {
		t.Fatal(err)
	}
	// A leftover lease of the same holder (an earlier life) is taken over and fenced out.
	old := f.acquire("mine", "worker-a")
	l, _ = f.ts.Deferred("mine", "worker-a")
	if err := l.Storage().Save(c, newState("mine", state.Running)); err != nil {
		t.Fatalf("own leftover: %v", err)
	}
	if !l.TookOver() || l.Generation() <= old.Generation() {
		t.Fatalf("took over %v, generation %d after %d", l.TookOver(), l.Generation(), old.Generation())
	}
	if err := old.Storage().Save(c, newState("mine", state.Completed)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the earlier life's save: %v", err)
	}
}

// With fencing off there is no deferred lease: the caller begins the ordinary way.
func TestNoDeferredLeaseWithoutFencing(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{"PLAITA_DISABLE_FENCING": "1"})
	if l, err := f.ts.Deferred("x", "worker-a"); l != nil || err != nil {
		t.Fatalf("deferred without fencing: %v %v", l, err)
	}
}
