package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/model"
	"plaita/store"
	"plaita/test/redistest"
)

// regFixture is one test's registry over its own key root, with raw access for inspection.
type regFixture struct {
	t    *testing.T
	c    rueidis.Client
	root string
	reg  *store.Registry
}

func regSetup(t *testing.T) *regFixture {
	t.Helper()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	return &regFixture{t: t, c: c, root: root, reg: store.NewRegistry(store.OnRedis(c), root)}
}

func regRecord(id string, heartbeat time.Time, ttl time.Duration) store.InstanceRecord {
	return store.InstanceRecord{
		InstanceID: id, Status: "running", Host: "host-a", PID: 4242, Role: "worker",
		Queue: "plaita:flow:queue", Consumer: id, Group: "plaita-workers", DLQKey: "plaita:flow:queue:dlq",
		ConfigFamily: "cf1-aaaaaaaaaaaa", ConfigGeneration: "cfg1-bbbbbbbbbbbb", BudgetGeneration: "bg1-cccccccccccc",
		ActiveTasks: 2, Capacity: 4, HeartbeatAt: heartbeat, StartedAt: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
		TTLMillis: ttl.Milliseconds(),
	}
}

func (f *regFixture) raw(id string) (string, bool) {
	f.t.Helper()
	v, err := f.c.Do(ctx(f.t), f.c.B().Get().Key(f.reg.Key(id)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return v, true
}

func (f *regFixture) pttl(id string) time.Duration {
	f.t.Helper()
	ms, err := f.c.Do(ctx(f.t), f.c.B().Pttl().Key(f.reg.Key(id)).Build()).AsInt64()
	if err != nil {
		f.t.Fatal(err)
	}
	return time.Duration(ms) * time.Millisecond
}

func (f *regFixture) members() []string {
	f.t.Helper()
	ids, err := f.c.Do(ctx(f.t), f.c.B().Smembers().Key(f.reg.SetKey()).Build()).AsStrSlice()
	if err != nil {
		f.t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

// seed writes a value the registry itself never writes (a crashed writer, an operator's typo).
func (f *regFixture) seed(cmds ...rueidis.Completed) {
	f.t.Helper()
	for _, cmd := range cmds {
		if err := f.c.Do(ctx(f.t), cmd).Error(); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *regFixture) register(rec store.InstanceRecord, ttl time.Duration) {
	f.t.Helper()
	if err := f.reg.Register(ctx(f.t), rec, ttl); err != nil {
		f.t.Fatal(err)
	}
}

func TestRegistryRegisterWritesRecordTTLAndMember(t *testing.T) {
	t.Parallel()
	f := regSetup(t)
	hb := time.Date(2026, 3, 1, 10, 0, 5, 0, time.UTC)
	rec := regRecord("worker-1", hb, 30*time.Second)
	f.register(rec, 30*time.Second)
	raw, ok := f.raw("worker-1")
	if !ok {
		t.Fatal("no key after Register")
	}
	// The documented wire names, so the console can rely on them.
	for _, field := range []string{`"instance_id":"worker-1"`, `"status":"running"`, `"host":"host-a"`, `"pid":4242`, `"role":"worker"`,
		`"queue":"plaita:flow:queue"`, `"consumer":"worker-1"`, `"group":"plaita-workers"`, `"dlq_key":"plaita:flow:queue:dlq"`,
		`"config_family":"cf1-aaaaaaaaaaaa"`, `"config_generation":"cfg1-bbbbbbbbbbbb"`, `"budget_generation":"bg1-cccccccccccc"`,
		`"active_tasks":2`, `"capacity":4`, `"heartbeat_at":"2026-03-01T10:00:05Z"`, `"started_at":"2026-03-01T10:00:00Z"`, `"ttl_ms":30000`} {
		if !strings.Contains(raw, field) {
			t.Errorf("record lacks %s: %s", field, raw)
		}
	}
	if ttl := f.pttl("worker-1"); ttl <= 20*time.Second || ttl > 30*time.Second {
		t.Errorf("TTL %s, want ≈ 30s", ttl)
	}
	if got := f.members(); !slices.Equal(got, []string{"worker-1"}) {
		t.Errorf("members %v", got)
	}
	got, ok, err := f.reg.Get(ctx(t), "worker-1")
	if err != nil || !ok || got != rec {
		t.Fatalf("Get = %+v, %v, %v; want %+v", got, ok, err, rec)
	}
	if f.reg.Key("worker-1") != f.root+":registry:instance:worker-1" || f.reg.SetKey() != f.root+":registry:instances" {
		t.Errorf("keys %s, %s", f.reg.Key("worker-1"), f.reg.SetKey())
	}
}

func TestRegistryRefreshNeverCreatesTheKey(t *testing.T) {
	t.Parallel()
	f := regSetup(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	rec := regRecord("w-refresh", now, time.Minute)

	gone, err := f.reg.Refresh(ctx(t), rec, time.Minute)
	if err != nil || !gone {
		t.Fatalf("Refresh of a missing key = %v, %v; want gone", gone, err)
	}
	if _, ok := f.raw("w-refresh"); ok || len(f.members()) != 0 {
		t.Fatalf("Refresh created the registration: members %v", f.members())
	}

	f.register(rec, time.Minute)
	// A pruner removed the member meanwhile: the refresh puts it back.
	f.seed(f.c.B().Srem().Key(f.reg.SetKey()).Member("w-refresh").Build())
	rec.Status, rec.ActiveTasks, rec.HeartbeatAt = "draining", 7, now.Add(time.Second)
	gone, err = f.reg.Refresh(ctx(t), rec, 2*time.Hour)
	if err != nil || gone {
		t.Fatalf("Refresh of a live key = %v, %v", gone, err)
	}
	if got, _, _ := f.reg.Get(ctx(t), "w-refresh"); got != rec {
		t.Errorf("record %+v, want %+v", got, rec)
	}
	if ttl := f.pttl("w-refresh"); ttl <= time.Hour {
		t.Errorf("Refresh did not renew the TTL: %s", ttl)
	}
	if got := f.members(); !slices.Equal(got, []string{"w-refresh"}) {
		t.Errorf("members %v", got)
	}
}

func TestRegistryDeregister(t *testing.T) {
	t.Parallel()
	f := regSetup(t)
	f.register(regRecord("w-a", time.Now(), time.Minute), time.Minute)
	f.register(regRecord("w-b", time.Now(), time.Minute), time.Minute)
	for range 2 { // twice: the second finds nothing and is fine
		if err := f.reg.Deregister(ctx(t), "w-a"); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := f.raw("w-a"); ok {
		t.Error("Deregister left the key")
	}
	if got := f.members(); !slices.Equal(got, []string{"w-b"}) {
		t.Errorf("members %v, want only w-b", got)
	}
}

func TestRegistryRefusesBadInputBeforeSending(t *testing.T) {
	t.Parallel()
	f := regSetup(t)
	now := time.Now()
	for name, err := range map[string]error{
		"register without id":   f.reg.Register(ctx(t), regRecord("", now, time.Minute), time.Minute),
		"register with TTL 0":   f.reg.Register(ctx(t), regRecord("w", now, time.Minute), 0),
		"refresh with TTL 1µs":  second(f.reg.Refresh(ctx(t), regRecord("w", now, time.Minute), time.Microsecond)),
		"deregister without id": f.reg.Deregister(ctx(t), ""),
	} {
		if !errors.Is(err, store.ErrInvalid) || model.IsTransient(err) {
			t.Errorf("%s: %v, want ErrInvalid (permanent)", name, err)
		}
	}
	if _, ok := f.raw("w"); ok || len(f.members()) != 0 {
		t.Error("a refused call wrote something")
	}
}

func second[T any](_ T, err error) error { return err }

func TestRegistryGetAndAlive(t *testing.T) {
	t.Parallel()
	f := regSetup(t)
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	f.register(regRecord("w-fresh", now, 30*time.Second), time.Minute)
	noTTL := regRecord("w-legacy", now, 0) // an older writer that declared no TTL
	f.register(noTTL, time.Minute)
	f.seed(f.c.B().Set().Key(f.reg.Key("w-junk")).Value("not json").Build(),
		f.c.B().Hset().Key(f.reg.Key("w-hash")).FieldValue().FieldValue("a", "b").Build())

	cases := []struct {
		id       string
		at       time.Time
		fallback time.Duration
		want     bool
	}{
		{"w-fresh", now.Add(30 * time.Second), time.Millisecond, true}, // the writer's TTL, not the reader's fallback
		{"w-fresh", now.Add(31 * time.Second), time.Hour, false},
		{"w-fresh", now.Add(-time.Hour), 0, true}, // the writer's clock ahead of ours
		{"w-legacy", now.Add(10 * time.Second), 10 * time.Second, true},
		{"w-legacy", now.Add(11 * time.Second), 10 * time.Second, false},
		{"w-missing", now, time.Hour, false},
	}
	for _, tc := range cases {
		got, err := f.reg.Alive(ctx(t), tc.id, tc.at, tc.fallback)
		if err != nil || got != tc.want {
			t.Errorf("Alive(%s, %s, %s) = %v, %v; want %v", tc.id, tc.at.Sub(now), tc.fallback, got, err, tc.want)
		}
	}
	if rec, ok, err := f.reg.Get(ctx(t), "w-missing"); ok || err != nil || rec != (store.InstanceRecord{}) {
		t.Errorf("Get of a missing key = %+v, %v, %v", rec, ok, err)
	}
	for _, id := range []string{"w-junk", "w-hash"} {
		ok, err := f.reg.Alive(ctx(t), id, now, time.Hour)
		var bad *store.BadRecordError
		if ok || !errors.Is(err, store.ErrBadRecord) || !errors.As(err, &bad) || bad.ID != id {
			t.Errorf("Alive(%s) = %v, %v; want false, ErrBadRecord naming it", id, ok, err)
		}
	}
	// A record without instance_id takes the key's.
	f.seed(f.c.B().Set().Key(f.reg.Key("w-anon")).Value(`{"status":"running"}`).Build())
	if rec, ok, err := f.reg.Get(ctx(t), "w-anon"); !ok || err != nil || rec.InstanceID != "w-anon" {
		t.Errorf("Get(w-anon) = %+v, %v, %v", rec, ok, err)
	}
}

func TestRegistryInstancesPrunesDeadMembers(t *testing.T) {
	t.Parallel()
	f := regSetup(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	b := regRecord("w-b", now, 30*time.Second)
	b.ActiveTasks = 1
	f.register(b, 30*time.Second)
	f.register(regRecord("w-a", now, 30*time.Second), 30*time.Second)
	f.register(regRecord("w-stale", now.Add(-time.Hour), 30*time.Second), 30*time.Second) // key alive, heartbeat old
	// A crashed instance (key expired, member left behind) and an unreadable record.
	f.seed(f.c.B().Sadd().Key(f.reg.SetKey()).Member("w-ghost", "w-junk").Build(),
		f.c.B().Set().Key(f.reg.Key("w-junk")).Value("{").Build())

	got, err := f.reg.Instances(ctx(t), now, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, rec := range got.Live {
		ids = append(ids, rec.InstanceID)
	}
	if strings.Join(ids, ",") != "w-a,w-b" {
		t.Fatalf("Live = %v, want the two live ones sorted", ids)
	}
	if got.Live[1] != b {
		t.Errorf("record %+v, want %+v", got.Live[1], b)
	}
	if !slices.Equal(got.Pruned, []string{"w-ghost"}) || got.PruneErr != nil {
		t.Errorf("Pruned %v (%v), want [w-ghost]", got.Pruned, got.PruneErr)
	}
	if len(got.Unreadable) != 1 || got.Unreadable[0].ID != "w-junk" || !errors.Is(got.Unreadable[0], store.ErrBadRecord) {
		t.Errorf("Unreadable %v, want w-junk", got.Unreadable)
	}
	if m := f.members(); !slices.Equal(m, []string{"w-a", "w-b", "w-junk", "w-stale"}) {
		t.Errorf("members after pruning %v: only the ghost goes", m)
	}

	empty := store.NewRegistry(store.OnRedis(f.c), redistest.Root(t, f.c))
	if got, err := empty.Instances(ctx(t), now, time.Minute); err != nil || len(got.Live)+len(got.Pruned)+len(got.Unreadable) != 0 {
		t.Errorf("empty registry: %+v, %v", got, err)
	}
}

// Every call against a Redis that is gone fails within the registry's bound, even with a
// context that has no deadline (rueidis would retry a read for as long as the server is away),
// and the failure is transient.
func TestRegistryFailuresAreTransientAndBounded(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	reg := store.NewRegistry(store.OnRedis(c), "plaita").WithTimeout(300 * time.Millisecond)
	rec := regRecord("w-down", time.Now(), time.Minute)
	if err := reg.Register(ctx(t), rec, time.Minute); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	bg := context.Background()
	calls := map[string]func() error{
		"register":   func() error { return reg.Register(bg, rec, time.Minute) },
		"refresh":    func() error { return second(reg.Refresh(bg, rec, time.Minute)) },
		"deregister": func() error { return reg.Deregister(bg, "w-down") },
		"get":        func() error { _, _, err := reg.Get(bg, "w-down"); return err },
		"alive":      func() error { return second(reg.Alive(bg, "w-down", time.Now(), time.Minute)) },
		"instances":  func() error { return second(reg.Instances(bg, time.Now(), time.Minute)) },
	}
	for name, call := range calls {
		begin := time.Now()
		err := call()
		if took := time.Since(begin); took > 3*time.Second {
			t.Errorf("%s took %s with Redis down: not bounded by the registry's 300ms", name, took)
		}
		if !errors.Is(err, store.ErrRedis) || !model.IsTransient(err) {
			t.Errorf("%s with Redis down: %v, want ErrRedis (transient)", name, err)
		}
	}
}

func TestInstanceRecordFresh(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		rec      store.InstanceRecord
		now      time.Time
		fallback time.Duration
		want     bool
	}{
		{"inside the declared TTL", store.InstanceRecord{HeartbeatAt: at, TTLMillis: 1000}, at.Add(time.Second), 0, true},
		{"past the declared TTL", store.InstanceRecord{HeartbeatAt: at, TTLMillis: 1000}, at.Add(1001 * time.Millisecond), time.Hour, false},
		{"no TTL: the fallback", store.InstanceRecord{HeartbeatAt: at}, at.Add(time.Minute), time.Minute, true},
		{"no TTL: past the fallback", store.InstanceRecord{HeartbeatAt: at}, at.Add(time.Minute + 1), time.Minute, false},
		{"a heartbeat in the future", store.InstanceRecord{HeartbeatAt: at, TTLMillis: 1}, at.Add(-time.Hour), 0, true},
		{"no heartbeat", store.InstanceRecord{TTLMillis: 1000}, at, time.Hour, false},
	}
	for _, tc := range cases {
		if got := tc.rec.Fresh(tc.now, tc.fallback); got != tc.want {
			t.Errorf("%s: Fresh = %v", tc.name, got)
		}
	}
}
