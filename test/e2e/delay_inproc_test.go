//go:build !e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"plaita/config"
	"plaita/engine/state"
	"plaita/queue"
)

// Acceptance scenarios of the delay role: `plaita worker` and `plaita delay` in process on
// a private redis-server, driven through the CLI (`plaita start`, `plaita execution show`).
// Redis is read only to count what reached it (stream entries added, delay-queue members).

// showText is `plaita execution show` (text).
func (d *stack) showText(id string) string {
	d.t.Helper()
	r := run(d.t, d.env, "execution", "show", id, "--quiet")
	if r.code != 0 {
		d.t.Fatalf("show %s: exit %d\n%s", id, r.code, r.stderr)
	}
	return r.stdout
}

// wakeUp is `plaita execution show --json`'s wake_up object.
func (d *stack) wakeUp(id string) map[string]any {
	d.t.Helper()
	r := run(d.t, d.env, "execution", "show", id, "--json", "--quiet")
	var out struct {
		WakeUp map[string]any `json:"wake_up"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		d.t.Fatalf("show --json %s: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
	}
	return out.WakeUp
}

// outputTimes reads the delay node's due and resumed_at from a completed execution's output.
func outputTimes(t *testing.T, st state.Execution) (due, resumed time.Time) {
	t.Helper()
	out, _ := st.Output.(map[string]any)
	due, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(out["due"]))
	resumed, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(out["resumed_at"]))
	if err1 != nil || err2 != nil {
		t.Fatalf("output %v: %v %v", st.Output, err1, err2)
	}
	return due, resumed
}

// A 2-second delay resumes through the delay role no earlier than its due time, once, and
// completes; `execution show` says whether a delay role is there to wake a delayed execution.
func TestE2EDelayNodeResumesAfterItsDueTime(t *testing.T) {
	t.Parallel()
	d := newDelayStack(t)
	d.start("worker", nil)
	short := delayFlowFile(t, "nap2", 2)
	long := delayFlowFile(t, "nap1h", 3600)

	parked := d.startFlow(long, "", "")
	d.waitStatus(parked, "", state.Suspended, 60*time.Second)
	if out := d.showText(parked); !strings.Contains(out, "wakes it:  due in ") || !strings.Contains(out, "no delay role registered: nothing will continue it until one runs (`plaita delay`)") {
		t.Fatalf("show without a delay role:\n%s", out)
	}

	id := d.startFlow(short, "", "")
	delayRole := d.start("delay", nil)
	waitFor(t, "show to count the delay role", 60*time.Second, func() bool {
		return strings.Contains(d.showText(parked), "wakes it:  due in ") && strings.Contains(d.showText(parked), " — delay role: 1 alive")
	}, d.procs...)
	if wu := d.wakeUp(parked); wu["by"] != "delay" || wu["due"].(map[string]any)["entry"] != "scheduled" ||
		wu["roles"].(map[string]any)["delay"].(map[string]any)["alive"] != 1.0 {
		t.Fatalf("wake_up %v", wu)
	}

	st := d.waitDone(id)
	if st.Status != state.Completed {
		t.Fatalf("status %s, error %+v", st.Status, st.Error)
	}
	due, resumed := outputTimes(t, st)
	var since time.Time
	for _, e := range st.Timeline {
		if e.Event == "suspended" {
			since = e.Time.Time()
		}
	}
	if due.Sub(since) < 2*time.Second-time.Millisecond || resumed.Before(due) {
		t.Fatalf("suspended %s, due %s, resumed %s: not at least 2 s after the suspension", since, due, resumed)
	}
	if r := timelineResumes(st); len(r) != 1 || r[0] != "nap:continue" {
		t.Fatalf("resumes in the timeline %v", r)
	}
	// Two executions started, one resume sent: three entries ever reached the stream.
	if n := d.entriesAdded(); n != 3 {
		t.Fatalf("%d stream entries added, want 3 (two starts, one resume)", n)
	}
	if n := fired(id, delayRole); n != 1 {
		t.Fatalf("delay.fired logged %d times", n)
	}

	// Stopped with SIGTERM, the delay role deregisters: show says nothing will wake it.
	delayRole.stop(t)
	for _, ev := range []string{"delay.started", "delay.registered", "delay.deregistered", "delay.stopped"} {
		if len(logLines(delayRole.stderr.String(), ev)) != 1 {
			t.Errorf("no %s line:\n%s", ev, delayRole.stderr.String())
		}
	}
	if out := d.showText(parked); !strings.Contains(out, "no delay role registered") {
		t.Fatalf("show after the delay role stopped:\n%s", out)
	}
}

const waitTimeoutFlow = `{"id":"wait-timeout","version":"1","start":"wait","nodes":[
 {"id":"wait","type":"wait_event","params":{"event_type":"order.approved","match":"EVENT.order == INPUT.order","timeout":2,"on_timeout":"expired"},"next":"done"},
 {"id":"expired","type":"end","params":{"output":{"expired":true}}},
 {"id":"done","type":"end","params":{"output":{"expired":false}}}]}`

const approvalTimeoutFlow = `{"id":"ask-timeout","version":"1","start":"ask","nodes":[
 {"id":"ask","type":"approval","params":{"message":"ship?","timeout":2,"on_timeout":"late"},"next":"done"},
 {"id":"late","type":"end","params":{"output":{"answered":false}}},
 {"id":"done","type":"end","params":{"output":{"answered":true}}}]}`

// A wait_event and an approval with a timeout and no answer are resumed by the delay role as
// timeouts, and take their on_timeout branch.
func TestE2ETimeoutsResumeThroughTheDelayRole(t *testing.T) {
	t.Parallel()
	d := newDelayStack(t)
	d.start("worker", nil)
	d.start("delay", nil)
	wait := d.startFlow(writeFile(t, "wait-timeout.json", waitTimeoutFlow), "", `{"order":"o-1"}`)
	ask := d.startFlow(writeFile(t, "ask-timeout.json", approvalTimeoutFlow), "", "")
	for id, want := range map[string]struct{ node, output string }{
		wait: {"wait", `{"expired":true}`},
		ask:  {"ask", `{"answered":false}`},
	} {
		st := d.waitDone(id)
		out, _ := json.Marshal(st.Output)
		if st.Status != state.Completed || string(out) != want.output {
			t.Fatalf("%s: %s, output %s, error %+v", want.node, st.Status, out, st.Error)
		}
		if r := timelineResumes(st); len(r) != 1 || r[0] != want.node+":timeout" {
			t.Fatalf("%s: resumes %v", want.node, r)
		}
		if fired(id, d.procs...) != 1 {
			t.Fatalf("%s: delay.fired %d times", want.node, fired(id, d.procs...))
		}
	}
}

// A poisoned member — not an entry, or one no worker could run — goes to :dead once, with its
// reason, and does not hold up the entries behind it.
func TestE2EPoisonedDelayMemberEndsInDeadOnce(t *testing.T) {
	t.Parallel()
	d := newDelayStack(t)
	d.start("worker", nil)
	past := float64(time.Now().Add(-time.Minute).UnixMilli())
	for _, m := range []string{"not an entry",
		`{"execution_id":"ex_1","tenant_id":"Bad Tenant!","resume_type":"continue","node":"n","due":"2026-01-01T00:00:00Z"}`} {
		if err := d.c.Do(d.ctx, d.c.B().Zadd().Key(d.scheduledKey()).ScoreMember().ScoreMember(past, m).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	delayRole := d.start("delay", nil)
	id := d.startFlow(delayFlowFile(t, "nap1", 1), "", "")
	if st := d.waitDone(id); st.Status != state.Completed {
		t.Fatalf("the entry behind the poisoned ones: %s", st.Status)
	}
	dead := queue.DelayDeadKey(config.DelayQueue.In(d.cfg))
	recs, err := d.c.Do(d.ctx, d.c.B().Hgetall().Key(dead).Build()).AsStrMap()
	if err != nil || len(recs) != 2 {
		t.Fatalf(":dead %v %v", recs, err)
	}
	for m, raw := range recs {
		var rec queue.DelayDeadRecord
		if err := json.Unmarshal([]byte(raw), &rec); err != nil || rec.Reason != queue.DelayReasonMalformed || rec.Detail == "" || rec.At.IsZero() {
			t.Errorf("dead record of %q: %s %v", m, raw, err)
		}
	}
	if lines := logLines(delayRole.stderr.String(), "delay.dead"); len(lines) != 2 {
		t.Fatalf("%d delay.dead lines, want 2\n%s", len(lines), delayRole.stderr.String())
	}
	if len(d.scheduled()) != 0 {
		t.Fatalf("left on the delay queue: %v", d.scheduled())
	}
}

// The testdata flows that delay run to completion on worker + delay, started through the CLI.
// scheduled-report sleeps until its run_at (two seconds ahead). reminder-delay sleeps an hour:
// the test stands in for the hour passing by moving its entry's score to now — the member,
// which names the suspension the wake-up is for, is left as the worker wrote it.
func TestE2ETestdataDelayFlowsComplete(t *testing.T) {
	t.Parallel()
	d := newDelayStack(t)
	d.start("worker", nil)
	d.start("delay", nil)
	runAt := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	report := d.startFlow(repoFlow(t, "scheduled-report.json"), "", fmt.Sprintf(`{"run_at":%q,"report":"weekly"}`, runAt))

	reminder := d.startFlow(repoFlow(t, "reminder-delay.json"), "", `{"user":"sam"}`)
	d.waitStatus(reminder, "", state.Suspended, 60*time.Second)
	waitFor(t, "show to say the delay role will continue it", 60*time.Second, func() bool {
		return strings.Contains(d.showText(reminder), "wakes it:  due in ") && strings.Contains(d.showText(reminder), "delay role: 1 alive")
	}, d.procs...)
	members := d.scheduled()
	var member string
	for _, m := range members {
		if strings.Contains(m, reminder) {
			member = m
		}
	}
	if member == "" {
		t.Fatalf("no entry of %s in %v", reminder, members)
	}
	if err := d.c.Do(d.ctx, d.c.B().Zadd().Key(d.scheduledKey()).Xx().ScoreMember().ScoreMember(float64(time.Now().UnixMilli()), member).Build()).Error(); err != nil {
		t.Fatal(err)
	}

	st := d.waitDone(reminder)
	out, _ := st.Output.(map[string]any)
	if st.Status != state.Completed || !strings.HasPrefix(fmt.Sprint(out["sent"]), "Reminder for sam") {
		t.Fatalf("reminder-delay: %s, output %v, error %+v", st.Status, st.Output, st.Error)
	}
	st = d.waitDone(report)
	out, _ = st.Output.(map[string]any)
	if st.Status != state.Completed || out["report"] != "weekly" || !strings.HasPrefix(fmt.Sprint(out["scheduled_for"]), strings.TrimSuffix(runAt, "Z")) {
		t.Fatalf("scheduled-report: %s, output %v, error %+v", st.Status, st.Output, st.Error)
	}
	for _, id := range []string{reminder, report} {
		if fired(id, d.procs...) != 1 {
			t.Fatalf("%s: delay.fired %d times", id, fired(id, d.procs...))
		}
	}
}
