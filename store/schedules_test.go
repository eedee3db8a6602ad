package store_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

func newSchedule(id, tenant, spec string) store.Schedule {
	return store.Schedule{ID: id, TenantID: tenant, Cron: spec, TimeZone: "UTC", Enabled: true,
		FlowID: "report", FlowVersion: store.LatestVersion, Input: json.RawMessage(`{"k":1}`)}
}

func (f *fixture) schedules() *store.Schedules {
	return store.NewSchedules(store.RedisSchedules(f.c), f.root)
}

func (f *fixture) schedKey(tenant, id string) string {
	f.t.Helper()
	k, err := keys.MustFor(f.root, tenant).Schedule(id)
	f.must(err)
	return k
}

func TestScheduleCreateGetListDelete(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	st := f.schedules()
	now := time.Date(2026, 3, 1, 12, 0, 0, 500_000_000, time.UTC)
	rec, err := st.Create(c, newSchedule("nightly", "acme", "0 2 * * *"), now)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Rev != 1 || !rec.LastTick.Equal(now) || !rec.Next.Equal(time.Date(2026, 3, 2, 2, 0, 0, 0, time.UTC)) || rec.CreatedAt != now {
		t.Fatalf("created %+v", rec)
	}
	got, err := st.Get(c, "acme", "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if got.Cron != "0 2 * * *" || got.TenantID != "acme" || string(got.Input) != `{"k":1}` || !got.Next.Equal(rec.Next) || got.Rev != 1 {
		t.Fatalf("read back %+v", got)
	}
	if at, ok, err := st.DueScore(c, "acme", "nightly"); err != nil || !ok || !at.Equal(rec.Next) {
		t.Fatalf("due score %v %v %v, want the next tick", at, ok, err)
	}
	// The id is taken, in that tenant only; nothing is overwritten.
	again := newSchedule("nightly", "acme", "* * * * *")
	if _, err := st.Create(c, again, now); !errors.Is(err, store.ErrScheduleExists) || model.IsTransient(err) {
		t.Fatalf("duplicate: %v", err)
	}
	if got, _ := st.Get(c, "acme", "nightly"); got.Cron != "0 2 * * *" {
		t.Fatalf("the duplicate overwrote the record: %+v", got)
	}
	if _, err := st.Create(c, newSchedule("nightly", "", "*/5 * * * * *"), now.Add(time.Second)); err != nil {
		t.Fatalf("same id in the default tenant: %v", err)
	}
	if _, err := st.Create(c, newSchedule("hourly", "acme", "@hourly"), now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	recs, bad, err := st.List(c, "acme")
	if err != nil || len(bad) != 0 || len(recs) != 2 || recs[0].ID != "nightly" || recs[1].ID != "hourly" {
		t.Fatalf("list %+v %+v %v", recs, bad, err)
	}
	if recs, _, _ := st.List(c, "other"); len(recs) != 0 {
		t.Fatalf("another tenant lists %+v", recs)
	}
	if _, err := st.Get(c, "acme", "missing"); !errors.Is(err, store.ErrScheduleNotFound) || model.IsTransient(err) {
		t.Fatalf("missing: %v", err)
	}
	if ok, err := st.Delete(c, "acme", "nightly"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, err := st.Delete(c, "acme", "nightly"); ok || err != nil {
		t.Fatalf("second delete: %v %v", ok, err)
	}
	if _, ok, _ := st.DueScore(c, "acme", "nightly"); ok || f.exists(f.schedKey("acme", "nightly")) {
		t.Fatal("delete left the due member or the record")
	}
	if recs, _, _ := st.List(c, "acme"); len(recs) != 1 {
		t.Fatalf("after delete: %+v", recs)
	}
	if _, err := st.Get(c, "", "nightly"); err != nil {
		t.Fatalf("the default tenant's schedule went with acme's: %v", err)
	}
}

// Every refused definition is a named ErrBadSchedule, and nothing reaches Redis.
func TestScheduleCreateRefusesBadDefinitions(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	st := f.schedules()
	now := time.Now()
	cases := map[string]func(*store.Schedule){
		"cron":             func(s *store.Schedule) { s.Cron = "61 * * * *" },
		"empty cron":       func(s *store.Schedule) { s.Cron = "  " },
		"7 fields":         func(s *store.Schedule) { s.Cron = "0 0 0 * * * *" },
		"@every":           func(s *store.Schedule) { s.Cron = "@every 1s" },
		"CRON_TZ":          func(s *store.Schedule) { s.Cron = "CRON_TZ=Europe/Paris 0 9 * * *" },
		"never":            func(s *store.Schedule) { s.Cron = "0 0 30 2 *" },
		"time zone":        func(s *store.Schedule) { s.TimeZone = "Mars/Olympus" },
		"Local":            func(s *store.Schedule) { s.TimeZone = "Local" },
		"flow id":          func(s *store.Schedule) { s.FlowID = "a:b" },
		"version":          func(s *store.Schedule) { s.FlowVersion = "" },
		"input":            func(s *store.Schedule) { s.Input = json.RawMessage(`{"a":`) },
		"no input":         func(s *store.Schedule) { s.Input = nil },
		"schedule id":      func(s *store.Schedule) { s.ID = "a b" },
		"schedule id ':'":  func(s *store.Schedule) { s.ID = "a:b" },
		"tenant":           func(s *store.Schedule) { s.TenantID = "Not A Slug" },
		"reserved tenant":  func(s *store.Schedule) { s.TenantID = "schedule_due" },
		"braces in flow":   func(s *store.Schedule) { s.FlowID = "{x}" },
		"version with ':'": func(s *store.Schedule) { s.FlowVersion = "1:2" },
	}
	for name, mutate := range cases {
		s := newSchedule("bad", "acme", "* * * * *")
		mutate(&s)
		_, err := st.Create(c, s, now)
		if !errors.Is(err, store.ErrBadSchedule) && !errors.Is(err, keys.ErrBadTenant) {
			t.Errorf("%s: %v, want ErrBadSchedule", name, err)
			continue
		}
		if model.IsTransient(err) {
			t.Errorf("%s: a refused definition is transient: %v", name, err)
		}
	}
	if keys := f.scan(); len(keys) != 0 {
		t.Fatalf("refused definitions wrote %v", keys)
	}
}

func TestScheduleClaimIsCompareAndSet(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	st := f.schedules()
	base := time.Now().UTC().Truncate(time.Second).Add(-10 * time.Second)
	rec, err := st.Create(c, newSchedule("tick", "acme", "* * * * * *"), base)
	if err != nil {
		t.Fatal(err)
	}
	cr, _ := store.ParseCron(rec.Cron, rec.TimeZone)
	tick, ok := cr.Latest(rec.LastTick, base.Add(3500*time.Millisecond))
	if !ok || !tick.Equal(base.Add(3*time.Second)) {
		t.Fatalf("latest %v %v", tick, ok)
	}
	p := store.PendingFire{TickMS: tick.UnixMilli(), ExecutionID: "ex_a", FlowID: "report", FlowVersion: "7", By: "s1"}
	// Two processes read the same record; only the first claim goes through.
	claimed, ok, err := st.Claim(c, rec, p, cr.Next(tick))
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if claimed.ClaimedMS <= 0 || claimed.FirstClaimedMS != claimed.ClaimedMS || claimed.By != "s1" || claimed.ExecutionID != "ex_a" {
		t.Fatalf("stored claim %+v", claimed)
	}
	p.By = "s2"
	if _, ok, err := st.Claim(c, rec, p, cr.Next(tick)); ok || err != nil {
		t.Fatalf("second claim of the same read: %v %v", ok, err)
	}
	if ok, err := st.Skip(c, rec, tick, "tenant disabled", cr.Next(tick), time.Now()); ok || err != nil {
		t.Fatalf("skip of the same read: %v %v", ok, err)
	}
	got, err := st.Get(c, "acme", "tick")
	if err != nil {
		t.Fatal(err)
	}
	if !got.LastTick.Equal(tick) || !got.Next.Equal(tick.Add(time.Second)) || len(got.Pending) != 1 || got.Pending[0].Raw() != claimed.Raw() {
		t.Fatalf("after the claim %+v", got)
	}
	// While the claim is pending the due score is the next tick (earlier than claimed + grace).
	if at, _, _ := st.DueScore(c, "acme", "tick"); !at.Equal(tick.Add(time.Second)) {
		t.Fatalf("due %v, want the next tick", at)
	}
	fire := &store.ScheduleFire{Tick: tick, ExecutionID: "ex_a", FlowVersion: "7", MessageID: "1-0", At: time.Now(), By: "s1"}
	if ok, err := st.Complete(c, "acme", "tick", claimed, fire, nil); !ok || err != nil {
		t.Fatalf("complete: %v %v", ok, err)
	}
	if ok, err := st.Complete(c, "acme", "tick", claimed, fire, nil); ok || err != nil {
		t.Fatalf("second complete: %v %v", ok, err)
	}
	got, _ = st.Get(c, "acme", "tick")
	if len(got.Pending) != 0 || got.LastFire == nil || got.LastFire.ExecutionID != "ex_a" || !got.LastFire.Tick.Equal(tick) {
		t.Fatalf("after completion %+v", got)
	}
	// A claim completing late (a takeover of an older tick) does not move last_fire back.
	older := store.PendingFire{TickMS: tick.Add(time.Second).UnixMilli(), ExecutionID: "ex_b", FlowID: "report", FlowVersion: "7", By: "s1"}
	c2, ok, err := st.Claim(c, got, older, tick.Add(2*time.Second))
	if !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	got, _ = st.Get(c, "acme", "tick")
	newer := store.PendingFire{TickMS: tick.Add(2 * time.Second).UnixMilli(), ExecutionID: "ex_c", FlowID: "report", FlowVersion: "7", By: "s1"}
	c3, ok, err := st.Claim(c, got, newer, tick.Add(3*time.Second))
	if !ok || err != nil {
		t.Fatalf("claim beside a pending one: %v %v", ok, err)
	}
	f.must(errOf(st.Complete(c, "acme", "tick", c3, &store.ScheduleFire{Tick: c3.Tick(), ExecutionID: "ex_c"}, nil)))
	f.must(errOf(st.Complete(c, "acme", "tick", c2, &store.ScheduleFire{Tick: c2.Tick(), ExecutionID: "ex_b"}, nil)))
	if got, _ = st.Get(c, "acme", "tick"); got.LastFire.ExecutionID != "ex_c" {
		t.Fatalf("last fire went back to %+v", got.LastFire)
	}
}

func errOf(_ bool, err error) error { return err }

// An edit between a read and the claim (here: disabling) makes the claim fail.
func TestScheduleClaimLosesToAnEdit(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	st := f.schedules()
	base := time.Now().Add(-time.Hour)
	rec, err := st.Create(c, newSchedule("edited", "", "* * * * *"), base)
	if err != nil {
		t.Fatal(err)
	}
	if _, changed, err := st.SetEnabled(c, "", "edited", false, time.Now()); !changed || err != nil {
		t.Fatalf("disable: %v %v", changed, err)
	}
	p := store.PendingFire{TickMS: base.Add(time.Minute).UnixMilli(), ExecutionID: "ex_x", FlowID: "report", FlowVersion: "1"}
	if _, ok, err := st.Claim(c, rec, p, base.Add(2*time.Minute)); ok || err != nil {
		t.Fatalf("claim after a disable: %v %v", ok, err)
	}
}

func TestScheduleEnableDisable(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	st := f.schedules()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if _, err := st.Create(c, newSchedule("m", "", "0 * * * * *"), t0); err != nil {
		t.Fatal(err)
	}
	rec, changed, err := st.SetEnabled(c, "", "m", false, t0.Add(time.Minute))
	if err != nil || !changed || rec.Enabled || !rec.Next.IsZero() || rec.Rev != 2 {
		t.Fatalf("disable: %+v %v %v", rec, changed, err)
	}
	if at, ok, _ := st.DueScore(c, "", "m"); !ok || !at.IsZero() {
		t.Fatalf("a disabled schedule is due at %v (%v), want +inf", at, ok)
	}
	if _, changed, _ := st.SetEnabled(c, "", "m", false, t0.Add(time.Minute)); changed {
		t.Fatal("disabling twice changed something")
	}
	// Enabled again an hour later: the ticks in between are never fired.
	later := t0.Add(time.Hour + 30*time.Second)
	rec, changed, err = st.SetEnabled(c, "", "m", true, later)
	if err != nil || !changed || !rec.Enabled || !rec.LastTick.Equal(later) || !rec.Next.Equal(t0.Add(time.Hour+time.Minute)) {
		t.Fatalf("enable: %+v %v %v", rec, changed, err)
	}
	got, _ := st.Get(c, "", "m")
	if !got.LastTick.Equal(later) || got.Rev != 3 || !got.Enabled {
		t.Fatalf("stored %+v", got)
	}
	if at, _, _ := st.DueScore(c, "", "m"); !at.Equal(rec.Next) {
		t.Fatalf("due %v", at)
	}
	if _, _, err := st.SetEnabled(c, "", "nope", true, later); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

// Update: the same definition writes nothing; a new calendar moves the baseline to the edit
// (the old calendar's ticks never fire under the new one) and the due index follows; a
// refused definition writes nothing; id and tenant stay.
func TestScheduleUpdate(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	st := f.schedules()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if _, err := st.Create(c, newSchedule("u", "acme", "0 0 * * * *"), t0); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(90 * time.Minute)
	if _, changed, err := st.Update(c, "acme", "u", at, func(s *store.Schedule) error { return nil }); err != nil || changed {
		t.Fatalf("no edit: %v %v", changed, err)
	}
	rec, changed, err := st.Update(c, "acme", "u", at, func(s *store.Schedule) error {
		s.Cron, s.Input, s.ID, s.TenantID = "0 */5 * * * *", json.RawMessage(`{"k": 2}`), "other", "globex"
		return nil
	})
	if err != nil || !changed || rec.ID != "u" || rec.TenantID != "acme" || rec.Rev != 2 || !rec.LastTick.Equal(at) ||
		!rec.Next.Equal(at.Add(5*time.Minute)) || !rec.UpdatedAt.Equal(at) {
		t.Fatalf("edit: %+v %v %v", rec, changed, err)
	}
	got, err := st.Get(c, "acme", "u")
	if err != nil || got.Cron != "0 */5 * * * *" || string(got.Input) != `{"k":2}` || !got.LastTick.Equal(at) {
		t.Fatalf("stored: %+v %v", got, err)
	}
	if due, _, _ := st.DueScore(c, "acme", "u"); !due.Equal(rec.Next) {
		t.Fatalf("due %v, want %v", due, rec.Next)
	}
	// A new flow keeps the calendar and its baseline.
	rec, _, err = st.Update(c, "acme", "u", at.Add(time.Hour), func(s *store.Schedule) error { s.FlowID = "other"; return nil })
	if err != nil || !rec.LastTick.Equal(at) || rec.FlowID != "other" {
		t.Fatalf("new flow: %+v %v", rec, err)
	}
	if _, _, err := st.Update(c, "acme", "u", at, func(s *store.Schedule) error { s.Cron = "nope"; return nil }); !errors.Is(err, store.ErrBadSchedule) {
		t.Fatalf("bad cron: %v", err)
	}
	if got, _ := st.Get(c, "acme", "u"); got.Rev != 3 || got.Cron != "0 */5 * * * *" {
		t.Fatalf("a refused edit wrote: %+v", got)
	}
	if _, _, err := st.Update(c, "acme", "nope", at, func(*store.Schedule) error { return nil }); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

func TestScheduleDueAcrossTenantsAndTakeOver(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	st := f.schedules()
	past := time.Now().Add(-time.Hour)
	for _, tenant := range []string{"", "acme", "beta"} {
		if _, err := st.Create(c, newSchedule("s", tenant, "* * * * *"), past); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Create(c, newSchedule("later", "acme", "0 0 1 1 *"), time.Now()); err != nil {
		t.Fatal(err)
	}
	refs, err := st.Due(c, time.Now(), 10)
	if err != nil || len(refs) != 3 {
		t.Fatalf("due %+v %v", refs, err)
	}
	seen := map[string]bool{}
	for _, r := range refs {
		seen[r.Tenant+"/"+r.ID] = true
	}
	if !seen["default/s"] || !seen["acme/s"] || !seen["beta/s"] {
		t.Fatalf("due %+v", refs)
	}
	if refs, _ := st.Due(c, time.Now(), 1); len(refs) != 1 {
		t.Fatalf("limit: %+v", refs)
	}

	// A claim left pending (its claimer died): young, it is left alone; older than the grace
	// by the Redis clock, another process takes it over.
	rec, _ := st.Get(c, "beta", "s")
	cr, _ := store.ParseCron(rec.Cron, rec.TimeZone)
	tick, _ := cr.Latest(rec.LastTick, time.Now())
	p, ok, err := st.Claim(c, rec, store.PendingFire{TickMS: tick.UnixMilli(), ExecutionID: "ex_p", FlowID: "report", FlowVersion: "1", By: "dead"}, cr.Next(tick))
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, ok, young, err := st.TakeOver(c, "beta", "s", p, "alive"); ok || !young || err != nil {
		t.Fatalf("takeover of a young claim: %v %v %v", ok, young, err)
	}
	// The claim ages: its claimed_ms is moved back past the grace.
	key := f.schedKey("beta", "s")
	field := "pending:" + strconv.FormatInt(p.TickMS, 10)
	aged := strings.Replace(p.Raw(), `"claimed_ms":`+strconv.FormatInt(p.ClaimedMS, 10), `"claimed_ms":`+strconv.FormatInt(p.ClaimedMS-int64(time.Minute/time.Millisecond), 10), 1)
	f.do(f.c.B().Hset().Key(key).FieldValue().FieldValue(field, aged).Build())
	got, _ := st.Get(c, "beta", "s")
	if len(got.Pending) != 1 {
		t.Fatalf("pending %+v", got.Pending)
	}
	taken, ok, young, err := st.TakeOver(c, "beta", "s", got.Pending[0], "alive")
	if !ok || young || err != nil {
		t.Fatalf("takeover: %v %v %v", ok, young, err)
	}
	if taken.By != "alive" || taken.FirstClaimedMS != p.FirstClaimedMS || taken.ClaimedMS < p.ClaimedMS || taken.ExecutionID != "ex_p" {
		t.Fatalf("taken %+v (was %+v)", taken, p)
	}
	// While a claim is pending, the due score is its deadline when that comes before the next
	// tick: a crashed claimer's tick is looked at again without waiting for the next one.
	deadline := time.UnixMilli(taken.ClaimedMS).Add(store.DefaultClaimGrace)
	if next := cr.Next(tick); next.Before(deadline) {
		deadline = next
	}
	if at, _, _ := st.DueScore(c, "beta", "s"); !at.Equal(deadline) {
		t.Fatalf("due %v, want %v", at, deadline)
	}
	// The first claimer's token no longer completes it; the new holder's does.
	if ok, _ := st.Complete(c, "beta", "s", got.Pending[0], &store.ScheduleFire{ExecutionID: "ex_p"}, nil); ok {
		t.Fatal("a stale token completed the claim")
	}
	if ok, err := st.Complete(c, "beta", "s", taken, nil, &store.ScheduleSkip{Tick: tick, Reason: "flow gone"}); !ok || err != nil {
		t.Fatalf("complete as skipped: %v %v", ok, err)
	}
	if got, _ := st.Get(c, "beta", "s"); len(got.Pending) != 0 || got.LastSkip == nil || got.LastSkip.Reason != "flow gone" {
		t.Fatalf("after the takeover %+v", got)
	}

	// A due member whose record vanished is forgotten; an unreadable record is parked.
	f.do(f.c.B().Del().Key(f.schedKey("acme", "s")).Build())
	f.must(st.Forget(c, "acme", "s"))
	if _, ok, _ := st.DueScore(c, "acme", "s"); ok {
		t.Fatal("forgotten member still there")
	}
	f.do(f.c.B().Hset().Key(f.schedKey("", "s")).FieldValue().FieldValue("rev", "x").Build())
	if _, err := st.Get(c, "", "s"); !errors.Is(err, store.ErrBadSchedule) {
		t.Fatalf("junk rev: %v", err)
	}
	f.must(st.Park(c, "", "s"))
	if at, ok, _ := st.DueScore(c, "", "s"); !ok || !at.IsZero() {
		t.Fatalf("parked at %v %v", at, ok)
	}
	if _, bad, err := st.List(c, ""); err != nil || len(bad) != 1 || !errors.Is(bad[0].Err, store.ErrBadSchedule) {
		t.Fatalf("list with a bad record: %+v %v", bad, err)
	}
}

func TestScheduleFindInStream(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	st := f.schedules()
	stream := f.root + ":flow:queue"
	for i := range 1200 {
		f.do(f.c.B().Xadd().Key(stream).Id("*").FieldValue().FieldValue("payload", "n"+strconv.Itoa(i)).Build())
	}
	match := func(want string) func(store.StreamEntry) bool {
		return func(e store.StreamEntry) bool { return e.Fields["payload"] == want }
	}
	if found, complete, err := st.FindInStream(c, stream, 0, 10000, match("n1100")); !found || !complete || err != nil {
		t.Fatalf("n1100: %v %v %v", found, complete, err)
	}
	if found, complete, err := st.FindInStream(c, stream, 0, 10000, match("absent")); found || !complete || err != nil {
		t.Fatalf("absent: %v %v %v", found, complete, err)
	}
	if found, complete, _ := st.FindInStream(c, stream, 0, 500, match("n1100")); found || complete {
		t.Fatalf("over the limit: %v %v", found, complete)
	}
	future := time.Now().Add(time.Hour).UnixMilli()
	if found, _, _ := st.FindInStream(c, stream, future, 10000, match("n1")); found {
		t.Fatal("an entry older than the window was found")
	}
	if found, complete, err := st.FindInStream(c, f.root+":nostream", 0, 10, match("x")); found || !complete || err != nil {
		t.Fatalf("no stream: %v %v %v", found, complete, err)
	}
}

func TestCronSpecs(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		spec, tz, after, next string
	}{
		{"* * * * *", "", "2026-03-01T12:00:30Z", "2026-03-01T12:01:00Z"},
		{"*/10 * * * * *", "", "2026-03-01T12:00:30Z", "2026-03-01T12:00:40Z"},
		{"30 9 * * 1-5", "UTC", "2026-03-07T00:00:00Z", "2026-03-09T09:30:00Z"},          // Saturday → Monday
		{"0 9 * * *", "Europe/Paris", "2026-03-01T00:00:00Z", "2026-03-01T08:00:00Z"},    // CET
		{"0 9 * * *", "Europe/Paris", "2026-07-01T00:00:00Z", "2026-07-01T07:00:00Z"},    // CEST
		{"@daily", "America/New_York", "2026-03-01T12:00:00Z", "2026-03-02T05:00:00Z"},   // EST midnight
		{"0 0 29 2 *", "", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z"},               // leap day
		{"  0 12 * * *  ", "", "2026-03-01T12:00:00Z", "2026-03-02T12:00:00Z"},           // trimmed
		{"0 30 2 * * *", "Europe/Paris", "2026-03-29T00:00:00Z", "2026-03-30T00:30:00Z"}, // 02:30 does not exist on the spring-forward day
		{"@hourly", "", "2026-03-01T12:59:59.5Z", "2026-03-01T13:00:00Z"},
	}
	for _, tc := range cases {
		c, err := store.ParseCron(tc.spec, tc.tz)
		if err != nil {
			t.Errorf("%q %s: %v", tc.spec, tc.tz, err)
			continue
		}
		if got := c.Next(at(tc.after)); !got.Equal(at(tc.next)) {
			t.Errorf("%q %s: Next(%s) = %s, want %s", tc.spec, tc.tz, tc.after, got, tc.next)
		}
	}
	// Latest: the newest tick in (after, now], found quickly however long ago after was.
	every, _ := store.ParseCron("* * * * * *", "")
	now := at("2026-03-01T12:00:00Z").Add(700 * time.Millisecond)
	if tick, ok := every.Latest(now.Add(-365*24*time.Hour), now); !ok || !tick.Equal(at("2026-03-01T12:00:00Z")) {
		t.Errorf("latest after a year of downtime: %v %v", tick, ok)
	}
	if _, ok := every.Latest(at("2026-03-01T12:00:00Z"), now); ok {
		t.Error("no tick after the last one yet")
	}
	yearly, _ := store.ParseCron("0 0 1 1 *", "")
	if tick, ok := yearly.Latest(at("2020-06-01T00:00:00Z"), now); !ok || !tick.Equal(at("2026-01-01T00:00:00Z")) {
		t.Errorf("yearly latest: %v %v", tick, ok)
	}
	if _, ok := yearly.Latest(at("2026-01-01T00:00:00Z"), now); ok {
		t.Error("yearly: nothing since New Year")
	}
	leap, _ := store.ParseCron("0 0 29 2 *", "")
	if tick, ok := leap.Latest(at("2001-01-01T00:00:00Z"), now); !ok || !tick.Equal(at("2024-02-29T00:00:00Z")) {
		t.Errorf("leap latest: %v %v", tick, ok)
	}
}

// DecodeSchedule never panics, and whatever it accepts is a valid definition with a
// consistent state.
func FuzzDecodeSchedule(f *testing.F) {
	good, _ := json.Marshal(store.Schedule{ID: "s", TenantID: "acme", Cron: "* * * * *", TimeZone: "UTC", Enabled: true,
		FlowID: "f", FlowVersion: "latest", Input: json.RawMessage(`{}`), CreatedAt: time.Unix(1, 0), UpdatedAt: time.Unix(1, 0)})
	pending := `{"tick_ms":60000,"execution_id":"ex_1","flow_id":"f","flow_version":"1","by":"a","claimed_ms":5,"first_claimed_ms":5}`
	f.Add(string(good), "1", "60000", "120000", "pending:60000", pending, `{"tick":"2026-01-01T00:00:00Z"}`)
	f.Add(string(good), "0", "-1", "+inf", "pending:1", "{}", "")
	f.Add(`{"id":"s","tenant_id":"acme","cron":"@every 1s"}`, "x", "", "", "", "", "null")
	f.Add("{", "1", "1", "1", "pending:", "[", "{")
	f.Fuzz(func(t *testing.T, def, rev, last, next, pf, pv, lastFire string) {
		fields := map[string]string{"def": def, "rev": rev, "last_tick": last, "next_ms": next}
		if pf != "" {
			fields[pf] = pv
		}
		if lastFire != "" {
			fields["last_fire"] = lastFire
		}
		r, err := store.DecodeSchedule("acme", "s", fields)
		if err != nil {
			if !errors.Is(err, store.ErrBadSchedule) || model.IsTransient(err) {
				t.Fatalf("error %v is not a permanent ErrBadSchedule", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted an invalid definition: %v", err)
		}
		if r.Rev < 1 || r.ID != "s" || (r.TenantID != "acme") {
			t.Fatalf("accepted %+v", r)
		}
		for _, p := range r.Pending {
			if p.ExecutionID == "" || p.Raw() != fields["pending:"+strconv.FormatInt(p.TickMS, 10)] {
				t.Fatalf("pending %+v", p)
			}
		}
	})
}

// ParseCron never panics; a spec it accepts has a next tick from any time.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/5 * * * * *", "@daily", "0 0 29 2 *", "1-5/2 * * JAN-MAR MON", "@every 1s", "0 0 30 2 *", "? ? ? ? ?"} {
		f.Add(s, "UTC")
	}
	f.Add("0 9 * * *", "Europe/Paris")
	f.Fuzz(func(t *testing.T, spec, tz string) {
		c, err := store.ParseCron(spec, tz)
		if err != nil {
			return
		}
		from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		n := c.Next(from)
		if n.IsZero() || !n.After(from) {
			t.Fatalf("%q %q: Next(%s) = %s", spec, tz, from, n)
		}
		if l, ok := c.Latest(from, n); !ok || !l.Equal(n) {
			t.Fatalf("%q %q: Latest up to the next tick = %s %v, want %s", spec, tz, l, ok, n)
		}
	})
}

// Every schedule script and read on a 3-node Redis Cluster: the {sched} hash tag keeps each
// one in a single slot (no CROSSSLOT), for every tenant.
func TestSchedulesOnRedisCluster(t *testing.T) {
	t.Parallel()
	cl, _ := redistest.StartCluster(t, 3)
	waitClusterOK(t, cl)
	c := ctx(t)
	st := store.NewSchedules(store.RedisSchedules(cl), "plaita")
	past := time.Now().Add(-time.Hour)
	for _, tenant := range []string{"", "acme"} {
		rec, err := st.Create(c, newSchedule("cl", tenant, "* * * * * *"), past)
		if err != nil {
			t.Fatalf("create %q: %v", tenant, err)
		}
		if _, _, err := st.SetEnabled(c, tenant, "cl", false, time.Now()); err != nil {
			t.Fatal(err)
		}
		if rec, _, err = st.SetEnabled(c, tenant, "cl", true, past); err != nil {
			t.Fatal(err)
		}
		cr, _ := store.ParseCron(rec.Cron, rec.TimeZone)
		tick, _ := cr.Latest(rec.LastTick, time.Now())
		p, ok, err := st.Claim(c, rec, store.PendingFire{TickMS: tick.UnixMilli(), ExecutionID: "ex_cl", FlowID: "f", FlowVersion: "1"}, cr.Next(tick))
		if !ok || err != nil {
			t.Fatalf("claim %q: %v %v", tenant, ok, err)
		}
		if _, _, _, err := st.TakeOver(c, tenant, "cl", p, "other"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Complete(c, tenant, "cl", p, &store.ScheduleFire{Tick: tick, ExecutionID: "ex_cl"}, nil); err != nil {
			t.Fatal(err)
		}
		rec, _ = st.Get(c, tenant, "cl")
		if _, err := st.Skip(c, rec, cr.Next(tick), "test", cr.Next(cr.Next(tick)), time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Reschedule(c, rec, cr.Next(tick)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.List(c, tenant); err != nil {
			t.Fatal(err)
		}
		if err := st.Park(c, tenant, "cl"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Due(c, time.Now().Add(time.Hour), 10); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"", "acme"} {
		if ok, err := st.Delete(c, tenant, "cl"); !ok || err != nil {
			t.Fatalf("delete %q: %v %v", tenant, ok, err)
		}
		if err := st.Forget(c, tenant, "cl"); err != nil {
			t.Fatal(err)
		}
	}
}
