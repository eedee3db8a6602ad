//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store/keys"
)

// Acceptance scenarios for the real worker process. Each test has its own private
// redis-server: the worker writes under the fixed key root "plaita".

// registryKeys are the keys of the registered instances' records.
func (e *stack) registryKeys() []string {
	ks, err := e.c.Do(e.ctx, e.c.B().Keys().Pattern(keys.DefaultRoot+":registry:instance:*").Build()).AsStrSlice()
	if err != nil {
		e.t.Fatalf("keys: %v", err)
	}
	return ks
}

// slowFlow: a quick http step, then a slow one, then end.
func slowFlow(url string) string {
	return `{"id":"slow","start":"quick","nodes":[
		{"id":"quick","type":"http","params":{"url":"` + url + `/quick","timeout":20},"next":"slow"},
		{"id":"slow","type":"http","params":{"url":"` + url + `/slow","timeout":20},"next":"done"},
		{"id":"done","type":"end","params":{"output":"ok"}}]}`
}

func TestE2ECrashKill9ReplaysTheSlowStepAtMostOnce(t *testing.T) {
	t.Parallel()
	e := newStack(t, withTimeout(90*time.Second), withEnv(map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "500", "PLAITA_LEASE_TTL_SECONDS": "2"}))
	hs := newPathServer(t, map[string]time.Duration{"/slow": 2 * time.Second})
	e.publish("slow", slowFlow(hs.URL))
	id := e.enqueue("slow")

	a := e.spawn("worker", nil)
	hs.waitSeen(t, "/slow", 20*time.Second, a)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !a.wait(10 * time.Second) {
		t.Fatal("worker A survived kill -9")
	}
	start := time.Now()
	b := e.spawn("worker", nil)
	st := e.waitTerminal(id, 45*time.Second, a, b)
	t.Logf("worker B finished the execution %.2fs after the crash", time.Since(start).Seconds())
	if st.Status != state.Completed {
		t.Fatalf("status %s error %+v\n%s", st.Status, st.Error, logs([]*proc{a, b}))
	}
	t.Logf("requests: /quick %d, /slow %d", hs.count("/quick"), hs.count("/slow"))
	if n := hs.count("/quick"); n != 1 {
		t.Errorf("the step before the slow one ran %d times, want exactly 1", n)
	}
	if n := hs.count("/slow"); n < 1 || n > 2 {
		t.Errorf("the slow step was requested %d times, want 1 or 2 (replayed at most once)", n)
	}
	for deadline := time.Now().Add(10 * time.Second); e.streamLen() != 0 || e.pending() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("stream %d, pending %d after completion\n%s", e.streamLen(), e.pending(), logs([]*proc{a, b}))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestE2EDrainFinishesTheStepAndDeregisters(t *testing.T) {
	t.Parallel()
	e := newStack(t, withTimeout(90*time.Second))
	hs := newPathServer(t, map[string]time.Duration{"/slow": 3 * time.Second})
	e.publish("slow", slowFlow(hs.URL))
	id := e.enqueue("slow")

	w := e.spawn("worker", nil)
	hs.waitSeen(t, "/slow", 20*time.Second, w)
	if ks := e.registryKeys(); len(ks) != 1 {
		t.Fatalf("registry keys %v, want one", ks)
	}
	regKey := e.registryKeys()[0]
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sawDraining := false
	for deadline := time.Now().Add(20 * time.Second); ; {
		select {
		case <-w.exited:
		default:
			raw, err := e.c.Do(e.ctx, e.c.B().Get().Key(regKey).Build()).ToString()
			if err == nil {
				var rec struct {
					Status string `json:"status"`
				}
				if json.Unmarshal([]byte(raw), &rec) == nil && rec.Status == "draining" {
					sawDraining = true
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("worker did not exit\n%s", w.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		break
	}
	if w.err != nil {
		t.Fatalf("exit status: %v\n%s", w.err, w.stderr.String())
	}
	if !sawDraining {
		t.Errorf("the registry never showed draining")
	}
	if ks := e.registryKeys(); len(ks) != 0 {
		t.Errorf("registry keys after the drain: %v", ks)
	}
	st, err := e.ts.Load(e.ctx, id)
	if err != nil || st.Status != state.Completed {
		t.Fatalf("state after the drain: %v %v\n%s", st, err, w.stderr.String())
	}
	if l, p := e.streamLen(), e.pending(); l != 0 || p != 0 {
		t.Errorf("stream %d, pending %d: the message was not acked", l, p)
	}
	if n := hs.count("/slow"); n != 1 {
		t.Errorf("slow step requested %d times", n)
	}
}

func TestE2EDrainTimeoutLeavesTheMessagePending(t *testing.T) {
	t.Parallel()
	e := newStack(t, withTimeout(90*time.Second), withEnv(map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "500", "PLAITA_LEASE_TTL_SECONDS": "2",
		"PLAITA_WORKER_DRAIN_TIMEOUT": "1"}))
	hs := newPathServer(t, map[string]time.Duration{"/slow": 3 * time.Second})
	e.publish("slow", slowFlow(hs.URL))
	id := e.enqueue("slow")

	a := e.spawn("worker", nil)
	hs.waitSeen(t, "/slow", 20*time.Second, a)
	sent := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !a.wait(8 * time.Second) {
		t.Fatalf("worker did not exit within 8s of SIGTERM with a 1s drain timeout\n%s", a.stderr.String())
	}
	t.Logf("worker exited %.2fs after SIGTERM", time.Since(sent).Seconds())
	if a.err != nil {
		t.Errorf("exit status: %v", a.err)
	}
	if p := e.pending(); p != 1 {
		t.Fatalf("pending %d after the drain timeout, want 1\n%s", p, a.stderr.String())
	}
	if st, err := e.ts.Load(e.ctx, id); err == nil && st.Status.Terminal() {
		t.Fatalf("execution already terminal (%s) after the cancelled drain", st.Status)
	}
	b := e.spawn("worker", nil)
	st := e.waitTerminal(id, 45*time.Second, a, b)
	if st.Status != state.Completed {
		t.Fatalf("status %s error %+v\n%s", st.Status, st.Error, logs([]*proc{a, b}))
	}
	if n := hs.count("/quick"); n != 1 {
		t.Errorf("quick step ran %d times, want 1", n)
	}
	for deadline := time.Now().Add(10 * time.Second); e.streamLen() != 0 || e.pending() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("stream %d, pending %d after completion", e.streamLen(), e.pending())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestE2EDefect004NaNIsAStateSerializationError(t *testing.T) {
	t.Parallel()
	e := newStack(t, withTimeout(60*time.Second))
	e.publish("nan", `{"id":"nan","start":"bad","nodes":[
		{"id":"bad","type":"set","params":{"vars":{"x":"{{ 0.0 / 0.0 }}"}},"next":"done"},
		{"id":"done","type":"end","params":{"output":"{{ VARS.x }}"}}]}`)
	id := e.enqueue("nan")
	w := e.spawn("worker", nil)
	st := e.waitTerminal(id, 30*time.Second, w)
	if st.Status != state.Error || st.Error == nil {
		t.Fatalf("status %s error %+v, want error\n%s", st.Status, st.Error, w.stderr.String())
	}
	if st.Error.Type != engine.ErrTypeSerialization {
		t.Errorf("error type %q, want %q", st.Error.Type, engine.ErrTypeSerialization)
	}
	if st.Error.Node != "bad" && !strings.Contains(st.Error.Message, "bad") {
		t.Errorf("error does not name the node: %+v", st.Error)
	}
	for deadline := time.Now().Add(10 * time.Second); e.streamLen() != 0 || e.pending() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("stream %d, pending %d: not acked\n%s", e.streamLen(), e.pending(), w.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := e.dlqLen(); n != 0 {
		t.Errorf("DLQ holds %d entries, want 0", n)
	}
	if n := strings.Count(w.stderr.String(), `"event":"worker.task_done"`); n != 1 {
		t.Errorf("%d task_done events, want exactly 1 delivery run\n%s", n, w.stderr.String())
	}
}

func TestE2ERedisRestartMidRun(t *testing.T) {
	t.Parallel()
	e := newStack(t, withTimeout(120*time.Second), withEnv(map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "500", "PLAITA_LEASE_TTL_SECONDS": "2",
		"PLAITA_WORKER_CONCURRENCY": "1"}), withRedisArgs("--appendonly", "yes", "--appendfsync", "always"))
	e.publish("short", shortFlow)
	ids := make([]string, 300)
	for i := range ids {
		ids[i] = e.enqueue("short")
	}
	w := e.spawn("worker", nil)
	// Restart once the worker is under way but not done.
	for deadline := time.Now().Add(20 * time.Second); ; {
		if n := e.streamLen(); n < int64(len(ids)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker never started\n%s", w.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := e.streamLen()
	done := 0
	for _, id := range ids {
		if st, err := e.ts.Load(e.ctx, id); err == nil && st.Status.Terminal() {
			done++
		}
	}
	e.srv.Restart()
	t.Logf("redis restarted with %d of %d messages left, %d executions terminal", before, len(ids), done)
	if before == 0 || done == len(ids) {
		t.Fatalf("nothing was in flight when Redis went down (%d messages left, %d of %d terminal): the test proves nothing", before, done, len(ids))
	}
	for _, id := range ids {
		st := e.waitTerminal(id, 45*time.Second, w)
		if st.Status != state.Completed || st.Output != "12" {
			t.Fatalf("%s: status %s output %v error %+v", id, st.Status, st.Output, st.Error)
		}
	}
	for deadline := time.Now().Add(15 * time.Second); e.streamLen() != 0 || e.pending() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("stream %d, pending %d after every execution completed\n%s", e.streamLen(), e.pending(), w.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := e.dlqLen(); n != 0 {
		t.Errorf("DLQ holds %d entries after the restart", n)
	}
	select {
	case <-w.exited:
		t.Fatalf("worker exited: %v\n%s", w.err, w.stderr.String())
	default:
	}
}

func TestE2EThroughputThreeWorkers(t *testing.T) {
	t.Parallel()
	const total = 1000
	e := newStack(t, withTimeout(120*time.Second), withEnv(map[string]string{"PLAITA_WORKER_CONCURRENCY": "4"}))
	e.publish("one", `{"id":"one","start":"done","nodes":[{"id":"done","type":"end","params":{"output":"ok"}}]}`)
	ids := make([]string, total)
	for i := range ids {
		ids[i] = e.enqueue("one")
	}
	start := time.Now()
	ws := []*proc{e.spawn("worker", nil), e.spawn("worker", nil), e.spawn("worker", nil)}
	for deadline := time.Now().Add(60 * time.Second); e.streamLen() != 0 || e.pending() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("stream %d, pending %d after 60s\n%s", e.streamLen(), e.pending(), logs(ws))
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	t.Logf("%d executions across 3 workers × 4 in %.2fs: %.0f executions/s", total, elapsed.Seconds(), float64(total)/elapsed.Seconds())
	for _, id := range ids {
		st, err := e.ts.Load(e.ctx, id)
		if err != nil || st.Status != state.Completed {
			t.Fatalf("%s: %v %v", id, st, err)
		}
		n := 0
		for _, te := range st.Timeline {
			if te.Event == string(state.Completed) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%s: %d completed timeline entries, want 1: %+v", id, n, st.Timeline)
		}
	}
	done := 0
	for _, w := range ws {
		done += strings.Count(w.stderr.String(), `"event":"worker.task_done"`)
	}
	if done != total {
		t.Errorf("%d task_done events across the workers, want %d (each terminal state written once)", done, total)
	}
}
