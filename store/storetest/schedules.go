package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"plaita/store"
)

// SchedulesBackend is one implementation of the schedules under the contract.
type SchedulesBackend struct {
	Name string
	// Open makes a new, empty set of schedules for one case (cases run in parallel).
	Open func(t *testing.T) *store.Schedules
}

// SchedulesContract runs the schedules' cases against b: what the console, the CLI and the
// schedule role rely on — a schedule is created once and read back as created, a tick is
// claimed by one process only and completed once, and a disabled schedule is never due.
func SchedulesContract(t *testing.T, b SchedulesBackend) {
	runCases(t, b.Name, b.Open, []namedCase[*store.Schedules]{
		{"CreatedOnce", createdOnce},
		{"TickClaimedOnce", tickClaimedOnce},
		{"DisabledIsNeverDue", disabledIsNeverDue},
	})
}

// t0 is the contract's clock: half a minute past a minute, so an every-minute schedule's next
// tick is 30 s later.
var t0 = time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)

func everyMinute(id string) store.Schedule {
	return store.Schedule{ID: id, TenantID: "acme", Cron: "* * * * *", Enabled: true, FlowID: "report",
		FlowVersion: store.LatestVersion, Input: json.RawMessage(`{}`)}
}

func createdOnce(t *testing.T, s *store.Schedules) {
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
	if err != nil || got.Cron != "* * * * *" || got.FlowID != "report" || !got.Enabled || !got.Next.Equal(rec.Next) {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := s.Get(eventsCtx(t), "globex", "nightly"); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("another tenant's schedule: %v, want ErrScheduleNotFound", err)
	}
	list, bad, err := s.List(eventsCtx(t), "acme")
	if err != nil || len(list) != 1 || len(bad) != 0 || list[0].ID != "nightly" {
		t.Fatalf("list: %+v %+v %v", list, bad, err)
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

func tickClaimedOnce(t *testing.T, s *store.Schedules) {
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
	if err != nil || !ok || claimed.ExecutionID != p.ExecutionID {
		t.Fatalf("first claim: %+v %v %v", claimed, ok, err)
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
		got.LastFire == nil || got.LastFire.ExecutionID != p.ExecutionID {
		t.Fatalf("after the fire: %+v %v", got, err)
	}
	if due, err := s.Due(eventsCtx(t), tick, 10); err != nil || len(due) != 0 {
		t.Fatalf("the fired tick is due again: %+v %v", due, err)
	}
}

func disabledIsNeverDue(t *testing.T, s *store.Schedules) {
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
}
