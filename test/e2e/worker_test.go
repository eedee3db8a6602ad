package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/redistest"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// syncBuffer collects a process's stderr while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWorkerRunsAFlowAndDrainsOnSIGTERM runs the real binary against a private Redis: a
// published flow and an enqueued start run to completion, then SIGTERM drains and exits 0.
func TestWorkerRunsAFlowAndDrainsOnSIGTERM(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	flow := `{"id":"hello","start":"greet","nodes":[
		{"id":"greet","type":"set","params":{"vars":{"msg":"hello {{ INPUT.name }}"}},"next":"done"},
		{"id":"done","type":"end","params":{"output":"{{ VARS.msg }}"}}]}`
	if err := c.Do(ctx, c.B().Set().Key(keys.MustFor("", "").Flow("hello", "1")).Value(flow).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PLAITA_REDIS_URL": srv.URL(), "PLAITA_WORKER_CONCURRENCY": "2", "PLAITA_WORKER_DRAIN_TIMEOUT": "5",
		"PLAITA_NODES_WORKSPACE_ROOT": t.TempDir()}
	cfg, err := config.Load(config.RoleWorker, true, config.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	id := engine.NewExecutionID()
	if _, err := queue.Enqueue(ctx, c, config.QueueName.In(cfg), queue.Envelope{Kind: queue.KindStart, FlowID: "hello", FlowVersion: "1",
		ExecutionID: id, Input: json.RawMessage(`{"name":"Ada"}`)}); err != nil {
		t.Fatal(err)
	}

	w := spawnWorker(t, env)
	stderr := w.stderr

	ts, err := store.NewRedis(c, settings.Store(cfg), "").Tenant("")
	if err != nil {
		t.Fatal(err)
	}
	var st *state.Execution
	for deadline := time.Now().Add(30 * time.Second); ; {
		st, err = ts.Load(ctx, id)
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

// e2eWorker is one real `plaita worker` process.
type e2eWorker struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
	err    error
}

// spawnWorker starts `plaita worker` with exactly env (plus PATH and HOME); a process still
// running when the test ends is killed.
func spawnWorker(t testing.TB, env map[string]string) *e2eWorker {
	t.Helper()
	return spawn(t, exec.Command(binary, "worker"), env)
}

// spawn starts cmd (the binary, or a shell that execs it) with exactly env plus PATH and HOME.
func spawn(t testing.TB, cmd *exec.Cmd, env map[string]string) *e2eWorker {
	t.Helper()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	w := &e2eWorker{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.err = cmd.Wait(); close(w.exited) }()
	t.Cleanup(func() {
		select {
		case <-w.exited:
		default:
			cmd.Process.Kill()
			<-w.exited
		}
	})
	return w
}
