package consoletest

import (
	"sync"
	"testing"
	"time"

	"plaita/store"
	"plaita/store/sqlite"
)

// A singleton's lease: one holder at a time, renewed by it, taken over once it ends, handed
// on by a release; of many claims at once, one wins.
func testLeases(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	l, held, err := f.ClaimLease(c, "reconcile", "console-a", time.Minute)
	if err != nil || !held || l.Holder != "console-a" || !l.Until.Equal(f.clock.Now().Add(time.Minute)) {
		t.Fatalf("a free lease: %+v %v %v", l, held, err)
	}
	l, held, err = f.ClaimLease(c, "reconcile", "console-b", time.Minute)
	if err != nil || held || l.Holder != "console-a" {
		t.Fatalf("a held lease claimed by another: %+v %v %v", l, held, err)
	}
	f.clock.Advance(30 * time.Second)
	if l, held := must2[sqlite.Lease, bool](t)(f.ClaimLease(c, "reconcile", "console-a", time.Minute)); !held || !l.Until.Equal(f.clock.Now().Add(time.Minute)) {
		t.Fatalf("a renewal: %+v %v", l, held)
	}
	if _, held := must2[sqlite.Lease, bool](t)(f.ClaimLease(c, "engine-sync", "console-b", time.Minute)); !held {
		t.Fatal("another lease is not held")
	}
	f.clock.Advance(time.Minute) // console-a died: its lease ends
	if l, held := must2[sqlite.Lease, bool](t)(f.ClaimLease(c, "reconcile", "console-b", time.Minute)); !held || l.Holder != "console-b" {
		t.Fatalf("an ended lease: %+v %v", l, held)
	}
	if err := f.ReleaseLease(c, "reconcile", "console-a"); err != nil { // not its holder: nothing
		t.Fatal(err)
	}
	if _, held := must2[sqlite.Lease, bool](t)(f.ClaimLease(c, "reconcile", "console-a", time.Minute)); held {
		t.Fatal("a release by one that does not hold the lease freed it")
	}
	if err := f.ReleaseLease(c, "reconcile", "console-b"); err != nil {
		t.Fatal(err)
	}
	if _, held := must2[sqlite.Lease, bool](t)(f.ClaimLease(c, "reconcile", "console-a", time.Minute)); !held {
		t.Fatal("a released lease is not free")
	}
	_, _, err = f.ClaimLease(c, "reconcile", "", time.Minute)
	wantErr(t, "a claim without a holder", err, store.ErrInvalid, nil)

	// Eight consoles claim a free lease at once: one holds it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := 0
	for i := range 8 {
		wg.Go(func() {
			_, held, err := f.ClaimLease(c, "bulk", "console-"+string(rune('a'+i)), time.Minute)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if held {
				winners++
			}
		})
	}
	wg.Wait()
	if winners != 1 {
		t.Errorf("%d consoles hold one lease", winners)
	}
}

// The login guard's failures: max of them lock the (login, network) pair — the login
// compared as logins are — for the lock's time; old failures start a new count; a success
// forgets the pair, an unlock every network of the login; the ones that hold nothing are pruned.
func testLoginFailures(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	const max, lockFor = 3, 15 * time.Minute
	for i := range max - 1 {
		if until := must[time.Time](t)(f.RecordLoginFailure(c, "Ann", "10.0.0.1", max, lockFor)); !until.IsZero() {
			t.Fatalf("locked after %d failures", i+1)
		}
	}
	f.clock.Advance(lockFor) // the two failures are old now
	if until := must[time.Time](t)(f.RecordLoginFailure(c, "ann", "10.0.0.1", max, lockFor)); !until.IsZero() {
		t.Fatal("old failures counted")
	}
	must[time.Time](t)(f.RecordLoginFailure(c, "ann", "10.0.0.1", max, lockFor))
	until := must[time.Time](t)(f.RecordLoginFailure(c, " ANN ", "10.0.0.1", max, lockFor))
	if !until.Equal(f.clock.Now().Add(lockFor)) {
		t.Fatalf("the third failure locks until %s", until)
	}
	if got := must[time.Time](t)(f.LoginLockedUntil(c, "ann", "10.0.0.1")); !got.Equal(until) {
		t.Errorf("locked until %s, want %s", got, until)
	}
	if got := must[time.Time](t)(f.LoginLockedUntil(c, "ann", "10.0.0.2")); !got.IsZero() {
		t.Errorf("another network is locked until %s", got)
	}
	must[time.Time](t)(f.RecordLoginFailure(c, "ann", "10.0.0.2", max, lockFor))
	must[time.Time](t)(f.RecordLoginFailure(c, "bob", "10.0.0.2", max, lockFor))
	if err := f.ClearLoginFailures(c, "ANN", ""); err != nil {
		t.Fatal(err)
	}
	if got := must[time.Time](t)(f.LoginLockedUntil(c, "ann", "10.0.0.1")); !got.IsZero() {
		t.Errorf("unlocked, still locked until %s", got)
	}
	f.clock.Advance(time.Hour)
	if n := must[int64](t)(f.PruneLoginFailures(c, f.clock.Now().Add(-lockFor))); n != 1 {
		t.Errorf("pruned %d, want bob's", n)
	}
	if n := f.count("login_failures"); n != 0 {
		t.Errorf("%d pairs left", n)
	}
	_, err := f.RecordLoginFailure(c, "ann", "x", 0, lockFor)
	wantErr(t, "a limit of 0", err, store.ErrInvalid, nil)
}
