package queuetest

import (
	"slices"
	"testing"
	"time"

	"plaita/queue"
)

// A read that blocks returns the task added while it waits, long before its block ends.
func blockedReadWakesOnAdd(t *testing.T, s Stream) {
	a := s.Queue(t, "a")
	got := make(chan []queue.Delivery, 1)
	errc := make(chan error, 1)
	go func() {
		ds, err := a.Read(ctxOf(t), "a", 1, 15*time.Second)
		got <- ds
		errc <- err
	}()
	// The read may start before or after the add: either way it must return the task.
	id := enqueue(t, s, start("f"))
	ds := <-got
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].ID != id {
		t.Fatalf("blocked read returned %+v, want the task %s", ds, id)
	}
}

// The backlog tells what waits (lag), what is being worked (pending) and who asked
// (consumers); before the group exists every entry is lag.
func backlogCountsLagAndPending(t *testing.T, s Stream) {
	for range 3 {
		enqueue(t, s, start("f"))
	}
	a := s.Queue(t, "a")
	s.Queue(t, "b")
	if ds := read(t, a, "a", 1); len(ds) != 1 {
		t.Fatalf("read %+v", ds)
	}
	b, err := a.Backlog(ctxOf(t))
	if err != nil {
		t.Fatal(err)
	}
	if !b.GroupExists || b.Length != 3 || b.Pending != 1 || b.Lag != 2 || b.Residue != 0 || b.Consumers != 1 || b.DLQLength != 0 {
		t.Fatalf("backlog %+v: want 3 entries, 1 pending, 2 waiting, 1 consumer", b)
	}
}

// A consumer still working on a task touches it: its idle time restarts, so no sibling
// reclaims it meanwhile, and its delivery count does not move.
func touchKeepsItFromReclaim(t *testing.T, s Stream) {
	a, b := s.Queue(t, "a"), s.Queue(t, "b")
	id := enqueue(t, s, start("f"))
	if ds := read(t, a, "a", 1); len(ds) != 1 {
		t.Fatalf("read %+v", ds)
	}
	// Touch well within the idle time, many times over: b's reclaim passes between the touches
	// find nothing idle. Each pass starts right after a touch, so it is within the idle time.
	for range 6 {
		if err := a.Touch(ctxOf(t), "a", id); err != nil {
			t.Fatal(err)
		}
		touched := time.Now()
		ds, err := b.Reclaim(ctxOf(t), "b", 10)
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(touched) < MinIdle && len(ds) != 0 {
			t.Fatalf("a touched task was reclaimed: %+v", ds)
		}
		time.Sleep(MinIdle / 3)
	}
	if d := reclaimed(t, b, "b", id); d.Count != 2 {
		t.Fatalf("count %d after touches and one reclaim, want 2", d.Count)
	}
}

// The residue sweeper never removes a task that waits or is being worked.
func sweepLeavesTheBacklog(t *testing.T, s Stream) {
	a := s.Queue(t, "a")
	enqueue(t, s, start("f"))
	enqueue(t, s, start("f"))
	done := enqueue(t, s, start("f"))
	ds := read(t, a, "a", 3)
	if len(ds) != 3 {
		t.Fatalf("read %+v", ds)
	}
	enqueue(t, s, start("f")) // not delivered yet
	for _, d := range ds {
		if d.ID == done {
			if err := a.Ack(ctxOf(t), d); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := a.SweepResidue(ctxOf(t))
	if err != nil || n != 0 {
		t.Fatalf("swept %d (%v) of a stream without residue", n, err)
	}
	if d := depth(t, a); d.StreamLength != 3 || d.Pending != 2 {
		t.Fatalf("depth %+v after the sweep: want 3 entries, 2 pending", d)
	}
}

// Tasks names every execution with a task in the stream; the dead letters page newest first,
// each page going on where the last ended.
func tasksAndDeadLetterPages(t *testing.T, s Stream) {
	a := s.Queue(t, "a")
	var ids []string
	for range 5 {
		env := start("f")
		enqueue(t, s, env)
		ids = append(ids, env.ExecutionID)
	}
	set, err := a.Tasks(ctxOf(t), 100)
	if err != nil || !set.Complete || set.Read != 5 {
		t.Fatalf("tasks %+v %v", set, err)
	}
	for _, id := range ids {
		if !set.Has("default", id) {
			t.Fatalf("task of %s missing from the set", id)
		}
	}
	if part, err := a.Tasks(ctxOf(t), 3); err != nil || part.Complete || part.Read != 3 {
		t.Fatalf("tasks with limit 3: %+v %v", part, err)
	}
	ds := read(t, a, "a", 5)
	var letters []string
	for _, d := range ds {
		if err := a.DeadLetter(ctxOf(t), d, "poison"); err != nil {
			t.Fatal(err)
		}
	}
	before := ""
	for {
		page, next, err := a.DLQPage(ctxOf(t), before, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			letters = append(letters, e.ExecutionID)
		}
		if next == "" {
			break
		}
		before = next
	}
	slices.Reverse(letters)
	if !slices.Equal(letters, ids) {
		t.Fatalf("dead letters paged as %v, want newest first of %v", letters, ids)
	}
	if _, err := a.DeadLetterByID(ctxOf(t), "0-1"); err == nil {
		t.Fatal("a dead letter that does not exist was found")
	}
}

// A task redelivered past its budget goes to the dead letters by the gate, with its count.
func maxDeliveriesDeadLetters(t *testing.T, s Stream) {
	a := s.Queue(t, "a")
	id := enqueue(t, s, start("f"))
	if ds := read(t, a, "a", 1); len(ds) != 1 {
		t.Fatalf("read %+v", ds)
	}
	var d queue.Delivery
	for range MaxDeliveries {
		d = reclaimed(t, a, "a", id)
	}
	if d.Count != MaxDeliveries+1 || a.Gate(d) != queue.VerdictDeadLetterMaxDeliveries {
		t.Fatalf("delivery %d: count %d, verdict %s", MaxDeliveries+1, d.Count, a.Gate(d))
	}
	if err := a.Apply(ctxOf(t), d, a.Gate(d)); err != nil {
		t.Fatal(err)
	}
	letters, err := a.ListDLQ(ctxOf(t), 10)
	if err != nil || len(letters) != 1 || letters[0].SourceID != id || letters[0].DeliveryCount != MaxDeliveries+1 {
		t.Fatalf("dead letters %+v %v", letters, err)
	}
	if dp := depth(t, a); dp.StreamLength != 0 || dp.Pending != 0 {
		t.Fatalf("depth %+v after dead-lettering", dp)
	}
}
