package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
)

type asynqResult struct {
	Seconds        float64 `json:"seconds"`
	TasksPerSecond float64 `json:"tasks_per_second"`
	RedisCalls     int64   `json:"redis_calls"`
	CallsPerTask   float64 `json:"calls_per_task"`
	// CPU per task over the timed window: this process (asynq's server and its Redis client)
	// and the redis-server (INFO cpu; only asynq runs against it meanwhile).
	ProcessCPUMicros float64 `json:"process_cpu_us_per_task"`
	RedisCPUMicros   float64 `json:"redis_cpu_us_per_task"`
}

// runAsynq is asynq's BenchmarkEndToEndSimple: enqueue N small tasks into an empty db, then
// time a server with a no-op handler from Start until the handler has seen all N.
func runAsynq(ctx context.Context, t *target, o options) (asynqResult, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := t.resetAsynq(ctx); err != nil {
		return asynqResult{}, err
	}
	conn := asynq.RedisClientOpt{
		Network: t.asynqOpts.Network, Addr: t.asynqOpts.Addr, Username: t.asynqOpts.Username,
		Password: t.asynqOpts.Password, DB: t.asynqOpts.DB, TLSConfig: t.asynqOpts.TLSConfig,
	}
	if err := enqueue(ctx, conn, o.n); err != nil {
		return asynqResult{}, err
	}
	before, err := t.commandCalls(ctx)
	if err != nil {
		return asynqResult{}, err
	}

	var handled atomic.Int64
	done := make(chan struct{})
	handler := asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		if handled.Add(1) == int64(o.n) {
			close(done)
		}
		return nil
	})
	srv := asynq.NewServer(conn, asynq.Config{Concurrency: o.concurrency, LogLevel: asynq.ErrorLevel})
	redis0, err := t.redisCPU(ctx)
	if err != nil {
		return asynqResult{}, err
	}
	cpu0 := processCPU()
	start := time.Now()
	if err := srv.Start(handler); err != nil {
		return asynqResult{}, err
	}
	defer srv.Shutdown()
	select {
	case <-done:
	case <-ctx.Done():
		return asynqResult{}, fmt.Errorf("%d of %d tasks handled: %w", handled.Load(), o.n, ctx.Err())
	}
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	// Read right away: the server's heartbeats after the last task are not the tasks' cost.
	after, err := t.commandCalls(ctx)
	if err != nil {
		return asynqResult{}, err
	}
	redis1, err := t.redisCPU(ctx)
	if err != nil {
		return asynqResult{}, err
	}
	calls := after - before
	return asynqResult{
		Seconds:        elapsed.Seconds(),
		TasksPerSecond: float64(o.n) / elapsed.Seconds(),
		RedisCalls:     calls,
		CallsPerTask:   float64(calls) / float64(o.n),

		ProcessCPUMicros: float64(cpu.Microseconds()) / float64(o.n),
		RedisCPUMicros:   (redis1 - redis0).Seconds() * 1e6 / float64(o.n),
	}, nil
}

// enqueue adds n tasks like asynq's benchmark does (type "task<i>", payload {"data":<i>}). It
// is not timed, so it uses several clients at once just to get the set-up over with.
func enqueue(ctx context.Context, conn asynq.RedisClientOpt, n int) error {
	const workers = 16
	var next atomic.Int64
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			client := asynq.NewClient(conn)
			defer client.Close()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				task := asynq.NewTask(fmt.Sprintf("task%d", i), fmt.Appendf(nil, `{"data":%d}`, i))
				if _, err := client.EnqueueContext(ctx, task); err != nil {
					errs[w] = fmt.Errorf("enqueue: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// processCPU is the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
