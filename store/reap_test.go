package store_test

import (
	"errors"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

// The reap's write loses to a step written after its read, and to a lease taken after it; it
// moves the fence generation when it wins.
func TestReplaceUnleasedLosesToAWriteOrALeaseAfterTheRead(t *testing.T) {
	f := setup(t, nil)
	c := ctx(t)
	st := newState("z1", state.Running)
	if err := f.ts.Save(c, st); err != nil {
		t.Fatal(err)
	}
	snap, err := f.ts.Snapshot(c, "z1")
	if err != nil || snap.Leased || snap.State.Status != state.Running {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	ended := *snap.State
	ended.Status = state.Error

	// A worker writes a step between the read and the reap's write: the reap loses.
	step := *snap.State
	step.StepCount++
	step.LastUpdate = step.LastUpdate.Add(time.Second)
	if err := f.ts.Save(c, &step); err != nil {
		t.Fatal(err)
	}
	if err := f.ts.ReplaceUnleased(c, snap.Raw, &ended); !errors.Is(err, store.ErrStateChanged) {
		t.Fatalf("over a newer step: %v", err)
	}
	if got, _ := f.ts.Load(c, "z1"); got.Status != state.Running || got.StepCount != step.StepCount {
		t.Fatalf("the step was overwritten: %+v", got)
	}

	// A lease taken after the read: the reap loses.
	snap, _ = f.ts.Snapshot(c, "z1")
	lease, err := f.ts.Acquire(c, "z1", "worker-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ts.ReplaceUnleased(c, snap.Raw, &ended); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("under a lease: %v", err)
	}
	if again, err := f.ts.Snapshot(c, "z1"); err != nil || !again.Leased {
		t.Fatalf("snapshot under a lease: %+v %v", again, err)
	}
	if err := lease.Release(c); err != nil {
		t.Fatal(err)
	}

	// Nothing in between: the reap writes and fences out earlier leases.
	gen, _ := keys.MustFor(f.root, "").Mechanism(keys.FamFenceGen, "z1")
	g0, _ := f.c.Do(c, f.c.B().Get().Key(gen).Build()).AsInt64()
	snap, _ = f.ts.Snapshot(c, "z1")
	if err := f.ts.ReplaceUnleased(c, snap.Raw, &ended); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.ts.Load(c, "z1"); got.Status != state.Error {
		t.Fatalf("after the reap: %+v", got)
	}
	if g1, _ := f.c.Do(c, f.c.B().Get().Key(gen).Build()).AsInt64(); g1 != g0+1 {
		t.Fatalf("fence generation %d → %d", g0, g1)
	}
}
