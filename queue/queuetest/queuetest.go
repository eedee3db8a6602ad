// Package queuetest is the task queue's contract: what the roles rely on of a task stream —
// each task delivered once per group, a delivery a dead consumer left reclaimed after the claim
// idle time with its count, acknowledged tasks gone, a delivery left pending without spending
// one (for the claim idle time, or for a moment), a requeue that replaces its source, a dead
// letter written once and replayed once, a queued start found — checked through queue.Queue's
// own methods, so that every backend of the queue is held to the same suite (Redis today:
// queue's tests run it). It imports "testing": only tests import it.
package queuetest

import (
	"context"
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/queue"
)

// MinIdle is the claim idle time (PLAITA_CLAIM_MIN_IDLE_MS) a backend under the contract must
// give its queues, and MaxDeliveries their delivery budget.
const (
	MinIdle       = 50 * time.Millisecond
	MaxDeliveries = 5
)

// Stream is one task stream of a backend, with its group and dead-letter stream.
type Stream struct {
	// Queue is a worker's view of the stream as consumer (its group created).
	Queue func(t *testing.T, consumer string) *queue.Queue
	// Slow is Queue with a claim idle time of an hour.
	Slow func(t *testing.T, consumer string) *queue.Queue
	// Enqueue adds a task as the producer path does.
	Enqueue func(ctx context.Context, env queue.Envelope) (string, error)
}

// On is the stream <root>:flow:queue of driver d, with its group and dead-letter stream, set
// up as the contract needs.
func On(d queue.Driver, root string) Stream {
	s := queue.Settings{Stream: root + ":flow:queue", Group: "workers", StartID: "0", DLQ: root + ":flow:queue:dlq",
		ClaimMinIdle: MinIdle, MaxDeliveries: MaxDeliveries, DLQMaxLen: 1000, TaskMaxAge: time.Hour}
	open := func(t *testing.T, consumer string, minIdle time.Duration) *queue.Queue {
		s := s
		s.Consumer, s.ClaimMinIdle = consumer, minIdle
		q, err := queue.New(d, s, metrics.NewSet(), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if err := q.EnsureGroup(ctxOf(t)); err != nil {
			t.Fatal(err)
		}
		return q
	}
	return Stream{
		Queue: func(t *testing.T, consumer string) *queue.Queue { return open(t, consumer, MinIdle) },
		Slow:  func(t *testing.T, consumer string) *queue.Queue { return open(t, consumer, time.Hour) },
		Enqueue: func(ctx context.Context, env queue.Envelope) (string, error) {
			return queue.Enqueue(ctx, d, s.Stream, env)
		},
	}
}

// Backend is one implementation under the contract.
type Backend struct {
	Name string
	// Open makes a new, empty stream for one case (cases run in parallel).
	Open func(t *testing.T) Stream
}

// Contract runs every case of the contract against b.
func Contract(t *testing.T, b Backend) {
	cases := []struct {
		name string
		run  func(t *testing.T, s Stream)
	}{
		{"ReadOncePerGroup", readOncePerGroup},
		{"ReclaimAfterMinIdle", reclaimAfterMinIdle},
		{"AckRemoves", ackRemoves},
		{"LeavePendingSpendsNoDelivery", leavePendingSpendsNoDelivery},
		{"LeavePendingForComesBackSoon", leavePendingForComesBackSoon},
		{"RequeueReplacesItsSource", requeueReplacesItsSource},
		{"DeadLetterOnceReplayOnce", deadLetterOnceReplayOnce},
		{"FindTask", findTask},
		{"BlockedReadWakesOnAdd", blockedReadWakesOnAdd},
		{"BacklogCountsLagAndPending", backlogCountsLagAndPending},
		{"TouchKeepsItFromReclaim", touchKeepsItFromReclaim},
		{"SweepLeavesTheBacklog", sweepLeavesTheBacklog},
		{"TasksAndDeadLetterPages", tasksAndDeadLetterPages},
		{"MaxDeliveriesDeadLetters", maxDeliveriesDeadLetters},
	}
	for _, c := range cases {
		t.Run(b.Name+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, b.Open(t))
		})
	}
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// start is a start task of flow for a new execution.
func start(flow string) queue.Envelope {
	return queue.Envelope{Kind: queue.KindStart, FlowID: flow, FlowVersion: "1", ExecutionID: "ex_" + rand.Text(),
		Input: []byte(`{"n":1}`)}
}

func enqueue(t *testing.T, s Stream, env queue.Envelope) string {
	t.Helper()
	id, err := s.Enqueue(ctxOf(t), env)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func read(t *testing.T, q *queue.Queue, consumer string, n int) []queue.Delivery {
	t.Helper()
	ds, err := q.Read(ctxOf(t), consumer, n, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// reclaimed waits for q's reclaim pass to hand over the entry id (the claim idle time passing
// is the signal; the deadline only bounds a broken backend).
func reclaimed(t *testing.T, q *queue.Queue, consumer, id string) queue.Delivery {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(MinIdle / 5) {
		ds, err := q.Reclaim(ctxOf(t), consumer, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.ID == id {
				return d
			}
		}
	}
	t.Fatalf("entry %s was never reclaimed", id)
	return queue.Delivery{}
}

func depth(t *testing.T, q *queue.Queue) queue.Depth {
	t.Helper()
	d, err := q.Depth(ctxOf(t))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Each task goes to one consumer of the group, once, decoded, with a count of 1.
func readOncePerGroup(t *testing.T, s Stream) {
	a, b := s.Queue(t, "a"), s.Queue(t, "b")
	var want []string
	for range 3 {
		env := start("f")
		enqueue(t, s, env)
		want = append(want, env.ExecutionID)
	}
	ds := append(read(t, a, "a", 2), read(t, b, "b", 2)...)
	var got []string
	for _, d := range ds {
		if d.Err != nil || d.Count != 1 || d.Reclaimed || d.Envelope.Kind != queue.KindStart {
			t.Fatalf("first delivery %+v", d)
		}
		got = append(got, d.Envelope.ExecutionID)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want each of %v once", got, want)
	}
	if more := read(t, b, "b", 10); len(more) != 0 {
		t.Fatalf("a task was delivered twice: %+v", more)
	}
	if d := depth(t, a); d.StreamLength != 3 || d.Pending != 3 {
		t.Fatalf("depth %+v, want 3 entries, all pending", d)
	}
}

// A delivery nobody acknowledges is reclaimed by another consumer only after the claim idle
// time, with its count moved on.
func reclaimAfterMinIdle(t *testing.T, s Stream) {
	a, b := s.Queue(t, "a"), s.Queue(t, "b")
	id := enqueue(t, s, start("f"))
	readAt := time.Now()
	if ds := read(t, a, "a", 1); len(ds) != 1 || ds[0].ID != id {
		t.Fatalf("read %+v", ds)
	}
	// Before the idle time it is a's: nothing to reclaim. (A machine so slow that the idle time
	// passed before the reclaim ran cannot tell; the check is kept for when it can.)
	ds, err := b.Reclaim(ctxOf(t), "b", 10)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(readAt) < MinIdle && len(ds) != 0 {
		t.Fatalf("reclaimed before the idle time: %+v", ds)
	}
	d := reclaimed(t, b, "b", id)
	if !d.Reclaimed || d.Count != 2 || d.Consumer != "b" || d.Err != nil {
		t.Fatalf("reclaimed delivery %+v", d)
	}
}

// An acknowledged task is gone: not pending, not in the stream, never reclaimed.
func ackRemoves(t *testing.T, s Stream) {
	a := s.Queue(t, "a")
	enqueue(t, s, start("f"))
	ds := read(t, a, "a", 1)
	if len(ds) != 1 {
		t.Fatalf("read %+v", ds)
	}
	if err := a.Ack(ctxOf(t), ds[0]); err != nil {
		t.Fatal(err)
	}
	if d := depth(t, a); d != (queue.Depth{}) {
		t.Fatalf("depth after ack %+v", d)
	}
	// A second task left unacknowledged: once the reclaim hands it over, the idle time has
	// passed for the first too, and the first must not come with it.
	other := enqueue(t, s, start("f"))
	if ds := read(t, a, "a", 1); len(ds) != 1 || ds[0].ID != other {
		t.Fatalf("read %+v", ds)
	}
	acked := ds[0].ID
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(MinIdle / 5) {
		got, err := a.Reclaim(ctxOf(t), "b", 10)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, 0, len(got))
		for _, d := range got {
			ids = append(ids, d.ID)
		}
		if slices.Contains(ids, acked) {
			t.Fatalf("an acknowledged task was reclaimed: %v", ids)
		}
		if slices.Contains(ids, other) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the unacknowledged task %s was never reclaimed", other)
		}
	}
}

// A delivery left pending (it waited for another holder's lease) spends no delivery: its
// reclaim counts as the delivery it replaces.
func leavePendingSpendsNoDelivery(t *testing.T, s Stream) {
	a := s.Queue(t, "a")
	id := enqueue(t, s, start("f"))
	ds := read(t, a, "a", 1)
	if len(ds) != 1 {
		t.Fatalf("read %+v", ds)
	}
	if err := a.LeavePending(ctxOf(t), ds[0]); err != nil {
		t.Fatal(err)
	}
	d := reclaimed(t, a, "a", id)
	if d.Count != 1 {
		t.Fatalf("the delivery left pending was counted: count %d, want 1", d.Count)
	}
	if err := a.LeavePending(ctxOf(t), d); err != nil {
		t.Fatal(err)
	}
	if d = reclaimed(t, a, "a", id); d.Count != 1 {
		t.Fatalf("count %d after a second wait, want 1", d.Count)
	}
}

// A delivery left pending for a moment (it waits for a holder finishing its run) is reclaimed
// after that moment, long before the claim idle time, and spends no delivery; one left pending
// the ordinary way waits for the claim idle time.
func leavePendingForComesBackSoon(t *testing.T, s Stream) {
	a := s.Slow(t, "a") // an hour's claim idle time
	soon, late := enqueue(t, s, start("f")), enqueue(t, s, start("f"))
	ds := read(t, a, "a", 2)
	if len(ds) != 2 || ds[0].ID != soon || ds[1].ID != late {
		t.Fatalf("read %+v", ds)
	}
	if err := a.LeavePendingFor(ctxOf(t), ds[0], 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := a.LeavePending(ctxOf(t), ds[1]); err != nil {
		t.Fatal(err)
	}
	if d := reclaimed(t, a, "a", soon); d.Count != 1 {
		t.Fatalf("the delivery left pending for a moment was counted: count %d, want 1", d.Count)
	}
	ds, err := a.Reclaim(ctxOf(t), "a", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.ID == late {
			t.Fatalf("the delivery left pending the ordinary way was reclaimed before the claim idle time: %+v", d)
		}
	}
}

// A requeue adds the changed task and removes its source, which is never delivered again.
func requeueReplacesItsSource(t *testing.T, s Stream) {
	a := s.Queue(t, "a")
	env := start("f")
	src := enqueue(t, s, env)
	ds := read(t, a, "a", 1)
	if len(ds) != 1 {
		t.Fatalf("read %+v", ds)
	}
	id, err := a.Requeue(ctxOf(t), ds[0], func(e *queue.Envelope) { e.QuotaDeferCount++ })
	if err != nil {
		t.Fatal(err)
	}
	if id == "" || id == src {
		t.Fatalf("requeued as %q (source %s)", id, src)
	}
	ds = read(t, a, "a", 10)
	if len(ds) != 1 || ds[0].ID != id || ds[0].Envelope.ExecutionID != env.ExecutionID || ds[0].Envelope.QuotaDeferCount != 1 {
		t.Fatalf("after the requeue %+v", ds)
	}
	if d := depth(t, a); d.StreamLength != 1 || d.Pending != 1 {
		t.Fatalf("depth %+v: the source is still there", d)
	}
}

// A dead letter is written once however often it is asked for, removes its source, and is
// replayed once: the replay is a new task of the same execution.
func deadLetterOnceReplayOnce(t *testing.T, s Stream) {
	a := s.Queue(t, "a")
	env := start("f")
	src := enqueue(t, s, env)
	ds := read(t, a, "a", 1)
	if len(ds) != 1 {
		t.Fatalf("read %+v", ds)
	}
	for range 2 { // a worker that died after writing it letters it again on its redelivery
		if err := a.DeadLetter(ctxOf(t), ds[0], "poison"); err != nil {
			t.Fatal(err)
		}
	}
	letters, err := a.ListDLQ(ctxOf(t), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || letters[0].SourceID != src || letters[0].Reason != "poison" || letters[0].ExecutionID != env.ExecutionID {
		t.Fatalf("dead letters %+v", letters)
	}
	if d := depth(t, a); d.StreamLength != 0 || d.Pending != 0 || d.DLQLength != 1 {
		t.Fatalf("depth %+v", d)
	}
	res, err := a.Replay(ctxOf(t), letters[0].ID)
	if err != nil || res.Status != queue.ReplayDone || res.ExecutionID != env.ExecutionID {
		t.Fatalf("replay: %+v %v", res, err)
	}
	again, err := a.Replay(ctxOf(t), letters[0].ID)
	if err != nil || again.Status != queue.ReplayAlreadyReplayed {
		t.Fatalf("second replay: %+v %v", again, err)
	}
	ds = read(t, a, "a", 10)
	if len(ds) != 1 || ds[0].Envelope.ExecutionID != env.ExecutionID || ds[0].ID == src {
		t.Fatalf("the replayed task: %+v", ds)
	}
}

// A start still in the stream is found for its tenant, pending or not, and not once it is
// acknowledged.
func findTask(t *testing.T, s Stream) {
	a := s.Queue(t, "a")
	env := start("f")
	env.TenantID = "acme"
	id := enqueue(t, s, env)
	enqueue(t, s, start("other"))
	found, ok, err := a.FindTask(ctxOf(t), "acme", env.ExecutionID, 100)
	if err != nil || !ok || found.ID != id || found.Pending || found.Kind != queue.KindStart {
		t.Fatalf("queued start: %+v %v %v", found, ok, err)
	}
	if _, ok, err := a.FindTask(ctxOf(t), "globex", env.ExecutionID, 100); err != nil || ok {
		t.Fatalf("found under another tenant: %v %v", ok, err)
	}
	var mine queue.Delivery
	for _, d := range read(t, a, "a", 10) {
		if d.ID == id {
			mine = d
		}
	}
	if found, ok, err = a.FindTask(ctxOf(t), "acme", env.ExecutionID, 100); err != nil || !ok || !found.Pending || found.Consumer != "a" {
		t.Fatalf("taken start: %+v %v %v", found, ok, err)
	}
	if err := a.Ack(ctxOf(t), mine); err != nil {
		t.Fatal(err)
	}
	if _, ok, err = a.FindTask(ctxOf(t), "acme", env.ExecutionID, 100); err != nil || ok {
		t.Fatalf("found after its ack: %v %v", ok, err)
	}
}
