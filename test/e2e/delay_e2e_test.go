//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
)

// Acceptance scenarios of the delay role: real `plaita worker` and `plaita delay` processes on
// a private redis-server, driven through the CLI (`plaita start`, `plaita execution show`).
// Redis is read only to count what reached it (stream entries added, delay-queue members).

// The delay role killed with kill -9 while the entry waits, and started again: the resume is
// sent exactly once.
func TestE2EDelayRoleKill9AndRestartFiresOnce(t *testing.T) {
	t.Parallel()
	d := newDelayStack(t)
	d.start("worker", nil)
	first := d.start("delay", nil)
	id := d.startFlow(delayFlowFile(t, "nap3", 3), "", "")
	d.waitStatus(id, "", state.Suspended, 60*time.Second)
	waitFor(t, "the delay entry", 30*time.Second, func() bool { return len(d.scheduled()) == 1 }, d.procs...)
	first.kill9(t)
	second := d.start("delay", nil)
	st := d.waitDone(id)
	if st.Status != state.Completed {
		t.Fatalf("status %s, error %+v", st.Status, st.Error)
	}
	if r := timelineResumes(st); len(r) != 1 {
		t.Fatalf("resumes in the timeline %v", r)
	}
	if n := d.entriesAdded(); n != 2 {
		t.Fatalf("%d stream entries added, want 2 (the start and one resume)", n)
	}
	if a, b := fired(id, first), fired(id, second); a+b != 1 || b != 1 {
		t.Fatalf("sent by the killed role %d times, by the new one %d times", a, b)
	}
	if len(d.scheduled()) != 0 {
		t.Fatalf("left on the delay queue: %v", d.scheduled())
	}
}

// Two delay roles race for the same entries (started one after the other, they come due over
// about a second, across several passes), and one of them is killed with kill -9 once sending
// has begun and replaced: every execution is resumed exactly once.
func TestE2EDelayRolesRacingOneKilledWhileSendingFireEachOnce(t *testing.T) {
	t.Parallel()
	d := newDelayStack(t)
	d.start("worker", nil)
	flow := delayFlowFile(t, "nap2many", 2)
	const n = 20
	var ids []string
	for range n {
		ids = append(ids, d.startFlow(flow, "", ""))
	}
	for _, id := range ids {
		d.waitStatus(id, "", state.Suspended, 60*time.Second)
	}
	a, b := d.start("delay", nil), d.start("delay", nil)
	waitFor(t, "the first wake-up sent", 60*time.Second, func() bool {
		return len(logLines(a.stderr.String(), "delay.fired"))+len(logLines(b.stderr.String(), "delay.fired")) > 0
	}, d.procs...)
	a.kill9(t)
	d.start("delay", nil)
	for _, id := range ids {
		st := d.waitDone(id)
		if st.Status != state.Completed || len(timelineResumes(st)) != 1 {
			t.Fatalf("%s: %s, resumes %v", id, st.Status, timelineResumes(st))
		}
	}
	if got := d.entriesAdded(); got != 2*n {
		t.Fatalf("%d stream entries added, want %d (each start and one resume each)", got, 2*n)
	}
	if len(d.scheduled()) != 0 {
		t.Fatalf("left on the delay queue: %v", d.scheduled())
	}
}

// PLAITA_DELAY_QUEUE= (an empty key prefix) is rejected by the preflight of every role that
// reads it, and PLAITA_CHECK_INTERVAL=0 by every role that reads that: exit 2, the variable
// named, no connection made.
func TestE2EDelayQueueAndCheckIntervalPreflight(t *testing.T) {
	t.Parallel()
	tr := newTrap(t)
	for _, tc := range []struct {
		variable, value, want string
		roles                 []string
	}{
		{"PLAITA_DELAY_QUEUE", "", `PLAITA_DELAY_QUEUE: empty value is not allowed`, []string{"worker", "delay", "dev"}},
		{"PLAITA_CHECK_INTERVAL", "0", `PLAITA_CHECK_INTERVAL: "0" is zero: must be a positive number of seconds`, []string{"schedule", "dev"}},
	} {
		for _, role := range tc.roles {
			r := run(t, map[string]string{"PLAITA_REDIS_URL": tr.url(), tc.variable: tc.value}, role)
			if r.code != 2 || !strings.Contains(r.stderr, "plaita: configuration rejected") || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("%s with %s=%q: exit %d\n%s", role, tc.variable, tc.value, r.code, r.stderr)
			}
		}
	}
	if n := tr.connections(); n != 0 {
		t.Errorf("%d connection(s) made before the preflight passed", n)
	}
}

// The worker is killed with kill -9 in the step after a delay's wake-up was applied: the
// redelivered wake-up meets the running execution its first delivery left behind, is
// recognised as that very resume (its mark), and the execution goes on from its checkpoint to
// completion — without a second resume and without a second wake-up sent.
func TestE2EWorkerKilledAfterTheWakeupTheRedeliveryFinishes(t *testing.T) {
	t.Parallel()
	d := newStack(t, withTimeout(3*time.Minute), withEnv(map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "500", "PLAITA_LEASE_TTL_SECONDS": "2"}))
	hs := newPathServer(t, map[string]time.Duration{"/slow": 2 * time.Second})
	flow := writeFile(t, "nap-then-slow.json", `{"id":"nap-then-slow","version":"1","start":"nap","nodes":[
	 {"id":"nap","type":"delay","params":{"seconds":1},"next":"slow"},
	 {"id":"slow","type":"http","params":{"url":"`+hs.URL+`/slow","timeout":20},"next":"done"},
	 {"id":"done","type":"end","params":{"output":"ok"}}]}`)
	a := d.spawn("worker", nil)
	d.start("delay", nil)
	id := d.startFlow(flow, "", "")
	hs.waitSeen(t, "/slow", 60*time.Second, d.procs...)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.wait(10 * time.Second)
	d.start("worker", nil)
	st := d.waitDone(id)
	if st.Status != state.Completed {
		t.Fatalf("status %s, error %+v\n%s", st.Status, st.Error, logs(d.procs))
	}
	if r := timelineResumes(st); len(r) != 1 || st.LastResume == nil || !strings.HasPrefix(st.LastResume.Key, "delay:"+id+":nap:") {
		t.Fatalf("resumes %v, last resume %+v", r, st.LastResume)
	}
	if n := d.entriesAdded(); n != 2 {
		t.Fatalf("%d stream entries added, want 2 (the start and the one wake-up, redelivered)", n)
	}
	if fired(id, d.procs...) != 1 {
		t.Fatalf("delay.fired %d times", fired(id, d.procs...))
	}
}

// Redis restarts (with its data) while a delay waits: the delay role and the worker reconnect
// and the execution completes, resumed once.
func TestE2EDelayRoleSurvivesARedisRestart(t *testing.T) {
	t.Parallel()
	d := newStack(t, withTimeout(3*time.Minute), withRedisArgs("--appendonly", "yes", "--appendfsync", "always"))
	d.start("worker", nil)
	delayRole := d.start("delay", nil)
	id := d.startFlow(delayFlowFile(t, "nap3r", 3), "", "")
	d.waitStatus(id, "", state.Suspended, 60*time.Second)
	waitFor(t, "the delay entry", 30*time.Second, func() bool { return len(d.scheduled()) == 1 }, d.procs...)
	d.srv.Restart()
	st := d.waitDone(id)
	if st.Status != state.Completed || len(timelineResumes(st)) != 1 {
		t.Fatalf("status %s, resumes %v\n%s", st.Status, timelineResumes(st), logs(d.procs))
	}
	if fired(id, delayRole) != 1 {
		t.Fatalf("delay.fired %d times\n%s", fired(id, delayRole), delayRole.stderr.String())
	}
}
