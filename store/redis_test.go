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
	"plaita/model"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

func TestSaveLoadAndTTLs(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	st := newState("e1", state.Running)
	if err := f.ts.Save(c, st); err != nil {
		t.Fatal(err)
	}
	got, err := f.ts.Load(c, "e1")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := store.Decode(mustEncode(t, st))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	if d := f.ttl(f.key("e1")); d != -1 {
		t.Errorf("running state TTL %v, want none", d)
	}
	if s, ok := f.indexScore("e1"); !ok || s != float64(st.StartTime.UnixMilli()) {
		t.Errorf("index score %v %v, want the start time in ms", s, ok)
	}

	// Terminal: PLAITA_EXECUTION_STATE_TTL_DAYS (default 30).
	st.Status = state.Completed
	if err := f.ts.Save(c, st); err != nil {
		t.Fatal(err)
	}
	if d := f.ttl(f.key("e1")); d < 29*24*time.Hour || d > 30*24*time.Hour {
		t.Errorf("completed state TTL %v, want 30d", d)
	}
	st.Status = state.Error
	if err := f.reconfigured(map[string]string{"PLAITA_EXECUTION_STATE_TTL_DAYS": "2"}).ts.Save(c, st); err != nil {
		t.Fatal(err)
	}
	if d := f.ttl(f.key("e1")); d < 47*time.Hour || d > 48*time.Hour {
		t.Errorf("error state TTL %v, want 2d", d)
	}
	st.Status = state.Cancelled
	if err := f.reconfigured(map[string]string{"PLAITA_EXECUTION_STATE_TTL_DAYS": "0"}).ts.Save(c, st); err != nil {
		t.Fatal(err)
	}
	if d := f.ttl(f.key("e1")); d != -1 {
		t.Errorf("TTL days 0 means no TTL, got %v", d)
	}
	// Back to a live status: the TTL goes (PERSIST semantics of a plain SET).
	st.Status = state.Completed
	if err := f.reconfigured(map[string]string{"PLAITA_EXECUTION_STATE_TTL_DAYS": "1"}).ts.Save(c, st); err != nil {
		t.Fatal(err)
	}
	st.Status = state.Suspended
	if err := f.ts.Save(c, st); err != nil {
		t.Fatal(err)
	}
	if d := f.ttl(f.key("e1")); d != -1 {
		t.Errorf("suspended after completed: TTL %v, want none", d)
	}
}

func mustEncode(t *testing.T, st *state.Execution) []byte {
	t.Helper()
	b, err := store.Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadFailureClasses(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	_, err := f.ts.Load(c, "nope")
	if !errors.Is(err, store.ErrNotFound) || model.IsTransient(err) {
		t.Fatalf("missing: %v", err)
	}
	f.do(f.c.B().Set().Key(f.key("bad")).Value("{not json").Build())
	f.do(f.c.B().Hset().Key(f.key("hash")).FieldValue().FieldValue("a", "b").Build())
	other, _ := json.Marshal(newState("someone-else", state.Running))
	f.do(f.c.B().Set().Key(f.key("other")).Value(string(other)).Build())
	f.do(f.c.B().Set().Key(f.key("noid")).Value(`{"status":"running"}`).Build())
	for _, id := range []string{"bad", "hash", "other", "noid"} {
		_, err := f.ts.Load(c, id)
		if !errors.Is(err, store.ErrStateCorrupt) || model.IsTransient(err) || errors.Is(err, store.ErrStateLoad) {
			t.Errorf("%s: %v, want ErrStateCorrupt (permanent)", id, err)
		}
	}
	if _, err := f.ts.Load(c, "a:b"); !errors.Is(err, keys.ErrBadID) || model.IsTransient(err) {
		t.Errorf("bad id: %v", err)
	}
	if _, err := f.r.Tenant("Not A Slug"); !errors.Is(err, keys.ErrBadTenant) {
		t.Errorf("bad tenant: %v", err)
	}
}

func TestLoadPutsBackAMissingIndexMember(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	st := newState("e1", state.Running)
	if err := f.ts.Save(c, st); err != nil {
		t.Fatal(err)
	}
	f.do(f.c.B().Zrem().Key(f.ts.Space().Index()).Member("e1").Build())
	if _, err := f.ts.Load(c, "e1"); err != nil {
		t.Fatal(err)
	}
	if s, ok := f.indexScore("e1"); !ok || s != float64(st.StartTime.UnixMilli()) {
		t.Fatalf("index member not restored: %v %v", s, ok)
	}
}

// The defect report's first half: a value JSON cannot carry is a permanent serialization
// error on every backend, and nothing reaches Redis.
func TestUnserializableStateOnMemoryAndRedis(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	lease := f.acquire("nan", "w1")
	before := f.scan()
	for name, v := range map[string]any{"NaN": math.NaN(), "+Inf": math.Inf(1), "channel": make(chan int)} {
		st := newState("nan", state.Running)
		st.Context["dt"] = v
		backends := map[string]store.Storage{"memory": store.NewMemory(), "redis": f.ts, "redis lease": lease.Storage()}
		for bname, s := range backends {
			err := s.Save(c, st)
			if !errors.Is(err, store.ErrStateSerialization) || model.IsTransient(err) || errors.Is(err, store.ErrStateSave) {
				t.Errorf("%s on %s: %v, want ErrStateSerialization (permanent)", name, bname, err)
			}
			if _, err := s.Load(c, "nan"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s on %s: load after a refused save: %v", name, bname, err)
			}
		}
	}
	if after := f.scan(); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused save wrote keys:\nbefore %v\nafter  %v", before, after)
	}
}

// The defect report's second half: a Redis outage is a transient save error, distinct from a
// serialization failure, and nothing is written.
func TestRedisFailureIsTransient(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	f := setupOn(t, c, "plaita", nil)
	bg := ctx(t)
	lease := f.acquire("e1", "w1")
	if err := lease.Storage().Save(bg, newState("e1", state.Running)); err != nil {
		t.Fatal(err)
	}
	srv.Kill()

	short := func() context.Context {
		c, cancel := context.WithTimeout(bg, 700*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	transient := func(what string, err, class error) {
		t.Helper()
		if !errors.Is(err, class) || !model.IsTransient(err) || errors.Is(err, store.ErrStateSerialization) {
			t.Errorf("%s with Redis down: %v, want %v (transient)", what, err, class)
		}
	}
	transient("save", f.ts.Save(short(), newState("e2", state.Running)), store.ErrStateSave)
	transient("fenced save", lease.Storage().Save(short(), newState("e1", state.Completed)), store.ErrStateSave)
	_, err := f.ts.Load(short(), "e1")
	transient("load", err, store.ErrStateLoad)
	transient("delete", f.ts.Delete(short(), "e1"), store.ErrStateDelete)
	_, err = f.ts.Acquire(short(), "e3", "w1")
	transient("acquire", err, store.ErrRedis)
	transient("renew", lease.Renew(short()), store.ErrRedis)
	_, err = f.ts.Cancelled(short(), "e1")
	transient("cancel flag", err, store.ErrRedis)
	_, err = f.ts.Incr(short(), keys.FamNoFail, "e1")
	transient("counter", err, store.ErrRedis)
	_, err = f.ts.List(short(), store.ListRequest{})
	transient("list", err, store.ErrRedis)
	// The serialization class still wins when both would apply: nothing is sent.
	bad := newState("e1", state.Running)
	bad.Context["x"] = math.NaN()
	if err := lease.Storage().Save(short(), bad); !errors.Is(err, store.ErrStateSerialization) {
		t.Errorf("NaN with Redis down: %v", err)
	}

	// A closed client on the shared server: transient, and the server holds nothing new.
	g := setup(t, nil)
	opt, _ := rueidis.ParseURL(redistest.URL())
	opt.DisableCache = true
	closed, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	cts, _ := store.NewRedis(closed, store.DefaultSettings(), g.root).Tenant("")
	transient("save on a closed client", cts.Save(short(), newState("e9", state.Running)), store.ErrStateSave)
	if keys := g.scan(); len(keys) != 0 {
		t.Errorf("a failed save wrote %v", keys)
	}
}

// nanType is a node whose output JSON cannot carry.
type nanType struct{}

func (nanType) Prepare(*engine.Node, *engine.PrepareContext) engine.Runner { return nanType{} }
func (nanType) Run(context.Context, *engine.Call) (engine.Outcome, error) {
	return engine.Outcome{Output: map[string]any{"score": math.NaN()}}, nil
}

// pokeType misbehaves: it writes NaN straight into the execution's variables, so only the
// store's own encoding can catch it.
type pokeType struct{}

func (pokeType) Prepare(*engine.Node, *engine.PrepareContext) engine.Runner { return pokeType{} }
func (pokeType) Run(_ context.Context, call *engine.Call) (engine.Outcome, error) {
	call.Execution.Vars()["bad"] = math.Inf(-1)
	return engine.Outcome{Output: "ok"}, nil
}

// The defect report end to end: the executor over the Redis lease storage ends a flow whose
// node produced NaN in an error state naming the node, exactly as over the memory store.
func TestExecutorEndsUnserializableFlowInErrorOnBothBackends(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	reg := engine.NewRegistry()
	reg.Register("nan", nanType{})
	reg.Register("poke", pokeType{})
	for _, typ := range []string{"nan", "poke"} {
		t.Run(typ, func(t *testing.T) {
			c := ctx(t)
			flow, err := engine.Parse([]byte(`{"id":"nan","start":"ok","nodes":[{"id":"ok","type":"log","params":{"message":"fine"},"next":"score"},`+
				`{"id":"score","type":"`+typ+`","next":"e"},{"id":"e","type":"end"}]}`), reg, engine.DefaultExprLimits)
			if err != nil {
				t.Fatal(err)
			}
			id := engine.NewExecutionID()
			run := func(s store.Storage, cancel engine.CancelChecker) (*state.Execution, *state.Execution) {
				ex := engine.NewExecutor(s)
				ex.Cancel = cancel
				st, err := ex.Start(c, flow, engine.StartRequest{ExecutionID: id})
				if err != nil {
					t.Fatalf("start: %v (a serialization failure must not surface as an error)", err)
				}
				stored, err := s.Load(c, id)
				if err != nil {
					t.Fatal(err)
				}
				return st, stored
			}
			mem := store.NewMemory()
			memSt, memStored := run(mem, mem)
			lease := f.acquire(id, "worker-1")
			defer lease.Release(c)
			redSt, redStored := run(lease.Storage(), lease.Storage())

			for name, st := range map[string]*state.Execution{"memory": memSt, "memory stored": memStored, "redis": redSt, "redis stored": redStored} {
				if st.Status != state.Error || st.Error == nil || st.Error.Type != engine.ErrTypeSerialization ||
					st.Error.Node != "score" || !st.Error.Permanent || !strings.Contains(st.Error.Message, `node "score"`) {
					t.Errorf("%s: %s %+v, want an error state naming node score", name, st.Status, st.Error)
				}
			}
			if *memStored.Error != *redStored.Error || memStored.Status != redStored.Status || memStored.CurrentNode != redStored.CurrentNode {
				t.Errorf("backends diverge:\nmemory %+v\nredis  %+v", memStored.Error, redStored.Error)
			}
			if typ == "nan" && redStored.Nodes()["ok"] == nil {
				t.Error("earlier results must survive")
			}
			if d := f.ttl(f.key(id)); d <= 0 {
				t.Errorf("the error terminal state must carry the state TTL, got %v", d)
			}
		})
	}
}

func TestDeleteClearsEverythingButFencegen(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{"PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS": "3000000"})
	c := ctx(t)
	l := f.acquire("e1", "w1")
	if err := l.Storage().Save(c, newState("e1", state.Running)); err != nil {
		t.Fatal(err)
	}
	for _, fam := range keys.CounterFamilies() {
		if _, err := f.ts.Incr(c, fam, "e1"); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a", "b.c", "d-e"} {
		if _, err := f.ts.IncrNodeRetry(c, "e1", n); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.ts.SetCancel(c, "e1"); err != nil {
		t.Fatal(err)
	}
	// Another execution's keys must survive.
	if err := f.ts.Save(c, newState("e2", state.Running)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ts.IncrNodeRetry(c, "e2", "a"); err != nil {
		t.Fatal(err)
	}

	if err := l.Storage().Delete(c, "e1"); err != nil {
		t.Fatal(err)
	}
	tomb, _ := f.ts.Space().Tombstone("e1")
	gen := f.mech(keys.FamFenceGen, "e1")
	var left []string
	for _, k := range f.scan() {
		if strings.Contains(k, "{e1}") && k != tomb && k != gen {
			left = append(left, k)
		}
	}
	if len(left) > 0 {
		t.Errorf("delete left %v", left)
	}
	if v, ok := f.get(gen); !ok || v != "2" {
		t.Errorf("fencegen %q %v, want kept and bumped to 2 (every earlier lease is fenced out)", v, ok)
	}
	if d := f.ttl(tomb); d < 2999990*time.Second || d > 3000000*time.Second {
		t.Errorf("tombstone TTL %v", d)
	}
	if ok, err := f.ts.Tombstoned(c, "e1"); !ok || err != nil {
		t.Errorf("tombstoned: %v %v", ok, err)
	}
	if _, ok := f.indexScore("e1"); ok {
		t.Error("index member kept")
	}
	if _, ok := f.indexScore("e2"); !ok {
		t.Error("another execution lost its index member")
	}
	if n, _ := f.ts.NodeRetry(c, "e2", "a"); n != 1 {
		t.Error("another execution lost its counters")
	}
	if err := l.Renew(c); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("renew after the lease's own delete: %v", err)
	}
	// PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS sets the tombstone's TTL.
	if err := f.reconfigured(map[string]string{"PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS": "4000000"}).ts.Delete(c, "e2"); err != nil {
		t.Fatal(err)
	}
	tomb2, _ := f.ts.Space().Tombstone("e2")
	if d := f.ttl(tomb2); d < 3999990*time.Second {
		t.Errorf("tombstone TTL %v after the change", d)
	}
	if _, err := f.ts.Load(c, "e2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("load after delete: %v", err)
	}
}

func TestCancelFlag(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	var _ engine.CancelChecker = f.ts
	if on, err := f.ts.Cancelled(c, "e1"); on || err != nil {
		t.Fatalf("fresh: %v %v", on, err)
	}
	if err := f.ts.SetCancel(c, "e1"); err != nil {
		t.Fatal(err)
	}
	if on, err := f.ts.Cancelled(c, "e1"); !on || err != nil {
		t.Fatalf("set: %v %v", on, err)
	}
	if d := f.ttl(f.mech(keys.FamCancel, "e1")); d < 6*24*time.Hour {
		t.Errorf("cancel TTL %v", d)
	}
	if err := f.ts.ClearCancel(c, "e1"); err != nil {
		t.Fatal(err)
	}
	if on, _ := f.ts.Cancelled(c, "e1"); on {
		t.Fatal("cleared flag still set")
	}
}

func TestTenantsAreSeparate(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	acme, err := f.r.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := acme.Save(c, newState("e1", state.Running)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ts.Load(c, "e1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the default tenant sees acme's execution: %v", err)
	}
	if p, err := f.ts.List(c, store.ListRequest{}); err != nil || len(p.Items) != 0 {
		t.Fatalf("default list %+v %v", p, err)
	}
	if p, err := acme.List(c, store.ListRequest{}); err != nil || len(p.Items) != 1 {
		t.Fatalf("acme list %+v %v", p, err)
	}
	for _, k := range f.scan() {
		if !strings.HasPrefix(k, f.root+":acme:") {
			t.Errorf("acme wrote %s", k)
		}
	}
}

// Every key a full lifecycle writes is a state key or a mechanism key.
func TestEveryKeyIsStateOrMechanism(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	acme, _ := f.r.Tenant("acme")
	for _, ts := range []*store.TenantStore{f.ts, acme} {
		for _, id := range []string{"keep", "gone"} {
			l, err := ts.Acquire(c, id, "w1")
			if err != nil {
				t.Fatal(err)
			}
			s := l.Storage()
			w := l.Watch(c)
			for _, status := range []state.Status{state.Running, state.Suspended, state.Completed} {
				if err := s.Save(c, newState(id, status)); err != nil {
					t.Fatal(err)
				}
			}
			for _, fam := range keys.CounterFamilies() {
				if _, err := ts.Incr(c, fam, id); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := ts.IncrNodeRetry(c, id, "node-1"); err != nil {
				t.Fatal(err)
			}
			if err := ts.SetCancel(c, id); err != nil {
				t.Fatal(err)
			}
			if id == "gone" {
				if err := s.Delete(c, id); err != nil {
					t.Fatal(err)
				}
			} else if err := l.Release(c); err != nil {
				t.Fatal(err)
			}
			<-w
		}
		if _, err := ts.List(c, store.ListRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.Backfill(c, 10); err != nil {
			t.Fatal(err)
		}
	}
	all := f.scan()
	if len(all) == 0 {
		t.Fatal("nothing written")
	}
	states := 0
	for _, k := range all {
		isState := f.ts.Space().ExecutionID(k) != "" || acme.Space().ExecutionID(k) != ""
		isMech := keys.IsMechanismKey(f.root, k)
		if isState == isMech {
			t.Errorf("%s: state %v, mechanism %v", k, isState, isMech)
		}
		if isState {
			states++
		}
	}
	if states != 2 {
		t.Errorf("%d state keys, want 2 (keep in both tenants): %v", states, all)
	}
}
