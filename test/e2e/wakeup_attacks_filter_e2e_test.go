//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
)

// Wake-up attacks on the filter role (docs/events.md), through the binary: a worker and a
// filter on a private Redis. One index member that no execution can have must not stall the
// reconciler, and a burst of events past the listener's queue must not leave its waits to the
// next periodic reconcile pass.

// burstWaits and burstEvents size the burst: 20 executions wait for k.set events of their
// own key, and 20,000 k.set events are published as fast as the test can, the one matching
// wait i being the 1,000·i+500th. Every other event is checked against every wait still
// waiting (its match refuses it): the listener's four handlers fall far behind, and with the
// default queue of 4,096 most notifications are dropped.
const (
	burstWaits  = 20
	burstEvents = 20000
)

// A burst past the notification queue: the dropped notifications trigger a reconcile pass of
// their tenant at once (not the next periodic pass: the interval is the default 300 s), every
// wait wakes, and the drops are reported in a line per burst with their count.
func TestE2EFilterBurstOverflowTriggersAnImmediateReconcile(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, map[string]string{"PLAITA_EVENT_RECONCILE_INTERVAL": "300"})
	s.start("worker", map[string]string{"PLAITA_WORKER_CONCURRENCY": "4"})
	ids := make([]string, burstWaits)
	for i := range ids {
		ids[i] = s.startDef("wait-k", keyFlow, "", fmt.Sprintf(`{"k":"w%d"}`, i))
	}
	for _, id := range ids {
		s.waitStatus(id, "", state.Suspended, 60*time.Second)
	}
	f := s.filter(nil)
	waitFor(t, "the start-up reconcile pass", 60*time.Second, func() bool {
		return f.metric("plaita_filter_reconcile_passes_total") >= 1
	}, s.procs...)
	// The next periodic pass is 300 s after the start-up pass: every wake-up before then came
	// from the listener or from a pass the overflow triggered.
	periodic := time.Now().Add(300 * time.Second)
	rssBefore := rssKiB(f.cmd.Process.Pid)

	c := s.srv.Client(t)
	bus := store.NewEvents(store.RedisEvents(c), store.EventSettings{}, "")
	ctx := context.Background()
	burstStart := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= burstEvents {
					return
				}
				k := fmt.Sprintf("n%d", i)
				if stride := burstEvents / burstWaits; i%stride == stride/2 {
					k = fmt.Sprintf("w%d", i/stride)
				}
				if _, _, err := bus.Publish(ctx, store.Event{Type: "k.set", Data: json.RawMessage(`{"k":"` + k + `"}`)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	burstEnd := time.Now()
	close(errs)
	for err := range errs {
		t.Fatalf("publish: %v", err)
	}

	var last time.Time
	for _, id := range ids {
		st := s.waitStatus(id, "", state.Completed, time.Until(periodic)-10*time.Second)
		if resumes(st) != 1 {
			t.Errorf("%s: %d resumes", id, resumes(st))
		}
		if end := timelineAt(st, "completed"); end.After(last) {
			last = end
		}
	}
	if time.Now().After(periodic) {
		t.Fatal("the waits woke after the periodic pass could have run")
	}
	dropped := f.metric("plaita_filter_notifications_dropped_total")
	overflowPasses := f.metric("plaita_filter_reconcile_overflow_passes_total")
	if dropped == 0 || overflowPasses == 0 {
		t.Fatalf("%d notifications dropped, %d overflow passes: the burst did not overflow the queue or triggered no pass", dropped, overflowPasses)
	}
	// The drops are reported in a line per burst (at most one a second), whose counts add up
	// to the metric once the last line is out.
	waitFor(t, "the drop lines add up to the dropped notifications", 60*time.Second, func() bool {
		return droppedInLogs(f) == dropped
	}, s.procs...)
	lines := countLog(f, "filter.notifications_dropped", "")
	if lines > int(burstEnd.Sub(burstStart)/time.Second)+3 {
		t.Errorf("%d drop lines for a burst of %s", lines, burstEnd.Sub(burstStart).Round(time.Millisecond))
	}
	if n := countLog(f, "filter.notification_dropped", ""); n != 0 {
		t.Errorf("%d lines of single dropped notifications", n)
	}
	rssAfter := rssKiB(f.cmd.Process.Pid)
	t.Logf("burst of %d events (%d waits) published in %s; %d notifications dropped (%d log lines), %d overflow passes; last wake-up %s after the burst's end; filter RSS %d KiB before, %d KiB after",
		burstEvents, burstWaits, burstEnd.Sub(burstStart).Round(time.Millisecond), dropped, lines, overflowPasses,
		last.Sub(burstEnd).Round(time.Millisecond), rssBefore, rssAfter)
}

// droppedInLogs adds up the dropped counts of p's filter.notifications_dropped lines.
func droppedInLogs(p *proc) int {
	n := 0
	for _, line := range logLines(p.stderr.String(), "filter.notifications_dropped") {
		if v, ok := line["dropped"].(float64); ok {
			n += int(v)
		}
	}
	return n
}

// rssKiB is a process's resident set size (0 when unreadable).
func rssKiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}
