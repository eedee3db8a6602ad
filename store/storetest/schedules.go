package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
)

// SchedulesBackend is one implementation of the schedules under the contract.
type SchedulesBackend struct {
	Name string
	// Open makes a new, empty set of schedules for one case (cases run in parallel).
	Open func(t *testing.T) SchedulesFixture
}

// SchedulesFixture is one case's schedules, the driver under them, and what a case does beneath
// them, each backend its own way: the states that only a process that died, an operator's
// hand or another binary leave behind.
type SchedulesFixture struct {
	*store.Schedules
	Driver store.SchedulesDriver
	// Stream is a task stream of the case's own in Driver.Streams().
	Stream string
	// AgeClaim moves claimed_ms of the schedule's pending claim of tickMS back by d, as if its
	// claimer had claimed it d earlier (the claim's stored JSON changes: read it again).
	AgeClaim func(t *testing.T, tenant, id string, tickMS int64, d time.Duration)
	// Spoil makes the schedule's stored definition something that is not JSON.
	Spoil func(t *testing.T, tenant, id string)
	// Drop removes the schedule's record and nothing else.
	Drop func(t *testing.T, tenant, id string)
}

// AgeClaimJSON is a stored pending claim with claimed_ms moved back by d: what a backend's
// AgeClaim writes in place of the claim.
func AgeClaimJSON(raw string, d time.Duration) (string, error) {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var p map[string]any
	if err := dec.Decode(&p); err != nil {
		return "", fmt.Errorf("pending claim %s: %w", raw, err)
	}
	n, ok := p["claimed_ms"].(json.Number)
	if !ok {
		return "", fmt.Errorf("pending claim %s has no claimed_ms", raw)
	}
	ms, err := n.Int64()
	if err != nil {
		return "", fmt.Errorf("pending claim %s: %w", raw, err)
	}
	p["claimed_ms"] = ms - d.Milliseconds()
	out, err := json.Marshal(p)
	return string(out), err
}

// SchedulesContract runs the schedules' cases against b: what the console, the CLI and the
// schedule role rely on — a schedule is created once and read back as created, a tick is
// claimed by one process only and completed once, a claim left by a dead process is taken over
// after the grace and only then, a skipped tick is never fired, an edit moves the next tick and
// fails every write of an older read, a disabled schedule is never due, the due index lists the
// earliest first across tenants, a deleted schedule leaves nothing behind, an unreadable record
// is listed as such and parked, a due entry whose record is gone is forgotten, and a start is
// found in the task stream.
func SchedulesContract(t *testing.T, b SchedulesBackend) {
	runCases(t, b.Name, b.Open, []namedCase[SchedulesFixture]{
		{"CreatedOnce", createdOnce},
		{"TickClaimedOnce", tickClaimedOnce},
		{"DisabledIsNeverDue", disabledIsNeverDue},
		{"DueEarliestFirstAcrossTenants", dueEarliestFirstAcrossTenants},
		{"SkippedTickIsNeverFired", skippedTickIsNeverFired},
		{"StaleClaimTakenOver", staleClaimTakenOver},
		{"LateCompletionKeepsNewestFire", lateCompletionKeepsNewestFire},
		{"RescheduleFollowsRev", rescheduleFollowsRev},
		{"UpdateMovesTheNextTick", updateMovesTheNextTick},
		{"EditRetriesOnAConcurrentWrite", editRetriesOnAConcurrentWrite},
		{"DeleteLeavesNothing", deleteLeavesNothing},
		{"UnreadableListedAndParked", unreadableListedAndParked},
		{"ForgetOnlyWithoutRecord", forgetOnlyWithoutRecord},
		{"FindsAStartInTheStream", findsAStartInTheStream},
	})
}

// t0 is the contract's clock: half a minute past a minute, so an every-minute schedule's next
// tick is 30 s later.
var t0 = time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)

func everyMinute(id string) store.Schedule { return schedule(id, "acme", "* * * * *") }

func schedule(id, tenant, spec string) store.Schedule {
	return store.Schedule{ID: id, TenantID: tenant, Cron: spec, Enabled: true, FlowID: "report",
		FlowVersion: store.LatestVersion, Input: json.RawMessage(`{}`)}
}

func create(t *testing.T, s SchedulesFixture, sc store.Schedule, now time.Time) store.ScheduleRecord {
	t.Helper()
	rec, err := s.Create(eventsCtx(t), sc, now)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func get(t *testing.T, s SchedulesFixture, tenant, id string) store.ScheduleRecord {
	t.Helper()
	rec, err := s.Get(eventsCtx(t), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func claim(t *testing.T, s SchedulesFixture, rec store.ScheduleRecord, tick time.Time, execution string, next time.Time) store.PendingFire {
	t.Helper()
	p, ok, err := s.Claim(eventsCtx(t), rec, store.PendingFire{TickMS: tick.UnixMilli(), ExecutionID: execution, FlowID: "report", FlowVersion: "3", By: "a"}, next)
	if err != nil || !ok {
		t.Fatalf("claim of %s: %v %v", tick, ok, err)
	}
	return p
}

// dueScore is the schedule's due score, failing the case when it has none.
func dueScore(t *testing.T, s SchedulesFixture, tenant, id string) time.Time {
	t.Helper()
	at, ok, err := s.DueScore(eventsCtx(t), tenant, id)
	if err != nil || !ok {
		t.Fatalf("due score of %s/%s: %v %v", tenant, id, ok, err)
	}
	return at
}

// due lists the due index at now as "tenant/id@time" in its order.
func due(t *testing.T, s SchedulesFixture, now time.Time, limit int) []string {
	t.Helper()
	refs, err := s.Due(eventsCtx(t), now, limit)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range refs {
		out = append(out, r.Tenant+"/"+r.ID+"@"+r.At.Format(time.RFC3339))
	}
	return out
}

func dueEntry(tenant, id string, tm time.Time) string {
	return tenant + "/" + id + "@" + tm.Format(time.RFC3339)
}

// deadline is when a schedule with the pending claim p and the next tick next is due.
func deadline(p store.PendingFire, grace time.Duration, next time.Time) time.Time {
	d := time.UnixMilli(p.ClaimedMS).UTC().Add(grace)
	if !next.IsZero() && next.Before(d) {
		return next
	}
	return d
}

func createdOnce(t *testing.T, s SchedulesFixture) {
	rec, err := s.Create(eventsCtx(t), everyMinute("nightly"), t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Truncate(time.Minute).Add(time.Minute); !rec.Next.Equal(want) || rec.Rev != 1 {
		t.Fatalf("created %+v, want the next tick at %s", rec, want)
	}
	if _, err := s.Create(eventsCtx(t), everyMinute("nightly"), t0); !errors.Is(err, store.ErrScheduleExists) {
		t.Fatalf("the same id again: %v, want ErrScheduleExists", err)
	}
	got, err := s.Get(eventsCtx(t), "acme", "nightly")
	if err != nil || got.Cron != "* * * * *" || got.FlowID != "report" || !got.Enabled || !got.Next.Equal(rec.Next) ||
		got.Rev != 1 || !got.LastTick.Equal(t0) || got.TimeZone != "UTC" || !got.CreatedAt.Equal(t0) || string(got.Input) != `{}` {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := s.Get(eventsCtx(t), "globex", "nightly"); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("another tenant's schedule: %v, want ErrScheduleNotFound", err)
	}
	list, bad, err := s.List(eventsCtx(t), "acme")
	if err != nil || len(list) != 1 || len(bad) != 0 || list[0].ID != "nightly" {
		t.Fatalf("list: %+v %+v %v", list, bad, err)
	}
	// A list is oldest first, by creation time, not by id.
	create(t, s, everyMinute("afternoon"), t0.Add(time.Second))
	if list, _, err := s.List(eventsCtx(t), "acme"); err != nil || len(list) != 2 || list[0].ID != "nightly" || list[1].ID != "afternoon" {
		t.Fatalf("list of two: %+v %v", list, err)
	}
	if list, _, err := s.List(eventsCtx(t), "globex"); err != nil || len(list) != 0 {
		t.Fatalf("another tenant lists %+v %v", list, err)
	}
	if ok, err := s.Delete(eventsCtx(t), "acme", "nightly"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, err := s.Delete(eventsCtx(t), "acme", "nightly"); err != nil || ok {
		t.Fatalf("a second delete: %v %v, want nothing deleted", ok, err)
	}
	if _, err := s.Get(eventsCtx(t), "acme", "nightly"); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}

func tickClaimedOnce(t *testing.T, s SchedulesFixture) {
	rec, err := s.Create(eventsCtx(t), everyMinute("tick"), t0)
	if err != nil {
		t.Fatal(err)
	}
	tick := rec.Next
	if due, err := s.Due(eventsCtx(t), tick.Add(-time.Second), 10); err != nil || len(due) != 0 {
		t.Fatalf("due before its tick: %+v %v", due, err)
	}
	due, err := s.Due(eventsCtx(t), tick, 10)
	if err != nil || len(due) != 1 || due[0].ID != "tick" || due[0].Tenant != "acme" || !due[0].At.Equal(tick) {
		t.Fatalf("due at its tick: %+v %v", due, err)
	}
	p := store.PendingFire{TickMS: tick.UnixMilli(), ExecutionID: "ex_tick1", FlowID: "report", FlowVersion: store.LatestVersion, By: "a"}
	next := tick.Add(time.Minute)
	claimed, ok, err := s.Claim(eventsCtx(t), rec, p, next)
	if err != nil || !ok || claimed.ExecutionID != p.ExecutionID || claimed.By != "a" || claimed.TickMS != p.TickMS ||
		claimed.ClaimedMS <= 0 || claimed.FirstClaimedMS != claimed.ClaimedMS {
		t.Fatalf("first claim: %+v %v %v", claimed, ok, err)
	}
	// The claim is stored as it was returned: its token is what Complete compares.
	if got := get(t, s, "acme", "tick"); len(got.Pending) != 1 || got.Pending[0].Raw() != claimed.Raw() || !got.LastTick.Equal(tick) || !got.Next.Equal(next) {
		t.Fatalf("while pending: %+v", got)
	}
	// A second process read the same record: its claim of the same tick fails.
	q := p
	q.By, q.ExecutionID = "b", "ex_tick2"
	if _, ok, err := s.Claim(eventsCtx(t), rec, q, next); err != nil || ok {
		t.Fatalf("a second claim of the tick: %v %v, want refused", ok, err)
	}
	fire := &store.ScheduleFire{Tick: tick, ExecutionID: p.ExecutionID, FlowVersion: p.FlowVersion, MessageID: "1-1", At: tick, By: "a"}
	if ok, err := s.Complete(eventsCtx(t), "acme", "tick", claimed, fire, nil); err != nil || !ok {
		t.Fatalf("complete: %v %v", ok, err)
	}
	if ok, err := s.Complete(eventsCtx(t), "acme", "tick", claimed, fire, nil); err != nil || ok {
		t.Fatalf("a second complete: %v %v, want nothing done", ok, err)
	}
	got, err := s.Get(eventsCtx(t), "acme", "tick")
	if err != nil || !got.LastTick.Equal(tick) || !got.Next.Equal(next) || len(got.Pending) != 0 ||
		got.LastFire == nil || got.LastFire.ExecutionID != p.ExecutionID || got.LastFire.MessageID != "1-1" {
		t.Fatalf("after the fire: %+v %v", got, err)
	}
	if due, err := s.Due(eventsCtx(t), tick, 10); err != nil || len(due) != 0 {
		t.Fatalf("the fired tick is due again: %+v %v", due, err)
	}
	if at := dueScore(t, s, "acme", "tick"); !at.Equal(next) {
		t.Fatalf("due at %s after the fire, want the next tick %s", at, next)
	}
}

func disabledIsNeverDue(t *testing.T, s SchedulesFixture) {
	if _, err := s.Create(eventsCtx(t), everyMinute("off"), t0); err != nil {
		t.Fatal(err)
	}
	rec, changed, err := s.SetEnabled(eventsCtx(t), "acme", "off", false, t0)
	if err != nil || !changed || rec.Enabled || !rec.Next.IsZero() {
		t.Fatalf("disable: %+v %v %v", rec, changed, err)
	}
	if due, err := s.Due(eventsCtx(t), t0.Add(24*time.Hour), 10); err != nil || len(due) != 0 {
		t.Fatalf("a disabled schedule is due: %+v %v", due, err)
	}
	if at := dueScore(t, s, "acme", "off"); !at.IsZero() {
		t.Fatalf("a disabled schedule's due score is %s, want +inf", at)
	}
	if got := get(t, s, "acme", "off"); got.Enabled || !got.Next.IsZero() || got.Rev != 2 {
		t.Fatalf("stored: %+v", got)
	}
	// A disabled schedule can be created too: it is never due either.
	off := schedule("born-off", "acme", "* * * * *")
	off.Enabled = false
	if rec := create(t, s, off, t0); !rec.Next.IsZero() {
		t.Fatalf("created disabled: %+v", rec)
	}
	if due, err := s.Due(eventsCtx(t), t0.Add(24*time.Hour), 10); err != nil || len(due) != 0 {
		t.Fatalf("a schedule created disabled is due: %+v %v", due, err)
	}
}

// The due index is one for every tenant: earliest first, up to the limit (at least one).
func dueEarliestFirstAcrossTenants(t *testing.T, s SchedulesFixture) {
	a := create(t, s, schedule("a", "acme", "* * * * *"), t0)     // 00:01
	b := create(t, s, schedule("b", "globex", "*/5 * * * *"), t0) // 00:05
	c := create(t, s, schedule("c", "", "0 * * * *"), t0)         // 01:00, the default tenant
	create(t, s, schedule("d", "acme", "0 0 1 1 *"), t0)          // next year
	if got, want := due(t, s, c.Next, 10), []string{dueEntry("acme", "a", a.Next), dueEntry("globex", "b", b.Next), dueEntry("default", "c", c.Next)}; !slices.Equal(got, want) {
		t.Fatalf("due %v, want %v", got, want)
	}
	if got, want := due(t, s, c.Next, 2), []string{dueEntry("acme", "a", a.Next), dueEntry("globex", "b", b.Next)}; !slices.Equal(got, want) {
		t.Fatalf("due with a limit of 2: %v, want %v", got, want)
	}
	if got, want := due(t, s, c.Next, 0), []string{dueEntry("acme", "a", a.Next)}; !slices.Equal(got, want) {
		t.Fatalf("due with no limit: %v, want the earliest only (%v)", got, want)
	}
	if got, want := due(t, s, b.Next.Add(-time.Millisecond), 10), []string{dueEntry("acme", "a", a.Next)}; !slices.Equal(got, want) {
		t.Fatalf("due just before b's tick: %v, want %v", got, want)
	}
}

// A skip moves last_tick past its tick with the claim's compare-and-set: the same read can
// neither skip nor claim again, and a read from before an edit cannot skip.
func skippedTickIsNeverFired(t *testing.T, s SchedulesFixture) {
	rec := create(t, s, everyMinute("skip"), t0)
	tick, next := rec.Next, rec.Next.Add(time.Minute)
	when := tick.Add(1500 * time.Millisecond)
	if ok, err := s.Skip(eventsCtx(t), rec, tick, "tenant_disabled", next, when); err != nil || !ok {
		t.Fatalf("skip: %v %v", ok, err)
	}
	if ok, err := s.Skip(eventsCtx(t), rec, tick, "tenant_disabled", next, when); err != nil || ok {
		t.Fatalf("a second skip of the same read: %v %v, want refused", ok, err)
	}
	if _, ok, err := s.Claim(eventsCtx(t), rec, store.PendingFire{TickMS: tick.UnixMilli(), ExecutionID: "ex_skip", FlowID: "report", FlowVersion: "1"}, next); err != nil || ok {
		t.Fatalf("a claim of the skipped tick: %v %v, want refused", ok, err)
	}
	got := get(t, s, "acme", "skip")
	if !got.LastTick.Equal(tick) || !got.Next.Equal(next) || len(got.Pending) != 0 || got.LastFire != nil || got.Rev != 1 ||
		got.LastSkip == nil || !got.LastSkip.Tick.Equal(tick) || got.LastSkip.Reason != "tenant_disabled" || !got.LastSkip.At.Equal(when) {
		t.Fatalf("after the skip: %+v (last skip %+v)", got, got.LastSkip)
	}
	if at := dueScore(t, s, "acme", "skip"); !at.Equal(next) {
		t.Fatalf("due at %s after the skip, want %s", at, next)
	}
	// An edit between the read and the skip wins.
	if _, changed, err := s.Update(eventsCtx(t), "acme", "skip", t0, func(sc *store.Schedule) error { sc.FlowID = "other"; return nil }); err != nil || !changed {
		t.Fatalf("edit: %v %v", changed, err)
	}
	if ok, err := s.Skip(eventsCtx(t), got, next, "tenant_disabled", next.Add(time.Minute), when); err != nil || ok {
		t.Fatalf("a skip of a read from before an edit: %v %v, want refused", ok, err)
	}
	if got := get(t, s, "acme", "skip"); !got.LastTick.Equal(tick) || got.Rev != 2 {
		t.Fatalf("the refused skip wrote: %+v", got)
	}
}

// A claim whose claimer died is taken over once it is older than the grace, by the store's
// clock, and only then; the new holder's token completes it, the old one's no longer does.
func staleClaimTakenOver(t *testing.T, s SchedulesFixture) {
	rec := create(t, s, schedule("stale", "acme", "0 0 1 1 *"), t0) // yearly: the next tick is far from the claim's deadline
	tick := rec.Next
	next := tick.AddDate(1, 0, 0)
	p, ok, err := s.Claim(eventsCtx(t), rec, store.PendingFire{TickMS: tick.UnixMilli(), ExecutionID: "ex_stale", FlowID: "report", FlowVersion: "3", By: "dead"}, next)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if at := dueScore(t, s, "acme", "stale"); !at.Equal(deadline(p, store.DefaultClaimGrace, next)) {
		t.Fatalf("due at %s while pending, want the claim's deadline %s", at, deadline(p, store.DefaultClaimGrace, next))
	}
	if _, ok, young, err := s.TakeOver(eventsCtx(t), "acme", "stale", p, "alive"); err != nil || ok || !young {
		t.Fatalf("takeover of a fresh claim: %v %v %v, want young", ok, young, err)
	}
	// Claimed 5 s ago: still within the grace.
	s.AgeClaim(t, "acme", "stale", p.TickMS, 5*time.Second)
	aged := get(t, s, "acme", "stale").Pending
	if len(aged) != 1 || aged[0].ClaimedMS != p.ClaimedMS-5000 || aged[0].ExecutionID != "ex_stale" {
		t.Fatalf("aged claim: %+v", aged)
	}
	if _, ok, young, err := s.TakeOver(eventsCtx(t), "acme", "stale", aged[0], "alive"); err != nil || ok || !young {
		t.Fatalf("takeover of a claim within the grace: %v %v %v, want young", ok, young, err)
	}
	// The token from before is not the stored claim any more.
	if _, ok, young, err := s.TakeOver(eventsCtx(t), "acme", "stale", p, "alive"); err != nil || ok || young {
		t.Fatalf("takeover with a token that changed: %v %v %v, want gone", ok, young, err)
	}
	// Claimed a minute ago: past the grace.
	s.AgeClaim(t, "acme", "stale", p.TickMS, time.Minute)
	old := get(t, s, "acme", "stale").Pending[0]
	taken, ok, young, err := s.TakeOver(eventsCtx(t), "acme", "stale", old, "alive")
	if err != nil || !ok || young {
		t.Fatalf("takeover of a stale claim: %v %v %v", ok, young, err)
	}
	if taken.By != "alive" || taken.ExecutionID != "ex_stale" || taken.FlowVersion != "3" || taken.TickMS != p.TickMS ||
		taken.FirstClaimedMS != p.FirstClaimedMS || taken.ClaimedMS < p.ClaimedMS {
		t.Fatalf("taken %+v (claimed %+v)", taken, p)
	}
	got := get(t, s, "acme", "stale")
	if len(got.Pending) != 1 || got.Pending[0].Raw() != taken.Raw() || !got.LastTick.Equal(tick) || !got.Next.Equal(next) {
		t.Fatalf("after the takeover: %+v", got)
	}
	if at := dueScore(t, s, "acme", "stale"); !at.Equal(deadline(taken, store.DefaultClaimGrace, next)) {
		t.Fatalf("due at %s after the takeover, want the new deadline %s", at, deadline(taken, store.DefaultClaimGrace, next))
	}
	// The new holder's claim is young again for everyone else.
	if _, ok, young, err := s.TakeOver(eventsCtx(t), "acme", "stale", taken, "third"); err != nil || ok || !young {
		t.Fatalf("takeover of the taken claim: %v %v %v, want young", ok, young, err)
	}
	fire := &store.ScheduleFire{Tick: tick, ExecutionID: "ex_stale", FlowVersion: "3", At: t0, By: "alive", Recovered: true}
	for _, stale := range []store.PendingFire{p, old} {
		if ok, err := s.Complete(eventsCtx(t), "acme", "stale", stale, fire, nil); err != nil || ok {
			t.Fatalf("a completion with the dead claimer's token: %v %v", ok, err)
		}
	}
	if ok, err := s.Complete(eventsCtx(t), "acme", "stale", taken, fire, nil); err != nil || !ok {
		t.Fatalf("completion by the new holder: %v %v", ok, err)
	}
	got = get(t, s, "acme", "stale")
	if len(got.Pending) != 0 || got.LastFire == nil || !got.LastFire.Recovered || got.LastFire.By != "alive" || !got.LastFire.Tick.Equal(tick) {
		t.Fatalf("after the recovery: %+v (last fire %+v)", got, got.LastFire)
	}
	if at := dueScore(t, s, "acme", "stale"); !at.Equal(next) {
		t.Fatalf("due at %s after the recovery, want the next tick %s", at, next)
	}
	if _, ok, young, err := s.TakeOver(eventsCtx(t), "acme", "stale", taken, "third"); err != nil || ok || young {
		t.Fatalf("takeover of a completed claim: %v %v %v, want gone", ok, young, err)
	}
}

// Two claims may be pending at once; the one completed last does not move last_fire back to an
// older tick, and a claim completed as skipped records a skip.
func lateCompletionKeepsNewestFire(t *testing.T, s SchedulesFixture) {
	rec := create(t, s, everyMinute("fires"), t0)
	t1 := rec.Next
	t2, t3, t4 := t1.Add(time.Minute), t1.Add(2*time.Minute), t1.Add(3*time.Minute)
	c1 := claim(t, s, rec, t1, "ex_1", t2)
	c2 := claim(t, s, get(t, s, "acme", "fires"), t2, "ex_2", t3)
	got := get(t, s, "acme", "fires")
	if len(got.Pending) != 2 || got.Pending[0].ExecutionID != "ex_1" || got.Pending[1].ExecutionID != "ex_2" {
		t.Fatalf("two pending claims, oldest tick first: %+v", got.Pending)
	}
	// Due at the earliest of the next tick and each claim's deadline.
	if at, want := dueScore(t, s, "acme", "fires"), deadline(c1, store.DefaultClaimGrace, deadline(c2, store.DefaultClaimGrace, t3)); !at.Equal(want) {
		t.Fatalf("due at %s with two claims pending, want %s", at, want)
	}
	for _, c := range []struct {
		p  store.PendingFire
		ex string
	}{{c2, "ex_2"}, {c1, "ex_1"}} {
		fire := &store.ScheduleFire{Tick: c.p.Tick(), ExecutionID: c.ex, FlowVersion: "3", At: t0, By: "a"}
		if ok, err := s.Complete(eventsCtx(t), "acme", "fires", c.p, fire, nil); err != nil || !ok {
			t.Fatalf("complete %s: %v %v", c.ex, ok, err)
		}
	}
	got = get(t, s, "acme", "fires")
	if len(got.Pending) != 0 || got.LastFire == nil || got.LastFire.ExecutionID != "ex_2" || !got.LastFire.Tick.Equal(t2) {
		t.Fatalf("the late completion of an older tick moved the last fire: %+v", got.LastFire)
	}
	c3 := claim(t, s, got, t3, "ex_3", t4)
	if ok, err := s.Complete(eventsCtx(t), "acme", "fires", c3, nil, &store.ScheduleSkip{Tick: t3, Reason: "flow_not_published", At: t0}); err != nil || !ok {
		t.Fatalf("complete as skipped: %v %v", ok, err)
	}
	got = get(t, s, "acme", "fires")
	if len(got.Pending) != 0 || got.LastSkip == nil || got.LastSkip.Reason != "flow_not_published" || !got.LastSkip.Tick.Equal(t3) ||
		got.LastFire == nil || got.LastFire.ExecutionID != "ex_2" {
		t.Fatalf("after a skipped completion: %+v (fire %+v, skip %+v)", got, got.LastFire, got.LastSkip)
	}
	if at := dueScore(t, s, "acme", "fires"); !at.Equal(t4) {
		t.Fatalf("due at %s with nothing pending, want the next tick %s", at, t4)
	}
}

// Reschedule sets the next tick while rev is the read one, and the due score follows it and
// every pending claim's deadline.
func rescheduleFollowsRev(t *testing.T, s SchedulesFixture) {
	rec := create(t, s, everyMinute("re"), t0)
	later := t0.Add(time.Hour)
	if ok, err := s.Reschedule(eventsCtx(t), rec, later); err != nil || !ok {
		t.Fatalf("reschedule: %v %v", ok, err)
	}
	if got := get(t, s, "acme", "re"); !got.Next.Equal(later) || got.Rev != 1 {
		t.Fatalf("after the reschedule: %+v", got)
	}
	if at := dueScore(t, s, "acme", "re"); !at.Equal(later) {
		t.Fatalf("due at %s, want %s", at, later)
	}
	if ok, err := s.Reschedule(eventsCtx(t), rec, time.Time{}); err != nil || !ok {
		t.Fatalf("reschedule to none: %v %v", ok, err)
	}
	if got := get(t, s, "acme", "re"); !got.Next.IsZero() {
		t.Fatalf("next %s, want none", got.Next)
	}
	if at := dueScore(t, s, "acme", "re"); !at.IsZero() {
		t.Fatalf("due at %s with no next tick, want +inf", at)
	}
	if got := due(t, s, t0.AddDate(10, 0, 0), 10); len(got) != 0 {
		t.Fatalf("due with no next tick: %v", got)
	}
	// With a claim pending, a far next tick leaves the claim's deadline as the due score.
	p := claim(t, s, get(t, s, "acme", "re"), later, "ex_re", later.Add(time.Minute))
	far := t0.AddDate(10, 0, 0)
	read := get(t, s, "acme", "re")
	if ok, err := s.Reschedule(eventsCtx(t), read, far); err != nil || !ok {
		t.Fatalf("reschedule with a claim pending: %v %v", ok, err)
	}
	if at, want := dueScore(t, s, "acme", "re"), deadline(p, store.DefaultClaimGrace, far); !at.Equal(want) {
		t.Fatalf("due at %s, want the claim's deadline %s", at, want)
	}
	// A read from before an edit reschedules nothing.
	if _, changed, err := s.Update(eventsCtx(t), "acme", "re", t0, func(sc *store.Schedule) error { sc.FlowVersion = "4"; return nil }); err != nil || !changed {
		t.Fatalf("edit: %v %v", changed, err)
	}
	if ok, err := s.Reschedule(eventsCtx(t), read, later); err != nil || ok {
		t.Fatalf("reschedule of a read from before an edit: %v %v, want refused", ok, err)
	}
	if got := get(t, s, "acme", "re"); got.Next.Equal(later) || got.Rev != 2 {
		t.Fatalf("the refused reschedule wrote: %+v", got)
	}
}

// An edit of the calendar moves the baseline and the next tick, and the due index follows;
// any other edit keeps them; disabling and enabling again moves the baseline to the enable.
func updateMovesTheNextTick(t *testing.T, s SchedulesFixture) {
	rec := create(t, s, everyMinute("up"), t0) // next 00:01
	edit := t0.Add(10 * time.Second)
	five := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	upd, changed, err := s.Update(eventsCtx(t), "acme", "up", edit, func(sc *store.Schedule) error { sc.Cron = "*/5 * * * *"; return nil })
	if err != nil || !changed || upd.Rev != 2 || !upd.LastTick.Equal(edit) || !upd.Next.Equal(five) || !upd.UpdatedAt.Equal(edit) {
		t.Fatalf("edit of the calendar: %+v %v %v", upd, changed, err)
	}
	if got := get(t, s, "acme", "up"); got.Cron != "*/5 * * * *" || got.Rev != 2 || !got.LastTick.Equal(edit) || !got.Next.Equal(five) {
		t.Fatalf("stored: %+v", got)
	}
	if got := due(t, s, rec.Next, 10); len(got) != 0 {
		t.Fatalf("due at the old calendar's tick: %v", got)
	}
	if got, want := due(t, s, five, 10), []string{dueEntry("acme", "up", five)}; !slices.Equal(got, want) {
		t.Fatalf("due %v, want %v", got, want)
	}
	// The read from before the edit claims nothing.
	if _, ok, err := s.Claim(eventsCtx(t), rec, store.PendingFire{TickMS: rec.Next.UnixMilli(), ExecutionID: "ex_old", FlowID: "report", FlowVersion: "1"}, five); err != nil || ok {
		t.Fatalf("a claim of a read from before the edit: %v %v, want refused", ok, err)
	}
	// The same definition writes nothing; another flow keeps the calendar and its baseline.
	if _, changed, err := s.Update(eventsCtx(t), "acme", "up", edit.Add(time.Hour), func(*store.Schedule) error { return nil }); err != nil || changed {
		t.Fatalf("no edit: %v %v", changed, err)
	}
	upd, changed, err = s.Update(eventsCtx(t), "acme", "up", edit.Add(time.Hour), func(sc *store.Schedule) error { sc.FlowID = "other"; return nil })
	if err != nil || !changed || upd.Rev != 3 || !upd.LastTick.Equal(edit) || !upd.Next.Equal(five) {
		t.Fatalf("another flow: %+v %v %v", upd, changed, err)
	}
	if at := dueScore(t, s, "acme", "up"); !at.Equal(five) {
		t.Fatalf("due at %s after another flow, want %s", at, five)
	}
	// Enabled again two hours later: the ticks in between are never fired.
	if _, _, err := s.SetEnabled(eventsCtx(t), "acme", "up", false, edit); err != nil {
		t.Fatal(err)
	}
	back := t0.Add(2 * time.Hour)
	upd, changed, err = s.SetEnabled(eventsCtx(t), "acme", "up", true, back)
	if want := back.Truncate(5 * time.Minute).Add(5 * time.Minute); err != nil || !changed || !upd.LastTick.Equal(back) || !upd.Next.Equal(want) {
		t.Fatalf("enabled again: %+v %v %v, want the next tick %s", upd, changed, err, want)
	}
	if at := dueScore(t, s, "acme", "up"); !at.Equal(upd.Next) {
		t.Fatalf("due at %s after the enable, want %s", at, upd.Next)
	}
	// A refused definition writes nothing; a missing schedule is not found.
	if _, _, err := s.Update(eventsCtx(t), "acme", "up", back, func(sc *store.Schedule) error { sc.Cron = "nope"; return nil }); !errors.Is(err, store.ErrBadSchedule) {
		t.Fatalf("bad cron: %v", err)
	}
	if got := get(t, s, "acme", "up"); got.Rev != 5 || got.Cron != "*/5 * * * *" {
		t.Fatalf("a refused edit wrote: %+v", got)
	}
	if _, _, err := s.Update(eventsCtx(t), "acme", "nope", back, func(*store.Schedule) error { return nil }); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

// An edit is a compare-and-set on rev: a write between its read and its write makes it read
// and edit again, never overwrite; one that never stops winning is ErrScheduleChanged, and a
// delete in between is ErrScheduleNotFound.
func editRetriesOnAConcurrentWrite(t *testing.T, s SchedulesFixture) {
	create(t, s, everyMinute("race"), t0)
	calls := 0
	rec, changed, err := s.Update(eventsCtx(t), "acme", "race", t0, func(sc *store.Schedule) error {
		calls++
		if calls == 1 { // another writer, between this read and its write
			if _, _, err := s.Update(eventsCtx(t), "acme", "race", t0, func(o *store.Schedule) error { o.FlowVersion = "9"; return nil }); err != nil {
				return err
			}
		}
		sc.FlowID = "other"
		return nil
	})
	if err != nil || !changed || calls != 2 || rec.Rev != 3 || rec.FlowID != "other" || rec.FlowVersion != "9" {
		t.Fatalf("edit beside a concurrent one: %+v %v %v after %d calls", rec, changed, err, calls)
	}
	if got := get(t, s, "acme", "race"); got.Rev != 3 || got.FlowID != "other" || got.FlowVersion != "9" {
		t.Fatalf("stored: %+v", got)
	}
	calls = 0
	_, _, err = s.Update(eventsCtx(t), "acme", "race", t0, func(sc *store.Schedule) error {
		calls++
		if _, _, err := s.SetEnabled(eventsCtx(t), "acme", "race", calls%2 == 0, t0); err != nil {
			return err
		}
		sc.FlowID = "never"
		return nil
	})
	if !errors.Is(err, store.ErrScheduleChanged) || !model.IsTransient(err) || calls < 2 {
		t.Fatalf("an edit that always loses: %v after %d calls, want a transient ErrScheduleChanged", err, calls)
	}
	if got := get(t, s, "acme", "race"); got.FlowID != "other" {
		t.Fatalf("an edit that lost wrote: %+v", got)
	}
	_, _, err = s.Update(eventsCtx(t), "acme", "race", t0, func(sc *store.Schedule) error {
		if _, err := s.Delete(eventsCtx(t), "acme", "race"); err != nil {
			return err
		}
		sc.FlowID = "ghost"
		return nil
	})
	if !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("an edit of a schedule deleted meanwhile: %v, want ErrScheduleNotFound", err)
	}
	if _, err := s.Get(eventsCtx(t), "acme", "race"); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("the edit brought a deleted schedule back: %v", err)
	}
}

// A deleted schedule leaves no due entry, no list entry and no claim that completes; its id is
// free again, in its tenant only.
func deleteLeavesNothing(t *testing.T, s SchedulesFixture) {
	rec := create(t, s, everyMinute("gone"), t0)
	other := create(t, s, schedule("gone", "globex", "* * * * *"), t0)
	p := claim(t, s, rec, rec.Next, "ex_gone", rec.Next.Add(time.Minute))
	if ok, err := s.Delete(eventsCtx(t), "acme", "gone"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if _, err := s.Get(eventsCtx(t), "acme", "gone"); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, ok, err := s.DueScore(eventsCtx(t), "acme", "gone"); err != nil || ok {
		t.Fatalf("a due entry after delete: %v %v", ok, err)
	}
	if got, want := due(t, s, t0.Add(time.Hour), 10), []string{dueEntry("globex", "gone", other.Next)}; !slices.Equal(got, want) {
		t.Fatalf("due after delete: %v, want %v", got, want)
	}
	if list, bad, err := s.List(eventsCtx(t), "acme"); err != nil || len(list) != 0 || len(bad) != 0 {
		t.Fatalf("list after delete: %+v %+v %v", list, bad, err)
	}
	if ok, err := s.Complete(eventsCtx(t), "acme", "gone", p, &store.ScheduleFire{Tick: p.Tick(), ExecutionID: "ex_gone"}, nil); err != nil || ok {
		t.Fatalf("completion of a deleted schedule's claim: %v %v", ok, err)
	}
	if _, ok, young, err := s.TakeOver(eventsCtx(t), "acme", "gone", p, "alive"); err != nil || ok || young {
		t.Fatalf("takeover of a deleted schedule's claim: %v %v %v", ok, young, err)
	}
	if _, err := s.Get(eventsCtx(t), "acme", "gone"); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("the completion brought the record back: %v", err)
	}
	if got := get(t, s, "globex", "gone"); got.Rev != 1 {
		t.Fatalf("the other tenant's schedule: %+v", got)
	}
	again := create(t, s, everyMinute("gone"), t0.Add(time.Hour))
	if got := get(t, s, "acme", "gone"); got.Rev != 1 || len(got.Pending) != 0 || got.LastFire != nil || !got.LastTick.Equal(t0.Add(time.Hour)) || !got.Next.Equal(again.Next) {
		t.Fatalf("created again: %+v", got)
	}
}

// A record that does not decode is an ErrBadSchedule of its own: listed apart from the good
// ones, and parked at +inf (only where a record exists) until it is deleted or written again.
func unreadableListedAndParked(t *testing.T, s SchedulesFixture) {
	good := create(t, s, everyMinute("good"), t0)
	create(t, s, everyMinute("bad"), t0)
	s.Spoil(t, "acme", "bad")
	if _, err := s.Get(eventsCtx(t), "acme", "bad"); !errors.Is(err, store.ErrBadSchedule) || model.IsTransient(err) {
		t.Fatalf("get of an unreadable record: %v, want a permanent ErrBadSchedule", err)
	}
	list, bad, err := s.List(eventsCtx(t), "acme")
	if err != nil || len(list) != 1 || list[0].ID != "good" || len(bad) != 1 || bad[0].ID != "bad" || !errors.Is(bad[0].Err, store.ErrBadSchedule) {
		t.Fatalf("list with an unreadable record: %+v %+v %v", list, bad, err)
	}
	if err := s.Park(eventsCtx(t), "acme", "bad"); err != nil {
		t.Fatal(err)
	}
	if at := dueScore(t, s, "acme", "bad"); !at.IsZero() {
		t.Fatalf("parked at %s, want +inf", at)
	}
	if got, want := due(t, s, t0.Add(time.Hour), 10), []string{dueEntry("acme", "good", good.Next)}; !slices.Equal(got, want) {
		t.Fatalf("due with one parked: %v, want %v", got, want)
	}
	if ok, err := s.Delete(eventsCtx(t), "acme", "bad"); err != nil || !ok {
		t.Fatalf("delete of an unreadable record: %v %v", ok, err)
	}
	// Parking a schedule without a record makes no due entry.
	if err := s.Park(eventsCtx(t), "acme", "bad"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.DueScore(eventsCtx(t), "acme", "bad"); err != nil || ok {
		t.Fatalf("park of a deleted schedule made a due entry: %v %v", ok, err)
	}
	if list, bad, err := s.List(eventsCtx(t), "acme"); err != nil || len(list) != 1 || len(bad) != 0 {
		t.Fatalf("list after the delete: %+v %+v %v", list, bad, err)
	}
}

// Forget drops the due entry of a schedule whose record is gone, and only that.
func forgetOnlyWithoutRecord(t *testing.T, s SchedulesFixture) {
	kept := create(t, s, everyMinute("kept"), t0)
	create(t, s, everyMinute("lost"), t0)
	s.Drop(t, "acme", "lost")
	if _, err := s.Get(eventsCtx(t), "acme", "lost"); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("get of a dropped record: %v", err)
	}
	for range 2 {
		for _, id := range []string{"kept", "lost"} {
			if err := s.Forget(eventsCtx(t), "acme", id); err != nil {
				t.Fatalf("forget %s: %v", id, err)
			}
		}
	}
	if at := dueScore(t, s, "acme", "kept"); !at.Equal(kept.Next) {
		t.Fatalf("forget moved a live schedule's due entry to %s", at)
	}
	if _, ok, err := s.DueScore(eventsCtx(t), "acme", "lost"); err != nil || ok {
		t.Fatalf("a due entry without a record after forget: %v %v", ok, err)
	}
	if got, want := due(t, s, t0.Add(time.Hour), 10), []string{dueEntry("acme", "kept", kept.Next)}; !slices.Equal(got, want) {
		t.Fatalf("due after forget: %v, want %v", got, want)
	}
}

// FindInStream reads the driver's task streams from a time on.
func findsAStartInTheStream(t *testing.T, s SchedulesFixture) {
	start := time.Now().Add(-time.Second).UnixMilli()
	for _, payload := range []string{"n0", "n1", "n2"} {
		if _, err := s.Driver.Streams().Add(eventsCtx(t), s.Stream, "payload", payload); err != nil {
			t.Fatal(err)
		}
	}
	match := func(want string) func(store.StreamEntry) bool {
		return func(e store.StreamEntry) bool { return e.Fields["payload"] == want }
	}
	if found, complete, err := s.FindInStream(eventsCtx(t), s.Stream, start, 100, match("n1")); err != nil || !found || !complete {
		t.Fatalf("n1: %v %v %v", found, complete, err)
	}
	if found, complete, err := s.FindInStream(eventsCtx(t), s.Stream, 0, 100, match("n2")); err != nil || !found || !complete {
		t.Fatalf("n2 from the start: %v %v %v", found, complete, err)
	}
	if found, complete, err := s.FindInStream(eventsCtx(t), s.Stream, 0, 100, match("absent")); err != nil || found || !complete {
		t.Fatalf("absent: %v %v %v", found, complete, err)
	}
	if found, _, err := s.FindInStream(eventsCtx(t), s.Stream, time.Now().Add(time.Hour).UnixMilli(), 100, match("n1")); err != nil || found {
		t.Fatalf("an entry older than the window was found: %v %v", found, err)
	}
	if found, complete, err := s.FindInStream(eventsCtx(t), s.Stream+"-none", 0, 100, match("n1")); err != nil || found || !complete {
		t.Fatalf("no stream: %v %v %v", found, complete, err)
	}
}
