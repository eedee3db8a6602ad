package storetest

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

// StateBackend is one StateDriver under the contract.
type StateBackend struct {
	Name string
	// Open makes a new, empty storage for one case (cases run in parallel) with the lease TTL
	// given.
	Open func(t *testing.T, leaseTTL time.Duration) *store.Redis
}

// StateContract runs the execution storage's lease and fencing cases against b: what a worker
// relies on to never run a terminal write twice — one holder at a time, a taken-over or deleted
// execution refusing the old holder's writes, a tombstone that keeps a deleted execution from
// coming back, the cancel flag read with the run's steps, the counters, and a deferred first
// save that only ever creates.
func StateContract(t *testing.T, b StateBackend) {
	cases := []struct {
		name string
		run  func(t *testing.T, b StateBackend)
	}{
		{"BeginTakesTheLeaseOnce", beginTakesTheLeaseOnce},
		{"TakeoverFencesTheOldHolder", takeoverFencesTheOldHolder},
		{"DeleteFencesAndTombstones", deleteFencesAndTombstones},
		{"CancelFlagReadWithTheSteps", cancelFlagReadWithTheSteps},
		{"CountersCountAndReset", countersCountAndReset},
		{"DeferredFirstSaveOnlyCreates", deferredFirstSaveOnlyCreates},
		{"RenewAndReleaseOnlyOurs", renewAndReleaseOnlyOurs},
		{"TerminalSaveReleases", terminalSaveReleases},
		{"ReplaceWhatWasRead", replaceWhatWasRead},
	}
	for _, c := range cases {
		t.Run(b.Name+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, b)
		})
	}
}

func tenantOf(t *testing.T, r *store.Redis) *store.TenantStore {
	ts, err := r.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func newID() string { return "ex_" + strings.ToLower(rand.Text()) }

func fresh(id string) *state.Execution {
	st := NewState(id, state.Running)
	st.StartTime = time.Now().UTC().Truncate(time.Millisecond)
	return st
}

func beginTakesTheLeaseOnce(t *testing.T, b StateBackend) {
	ts := tenantOf(t, b.Open(t, time.Minute))
	id := newID()
	begun, err := ts.Begin(eventsCtx(t), id, "w1", false, fresh(id))
	if err != nil || begun.State == nil || begun.Tombstoned || begun.Cancelled {
		t.Fatalf("first begin: %+v %v", begun, err)
	}
	// Its first load is what Begin wrote; a plain load reads the same.
	if st, err := begun.Lease.Storage().Load(eventsCtx(t), id); err != nil || st.ExecutionID != id {
		t.Fatalf("lease load: %+v %v", st, err)
	}
	if st, err := ts.Load(eventsCtx(t), id); err != nil || st.Status != state.Running {
		t.Fatalf("load: %+v %v", st, err)
	}
	_, err = ts.Begin(eventsCtx(t), id, "w2", false, nil)
	var held *store.LeaseHeldError
	if !errors.As(err, &held) || held.Holder != "w1" {
		t.Fatalf("second holder: %v, want a LeaseHeldError naming w1", err)
	}
	// The holder itself, restarted (nothing in its process runs the execution), takes over.
	again, err := ts.AcquireOwn(eventsCtx(t), id, "w1")
	if err != nil || !again.TookOver() || again.Generation() <= begun.Lease.Generation() {
		t.Fatalf("takeover of our own leftover: %+v %v", again, err)
	}
	// A begin with a fresh state of an execution that exists reads it and writes nothing.
	if err := again.Release(eventsCtx(t)); err != nil {
		t.Fatal(err)
	}
	other := fresh(id)
	other.Status = state.Error
	b2, err := ts.Begin(eventsCtx(t), id, "w2", false, other)
	if err != nil || b2.State == nil || b2.State.Status != state.Running {
		t.Fatalf("begin over an existing state: %+v %v", b2, err)
	}
}

func takeoverFencesTheOldHolder(t *testing.T, b StateBackend) {
	ts := tenantOf(t, b.Open(t, time.Minute))
	id := newID()
	old, err := ts.Begin(eventsCtx(t), id, "w1", false, fresh(id))
	if err != nil {
		t.Fatal(err)
	}
	st := fresh(id)
	st.CurrentNode = "a"
	if err := old.Lease.Storage().Save(eventsCtx(t), st); err != nil {
		t.Fatalf("holder's save: %v", err)
	}
	// w1's lease goes (as when its TTL ran out while w1 was stalled): w2 takes it, and the fence
	// generation moves on.
	if err := old.Lease.Release(eventsCtx(t)); err != nil {
		t.Fatal(err)
	}
	cur, err := ts.Acquire(eventsCtx(t), id, "w2")
	if err != nil || cur.Generation() <= old.Lease.Generation() {
		t.Fatalf("w2's lease: %+v %v", cur, err)
	}
	late := fresh(id)
	late.CurrentNode = "late"
	if err := old.Lease.Storage().Save(eventsCtx(t), late); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the old holder's late save: %v, want ErrLeaseLost", err)
	}
	if err := old.Lease.Storage().Delete(eventsCtx(t), id); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the old holder's late delete: %v, want ErrLeaseLost", err)
	}
	got, err := ts.Load(eventsCtx(t), id)
	if err != nil || got.CurrentNode != "a" {
		t.Fatalf("after the refused writes: %+v %v", got, err)
	}
	st.CurrentNode = "b"
	if err := cur.Storage().Save(eventsCtx(t), st); err != nil {
		t.Fatalf("the new holder's save: %v", err)
	}
}

func deleteFencesAndTombstones(t *testing.T, b StateBackend) {
	ts := tenantOf(t, b.Open(t, time.Minute))
	id := newID()
	begun, err := ts.Begin(eventsCtx(t), id, "w1", false, fresh(id))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Incr(eventsCtx(t), keys.FamNoFail, id); err != nil {
		t.Fatal(err)
	}
	if err := ts.Delete(eventsCtx(t), id); err != nil { // an operator's delete
		t.Fatal(err)
	}
	if _, err := ts.Load(eventsCtx(t), id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load after delete: %v", err)
	}
	if tomb, err := ts.Tombstoned(eventsCtx(t), id); err != nil || !tomb {
		t.Fatalf("tombstone: %v %v", tomb, err)
	}
	if n, err := ts.Counter(eventsCtx(t), keys.FamNoFail, id); err != nil || n != 0 {
		t.Fatalf("counter after delete: %d %v", n, err)
	}
	// The worker that held it cannot write it back.
	if err := begun.Lease.Storage().Save(eventsCtx(t), fresh(id)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("save after delete: %v, want ErrLeaseLost", err)
	}
	// A late start of it sees the tombstone and creates nothing.
	again, err := ts.Begin(eventsCtx(t), id, "w2", false, fresh(id))
	if err != nil || !again.Tombstoned || again.State != nil {
		t.Fatalf("begin after delete: %+v %v", again, err)
	}
	if _, err := ts.Load(eventsCtx(t), id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted execution came back: %v", err)
	}
	// A fenced delete by the current holder works, by an old one does not.
	id2 := newID()
	first, err := ts.Begin(eventsCtx(t), id2, "w1", false, fresh(id2))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Lease.Release(eventsCtx(t)); err != nil {
		t.Fatal(err)
	}
	second, err := ts.Acquire(eventsCtx(t), id2, "w2")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Lease.Storage().Delete(eventsCtx(t), id2); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("old holder's delete: %v", err)
	}
	if err := second.Storage().Delete(eventsCtx(t), id2); err != nil {
		t.Fatalf("holder's delete: %v", err)
	}
	if _, err := ts.Load(eventsCtx(t), id2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after the holder's delete: %v", err)
	}
}

func cancelFlagReadWithTheSteps(t *testing.T, b StateBackend) {
	ts := tenantOf(t, b.Open(t, time.Minute))
	id := newID()
	begun, err := ts.Begin(eventsCtx(t), id, "w1", false, fresh(id))
	if err != nil {
		t.Fatal(err)
	}
	fs := begun.Lease.Storage()
	if c, err := fs.Cancelled(eventsCtx(t), id); err != nil || c {
		t.Fatalf("cancelled before the flag: %v %v", c, err)
	}
	if err := ts.SetCancel(eventsCtx(t), id); err != nil {
		t.Fatal(err)
	}
	// The flag is read with the next save, not before it (it costs no round trip of its own).
	if err := fs.Save(eventsCtx(t), fresh(id)); err != nil {
		t.Fatal(err)
	}
	if c, err := fs.Cancelled(eventsCtx(t), id); err != nil || !c {
		t.Fatalf("cancelled after the save that read the flag: %v %v", c, err)
	}
	if c, err := ts.Cancelled(eventsCtx(t), id); err != nil || !c {
		t.Fatalf("flag: %v %v", c, err)
	}
	if err := begun.Lease.Release(eventsCtx(t)); err != nil {
		t.Fatal(err)
	}
	if b2, err := ts.Begin(eventsCtx(t), id, "w2", false, nil); err != nil || !b2.Cancelled {
		t.Fatalf("begin with the flag raised: %+v %v", b2, err)
	}
	if err := ts.ClearCancel(eventsCtx(t), id); err != nil {
		t.Fatal(err)
	}
	if c, err := ts.Cancelled(eventsCtx(t), id); err != nil || c {
		t.Fatalf("flag after clear: %v %v", c, err)
	}
}

func countersCountAndReset(t *testing.T, b StateBackend) {
	ts := tenantOf(t, b.Open(t, time.Minute))
	id := newID()
	for want := int64(1); want <= 3; want++ {
		if n, err := ts.Incr(eventsCtx(t), keys.FamG1Wakeups, id); err != nil || n != want {
			t.Fatalf("incr: %d %v, want %d", n, err, want)
		}
	}
	for _, node := range []string{"a", "a", "b"} {
		if _, err := ts.IncrNodeRetry(eventsCtx(t), id, node); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := ts.NodeRetry(eventsCtx(t), id, "a"); err != nil || n != 2 {
		t.Fatalf("node a: %d %v", n, err)
	}
	all, err := ts.NodeRetries(eventsCtx(t), id)
	if err != nil || len(all) != 2 || all["a"] != 2 || all["b"] != 1 {
		t.Fatalf("node retries: %v %v", all, err)
	}
	if budget, err := ts.RetryBudget(eventsCtx(t), id); err != nil || budget.G1Wakeups != 3 || budget.NoFail != 0 {
		t.Fatalf("budget: %+v %v", budget, err)
	}
	if err := ts.ResetCounter(eventsCtx(t), keys.FamG1Wakeups, id); err != nil {
		t.Fatal(err)
	}
	if err := ts.ResetNodeRetry(eventsCtx(t), id, "a"); err != nil {
		t.Fatal(err)
	}
	if n, err := ts.Counter(eventsCtx(t), keys.FamG1Wakeups, id); err != nil || n != 0 {
		t.Fatalf("after reset: %d %v", n, err)
	}
	if all, err := ts.NodeRetries(eventsCtx(t), id); err != nil || len(all) != 1 || all["b"] != 1 {
		t.Fatalf("node retries after a reset: %v %v", all, err)
	}
	if _, err := ts.Incr(eventsCtx(t), "not-a-family", id); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("unknown family: %v", err)
	}
}

func deferredFirstSaveOnlyCreates(t *testing.T, b StateBackend) {
	ts := tenantOf(t, b.Open(t, time.Minute))
	id := newID()
	l, err := ts.Deferred(id, "w1")
	if err != nil || l == nil || !l.Deferred() {
		t.Fatalf("deferred lease: %+v %v", l, err)
	}
	if err := l.Storage().Save(eventsCtx(t), fresh(id)); err != nil {
		t.Fatalf("first save: %v", err)
	}
	if l.Deferred() || l.Generation() < 1 {
		t.Fatalf("after its first save the lease is taken: deferred %v, generation %d", l.Deferred(), l.Generation())
	}
	if _, err := ts.Acquire(eventsCtx(t), id, "w2"); err == nil {
		t.Fatal("the lease the first save took is free")
	}
	if err := l.Release(eventsCtx(t)); err != nil {
		t.Fatal(err)
	}
	// A second fresh start of the same execution finds it there and writes nothing.
	again, err := ts.Deferred(id, "w2")
	if err != nil {
		t.Fatal(err)
	}
	other := fresh(id)
	other.Status = state.Error
	if err := again.Storage().Save(eventsCtx(t), other); !errors.Is(err, store.ErrNotFresh) {
		t.Fatalf("deferred save over an existing execution: %v, want ErrNotFresh", err)
	}
	if st, err := ts.Load(eventsCtx(t), id); err != nil || st.Status != state.Running {
		t.Fatalf("after the refused save: %+v %v", st, err)
	}
	if l2, err := ts.Acquire(eventsCtx(t), id, "w3"); err != nil {
		t.Fatalf("the refused save left the lease taken: %v", err)
	} else if err := l2.Release(eventsCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func renewAndReleaseOnlyOurs(t *testing.T, b StateBackend) {
	ts := tenantOf(t, b.Open(t, time.Minute))
	id := newID()
	l, err := ts.Acquire(eventsCtx(t), id, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(eventsCtx(t)); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if err := l.Release(eventsCtx(t)); err != nil {
		t.Fatal(err)
	}
	l2, err := ts.Acquire(eventsCtx(t), id, "w2")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(eventsCtx(t)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renew of a lease another holder has: %v", err)
	}
	if err := l.Release(eventsCtx(t)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("release of a lease another holder has: %v, want ErrLeaseLost", err)
	}
	if _, err := ts.Acquire(eventsCtx(t), id, "w3"); err == nil {
		t.Fatal("the old holder's release freed another holder's lease")
	}
	if err := l2.Release(eventsCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func terminalSaveReleases(t *testing.T, b StateBackend) {
	ts := tenantOf(t, b.Open(t, time.Minute))
	id := newID()
	begun, err := ts.Begin(eventsCtx(t), id, "w1", false, fresh(id))
	if err != nil {
		t.Fatal(err)
	}
	begun.Lease.ReleaseOnTerminal = true
	done := fresh(id)
	done.Status = state.Completed
	end := time.Now().UTC()
	done.EndTime = &end
	if err := begun.Lease.Storage().Save(eventsCtx(t), done); err != nil {
		t.Fatal(err)
	}
	if st, err := ts.Load(eventsCtx(t), id); err != nil || st.Status != state.Completed {
		t.Fatalf("terminal state: %+v %v", st, err)
	}
	next, err := ts.Acquire(eventsCtx(t), id, "w2")
	if err != nil {
		t.Fatalf("the terminal save kept the lease: %v", err)
	}
	if err := next.Release(eventsCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func replaceWhatWasRead(t *testing.T, b StateBackend) {
	ts := tenantOf(t, b.Open(t, time.Minute))
	id := newID()
	begun, err := ts.Begin(eventsCtx(t), id, "w1", false, fresh(id))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := ts.Snapshot(eventsCtx(t), id)
	if err != nil || !snap.Leased || snap.State.ExecutionID != id {
		t.Fatalf("snapshot of a leased execution: %+v %v", snap, err)
	}
	ended := fresh(id)
	ended.Status = state.Error
	// The reaper leaves an execution a live worker holds alone.
	if err := ts.ReplaceUnleased(eventsCtx(t), snap.Raw, ended); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("replace under a lease: %v, want ErrLeaseHeld", err)
	}
	// What was read changed meanwhile: nothing is written.
	moved := fresh(id)
	moved.CurrentNode = "moved"
	if err := begun.Lease.Storage().Save(eventsCtx(t), moved); err != nil {
		t.Fatal(err)
	}
	if err := begun.Lease.Release(eventsCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := ts.ReplaceUnleased(eventsCtx(t), snap.Raw, ended); !errors.Is(err, store.ErrStateChanged) {
		t.Fatalf("replace of bytes that changed: %v, want ErrStateChanged", err)
	}
	snap, err = ts.Snapshot(eventsCtx(t), id)
	if err != nil || snap.Leased {
		t.Fatalf("snapshot after the release: %+v %v", snap, err)
	}
	if err := ts.ReplaceUnleased(eventsCtx(t), snap.Raw, ended); err != nil {
		t.Fatalf("replace of an unleased state as read: %v", err)
	}
	if st, err := ts.Load(eventsCtx(t), id); err != nil || st.Status != state.Error {
		t.Fatalf("after the replace: %+v %v", st, err)
	}
	// A replacement that fences: the holder's lease goes, and its late writes are refused.
	held, err := ts.Acquire(eventsCtx(t), id, "w2")
	if err != nil {
		t.Fatal(err)
	}
	snap, err = ts.Snapshot(eventsCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.ReplaceCorrupt(eventsCtx(t), snap.Raw, fresh(id)); err != nil {
		t.Fatalf("fencing replace: %v", err)
	}
	if err := held.Storage().Save(eventsCtx(t), ended); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the fenced-out holder's save: %v, want ErrLeaseLost", err)
	}
	if l, err := ts.Acquire(eventsCtx(t), id, "w3"); err != nil {
		t.Fatalf("the lease is free after a fencing replace: %v", err)
	} else if err := l.Release(eventsCtx(t)); err != nil {
		t.Fatal(err)
	}
}
