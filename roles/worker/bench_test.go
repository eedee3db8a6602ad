package worker

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/tracing"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
)

const benchOneNodeFlow = `{"id":"one","version":"1","start":"done","nodes":[
 {"id":"done","type":"end","params":{"output":{"ok":true}}}]}`

// BenchmarkDispatchThroughput: b.N starts of a 1-node flow are enqueued beforehand (untimed);
// then ONE Dispatcher with Concurrency 10 is started and the time until the stream and the
// pending list are empty is measured. A sample of the executions is checked to be completed.
//
//	go test -run XXX -bench DispatchThroughput -benchtime 20000x ./roles/worker/
func BenchmarkDispatchThroughput(b *testing.B) { benchDispatch(b, false) }

// BenchmarkDispatchThroughputTraced is the same workload with tracing on at ratio 1.0: every
// start sent under a span, every delivery and node run a span, batched to an exporter that
// drops them (the cost of the spans in the worker, not of a collector's network).
func BenchmarkDispatchThroughputTraced(b *testing.B) { benchDispatch(b, true) }

// discardSpans is an exporter that drops what it is given.
type discardSpans struct{ n atomic.Int64 }

func (d *discardSpans) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	d.n.Add(int64(len(spans)))
	return nil
}
func (*discardSpans) Shutdown(context.Context) error { return nil }

func benchDispatch(b *testing.B, traced bool) {
	var exported *discardSpans
	var tp *sdktrace.TracerProvider
	if traced {
		exported = &discardSpans{}
		tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exported), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		restore := tracing.Install(tp)
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()); restore() })
	}
	f := newDispatchFix(b, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "30000"})
	ctx := context.Background()
	key := keys.MustFor(f.root, keys.DefaultTenant).Flow("one", "1")
	if err := f.c.Do(ctx, f.c.B().Set().Key(key).Value(benchOneNodeFlow).Build()).Error(); err != nil {
		b.Fatal(err)
	}

	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = engine.NewExecutionID()
	}
	const producers = 32
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < len(ids); i += producers {
				env := queue.Envelope{Kind: queue.KindStart, FlowID: "one", FlowVersion: "1", ExecutionID: ids[i],
					Input: json.RawMessage(`{"n":1}`)}
				if _, err := queue.Enqueue(ctx, queue.Redis(f.c), f.q.Stream(), env); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	began := time.Now()
	p := NewDispatcher(Deps{
		Root: f.root, Queue: f.q, Store: f.st, Nodes: f.reg, Definitions: store.NewFlows(store.RedisFlows(f.c), f.root), Wakeups: f.wakeups(b),
		Log: zerolog.Nop(), Metrics: metrics.NewSet(), Settings: withIdentity(SettingsFrom(f.cfg), "inst-w1", 10),
		ReadBlock: 200 * time.Millisecond,
	})
	p.Start(ctx)
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Stop(sctx)
	})
	deadline := began.Add(10*time.Minute + time.Duration(b.N)*time.Millisecond)
	for {
		d, err := f.q.Depth(ctx)
		if err == nil && d.StreamLength == 0 && d.Pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not drained in time: %+v (%v)", d, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(began)
	b.StopTimer()

	ts, err := f.st.Tenant(keys.DefaultTenant)
	if err != nil {
		b.Fatal(err)
	}
	step := max(len(ids)/100, 1)
	for i := 0; i < len(ids); i += step {
		st, err := ts.Load(ctx, ids[i])
		if err != nil {
			b.Fatalf("execution %s: %v", ids[i], err)
		}
		if st.Status != state.Completed {
			b.Fatalf("execution %s is %s, want completed", ids[i], st.Status)
		}
	}
	if d, _ := f.q.Depth(ctx); d.DLQLength != 0 {
		b.Fatalf("%d dead letters", d.DLQLength)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "executions/s")
	if exported != nil {
		if err := tp.ForceFlush(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(exported.n.Load())/float64(b.N), "spans/execution")
	}
}
