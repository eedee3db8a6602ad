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

// A run that ends in its first save (a start that completes without calling out) writes its
// state and index without taking the lease or starting a fence generation: nothing is left to
// fence, and the next lease starts the generations. Anything of an earlier holder — a fence
// generation, a leftover lease, another's lease — takes the general path, which fences it out.
func TestDeferredTerminalFirstSave(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	terminal := func(id, holder string) (*store.Lease, *state.Execution, error) {
		l, err := f.ts.Deferred(id, holder)
		if err != nil {
			t.Fatal(err)
		}
		l.ReleaseOnTerminal = true
		st := newState(id, state.Completed)
		return l, st, l.Storage().Save(c, st)
	}

	// Fresh: written and indexed; no lease, no fence generation.
	_, st, err := terminal("t1", "worker-a")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.ts.Load(c, "t1"); err != nil || got.Status != state.Completed {
		t.Fatalf("stored: %v %v", got, err)
	}
	if s, ok := f.indexScore("t1"); !ok || s != float64(st.StartTime.UnixMilli()) {
		t.Fatalf("not indexed: %v %v", s, ok)
	}
	if f.exists(f.mech(keys.FamLease, "t1")) || f.exists(f.mech(keys.FamFenceGen, "t1")) {
		t.Fatal("a terminal first save left a lease or a fence generation")
	}
	// The next lease (an operator's delete, a redelivered start) starts the generations, and
	// fences as ever.
	a := f.acquire("t1", "worker-b")
	if a.Generation() != 1 {
		t.Fatalf("first generation after a terminal first save: %d", a.Generation())
	}
	if err := a.Release(c); err != nil {
		t.Fatal(err)
	}
	if b := f.acquire("t1", "worker-c"); b.Generation() != 2 {
		t.Fatalf("second generation: %d", b.Generation())
	}
	if err := a.Storage().Save(c, newState("t1", state.Running)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a fenced-out holder saved: %v", err)
	}

	// Not fresh: the same refusals as any first save, nothing written.
	if err := f.ts.Save(c, newState("have", state.Running)); err != nil {
		t.Fatal(err)
	}
	if err := f.ts.SetCancel(c, "cancel"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"have", "cancel"} {
		before, _ := f.get(f.key(id))
		if _, _, err := terminal(id, "worker-a"); !errors.Is(err, store.ErrNotFresh) {
			t.Fatalf("%s: %v, want ErrNotFresh", id, err)
		}
		if after, _ := f.get(f.key(id)); after != before {
			t.Errorf("%s: the state changed", id)
		}
	}

	// An earlier holder that let go without writing still holds a generation: the save bumps
	// it, and that holder's late write is refused.
	early := f.acquire("early", "worker-b")
	if err := early.Release(c); err != nil {
		t.Fatal(err)
	}
	if _, _, err := terminal("early", "worker-a"); err != nil {
		t.Fatal(err)
	}
	if err := early.Storage().Save(c, newState("early", state.Running)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the earlier holder's late save: %v", err)
	}
	if got, _ := f.ts.Load(c, "early"); got == nil || got.Status != state.Completed {
		t.Fatalf("the terminal state was overwritten: %+v", got)
	}

	// Another holder's lease: refused.
	f.acquire("busy", "worker-b")
	var held *store.LeaseHeldError
	if _, _, err := terminal("busy", "worker-a"); !errors.As(err, &held) || held.Holder != "worker-b" {
		t.Fatalf("held by another: %v", err)
	}

	// A leftover lease of our own earlier life: taken over, released with the save, and the
	// earlier life fenced out.
	old := f.acquire("mine", "worker-a")
	l, _, err := terminal("mine", "worker-a")
	if err != nil {
		t.Fatalf("own leftover: %v", err)
	}
	if !l.TookOver() || l.Generation() <= old.Generation() || f.exists(f.mech(keys.FamLease, "mine")) {
		t.Fatalf("took over %v, generation %d after %d, lease left %v", l.TookOver(), l.Generation(), old.Generation(), f.exists(f.mech(keys.FamLease, "mine")))
	}
	if err := old.Storage().Save(c, newState("mine", state.Running)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the earlier life's save: %v", err)
	}
}
