package store_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/config"
	"plaita/engine/state"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/test/redistest"
	"plaita/test/testutil"
)

// fixture is one test's storage over its own key root.
type fixture struct {
	t    testing.TB
	c    rueidis.Client
	root string
	env  *testutil.Env
	r    *store.Redis
	ts   *store.TenantStore
}

// setup gives a test the shared Redis under a private root; vars are the initial environment.
func setup(t testing.TB, vars map[string]string) *fixture {
	t.Helper()
	c := redistest.Client(t)
	return setupOn(t, c, redistest.Root(t, c), vars)
}

func setupOn(t testing.TB, c rueidis.Client, root string, vars map[string]string) *fixture {
	t.Helper()
	e := testutil.NewEnv(vars)
	cfg, err := config.Load(config.RoleWorker, false, config.WithLookup(e.Lookup))
	if err != nil {
		t.Fatal(err)
	}
	r := store.NewRedis(c, settings.Store(cfg), root)
	ts, err := r.Tenant("")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, c: c, root: root, env: e, r: r, ts: ts}
}

// reconfigured is the same Redis and key root under another configuration: what a process
// started with vars set sees (settings are read once at start).
func (f *fixture) reconfigured(vars map[string]string) *fixture {
	f.t.Helper()
	env := f.env.Snapshot()
	maps.Copy(env, vars)
	return setupOn(f.t, f.c, f.root, env)
}

// ctx is a bounded context: rueidis retries reads forever against a dead server.
func ctx(t testing.TB) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func newState(id string, status state.Status) *state.Execution {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return &state.Execution{
		ExecutionID: id, FlowID: "f", FlowVersion: "1", Engine: "test", Status: status, CurrentNode: "a",
		Input: map[string]any{"k": "v"}, Context: map[string]any{state.ContextNodes: map[string]any{"a": map[string]any{"x": 1.0}}},
		StartTime: start, LastUpdate: start,
	}
}

func (f *fixture) key(id string) string {
	k, err := f.ts.Space().Execution(id)
	if err != nil {
		f.t.Fatal(err)
	}
	return k
}

func (f *fixture) mech(family, id string) string {
	k, err := f.ts.Space().Mechanism(family, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return k
}

func (f *fixture) do(cmd rueidis.Completed) rueidis.RedisResult {
	return f.c.Do(ctx(f.t), cmd)
}

func (f *fixture) get(key string) (string, bool) {
	f.t.Helper()
	v, err := f.do(f.c.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false
	}
	if err != nil {
		f.t.Fatalf("GET %s: %v", key, err)
	}
	return v, true
}

func (f *fixture) exists(key string) bool {
	f.t.Helper()
	n, err := f.do(f.c.B().Exists().Key(key).Build()).AsInt64()
	if err != nil {
		f.t.Fatal(err)
	}
	return n == 1
}

func (f *fixture) ttl(key string) time.Duration {
	f.t.Helper()
	n, err := f.do(f.c.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		f.t.Fatal(err)
	}
	if n < 0 {
		return time.Duration(n) // -1 no TTL, -2 missing
	}
	return time.Duration(n) * time.Millisecond
}

func (f *fixture) indexScore(id string) (float64, bool) {
	f.t.Helper()
	s, err := f.do(f.c.B().Zscore().Key(f.ts.Space().Index()).Member(id).Build()).AsFloat64()
	if rueidis.IsRedisNil(err) {
		return 0, false
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return s, true
}

// scan lists every key under the fixture's root on every node.
func (f *fixture) scan() []string {
	f.t.Helper()
	var out []string
	for _, node := range f.c.Nodes() {
		var cur uint64
		for {
			e, err := node.Do(ctx(f.t), node.B().Scan().Cursor(cur).Match(f.root+":*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				f.t.Fatal(err)
			}
			out = append(out, e.Elements...)
			if cur = e.Cursor; cur == 0 {
				break
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// waitGone polls until key has expired.
func (f *fixture) waitGone(key string, within time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for f.exists(key) {
		if time.Now().After(deadline) {
			f.t.Fatalf("%s still exists after %s", key, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *fixture) acquire(id, holder string) *store.Lease {
	f.t.Helper()
	l, err := f.ts.Acquire(ctx(f.t), id, holder)
	if err != nil {
		f.t.Fatalf("acquire %s for %s: %v", id, holder, err)
	}
	return l
}
