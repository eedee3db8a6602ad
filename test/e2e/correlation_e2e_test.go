//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"plaita/engine/state"
)

// Event correlation with real processes (docs/events.md, "Correlation"): `plaita worker` and
// `plaita filter` on a private redis-server, driven through the CLI. A wait_event whose match
// has a conjunct EVENT.<path> == <value not read from EVENT> is indexed under that value, and
// an event is checked only against the waits of its values and the uncorrelated waits of its
// type. Every test ends with every matching wait woken exactly once — by its own event: the
// flows end with the tag of the event that woke them — and no other.

// kill -9 of a filter in the middle of a burst — events of the waits' values and of values no
// wait has, of one type — loses no wake-up and doubles none: the next filter (its start-up
// reconcile pass, taking over the claims the dead one left pending) wakes every wait, each once
// and by its own event.
func TestE2ECorrelationFilterKill9MidBurst(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, nil)
	s.start("worker", map[string]string{"PLAITA_WORKER_CONCURRENCY": "4"})
	a := s.filter(nil)
	def := corrFlow("corr-burst", "corr.burst", "EVENT.order_id == INPUT.order_id")
	const n = 24
	ids := make([]string, n)
	for i := range ids {
		ids[i], _ = s.corrStart("burst", def, fmt.Sprintf(`{"order_id":"o%d"}`, i))
	}
	for _, id := range ids {
		s.waitStatus(id, "", state.Suspended, 60*time.Second)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 2*n)
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			order := fmt.Sprintf("o%d", i/2)
			if i%2 == 1 {
				order = fmt.Sprintf("nobody-%d", i) // a value no wait has
			}
			data := fmt.Sprintf(`{"order_id":%q,"tag":%q}`, order, order)
			if r := run(t, s.env, "event", "publish", "corr.burst", "--data", data, "--quiet"); r.code != 0 {
				errs <- r.stderr
			}
		}()
	}
	waitFor(t, "the filter under way", 60*time.Second, func() bool { return a.metric("plaita_filter_wakeups_total") >= 1 }, s.procs...)
	a.kill9(t)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("publish: %s", e)
	}
	b := s.filter(nil)
	for i, id := range ids {
		st := s.waitStatus(id, "", state.Completed, 120*time.Second)
		if want := fmt.Sprintf("o%d", i); st.Output != want || resumes(st) != 1 {
			t.Errorf("%s: woken with %v after %d resumes, want once by %s", id, st.Output, resumes(st), want)
		}
	}
	t.Logf("the next filter enqueued %d wake-ups (%d taken over from the dead one)",
		b.metric("plaita_filter_wakeups_total"), b.metric("plaita_filter_takeovers_total"))
}

// A Redis restart (append-only file): the buckets, the paths and the index of uncorrelated
// waits are back with the data, the filter subscribes again, and the events published after
// it wake the correlated waits and the uncorrelated one, each once.
func TestE2ECorrelationSurvivesARedisRestart(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "1000", "PLAITA_LEASE_TTL_SECONDS": "2"},
		"--appendonly", "yes", "--appendfsync", "always")
	s.start("worker", nil)
	f := s.filter(nil)
	def := corrFlow("corr-restart", "corr.restart", "EVENT.order_id == INPUT.order_id")
	var ids []string
	for i := range 3 {
		id, _ := s.corrStart("restart", def, fmt.Sprintf(`{"order_id":"r%d"}`, i))
		ids = append(ids, id)
	}
	unc, _ := s.corrStart("restart-unc", corrFlow("corr-restart-unc", "corr.restart", "EVENT.big == true"), `{}`)
	for _, id := range append(ids, unc) {
		s.waitStatus(id, "", state.Suspended, 60*time.Second)
	}
	passes := f.metric("plaita_filter_reconcile_passes_total")
	s.srv.Kill()
	s.srv.Start()
	waitFor(t, "the filter subscribed again", 60*time.Second, func() bool { return countLog(f, "filter.subscribed", `"times":2`) == 1 }, s.procs...)
	waitFor(t, "a reconcile pass after the restart", 60*time.Second, func() bool {
		return f.metric("plaita_filter_reconcile_passes_total") > passes
	}, s.procs...)
	s.publishEvent("corr.restart", `{"order_id":"r1","tag":"r1"}`)
	s.wokenBy(ids[1], "r1")
	s.stillWaiting(ids[0], ids[2], unc)
	s.publishEvent("corr.restart", `{"order_id":"none","big":true,"tag":"big"}`)
	s.wokenBy(unc, "big")
	s.publishEvent("corr.restart", `{"order_id":"r0","tag":"r0"}`)
	s.publishEvent("corr.restart", `{"order_id":"r2","tag":"r2"}`)
	s.wokenBy(ids[0], "r0")
	s.wokenBy(ids[2], "r2")
	if code, body := f.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the restart: %d %s", code, body)
	}
}
