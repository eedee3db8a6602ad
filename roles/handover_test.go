package roles

import (
	"context"
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
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/redistest"
)

// A console ran local mode — a completed execution, one at a delay, one at an approval, one in
// a correlated event wait, a start no worker took yet, a dead letter and a schedule — and starts
// with Redis: the hand-over puts every one of them in Redis (the states as they were, the
// suspended ones' wake-ups registered there, the task, the dead letter, the schedule) and
// leaves nothing in the database, nor what an earlier version's local mode left in
// local_executions; a second hand-over finds nothing; and the cluster's roles run
// the unfinished ones on: the queued start completes, the approval and the event wake theirs,
// the delay is on Redis's delay queue.
func TestHandOverPutsLocalModesExecutionsInRedis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	db, err := sqlite.Open(ctx, "sqlite:///"+filepath.Join(t.TempDir(), "console.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg, err := config.Load(config.RoleConsole, false, config.WithEnv(map[string]string{
		"PLAITA_CONSOLE_REDIS_URL": srv.URL(), "PLAITA_REDIS_URL": srv.URL(), "PLAITA_CODE_BACKEND": "subprocess",
		"PLAITA_NODES_WORKSPACE_ROOT": t.TempDir(), "PLAITA_MAX_DELIVERIES": "1", "PLAITA_CLAIM_MIN_IDLE_MS": "100"}))
	if err != nil {
		t.Fatal(err)
	}

	// Local mode: the roles in process on the database.
	m, err := NewLocalMode(cfg, db, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var g service.Group
	if err := g.Start(ctx, m.Services...); err != nil {
		t.Fatal(err)
	}
	lp := m.Plane
	hashes := map[string]control.Published{}
	for _, def := range []string{
		`{"id":"hello","version":"1","start":"done","nodes":[{"id":"done","type":"end","params":{"output":"hi"}}]}`,
		`{"id":"nap","version":"1","start":"nap","nodes":[{"id":"nap","type":"delay","params":{"seconds":3600},"next":"done"},
			{"id":"done","type":"end","params":{"output":"rested"}}]}`,
		`{"id":"ask","version":"1","start":"ask","nodes":[{"id":"ask","type":"approval","params":{"message":"ok?"},"next":"done"},
			{"id":"done","type":"end","params":{"output":"{{ NODE.ask.comment }}"}}]}`,
		`{"id":"pay","version":"1","start":"wait","nodes":[
			{"id":"wait","type":"wait_event","params":{"event_type":"payment","match":"EVENT.order_id == INPUT.order_id","timeout":3600},"next":"done"},
			{"id":"done","type":"end","params":{"output":{"paid":"{{ EVENT.amount }}"}}}]}`,
	} {
		pub, err := lp.PublishFlow(ctx, "", []byte(def), "")
		if err != nil {
			t.Fatal(err)
		}
		hashes[pub.Flow.ID] = pub
	}
	start := func(p *control.Plane, flow, input string) string {
		t.Helper()
		s, err := p.Start(ctx, control.StartRequest{FlowID: flow, Input: []byte(input)})
		if err != nil {
			t.Fatal(err)
		}
		return s.ExecutionID
	}
	waitFor := func(p *control.Plane, id string, want state.Status) *state.Execution {
		t.Helper()
		for {
			shown, err := p.Show(ctx, "", id)
			if err == nil && shown.Execution != nil && shown.Status == want {
				return shown.Execution
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s never %s: %+v %v", id, want, shown, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	done := start(lp, "hello", `{}`)
	nap := start(lp, "nap", `{}`)
	ask := start(lp, "ask", `{}`)
	pay := start(lp, "pay", `{"order_id":"A1"}`)
	waitFor(lp, done, state.Completed)
	for _, id := range []string{nap, ask, pay} {
		waitFor(lp, id, state.Suspended)
	}
	wcfg := cfg.AsWith(config.RoleWorker, map[string]string{"PLAITA_QUEUE_NAME": config.ConsoleTaskQueue.In(cfg)})
	poison := engine.NewExecutionID()
	producer := queue.NewProducer(m.Backend.Queue, config.ConsoleTaskQueue.In(cfg), settings.Generations(wcfg), 1<<20, nil)
	if _, err := producer.Enqueue(ctx, queue.Envelope{Kind: queue.KindStart, FlowID: "hello", FlowVersion: "9", ExecutionID: poison, Input: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for {
		letters, err := lp.DeadLetters(ctx, "", true, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(letters) == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the poison task was never dead-lettered")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := lp.CreateSchedule(ctx, control.NewSchedule{ID: "nightly", Cron: "0 3 * * *", FlowID: "hello", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	stopCtx, cancelStop := context.WithTimeout(ctx, 10*time.Second)
	m.Drain(stopCtx)
	g.Stop(stopCtx)
	cancelStop()
	queued := start(lp, "hello", `{}`) // enqueued on the embedded stream; no worker runs now

	// What an earlier version's local mode left in local_executions: one waiting for an
	// approval, one it was running when it stopped (the hand-over's orphan reconcile suspends
	// it for an operator).
	at := time.Now().UTC().Add(-time.Minute)
	earlier := func(id string, status state.Status, suspend *state.Suspend) {
		t.Helper()
		if err := db.Executions().Save(ctx, &state.Execution{ExecutionID: id, TenantID: "default", FlowID: "ask", FlowVersion: "1",
			FlowHash: hashes["ask"].Flow.Hash, FlowHashAlgo: hashes["ask"].Flow.HashAlgo, Status: status, CurrentNode: "ask",
			Context: map[string]any{}, StartTime: at, LastUpdate: at, Suspend: suspend}); err != nil {
			t.Fatal(err)
		}
	}
	earlier("ex_earlier_ask", state.Suspended, &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: at})
	earlier("ex_earlier_running", state.Running, nil)

	// The console starts with Redis: the hand-over.
	local, cluster := LocalBackend(db, store.NewHub()), RedisBackend(c)
	rep, err := handOverLocal(ctx, cfg, db, local, cluster)
	if err != nil {
		t.Fatal(err)
	}
	want := HandOverReport{Executions: 6, WakeUps: 4, Tasks: 1, DeadLetters: 1, Schedules: 1, Flows: 4}
	if rep != want {
		t.Fatalf("the hand-over: %+v, want %+v", rep, want)
	}
	if again, err := handOverLocal(ctx, cfg, db, local, cluster); err != nil || !again.Empty() {
		t.Fatalf("a second hand-over: %+v %v", again, err)
	}
	lts, err := local.Storage(settings.Store(cfg)).Tenant("")
	if err != nil {
		t.Fatal(err)
	}
	if page, err := lts.List(ctx, store.ListRequest{}); err != nil || len(page.Items) != 0 {
		t.Fatalf("the database still lists executions: %+v %v", page, err)
	}

	// The cluster runs them on: a worker and a filter on Redis.
	rp, err := NewPlane(cfg, cluster, zerolog.Nop(), PlaneOptions{Stream: config.ConsoleTaskQueue.In(cfg), NodeConfig: wcfg})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitFor(rp, done, state.Completed); st.Output != "hi" {
		t.Fatalf("the completed execution in Redis: %+v", st)
	}
	w, err := buildWorker(newOnRedis(wcfg, cluster, metrics.NewSet(), zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.queue.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	fcfg := cfg.AsWith(config.RoleFilter, map[string]string{"PLAITA_QUEUE_NAME": config.ConsoleTaskQueue.In(cfg)})
	f := buildFilter(newOnRedis(fcfg, cluster, metrics.NewSet(), zerolog.Nop()))
	var rg service.Group
	if err := rg.Start(ctx, service.Named{Name: "dispatcher", Service: w.dispatcher}, service.Named{Name: "listener", Service: f.listener},
		service.Named{Name: "reconciler", Service: f.reconciler}); err != nil {
		t.Fatal(err)
	}
	defer rg.Stop(context.Background())
	waitFor(rp, queued, state.Completed)
	if _, err := rp.AnswerApproval(ctx, control.Answer{ID: ask, Approved: true, Comment: "fine", By: "kim"}); err != nil {
		t.Fatal(err)
	}
	if st := waitFor(rp, ask, state.Completed); st.Output != "fine" {
		t.Fatalf("the approval's execution: %+v", st.Output)
	}
	if _, err := rp.PublishEvent(ctx, store.Event{ID: store.NewEventID(), Type: "payment", Data: []byte(`{"order_id":"A1","amount":5}`)}); err != nil {
		t.Fatal(err)
	}
	if st := waitFor(rp, pay, state.Completed); st.Output.(map[string]any)["paid"] != 5.0 {
		t.Fatalf("the event wait's execution: %+v", st.Output)
	}
	shown, err := rp.Show(ctx, "", nap)
	if err != nil || shown.WakeUp == nil || shown.WakeUp.Due == nil || len(shown.WakeUp.Problems) != 0 {
		t.Fatalf("the delay's wake-up in Redis: %+v %v", shown.WakeUp, err)
	}
	if _, err := rp.AnswerApproval(ctx, control.Answer{ID: "ex_earlier_ask", Approved: true, Comment: "at last", By: "kim"}); err != nil {
		t.Fatal(err)
	}
	if st := waitFor(rp, "ex_earlier_ask", state.Completed); st.Output != "at last" {
		t.Fatalf("the earlier version's approval: %+v", st.Output)
	}
	if st := waitFor(rp, "ex_earlier_running", state.Suspended); st.Suspend == nil || st.Suspend.Kind != sqlite.SuspendOrphan {
		t.Fatalf("the earlier version's orphan: %+v", st.Suspend)
	}
	if n, err := db.Executions().Tenants(ctx); err != nil || len(n) != 0 {
		t.Fatalf("local_executions still has tenants %v (%v)", n, err)
	}
	if letters, err := rp.DeadLetters(ctx, "", true, 10); err != nil || len(letters) != 1 || letters[0].ExecutionID != poison {
		t.Fatalf("the dead letters in Redis: %+v %v", letters, err)
	}
	if recs, _, err := rp.Schedules(ctx, ""); err != nil || len(recs) != 1 || recs[0].ID != "nightly" {
		t.Fatalf("the schedules in Redis: %+v %v", recs, err)
	}
}
