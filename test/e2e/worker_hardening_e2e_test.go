//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/worker"
)

// bombFlowJSON doubles VARS.s 19 times (32 B → 16 MiB) and then copies it into 60 variables:
// a 2 KB flow that once took a worker down with "fatal error: out of memory" under a 3 GB
// address-space limit, and every concurrent execution with it.
func bombFlowJSON() string {
	copies := make([]string, 60)
	for i := range copies {
		copies[i] = fmt.Sprintf(`"c%d":"{{ VARS.s }}"`, i)
	}
	return `{"id":"bomb","vars":{"s":"0123456789abcdef0123456789abcdef","i":0},"start":"grow","nodes":[
		{"id":"grow","type":"set","params":{"vars":{"s":"{{ VARS.s + VARS.s }}","i":"{{ VARS.i + 1 }}"}},"next":"more"},
		{"id":"more","type":"condition","params":{"expr":"VARS.i < 19"},"branches":{"true":"grow","false":"copy"}},
		{"id":"copy","type":"set","params":{"vars":{` + strings.Join(copies, ",") + `}},"next":"done"},
		{"id":"done","type":"end"}]}`
}

// spawnLimitedWorker starts `plaita worker` under an address-space limit (ulimit -v, KiB).
func spawnLimitedWorker(t *testing.T, env map[string]string, limitKiB int) *proc {
	t.Helper()
	return spawnCmd(t, exec.Command("sh", "-c", fmt.Sprintf(`ulimit -v %d && exec "$0" worker`, limitKiB), binary), env)
}

// The memory bomb under a 3 GB limit: the worker survives, the concurrent executions complete,
// the bomb ends in error naming the node whose result crossed PLAITA_EXECUTION_STATE_MAX_BYTES
// (permanent: acked once, no redelivery, nothing dead-lettered).
func TestE2EStateSizeBoundKeepsTheWorkerAlive(t *testing.T) {
	t.Parallel()
	e := newStack(t, withTimeout(120*time.Second), withEnv(map[string]string{"PLAITA_WORKER_CONCURRENCY": "4"}))
	e.publish("bomb", bombFlowJSON())
	e.publish("short", shortFlow)
	bomb := e.enqueue("bomb")
	var others []string
	for range 20 {
		others = append(others, e.enqueue("short"))
	}
	w := spawnLimitedWorker(t, e.env, 3<<20)
	st := e.waitTerminal(bomb, 60*time.Second, w)
	if st.Status != state.Error || st.Error == nil || st.Error.Type != engine.ErrTypeStateTooLarge || st.Error.Node != "grow" || !st.Error.Permanent {
		t.Fatalf("bomb: status %s error %+v\n%s", st.Status, st.Error, w.stderr.String())
	}
	for _, id := range others {
		if st := e.waitTerminal(id, 30*time.Second, w); st.Status != state.Completed {
			t.Fatalf("%s: %s", id, st.Status)
		}
	}
	waitFor(t, "queue drained", 10*time.Second, func() bool { return e.streamLen() == 0 && e.pending() == 0 }, w)
	select {
	case <-w.exited:
		t.Fatalf("the worker died: %v\n%s", w.err, w.stderr.String())
	default:
	}
	if n := e.dlqLen(); n != 0 {
		t.Fatalf("DLQ holds %d entries", n)
	}
	if n := strings.Count(w.stderr.String(), `"event":"worker.task_done"`); n != 21 {
		t.Errorf("%d task_done lines, want 21 (the bomb settled once)", n)
	}
}

// A message whose run kills its worker each time (kill -9 mid-task) counts a delivery per run:
// after PLAITA_MAX_DELIVERIES it reaches the dead-letter stream, and its execution is ended in
// error instead of staying running.
func TestE2EAMessageThatCrashesWorkersIsDeadLettered(t *testing.T) {
	t.Parallel()
	e := newStack(t, withTimeout(120*time.Second), withEnv(map[string]string{"PLAITA_MAX_DELIVERIES": "3", "PLAITA_CLAIM_MIN_IDLE_MS": "300",
		"PLAITA_LEASE_TTL_SECONDS": "2"}))
	hs := newPathServer(t, map[string]time.Duration{"/crash": 30 * time.Second})
	e.publish("crash", `{"id":"crash","start":"call","nodes":[
		{"id":"call","type":"http","params":{"url":"`+hs.URL+`/crash","timeout":60},"next":"done"},
		{"id":"done","type":"end"}]}`)
	id := e.enqueue("crash")
	var ws []*proc
	for range 3 { // every allowed delivery dies in the step
		w := e.spawn("worker", nil)
		ws = append(ws, w)
		hs.waitSeen(t, "/crash", 30*time.Second, ws...)
		if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		w.wait(10 * time.Second)
	}
	last := e.spawn("worker", nil)
	ws = append(ws, last)
	st := e.waitTerminal(id, 30*time.Second, ws...)
	if st.Status != state.Error || st.Error == nil || st.Error.Type != worker.ErrTypeDeliveriesExhausted {
		t.Fatalf("status %s error %+v\n%s", st.Status, st.Error, logs(ws))
	}
	waitFor(t, "dead-lettered", 10*time.Second, func() bool { return e.dlqLen() == 1 && e.pending() == 0 }, ws...)
	en := e.dlqEntries()[0]
	if en["reason"] != queue.ReasonMaxDeliveries(3) || en["execution_id"] != id {
		t.Fatalf("dead letter %v", en)
	}
	if n := hs.count("/crash"); n != 3 {
		t.Errorf("the crashing step ran %d times, want 3 (one per allowed delivery)", n)
	}
}
