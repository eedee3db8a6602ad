package worker

import (
	"context"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/engine/state"
	"plaita/store"
)

// The dispatcher outlives the context it was started with: a role starts its services with a
// bounded start-up context (30 s in roles/worker.go), and a worker must go on reading after it
// ends. A task enqueued once that context is done still runs.
func TestDispatchOutlivesItsStartContext(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "simple", "1", simpleFlow)
	p := NewDispatcher(Deps{
		Root: f.root, Queue: f.q, Store: f.st, Nodes: f.reg, Definitions: store.NewFlows(store.RedisFlows(f.c), f.root), Wakeups: f.wakeups(t),
		Log: zerolog.Nop(), Metrics: metrics.NewSet(), Settings: withIdentity(SettingsFrom(f.cfg), "inst-w1", 2),
		ReadBlock: 200 * time.Millisecond, ReclaimInterval: 100 * time.Millisecond, CancelPoll: 50 * time.Millisecond,
	})
	startCtx, cancel := context.WithCancel(context.Background())
	if err := p.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Stop(ctx)
	})
	cancel()
	env := f.startEnv("simple")
	f.enqueue(t, env)
	f.waitState(t, env.ExecutionID, statusIs(state.Completed))
}
