//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store/keys"
)

// TestWorkerRunsAFlowAndDrainsOnSIGTERM runs the real binary against a private Redis: a
// published flow and an enqueued start run to completion, then SIGTERM drains and exits 0.
func TestWorkerRunsAFlowAndDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	s := newStack(t, withTimeout(60*time.Second), withEnv(cliEnv()))
	c, ctx, cfg := s.c, s.ctx, s.cfg

	flow := `{"id":"hello","start":"greet","nodes":[
		{"id":"greet","type":"set","params":{"vars":{"msg":"hello {{ INPUT.name }}"}},"next":"done"},
		{"id":"done","type":"end","params":{"output":"{{ VARS.msg }}"}}]}`
	if err := c.Do(ctx, c.B().Set().Key(keys.MustFor("", "").Flow("hello", "1")).Value(flow).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	id := engine.NewExecutionID()
	if _, err := queue.Enqueue(ctx, queue.Redis(c), config.QueueName.In(cfg), queue.Envelope{Kind: queue.KindStart, FlowID: "hello", FlowVersion: "1",
		ExecutionID: id, Input: json.RawMessage(`{"name":"Ada"}`)}); err != nil {
		t.Fatal(err)
	}

	w := s.spawn("worker", nil)
	stderr := w.stderr

	var st *state.Execution
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		st, err = s.ts.Load(ctx, id)
		if err == nil && st.Status.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution not finished (last: %v %v)\nworker stderr:\n%s", st, err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st.Status != state.Completed || st.Output != "hello Ada" {
		t.Fatalf("status %s output %v error %+v", st.Status, st.Output, st.Error)
	}
	// The message is acked and deleted.
	if n, _ := c.Do(ctx, c.B().Xlen().Key(config.QueueName.In(cfg)).Build()).AsInt64(); n != 0 {
		t.Errorf("stream still holds %d entries", n)
	}
	// The instance is registered while it runs.
	if n, _ := c.Do(ctx, c.B().Scard().Key(keys.MustFor("", "").RegistryInstances()).Build()).AsInt64(); n != 1 {
		t.Errorf("%d registered instances, want 1", n)
	}

	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !w.wait(30 * time.Second) {
		t.Fatalf("worker did not drain and exit\n%s", stderr.String())
	}
	if w.err != nil {
		t.Fatalf("worker exit: %v\n%s", w.err, stderr.String())
	}
	for _, ev := range []string{`"event":"worker.started"`, `"event":"worker.draining"`, `"event":"worker.stopped"`} {
		if !strings.Contains(stderr.String(), ev) {
			t.Errorf("no %s in the log:\n%s", ev, stderr.String())
		}
	}
	if n, _ := c.Do(ctx, c.B().Scard().Key(keys.MustFor("", "").RegistryInstances()).Build()).AsInt64(); n != 0 {
		t.Errorf("%d registered instances after the drain, want 0", n)
	}
}
