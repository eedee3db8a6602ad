package presence

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/service"
	"plaita/store"
	"plaita/test/redistest"
)

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
		var logs logSink
		// The key lives three intervals: a heartbeat late by two of them lets it expire. 300 ms
		// leaves 600 ms of margin — 100 ms (50 ms intervals) was exceeded once on a 2-core CI
		// host at load 10, which says nothing about the heartbeat.
		r, _ := b.registryLog(t, "w-hb-loop", 300*time.Millisecond, zerolog.New(&logs))
		if err := r.Start(regCtx(t)); err != nil {
			t.Fatal(err)
		}
		first, _, _ := b.record(t, "w-hb-loop")
		r.SetActive(5)
		waitFor(t, "a heartbeat carrying the active count", 10*time.Second, func() bool {
			rec, _, ok := b.record(t, "w-hb-loop")
			return ok && rec.ActiveTasks == 5 && rec.HeartbeatAt.After(first.HeartbeatAt)
		})
		// Eight heartbeats span well over two TTLs (3 × 300ms): each one found the key still
		// there and refreshed it (a key that had expired would be registered again, and say so).
		waitWrites(t, r, 8)
		if _, _, ok := b.record(t, "w-hb-loop"); !ok {
			t.Fatal("key gone although the heartbeat runs")
		}
		if n := logs.events("worker.reregistered"); n != 0 {
			t.Fatalf("the key expired between heartbeats %d times:\n%s", n, logs.String())
		}
		if ttl := b.pttl(t, "w-hb-loop"); ttl <= 0 || ttl > 900*time.Millisecond {
			t.Errorf("TTL %s, want ≤ 3 × 300ms", ttl)
		}
	})
}

func TestRegistryHeartbeatRegistersAgainAfterExpiry(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	var logs logSink
	r, _ := b.registryLog(t, "w-expired", time.Hour, zerolog.New(&logs))
	if err := r.Start(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	// An outage longer than the TTL: the key expired and a pruner removed the member.
	if err := b.st.Deregister(regCtx(t), "w-expired"); err != nil {
		t.Fatal(err)
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
	if n := logs.events("worker.reregistered"); n != 1 {
		t.Errorf("%d reregistered events, want 1:\n%s", n, logs.String())
	}
}

// A heartbeat that cannot reach Redis is counted every time and logged once per outage; the
// first one that works again says so, and registers again when the key is gone.
func TestRegistryHeartbeatFailuresAreLoggedOncePerOutage(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	var logs logSink
	set := metrics.NewSet()
	r := New(store.NewRegistry(store.OnRedis(c), "plaita"), regInfo("w-outage"), zerolog.New(&logs), set)
	r.Interval = time.Hour // heartbeats are driven by the test; each Redis call is bounded by 5s
	t.Cleanup(func() { r.Stop(context.Background()) })
	if err := r.Start(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	for range 3 {
		if err := r.runOnce(regCtx(t)); !errors.Is(err, store.ErrRedis) {
			t.Fatalf("heartbeat with Redis down: %v", err)
		}
	}
	if !strings.Contains(promOf(set), "plaita_worker_heartbeat_failures_total 3") {
		t.Errorf("failures not counted:\n%s", promOf(set))
	}
	if n := logs.events("worker.heartbeat_failed"); n != 1 {
		t.Errorf("%d heartbeat_failed lines for one outage, want 1:\n%s", n, logs.String())
	}
	srv.Restart() // its data is gone, as after an outage longer than the TTL
	// The client may still hold the dead connection for one more call.
	waitFor(t, "a heartbeat that works after the restart", 10*time.Second, func() bool { return r.runOnce(regCtx(t)) == nil })
	// The restarted server lost the key: a heartbeat registered it again (logged when that
	// heartbeat went through completely, which a call on the stale connection may prevent).
	if logs.events("worker.heartbeat_failed") != 1 || logs.events("worker.heartbeat_recovered") != 1 || logs.events("worker.reregistered") > 1 {
		t.Errorf("recovery not logged once:\n%s", logs.String())
	}
	if ok, err := r.Alive(regCtx(t), "w-outage"); !ok || err != nil {
		t.Errorf("after the outage Alive = %v, %v", ok, err)
	}
	if live, err := r.Instances(regCtx(t)); err != nil || len(live) != 1 || live[0].InstanceID != "w-outage" {
		t.Errorf("after the outage Instances = %+v, %v; want the instance back in the set", live, err)
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

	b.seed(t, b.c.B().Set().Key(b.st.Key("w-junk")).Value("not json").Build())
	if ok, err := self.Alive(regCtx(t), "w-junk"); ok || !errors.Is(err, store.ErrBadRecord) {
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
	if err := r.runOnce(regCtx(t)); !errors.Is(err, ErrClosed) {
		t.Errorf("heartbeat after Stop: %v", err)
	}
	if err := r.SetStatus(regCtx(t), StatusStopping); !errors.Is(err, ErrClosed) {
		t.Errorf("SetStatus after Stop: %v", err)
	}
	r.SetActive(9) // in memory only
	if err := r.Start(regCtx(t)); !errors.Is(err, ErrClosed) || !errors.Is(err, service.ErrStopped) {
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
	if err := never.Start(regCtx(t)); !errors.Is(err, ErrClosed) {
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
			wg.Go(func() {
				<-start
				for n := 0; ; n++ {
					var err error
					if g == 0 && n%3 == 0 {
						err = r.SetStatus(ctx, StatusDraining)
					} else {
						err = r.runOnce(ctx)
					}
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("write: %v", err)
						return
					}
				}
			})
		}
		close(start)
		// Stop lands a varying number of writes into the race, never before one went through.
		waitWrites(t, r, int64(1+i%5))
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
	var logs logSink
	a, _ := b.registryLog(t, "w-b", time.Hour, zerolog.New(&logs))
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
	// A crashed instance (key expired, member left behind) and an unreadable record.
	b.seed(t, b.c.B().Sadd().Key(b.st.SetKey()).Member("w-ghost", "w-junk").Build(),
		b.c.B().Set().Key(b.st.Key("w-junk")).Value("{").Build())
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
	if logs.events("registry.pruned") != 1 || logs.events("registry.bad_record") != 1 {
		t.Errorf("prune and bad record not logged:\n%s", logs.String())
	}

	empty := New(store.NewRegistry(store.OnRedis(b.c), redistest.Root(t, b.c)), regInfo("x"), zerolog.Nop(), metrics.NewSet())
	if got, err := empty.Instances(regCtx(t)); err != nil || len(got) != 0 {
		t.Errorf("empty registry: %v, %v", got, err)
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
	var last store.InstanceRecord
	waitFor(t, "heartbeats three TTLs after the start context ended", 10*time.Second, func() bool {
		rec, _, ok := b.record(t, "worker-hb")
		if !ok {
			t.Fatalf("registry key gone after the start context ended (last heartbeat %s)", last.HeartbeatAt)
		}
		last = rec
		return rec.HeartbeatAt.After(first.HeartbeatAt.Add(450 * time.Millisecond))
	})
}
