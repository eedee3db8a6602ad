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
	Extras                    *extras `json:"extras,omitempty"`
}

// finish fills in the medians: with a few rounds on a shared machine, the median resists the
// one round a background job slowed down.
func (s *summary) finish() {
	var ratio, a, p, calls []float64
	for _, r := range s.Rounds {
		ratio = append(ratio, r.Ratio)
		a = append(a, r.Asynq.TasksPerSecond)
		p = append(p, r.Plaita.ExecutionsPerSecond)
		calls = append(calls, r.Plaita.CallsPerExecution)
	}
	s.MedianRatio, s.MedianAsynqTasksPerSecond, s.MedianPlaitaExecsPerSec = median(ratio), median(a), median(p)
	s.MedianPlaitaCallsPerExec = median(calls)
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
