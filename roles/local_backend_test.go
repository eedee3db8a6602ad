package roles

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/roles/delay"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
)

// The worker and the delay role, built as runWorker and runDelay build them, on local mode's
// backend (the console's database and the in-process hub) instead of Redis: a flow with a
// delay runs to its end — the same roles, the embedded drivers.
func TestRolesRunOnTheLocalBackend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, _, cfg, w := localWorker(t, ctx, nil)
	log := zerolog.Nop()
	dq, err := queue.NewDelay(b.Delay, settings.DelayQueue(cfg))
	if err != nil {
		t.Fatal(err)
	}
	mover := delay.NewMover(dq, delay.Settings{Interval: 50 * time.Millisecond, Move: queue.MoveOptions{Stream: config.QueueName.In(cfg),
		Generations: settings.Generations(cfg), EffectiveAt: time.Now()}}, metrics.NewSet(), log)
	var g service.Group
	if err := g.Start(ctx, service.Named{Name: "registry", Service: w.registry}, service.Named{Name: "live events", Service: w.observer},
		service.Named{Name: "dispatcher", Service: w.dispatcher}, service.Named{Name: "mover", Service: mover}); err != nil {
		t.Fatal(err)
	}
	defer g.Stop(context.Background())

	def := `{"id":"nap","version":"1","start":"compose","nodes":[
		{"id":"compose","type":"set","params":{"vars":{"text":"hi {{ INPUT.name }}"}},"next":"nap"},
		{"id":"nap","type":"delay","params":{"seconds":1},"next":"done"},
		{"id":"done","type":"end","params":{"output":{"text":"{{ VARS.text }}"}}}]}`
	if _, err := store.NewFlows(b.Flows, keys.DefaultRoot).Publish(ctx, "", "nap", "1", []byte(def), time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	id := engine.NewExecutionID()
	producer := queue.NewProducer(b.Queue, config.QueueName.In(cfg), settings.Generations(cfg), config.ExecutionStateMaxBytes.In(cfg), nil)
	if _, err := producer.Enqueue(ctx, queue.Envelope{Kind: queue.KindStart, FlowID: "nap", FlowVersion: "1", ExecutionID: id,
		Input: []byte(`{"name":"ada"}`)}); err != nil {
		t.Fatal(err)
	}
	ts, err := b.Storage(settings.Store(cfg)).Tenant("")
	if err != nil {
		t.Fatal(err)
	}
	var st *state.Execution
	sawSuspended := false
	for st == nil || !st.Status.Terminal() {
		select {
		case <-ctx.Done():
			t.Fatalf("the execution did not end: %+v", st)
		case <-time.After(20 * time.Millisecond):
		}
		if st, err = ts.Load(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		sawSuspended = sawSuspended || st != nil && st.Status == state.Suspended
	}
	if st.Status != state.Completed || !sawSuspended {
		t.Fatalf("ended %s (suspended on the way: %v): %+v", st.Status, sawSuspended, st.Error)
	}
	out, _ := st.Output.(map[string]any)
	if out["text"] != "hi ada" {
		t.Fatalf("output %v", st.Output)
	}
	// The start and the resume are each settled (the last one's ack follows its terminal save):
	// nothing is left in the stream.
	for {
		d, err := w.queue.Depth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.StreamLength == 0 && d.Pending == 0 && d.DLQLength == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("depth %+v: a task was left", d)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// The control plane built on local mode's backend, with a worker on the same backend: a flow
// published and started through the plane's operations runs to its end, is shown and listed;
// a poison task is dead-lettered once and replayed once through the plane.
func TestPlaneRunsOnTheLocalBackend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, _, cfg, w := localWorker(t, ctx, map[string]string{"PLAITA_MAX_DELIVERIES": "1", "PLAITA_CLAIM_MIN_IDLE_MS": "100"})
	var g service.Group
	if err := g.Start(ctx, service.Named{Name: "registry", Service: w.registry}, service.Named{Name: "dispatcher", Service: w.dispatcher}); err != nil {
		t.Fatal(err)
	}
	defer g.Stop(context.Background())
	plane, err := NewPlane(cfg, b, zerolog.Nop(), PlaneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	def := `{"id":"hello","version":"1","start":"greet","nodes":[
		{"id":"greet","type":"set","params":{"vars":{"greeting":"Hello, {{ INPUT.name }}!"}},"next":"done"},
		{"id":"done","type":"end","params":{"output":{"greeting":"{{ VARS.greeting }}"}}}]}`
	if _, err := plane.PublishFlow(ctx, "", []byte(def), ""); err != nil {
		t.Fatal(err)
	}
	started, err := plane.Start(ctx, control.StartRequest{FlowID: "hello", Input: []byte(`{"name":"ada"}`)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := plane.WaitSettled(ctx, "", started.ExecutionID, 30*time.Second)
	if err != nil || st.Status != state.Completed {
		t.Fatalf("settled: %+v %v", st, err)
	}
	shown, err := plane.Show(ctx, "", started.ExecutionID)
	if err != nil || shown.Execution == nil || shown.Status != state.Completed {
		t.Fatalf("show: %+v %v", shown, err)
	}
	page, err := plane.List(ctx, "", control.ListRequest{})
	if err != nil || len(page.Items) != 1 || page.Items[0].ExecutionID != started.ExecutionID {
		t.Fatalf("list: %+v %v", page, err)
	}

	// A task of a flow version nobody published is retried to its budget, then dead-lettered.
	poison := engine.NewExecutionID()
	producer := queue.NewProducer(b.Queue, config.QueueName.In(cfg), settings.Generations(cfg), 1<<20, nil)
	if _, err := producer.Enqueue(ctx, queue.Envelope{Kind: queue.KindStart, FlowID: "hello", FlowVersion: "9",
		ExecutionID: poison, Input: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	var letters []queue.DLQEntry
	for len(letters) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the poison task was never dead-lettered")
		case <-time.After(50 * time.Millisecond):
		}
		if letters, err = plane.DeadLetters(ctx, "", true, 10); err != nil {
			t.Fatal(err)
		}
	}
	if len(letters) != 1 || letters[0].ExecutionID != poison {
		t.Fatalf("dead letters: %+v", letters)
	}
	res, err := plane.ReplayDeadLetter(ctx, "", true, letters[0].ID)
	if err != nil || res.Status != queue.ReplayDone {
		t.Fatalf("replay: %+v %v", res, err)
	}
	if again, err := plane.ReplayDeadLetter(ctx, "", true, letters[0].ID); err != nil || again.Status != queue.ReplayAlreadyReplayed {
		t.Fatalf("second replay: %+v %v", again, err)
	}
}

// The filter joins them on local mode's backend: two executions wait for a payment of their
// own order (a correlated wait); an event published through the control plane wakes the one
// whose order it names, through the filter's notification on the in-process hub, and not the
// other.
func TestFilterRunsOnTheLocalBackend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, env, wcfg, w := localWorker(t, ctx, nil)
	fcfg, err := config.Load(config.RoleFilter, true, config.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	f := buildFilter(newOnRedis(fcfg, b, metrics.NewSet(), zerolog.Nop()))
	var g service.Group
	if err := g.Start(ctx, service.Named{Name: "dispatcher", Service: w.dispatcher}, service.Named{Name: "listener", Service: f.listener},
		service.Named{Name: "reconciler", Service: f.reconciler}); err != nil {
		t.Fatal(err)
	}
	defer g.Stop(context.Background())
	plane, err := NewPlane(wcfg, b, zerolog.Nop(), PlaneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	def := `{"id":"pay","version":"1","start":"wait","nodes":[
		{"id":"wait","type":"wait_event","params":{"event_type":"payment","match":"EVENT.order_id == INPUT.order_id","timeout":600},"next":"done"},
		{"id":"done","type":"end","params":{"output":{"paid":"{{ EVENT.amount }}"}}}]}`
	if _, err := plane.PublishFlow(ctx, "", []byte(def), ""); err != nil {
		t.Fatal(err)
	}
	start := func(order string) string {
		t.Helper()
		s, err := plane.Start(ctx, control.StartRequest{FlowID: "pay", Input: []byte(`{"order_id":"` + order + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return s.ExecutionID
	}
	mine, other := start("A1"), start("B2")
	for _, id := range []string{mine, other} { // both wait before the event is published
		for {
			shown, err := plane.Show(ctx, "", id)
			if err == nil && shown.Execution != nil && shown.Status == state.Suspended {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s never suspended: %+v %v", id, shown, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if _, err := plane.PublishEvent(ctx, store.Event{ID: store.NewEventID(), Type: "payment", Data: []byte(`{"order_id":"A1","amount":12}`)}); err != nil {
		t.Fatal(err)
	}
	var st *state.Execution
	for st == nil || st.Status != state.Completed {
		shown, err := plane.Show(ctx, "", mine)
		if err != nil {
			t.Fatal(err)
		}
		st = shown.Execution
		select {
		case <-ctx.Done():
			t.Fatalf("the awaited execution was not woken: %+v", st)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if out, _ := st.Output.(map[string]any); out["paid"] != 12.0 {
		t.Fatalf("output %v", st.Output)
	}
	if shown, err := plane.Show(ctx, "", other); err != nil || shown.Status != state.Suspended {
		t.Fatalf("the other order's execution was woken: %+v %v", shown, err)
	}
}

// localWorker is local mode's backend on a new database file and a worker built on it as
// runWorker builds one (its consumer group created): what these tests start from. extra adds
// to the worker's environment, which is returned for the other roles' configurations.
func localWorker(t *testing.T, ctx context.Context, extra map[string]string) (Backend, map[string]string, *config.Config, *workerParts) {
	t.Helper()
	db, err := sqlite.Open(ctx, "sqlite:///"+filepath.Join(t.TempDir(), "console.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b := LocalBackend(db, store.NewHub())
	env := map[string]string{"PLAITA_REDIS_URL": "redis://127.0.0.1:1/0", "PLAITA_NODES_WORKSPACE_ROOT": t.TempDir(),
		"PLAITA_WORKER_CONCURRENCY": "2", "PLAITA_METRICS_PORT": "0"}
	for k, v := range extra {
		env[k] = v
	}
	cfg, err := config.Load(config.RoleWorker, true, config.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	w, err := buildWorker(newOnRedis(cfg, b, metrics.NewSet(), zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.queue.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	return b, env, cfg, w
}
