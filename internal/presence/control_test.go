package presence

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/store"
	"plaita/test/redistest"
)

// ask sends one request on id's channel and waits for the answer.
func ask(t *testing.T, st *store.Control, id, op, reqID string) store.ControlReply {
	t.Helper()
	if _, err := st.Ask(regCtx(t), id, store.ControlRequest{ID: reqID, Op: op, From: "test", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r, ok, err := st.Await(regCtx(t), reqID, 5*time.Second)
	if err != nil || !ok {
		t.Fatalf("%s %s: no answer (%v)", op, id, err)
	}
	return r
}

// The channel answers a status from the registry presence (a worker's tasks in flight
// included) and turns a stop into one call of onStop after answering it; a second stop while
// draining is answered "already draining"; a message that is no request is ignored.
func TestControlAnswersStatusAndStop(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	r, _ := b.registry(t, "w-ctl", time.Hour)
	if err := r.Start(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	r.SetActive(3)
	st := store.NewControl(store.OnRedis(b.c), b.root)
	var stops atomic.Int32
	var logs logSink
	c := NewControl(st, r, func() { stops.Add(1) }, zerolog.New(&logs))
	if err := c.Start(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })

	got := ask(t, st, "w-ctl", store.ControlStatus, "req_status")
	if got.RequestID != "req_status" || got.InstanceID != "w-ctl" || got.Role != "worker" || got.Status != StatusRunning ||
		got.Draining || got.InFlight == nil || *got.InFlight != 3 || got.Capacity != 4 || got.PID != 4242 || got.Accepted {
		t.Fatalf("status answer %+v", got)
	}
	if stops.Load() != 0 {
		t.Fatal("a status request stopped the instance")
	}

	// Not a request: logged and ignored; the channel still answers.
	if err := b.c.Do(regCtx(t), b.c.B().Publish().Channel(st.Channel("w-ctl")).Message("{not json").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	got = ask(t, st, "w-ctl", store.ControlStop, "req_stop")
	if !got.Accepted || !got.Draining || got.Status != StatusDraining {
		t.Fatalf("stop answer %+v", got)
	}
	waitFor(t, "onStop", 5*time.Second, func() bool { return stops.Load() == 1 })
	if logs.events("worker.control_bad_request") != 1 || logs.events("worker.stop_requested") != 1 {
		t.Errorf("logs:\n%s", logs.String())
	}

	// The role drains: the channel answers with the registry's status.
	if err := r.SetStatus(regCtx(t), StatusDraining); err != nil {
		t.Fatal(err)
	}
	got = ask(t, st, "w-ctl", store.ControlStop, "req_stop2")
	if !got.Accepted || got.Message != "already draining" {
		t.Fatalf("second stop answer %+v", got)
	}
	waitFor(t, "the second onStop", 5*time.Second, func() bool { return stops.Load() == 2 })

	// Another instance's channel reaches nobody: no answer.
	if n, err := st.Ask(regCtx(t), "w-nobody", store.ControlRequest{ID: "req_none", Op: store.ControlStatus}); err != nil || n != 0 {
		t.Fatalf("ask nobody: %d %v", n, err)
	}
	if _, ok, err := st.Await(regCtx(t), "req_none", 100*time.Millisecond); ok || err != nil {
		t.Fatalf("an answer from nobody: %v %v", ok, err)
	}
	c.Stop(context.Background())
	c.Stop(context.Background()) // twice is safe
}

// The channel survives Redis going away: once Redis is back, it subscribes again and answers.
func TestControlSubscribesAgainAfterARedisRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	cl := srv.Client(t)
	r := New(store.NewRegistry(store.OnRedis(cl), "plaita"), regInfo("w-restart"), zerolog.Nop(), metrics.NewSet())
	r.Interval = time.Hour
	t.Cleanup(func() { r.Stop(context.Background()) })
	if err := r.Start(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	st := store.NewControl(store.OnRedis(cl), "plaita")
	var logs logSink
	c := NewControl(st, r, func() {}, zerolog.New(&logs))
	c.Retry = 20 * time.Millisecond
	if err := c.Start(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	ask(t, st, "w-restart", store.ControlStatus, "req_before")

	srv.Restart()
	waitFor(t, "the channel subscribed again", 15*time.Second, func() bool { return logs.events("worker.control_recovered") == 1 })
	if logs.events("worker.control_lost") != 1 {
		t.Errorf("the outage was not logged once:\n%s", logs.String())
	}
	// The test's own client may still hold the dead connection for a call or two.
	waitFor(t, "an answer after the restart", 15*time.Second, func() bool {
		_, err := st.Ask(regCtx(t), "w-restart", store.ControlRequest{ID: "req_after", Op: store.ControlStatus})
		return err == nil
	})
	if got, ok, err := st.Await(regCtx(t), "req_after", 5*time.Second); !ok || err != nil || got.InstanceID != "w-restart" {
		t.Fatalf("answer after the restart %+v %v %v", got, ok, err)
	}
	waitFor(t, "two requests answered", 5*time.Second, func() bool { return c.answered.Load() == 2 })
}

// The channel outlives the context it was started with (a role's start-up deadline): it still
// answers after that context has ended, and was never lost.
func TestControlOutlivesItsStartContext(t *testing.T) {
	t.Parallel()
	b := regSetup(t)
	r, _ := b.registry(t, "w-startctx", time.Hour)
	if err := r.Start(regCtx(t)); err != nil {
		t.Fatal(err)
	}
	st := store.NewControl(store.OnRedis(b.c), b.root)
	var logs logSink
	c := NewControl(st, r, func() {}, zerolog.New(&logs))
	startCtx, cancel := context.WithCancel(context.Background())
	if err := c.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	cancel()
	if got := ask(t, st, "w-startctx", store.ControlStatus, "req_after_start"); got.InstanceID != "w-startctx" {
		t.Fatalf("answer %+v", got)
	}
	if n := logs.events("worker.control_lost"); n != 0 {
		t.Fatalf("the channel was lost when its start context ended:\n%s", logs.String())
	}
	// A start context that ends before the subscription: Start fails and nothing keeps running.
	late := NewControl(st, r, func() {}, zerolog.Nop())
	done, stop := context.WithCancel(context.Background())
	stop()
	if err := late.Start(done); err == nil {
		t.Fatal("Start with an ended context succeeded")
	}
}
