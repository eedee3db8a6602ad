//go:build !e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store/keys"
)

// Issue [wakeup-attacks], the delay and timeout path, in process: `plaita worker` and
// `plaita delay` on a private redis-server, driven through the CLI (docs/delay.md,
// docs/flows.md "Delays and timeouts").
//
//  1. A delay or timeout of more seconds than a due time can hold (1e18 once wrapped the due
//     time to 1734-08-22, and the execution went on at once) is refused where the flow is
//     validated: by `plaita start`, and by the worker for a definition published past it.
//  2. An until of the zero time (once saved suspended with a wake-up the delay queue refused:
//     the task was dead-lettered after five deliveries and the execution stayed suspended)
//     ends the execution in error at the delay node. A state an older worker left that way is
//     shown as never scheduled (not "sent"), and its next delivery ends it in error.
//  3. A wake-up whose flow version is not published any more is dead-lettered as
//     flow_not_found while it is the execution's way out, and runs once the flow is back and
//     the letter replayed; a stale one is acknowledged as a no-op.

// wakeupAttackFlow is a flow whose first node is node (id "nap"), then an end.
func wakeupAttackFlow(id, node string) string {
	return fmt.Sprintf(`{"id":%q,"version":"1","start":"nap","nodes":[%s,
	 {"id":"done","type":"end","params":{"output":{"due":"{{ NODE.nap.due ?? '' }}"}}}]}`, id, node)
}

// dlqFor returns the dead letters of execution id.
func (d *stack) dlqFor(id string) []map[string]string {
	d.t.Helper()
	var out []map[string]string
	for _, e := range d.dlqEntries() {
		if e["execution_id"] == id {
			out = append(out, e)
		}
	}
	return out
}

func TestE2EWakeupAttacksDelayOverflowIsRefused(t *testing.T) {
	t.Parallel()
	d := newDelayStack(t)
	d.start("worker", nil)
	d.start("delay", nil)
	cases := []struct{ name, node, path string }{
		{"seconds-1e18", `{"id":"nap","type":"delay","params":{"seconds":1e18},"next":"done"}`, "nodes[0].params.seconds"},
		{"seconds-9.3e9", `{"id":"nap","type":"delay","params":{"seconds":9.3e9},"next":"done"}`, "nodes[0].params.seconds"},
		{"seconds-maxint64", `{"id":"nap","type":"delay","params":{"seconds":9223372036854775807},"next":"done"}`, "nodes[0].params.seconds"},
		{"wait-timeout-1e18", `{"id":"nap","type":"wait_event","params":{"event_type":"order.paid","timeout":1e18},"next":"done"}`, "nodes[0].params.timeout"},
		{"approval-timeout-1e18", `{"id":"nap","type":"approval","params":{"timeout":1e18},"next":"done"}`, "nodes[0].params.timeout"},
	}
	for _, tc := range cases {
		r := run(t, d.env, "start", writeFile(t, tc.name+".json", wakeupAttackFlow(tc.name, tc.node)), "--quiet")
		if r.code == 0 || !strings.Contains(r.stderr, tc.path+": must be at most 315360000 seconds") {
			t.Errorf("%s: plaita start exit %d, want a refusal at %s\nstdout: %s\nstderr: %s", tc.name, r.code, tc.path, r.stdout, r.stderr)
		}
	}

	// A definition that reached Redis without the CLI's validation: the worker refuses it as
	// an invalid flow, and no execution of it exists, let alone one that went on at once.
	d.publish("nap-raw", wakeupAttackFlow("nap-raw", `{"id":"nap","type":"delay","params":{"seconds":1e18},"next":"done"}`))
	id := d.enqueue("nap-raw")
	waitFor(t, "the start of the flow with a 1e18 s delay to be dead-lettered (or its execution to end)", 60*time.Second, func() bool {
		st, ok := d.lookup(id, "")
		return len(d.dlqFor(id)) > 0 || (ok && st.Status.Terminal())
	}, d.procs...)
	if st, ok := d.lookup(id, ""); ok {
		t.Fatalf("execution of a 1e18 s delay exists: %s, suspend %+v, error %+v", st.Status, st.Suspend, st.Error)
	}
	dl := d.dlqFor(id)
	if len(dl) != 1 || dl[0]["reason"] != "invalid_flow" || !strings.Contains(dl[0]["detail"], "nodes[0].params.seconds: must be at most 315360000 seconds") {
		t.Fatalf("dead letters of %s: %v", id, dl)
	}
}

func TestE2EWakeupAttacksDelayUntilOutOfRangeEndsInError(t *testing.T) {
	t.Parallel()
	d := newDelayStack(t)
	d.start("worker", nil)
	d.start("delay", nil)
	for _, until := range []string{"0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "9999-12-31T23:59:59Z"} {
		name := "until-literal-" + until[:4]
		node := fmt.Sprintf(`{"id":"nap","type":"delay","params":{"until":%q},"next":"done"}`, until)
		r := run(t, d.env, "start", writeFile(t, name+".json", wakeupAttackFlow(name, node)), "--quiet")
		if r.code == 0 || !strings.Contains(r.stderr, "nodes[0].params.until: ") || !strings.Contains(r.stderr, until) {
			t.Errorf("until %s: plaita start exit %d, want a refusal at nodes[0].params.until\nstdout: %s\nstderr: %s", until, r.code, r.stdout, r.stderr)
		}
	}

	// A templated until is only known when the node runs: out of range, the node fails with
	// DueOutOfRange — at once, not after five deliveries, and with nothing dead-lettered.
	flow := writeFile(t, "until-input.json", wakeupAttackFlow("until-input",
		`{"id":"nap","type":"delay","params":{"until":"{{ INPUT.at }}"},"next":"done"}`))
	for _, until := range []string{"0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"} {
		id := d.startFlow(flow, "", fmt.Sprintf(`{"at":%q}`, until))
		st := d.waitDone(id)
		if st.Status != state.Error || st.Error == nil || st.Error.Type != "DueOutOfRange" || st.Error.Node != "nap" ||
			!st.Error.Permanent || !strings.Contains(st.Error.Message, until) {
			t.Fatalf("until %s: %s, error %+v", until, st.Status, st.Error)
		}
		if dl := d.dlqFor(id); len(dl) != 0 {
			t.Fatalf("until %s: dead letters %v", until, dl)
		}
	}

	// An until in the past keeps its meaning: the delay is due at once and the execution
	// goes on, woken by the delay role.
	id := d.startFlow(flow, "", `{"at":"2001-02-03T04:05:06Z"}`)
	st := d.waitDone(id)
	out, _ := st.Output.(map[string]any)
	if st.Status != state.Completed || !strings.HasPrefix(fmt.Sprint(out["due"]), "2001-02-03T04:05:06") {
		t.Fatalf("until in the past: %s, output %v, error %+v", st.Status, st.Output, st.Error)
	}
	if r := timelineResumes(st); len(r) != 1 || r[0] != "nap:continue" || fired(id, d.procs...) != 1 {
		t.Fatalf("until in the past: resumes %v, delay.fired %d times", r, fired(id, d.procs...))
	}
}

func TestE2EWakeupAttacksDelayStateWithoutAWakeupEndsInError(t *testing.T) {
	t.Parallel()
	d := newDelayStack(t)
	// The state an older worker saved for `"until": "0001-01-01T00:00:00Z"`: suspended at the
	// delay node with the zero time as its due time, and no delay-queue entry (none can hold
	// that time).
	def := wakeupAttackFlow("until-legacy", `{"id":"nap","type":"delay","params":{"until":"{{ INPUT.at }}"},"next":"done"}`)
	d.publish("until-legacy", def)
	hash, err := engine.FlowHash([]byte(def))
	if err != nil {
		t.Fatal(err)
	}
	id := engine.NewExecutionID()
	now := time.Now().UTC()
	var zero time.Time
	st := &state.Execution{ExecutionID: id, FlowID: "until-legacy", FlowVersion: "1", FlowHash: hash, FlowHashAlgo: engine.FlowHashAlgo,
		Engine: engine.Version, Status: state.Suspended, CurrentNode: "nap", Input: map[string]any{"at": "0001-01-01T00:00:00Z"},
		Context: map[string]any{}, StartTime: now, LastUpdate: now,
		Suspend: &state.Suspend{Kind: state.SuspendDelay, Node: "nap", Due: &zero, Since: now}}
	if err := d.ts.Save(d.ctx, st); err != nil {
		t.Fatal(err)
	}

	// execution show says what is there: no entry, and none that could be written.
	out := d.showText(id)
	if strings.Contains(out, "sent") || !strings.Contains(out, "wakes it:  no delay-queue entry, and none can be written: due time 0001-01-01T00:00:00Z is the zero time; nothing will continue it") ||
		!strings.Contains(out, "plaita execution resume "+id+" --type continue") {
		t.Fatalf("show of a suspension whose due time no entry can hold:\n%s", out)
	}
	if due, _ := d.wakeUp(id)["due"].(map[string]any); due["entry"] != "missing" {
		t.Fatalf("wake_up.due %v", due)
	}

	// Its next delivery (the start, redelivered) cannot register a wake-up: the execution ends
	// in error, naming why, and the task is acknowledged — not retried and dead-lettered.
	d.start("worker", nil)
	d.start("delay", nil)
	if _, err := queue.Enqueue(d.ctx, queue.Redis(d.c), config.QueueName.In(d.cfg), queue.Envelope{Kind: queue.KindStart, FlowID: "until-legacy",
		FlowVersion: "1", ExecutionID: id, Input: json.RawMessage(`{"at":"0001-01-01T00:00:00Z"}`)}); err != nil {
		t.Fatal(err)
	}
	got := d.waitDone(id)
	if got.Status != state.Error || got.Error == nil || got.Error.Type != "WakeupNotRegistered" || got.Error.Node != "nap" ||
		!got.Error.Permanent || !strings.Contains(got.Error.Message, "0001-01-01T00:00:00Z") {
		t.Fatalf("%s, error %+v", got.Status, got.Error)
	}
	if dl := d.dlqFor(id); len(dl) != 0 {
		t.Fatalf("dead letters %v", dl)
	}
	if len(d.scheduled()) != 0 {
		t.Fatalf("delay queue %v", d.scheduled())
	}
}

func TestE2EWakeupAttacksDelayWakeupOfAnUnpublishedFlow(t *testing.T) {
	t.Parallel()
	d := newDelayStack(t)
	first := d.start("worker", nil)
	id := d.startFlow(delayFlowFile(t, "nap-gone", 1), "", "")
	d.waitStatus(id, "", state.Suspended, 60*time.Second)
	waitFor(t, "the delay entry", 30*time.Second, func() bool { return len(d.scheduled()) == 1 }, d.procs...)
	member := d.scheduled()[0]
	// The flow is unpublished while the execution sleeps; a new worker (the first one keeps
	// published definitions for a minute) meets its wake-up.
	first.stop(t)
	flowKey := keys.MustFor("", "").Flow("nap-gone", "1")
	def, err := d.c.Do(d.ctx, d.c.B().Get().Key(flowKey).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	unpublish := func() {
		t.Helper()
		if err := d.c.Do(d.ctx, d.c.B().Del().Key(flowKey).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	unpublish()
	second := d.start("worker", nil)
	d.start("delay", nil)

	// The wake-up is the execution's only way out: it is dead-lettered, not acked away.
	waitFor(t, "the wake-up of the unpublished flow to be dead-lettered", 60*time.Second, func() bool { return len(d.dlqFor(id)) > 0 }, d.procs...)
	dl := d.dlqFor(id)
	if len(dl) != 1 || dl[0]["reason"] != "flow_not_found" || dl[0]["kind"] != "resume" {
		t.Fatalf("dead letters %v", dl)
	}
	if st, _ := d.lookup(id, ""); st.Status != state.Suspended {
		t.Fatalf("after the dead letter: %s", st.Status)
	}
	if n := len(logLines(second.stderr.String(), "worker.stale_wakeup")); n != 0 {
		t.Fatalf("%d stale_wakeup lines for a current wake-up", n)
	}

	// Published again, the dead letter replayed: the execution goes on, resumed once.
	if err := d.c.Do(d.ctx, d.c.B().Set().Key(flowKey).Value(def).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(queue.Redis(d.c), settings.Queue(d.cfg), metrics.NewSet(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	dlqID := d.dlqID(id)
	rctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	if res, err := q.Replay(rctx, dlqID); err != nil || res.Status != queue.ReplayDone {
		t.Fatalf("replay %s: %+v %v", dlqID, res, err)
	}
	st := d.waitDone(id)
	if st.Status != state.Completed || len(timelineResumes(st)) != 1 {
		t.Fatalf("after the replay: %s, resumes %v, error %+v", st.Status, timelineResumes(st), st.Error)
	}

	// A stale copy of that wake-up (the execution has finished) meets the flow unpublished
	// again: it is acknowledged as a no-op, not dead-lettered — nothing waits for it.
	second.stop(t)
	unpublish()
	third := d.start("worker", nil)
	if err := d.c.Do(d.ctx, d.c.B().Zadd().Key(d.scheduledKey()).ScoreMember().ScoreMember(float64(time.Now().UnixMilli()), member).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stale wake-up to be acknowledged", 60*time.Second, func() bool {
		for _, l := range logLines(third.stderr.String(), "worker.stale_wakeup") {
			if l["execution_id"] == id {
				return true
			}
		}
		return len(d.dlqFor(id)) > 1
	}, d.procs...)
	if dl := d.dlqFor(id); len(dl) != 1 {
		t.Fatalf("dead letters after the stale wake-up %v", dl)
	}
}

// dlqID is the id of the dead letter of execution id in the dead-letter stream.
func (d *stack) dlqID(id string) string {
	d.t.Helper()
	rs, err := d.c.Do(d.ctx, d.c.B().Xrange().Key(config.DLQKey.In(d.cfg)).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		d.t.Fatal(err)
	}
	for _, r := range rs {
		if r.FieldValues["execution_id"] == id {
			return r.ID
		}
	}
	d.t.Fatalf("no dead letter of %s", id)
	return ""
}
