package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/roles"
	"plaita/roles/filter"
	"plaita/roles/settings"
	"plaita/roles/worker"
	"plaita/store"
	"plaita/store/keys"
)

// The suspend scenario: events and the executions waiting for them (docs/events.md, "Cost").
//
// Set-up (not timed): W executions wait at a wait_event — execution i on event type
// bench.suspend.(i mod K) with match EVENT.n == INPUT.n and input {"n": i}, a correlated
// wait with a value of its own, as real waits are (the payment of one order) — and N more on
// bench.suspend.rt for the round trip. They are seeded straight into the store (seedWaits):
// the engine runs each to its suspension in memory, and the state is saved and registered as
// a worker saves and registers it (store, roles/worker.Wakeups), so that 100,000 waits take
// seconds instead of 100,000 runs through a worker.
//
// Then three timed parts:
//
//  1. The round trip: an in-process filter (its listener, C handlers) and worker (C
//     consumers); N events of bench.suspend.rt published with C producers, each turned into a
//     resumed, completed execution. From the first publish until the worker acked all N.
//  2. The filter alone (the worker stopped): N events that match waits 0…N−1 of the W, then N
//     events of values no wait has. The Redis calls of each part, less what the same number of
//     publishes cost with no filter listening (measured first), over N: the filter's calls per
//     event; its CPU likewise (this process's, less the publishes').
//  3. Not timed: the worker runs the N resumes the filter enqueued, and their executions are
//     checked to have completed.
type suspendRun struct {
	b             *bench
	n, waits, k   int
	conc          int
	flows         []*engine.Flow // bench-suspend-<k>
	rt            *engine.Flow   // bench-suspend-rt
	ts            *store.TenantStore
	wakeups       *worker.Wakeups
	rtIDs, waitID []string
}

func suspendFlow(name, eventType string) []byte {
	return []byte(fmt.Sprintf(`{"id":"bench-suspend-%s","version":"1","start":"w","nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"%s","match":"EVENT.n == INPUT.n"},"next":"e"},
		{"id":"e","type":"end","params":{"output":"ok"}}]}`, name, eventType))
}

func suspendType(k int) string { return "bench.suspend." + strconv.Itoa(k) }

const roundTripType = "bench.suspend.rt"

func (b *bench) suspend(ctx context.Context, n, waits, types, conc int) (Result, error) {
	if waits == 0 {
		waits = n
	}
	if types == 0 {
		types = 1
	}
	switch {
	case waits < n:
		return Result{}, usageError(fmt.Sprintf("--waits %d: the %d events each wake a wait of their own: give at least --n waits", waits, n))
	case types < 1 || types > waits:
		return Result{}, usageError(fmt.Sprintf("--types %d: between 1 and --waits (%d)", types, waits))
	}
	r := &suspendRun{b: b, n: n, waits: waits, k: types, conc: conc}
	if err := r.setUp(ctx); err != nil {
		return Result{}, fmt.Errorf("set up: %w", err)
	}
	res := Result{Scenario: "suspend", N: n, Waits: waits, EventTypes: types, WaitsPerEventType: (waits + types - 1) / types}
	if err := r.roundTrip(ctx, &res); err != nil {
		return Result{}, fmt.Errorf("round trip: %w", err)
	}
	if err := r.filterAlone(ctx, &res); err != nil {
		return Result{}, fmt.Errorf("filter: %w", err)
	}
	if err := r.finish(ctx); err != nil {
		return Result{}, fmt.Errorf("the filter's resumes: %w", err)
	}
	return res, nil
}

// setUp publishes the flows and seeds the waits.
func (r *suspendRun) setUp(ctx context.Context) error {
	b := r.b
	flows := store.NewFlows(store.RedisFlows(b.c), keys.DefaultRoot)
	publish := func(def []byte) (*engine.Flow, error) {
		f, err := engine.Parse(def, engine.NewRegistry(), settings.Engine(b.cfg).Expr)
		if err != nil {
			return nil, err
		}
		_, err = flows.Publish(ctx, "", f.ID, f.Version, def, time.Now(), func(stored []byte) (bool, error) {
			h, err := engine.FlowHash(stored)
			return h == f.Hash, err
		})
		return f, err
	}
	for k := range r.k {
		f, err := publish(suspendFlow(strconv.Itoa(k), suspendType(k)))
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		r.flows = append(r.flows, f)
	}
	var err error
	if r.rt, err = publish(suspendFlow("rt", roundTripType)); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	st := store.NewRedis(b.c, settings.Store(b.cfg), keys.DefaultRoot)
	if r.ts, err = st.Tenant(""); err != nil {
		return err
	}
	delay, err := queue.NewDelay(queue.RedisDelays(b.c), settings.DelayQueue(b.cfg))
	if err != nil {
		return err
	}
	r.wakeups = worker.NewWakeups(st, delay, settings.WorkerWakeups(b.cfg))
	if r.waitID, err = r.seedWaits(ctx, r.waits, func(i int) *engine.Flow { return r.flows[i%r.k] }); err != nil {
		return err
	}
	r.rtIDs, err = r.seedWaits(ctx, r.n, func(int) *engine.Flow { return r.rt })
	return err
}

// seedWaits writes n suspended executions, execution i of flowOf(i) with input {"n": i}: the
// engine runs each to its suspension in memory (the state a worker would save, correlation
// values included), then the state is saved and its wake-up registered as a worker does
// (roles/worker.Wakeups.Register).
func (r *suspendRun) seedWaits(ctx context.Context, n int, flowOf func(int) *engine.Flow) ([]string, error) {
	ids := make([]string, n)
	const writers = 32
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			set := settings.Engine(r.b.cfg)
			for i := w; i < n; i += writers {
				ex := engine.NewExecutor(store.NewMemory()) // one state each: nothing is kept
				ex.Settings = func() engine.Settings { return set }
				f := flowOf(i)
				ids[i] = engine.NewExecutionID()
				st, err := ex.Start(ctx, f, engine.StartRequest{ExecutionID: ids[i], TenantID: keys.DefaultTenant, FlowVersion: f.Version,
					Input: map[string]any{"n": float64(i)}})
				if err == nil && st.Status != state.Suspended {
					err = fmt.Errorf("execution %d is %s, not suspended", i, st.Status)
				}
				if err == nil {
					err = r.ts.Save(ctx, st)
				}
				if err == nil {
					err = r.wakeups.Register(ctx, st)
				}
				if err != nil {
					errs[w] = fmt.Errorf("seed wait %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}

// roundTrip is part 1: publish → resumed, completed, through an in-process filter and worker.
func (r *suspendRun) roundTrip(ctx context.Context, res *Result) error {
	b, n := r.b, r.n
	w, err := roles.NewInProcessWorker(b.cfg, b.c, metrics.NewSet(), b.log)
	if err != nil {
		return err
	}
	if err := w.Queue.EnsureGroup(ctx); err != nil {
		return err
	}
	var services service.Group
	defer services.Stop(context.Background())
	if err := services.Start(ctx, w.Services...); err != nil {
		return err
	}
	d, _, err := r.listen(ctx, &services)
	if err != nil {
		return err
	}
	runtime.GC()
	win, err := b.target.open(ctx)
	if err != nil {
		return err
	}
	published, err := r.publish(ctx, d.Events, n, func(i int) (string, int) { return roundTripType, i })
	if err != nil {
		return err
	}
	if err := waitAcked(ctx, w, n); err != nil {
		return err
	}
	m, err := win.close(ctx)
	if err != nil {
		return err
	}
	services.Stop(context.Background())
	p50, p99, err := b.latencies(ctx, r.rtIDs, published)
	if err != nil {
		return err
	}
	res.Seconds, res.RoundTripsPerSecond, res.P50Millis, res.P99Millis = m.elapsed.Seconds(), m.perSecond(n), p50, p99
	res.RedisCalls, res.CallsPerNode, res.CallsPerRoundTrip = m.calls, m.perNode, float64(m.calls)/float64(n)
	res.WorkerCPUMicros, res.RedisCPUMicros = m.cpuMicros(n)
	return nil
}

// listen starts a filter's listener (C handlers, a queue no notification overflows: every
// event goes through it) in services and waits until it is subscribed. The matcher's counters
// are on the returned set.
func (r *suspendRun) listen(ctx context.Context, services *service.Group) (filter.Deps, *metrics.Set, error) {
	fs := filter.SettingsFrom(r.b.cfg)
	fs.Handlers, fs.Queue = r.conc, 3*r.n+1
	set := metrics.NewSet()
	d := roles.FilterDeps(r.b.cfg, roles.RedisBackend(r.b.c), set, r.b.log)
	l := filter.NewListener(d, fs, filter.NewMatcher(d, fs))
	if err := services.Start(ctx, service.Named{Name: "listener", Service: l}); err != nil {
		return d, nil, err
	}
	for l.Subscriptions() < 1 {
		if ctx.Err() != nil {
			return d, nil, ctx.Err()
		}
		time.Sleep(time.Millisecond)
	}
	return d, set, nil
}

// filterAlone is part 2: the filter's calls and CPU per event, matching and unmatched.
func (r *suspendRun) filterAlone(ctx context.Context, res *Result) error {
	b, n := r.b, r.n
	bus := store.NewEvents(store.RedisEvents(b.c), settings.Events(b.cfg), keys.DefaultRoot)
	// What n publishes cost when no filter listens (nobody waits for the type either).
	runtime.GC()
	win, err := b.target.open(ctx)
	if err != nil {
		return err
	}
	if _, err := r.publish(ctx, bus, n, func(i int) (string, int) { return "bench.suspend.none", i }); err != nil {
		return err
	}
	pub, err := win.close(ctx)
	if err != nil {
		return err
	}
	var services service.Group
	defer services.Stop(context.Background())
	d, set, err := r.listen(ctx, &services)
	if err != nil {
		return err
	}
	part := func(value func(int) int, done func() bool) (measured, error) {
		runtime.GC()
		win, err := b.target.open(ctx)
		if err != nil {
			return measured{}, err
		}
		if _, err := r.publish(ctx, d.Events, n, func(i int) (string, int) { return suspendType(i % r.k), value(i) }); err != nil {
			return measured{}, err
		}
		for !done() {
			if ctx.Err() != nil {
				return measured{}, ctx.Err()
			}
			time.Sleep(time.Millisecond)
		}
		return win.close(ctx)
	}
	counter := func(name string) uint64 { return set.GetOrCreateCounter(name).Get() }
	// N events, event i waking wait i.
	matched, err := part(func(i int) int { return i }, func() bool { return counter(`plaita_filter_wakeups_total`) >= uint64(n) })
	if err != nil {
		return err
	}
	// N events of values no wait has: each handled, none woken.
	unmatched, err := part(func(i int) int { return r.waits + i }, func() bool { return counter(`plaita_filter_events_total`) >= uint64(2*n) })
	if err != nil {
		return err
	}
	if got := counter(`plaita_filter_wakeups_total`); got != uint64(n) {
		return fmt.Errorf("the filter enqueued %d resumes for %d matching events", got, n)
	}
	perEvent := func(m measured) (calls, cpu float64) {
		calls = float64(m.calls-pub.calls) / float64(n)
		cpu = float64((m.cpu - pub.cpu).Nanoseconds()) / 1e3 / float64(n)
		return calls, cpu
	}
	res.PublishCallsPerEvent = float64(pub.calls) / float64(n)
	res.FilterCallsPerEvent, res.FilterCPUMicrosPerEvent = perEvent(matched)
	res.FilterCallsPerUnmatchedEvent, res.FilterCPUMicrosPerUnmatchedEvent = perEvent(unmatched)
	return nil
}

// finish is part 3: a worker runs the resumes the filter enqueued in part 2, and their
// executions completed.
func (r *suspendRun) finish(ctx context.Context) error {
	w, err := roles.NewInProcessWorker(r.b.cfg, r.b.c, metrics.NewSet(), r.b.log)
	if err != nil {
		return err
	}
	var services service.Group
	defer services.Stop(context.Background())
	if err := services.Start(ctx, w.Services...); err != nil {
		return err
	}
	if err := waitAcked(ctx, w, r.n); err != nil {
		return err
	}
	for _, id := range r.waitID[:r.n] {
		st, err := r.ts.Peek(ctx, id)
		if err != nil {
			return err
		}
		if st.Status != state.Completed {
			return fmt.Errorf("execution %s is %s after its event", id, st.Status)
		}
	}
	return nil
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

// publish publishes n events with conc producers, event i of the type and value of(i) (data
// {"n": value}), and returns when each was published.
func (r *suspendRun) publish(ctx context.Context, bus *store.Events, n int, of func(int) (string, int)) ([]time.Time, error) {
	at := make([]time.Time, n)
	var wg sync.WaitGroup
	errs := make([]error, r.conc)
	for p := range r.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += r.conc {
				typ, v := of(i)
				at[i] = time.Now()
				ev := store.Event{Type: typ, Data: json.RawMessage(`{"n":` + strconv.Itoa(v) + `}`)}
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
