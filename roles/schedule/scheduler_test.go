package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/test/redistest"
)

// clock is a test clock the schedulers share.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// gate is a TenantGate answering from a map (missing: Fire).
type gate struct {
	mu sync.Mutex
	v  map[string]Verdict
}

func (g *gate) Check(_ context.Context, tenant string) (Verdict, string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.v[tenant]
	return v, "tenant " + tenant + " is disabled", nil
}

func (g *gate) setVerdict(tenant string, v Verdict) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.v == nil {
		g.v = map[string]Verdict{}
	}
	g.v[tenant] = v
}

// bundle is one test's Redis root, stores and clock.
type bundle struct {
	t      testing.TB
	c      rueidis.Client
	root   string
	st     *store.Schedules
	redis  *store.Redis
	flows  *store.Flows
	stream string
	clock  *clock
	gate   *gate
	base   time.Time // a whole second, a minute ahead of the Redis clock; the test clock starts half a second after it
}

func setup(t testing.TB) *bundle {
	t.Helper()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	// The test clock runs well ahead of the Redis clock: a claim (stamped by Redis) is old by the
	// test clock at once, and a takeover waits only for the Redis clock to pass its grace.
	base := time.Now().UTC().Truncate(time.Second).Add(time.Minute)
	b := &bundle{t: t, c: c, root: root, st: store.NewSchedules(store.RedisSchedules(c), root), redis: store.NewRedis(c, store.DefaultSettings(), root),
		flows: store.NewFlows(store.RedisFlows(c), root), stream: root + ":flow:queue", clock: &clock{t: base.Add(500 * time.Millisecond)},
		gate: &gate{}, base: base}
	return b
}

func tctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (b *bundle) must(err error) {
	b.t.Helper()
	if err != nil {
		b.t.Fatal(err)
	}
}

func (b *bundle) publish(tenant, flow, version string, at time.Time) {
	b.t.Helper()
	def := []byte(`{"id":"` + flow + `","version":"` + version + `"}`)
	_, err := b.flows.Publish(tctx(b.t), tenant, flow, version, def, at, func([]byte) (bool, error) { return true, nil })
	b.must(err)
}

// scheduler is one schedule process; enqueue nil is the real queue.Enqueue into the test
// stream.
func (b *bundle) scheduler(instance string, st *store.Schedules, enqueue func(ctx context.Context, env queue.Envelope) (string, error)) *Scheduler {
	if st == nil {
		st = b.st
	}
	if enqueue == nil {
		enqueue = b.enqueue
	}
	return New(Deps{Store: st, Flows: b.flows, Tenants: b.gate, Enqueue: enqueue, Stream: b.stream,
		Started: Executions(b.redis), Instance: instance, Log: zerolog.Nop(), Metrics: metrics.NewSet(), Now: b.clock.Now})
}

func (b *bundle) enqueue(ctx context.Context, env queue.Envelope) (string, error) {
	return queue.Enqueue(ctx, queue.Redis(b.c), b.stream, env)
}

// entries is every start in the test stream, in order.
func (b *bundle) entries() []queue.Envelope {
	b.t.Helper()
	es, err := b.c.Do(tctx(b.t), b.c.B().Xrange().Key(b.stream).Start("-").End("+").Build()).AsXRange()
	b.must(err)
	var out []queue.Envelope
	for _, e := range es {
		env, _, err := queue.Decode(b.stream, e.ID, []byte(e.FieldValues[queue.PayloadField]))
		b.must(err)
		out = append(out, env)
	}
	return out
}

func (b *bundle) create(s store.Schedule) store.ScheduleRecord {
	b.t.Helper()
	rec, err := b.st.Create(tctx(b.t), s, b.clock.Now())
	b.must(err)
	return rec
}

func everySecond(id, tenant string) store.Schedule {
	return store.Schedule{ID: id, TenantID: tenant, Cron: "* * * * * *", TimeZone: "UTC", Enabled: true,
		FlowID: "report", FlowVersion: store.LatestVersion, Input: json.RawMessage(`{"report":"sales"}`)}
}

// Two schedule processes pass at the same moments over ten ticks: each tick is one start, with
// the deterministic execution id of (schedule, tick), whoever won the claim.
func TestTwoSchedulersFireEachTickOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish("acme", "report", "3", b.base)
	rec := b.create(everySecond("tick", "acme"))
	a, z := b.scheduler("s-a", nil, nil), b.scheduler("s-b", nil, nil)
	conflicts := 0
	for i := 1; i <= 10; i++ {
		b.clock.set(b.base.Add(time.Duration(i)*time.Second + 100*time.Millisecond))
		var wg sync.WaitGroup
		var pa, pz Pass
		wg.Go(func() { pa = a.RunOnce(tctx(t)) })
		wg.Go(func() { pz = z.RunOnce(tctx(t)) })
		wg.Wait()
		if pa.Fired+pz.Fired != 1 || pa.Errors+pz.Errors != 0 {
			t.Fatalf("tick %d: passes %+v and %+v, want one start between them", i, pa, pz)
		}
		conflicts += pa.Conflicts + pz.Conflicts
	}
	got := b.entries()
	if len(got) != 10 {
		t.Fatalf("%d starts for 10 ticks", len(got))
	}
	for i, env := range got {
		tick := b.base.Add(time.Duration(i+1) * time.Second)
		if env.ExecutionID != store.ScheduleExecutionID("acme", "tick", rec.CreatedAt, tick) || env.Tenant() != "acme" || env.FlowID != "report" ||
			env.FlowVersion != "3" || string(env.Input) != `{"report":"sales"}` || env.Kind != queue.KindStart {
			t.Fatalf("start %d: %+v", i, env)
		}
	}
	final, err := b.st.Get(tctx(t), "acme", "tick")
	b.must(err)
	if len(final.Pending) != 0 || final.LastFire == nil || !final.LastFire.Tick.Equal(b.base.Add(10*time.Second)) {
		t.Fatalf("record after ten ticks: %+v", final)
	}
	t.Logf("claim conflicts between the two processes: %d", conflicts)
}

// After a stop, the schedule fires once, for the newest tick it missed.
func TestDowntimeFiresOnceForTheMissedTicks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish("", "report", "1", b.base)
	rec := b.create(everySecond("catchup", ""))
	s := b.scheduler("s-a", nil, nil)
	b.clock.set(b.base.Add(1100 * time.Millisecond))
	if p := s.RunOnce(tctx(t)); p.Fired != 1 {
		t.Fatalf("first tick: %+v", p)
	}
	b.clock.set(b.base.Add(6400 * time.Millisecond)) // five ticks later
	if p := s.RunOnce(tctx(t)); p.Fired != 1 {
		t.Fatalf("after the stop: %+v, want one start", p)
	}
	if p := s.RunOnce(tctx(t)); p.Fired != 0 || p.Due != 0 {
		t.Fatalf("a second pass at the same time: %+v", p)
	}
	got := b.entries()
	if len(got) != 2 || got[1].ExecutionID != store.ScheduleExecutionID("", "catchup", rec.CreatedAt, b.base.Add(6*time.Second)) {
		t.Fatalf("starts %+v, want the first tick and the newest missed one", got)
	}
}

// A disabled tenant's ticks are skipped and recorded; when the tenant is active again only
// the ticks from then on fire.
func TestDisabledTenantSkipsAndDoesNotCatchUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish("acme", "report", "1", b.base)
	b.publish("beta", "report", "1", b.base)
	recA := b.create(everySecond("job", "acme"))
	b.create(everySecond("job", "beta"))
	b.gate.setVerdict("acme", Skip)
	s := b.scheduler("s-a", nil, nil)
	for i := 1; i <= 3; i++ {
		b.clock.set(b.base.Add(time.Duration(i)*time.Second + 200*time.Millisecond))
		if p := s.RunOnce(tctx(t)); p.Fired != 1 || p.Skipped != 1 {
			t.Fatalf("tick %d: %+v, want beta fired and acme skipped", i, p)
		}
	}
	rec, err := b.st.Get(tctx(t), "acme", "job")
	b.must(err)
	if rec.LastSkip == nil || !strings.Contains(rec.LastSkip.Reason, "disabled") || rec.LastFire != nil || !rec.LastTick.Equal(b.base.Add(3*time.Second)) {
		t.Fatalf("acme after three skipped ticks: %+v", rec)
	}
	for _, env := range b.entries() {
		if env.Tenant() == "acme" {
			t.Fatalf("a disabled tenant's schedule fired: %+v", env)
		}
	}
	b.gate.setVerdict("acme", Fire)
	b.clock.set(b.base.Add(4200 * time.Millisecond))
	if p := s.RunOnce(tctx(t)); p.Fired != 2 {
		t.Fatalf("tenant active again: %+v", p)
	}
	var acme []queue.Envelope
	for _, env := range b.entries() {
		if env.Tenant() == "acme" {
			acme = append(acme, env)
		}
	}
	if len(acme) != 1 || acme[0].ExecutionID != store.ScheduleExecutionID("acme", "job", recA.CreatedAt, b.base.Add(4*time.Second)) {
		t.Fatalf("acme starts %+v, want only the tick after it was active again", acme)
	}
}

// A disabled schedule is out of the due index; enabled again, it fires from then on.
func TestDisabledScheduleDoesNotFire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish("", "report", "1", b.base)
	b.create(everySecond("off", ""))
	if _, _, err := b.st.SetEnabled(tctx(t), "", "off", false, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	s := b.scheduler("s-a", nil, nil)
	b.clock.set(b.base.Add(5 * time.Second))
	if p := s.RunOnce(tctx(t)); p.Due != 0 || p.Fired != 0 {
		t.Fatalf("disabled: %+v", p)
	}
	if _, _, err := b.st.SetEnabled(tctx(t), "", "off", true, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if p := s.RunOnce(tctx(t)); p.Fired != 0 {
		t.Fatalf("enabled at %s: the ticks while disabled fired: %+v", b.clock.Now(), p)
	}
	b.clock.set(b.base.Add(6100 * time.Millisecond))
	if p := s.RunOnce(tctx(t)); p.Fired != 1 {
		t.Fatalf("the first tick after enabling: %+v", p)
	}
}

// "latest" is resolved when the tick fires; a version that is not published skips the tick.
func TestVersionIsResolvedAtFireTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.create(everySecond("latest", ""))
	fixed := everySecond("fixed", "")
	fixed.FlowVersion = "9"
	b.create(fixed)
	s := b.scheduler("s-a", nil, nil)
	b.clock.set(b.base.Add(1100 * time.Millisecond))
	if p := s.RunOnce(tctx(t)); p.Skipped != 2 || p.Fired != 0 {
		t.Fatalf("nothing published: %+v", p)
	}
	if rec, _ := b.st.Get(tctx(t), "", "fixed"); rec.LastSkip == nil || !strings.Contains(rec.LastSkip.Reason, "not published") {
		t.Fatalf("skip reason: %+v", rec.LastSkip)
	}
	b.publish("", "report", "1", b.base)
	b.clock.set(b.base.Add(2100 * time.Millisecond))
	if p := s.RunOnce(tctx(t)); p.Fired != 1 || p.Skipped != 1 {
		t.Fatalf("v1 published: %+v", p)
	}
	b.publish("", "report", "9", b.base.Add(time.Second))
	b.publish("", "report", "2", b.base.Add(2*time.Second)) // the latest: published last
	b.clock.set(b.base.Add(3100 * time.Millisecond))
	if p := s.RunOnce(tctx(t)); p.Fired != 2 {
		t.Fatalf("v2 and v9 published: %+v", p)
	}
	versions := map[string][]string{}
	for _, env := range b.entries() {
		versions[env.FlowVersion] = append(versions[env.FlowVersion], env.ExecutionID)
	}
	if len(versions["1"]) != 1 || len(versions["2"]) != 1 || len(versions["9"]) != 1 {
		t.Fatalf("versions %v, want latest at 2.1 s on 1, latest at 3.1 s on 2, the fixed one on 9", versions)
	}
}

// failingEnqueue simulates a process killed around its enqueue: before the XADD (written
// false) or after it (written true); either way it never completes its claim.
func (b *bundle) failingEnqueue(written bool) func(ctx context.Context, env queue.Envelope) (string, error) {
	return func(ctx context.Context, env queue.Envelope) (string, error) {
		if written {
			if _, err := b.enqueue(ctx, env); err != nil {
				return "", err
			}
		}
		return "", errors.New("connection reset (simulated crash)")
	}
}

// recoverWith passes s until the claim of tick is completed (the takeover needs the claim to
// be older than the grace by the Redis clock), and returns the record.
func (b *bundle) recoverWith(s *Scheduler, tenant, id string) store.ScheduleRecord {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s.RunOnce(tctx(b.t))
		rec, err := b.st.Get(tctx(b.t), tenant, id)
		b.must(err)
		if len(rec.Pending) == 0 {
			return rec
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the pending claim was never completed: %+v", rec.Pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A process that dies after its claim, before its enqueue: another process completes the tick
// after the grace — one start, with the tick's execution id.
func TestClaimOfADeadProcessIsCompleted(t *testing.T) {
	t.Parallel()
	for _, written := range []bool{false, true} {
		name := "before the enqueue"
		if written {
			name = "after the enqueue"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.st.Grace = 200 * time.Millisecond
			b.publish("", "report", "1", b.base)
			rec := b.create(everySecond("crash", ""))
			dead := b.scheduler("s-dead", nil, b.failingEnqueue(written))
			b.clock.set(b.base.Add(1100 * time.Millisecond))
			if p := dead.RunOnce(tctx(t)); p.Fired != 0 || p.Errors != 1 {
				t.Fatalf("the dying pass: %+v", p)
			}
			pending, _ := b.st.Get(tctx(t), "", "crash")
			if len(pending.Pending) != 1 || pending.Pending[0].By != "s-dead" {
				t.Fatalf("no pending claim: %+v", pending)
			}
			alive := b.scheduler("s-alive", nil, nil)
			got := b.recoverWith(alive, "", "crash")
			starts := b.entries()
			want := store.ScheduleExecutionID("", "crash", rec.CreatedAt, b.base.Add(time.Second))
			if len(starts) != 1 || starts[0].ExecutionID != want {
				t.Fatalf("starts %+v, want exactly one for the tick", starts)
			}
			if got.LastFire == nil || !got.LastFire.Recovered || got.LastFire.By != "s-alive" || got.LastFire.ExecutionID != want {
				t.Fatalf("last fire %+v", got.LastFire)
			}
			if written != (got.LastFire.MessageID == "") {
				t.Fatalf("message id %q: a start found in the stream has none, a start enqueued by the takeover has one", got.LastFire.MessageID)
			}
		})
	}
}

// The dead process's start was enqueued and a worker already took it (the entry is gone from
// the stream, the execution exists): the takeover does not enqueue it again.
func TestClaimWhoseStartAWorkerTookIsNotEnqueuedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.st.Grace = 200 * time.Millisecond
	b.publish("acme", "report", "1", b.base)
	rec := b.create(everySecond("taken", "acme"))
	dead := b.scheduler("s-dead", nil, b.failingEnqueue(true))
	b.clock.set(b.base.Add(1100 * time.Millisecond))
	dead.RunOnce(tctx(t))
	// A worker ran it: the state exists, the entry is acknowledged and deleted.
	id := store.ScheduleExecutionID("acme", "taken", rec.CreatedAt, b.base.Add(time.Second))
	ts, err := b.redis.Tenant("acme")
	b.must(err)
	b.must(ts.Save(tctx(t), &state.Execution{ExecutionID: id, TenantID: "acme", FlowID: "report", FlowVersion: "1",
		Status: state.Completed, StartTime: time.Now(), LastUpdate: time.Now()}))
	b.must(b.c.Do(tctx(t), b.c.B().Del().Key(b.stream).Build()).Error())
	got := b.recoverWith(b.scheduler("s-alive", nil, nil), "acme", "taken")
	if n := len(b.entries()); n != 0 {
		t.Fatalf("the takeover enqueued the start again (%d entries)", n)
	}
	if got.LastFire == nil || !got.LastFire.Recovered || got.LastFire.ExecutionID != id {
		t.Fatalf("last fire %+v", got.LastFire)
	}
}

// A start the queue refuses (input above the bound) is never retried: the tick is skipped
// with the reason.
func TestRefusedStartIsSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish("", "report", "1", b.base)
	b.create(everySecond("big", ""))
	s := b.scheduler("s-a", nil, func(ctx context.Context, env queue.Envelope) (string, error) {
		return queue.Enqueue(ctx, queue.Redis(b.c), b.stream, env, queue.MaxInput(5))
	})
	b.clock.set(b.base.Add(1100 * time.Millisecond))
	if p := s.RunOnce(tctx(t)); p.Skipped != 1 || p.Fired != 0 {
		t.Fatalf("%+v", p)
	}
	rec, _ := b.st.Get(tctx(t), "", "big")
	if len(rec.Pending) != 0 || rec.LastSkip == nil || !strings.Contains(rec.LastSkip.Reason, "too large") {
		t.Fatalf("record %+v", rec)
	}
	if n := len(b.entries()); n != 0 {
		t.Fatalf("%d entries", n)
	}
}

// A due member without a record is dropped; a record that does not decode is parked (not read
// every pass) and never fired.
func TestDeletedAndBadRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish("", "report", "1", b.base)
	b.create(everySecond("gone", ""))
	b.create(everySecond("junk", ""))
	key, _ := b.redis.Tenant("")
	rk, _ := key.Space().Schedule("gone")
	b.must(b.c.Do(tctx(t), b.c.B().Del().Key(rk).Build()).Error())
	jk, _ := key.Space().Schedule("junk")
	b.must(b.c.Do(tctx(t), b.c.B().Hset().Key(jk).FieldValue().FieldValue("def", "{not json").Build()).Error())
	s := b.scheduler("s-a", nil, nil)
	b.clock.set(b.base.Add(2 * time.Second))
	if p := s.RunOnce(tctx(t)); p.Fired != 0 || p.Due != 2 {
		t.Fatalf("%+v", p)
	}
	if _, ok, _ := b.st.DueScore(tctx(t), "", "gone"); ok {
		t.Error("the deleted schedule's due member is still there")
	}
	if at, ok, _ := b.st.DueScore(tctx(t), "", "junk"); !ok || !at.IsZero() {
		t.Errorf("the bad record is due at %v (%v), want parked at +inf", at, ok)
	}
	if p := s.RunOnce(tctx(t)); p.Due != 0 {
		t.Fatalf("second pass %+v", p)
	}
}

// The loop runs passes every interval until stopped; a stopping pass finishes the schedule it
// began.
func TestLoopRunsEveryInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publish("", "report", "1", b.base)
	if _, err := b.st.Create(tctx(t), everySecond("loop", ""), time.Now()); err != nil { // the loop runs on the real clock
		t.Fatal(err)
	}
	s := New(Deps{Store: b.st, Flows: b.flows, Tenants: b.gate, Enqueue: b.enqueue, Stream: b.stream, Started: Executions(b.redis),
		Instance: "s-loop", Interval: 20 * time.Millisecond, Log: zerolog.Nop(), Metrics: metrics.NewSet()})
	if err := s.Start(tctx(t)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(b.entries()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the loop fired fewer than two ticks in 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Stop(tctx(t))
	s.Stop(tctx(t))
	rec, _ := b.st.Get(tctx(t), "", "loop")
	if len(rec.Pending) != 0 {
		t.Fatalf("Stop left a claim pending: %+v", rec.Pending)
	}
	seen := map[string]bool{}
	for _, env := range b.entries() {
		if seen[env.ExecutionID] {
			t.Fatalf("tick fired twice: %s", env.ExecutionID)
		}
		seen[env.ExecutionID] = true
	}
}

func TestExecutionIDIsPerScheduleAndTick(t *testing.T) {
	t.Parallel()
	c, t0 := time.Unix(100, 0), time.Unix(200, 0)
	a := store.ScheduleExecutionID("", "s", c, t0)
	if a != store.ScheduleExecutionID("default", "s", c, t0) || !strings.HasPrefix(a, "ex_") || len(a) != 27 {
		t.Fatalf("%s", a)
	}
	for _, other := range []string{store.ScheduleExecutionID("acme", "s", c, t0), store.ScheduleExecutionID("", "t", c, t0), store.ScheduleExecutionID("", "s", c.Add(time.Millisecond), t0),
		store.ScheduleExecutionID("", "s", c, t0.Add(time.Second))} {
		if other == a {
			t.Fatalf("collision: %s", a)
		}
	}
}

// A tenant disabled between a claim and its takeover: the pending start is not enqueued, the
// tick is recorded as skipped.
func TestPendingClaimOfADisabledTenantIsSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.st.Grace = 200 * time.Millisecond
	b.publish("acme", "report", "1", b.base)
	b.create(everySecond("off", "acme"))
	b.clock.set(b.base.Add(1100 * time.Millisecond))
	b.scheduler("s-dead", nil, b.failingEnqueue(false)).RunOnce(tctx(t))
	b.gate.setVerdict("acme", Skip)
	got := b.recoverWith(b.scheduler("s-alive", nil, nil), "acme", "off")
	if n := len(b.entries()); n != 0 {
		t.Fatalf("%d starts for a disabled tenant", n)
	}
	if got.LastFire != nil || got.LastSkip == nil || !strings.Contains(got.LastSkip.Reason, "disabled") {
		t.Fatalf("record %+v", got)
	}
}
