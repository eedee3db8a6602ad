package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine/state"
	"plaita/test/redistest"
)

// The member is byte for byte the format of docs/wakeups.md; the score is the due time in ms.
func TestDelayScheduleMemberAndScore(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	d, err := NewDelay(RedisDelays(c), root+":delay:queue")
	if err != nil {
		t.Fatal(err)
	}
	if d.ScheduledKey() != root+":delay:queue:scheduled" || DelayScheduledKey("plaita:delay:queue") != "plaita:delay:queue:scheduled" {
		t.Fatalf("scheduled key %q", d.ScheduledKey())
	}
	ctx := testCtx(t)
	due := time.Date(2026, 11, 29, 14, 0, 0, 500000000, time.FixedZone("CET", 3600))
	e := DelayEntry{ExecutionID: "ex_1", TenantID: "default", FlowID: "reminder", FlowVersion: "1",
		ResumeType: state.ResumeContinue, Node: "wait_an_hour", Due: due}
	for range 2 { // idempotent: one member
		if err := d.Schedule(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	e2 := e
	e2.ResumeType, e2.Node, e2.Due = state.ResumeTimeout, "wait_paid", due.Add(time.Hour)
	if err := d.Schedule(ctx, e2); err != nil {
		t.Fatal(err)
	}
	res, err := c.Do(ctx, c.B().Zrange().Key(d.ScheduledKey()).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil || len(res) != 2 {
		t.Fatalf("scheduled: %v %v", res, err)
	}
	const want = `{"execution_id":"ex_1","tenant_id":"default","flow_id":"reminder","flow_version":"1",` +
		`"resume_type":"continue","node":"wait_an_hour","due":"2026-11-29T13:00:00.5Z"}`
	if res[0].Member != want || int64(res[0].Score) != due.UnixMilli() {
		t.Errorf("member %s score %v\nwant   %s score %d", res[0].Member, int64(res[0].Score), want, due.UnixMilli())
	}
	var back DelayEntry
	if err := json.Unmarshal([]byte(res[1].Member), &back); err != nil || back.ResumeType != state.ResumeTimeout ||
		!back.Due.Equal(e2.Due) || int64(res[1].Score) != e2.Due.UnixMilli() {
		t.Errorf("timeout entry %+v (score %v) %v", back, res[1].Score, err)
	}
}

func TestDelayRefusesBadInput(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	if _, err := NewDelay(RedisDelays(c), ""); err == nil {
		t.Error("an empty delay queue name must be refused")
	}
	if _, err := NewDelay(nil, "x"); err == nil {
		t.Error("a nil driver must be refused")
	}
	d, err := NewDelay(RedisDelays(c), root+":delay:queue")
	if err != nil {
		t.Fatal(err)
	}
	ok := DelayEntry{ExecutionID: "ex_1", ResumeType: state.ResumeContinue, Due: time.Now()}
	for name, mod := range map[string]func(*DelayEntry){
		"no id":          func(e *DelayEntry) { e.ExecutionID = "" },
		"no resume type": func(e *DelayEntry) { e.ResumeType = "" },
		"no due time":    func(e *DelayEntry) { e.Due = time.Time{} },
	} {
		e := ok
		mod(&e)
		if err := d.Schedule(testCtx(t), e); !errors.Is(err, ErrBadDelayEntry) {
			t.Errorf("%s: %v, want ErrBadDelayEntry", name, err)
		}
	}
	if n, err := c.Do(testCtx(t), c.B().Exists().Key(d.ScheduledKey()).Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("refused entries wrote the queue: %d %v", n, err)
	}
}

// A due time the queue cannot hold — the zero time an until of 0001-01-01 gave, anything
// before 1970, anything past what JSON writes — is refused as ErrBadDelayEntry (permanent: the
// worker ends the execution in error rather than retry it) and nothing is written; every time
// from 1970 on is taken, the past included (due at once).
func TestDelayScheduleBoundsOfTheDueTime(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	d, err := NewDelay(RedisDelays(c), root+":delay:queue")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	entry := func(due time.Time) DelayEntry {
		return DelayEntry{ExecutionID: "ex_1", TenantID: "default", FlowID: "f", FlowVersion: "1", ResumeType: state.ResumeContinue, Node: "nap", Due: due}
	}
	for _, tc := range []struct {
		name string
		due  time.Time
		msg  string
	}{
		{"the zero time", time.Time{}, "due time 0001-01-01T00:00:00Z is the zero time"},
		{"year 0001", time.Date(1, 6, 15, 0, 0, 0, 0, time.UTC), "due time 0001-06-15T00:00:00Z is before 1970-01-01T00:00:00Z"},
		{"just before the epoch", time.UnixMilli(MinDelayDueMillis).Add(-time.Millisecond), "is before 1970-01-01T00:00:00Z"},
		{"wrapped around", time.Now().Add(time.Duration(math.MinInt64)), "is before 1970-01-01T00:00:00Z"},
		{"year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "is after 9999-12-31T23:59:59.999Z"},
	} {
		err := d.Schedule(ctx, entry(tc.due))
		if !errors.Is(err, ErrBadDelayEntry) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("schedule %s: %v, want ErrBadDelayEntry with %q", tc.name, err, tc.msg)
		}
		if err := d.Reschedule(ctx, entry(time.Now()), tc.due); !errors.Is(err, ErrBadDelayEntry) {
			t.Errorf("reschedule at %s: %v, want ErrBadDelayEntry", tc.name, err)
		}
	}
	if n, err := c.Do(ctx, c.B().Exists().Key(d.ScheduledKey()).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("refused entries wrote the queue: %d %v", n, err)
	}
	for _, due := range []time.Time{time.UnixMilli(MinDelayDueMillis), time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC), time.Now().Add(87600 * time.Hour),
		time.UnixMilli(MaxDelayDueMillis)} {
		e := entry(due)
		if err := d.Schedule(ctx, e); err != nil {
			t.Fatalf("schedule due %s: %v", due, err)
		}
		l, err := d.Lookup(ctx, e)
		if err != nil || !l.Scheduled || l.At.UnixMilli() != due.UnixMilli() {
			t.Fatalf("due %s: lookup %+v %v", due, l, err)
		}
	}
}

// delayFix is a delay queue and a task stream under a private root.
type delayFix struct {
	c      rueidis.Client
	d      *Delay
	stream string
	opts   MoveOptions
}

func newDelayFix(t *testing.T, c rueidis.Client, root string) *delayFix {
	t.Helper()
	d, err := NewDelay(RedisDelays(c), root+":delay:queue")
	if err != nil {
		t.Fatal(err)
	}
	stream := root + ":flow:queue"
	return &delayFix{c: c, d: d, stream: stream, opts: MoveOptions{Stream: stream, MaxAttempts: 3, RetryBase: time.Second, RetryMax: 4 * time.Second,
		Generations: Generations{Family: "cf1-test", Config: "cfg1-test", Budget: "bg1-test"}, EffectiveAt: time.Unix(1700000000, 0)}}
}

func entryAt(id string, rt state.ResumeType, due time.Time) DelayEntry {
	return DelayEntry{ExecutionID: id, TenantID: "default", FlowID: "f", FlowVersion: "1", ResumeType: rt, Node: "wait", Due: due}
}

func (f *delayFix) schedule(t *testing.T, es ...DelayEntry) {
	t.Helper()
	for _, e := range es {
		if err := f.d.Schedule(testCtx(t), e); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *delayFix) zadd(t *testing.T, member string, at time.Time) {
	t.Helper()
	if err := f.c.Do(testCtx(t), f.c.B().Zadd().Key(f.d.ScheduledKey()).ScoreMember().ScoreMember(float64(at.UnixMilli()), member).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

func (f *delayFix) move(t *testing.T, now time.Time) MoveReport {
	t.Helper()
	rep, err := f.d.MoveDue(testCtx(t), now, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// sent decodes every task on the stream.
func (f *delayFix) sent(t *testing.T) []Envelope {
	t.Helper()
	es, err := f.c.Do(testCtx(t), f.c.B().Xrange().Key(f.stream).Start("-").End("+").Build()).AsXRange()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	var out []Envelope
	for _, e := range es {
		env, _, err := Decode(f.stream, e.ID, []byte(e.FieldValues[PayloadField]))
		if err != nil {
			t.Fatalf("entry %s does not decode: %v", e.ID, err)
		}
		out = append(out, env)
	}
	return out
}

func (f *delayFix) card(t *testing.T, key string) int64 {
	t.Helper()
	n, err := f.c.Do(testCtx(t), f.c.B().Zcard().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *delayFix) hlen(t *testing.T, key string) int64 {
	t.Helper()
	n, err := f.c.Do(testCtx(t), f.c.B().Hlen().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Due members become resumes carrying their wake-up mark; a member that is not due stays; a
// malformed member and one no worker could run go to :dead at once, with the reason.
func TestDelayMoveDueSendsResumes(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	f := newDelayFix(t, c, redistest.Root(t, c))
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cont := entryAt("ex_a", state.ResumeContinue, now.Add(-2*time.Second))
	tmo := entryAt("ex_b", state.ResumeTimeout, now)
	tmo.TenantID, tmo.Node = "acme", "wait_paid"
	later := entryAt("ex_c", state.ResumeContinue, now.Add(time.Millisecond))
	f.schedule(t, cont, tmo, later)
	f.zadd(t, "not json", now.Add(-time.Hour))
	badTenant := entryAt("ex_d", state.ResumeContinue, now.Add(-time.Minute))
	badTenant.TenantID = "Not A Slug"
	f.schedule(t, badTenant)
	f.zadd(t, `{"execution_id":"ex_e","resume_type":"event","node":"w","due":"2026-11-29T11:00:00Z"}`, now.Add(-time.Hour))

	rep := f.move(t, now)
	if len(rep.Fired) != 2 || len(rep.Dead) != 3 || len(rep.Retried) != 0 || rep.Skipped != 0 || rep.Full {
		t.Fatalf("report %+v", rep)
	}
	if rep.Fired[0].Entry.ExecutionID != "ex_a" || rep.Fired[0].Late != 2*time.Second || rep.Fired[1].Entry.ExecutionID != "ex_b" {
		t.Errorf("fired %+v", rep.Fired)
	}
	for _, d := range rep.Dead {
		if d.Record.Reason != DelayReasonMalformed || d.Record.Detail == "" || !d.Record.At.Equal(now) {
			t.Errorf("dead %+v", d)
		}
	}
	sent := f.sent(t)
	if len(sent) != 2 {
		t.Fatalf("sent %d tasks", len(sent))
	}
	for i, want := range []DelayEntry{cont, tmo} {
		env := sent[i]
		if env.Kind != KindResume || env.ResumeType != want.ResumeType || env.ExecutionID != want.ExecutionID || env.Tenant() != want.TenantID ||
			env.FlowID != "f" || env.FlowVersion != "1" || env.SourceMessageID != want.CarrierID() ||
			env.ConfigFamily != "cf1-test" || env.BudgetGeneration != "bg1-test" || !env.CreatedAt.Equal(now) {
			t.Errorf("task %d: %+v", i, env)
		}
		w, ok, err := ParseWakeup(env)
		if !ok || err != nil || w.Node != want.Node || !w.Due.Equal(want.Due) {
			t.Errorf("task %d wake-up %+v %v %v", i, w, ok, err)
		}
		if back := WakeupEntry(env, w); back != want {
			t.Errorf("task %d names entry %+v, want %+v", i, back, want)
		}
	}
	if want := "delay:ex_a:wait:" + strconv.FormatInt(cont.Due.UnixMilli(), 10); cont.CarrierID() != want {
		t.Errorf("carrier id %q, want %q", cont.CarrierID(), want)
	}
	if n := f.card(t, f.d.ScheduledKey()); n != 1 {
		t.Errorf("%d members left, want the one not due", n)
	}
	dead, err := f.d.ListDead(testCtx(t))
	if err != nil || len(dead) != 3 {
		t.Fatalf("dead %+v %v", dead, err)
	}
	// Nothing is due any more; the last one fires when its time comes.
	if rep := f.move(t, now); len(rep.Fired)+len(rep.Dead) != 0 {
		t.Errorf("second pass %+v", rep)
	}
	if rep := f.move(t, now.Add(time.Millisecond)); len(rep.Fired) != 1 || rep.Fired[0].Entry != later {
		t.Errorf("third pass %+v", rep)
	}
}

// A batch takes the oldest members first and says when it was full.
func TestDelayMoveDueBatches(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	f := newDelayFix(t, c, redistest.Root(t, c))
	f.opts.Batch = 3
	now := time.Now()
	for i := range 5 {
		f.schedule(t, entryAt(fmt.Sprintf("ex_%d", i), state.ResumeContinue, now.Add(-time.Duration(5-i)*time.Second)))
	}
	rep := f.move(t, now)
	if !rep.Full || len(rep.Fired) != 3 || rep.Fired[0].Entry.ExecutionID != "ex_0" || rep.Fired[2].Entry.ExecutionID != "ex_2" {
		t.Fatalf("first batch %+v", rep)
	}
	if rep := f.move(t, now); rep.Full || len(rep.Fired) != 2 {
		t.Fatalf("second batch %+v", rep)
	}
}

// A failing XADD is counted and retried later (the member moves back, so it never holds up
// the others); past MaxAttempts it goes to :dead once, with the error, and :attempts is
// cleared. The clock is the pass's argument: no sleeping.
func TestDelayEnqueueFailureRetriesThenDead(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	f := newDelayFix(t, c, redistest.Root(t, c))
	// The stream key holds a string: every XADD fails with WRONGTYPE.
	if err := c.Do(testCtx(t), c.B().Set().Key(f.stream).Value("not a stream").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	e := entryAt("ex_p", state.ResumeContinue, now)
	f.schedule(t, e)
	member, _ := e.member()
	for attempt, wait := range []time.Duration{time.Second, 2 * time.Second} {
		rep := f.move(t, now)
		if len(rep.Retried) != 1 || rep.Retried[0].Attempts != int64(attempt+1) || !strings.Contains(rep.Retried[0].Err, "WRONGTYPE") {
			t.Fatalf("attempt %d: %+v", attempt+1, rep)
		}
		l, err := f.d.Lookup(testCtx(t), e)
		if err != nil || !l.Scheduled || !l.At.Equal(now.Add(wait)) || l.Attempts != int64(attempt+1) || l.Dead != nil {
			t.Fatalf("attempt %d: lookup %+v %v", attempt+1, l, err)
		}
		if rep := f.move(t, now.Add(wait-time.Millisecond)); len(rep.Fired)+len(rep.Retried)+len(rep.Dead) != 0 {
			t.Fatalf("retried before its time: %+v", rep)
		}
		now = now.Add(wait)
	}
	rep := f.move(t, now)
	if len(rep.Dead) != 1 || rep.Dead[0].Record.Reason != DelayReasonEnqueueFailed || rep.Dead[0].Record.Attempts != 3 ||
		!strings.Contains(rep.Dead[0].Record.Detail, "WRONGTYPE") {
		t.Fatalf("last attempt %+v", rep)
	}
	if f.card(t, f.d.ScheduledKey()) != 0 || f.hlen(t, f.d.AttemptsKey()) != 0 || f.hlen(t, f.d.DeadKey()) != 1 {
		t.Fatal("the member is not only in :dead")
	}
	dead, err := f.d.ListDead(testCtx(t))
	if err != nil || len(dead) != 1 || dead[0].Member != member || dead[0].Record.Reason != DelayReasonEnqueueFailed || !dead[0].Record.At.Equal(now) {
		t.Fatalf("dead %+v %v", dead, err)
	}
	// The same entry poisoned again is still one member of :dead.
	f.schedule(t, e)
	for range 3 {
		rep = f.move(t, now.Add(time.Hour))
		now = now.Add(time.Hour)
	}
	if len(rep.Dead) != 1 || f.hlen(t, f.d.DeadKey()) != 1 {
		t.Fatalf("dead twice: %+v, %d records", rep, f.hlen(t, f.d.DeadKey()))
	}
}

// Two movers on the same due members send each exactly once.
func TestDelayConcurrentMoversSendEachOnce(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	f := newDelayFix(t, c, redistest.Root(t, c))
	f.opts.Batch = 7
	now := time.Now()
	const n = 300
	for i := range n {
		f.schedule(t, entryAt(fmt.Sprintf("ex_%03d", i), state.ResumeContinue, now.Add(-time.Duration(i)*time.Millisecond)))
	}
	var wg sync.WaitGroup
	var fired atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				rep, err := f.d.MoveDue(context.Background(), now, f.opts)
				if err != nil {
					t.Error(err)
					return
				}
				fired.Add(int64(len(rep.Fired)))
				if len(rep.Fired)+rep.Skipped == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	sent := f.sent(t)
	seen := map[string]bool{}
	for _, env := range sent {
		if seen[env.ExecutionID] {
			t.Fatalf("%s sent twice", env.ExecutionID)
		}
		seen[env.ExecutionID] = true
	}
	if len(seen) != n || fired.Load() != n {
		t.Fatalf("sent %d distinct, reported %d, want %d", len(seen), fired.Load(), n)
	}
}

func TestDelayStatsAndLookup(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	f := newDelayFix(t, c, redistest.Root(t, c))
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s, err := f.d.Stats(testCtx(t), now)
	if err != nil || s != (DelayStats{}) {
		t.Fatalf("empty stats %+v %v", s, err)
	}
	a, b := entryAt("ex_a", state.ResumeContinue, now.Add(-time.Minute)), entryAt("ex_b", state.ResumeTimeout, now.Add(time.Hour))
	f.schedule(t, a, b)
	f.zadd(t, "junk", now.Add(-time.Hour))
	s, err = f.d.Stats(testCtx(t), now)
	if err != nil || s.Scheduled != 3 || s.Due != 2 || s.Dead != 0 || !s.OldestDue.Equal(now.Add(-time.Hour)) {
		t.Fatalf("stats %+v %v", s, err)
	}
	l, err := f.d.Lookup(testCtx(t), b)
	if err != nil || !l.Scheduled || !l.At.Equal(b.Due) || l.Attempts != 0 || l.Dead != nil {
		t.Fatalf("lookup %+v %v", l, err)
	}
	f.move(t, now)
	if l, err = f.d.Lookup(testCtx(t), a); err != nil || l.Scheduled || l.Dead != nil {
		t.Fatalf("lookup of a sent entry %+v %v", l, err)
	}
	if s, _ = f.d.Stats(testCtx(t), now); s.Scheduled != 1 || s.Due != 0 || s.Dead != 1 {
		t.Fatalf("stats after the move %+v", s)
	}
	// Reschedule keeps the member and moves its time.
	if err := f.d.Reschedule(testCtx(t), b, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if l, _ = f.d.Lookup(testCtx(t), b); !l.Scheduled || !l.At.Equal(now.Add(time.Second)) || f.card(t, f.d.ScheduledKey()) != 1 {
		t.Fatalf("rescheduled %+v", l)
	}
	if err := f.d.Reschedule(testCtx(t), b, time.Time{}); err == nil {
		t.Error("a reschedule without a time was accepted")
	}
}

func TestParseWakeup(t *testing.T) {
	due := time.Date(2026, 11, 29, 12, 0, 0, 123000000, time.UTC)
	resume := func(rt state.ResumeType, data string) Envelope {
		return Envelope{Kind: KindResume, ExecutionID: "ex_1", ResumeType: rt, ResumeData: json.RawMessage(data)}
	}
	for name, tc := range map[string]struct {
		env     Envelope
		ok, bad bool
	}{
		"continue":          {resume(state.ResumeContinue, `{"wakeup":"delay","node":"n","due":"2026-11-29T12:00:00.123Z"}`), true, false},
		"timeout":           {resume(state.ResumeTimeout, `{"wakeup":"delay","node":"n","due":"2026-11-29T12:00:00.123Z","x":1}`), true, false},
		"no data":           {resume(state.ResumeContinue, ``), false, false},
		"operator data":     {resume(state.ResumeContinue, `{"node":"n","due":"2026-11-29T12:00:00Z"}`), false, false},
		"not an object":     {resume(state.ResumeContinue, `[1]`), false, false},
		"other source":      {resume(state.ResumeContinue, `{"wakeup":"cron","node":"n"}`), false, false},
		"event type":        {resume(state.ResumeEvent, `{"wakeup":"delay","node":"n","due":"2026-11-29T12:00:00Z"}`), false, false},
		"start":             {Envelope{Kind: KindStart, ResumeData: json.RawMessage(`{"wakeup":"delay"}`)}, false, false},
		"no node":           {resume(state.ResumeContinue, `{"wakeup":"delay","due":"2026-11-29T12:00:00Z"}`), true, true},
		"no due":            {resume(state.ResumeContinue, `{"wakeup":"delay","node":"n"}`), true, true},
		"due of wrong type": {resume(state.ResumeTimeout, `{"wakeup":"delay","node":"n","due":5}`), true, true},
	} {
		w, ok, err := ParseWakeup(tc.env)
		if ok != tc.ok || (err != nil) != tc.bad || (err != nil && !errors.Is(err, ErrBadWakeup)) {
			t.Errorf("%s: %+v ok=%v err=%v", name, w, ok, err)
			continue
		}
		if ok && !tc.bad && (w.Node != "n" || !w.Due.Equal(due)) && name == "continue" {
			t.Errorf("%s: %+v", name, w)
		}
	}
}

// A member of any shape either is an entry whose resume validates and whose wake-up names it
// back, or is refused as ErrBadDelayEntry. Nothing panics.
func FuzzParseDelayEntry(f *testing.F) {
	for _, s := range []string{
		`{"execution_id":"ex_1","tenant_id":"default","flow_id":"f","flow_version":"1","resume_type":"continue","node":"n","due":"2026-11-29T13:00:00.5Z"}`,
		`{"execution_id":"ex_1","tenant_id":"acme","resume_type":"timeout","node":"w","due":"2026-11-29T13:00:00+01:00"}`,
		`{"execution_id":"../x","resume_type":"continue","node":"n","due":"2026-11-29T13:00:00Z"}`,
		`{"execution_id":"ex_1","resume_type":"retry","node":"n","due":"2026-11-29T13:00:00Z"}`,
		`{"execution_id":"ex_1","resume_type":"continue","node":"n","due":"0001-01-01T00:00:00Z"}`,
		`{}`, `null`, `[]`, `"x"`, `{`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, member string) {
		e, err := ParseDelayEntry(member)
		if err != nil {
			if !errors.Is(err, ErrBadDelayEntry) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		env, err := e.Resume()
		if err != nil {
			if !errors.Is(err, ErrBadDelayEntry) {
				t.Fatalf("unclassified resume error %v", err)
			}
			return
		}
		if err := env.Validate(); err != nil {
			t.Fatalf("resume does not validate: %v", err)
		}
		w, ok, err := ParseWakeup(env)
		if !ok || err != nil {
			t.Fatalf("the resume's wake-up does not parse: %v %v (%s)", ok, err, env.ResumeData)
		}
		back := WakeupEntry(env, w)
		want := e
		want.Due = e.Due.UTC()
		if want.TenantID == "" {
			want.TenantID = "default"
		}
		if back != want {
			t.Fatalf("wake-up names %+v, want %+v", back, want)
		}
	})
}

// Any resume data either is not a wake-up, is one with a node and a due time, or is a bad
// mark (ErrBadWakeup). Nothing panics.
func FuzzParseWakeup(f *testing.F) {
	for _, s := range []string{`{"wakeup":"delay","node":"n","due":"2026-11-29T12:00:00Z"}`, `{"wakeup":"delay"}`, `{"wakeup":1}`,
		`{"node":"n"}`, `null`, `[]`, `{`} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data string, timeout bool) {
		rt := state.ResumeContinue
		if timeout {
			rt = state.ResumeTimeout
		}
		w, ok, err := ParseWakeup(Envelope{Kind: KindResume, ExecutionID: "ex_1", ResumeType: rt, ResumeData: json.RawMessage(data)})
		switch {
		case err != nil && (!ok || !errors.Is(err, ErrBadWakeup)):
			t.Fatalf("error %v with ok=%v", err, ok)
		case ok && err == nil && (w.Node == "" || w.Due.IsZero() || w.Source != WakeupSource):
			t.Fatalf("accepted an incomplete mark %+v", w)
		}
	})
}

// In a Redis Cluster the ZSET, the stream and the bookkeeping hash to different slots: the
// mover goes member by member (claim, XADD, ZREM) and ends where the single-server script
// does — sent once, poisoned members in :dead, failed enqueues retried then buried.
func TestDelayMoveDueCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node Redis Cluster")
	}
	t.Parallel()
	c, _ := redistest.StartCluster(t, 3)
	f := newDelayFix(t, c, "plaitatest")
	ctx := testCtx(t)
	for deadline := time.Now().Add(10 * time.Second); ; { // the other nodes may lag a moment
		err := c.Do(ctx, c.B().Del().Key(f.d.ScheduledKey()).Build()).Error()
		if err == nil || !strings.Contains(err.Error(), "CLUSTERDOWN") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a, b := entryAt("ex_a", state.ResumeContinue, now.Add(-time.Second)), entryAt("ex_b", state.ResumeTimeout, now)
	f.schedule(t, a, b, entryAt("ex_later", state.ResumeContinue, now.Add(time.Minute)))
	f.zadd(t, "{bad", now.Add(-time.Minute))
	rep := f.move(t, now)
	if len(rep.Fired) != 2 || len(rep.Dead) != 1 || rep.Dead[0].Record.Reason != DelayReasonMalformed || len(rep.Retried) != 0 {
		t.Fatalf("report %+v", rep)
	}
	if sent := f.sent(t); len(sent) != 2 || sent[0].SourceMessageID != a.CarrierID() || sent[1].SourceMessageID != b.CarrierID() {
		t.Fatalf("sent %+v", sent)
	}
	if f.card(t, f.d.ScheduledKey()) != 1 || f.hlen(t, f.d.DeadKey()) != 1 {
		t.Fatal("members left behind")
	}
	if rep := f.move(t, now); len(rep.Fired)+len(rep.Dead)+rep.Skipped != 0 {
		t.Fatalf("second pass %+v", rep)
	}

	// A failing XADD: counted, retried at its next time, then buried.
	if err := c.Do(ctx, c.B().Del().Key(f.stream).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().Set().Key(f.stream).Value("not a stream").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	p := entryAt("ex_p", state.ResumeContinue, now)
	f.schedule(t, p)
	for attempt := 1; attempt <= 2; attempt++ {
		rep := f.move(t, now)
		if len(rep.Retried) != 1 || rep.Retried[0].Attempts != int64(attempt) {
			t.Fatalf("attempt %d: %+v", attempt, rep)
		}
		l, _ := f.d.Lookup(ctx, p)
		if !l.Scheduled || !l.At.After(now) {
			t.Fatalf("attempt %d: not moved on: %+v", attempt, l)
		}
		now = l.At
	}
	rep = f.move(t, now)
	if len(rep.Dead) != 1 || rep.Dead[0].Record.Reason != DelayReasonEnqueueFailed || rep.Dead[0].Record.Attempts != 3 {
		t.Fatalf("last attempt %+v", rep)
	}
	if l, _ := f.d.Lookup(ctx, p); l.Scheduled || l.Attempts != 0 || l.Dead == nil || l.Dead.Reason != DelayReasonEnqueueFailed {
		t.Fatalf("buried %+v", l)
	}

	// A claimed member whose mover died before sending it comes due again after the lease.
	q := entryAt("ex_q", state.ResumeContinue, now)
	f.schedule(t, q)
	member, _ := q.member()
	if n, err := claimScript.Exec(ctx, c, []string{f.d.ScheduledKey()}, []string{member, strconv.FormatInt(now.UnixMilli(), 10),
		strconv.FormatInt(now.Add(ClusterClaimLease).UnixMilli(), 10)}).AsInt64(); err != nil || n != 1 {
		t.Fatalf("claim %d %v", n, err)
	}
	if rep := f.move(t, now); rep.Skipped+len(rep.Fired) != 0 {
		t.Fatalf("a claimed member was taken again: %+v", rep)
	}
	if l, _ := f.d.Lookup(ctx, q); !l.Scheduled || !l.At.Equal(now.Add(ClusterClaimLease)) {
		t.Fatalf("claimed member %+v", l)
	}
}

// Out of memory Redis refuses the XADD and the count of the failure alike: the member stays as
// it is (an outage, not a poisoned entry: nothing is given up) and is sent once memory is back.
func TestDelayOutOfMemoryGivesNothingUp(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	c := srv.Client(t)
	f := newDelayFix(t, c, "plaita")
	now := time.Now()
	e := entryAt("ex_1", state.ResumeContinue, now)
	f.schedule(t, e)
	var filler []string
	for i := 0; ; i++ {
		key := fmt.Sprintf("fill:%d", i)
		err := c.Do(testCtx(t), c.B().Set().Key(key).Value(strings.Repeat("y", 100000)).Build()).Error()
		if err != nil {
			if !strings.Contains(err.Error(), "OOM") {
				t.Fatal(err)
			}
			break
		}
		filler = append(filler, key)
	}
	for range 3 {
		rep := f.move(t, now)
		if len(rep.Retried) != 1 || rep.Retried[0].Attempts != 0 || !strings.Contains(rep.Retried[0].Err, "OOM") || len(rep.Dead) != 0 {
			t.Fatalf("out of memory: %+v", rep)
		}
	}
	if l, err := f.d.Lookup(testCtx(t), e); err != nil || !l.Scheduled || l.Attempts != 0 || l.Dead != nil {
		t.Fatalf("lookup %+v %v", l, err)
	}
	for _, k := range filler {
		if err := c.Do(testCtx(t), c.B().Del().Key(k).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if rep := f.move(t, now); len(rep.Fired) != 1 {
		t.Fatalf("after memory came back: %+v", rep)
	}
}
