package presence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/store"
	"plaita/test/redistest"
)

// regCtx is a bounded context: rueidis retries reads for as long as the server is away.
func regCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func regInfo(id string) InstanceInfo {
	return InstanceInfo{
		InstanceID: id, Role: "worker", Host: "host-a", PID: 4242,
		Queue: "plaita:flow:queue", ConsumerGroup: "plaita-workers", ConsumerName: id, DLQKey: "plaita:flow:queue:dlq",
		Generations: Generations{Family: "cf1-aaaaaaaaaaaa", Config: "cfg1-bbbbbbbbbbbb", Budget: "bg1-cccccccccccc"},
		Capacity:    4,
		StartedAt:   time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
	}
}

// regBundle is one test's Redis root and registries on it.
type regBundle struct {
	c    rueidis.Client
	root string
	st   *store.Registry
}

func regSetup(t *testing.T) *regBundle {
	t.Helper()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	return &regBundle{c: c, root: root, st: store.NewRegistry(store.OnRedis(c), root)}
}

// registry builds a registry for id with the given heartbeat interval, stopped at cleanup.
func (b *regBundle) registry(t *testing.T, id string, interval time.Duration) (*Registry, *metrics.Set) {
	t.Helper()
	return b.registryLog(t, id, interval, zerolog.Nop())
}

func (b *regBundle) registryLog(t *testing.T, id string, interval time.Duration, log zerolog.Logger) (*Registry, *metrics.Set) {
	t.Helper()
	set := metrics.NewSet()
	r := New(b.st, regInfo(id), log, set)
	r.Interval = interval
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.Stop(ctx)
	})
	return r, set
}

// record reads an instance's key; ok is false when the key does not exist.
func (b *regBundle) record(t *testing.T, id string) (rec store.InstanceRecord, raw string, ok bool) {
	t.Helper()
	raw, err := b.c.Do(regCtx(t), b.c.B().Get().Key(b.st.Key(id)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return rec, "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		t.Fatalf("record %q: %v", raw, err)
	}
	return rec, raw, true
}

func (b *regBundle) member(t *testing.T, id string) bool {
	t.Helper()
	ok, err := b.c.Do(regCtx(t), b.c.B().Sismember().Key(b.st.SetKey()).Member(id).Build()).AsBool()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func (b *regBundle) pttl(t *testing.T, id string) time.Duration {
	t.Helper()
	ms, err := b.c.Do(regCtx(t), b.c.B().Pttl().Key(b.st.Key(id)).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ms) * time.Millisecond
}

// seed writes a value the registry itself never writes (a crashed writer, an operator's typo).
func (b *regBundle) seed(t *testing.T, cmds ...rueidis.Completed) {
	t.Helper()
	for _, cmd := range cmds {
		if err := b.c.Do(regCtx(t), cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
}

func promOf(set *metrics.Set) string {
	var buf bytes.Buffer
	set.WritePrometheus(&buf)
	return buf.String()
}

// waitFor polls cond until it holds; the test fails with what after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitWrites waits until r has written n more times than it had when called.
func waitWrites(t *testing.T, r *Registry, n int64) {
	t.Helper()
	target := r.writes.Load() + n
	waitFor(t, "registry writes", 10*time.Second, func() bool { return r.writes.Load() >= target })
}

// logSink collects a logger's JSON lines, safely for concurrent writers.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// events counts the lines whose event field is ev.
func (s *logSink) events(ev string) int {
	return strings.Count(s.String(), `"event":"`+ev+`"`)
}

// fakeClock is a settable Now.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.Set(t)
	return c
}
func (c *fakeClock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) Now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

func TestRegistryWritesRecordWithTTLAndMembership(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	r, set := b.registry(t, "worker-1", 0) // default interval: 10s, TTL 30s
	clock := newFakeClock(time.Date(2026, 3, 1, 10, 0, 5, 0, time.UTC))
	r.Now = clock.Now
	r.SetActive(2)
	if err := r.Start(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	rec, raw, ok := b.record(t, "worker-1")
	if !ok {
		t.Fatal("no registry key after Start")
	}
	want := store.InstanceRecord{
		InstanceID: "worker-1", Status: StatusRunning, Host: "host-a", PID: 4242, Role: "worker",
		Queue: "plaita:flow:queue", Consumer: "worker-1", Group: "plaita-workers", DLQKey: "plaita:flow:queue:dlq",
		ConfigFamily: "cf1-aaaaaaaaaaaa", ConfigGeneration: "cfg1-bbbbbbbbbbbb", BudgetGeneration: "bg1-cccccccccccc",
		ActiveTasks: 2, Capacity: 4, HeartbeatAt: clock.Now(), StartedAt: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
		TTLMillis: 30000,
	}
	if rec != want {
		t.Fatalf("record\n got %+v\nwant %+v", rec, want)
	}
	if snap := r.Snapshot(); snap != want {
		t.Errorf("Snapshot\n got %+v\nwant %+v", snap, want)
	}
	// The documented wire names, so the console can rely on them.
	for _, f := range []string{`"status":"running"`, `"host":"host-a"`, `"pid":4242`, `"role":"worker"`, `"queue":`, `"consumer":"worker-1"`,
		`"group":"plaita-workers"`, `"dlq_key":`, `"config_family":`, `"config_generation":`, `"budget_generation":`,
		`"active_tasks":2`, `"capacity":4`, `"heartbeat_at":"2026-03-01T10:00:05Z"`, `"started_at":"2026-03-01T10:00:00Z"`, `"ttl_ms":30000`} {
		if !strings.Contains(raw, f) {
			t.Errorf("record lacks %s: %s", f, raw)
		}
	}
	if ttl := b.pttl(t, "worker-1"); ttl <= 20*time.Second || ttl > 30*time.Second {
		t.Errorf("TTL %s, want ≈ 3 × 10s", ttl)
	}
	if !b.member(t, "worker-1") {
		t.Error("instance not in the instances set")
	}
	if r.Key() != b.root+":registry:instance:worker-1" {
		t.Errorf("key %s", r.Key())
	}
	text := promOf(set)
	for _, want := range []string{
		"plaita_worker_heartbeat_timestamp_seconds 1772359205", "plaita_worker_draining 0",
		"plaita_worker_active_tasks 2", "plaita_worker_registered 1",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
	if err := r.Start(regCtx(t)); err == nil {
		t.Error("a second Start must fail")
	}
}

// plaita dev runs several roles in one process on one metrics set: each role's presence has
// its own gauges.
func TestRegistryMetricsAreNamedAfterTheRole(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	set := metrics.NewSet()
	worker := New(b.st, regInfo("w-role"), zerolog.Nop(), set)
	info := regInfo("c-role")
	info.Role = "Console"
	console := New(b.st, info, zerolog.Nop(), set)
	for _, r := range []*Registry{worker, console} {
		r.Interval = time.Hour
		t.Cleanup(func() { r.Stop(context.Background()) })
	}
	worker.SetActive(3)
	console.SetActive(1)
	if err := console.SetStatus(regCtx(t), StatusDraining); err != nil {
		t.Fatal(err)
	}
	text := promOf(set)
	for _, want := range []string{"plaita_worker_active_tasks 3", "plaita_console_active_tasks 1",
		"plaita_worker_draining 0", "plaita_console_draining 1"} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
}

func TestRegistryStatusIsWrittenAtOnce(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	r, set := b.registry(t, "w-status", time.Hour) // no heartbeat during the test
	if err := r.Start(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{StatusDraining, StatusStopping} {
		if err := r.SetStatus(regCtx(t), st); err != nil {
			t.Fatal(err)
		}
		if rec, _, _ := b.record(t, "w-status"); rec.Status != st {
			t.Fatalf("after SetStatus(%s) the key says %q", st, rec.Status)
		}
		if r.Status() != st {
			t.Errorf("Status() = %q after SetStatus(%s)", r.Status(), st)
		}
		if !strings.Contains(promOf(set), "plaita_worker_draining 1") {
			t.Errorf("draining gauge not 1 in %s", st)
		}
		if ttl := b.pttl(t, "w-status"); ttl <= 0 {
			t.Errorf("status write lost the TTL: %s", ttl)
		}
	}
	if err := r.SetStatus(regCtx(t), StatusRunning); !errors.Is(err, ErrBadStatus) {
		t.Errorf("stopping → running: want ErrBadStatus, got %v", err)
	}
	if err := r.SetStatus(regCtx(t), "paused"); !errors.Is(err, ErrBadStatus) {
		t.Errorf("unknown status: want ErrBadStatus, got %v", err)
	}
	if rec, _, _ := b.record(t, "w-status"); rec.Status != StatusStopping {
		t.Errorf("a refused status was written: %q", rec.Status)
	}
}

func TestRegistryStatusBeforeStartIsWrittenByStart(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	r, _ := b.registry(t, "w-early", time.Hour)
	if err := r.SetStatus(regCtx(t), StatusDraining); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := b.record(t, "w-early"); ok {
		t.Fatal("SetStatus before Start registered the instance")
	}
	if err := r.Start(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	if rec, _, _ := b.record(t, "w-early"); rec.Status != StatusDraining {
		t.Fatalf("Start wrote %q", rec.Status)
	}
}
