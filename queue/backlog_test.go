package queue

import (
	"testing"
)

// Backlog tells the undelivered backlog, the pending entries, the residue an XACK without its
// XDEL leaves and the dead letters apart, and reads a queue no one has enqueued on yet.
func TestBacklog(t *testing.T) {
	b := setup(t, nil)
	ctx := testCtx(t)
	for range 5 {
		b.enqueue(t, startEnv("f"))
	}
	ds := b.read(t, b.q, "w1", 3)
	if len(ds) != 3 {
		t.Fatalf("read %d, want 3", len(ds))
	}
	// One settled as a worker does, one acknowledged but left in the stream (the process died
	// between XACK and XDEL), one still pending.
	if err := b.q.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
	if err := b.c.Do(ctx, b.c.B().Xack().Key(b.q.Stream()).Group(b.q.Group()).Id(ds[1].ID).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := b.c.Do(ctx, b.c.B().Xadd().Key(b.q.DLQKey()).Id("*").FieldValue().FieldValue("reason", "test").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	got, err := b.q.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := Backlog{Stream: b.q.Stream(), Group: b.q.Group(), DLQ: b.q.DLQKey(), GroupExists: true,
		Length: 4, Pending: 1, Lag: 2, LagKnown: true, Residue: 1, Consumers: 1, DLQLength: 1}
	if got != want {
		t.Fatalf("backlog\n got %+v\nwant %+v", got, want)
	}

	fresh, _, _ := b.newQueue(t, map[string]string{"PLAITA_QUEUE_NAME": b.root + ":other:queue", "PLAITA_DLQ_KEY": b.root + ":other:dlq"})
	got, err = fresh.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.GroupExists || got.Length != 0 || got.Lag != 0 || got.Pending != 0 || got.DLQLength != 0 {
		t.Fatalf("a queue never written: %+v", got)
	}
	if _, err := Enqueue(ctx, Redis(b.c), fresh.Stream(), startEnv("f")); err != nil {
		t.Fatal(err)
	}
	if got, err = fresh.Backlog(ctx); err != nil || got.GroupExists || got.Length != 1 || got.Lag != 1 || !got.LagKnown {
		t.Fatalf("a queue with no group yet: %+v %v", got, err)
	}
}

// Tasks names the executions with a task in the stream, and says when the stream was longer
// than the scan's limit.
func TestTasks(t *testing.T) {
	b := setup(t, nil)
	ctx := testCtx(t)
	var ids []string
	for range 5 {
		e := startEnv("f")
		ids = append(ids, e.ExecutionID)
		b.enqueue(t, e)
	}
	b.xadd(t, "*", "payload", "not json")
	set, err := b.q.Tasks(ctx, 100)
	if err != nil || !set.Complete || set.Read != 6 {
		t.Fatalf("tasks: %+v %v", set, err)
	}
	for _, id := range ids {
		if !set.Has("default", id) || set.Has("acme", id) {
			t.Fatalf("%s: in the set %v, as acme's %v", id, set.Has("default", id), set.Has("acme", id))
		}
	}
	if set, err = b.q.Tasks(ctx, 6); err != nil || !set.Complete {
		t.Fatalf("a limit of exactly the length: %+v %v", set, err)
	}
	if set, err = b.q.Tasks(ctx, 3); err != nil || set.Complete || set.Read != 3 || set.Has("default", ids[4]) {
		t.Fatalf("a limit under the length: %+v %v", set, err)
	}
}
