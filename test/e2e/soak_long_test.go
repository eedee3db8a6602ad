//go:build e2e && soak

package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// TestSoak is the soak suite (`just soak`, or `go test -tags e2e,soak -run TestSoak ./test/e2e`):
// the chaos suite's flows and clients (HTTP steps, a branch that fails, approvals and cancels,
// events the filter delivers, event timeouts and delays the delay role wakes, a retried error,
// node retries, a flow timeout) at a steady rate for minutes, against real worker, filter and
// delay processes, with nothing failing. It checks what only time shows:
//   - every execution still ends as it should, each step's side effect once, the queue drained
//     and nothing dead-lettered;
//   - the roles keep up with the offered load to the end: the task stream's backlog (entries
//     not yet settled: an acked entry is deleted) does not grow;
//   - each process's goroutines, Go heap and resident memory stay flat: their floor late in
//     the run is the floor early in it, within a small margin;
//   - no key that names an execution is left in Redis without an expiry (what an execution
//     leaves behind goes away by itself), but its fence generation, which SPEC §4 keeps for
//     ever so that a re-created id never goes back in generation.
//
// PLAITA_SOAK_SECONDS (default 300) and PLAITA_SOAK_RATE (executions started per second,
// default 30) size it. The summary goes to stdout as well.
func TestSoak(t *testing.T) {
	seconds, rate := positiveSetting(t, "PLAITA_SOAK_SECONDS", 300), positiveSetting(t, "PLAITA_SOAK_RATE", 30)
	load := time.Duration(seconds) * time.Second
	e := newStack(t, withTimeout(load+5*time.Minute), withEnv(map[string]string{
		"PLAITA_WORKER_CONCURRENCY": "16", "PLAITA_EVENT_RECONCILE_INTERVAL": "1",
	}))
	// No start is enqueued before the flows are published: the workers may come first.
	workers := []*proc{e.start("worker", nil), e.start("worker", nil)}
	started := time.Now()
	fx := newEffectServer(t, started, func() []*proc { return workers })
	for id, def := range chaosFlows {
		e.publish(id, strings.ReplaceAll(def, "URL", fx.URL))
	}
	procs := []namedProc{{"w0", workers[0]}, {"w1", workers[1]}, {"filter", e.start("filter", nil)}, {"delay", e.start("delay", nil)}}
	for _, np := range procs {
		waitFor(t, np.name+" serving /metrics", 30*time.Second, func() bool { code, _ := np.w.get("/metrics"); return code == 200 })
	}
	cl := newCaseClient(e, fx, started)
	cases := chaosCases(seconds * rate)

	// The driver starts executions at the rate for the load's duration and plays their clients
	// (caseClient.sweep) until every one has settled.
	var backlog, settledN atomic.Int64
	driverDone := make(chan struct{})
	go func() {
		defer close(driverDone)
		var active []*chaosCase
		next := 0
		tick := time.NewTicker(chaosSweep)
		defer tick.Stop()
		for e.ctx.Err() == nil {
			<-tick.C
			due := min(len(cases), int(time.Since(started).Seconds()*float64(rate)))
			for ; next < due; next++ {
				if cl.start(cases[next]) != nil {
					break
				}
				active = append(active, cases[next])
			}
			var settled int
			active, settled = cl.sweep(active)
			settledN.Add(int64(settled))
			backlog.Store(int64(len(active)))
			if next == len(cases) && len(active) == 0 {
				return
			}
		}
	}()

	// The sampler reads every process's goroutines, Go heap in use and resident memory, the task
	// stream's length and the driver's backlog, every 5 s while the load runs.
	var samples []soakSample
	for at := 5 * time.Second; at <= load; at += 5 * time.Second {
		time.Sleep(time.Until(started.Add(at)))
		s := soakSample{at: at, backlog: backlog.Load(), stream: e.streamLen(), procs: map[string]soakProc{}}
		for _, np := range procs {
			pr, err := sampleProc(np.w)
			if err != nil {
				t.Fatalf("+%s: %s: %v\n%s", at, np.name, err, tail(np.w.stderr.String(), 40))
			}
			s.procs[np.name] = pr
		}
		samples = append(samples, s)
	}
	select {
	case <-driverDone:
	case <-time.After(3 * time.Minute):
		t.Fatalf("%d of %d executions not settled 3 minutes after the load ended (backlog %d)\n%s",
			len(cases)-int(settledN.Load()), len(cases), backlog.Load(), e.logs())
	}
	elapsed := time.Since(started)

	// Every execution as expected and none stalled (with nothing failing, each ends within
	// soakMaxRun of its start); the queue drained, nothing dead-lettered; each side effect once.
	var bad []string
	var runs []soakRun
	for _, c := range cases {
		st, err := e.ts.Load(e.ctx, c.id)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s (%s): %v", c.id, c.flow, err))
			continue
		}
		if problem := c.check(st); problem != "" {
			bad = append(bad, problem)
		}
		if st.EndTime != nil {
			runs = append(runs, soakRun{c, st.EndTime.Sub(st.StartTime)})
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d executions not as expected; the first %d:\n%s", len(bad), len(cases), min(len(bad), 10), strings.Join(bad[:min(len(bad), 10)], "\n\n"))
	}
	slices.SortFunc(runs, func(a, b soakRun) int { return int(b.took - a.took) })
	for _, r := range runs[:min(len(runs), 3)] {
		if r.took > soakMaxRun {
			st, _ := e.ts.Load(e.ctx, r.c.id)
			t.Errorf("%s (%s) took %s from its start to its end (more than %s with nothing failing)\ntimeline: %+v\nits log lines:\n%s",
				r.c.id, r.c.flow, r.took.Round(time.Millisecond), soakMaxRun, st.Timeline, about(procs, r.c.id, 30))
		}
	}
	waitFor(t, "the queue drained", 30*time.Second, func() bool { return e.streamLen() == 0 && e.pending() == 0 })
	if n := e.dlqLen(); n != 0 {
		t.Errorf("%d dead letters, want none: %v", n, e.dlqEntries())
	}
	fx.mu.Lock()
	steps, replayed := len(fx.fx), 0
	for path, rs := range fx.fx {
		if len(rs) != 1 {
			replayed++
			if replayed <= 10 {
				t.Errorf("side effect %s requested %d times, want once", path, len(rs))
			}
		}
	}
	fx.mu.Unlock()
	if len(cl.failures) > 0 {
		t.Errorf("the driver's writes failed (nothing was meant to fail): %s", strings.Join(cl.failures, "; "))
	}

	// Flat over time: the floors of the second fifth of the load against those of its last.
	early, late := soakWindow(samples, load, 0.2, 0.4), soakWindow(samples, load, 0.8, 1.01)
	if len(early) == 0 || len(late) == 0 {
		t.Fatalf("too few samples (%d over %s) to compare the early and the late run: make PLAITA_SOAK_SECONDS at least 50", len(samples), load)
	}
	var b strings.Builder
	row := func(k, format string, a ...any) { fmt.Fprintf(&b, "  %-26s %s\n", k, fmt.Sprintf(format, a...)) }
	fmt.Fprintf(&b, "soak suite\n")
	row("load", "%d executions/s for %s (%d executions of %d flows)", rate, load, len(cases), len(chaosFlows))
	row("settled", "after %.1fs (%.1f executions/s overall)", elapsed.Seconds(), float64(len(cases))/elapsed.Seconds())
	row("events published", "%d (the filter resumed %d)", cl.published, countLog(procs[2].w, "filter.wakeup", ""))
	row("side effects", "%d steps, %d requested more than once", steps, replayed)
	row("lease conflicts", "%d (a resume that met the lease of the run that suspended its execution, tried again)",
		countLog(workers[0], "worker.lease_conflict", "")+countLog(workers[1], "worker.lease_conflict", ""))
	if len(runs) > 0 {
		row("start to end", "p50 %s, p99 %s, max %s (%s)", runs[len(runs)/2].took.Round(time.Millisecond),
			runs[len(runs)/100].took.Round(time.Millisecond), runs[0].took.Round(time.Millisecond), runs[0].c.flow)
	}
	unsettled := func(s soakSample) float64 { return float64(s.backlog) }
	stream := func(s soakSample) float64 { return float64(s.stream) }
	row("unsettled (median)", "%.0f early, %.0f late (executions started and not ended, waits for the test included)",
		medianOf(early, unsettled), medianOf(late, unsettled))
	se, sl := medianOf(early, stream), medianOf(late, stream)
	row("task stream (median)", "%.0f early, %.0f late (entries not yet settled)", se, sl)
	if sl > 2*se+float64(rate) {
		t.Errorf("the task stream grew from %.0f to %.0f entries: the workers fall behind the load over time", se, sl)
	}
	for _, np := range procs {
		pick := func(f func(soakProc) float64) func(soakSample) float64 {
			return func(s soakSample) float64 { return f(s.procs[np.name]) }
		}
		ge, gl := minOf(early, pick(func(p soakProc) float64 { return p.goroutines })), minOf(late, pick(func(p soakProc) float64 { return p.goroutines }))
		he, hl := minOf(early, pick(func(p soakProc) float64 { return p.heap })), minOf(late, pick(func(p soakProc) float64 { return p.heap }))
		re, rl := minOf(early, pick(func(p soakProc) float64 { return p.rss })), minOf(late, pick(func(p soakProc) float64 { return p.rss }))
		row(np.name+" goroutines (floor)", "%.0f early, %.0f late", ge, gl)
		row(np.name+" heap in use (floor)", "%.1f MiB early, %.1f MiB late", he/mib, hl/mib)
		row(np.name+" RSS (floor)", "%.1f MiB early, %.1f MiB late", re/mib, rl/mib)
		if gl > ge+max(20, ge/4) {
			t.Errorf("%s: goroutines grew from %.0f to %.0f", np.name, ge, gl)
		}
		if hl > he*1.25+4*mib {
			t.Errorf("%s: the Go heap in use grew from %.1f to %.1f MiB", np.name, he/mib, hl/mib)
		}
		if rl > re*1.25+8*mib {
			t.Errorf("%s: resident memory grew from %.1f to %.1f MiB", np.name, re/mib, rl/mib)
		}
	}

	// What an execution leaves in Redis expires: no key naming one is kept for ever.
	ids := map[string]bool{}
	for _, c := range cases {
		ids[c.id] = true
	}
	kept, fencegens, leaked := soakKeysWithoutTTL(t, e, ids)
	row("keys without expiry", "%d fence generations (one per execution that took a lease), %d others (%s)",
		fencegens, len(kept), strings.Join(kept, ", "))
	if len(leaked) > 0 {
		t.Errorf("%d keys of executions have no expiry: %s", len(leaked), strings.Join(leaked[:min(len(leaked), 20)], ", "))
	}
	t.Log("\n" + b.String())
	fmt.Print(b.String())
	for _, np := range procs {
		if p := panicIn(np.w.stderr.String()); p != "" {
			t.Errorf("%s's log shows a panic:\n%s", np.name, p)
		}
	}
}

const mib = 1 << 20

// soakMaxRun bounds an execution's time from its start to its end when nothing fails: the
// suite's slowest flows wait 2 s for a timeout, or retry a node for about 3 s. A delivery left
// pending and reclaimed after PLAITA_CLAIM_MIN_IDLE_MS (60 s) is far above it.
const soakMaxRun = 30 * time.Second

// soakRun is how long one execution took from its start to its end.
type soakRun struct {
	c    *chaosCase
	took time.Duration
}

type soakSample struct {
	at      time.Duration
	backlog int64 // executions the driver started that have not ended
	stream  int64 // the task stream's length
	procs   map[string]soakProc
}

type soakProc struct{ goroutines, heap, rss float64 }

// sampleProc reads a role process's goroutines and Go heap in use from its /metrics, and its
// resident memory from /proc.
func sampleProc(p *proc) (soakProc, error) {
	code, body := p.get("/metrics")
	if code != 200 {
		return soakProc{}, fmt.Errorf("GET /metrics: %d %s", code, tail(body, 3))
	}
	var s soakProc
	var found int
	for _, line := range strings.Split(body, "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case "go_goroutines":
			dst = &s.goroutines
		case "go_memstats_heap_inuse_bytes":
			dst = &s.heap
		default:
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return s, fmt.Errorf("%s: %w", name, err)
		}
		*dst = f
		found++
	}
	if found != 2 {
		return s, fmt.Errorf("go_goroutines or go_memstats_heap_inuse_bytes missing from /metrics")
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				return s, fmt.Errorf("VmRSS %q: %w", v, err)
			}
			s.rss = kib * 1024
			return s, nil
		}
	}
	return s, fmt.Errorf("no VmRSS in /proc/%d/status", p.cmd.Process.Pid)
}

// soakWindow is the samples taken between the fractions from and to of the load.
func soakWindow(ss []soakSample, load time.Duration, from, to float64) []soakSample {
	var out []soakSample
	for _, s := range ss {
		if f := float64(s.at) / float64(load); f >= from && f < to {
			out = append(out, s)
		}
	}
	return out
}

func minOf(ss []soakSample, f func(soakSample) float64) float64 {
	m := f(ss[0])
	for _, s := range ss[1:] {
		m = min(m, f(s))
	}
	return m
}

func medianOf(ss []soakSample, f func(soakSample) float64) float64 {
	vs := make([]float64, len(ss))
	for i, s := range ss {
		vs[i] = f(s)
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// soakKeysWithoutTTL scans the stack's Redis for keys without an expiry: fencegens counts the
// fence generations, kept are the other keys, leaked those of them that name one of ids (a key
// segment, hash tag braces aside).
func soakKeysWithoutTTL(t *testing.T, e *stack, ids map[string]bool) (kept []string, fencegens int, leaked []string) {
	var cursor uint64
	for {
		entry, err := e.c.Do(e.ctx, e.c.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		if len(entry.Elements) > 0 {
			cmds := make([]rueidis.Completed, 0, len(entry.Elements))
			for _, k := range entry.Elements {
				cmds = append(cmds, e.c.B().Ttl().Key(k).Build())
			}
			for i, res := range e.c.DoMulti(e.ctx, cmds...) {
				ttl, err := res.AsInt64()
				if err != nil {
					t.Fatalf("ttl %s: %v", entry.Elements[i], err)
				}
				if ttl != -1 {
					continue
				}
				k := entry.Elements[i]
				segs := strings.Split(k, ":")
				if slices.Contains(segs, keys.FamFenceGen) {
					fencegens++
					continue
				}
				kept = append(kept, k)
				for _, seg := range segs {
					if ids[strings.Trim(seg, "{}")] {
						leaked = append(leaked, k)
						break
					}
				}
			}
		}
		if cursor = entry.Cursor; cursor == 0 {
			break
		}
	}
	slices.Sort(kept)
	return kept, fencegens, leaked
}
