package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/model"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

func TestLeaseHeldRenewRelease(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{"PLAITA_LEASE_TTL_SECONDS": "60"})
	c := ctx(t)
	a := f.acquire("e1", "worker-a")
	if a.Generation() != 1 || a.TTL() != time.Minute || a.Holder() != "worker-a" || a.ExecutionID() != "e1" {
		t.Fatalf("lease %d %v %s %s", a.Generation(), a.TTL(), a.Holder(), a.ExecutionID())
	}
	lk := f.mech(keys.FamLease, "e1")
	if v, _ := f.get(lk); !strings.HasPrefix(v, "worker-a|") || len(v) <= len("worker-a|") {
		t.Errorf("lease value %q, want holder|token", v)
	}
	if d := f.ttl(lk); d <= 59*time.Second || d > time.Minute {
		t.Errorf("lease TTL %v", d)
	}
	if v, _ := f.get(f.mech(keys.FamFenceGen, "e1")); v != "1" {
		t.Errorf("fencegen %q", v)
	}
	if f.exists(f.mech(keys.FamFence, "e1")) {
		t.Error("the legacy fence key was written")
	}
	if d := f.ttl(f.mech(keys.FamFenceGen, "e1")); d != -1 {
		t.Errorf("fencegen TTL %v, want none", d)
	}

	// Held: a distinct error naming the holder; nothing bumped.
	_, err := f.ts.Acquire(c, "e1", "worker-b")
	var held *store.LeaseHeldError
	if !errors.Is(err, store.ErrLeaseHeld) || !errors.As(err, &held) || held.Holder != "worker-a" ||
		!strings.Contains(err.Error(), "worker-a") || errors.Is(err, store.ErrLeaseLost) || model.IsTransient(err) {
		t.Fatalf("second acquire: %v", err)
	}
	if v, _ := f.get(f.mech(keys.FamFenceGen, "e1")); v != "1" {
		t.Errorf("a refused acquire bumped fencegen to %s", v)
	}

	f.do(f.c.B().Expire().Key(lk).Seconds(5).Build())
	if err := a.Renew(c); err != nil {
		t.Fatal(err)
	}
	if d := f.ttl(lk); d < 59*time.Second {
		t.Errorf("renew did not extend: %v", d)
	}

	// Expiry (simulated by deleting the key) and another holder: only the holder renews or
	// releases.
	f.do(f.c.B().Del().Key(lk).Build())
	b := f.acquire("e1", "worker-b")
	if b.Generation() != 2 {
		t.Errorf("generation %d, want 2", b.Generation())
	}
	if err := a.Renew(c); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("stale renew: %v", err)
	}
	if err := a.Release(c); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("stale release: %v", err)
	}
	if v, _ := f.get(lk); !strings.HasPrefix(v, "worker-b|") {
		t.Fatalf("a stale release touched the new holder's lease: %q", v)
	}
	// The same holder name with another token is not the holder either.
	if _, err := f.ts.Acquire(c, "e1", "worker-b"); !errors.Is(err, store.ErrLeaseHeld) {
		t.Errorf("re-acquire by the same holder name: %v", err)
	}
	if err := b.Release(c); err != nil {
		t.Fatal(err)
	}
	if f.exists(lk) {
		t.Fatal("release left the lease")
	}
	if _, err := f.ts.Acquire(c, "e1", ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("empty holder: %v", err)
	}
}

// A worker whose lease expired and was taken over writes nothing: neither save nor delete.
func TestStaleWorkerIsFencedOut(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{"PLAITA_LEASE_TTL_SECONDS": "1"})
	c := ctx(t)
	a := f.acquire("e1", "worker-a")
	if err := a.Storage().Save(c, newState("e1", state.Running)); err != nil {
		t.Fatal(err)
	}
	// Lease expiry alone does not fence: nobody else has taken over yet.
	f.waitGone(f.mech(keys.FamLease, "e1"), 3*time.Second)
	st := newState("e1", state.Running)
	st.StepCount = 1
	if err := a.Storage().Save(c, st); err != nil {
		t.Fatalf("save after expiry, before a takeover: %v", err)
	}

	b := f.acquire("e1", "worker-b")
	if b.Generation() != a.Generation()+1 {
		t.Fatalf("generations %d → %d", a.Generation(), b.Generation())
	}
	st.StepCount = 2
	if err := b.Storage().Save(c, st); err != nil {
		t.Fatal(err)
	}
	before := snapshot(f)

	late := newState("e1", state.Completed)
	late.StepCount = 99
	err := a.Storage().Save(c, late)
	if !errors.Is(err, store.ErrLeaseLost) || model.IsTransient(err) {
		t.Fatalf("late save: %v", err)
	}
	if err := a.Storage().Delete(c, "e1"); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("late delete: %v", err)
	}
	if after := snapshot(f); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused write changed Redis:\nbefore %v\nafter  %v", before, after)
	}
	if got, _ := f.ts.Load(c, "e1"); got.StepCount != 2 {
		t.Fatalf("step count %d, want the new holder's 2", got.StepCount)
	}
	// A lease's storage writes only its own execution.
	if err := b.Storage().Save(c, newState("e2", state.Running)); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("save of another execution through a lease: %v", err)
	}
}

// snapshot is every key under the fixture's root with its content.
func snapshot(f *fixture) map[string]string {
	out := map[string]string{}
	for _, k := range f.scan() {
		typ, _ := f.do(f.c.B().Type().Key(k).Build()).ToString()
		switch typ {
		case "string":
			out[k], _ = f.get(k)
		case "zset":
			zs, _ := f.do(f.c.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).AsZScores()
			out[k] = fmt.Sprint(zs)
		case "set":
			m, _ := f.do(f.c.B().Smembers().Key(k).Build()).AsStrSlice()
			slices.Sort(m)
			out[k] = fmt.Sprint(m)
		default:
			out[k] = typ
		}
	}
	return out
}

func TestDeleteThenRecreateKeepsGenerationsMonotonic(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	a := f.acquire("e1", "worker-a")
	if err := a.Storage().Save(c, newState("e1", state.Running)); err != nil {
		t.Fatal(err)
	}
	if err := a.Storage().Delete(c, "e1"); err != nil {
		t.Fatal(err)
	}
	if g, _ := f.get(f.mech(keys.FamFenceGen, "e1")); g != "2" {
		t.Fatalf("delete must keep fencegen and bump it: %q", g)
	}
	// A redelivered start re-creates the id: a new lease, a higher generation.
	b := f.acquire("e1", "worker-b")
	if b.Generation() != 3 {
		t.Fatalf("re-created execution generation %d, want 3", b.Generation())
	}
	if err := b.Storage().Save(c, newState("e1", state.Running)); err != nil {
		t.Fatal(err)
	}
	// The first worker's late writes are refused.
	if err := a.Storage().Save(c, newState("e1", state.Completed)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("late save after re-create: %v", err)
	}
	if err := a.Storage().Delete(c, "e1"); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("late delete after re-create: %v", err)
	}
	// Deleting by an operator also bumps fencegen: the holder's late writes are refused.
	if err := f.ts.Delete(c, "e1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Storage().Save(c, newState("e1", state.Running)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("save after an operator delete: %v", err)
	}
	f.do(f.c.B().Del().Key(f.mech(keys.FamLease, "e1")).Build())
	if g := f.acquire("e1", "worker-c").Generation(); g != 5 {
		t.Fatalf("generation after operator delete %d, want 5", g)
	}
}

// Restoring an old state (and an old fence key of an earlier build) does not let the stale
// worker back in: fencegen only goes up.
func TestRestoredOldStateStillRefusesTheStaleWorker(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	a := f.acquire("e1", "worker-a")
	if err := a.Storage().Save(c, newState("e1", state.Running)); err != nil {
		t.Fatal(err)
	}
	oldState, _ := f.get(f.key("e1"))
	f.do(f.c.B().Del().Key(f.mech(keys.FamLease, "e1")).Build())
	b := f.acquire("e1", "worker-b")
	if err := b.Storage().Save(c, newState("e1", state.Suspended)); err != nil {
		t.Fatal(err)
	}
	// The operator restores the old state, and a fence key as earlier builds wrote it.
	f.do(f.c.B().Set().Key(f.key("e1")).Value(oldState).Build())
	f.do(f.c.B().Set().Key(f.mech(keys.FamFence, "e1")).Value("1").Build())
	before := snapshot(f)
	err := a.Storage().Save(c, newState("e1", state.Completed))
	if !errors.Is(err, store.ErrLeaseLost) || !strings.Contains(err.Error(), `fencegen "2"`) {
		t.Fatalf("stale save with a restored state: %v", err)
	}
	if err := a.Storage().Delete(c, "e1"); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale delete with a restored state: %v", err)
	}
	if after := snapshot(f); !reflect.DeepEqual(before, after) {
		t.Fatalf("refused writes changed Redis:\nbefore %v\nafter  %v", before, after)
	}
	// The current holder still writes: the generation is its own.
	if err := b.Storage().Save(c, newState("e1", state.Running)); err != nil {
		t.Fatalf("current holder after a restore: %v", err)
	}
}

// PLAITA_DISABLE_FENCING=1 is the bare lease: the lease still excludes a second holder, but
// writes are plain and a stale worker's late save lands. Acquire moves the fence either way, so
// a fleet started with fencing back on fences out what the bare one left.
func TestDisableFencingIsTheBareLease(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	bare := f.reconfigured(map[string]string{"PLAITA_DISABLE_FENCING": "1"})
	c := ctx(t)
	a, err := bare.ts.Acquire(c, "e1", "worker-a")
	if err != nil {
		t.Fatal(err)
	}
	f.do(f.c.B().Del().Key(f.mech(keys.FamLease, "e1")).Build())
	b := f.acquire("e1", "worker-b")
	if err := b.Storage().Save(c, newState("e1", state.Running)); err != nil {
		t.Fatal(err)
	}
	if _, err := bare.ts.Acquire(c, "e1", "worker-c"); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("bare lease must still exclude: %v", err)
	}
	late := newState("e1", state.Completed)
	late.StepCount = 7
	if err := a.Storage().Save(c, late); err != nil {
		t.Fatalf("bare-lease save by a stale worker: %v", err)
	}
	if got, _ := f.ts.Load(c, "e1"); got.StepCount != 7 || got.Status != state.Completed {
		t.Fatalf("bare save not written: %+v", got)
	}
	if d := f.ttl(f.key("e1")); d <= 0 {
		t.Errorf("bare save of a terminal state: TTL %v", d)
	}
	// The same stale generation through a fenced store is refused.
	stale, err := f.ts.Acquire(c, "e2", "worker-a")
	if err != nil {
		t.Fatal(err)
	}
	f.do(f.c.B().Del().Key(f.mech(keys.FamLease, "e2")).Build())
	f.acquire("e2", "worker-b")
	if err := stale.Storage().Save(c, newState("e2", state.Completed)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("fenced stale save: %v", err)
	}
	if err := a.Storage().Delete(c, "e1"); err != nil {
		t.Fatalf("bare-lease delete: %v", err)
	}
	if f.exists(f.key("e1")) {
		t.Fatal("bare delete left the state")
	}
	if g, _ := f.get(f.mech(keys.FamFenceGen, "e1")); g != "3" {
		t.Errorf("fencegen %q after a bare delete, want 3 (two leases and the delete)", g)
	}
}

func TestWatchdogRenewsAndReportsLoss(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{"PLAITA_LEASE_TTL_SECONDS": "1"})
	c := ctx(t)
	a := f.acquire("e1", "worker-a")
	lost := a.Watch(c)
	lk := f.mech(keys.FamLease, "e1")
	time.Sleep(2500 * time.Millisecond) // 2.5 TTLs: only renewal keeps it
	if !f.exists(lk) {
		t.Fatal("the watchdog did not keep the lease")
	}
	select {
	case err := <-lost:
		t.Fatalf("reported %v while the lease is held", err)
	default:
	}
	// Someone else takes over.
	f.do(f.c.B().Del().Key(lk).Build())
	f.acquire("e1", "worker-b")
	select {
	case err := <-lost:
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("watchdog reported %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the watchdog did not report the loss")
	}
	if _, open := <-lost; open {
		t.Fatal("the watchdog reports once and stops")
	}

	// Release stops a watchdog quietly.
	g := f.acquire("e2", "worker-a")
	w := g.Watch(c)
	if err := g.Release(c); err != nil {
		t.Fatal(err)
	}
	select {
	case err, open := <-w:
		if open {
			t.Fatalf("after release: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("release did not stop the watchdog")
	}
}

func TestWatchdogReportsLossWhenRedisIsGone(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	f := setupOn(t, srv.Client(t), "plaita", map[string]string{"PLAITA_LEASE_TTL_SECONDS": "1"})
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := f.acquire("e1", "worker-a")
	lost := a.Watch(c)
	srv.Kill()
	select {
	case err := <-lost:
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("watchdog reported %v", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("the watchdog did not give the lease up after a TTL without renewal")
	}
}

// AcquireOwn takes over a leftover lease of the same holder (an earlier life of the instance)
// and fences that life out; another holder's lease is never taken.
func TestAcquireOwnTakesOverOnlyTheSameHolder(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	old := f.acquire("e1", "worker-a") // its release will never come: Redis was away, then it moved on
	if _, err := f.ts.AcquireOwn(c, "e1", "worker-b"); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("another holder's lease taken over: %v", err)
	}
	if _, err := f.ts.Acquire(c, "e1", "worker-a"); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("plain Acquire took the same holder's lease: %v", err)
	}
	l, err := f.ts.AcquireOwn(c, "e1", "worker-a")
	if err != nil {
		t.Fatal(err)
	}
	if !l.TookOver() || l.Generation() != old.Generation()+1 {
		t.Fatalf("took over %v, generation %d after %d", l.TookOver(), l.Generation(), old.Generation())
	}
	// The earlier life is fenced out; the new lease writes.
	st := &state.Execution{ExecutionID: "e1", Status: state.Running, StartTime: time.Now()}
	if err := old.Storage().Save(c, st); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale save: %v", err)
	}
	if err := l.Storage().Save(c, st); err != nil {
		t.Fatal(err)
	}
	if err := old.Release(c); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the stale release deleted the new lease: %v", err)
	}
	if err := l.Release(c); err != nil {
		t.Fatal(err)
	}
	// With no lease at all it is a plain acquire.
	l2, err := f.ts.AcquireOwn(c, "e1", "worker-a")
	if err != nil || l2.TookOver() {
		t.Fatalf("free lease: %v took over %v", err, l2.TookOver())
	}
}

// A lease's first save indexes the execution (in the save script on a single server), and a
// changed start time moves the member; later saves leave the index alone.
func TestFencedSaveIndexes(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	l := f.acquire("ix1", "worker-a")
	st := newState("ix1", state.Running)
	if err := l.Storage().Save(c, st); err != nil {
		t.Fatal(err)
	}
	if s, ok := f.indexScore("ix1"); !ok || s != float64(st.StartTime.UnixMilli()) {
		t.Fatalf("first fenced save: index score %v %v, want %d", s, ok, st.StartTime.UnixMilli())
	}
	st.StartTime = st.StartTime.Add(time.Hour)
	if err := l.Storage().Save(c, st); err != nil {
		t.Fatal(err)
	}
	if s, _ := f.indexScore("ix1"); s != float64(st.StartTime.UnixMilli()) {
		t.Fatalf("changed start time: index score %v, want %d", s, st.StartTime.UnixMilli())
	}
	// Another lease fences this one out: its save writes neither the state nor the index.
	f.do(f.c.B().Del().Key(f.mech(keys.FamLease, "ix1")).Build())
	f.acquire("ix1", "worker-b")
	stale := newState("ix1", state.Completed)
	stale.StartTime = st.StartTime.Add(time.Hour)
	if err := l.Storage().Save(c, stale); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale save: %v", err)
	}
	if s, _ := f.indexScore("ix1"); s != float64(st.StartTime.UnixMilli()) {
		t.Fatalf("a fenced-out save moved the index to %v", s)
	}
}
