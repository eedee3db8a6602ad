package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"plaita/engine"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/roles"
	"plaita/roles/filter"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// The suspend scenario: the event round trip. N executions wait at a wait_event (set up first,
// not timed); then N events are published with C producers, and an in-process filter (its
// listener, with C handlers) and an in-process worker (C consumers) turn each into a resumed,
// completed execution. Timed: from the first publish until the worker acked all N resumes.
// The executions wait on suspendTypes event types (execution i on type i mod suspendTypes,
// with a match on its own number), so an event is checked against N/suspendTypes waits: the
// filter reads the state of every wait of the event's type.

// suspendTypes is the number of event types (one flow each) the waits are spread over.
const suspendTypes = 500

func suspendFlow(k int) []byte {
	return []byte(fmt.Sprintf(`{"id":"bench-suspend-%d","version":"1","start":"w","nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"bench.suspend.%d","match":"EVENT.n == INPUT.n"},"next":"e"},
		{"id":"e","type":"end","params":{"output":"ok"}}]}`, k, k))
}

func (b *bench) suspend(ctx context.Context, n, conc int) (Result, error) {
	types := min(n, suspendTypes)
	flows := store.NewFlows(b.c, keys.DefaultRoot)
	for k := range types {
		def := suspendFlow(k)
		f, err := engine.Parse(def, engine.NewRegistry(), settings.Engine(b.cfg).Expr)
		if err != nil {
			return Result{}, err
		}
		if _, err := flows.Publish(ctx, "", f.ID, f.Version, def, time.Now(), func(stored []byte) (bool, error) {
			h, err := engine.FlowHash(stored)
			return h == f.Hash, err
		}); err != nil {
			return Result{}, fmt.Errorf("publish: %w", err)
		}
	}
	set := metrics.NewSet()
	w, err := roles.NewInProcessWorker(b.cfg, b.c, set, b.log)
	if err != nil {
		return Result{}, err
	}
	if err := w.Queue.EnsureGroup(ctx); err != nil {
		return Result{}, err
	}
	// Set-up: N suspended executions.
	ids, err := b.enqueueWaits(ctx, n, types)
	if err != nil {
		return Result{}, err
	}
	var services service.Group
	defer services.Stop(context.Background())
	if err := services.Start(ctx, w.Services...); err != nil {
		return Result{}, err
	}
	if err := waitAcked(ctx, w, n); err != nil {
		return Result{}, err
	}
	// The filter: its listener only (the reconciler would find nothing to do here).
	fs := filter.SettingsFrom(b.cfg)
	fs.Handlers, fs.Queue = conc, n+1 // no notification dropped: every wake-up goes through the listener
	d := roles.FilterDeps(b.cfg, b.c, metrics.NewSet(), b.log)
	l := filter.NewListener(d, fs, filter.NewMatcher(d, fs))
	if err := services.Start(ctx, service.Named{Name: "listener", Service: l}); err != nil {
		return Result{}, err
	}
	for l.Subscriptions() < 1 {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		time.Sleep(time.Millisecond)
	}
	win, err := b.target.open(ctx)
	if err != nil {
		return Result{}, err
	}
	published, err := b.publishEvents(ctx, d.Events, n, types, conc)
	if err != nil {
		return Result{}, err
	}
	if err := waitAcked(ctx, w, 2*n); err != nil {
		return Result{}, err
	}
	m, err := win.close(ctx)
	if err != nil {
		return Result{}, err
	}
	p50, p99, err := b.latencies(ctx, ids, published)
	if err != nil {
		return Result{}, err
	}
	r := Result{Scenario: "suspend", N: n, Seconds: m.elapsed.Seconds(), RoundTripsPerSecond: m.perSecond(n),
		WaitsPerEventType: (n + types - 1) / types, P50Millis: p50, P99Millis: p99, RedisCalls: m.calls, CallsPerNode: m.perNode,
		CallsPerRoundTrip: float64(m.calls) / float64(n)}
	r.WorkerCPUMicros, r.RedisCPUMicros = m.cpuMicros(n)
	return r, nil
}

// waitAcked waits until the worker acknowledged n deliveries.
func waitAcked(ctx context.Context, w *roles.InProcessWorker, n int) error {
	for w.Dispatcher.Acked() < uint64(n) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// enqueueWaits enqueues the N starts: execution i runs bench-suspend-(i mod types) with
// input {"n": i}.
func (b *bench) enqueueWaits(ctx context.Context, n, types int) ([]string, error) {
	ids := make([]string, n)
	const producers = 16
	var wg sync.WaitGroup
	errs := make([]error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += producers {
				ids[i] = engine.NewExecutionID()
				env := queue.Envelope{Kind: queue.KindStart, FlowID: "bench-suspend-" + strconv.Itoa(i%types), FlowVersion: "1",
					ExecutionID: ids[i], Input: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}
				if _, err := b.producer.Enqueue(ctx, env); err != nil {
					errs[p] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}

// publishEvents publishes event i (type of execution i, data {"n": i}) with conc producers and
// returns when each was published.
func (b *bench) publishEvents(ctx context.Context, bus *store.Events, n, types, conc int) ([]time.Time, error) {
	at := make([]time.Time, n)
	var wg sync.WaitGroup
	errs := make([]error, conc)
	for p := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += conc {
				at[i] = time.Now()
				ev := store.Event{Type: "bench.suspend." + strconv.Itoa(i%types), Data: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}
				if _, _, err := bus.Publish(ctx, ev); err != nil {
					errs[p] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return at, errors.Join(errs...)
}
