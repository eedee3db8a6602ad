package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/redistest"
	"plaita/store"
)

// One storage contract, run against every backend: the memory backend (plaita run, tests) and
// Redis (the workers), through their plain storage and, for Redis, through a lease's fenced
// storage. The engine runs on any of them: what one accepts, stores and refuses, all do.

// backend is one implementation under the contract.
type backend struct {
	name    string
	storage engine.Storage
	// down is the same backend with its server gone (nil: a backend that has no server).
	down engine.Storage
}

func backends(t *testing.T) []backend {
	f := setup(t, map[string]string{"PLAITA_EXECUTION_STATE_MAX_BYTES": "65536"})
	mem := store.NewMemory()
	mem.MaxStateBytes = 65536
	lease := f.acquire("c-redis-fenced", "conformance")
	opt, err := rueidis.ParseURL(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableCache = true
	closed, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	s := store.DefaultSettings()
	s.MaxStateBytes = 65536
	down, _ := store.NewRedis(closed, s, f.root).Tenant("")
	return []backend{
		{name: "memory", storage: mem},
		{name: "redis", storage: f.ts, down: down},
		{name: "redis-fenced", storage: lease.Storage(), down: down},
	}
}

func TestStorageContract(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			c := ctx(t)
			id := "c-" + b.name
			// Not found is its own permanent class.
			if _, err := b.storage.Load(c, id); !errors.Is(err, engine.ErrNotFound) || store.IsTransient(err) {
				t.Fatalf("load before save: %v", err)
			}
			// Round trip: what comes back is the JSON of what went in (numbers as float64).
			st := newState(id, state.Running)
			st.Input = map[string]any{"n": 3, "list": []any{1, "two"}}
			if err := b.storage.Save(c, st); err != nil {
				t.Fatal(err)
			}
			got, err := b.storage.Load(c, id)
			if err != nil {
				t.Fatal(err)
			}
			want := roundTrip(t, st)
			if !reflect.DeepEqual(roundTrip(t, got), want) || got.Input.(map[string]any)["n"] != 3.0 {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
			}
			// A value JSON cannot carry: permanent, nothing written.
			bad := newState(id, state.Completed)
			bad.Context["score"] = math.NaN()
			if err := b.storage.Save(c, bad); !errors.Is(err, engine.ErrStateSerialization) || store.IsTransient(err) {
				t.Fatalf("NaN: %v", err)
			}
			// Over the state bound: permanent, nothing written.
			big := newState(id, state.Completed)
			big.Output = strings.Repeat("x", 70000)
			if err := b.storage.Save(c, big); !errors.Is(err, engine.ErrStateTooLarge) || store.IsTransient(err) {
				t.Fatalf("too large: %v", err)
			}
			if got, err := b.storage.Load(c, id); err != nil || got.Status != state.Running {
				t.Fatalf("a refused save changed the stored state: %+v %v", got, err)
			}
			// A backend whose server is gone fails transiently (the caller redelivers), and
			// an unserializable value is still refused as permanent before anything is sent.
			if b.down != nil {
				short, cancel := context.WithTimeout(c, 500*time.Millisecond)
				defer cancel()
				if err := b.down.Save(short, newState(id, state.Running)); err == nil || !store.IsTransient(err) {
					t.Fatalf("save with the server gone: %v", err)
				}
				if _, err := b.down.Load(short, id); err == nil || !store.IsTransient(err) || errors.Is(err, engine.ErrNotFound) {
					t.Fatalf("load with the server gone: %v", err)
				}
			}
		})
	}
}

// A fenced write after another worker took the lease over is refused on the Redis backend, the
// one the workers share; the memory backend serves one process and has no leases.
func TestStorageContractFencing(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	old := f.acquire("c-takeover", "worker-a")
	if err := old.Storage().Save(c, newState("c-takeover", state.Running)); err != nil {
		t.Fatal(err)
	}
	f.do(f.c.B().Del().Key(f.mech("lease", "c-takeover")).Build()) // its lease expired
	newer := f.acquire("c-takeover", "worker-b")
	if err := old.Storage().Save(c, newState("c-takeover", state.Completed)); !errors.Is(err, engine.ErrLeaseLost) || store.IsTransient(err) {
		t.Fatalf("stale save: %v", err)
	}
	if err := newer.Storage().Save(c, newState("c-takeover", state.Completed)); err != nil {
		t.Fatal(err)
	}
}

func roundTrip(t *testing.T, st *state.Execution) map[string]any {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
