//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store/keys"
)

// Real `plaita worker` processes against private redis-servers, for the defects an operator
// found by killing workers, restarting Redis and running for longer than a minute.

// A worker stays registered with a fresh heartbeat for longer than three heartbeat TTLs (the
// heartbeat once died with the 30-second start-up deadline; the key expired one TTL later).
func TestE2EWorkerStaysRegisteredPastThreeTTLs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 95 s")
	}
	t.Parallel()
	e := newStack(t, withTimeout(150*time.Second))
	w := e.spawn("worker", map[string]string{"PLAITA_INSTANCE_ID": "hb-worker"})
	key := keys.MustFor("", "").RegistryInstance("hb-worker")
	ttl := time.Duration(3*10) * time.Second // RegistryTTLFactor × the 10 s heartbeat
	waitFor(t, "registered", 20*time.Second, func() bool {
		n, err := e.c.Do(e.ctx, e.c.B().Exists().Key(key).Build()).AsInt64()
		return err == nil && n == 1
	}, w)
	start := time.Now()
	var first, last time.Time
	for time.Since(start) < 3*ttl+5*time.Second {
		raw, err := e.c.Do(e.ctx, e.c.B().Get().Key(key).Build()).ToString()
		if err != nil {
			t.Fatalf("registry key gone %s after start: %v\n%s", time.Since(start).Round(time.Second), err, w.stderr.String())
		}
		var rec struct {
			HeartbeatAt time.Time `json:"heartbeat_at"`
		}
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			t.Fatal(err)
		}
		if first.IsZero() {
			first = rec.HeartbeatAt
		}
		last = rec.HeartbeatAt
		if age := time.Since(rec.HeartbeatAt); age > 15*time.Second {
			t.Fatalf("heartbeat %s old %s after start\n%s", age.Round(time.Second), time.Since(start).Round(time.Second), w.stderr.String())
		}
		time.Sleep(time.Second)
	}
	if last.Sub(first) < 3*ttl-10*time.Second {
		t.Fatalf("heartbeat moved only %s in %s", last.Sub(first), time.Since(start))
	}
}

const resumeSlowFlow = `{"id":"rs","start":"wait","nodes":[
	{"id":"wait","type":"wait_event","params":{"event_type":"go"},"next":"call"},
	{"id":"call","type":"http","params":{"url":"URL/slow","timeout":20},"next":"done"},
	{"id":"done","type":"end","params":{"output":"{{ EVENT.n }}"}}]}`

// The first delivery of a resume applies it and saves running; its worker is killed in the next
// step; the redelivery must continue from the checkpoint (it was acked as a stale carrier and
// the execution stayed running for ever).
func TestE2ERedeliveredResumeAfterKill9Completes(t *testing.T) {
	t.Parallel()
	e := newStack(t, withTimeout(90*time.Second), withEnv(map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "500", "PLAITA_LEASE_TTL_SECONDS": "2"}))
	hs := newPathServer(t, map[string]time.Duration{"/slow": 3 * time.Second})
	e.publish("rs", strings.ReplaceAll(resumeSlowFlow, "URL", hs.URL))
	id := e.enqueue("rs")
	a := e.spawn("worker", nil)
	waitFor(t, "suspended", 20*time.Second, func() bool {
		st, err := e.ts.Load(e.ctx, id)
		return err == nil && st.Status == state.Suspended
	}, a)
	if _, err := queue.Enqueue(e.ctx, queue.Redis(e.c), config.QueueName.In(e.cfg), queue.Envelope{Kind: queue.KindResume, FlowID: "rs",
		FlowVersion: "1", ExecutionID: id, ResumeType: engine.ResumeEvent, ResumeData: json.RawMessage(`{"type":"go","n":7}`)}); err != nil {
		t.Fatal(err)
	}
	hs.waitSeen(t, "/slow", 20*time.Second, a)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !a.wait(10 * time.Second) {
		t.Fatal("worker survived kill -9")
	}
	if st, _ := e.ts.Load(e.ctx, id); st == nil || st.Status != state.Running {
		t.Fatalf("after the kill the execution is %v, want running at its checkpoint", st)
	}
	b := e.spawn("worker", nil)
	st := e.waitTerminal(id, 40*time.Second, a, b)
	if st.Status != state.Completed || fmt.Sprint(st.Output) != "7" {
		t.Fatalf("status %s output %v error %+v\n%s", st.Status, st.Output, st.Error, logs([]*proc{a, b}))
	}
	waitFor(t, "queue drained", 10*time.Second, func() bool { return e.streamLen() == 0 && e.pending() == 0 }, a, b)
	if strings.Contains(b.stderr.String(), `"event":"worker.resume_refused"`) {
		t.Errorf("the redelivered resume was refused:\n%s", b.stderr.String())
	}
}

// Two workers killed in turn during one execution's step, then a third: the waits for the dead
// holders' leases spend no deliveries, so the execution completes and nothing is dead-lettered
// (it once reached the DLQ as max_deliveries=5 while its state stayed running).
func TestE2ETwoCrashesOnOneExecutionDoNotDeadLetterIt(t *testing.T) {
	t.Parallel()
	e := newStack(t, withTimeout(120*time.Second), withEnv(map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "300", "PLAITA_LEASE_TTL_SECONDS": "4"}))
	hs := newPathServer(t, map[string]time.Duration{"/slow": 3 * time.Second})
	e.publish("one", `{"id":"one","start":"call","nodes":[
		{"id":"call","type":"http","params":{"url":"`+hs.URL+`/slow","timeout":20},"next":"done"},
		{"id":"done","type":"end","params":{"output":"ok"}}]}`)
	id := e.enqueue("one")
	var ws []*proc
	for range 2 {
		w := e.spawn("worker", nil)
		ws = append(ws, w)
		hs.waitSeen(t, "/slow", 30*time.Second, ws...)
		if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		w.wait(10 * time.Second)
	}
	c := e.spawn("worker", nil)
	ws = append(ws, c)
	st := e.waitTerminal(id, 60*time.Second, ws...)
	if st.Status != state.Completed {
		t.Fatalf("status %s error %+v\n%s", st.Status, st.Error, logs(ws))
	}
	if n := e.dlqLen(); n != 0 {
		t.Fatalf("DLQ holds %d entries\n%s", n, logs(ws))
	}
	if n := hs.count("/slow"); n != 3 {
		t.Errorf("the step ran %d times, want 3 (twice killed, once finished)", n)
	}
}

// Redis is killed mid-step and comes back (AOF) 6 s later: the worker's lease release failed,
// and the redelivery meets a lease held by this very instance. It is taken over at once instead
// of being waited out as a live holder until the delivery budget is gone.
func TestE2ERedisRestartLeavesOwnLeaseThatIsTakenOver(t *testing.T) {
	t.Parallel()
	e := newStack(t, withTimeout(120*time.Second), withEnv(map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "2000", "PLAITA_LEASE_TTL_SECONDS": "120"}), withRedisArgs("--appendonly", "yes", "--appendfsync", "always"))
	hs := newPathServer(t, map[string]time.Duration{"/slow": 4 * time.Second})
	e.publish("one", `{"id":"one","start":"call","nodes":[
		{"id":"call","type":"http","params":{"url":"`+hs.URL+`/slow","timeout":20},"next":"done"},
		{"id":"done","type":"end","params":{"output":"ok"}}]}`)
	id := e.enqueue("one")
	w := e.spawn("worker", nil)
	hs.waitSeen(t, "/slow", 20*time.Second, w)
	e.srv.Kill()
	time.Sleep(6 * time.Second) // the outage: the step ends, its save and the lease release fail
	e.srv.Start()
	st := e.waitTerminal(id, 60*time.Second, w)
	if st.Status != state.Completed {
		t.Fatalf("status %s error %+v\n%s", st.Status, st.Error, w.stderr.String())
	}
	if n := e.dlqLen(); n != 0 {
		t.Fatalf("DLQ holds %d entries\n%s", n, w.stderr.String())
	}
	if !strings.Contains(w.stderr.String(), `"event":"worker.stale_own_lease"`) {
		t.Errorf("no stale_own_lease takeover logged:\n%s", w.stderr.String())
	}
}

// A producer whose budget differs from the workers' (here PLAITA_LEASE_TTL_SECONDS): its fresh
// message runs at once; only config_family gates a first delivery.
func TestE2EProducerWithAnotherBudgetIsRun(t *testing.T) {
	t.Parallel()
	e := newStack(t, withTimeout(60*time.Second))
	e.publish("short", shortFlow)
	producer, err := config.Load(config.RoleWorker, true, config.WithEnv(map[string]string{
		"PLAITA_REDIS_URL": e.srv.URL(), "PLAITA_LEASE_TTL_SECONDS": "60"}))
	if err != nil {
		t.Fatal(err)
	}
	if producer.Generations().Budget == e.cfg.Generations().Budget || producer.Generations().Family != e.cfg.Generations().Family {
		t.Fatal("want the same family and another budget")
	}
	id := engine.NewExecutionID()
	env := queue.Envelope{Kind: queue.KindStart, FlowID: "short", FlowVersion: "1", ExecutionID: id, Input: json.RawMessage(`{}`)}
	env.Stamp(settings.Generations(producer), time.Now())
	if _, err := queue.Enqueue(e.ctx, queue.Redis(e.c), config.QueueName.In(e.cfg), env); err != nil {
		t.Fatal(err)
	}
	w := e.spawn("worker", nil)
	if st := e.waitTerminal(id, 20*time.Second, w); st.Status != state.Completed {
		t.Fatalf("status %s", st.Status)
	}
}
