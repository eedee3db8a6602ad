package control

import (
	"context"
	"strings"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

// The wake-up report (what `execution show` prints), against a private Redis (the registry lives under
// the fixed key root): every state of the delay-queue entry and of the roles that wake it.
func TestWakeUpReport(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	delayQ, err := queue.NewDelay(queue.RedisDelays(c), "plaita:delay:queue")
	if err != nil {
		t.Fatal(err)
	}
	reg := store.NewRegistry(store.OnRedis(c), keys.DefaultRoot)
	p := New(Deps{Registry: reg, Delay: delayQ, Now: func() time.Time { return now },
		Built: func(role string) bool { return role != "console" }})
	register := func(id, role, status string) {
		t.Helper()
		if err := reg.Register(ctx, store.InstanceRecord{InstanceID: id, Role: role, Status: status, HeartbeatAt: now, TTLMillis: 30000}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	suspended := func(id, kind string, due *time.Time) *state.Execution {
		return &state.Execution{ExecutionID: id, TenantID: "default", FlowID: "f", FlowVersion: "1", Status: state.Suspended,
			Suspend: &state.Suspend{Kind: kind, Node: "n", Since: now.Add(-time.Minute), Due: due, EventType: "order.paid"}}
	}
	entry := func(st *state.Execution, rt engine.ResumeType) queue.DelayEntry {
		return queue.DelayEntry{ExecutionID: st.ExecutionID, TenantID: "default", FlowID: "f", FlowVersion: "1", ResumeType: rt, Node: "n", Due: *st.Suspend.Due}
	}
	in5m, ago3s := now.Add(5*time.Minute), now.Add(-3*time.Second)

	// No delay role; the entry is there.
	st := suspended("ex_a", state.SuspendDelay, &in5m)
	if err := delayQ.Schedule(ctx, entry(st, engine.ResumeContinue)); err != nil {
		t.Fatal(err)
	}
	w := p.WakeUp(ctx, "default", st)
	if w.By != "delay" || w.Due.Entry != "scheduled" || w.Text != "due in 5m0s — no delay role registered: nothing will continue it until one runs (`plaita delay`)" {
		t.Fatalf("no delay role: %+v %+v", w, w.Due)
	}
	// One alive, one stopping, a worker (not counted).
	register("delay-1", "delay", "running")
	register("delay-2", "delay", "stopping")
	register("worker-1", "worker", "running")
	w = p.WakeUp(ctx, "default", st)
	if w.Text != "due in 5m0s — delay role: 1 alive" || w.Roles["delay"].Alive != 1 || w.Roles["delay"].Stopping != 1 ||
		len(w.Roles["delay"].Instances) != 1 || w.Roles["delay"].Instances[0] != "delay-1" {
		t.Fatalf("delay role alive: %+v", w)
	}
	// The entry is missing: before the due time nothing will fire it; after it, it was sent or
	// never written — the queue alone cannot tell, so neither is claimed.
	missing := suspended("ex_b", state.SuspendDelay, &in5m)
	if w = p.WakeUp(ctx, "default", missing); w.Due.Entry != "missing" || !strings.Contains(w.Text, "no delay-queue entry: nothing will continue it; `plaita execution resume ex_b --type continue`") {
		t.Fatalf("missing entry: %s", w.Text)
	}
	sent := suspended("ex_c", state.SuspendDelay, &ago3s)
	if w = p.WakeUp(ctx, "default", sent); w.Due.Entry != "missing" ||
		w.Text != "was due 3s ago — not in the delay queue (its wake-up was sent, or never written); if it stays suspended: `plaita execution resume ex_c --type continue`" {
		t.Fatalf("entry gone after the due time: %s", w.Text)
	}
	// A due time no entry can hold (an until of the zero time, a wrapped-around delay, as older
	// workers saved them): never written, and said so — not "sent".
	var zero time.Time
	wrapped := time.Date(1734, 8, 22, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		st   *state.Execution
		text string
	}{
		{suspended("ex_z", state.SuspendDelay, &zero), "no delay-queue entry, and none can be written: due time 0001-01-01T00:00:00Z is the zero time; " +
			"nothing will continue it: `plaita execution resume ex_z --type continue`"},
		{suspended("ex_w", state.SuspendDelay, &wrapped), "no delay-queue entry, and none can be written: due time 1734-08-22T00:00:00Z is before 1970-01-01T00:00:00Z; " +
			"nothing will continue it: `plaita execution resume ex_w --type continue`"},
		{suspended("ex_t", state.SuspendEvent, &zero), "no delay-queue entry, and none can be written: due time 0001-01-01T00:00:00Z is the zero time; " +
			"nothing will time it out: `plaita execution resume ex_t --type timeout`"},
	} {
		w = p.WakeUp(ctx, "default", tc.st)
		if w.Due == nil || w.Due.Entry != "missing" || w.Due.Unschedulable == "" || w.Due.Text != tc.text || len(w.Problems) != 0 {
			t.Fatalf("%s: %+v\nwant %s", tc.st.ExecutionID, w.Due, tc.text)
		}
	}
	// Retrying and dead entries (written as the mover writes them: a failing stream).
	if err := c.Do(ctx, c.B().Set().Key("broken-stream").Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	poisoned := suspended("ex_d", state.SuspendDelay, &ago3s)
	if err := delayQ.Schedule(ctx, entry(poisoned, engine.ResumeContinue)); err != nil {
		t.Fatal(err)
	}
	opts := queue.MoveOptions{Stream: "broken-stream", MaxAttempts: 2}
	if _, err := delayQ.MoveDue(ctx, now, opts); err != nil {
		t.Fatal(err)
	}
	if w = p.WakeUp(ctx, "default", poisoned); w.Due.Entry != "retrying" || w.Due.Attempts != 1 || !strings.Contains(w.Text, "1 enqueue(s) of its wake-up failed, next try in 1s") {
		t.Fatalf("retrying entry: %+v", w.Due)
	}
	if _, err := delayQ.MoveDue(ctx, now.Add(time.Second), opts); err != nil {
		t.Fatal(err)
	}
	if w = p.WakeUp(ctx, "default", poisoned); w.Due.Entry != "dead" || w.Due.DeadReason != queue.DelayReasonEnqueueFailed ||
		!strings.Contains(w.Text, "its delay-queue entry was given up (enqueue_failed, in plaita:delay:queue:dead): nothing will continue it") {
		t.Fatalf("dead entry: %+v", w.Due)
	}

	// A wait: the filter role for the event, the delay role for its timeout.
	wait := suspended("ex_e", state.SuspendEvent, &in5m)
	if err := delayQ.Schedule(ctx, entry(wait, engine.ResumeTimeout)); err != nil {
		t.Fatal(err)
	}
	w = p.WakeUp(ctx, "default", wait)
	if w.By != "filter" || !strings.HasPrefix(w.Text, `an event of type "order.paid" — no filter role registered`) ||
		w.Due.ResumeType != engine.ResumeTimeout || w.Due.Text != "due in 5m0s — delay role: 1 alive" {
		t.Fatalf("wait: %+v %+v", w, w.Due)
	}
	register("filter-1", "filter", "running")
	if w = p.WakeUp(ctx, "default", wait); w.Text != `an event of type "order.paid" — filter role: 1 alive` || w.Roles["filter"].Alive != 1 {
		t.Fatalf("wait with a filter: %s", w.Text)
	}
	// An approval without a timeout: the console or the CLI; no due time to report.
	ask := suspended("ex_f", state.SuspendApproval, nil)
	if w = p.WakeUp(ctx, "default", ask); w.By != "console" || w.Due != nil ||
		!strings.Contains(w.Text, "`plaita approval approve ex_f`") {
		t.Fatalf("approval: %+v", w)
	}
	// Not suspended: no report.
	if w = p.WakeUp(ctx, "default", &state.Execution{Status: state.Running}); w != nil {
		t.Fatalf("running: %+v", w)
	}
}
