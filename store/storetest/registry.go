package storetest

import (
	"slices"
	"testing"
	"time"

	"plaita/store"
)

// RegistryBackend is one implementation of the instance registry under the contract.
type RegistryBackend struct {
	Name string
	// Open makes a new, empty registry for one case (cases run in parallel).
	Open func(t *testing.T) *store.Registry
}

// RegistryContract runs the registry's cases against b: what the heartbeat, `plaita status`
// and the wake-up report rely on — a registered instance is alive while its heartbeat is
// fresh, a deregistered one is gone and a late heartbeat never brings it back, and an expired
// one is pruned from the list.
func RegistryContract(t *testing.T, b RegistryBackend) {
	runCases(t, b.Name, b.Open, []namedCase[*store.Registry]{
		{"AliveWhileFresh", aliveWhileFresh},
		{"RefreshNeverResurrects", refreshNeverResurrects},
		{"ExpiredIsPruned", expiredIsPruned},
	})
}

func instance(id string, at time.Time, ttl time.Duration) store.InstanceRecord {
	return store.InstanceRecord{InstanceID: id, Status: "running", Role: "worker", Host: "h", PID: 1,
		HeartbeatAt: at.UTC(), StartedAt: at.UTC(), TTLMillis: ttl.Milliseconds()}
}

func aliveWhileFresh(t *testing.T, r *store.Registry) {
	now := time.Now()
	if err := r.Register(eventsCtx(t), instance("w-1", now, 30*time.Second), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	got, ok, err := r.Get(eventsCtx(t), "w-1")
	if err != nil || !ok || got.Role != "worker" || got.Status != "running" {
		t.Fatalf("get: %+v %v %v", got, ok, err)
	}
	if alive, err := r.Alive(eventsCtx(t), "w-1", now.Add(time.Second), time.Minute); err != nil || !alive {
		t.Fatalf("alive with a fresh heartbeat: %v %v", alive, err)
	}
	if alive, err := r.Alive(eventsCtx(t), "w-1", now.Add(time.Hour), time.Minute); err != nil || alive {
		t.Fatalf("alive with a heartbeat an hour old: %v %v", alive, err)
	}
	list, err := r.Instances(eventsCtx(t), now, time.Minute)
	if err != nil || len(list.Live) != 1 || list.Live[0].InstanceID != "w-1" {
		t.Fatalf("instances: %+v %v", list, err)
	}
	for range 2 { // a second deregistration is not an error
		if err := r.Deregister(eventsCtx(t), "w-1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := r.Get(eventsCtx(t), "w-1"); err != nil || ok {
		t.Fatalf("get after deregistration: %v %v", ok, err)
	}
	if list, err = r.Instances(eventsCtx(t), now, time.Minute); err != nil || len(list.Live) != 0 {
		t.Fatalf("instances after deregistration: %+v %v", list, err)
	}
}

func refreshNeverResurrects(t *testing.T, r *store.Registry) {
	now := time.Now()
	rec := instance("w-2", now, 30*time.Second)
	if err := r.Register(eventsCtx(t), rec, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	rec.ActiveTasks = 3
	if gone, err := r.Refresh(eventsCtx(t), rec, 30*time.Second); err != nil || gone {
		t.Fatalf("refresh of a live instance: gone %v %v", gone, err)
	}
	if got, _, err := r.Get(eventsCtx(t), "w-2"); err != nil || got.ActiveTasks != 3 {
		t.Fatalf("the refreshed record: %+v %v", got, err)
	}
	if err := r.Deregister(eventsCtx(t), "w-2"); err != nil {
		t.Fatal(err)
	}
	// A heartbeat already on the wire when the instance deregistered.
	if gone, err := r.Refresh(eventsCtx(t), rec, 30*time.Second); err != nil || !gone {
		t.Fatalf("refresh after deregistration: gone %v %v, want gone", gone, err)
	}
	if _, ok, err := r.Get(eventsCtx(t), "w-2"); err != nil || ok {
		t.Fatalf("a late heartbeat brought the instance back: %v %v", ok, err)
	}
}

func expiredIsPruned(t *testing.T, r *store.Registry) {
	now := time.Now()
	if err := r.Register(eventsCtx(t), instance("w-3", now, 200*time.Millisecond), 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The record expires by itself (its TTL): wait for that, then the list prunes the member.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, ok, err := r.Get(eventsCtx(t), "w-3")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the record never expired")
		}
	}
	list, err := r.Instances(eventsCtx(t), time.Now(), time.Minute)
	if err != nil || len(list.Live) != 0 || !slices.Contains(list.Pruned, "w-3") {
		t.Fatalf("instances after the expiry: %+v %v, want w-3 pruned", list, err)
	}
	if list, err = r.Instances(eventsCtx(t), time.Now(), time.Minute); err != nil || len(list.Pruned) != 0 {
		t.Fatalf("a second list prunes again: %+v %v", list, err)
	}
}
