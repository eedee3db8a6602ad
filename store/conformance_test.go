package store_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/redis/rueidis"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/model"
	"plaita/store"
	"plaita/store/storetest"
	"plaita/test/redistest"
)

// One storage contract (store/storetest), run against every backend: the memory backend (plaita
// run, tests) and Redis (the workers), through their plain storage and, for Redis, through a
// lease's fenced storage. The engine runs on any of them: what one accepts, stores and refuses,
// all do. The console's local-mode SQLite storage runs the same suite (store/sqlite).

func backends(t *testing.T) []storetest.Backend {
	bound := strconv.Itoa(storetest.MaxStateBytes)
	f := setup(t, map[string]string{"PLAITA_EXECUTION_STATE_MAX_BYTES": bound})
	mem := store.NewMemory()
	mem.MaxStateBytes = storetest.MaxStateBytes
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
	s.MaxStateBytes = storetest.MaxStateBytes
	down, _ := store.NewRedis(closed, s, f.root).Tenant("")
	return []storetest.Backend{
		{Name: "memory", Storage: mem},
		{Name: "redis", Storage: f.ts, Down: down},
		{Name: "redis-fenced", Storage: lease.Storage(), Down: down},
	}
}

func TestStorageContract(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) { storetest.Contract(t, b) })
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
	if err := old.Storage().Save(c, newState("c-takeover", state.Completed)); !errors.Is(err, engine.ErrLeaseLost) || model.IsTransient(err) {
		t.Fatalf("stale save: %v", err)
	}
	if err := newer.Storage().Save(c, newState("c-takeover", state.Completed)); err != nil {
		t.Fatal(err)
	}
}
