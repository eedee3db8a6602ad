package queuetest

import (
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/queue"
)

// DelayBackend is one implementation of the delay queue under the contract: a delay queue and
// the task stream it sends its due entries to, in one backend.
type DelayBackend struct {
	Name string
	// Open makes a new, empty delay queue and task stream for one case.
	Open func(t *testing.T) (*queue.Delay, Stream)
}

// DelayContract runs the delay queue's cases against b: a due entry is sent once, as a resume
// task on the stream, a later one waits, and scheduling an entry again moves its time.
func DelayContract(t *testing.T, b DelayBackend) {
	cases := []struct {
		name string
		run  func(t *testing.T, d *queue.Delay, s Stream)
	}{
		{"DueSentOnceLaterWaits", dueSentOnceLaterWaits},
		{"RescheduleMovesTheTime", rescheduleMovesTheTime},
		{"LookupAndStats", lookupAndStats},
	}
	for _, c := range cases {
		t.Run(b.Name+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			d, s := b.Open(t)
			c.run(t, d, s)
		})
	}
}

func delayEntry(due time.Time) queue.DelayEntry {
	return queue.DelayEntry{ExecutionID: "ex_" + rand.Text(), TenantID: "default", FlowID: "f", FlowVersion: "1",
		ResumeType: state.ResumeContinue, Node: "wait", Due: due}
}

func moveOptions(s Stream, t *testing.T) queue.MoveOptions {
	return queue.MoveOptions{Stream: s.Queue(t, "mover").Stream()}
}

func dueSentOnceLaterWaits(t *testing.T, d *queue.Delay, s Stream) {
	now := time.Now()
	due1, due2, later := delayEntry(now.Add(-time.Minute)), delayEntry(now.Add(-time.Second)), delayEntry(now.Add(time.Hour))
	for _, e := range []queue.DelayEntry{due1, due2, later} {
		if err := d.Schedule(ctxOf(t), e); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := d.Stats(ctxOf(t), now); err != nil || st.Scheduled != 3 || st.Due != 2 {
		t.Fatalf("stats %+v %v", st, err)
	}
	o := moveOptions(s, t)
	rep, err := d.MoveDue(ctxOf(t), now, o)
	if err != nil || len(rep.Fired) != 2 || len(rep.Dead) != 0 {
		t.Fatalf("first pass %+v %v", rep, err)
	}
	// A second pass (another mover, or this one again) sends nothing more.
	if rep, err = d.MoveDue(ctxOf(t), now, o); err != nil || len(rep.Fired) != 0 {
		t.Fatalf("second pass %+v %v", rep, err)
	}
	q := s.Queue(t, "a")
	var woken []string
	for _, dl := range read(t, q, "a", 10) {
		if dl.Err != nil || dl.Envelope.Kind != queue.KindResume || dl.Envelope.ResumeType != state.ResumeContinue {
			t.Fatalf("sent task %+v", dl)
		}
		woken = append(woken, dl.Envelope.ExecutionID)
	}
	want := []string{due1.ExecutionID, due2.ExecutionID}
	slices.Sort(woken)
	slices.Sort(want)
	if !slices.Equal(woken, want) {
		t.Fatalf("woken %v, want %v", woken, want)
	}
	lk, err := d.Lookup(ctxOf(t), later)
	if err != nil || !lk.Scheduled || !lk.At.Equal(later.Due.Truncate(time.Millisecond)) {
		t.Fatalf("the later entry: %+v %v (due %s)", lk, err, later.Due)
	}
	if lk, err = d.Lookup(ctxOf(t), due1); err != nil || lk.Scheduled {
		t.Fatalf("a sent entry is still scheduled: %+v %v", lk, err)
	}
}

func rescheduleMovesTheTime(t *testing.T, d *queue.Delay, s Stream) {
	now := time.Now()
	e := delayEntry(now.Add(time.Hour))
	if err := d.Schedule(ctxOf(t), e); err != nil {
		t.Fatal(err)
	}
	if err := d.Reschedule(ctxOf(t), e, now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if st, err := d.Stats(ctxOf(t), now); err != nil || st.Scheduled != 1 || st.Due != 1 {
		t.Fatalf("stats after the reschedule %+v %v: one entry, due", st, err)
	}
	rep, err := d.MoveDue(ctxOf(t), now, moveOptions(s, t))
	if err != nil || len(rep.Fired) != 1 {
		t.Fatalf("move %+v %v", rep, err)
	}
}

// Lookup finds a scheduled entry at its time and a sent one nowhere; Stats counts and dates
// what waits.
func lookupAndStats(t *testing.T, d *queue.Delay, s Stream) {
	now := time.Now().Truncate(time.Millisecond)
	early, late := delayEntry(now.Add(time.Minute)), delayEntry(now.Add(time.Hour))
	for _, e := range []queue.DelayEntry{late, early} {
		if err := d.Schedule(ctxOf(t), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Schedule(ctxOf(t), early); err != nil { // the same entry again: one member
		t.Fatal(err)
	}
	lk, err := d.Lookup(ctxOf(t), early)
	if err != nil || !lk.Scheduled || !lk.At.Equal(early.Due) || lk.Attempts != 0 || lk.Dead != nil {
		t.Fatalf("lookup %+v %v, want scheduled at %s", lk, err, early.Due)
	}
	st, err := d.Stats(ctxOf(t), now)
	if err != nil || st.Scheduled != 2 || st.Due != 0 || st.Dead != 0 || !st.OldestDue.Equal(early.Due) {
		t.Fatalf("stats %+v %v", st, err)
	}
	if dead, err := d.ListDead(ctxOf(t)); err != nil || len(dead) != 0 {
		t.Fatalf("dead %+v %v", dead, err)
	}
}
