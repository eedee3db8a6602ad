package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

// extras are plaita's figures beside the throughput, measured once after the rounds on the same
// Redis: what a step beyond the first costs, what an event that wakes a wait costs end to end
// (the publish, the filter and the resumed run) with few and many waits, and what a real
// `plaita worker` process holds at its peak while it runs the e2e workload at concurrency 64.
type extras struct {
	StepsCallsPerExecution float64 `json:"steps_calls_per_execution"` // a 20-node flow of control nodes
	CallsPerAdditionalStep float64 `json:"calls_per_additional_step"` // (that − the 1-node median) / 19
	// CallsPerWokenWait is `plaita bench suspend`'s calls per round trip, by the number of
	// executions waiting beside the woken ones.
	CallsPerWokenWait map[string]float64 `json:"calls_per_woken_wait"`
	Worker            workerMemory       `json:"worker"`
}

// workerMemory is a worker process's /proc status at the end of a run.
type workerMemory struct {
	Concurrency int     `json:"concurrency"`
	Executions  int     `json:"executions"`
	Seconds     float64 `json:"seconds"`
	VmHWMKiB    int64   `json:"vm_hwm_kib"`
	RssAnonKiB  int64   `json:"rss_anon_kib"` // the heap, stacks and the runtime's own
	RssFileKiB  int64   `json:"rss_file_kib"` // the binary's pages the process touched
}

// steps of the flow `plaita bench steps` runs.
const benchSteps = 20

// measureExtras runs the extra figures; e2eCalls is the rounds' median calls per 1-node
// execution.
func measureExtras(ctx context.Context, t *target, bin, dir string, o options, e2eCalls float64) (extras, error) {
	x := extras{CallsPerWokenWait: map[string]float64{}}
	n := min(o.n, 20000)
	var steps struct {
		Scenario          string  `json:"scenario"`
		CallsPerExecution float64 `json:"calls_per_execution"`
	}
	logf("extras: plaita bench steps (n=%d)", n)
	if err := benchJSON(ctx, t, bin, o, &steps, "steps", "--n", strconv.Itoa(n), "--concurrency", strconv.Itoa(o.concurrency)); err != nil {
		return x, err
	}
	x.StepsCallsPerExecution = steps.CallsPerExecution
	x.CallsPerAdditionalStep = (steps.CallsPerExecution - e2eCalls) / (benchSteps - 1)
	for _, waits := range []int{200, 20000} {
		var sus struct {
			CallsPerRoundTrip float64 `json:"calls_per_round_trip"`
		}
		logf("extras: plaita bench suspend (%d waits)", waits)
		// Each event wakes a wait of its own: at most as many events as waits.
		if err := benchJSON(ctx, t, bin, o, &sus, "suspend", "--n", strconv.Itoa(min(2000, waits)), "--waits", strconv.Itoa(waits),
			"--concurrency", strconv.Itoa(o.concurrency)); err != nil {
			return x, err
		}
		x.CallsPerWokenWait[strconv.Itoa(waits)] = sus.CallsPerRoundTrip
	}
	logf("extras: a plaita worker process at concurrency 64 (n=%d)", o.n)
	mem, err := workerPeak(ctx, t, bin, dir, o.n, 64)
	if err != nil {
		return x, fmt.Errorf("worker memory: %w", err)
	}
	x.Worker = mem
	return x, nil
}

// benchJSON runs `plaita bench SCENARIO --redis … --json ARGS…` on an emptied db into out.
func benchJSON(ctx context.Context, t *target, bin string, o options, out any, scenario string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := t.resetPlaita(ctx); err != nil {
		return err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append([]string{"bench", scenario, "--redis", t.plaitaURL, "--json"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("plaita bench %s: %w\n%s", scenario, err, tail(stderr.String(), 2000))
	}
	line := strings.TrimSpace(stdout.String())
	if json.Unmarshal([]byte(line), out) != nil {
		if err := json.Unmarshal([]byte(lastJSONLine(line)), out); err != nil {
			return fmt.Errorf("plaita bench %s: reading its JSON %q: %w", scenario, tail(line, 200), err)
		}
	}
	return nil
}

// workerPeak enqueues n starts of a 1-node flow, runs a `plaita worker` process with conc
// consumers until the stream is empty (every start run and acked: the worker deletes what it
// acks), and reads the process's memory before stopping it.
func workerPeak(ctx context.Context, t *target, bin, dir string, n, conc int) (workerMemory, error) {
	m := workerMemory{Concurrency: conc, Executions: n}
	if err := t.resetPlaita(ctx); err != nil {
		return m, err
	}
	const stream = "plaita:flow:queue"
	// Flags, not variables: they override what the caller's environment may set.
	conn := []string{"--redis-url", t.plaitaURL, "--queue-name", stream}
	flow := filepath.Join(dir, "peers-flow.json")
	if err := os.WriteFile(flow, []byte(`{"id":"peers-1","version":"1","start":"e","nodes":[{"id":"e","type":"end","params":{"output":"ok"}}]}`), 0o600); err != nil {
		return m, err
	}
	pub := exec.CommandContext(ctx, bin, append([]string{"flow", "publish", flow}, conn...)...)
	pub.Dir = dir
	if out, err := pub.CombinedOutput(); err != nil {
		return m, fmt.Errorf("plaita flow publish: %w\n%s", err, tail(string(out), 2000))
	}
	created := time.Now().UTC().Format(time.RFC3339Nano)
	for i := 0; i < n; i += 1000 {
		pipe := t.plaita.Pipeline()
		for j := i; j < min(i+1000, n); j++ {
			payload := fmt.Sprintf(`{"schema_version":1,"kind":"start","flow_id":"peers-1","flow_version":"1","execution_id":"ex_peers%016x","created_at":%q}`, j, created)
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []string{"payload", payload}})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return m, fmt.Errorf("enqueue: %w", err)
		}
	}
	var logs bytes.Buffer
	w := exec.Command(bin, append([]string{"worker", "--concurrency", strconv.Itoa(conc), "--metrics-port", "0"}, conn...)...)
	w.Dir, w.Stdout, w.Stderr = dir, io.Discard, &logs
	began := time.Now()
	if err := w.Start(); err != nil {
		return m, err
	}
	defer func() {
		_ = w.Process.Signal(syscall.SIGTERM)
		_ = w.Wait()
	}()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		left, err := t.plaita.XLen(ctx, stream).Result()
		if err != nil {
			return m, err
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) || w.ProcessState != nil {
			return m, fmt.Errorf("the worker left %d entries after %s\n%s", left, time.Since(began).Round(time.Second), tail(logs.String(), 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.Seconds = time.Since(began).Seconds()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.Process.Pid))
	if err != nil {
		return m, err
	}
	m.VmHWMKiB, m.RssAnonKiB, m.RssFileKiB = statusKiB(status, "VmHWM"), statusKiB(status, "RssAnon"), statusKiB(status, "RssFile")
	return m, nil
}

// statusKiB reads one "Name:   N kB" line of /proc/PID/status (0 when missing).
func statusKiB(status []byte, name string) int64 {
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func printExtras(w io.Writer, x extras, e2eCalls float64) {
	fmt.Fprintf(w, "\nplaita, once after the rounds\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "calls per 1-node execution (median)\t%.2f\n", e2eCalls)
	fmt.Fprintf(tw, "calls per additional step\t%.2f (a %d-node control flow: %.2f per execution)\n", x.CallsPerAdditionalStep, benchSteps, x.StepsCallsPerExecution)
	for _, waits := range []string{"200", "20000"} {
		fmt.Fprintf(tw, "calls per woken wait, %s waits\t%.2f (publish, filter, resumed run)\n", waits, x.CallsPerWokenWait[waits])
	}
	m := x.Worker
	fmt.Fprintf(tw, "worker process at concurrency %d\tVmHWM %.1f MiB (anonymous %.1f, the binary's pages %.1f) after %d executions in %.1f s\n",
		m.Concurrency, float64(m.VmHWMKiB)/1024, float64(m.RssAnonKiB)/1024, float64(m.RssFileKiB)/1024, m.Executions, m.Seconds)
	tw.Flush()
}
