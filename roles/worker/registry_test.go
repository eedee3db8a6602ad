package worker

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

	"plaita/config"
	"plaita/internal/redistest"
	"plaita/store/keys"
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
		Generations: config.Generations{Family: "cf1-aaaaaaaaaaaa", Config: "cfg1-bbbbbbbbbbbb", Budget: "bg1-cccccccccccc"},
		Capacity:    4,
		StartedAt:   time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
	}
}

// regBundle is one test's Redis root and registries on it.
type regBundle struct {
	c    rueidis.Client
	root string
}

func regSetup(t *testing.T) *regBundle {
	t.Helper()
	c := redistest.Client(t)
	return &regBundle{c: c, root: redistest.Root(t, c)}
}

// registry builds a registry for id with the given heartbeat interval, stopped at cleanup.
func (b *regBundle) registry(t *testing.T, id string, interval time.Duration) (*Registry, *metrics.Set) {
	t.Helper()
	set := metrics.NewSet()
	r := NewRegistry(b.c, b.root, regInfo(id), zerolog.Nop(), set)
	r.Interval = interval
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.Stop(ctx)
	})
	return r, set
}

func (b *regBundle) space() keys.Space { return keys.MustFor(b.root, "") }

// record reads an instance's key; ok is false when the key does not exist.
func (b *regBundle) record(t *testing.T, id string) (rec InstanceRecord, raw string, ok bool) {
	t.Helper()
	raw, err := b.c.Do(regCtx(t), b.c.B().Get().Key(b.space().RegistryInstance(id)).Build()).ToString()
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
	ok, err := b.c.Do(regCtx(t), b.c.B().Sismember().Key(b.space().RegistryInstances()).Member(id).Build()).AsBool()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func (b *regBundle) pttl(t *testing.T, id string) time.Duration {
	t.Helper()
	ms, err := b.c.Do(regCtx(t), b.c.B().Pttl().Key(b.space().RegistryInstance(id)).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ms) * time.Millisecond
}

func promOf(set *metrics.Set) string {
	var buf bytes.Buffer
	set.WritePrometheus(&buf)
	return buf.String()
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
	want := InstanceRecord{
		InstanceID: "worker-1", Status: StatusRunning, Host: "host-a", PID: 4242, Role: "worker",
		Queue: "plaita:flow:queue", Consumer: "worker-1", Group: "plaita-workers", DLQKey: "plaita:flow:queue:dlq",
		ConfigFamily: "cf1-aaaaaaaaaaaa", ConfigGeneration: "cfg1-bbbbbbbbbbbb", BudgetGeneration: "bg1-cccccccccccc",
		ActiveTasks: 2, Capacity: 4, HeartbeatAt: clock.Now(), StartedAt: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
		TTLMillis: 30000,
	}
	if rec != want {
		t.Fatalf("record\n got %+v\nwant %+v", rec, want)
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

func TestRegistryHeartbeatRefreshes(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	t.Run("runOnce", func(t *testing.T) {
		t.Parallel()
		r, set := b.registry(t, "w-hb-once", time.Hour)
		clock := newFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
		r.Now = clock.Now
		if err := r.Start(regCtx(t)); err != nil {
			t.Fatal(err)
		}
		clock.Add(7 * time.Second)
		r.SetActive(3)
		if rec, _, _ := b.record(t, "w-hb-once"); rec.ActiveTasks != 0 {
			t.Fatalf("SetActive wrote at once: %+v", rec)
		}
		if err := r.runOnce(regCtx(t)); err != nil {
			t.Fatal(err)
		}
		rec, _, _ := b.record(t, "w-hb-once")
		if rec.ActiveTasks != 3 || !rec.HeartbeatAt.Equal(clock.Now()) {
			t.Fatalf("heartbeat wrote %+v", rec)
		}
		if !strings.Contains(promOf(set), "plaita_worker_heartbeat_timestamp_seconds 1772359207") {
			t.Errorf("heartbeat gauge not advanced:\n%s", promOf(set))
		}
	})
	t.Run("loop", func(t *testing.T) {
		t.Parallel()
		r, _ := b.registry(t, "w-hb-loop", 50*time.Millisecond)
		if err := r.Start(regCtx(t)); err != nil {
			t.Fatal(err)
		}
		first, _, _ := b.record(t, "w-hb-loop")
		r.SetActive(5)
		deadline := time.Now().Add(5 * time.Second)
		for {
			rec, _, ok := b.record(t, "w-hb-loop")
			if ok && rec.ActiveTasks == 5 && rec.HeartbeatAt.After(first.HeartbeatAt) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no heartbeat carried the active count: %+v (ok=%v)", rec, ok)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The key outlives several intervals only because the heartbeat keeps refreshing it.
		time.Sleep(400 * time.Millisecond)
		if _, _, ok := b.record(t, "w-hb-loop"); !ok {
			t.Fatal("key expired although the heartbeat runs")
		}
		if ttl := b.pttl(t, "w-hb-loop"); ttl <= 0 || ttl > 150*time.Millisecond {
			t.Errorf("TTL %s, want ≤ 3 × 50ms", ttl)
		}
	})
}

func TestRegistryHeartbeatRegistersAgainAfterExpiry(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	r, _ := b.registry(t, "w-expired", time.Hour)
	if err := r.Start(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	// An outage longer than the TTL: the key expired and a pruner removed the member.
	sp := b.space()
	cmds := rueidis.Commands{b.c.B().Del().Key(sp.RegistryInstance("w-expired")).Build(),
		b.c.B().Srem().Key(sp.RegistryInstances()).Member("w-expired").Build()}
	for _, cmd := range cmds {
		if err := b.c.Do(regCtx(t), cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.runOnce(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := b.record(t, "w-expired"); !ok || !b.member(t, "w-expired") {
		t.Fatal("the heartbeat did not register the instance again")
	}
	if ttl := b.pttl(t, "w-expired"); ttl <= 0 {
		t.Errorf("re-registered without TTL: %s", ttl)
	}
}

func TestRegistryAlive(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	self, _ := b.registry(t, "w-self", time.Hour)
	other, _ := b.registry(t, "w-other", time.Hour)
	stale, _ := b.registry(t, "w-stale", 0)
	stale.Now = func() time.Time { return time.Now().Add(-time.Hour) } // heartbeat_at an hour ago, key (TTL 30s) still there
	for _, r := range []*Registry{self, other, stale} {
		if err := r.Start(regCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		id   string
		want bool
	}{{"w-self", true}, {"w-other", true}, {"w-stale", false}, {"w-missing", false}}
	for _, tc := range cases {
		got, err := self.Alive(regCtx(t), tc.id)
		if err != nil || got != tc.want {
			t.Errorf("Alive(%s) = %v, %v; want %v", tc.id, got, err, tc.want)
		}
	}
	// The freshness window is the one the writer declared (3 × its interval), not the reader's.
	clock := newFakeClock(time.Now())
	self.Now = clock.Now
	clock.Add(3*time.Hour - time.Minute)
	if ok, _ := self.Alive(regCtx(t), "w-other"); !ok {
		t.Error("a heartbeat inside the writer's TTL must be fresh")
	}
	clock.Add(2 * time.Minute)
	if ok, _ := self.Alive(regCtx(t), "w-other"); ok {
		t.Error("a heartbeat older than the writer's TTL must be stale")
	}
	self.Now = time.Now

	if err := b.c.Do(regCtx(t), b.c.B().Set().Key(b.space().RegistryInstance("w-junk")).Value("not json").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if ok, err := self.Alive(regCtx(t), "w-junk"); ok || !errors.Is(err, ErrBadRecord) {
		t.Errorf("junk record: %v, %v; want false, ErrBadRecord", ok, err)
	}
	other.Stop(regCtx(t))
	if ok, err := self.Alive(regCtx(t), "w-other"); ok || err != nil {
		t.Errorf("after Stop: %v, %v; want false", ok, err)
	}
}

func TestRegistryStopClosesTheGate(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	r, set := b.registry(t, "w-gate", time.Hour)
	if err := r.Start(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	r.Stop(regCtx(t))
	if _, _, ok := b.record(t, "w-gate"); ok || b.member(t, "w-gate") {
		t.Fatal("Stop left the key or the set member")
	}
	if err := r.runOnce(regCtx(t)); !errors.Is(err, ErrRegistryClosed) {
		t.Errorf("heartbeat after Stop: %v", err)
	}
	if err := r.SetStatus(regCtx(t), StatusStopping); !errors.Is(err, ErrRegistryClosed) {
		t.Errorf("SetStatus after Stop: %v", err)
	}
	r.SetActive(9) // in memory only
	if err := r.Start(regCtx(t)); !errors.Is(err, ErrRegistryClosed) {
		t.Errorf("Start after Stop: %v", err)
	}
	if _, _, ok := b.record(t, "w-gate"); ok || b.member(t, "w-gate") {
		t.Fatal("a write after Stop recreated the registration")
	}
	if !strings.Contains(promOf(set), "plaita_worker_registered 0") {
		t.Errorf("registered gauge not reset:\n%s", promOf(set))
	}
	r.Stop(regCtx(t)) // twice is safe

	never, _ := b.registry(t, "w-never", time.Hour)
	never.Stop(regCtx(t)) // without Start is safe
	never.Stop(regCtx(t))
	if err := never.Start(regCtx(t)); !errors.Is(err, ErrRegistryClosed) {
		t.Errorf("Start after Stop without Start: %v", err)
	}
	if _, _, ok := b.record(t, "w-never"); ok {
		t.Fatal("a registry stopped before Start registered")
	}
}

// TestRegistryHeartbeatRacingStop hammers the registry with heartbeats (loop at 1ms and direct
// runOnce calls) and status writes while Stop runs: whatever the interleaving, nothing may
// exist once Stop returned and every writer finished.
func TestRegistryHeartbeatRacingStop(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	for i := range 20 {
		id := "w-race-" + string(rune('a'+i))
		r, _ := b.registry(t, id, time.Millisecond)
		if err := r.Start(regCtx(t)); err != nil {
			t.Fatal(err)
		}
		ctx := regCtx(t)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for n := 0; ; n++ {
					var err error
					if g == 0 && n%3 == 0 {
						err = r.SetStatus(ctx, StatusDraining)
					} else {
						err = r.runOnce(ctx)
					}
					if errors.Is(err, ErrRegistryClosed) {
						return
					}
					if err != nil {
						t.Errorf("write: %v", err)
						return
					}
				}
			}()
		}
		close(start)
		time.Sleep(time.Duration(i%5) * time.Millisecond)
		r.Stop(ctx)
		wg.Wait()
		if _, _, ok := b.record(t, id); ok {
			t.Fatalf("%s: a racing write recreated the key after Stop", id)
		}
		if b.member(t, id) {
			t.Fatalf("%s: a racing write re-added the set member after Stop", id)
		}
	}
}

func TestRegistryInstancesPrunesDeadMembers(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	a, _ := b.registry(t, "w-b", time.Hour)
	c, _ := b.registry(t, "w-a", time.Hour)
	stale, _ := b.registry(t, "w-stale", 0)
	stale.Now = func() time.Time { return time.Now().Add(-time.Hour) }
	for _, r := range []*Registry{a, c, stale} {
		if err := r.Start(regCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	a.SetActive(1)
	if err := a.runOnce(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	sp := b.space()
	// A crashed instance (key expired, member left behind) and an unreadable record.
	cmds := rueidis.Commands{
		b.c.B().Sadd().Key(sp.RegistryInstances()).Member("w-ghost", "w-junk").Build(),
		b.c.B().Set().Key(sp.RegistryInstance("w-junk")).Value("{").Build(),
	}
	for _, cmd := range cmds {
		if err := b.c.Do(regCtx(t), cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := a.Instances(regCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, rec := range got {
		ids = append(ids, rec.InstanceID)
	}
	if strings.Join(ids, ",") != "w-a,w-b" {
		t.Fatalf("Instances = %v, want the two live ones sorted", ids)
	}
	if got[1].ActiveTasks != 1 || got[1].Status != StatusRunning || got[1].ConfigFamily != "cf1-aaaaaaaaaaaa" {
		t.Errorf("record %+v", got[1])
	}
	if b.member(t, "w-ghost") {
		t.Error("the dead member was not pruned")
	}
	for _, id := range []string{"w-a", "w-b", "w-stale", "w-junk"} {
		if !b.member(t, id) {
			t.Errorf("%s was pruned although its key exists", id)
		}
	}

	empty := NewRegistry(b.c, redistest.Root(t, b.c), regInfo("x"), zerolog.Nop(), metrics.NewSet())
	if got, err := empty.Instances(regCtx(t)); err != nil || len(got) != 0 {
		t.Errorf("empty registry: %v, %v", got, err)
	}
}

func TestRegistryInstanceInfoFromConfig(t *testing.T) {
	cfg := cfgWith(t, map[string]string{
		"PLAITA_INSTANCE_ID": "w-cfg", "PLAITA_QUEUE_NAME": "q1", "PLAITA_WORKER_CONCURRENCY": "3",
	})
	info := InstanceInfoFromConfig(cfg)
	if info.InstanceID != "w-cfg" || info.Role != "worker" || info.Queue != "q1" || info.ConsumerName != "w-cfg" ||
		info.DLQKey != config.DLQKey.In(cfg) || info.DLQKey == "" || info.ConsumerGroup == "" || info.Capacity != 3 ||
		info.Generations != cfg.Generations() || info.PID == 0 || info.StartedAt.IsZero() {
		t.Fatalf("info %+v", info)
	}
}

// The heartbeat outlives the context Start was given: a role bounds its start-up with a
// deadline, and a heartbeat tied to it stopped (the instance looked dead one TTL later).
func TestRegistryHeartbeatOutlivesTheStartContext(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	r, _ := b.registry(t, "worker-hb", 50*time.Millisecond)
	startCtx, cancelStart := context.WithTimeout(context.Background(), 5*time.Second)
	if err := r.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	cancelStart()
	first, _, ok := b.record(t, "worker-hb")
	if !ok {
		t.Fatal("not registered")
	}
	// Positive evidence: the heartbeat keeps moving for well over three TTLs (3 × 150 ms).
	deadline := time.Now().Add(10 * time.Second)
	var last InstanceRecord
	for beats := 0; beats < 12; {
		rec, _, ok := b.record(t, "worker-hb")
		if !ok {
			t.Fatalf("registry key gone after %d heartbeats since the start context ended", beats)
		}
		if rec.HeartbeatAt.After(last.HeartbeatAt) {
			last = rec
			beats++
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d heartbeats in 10s after the start context ended", beats)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !last.HeartbeatAt.After(first.HeartbeatAt.Add(450 * time.Millisecond)) {
		t.Fatalf("heartbeat at %s, first at %s: not three TTLs later", last.HeartbeatAt, first.HeartbeatAt)
	}
}
