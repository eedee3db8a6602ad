package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

type round struct {
	Round  int          `json:"round"`
	Asynq  asynqResult  `json:"asynq"`
	Plaita plaitaResult `json:"plaita"`
	Ratio  float64      `json:"ratio"` // plaita executions/s over asynq tasks/s
}

func newRound(i int, a asynqResult, p plaitaResult) round {
	return round{Round: i, Asynq: a, Plaita: p, Ratio: p.ExecutionsPerSecond / a.TasksPerSecond}
}

type summary struct {
	N                         int     `json:"n"`
	Concurrency               int     `json:"concurrency"`
	RedisVersion              string  `json:"redis_version"`
	PrivateRedis              bool    `json:"private_redis"`
	Rounds                    []round `json:"rounds"`
	MedianRatio               float64 `json:"median_ratio"`
	MedianAsynqTasksPerSecond float64 `json:"median_asynq_tasks_per_second"`
	MedianPlaitaExecsPerSec   float64 `json:"median_plaita_executions_per_second"`
	MedianPlaitaCallsPerExec  float64 `json:"median_plaita_calls_per_execution"`
	// The Redis-bound ceilings: the tasks or executions per second one Redis core allows at the
	// median Redis CPU each cost (1 s / µs per task), however little CPU the worker took; and
	// plaita's over asynq's median tasks/s — the most any worker-side work can bring the ratio to.
	MedianAsynqRedisCPUMicros  float64 `json:"median_asynq_redis_cpu_us_per_task"`
	MedianPlaitaRedisCPUMicros float64 `json:"median_plaita_redis_cpu_us_per_execution"`
	AsynqRedisBound            float64 `json:"asynq_redis_bound_tasks_per_second"`
	PlaitaRedisBound           float64 `json:"plaita_redis_bound_executions_per_second"`
	PlaitaRedisBoundRatio      float64 `json:"plaita_redis_bound_over_asynq"`
	Extras                     *extras `json:"extras,omitempty"`
}

// finish fills in the medians: with a few rounds on a shared machine, the median resists the
// one round a background job slowed down.
func (s *summary) finish() {
	var ratio, a, p, calls, aRedis, pRedis []float64
	for _, r := range s.Rounds {
		ratio = append(ratio, r.Ratio)
		a = append(a, r.Asynq.TasksPerSecond)
		p = append(p, r.Plaita.ExecutionsPerSecond)
		calls = append(calls, r.Plaita.CallsPerExecution)
		aRedis = append(aRedis, r.Asynq.RedisCPUMicros)
		pRedis = append(pRedis, r.Plaita.RedisCPUMicros)
	}
	s.MedianRatio, s.MedianAsynqTasksPerSecond, s.MedianPlaitaExecsPerSec = median(ratio), median(a), median(p)
	s.MedianPlaitaCallsPerExec = median(calls)
	s.MedianAsynqRedisCPUMicros, s.MedianPlaitaRedisCPUMicros = median(aRedis), median(pRedis)
	s.AsynqRedisBound, s.PlaitaRedisBound = redisBound(s.MedianAsynqRedisCPUMicros), redisBound(s.MedianPlaitaRedisCPUMicros)
	if s.PlaitaRedisBound > 0 && s.MedianAsynqTasksPerSecond > 0 {
		s.PlaitaRedisBoundRatio = s.PlaitaRedisBound / s.MedianAsynqTasksPerSecond
	}
}

// redisBound is the rate one Redis core allows when each unit costs it micros of CPU (0 when
// unmeasured: a plaita binary too old to report it).
func redisBound(micros float64) float64 {
	if micros <= 0 {
		return 0
	}
	return 1e6 / micros
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

func printRound(w io.Writer, r round) {
	fmt.Fprintf(w, "\nround %d\n", r.Round)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "peer\tper second\tseconds\tredis calls\tcalls/task\tcpu µs/task\tredis cpu µs/task\tp50 ms\tp99 ms")
	a, p := r.Asynq, r.Plaita
	fmt.Fprintf(tw, "asynq\t%.0f\t%.3f\t%d\t%.2f\t%.1f\t%.1f\t-\t-\n", a.TasksPerSecond, a.Seconds, a.RedisCalls, a.CallsPerTask,
		a.ProcessCPUMicros, a.RedisCPUMicros)
	fmt.Fprintf(tw, "plaita\t%.0f\t%.3f\t%d\t%.2f\t%s\t%s\t%.2f\t%.2f\n", p.ExecutionsPerSecond, p.Seconds, p.RedisCalls,
		p.CallsPerExecution, orDash(p.WorkerCPUMicros), orDash(p.RedisCPUMicros), p.P50ms, p.P99ms)
	tw.Flush()
	fmt.Fprintf(w, "plaita/asynq: %.2fx\n", r.Ratio)
}

func printSummary(w io.Writer, s summary) {
	where := "given by --redis"
	if s.PrivateRedis {
		where = "private"
	}
	fmt.Fprintf(w, "\nsummary: %d rounds, n=%d, concurrency=%d, Redis %s (%s)\n",
		len(s.Rounds), s.N, s.Concurrency, s.RedisVersion, where)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "round\tasynq tasks/s\tplaita execs/s\tplaita/asynq\tasynq calls/task\tplaita calls/exec\tasynq cpu µs (proc + redis)\tplaita cpu µs (worker + redis)\tplaita p50/p99 ms")
	for _, r := range s.Rounds {
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.2fx\t%.2f\t%.2f\t%.1f + %.1f\t%s + %s\t%.2f / %.2f\n", r.Round, r.Asynq.TasksPerSecond,
			r.Plaita.ExecutionsPerSecond, r.Ratio, r.Asynq.CallsPerTask, r.Plaita.CallsPerExecution,
			r.Asynq.ProcessCPUMicros, r.Asynq.RedisCPUMicros, orDash(r.Plaita.WorkerCPUMicros), orDash(r.Plaita.RedisCPUMicros),
			r.Plaita.P50ms, r.Plaita.P99ms)
	}
	fmt.Fprintf(tw, "median\t%.0f\t%.0f\t%.2fx\n", s.MedianAsynqTasksPerSecond, s.MedianPlaitaExecsPerSec, s.MedianRatio)
	tw.Flush()
	if s.PlaitaRedisBound > 0 {
		fmt.Fprintf(w, "Redis-bound ceilings (one Redis core at the median Redis CPU per task, whatever the worker's): asynq %.0f tasks/s (%.1f µs), plaita %.0f executions/s (%.1f µs) = %.2fx asynq's median\n",
			s.AsynqRedisBound, s.MedianAsynqRedisCPUMicros, s.PlaitaRedisBound, s.MedianPlaitaRedisCPUMicros, s.PlaitaRedisBoundRatio)
	}
	if s.Extras != nil {
		printExtras(w, *s.Extras, s.MedianPlaitaCallsPerExec)
	}
}

func printJSON(w io.Writer, s summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// orDash prints a figure an older plaita binary does not report as "-".
func orDash(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}
