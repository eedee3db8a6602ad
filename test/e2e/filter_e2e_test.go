//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"plaita/engine/state"
)

// Acceptance of the filter role with real processes: `plaita worker` and `plaita filter` on a
// private Redis, driven only through the CLI (`plaita start FLOW.json` publishes and starts,
// `plaita event publish`, `plaita execution show --json`). Filters serve /metrics on a free
// port: their counters are the positive signals the tests wait for.

// kill -9 of a filter while it delivers a burst of events loses no wake-up: the filter started
// after it (its start-up reconcile pass, taking over the claims the dead one left pending)
// resumes every execution, each once.
func TestE2EFilterKill9MidFlightLosesNoWakeUp(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, nil)
	s.start("worker", map[string]string{"PLAITA_WORKER_CONCURRENCY": "4"})
	a := s.filter(nil)
	const n = 16
	ids := make([]string, n)
	for i := range ids {
		ids[i] = s.startDef("approve", approvalFlow, "", fmt.Sprintf(`{"order_id":"o%d"}`, i))
	}
	for _, id := range ids {
		s.waitStatus(id, "", state.Suspended, 60*time.Second)
	}
	// The burst, all at once.
	errs := make(chan string, n)
	for i := range n {
		go func() {
			r := run(t, s.env, "event", "publish", "order.approved", "--data", fmt.Sprintf(`{"order_id":"o%d"}`, i), "--quiet")
			if r.code != 0 {
				errs <- r.stderr
				return
			}
			errs <- ""
		}()
	}
	waitFor(t, "the filter under way", 60*time.Second, func() bool { return a.metric("plaita_filter_wakeups_total") >= 1 }, s.procs...)
	a.kill9(t)
	for range n {
		if e := <-errs; e != "" {
			t.Fatalf("publish: %s", e)
		}
	}
	before := 0
	for _, id := range ids {
		if s.show(id, "").Status != state.Suspended {
			before++
		}
	}
	b := s.filter(nil)
	for _, id := range ids {
		st := s.waitStatus(id, "", state.Completed, 120*time.Second)
		if resumes(st) != 1 {
			t.Errorf("%s: %d resumes applied", id, resumes(st))
		}
	}
	t.Logf("%d of %d woken before the kill; the next filter enqueued %d (%d taken over from the dead one)",
		before, n, b.metric("plaita_filter_wakeups_total"), b.metric("plaita_filter_takeovers_total"))
}

// A Redis restart: the filter subscribes again by itself (and reconciles what it may have
// missed) and goes on waking executions.
func TestE2EFilterSurvivesARedisRestart(t *testing.T) {
	t.Parallel()
	// A run cut by the restart is redelivered after the claim idle time, its lease expired.
	s := newFilterStack(t, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "1000", "PLAITA_LEASE_TTL_SECONDS": "2"},
		"--appendonly", "yes", "--appendfsync", "always")
	s.start("worker", nil)
	f := s.filter(nil)
	id := s.startDef("approve", approvalFlow, "", `{"order_id":"A1"}`)
	s.waitStatus(id, "", state.Suspended, 60*time.Second)
	passes := f.metric("plaita_filter_reconcile_passes_total")
	s.srv.Kill()
	s.srv.Start()
	waitFor(t, "the filter subscribed again", 60*time.Second, func() bool { return countLog(f, "filter.subscribed", `"times":2`) == 1 }, s.procs...)
	waitFor(t, "a reconcile pass after the restart", 60*time.Second, func() bool {
		return f.metric("plaita_filter_reconcile_passes_total") > passes
	}, s.procs...)
	s.publishEvent("order.approved", `{"order_id":"A1","by":"after-restart"}`)
	st := s.waitStatus(id, "", state.Completed, 60*time.Second)
	if out, _ := st.Output.(map[string]any); out["by"] != "after-restart" || resumes(st) != 1 {
		t.Fatalf("output %v, %d resumes", st.Output, resumes(st))
	}
	if code, body := f.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the restart: %d %s", code, body)
	}
}
