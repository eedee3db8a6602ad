package queue

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/test/redistest"
)

// benchQueue is a queue on a private root of the shared test Redis.
func benchQueue(b *testing.B, extra map[string]string) *Queue {
	b.Helper()
	c := redistest.Client(b)
	root := redistest.Root(b, c)
	env := map[string]string{"PLAITA_QUEUE_NAME": root + ":flow:queue", "PLAITA_CONSUMER_NAME": "bench"}
	maps.Copy(env, extra)
	cfg, err := config.Load(config.RoleWorker, true, config.WithEnv(env))
	if err != nil {
		b.Fatal(err)
	}
	q, err := New(Redis(c), fromConfig(cfg), metrics.NewSet(), zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := q.EnsureGroup(ctx); err != nil {
		b.Fatal(err)
	}
	return q
}

func benchCtx(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	return ctx
}

func reportRate(b *testing.B, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}

// BenchmarkEnqueue: one producer, one XADD round trip per task.
func BenchmarkEnqueue(b *testing.B) {
	q := benchQueue(b, nil)
	ctx := benchCtx(b)
	e := startEnv("bench")
	b.ResetTimer()
	for range b.N {
		if _, err := Enqueue(ctx, q.d, q.Stream(), e); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, "tasks/s")
}

// BenchmarkEnqueueParallel: many producers; rueidis pipelines their XADDs.
func BenchmarkEnqueueParallel(b *testing.B) {
	q := benchQueue(b, nil)
	ctx := benchCtx(b)
	e := startEnv("bench")
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := Enqueue(ctx, q.d, q.Stream(), e); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b, "tasks/s")
}

// readAck enqueues b.N tasks, then reads them in batches of 100, gates each delivery and
// hands the batch to ack.
func readAck(b *testing.B, ack func(ctx context.Context, q *Queue, ds []Delivery)) {
	q := benchQueue(b, nil)
	ctx := benchCtx(b)
	e := startEnv("bench")
	for range b.N {
		if _, err := Enqueue(ctx, q.d, q.Stream(), e); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for done := 0; done < b.N; {
		ds, err := q.Read(ctx, "bench", 100, 0)
		if err != nil {
			b.Fatal(err)
		}
		if len(ds) == 0 {
			b.Fatalf("read nothing after %d of %d", done, b.N)
		}
		for _, d := range ds {
			if v := q.Gate(d); v != VerdictRun {
				b.Fatalf("gate %s", v)
			}
		}
		ack(ctx, q, ds)
		done += len(ds)
	}
	reportRate(b, "tasks/s")
}

// BenchmarkReadAck: one consumer acks (XACK + XDEL pipelined) one delivery after the other —
// the worker's per-task queue overhead without the execution.
func BenchmarkReadAck(b *testing.B) {
	readAck(b, func(ctx context.Context, q *Queue, ds []Delivery) {
		for _, d := range ds {
			if err := q.Ack(ctx, d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReadAckParallel: the acks of a batch are issued concurrently (a worker with
// concurrency > 1), so rueidis pipelines them.
func BenchmarkReadAckParallel(b *testing.B) {
	readAck(b, func(ctx context.Context, q *Queue, ds []Delivery) {
		errs := make(chan error, len(ds))
		for _, d := range ds {
			go func() { errs <- q.Ack(ctx, d) }()
		}
		for range ds {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchEnvelope is a start as this build's producers write it.
func benchEnvelope() Envelope {
	return Envelope{SchemaVersion: SchemaVersion, Kind: KindStart, FlowID: "bench-1", FlowVersion: "1", ExecutionID: "ex_e014ee169c0ed7437921feae",
		Input: json.RawMessage(`{"order":"A1","amount":12.5}`), CreatedAt: time.Now(), ConfigFamily: "cf1", ConfigGeneration: "0123456789abcdef",
		BudgetGeneration: "fedcba9876543210", ConfigEffectiveAt: time.Now()}
}

// BenchmarkEncode is one task's payload as Enqueue writes it (stamped, validated, encoded).
func BenchmarkEncode(b *testing.B) {
	env, now := benchEnvelope(), time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := env.encode(now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode is one delivery's envelope decode: a start as this build writes it.
func BenchmarkDecode(b *testing.B) {
	env := benchEnvelope()
	raw, err := env.encode(time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Decode("s", "1-1", raw); err != nil {
			b.Fatal(err)
		}
	}
}
