//go:build !e2e

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/engine/state"
)

// Admission gates (roles/worker/gates.go, tenant.go) against a real worker process.

// concServer sleeps d per request and records the peak of concurrent requests.
type concServer struct {
	*httptest.Server
	mu             sync.Mutex
	inflight, peak int
	total          int
}

func newConcServer(t *testing.T, d time.Duration) *concServer {
	s := &concServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.inflight++
		s.total++
		s.peak = max(s.peak, s.inflight)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inflight--
			s.mu.Unlock()
		}()
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *concServer) stats() (peak, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.total
}

// runQuotaScenario: PLAITA_TENANT_MAX_RUNNING=2 with 5 consumers (PLAITA_WORKER_CONCURRENCY=5)
// and 5 starts of a flow whose http step takes 1 s; every execution must complete. It returns
// the peak of concurrent requests the step's server saw.
func runQuotaScenario(t *testing.T, extra map[string]string) int {
	env := map[string]string{"PLAITA_TENANT_MAX_RUNNING": "2", "PLAITA_WORKER_CONCURRENCY": "5", "PLAITA_CLAIM_MIN_IDLE_MS": "5000"}
	for k, v := range extra {
		env[k] = v
	}
	e := newStack(t, withTimeout(90*time.Second), withEnv(env))
	hs := newConcServer(t, time.Second)
	e.publish("nap", `{"id":"nap","start":"call","nodes":[
		{"id":"call","type":"http","params":{"url":"`+hs.URL+`/nap","timeout":20},"next":"done"},
		{"id":"done","type":"end","params":{"output":"ok"}}]}`)
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = e.enqueue("nap")
	}
	w := e.spawn("worker", nil)
	began := time.Now()
	for _, id := range ids {
		if st := e.waitTerminal(id, 60*time.Second, w); st.Status != state.Completed {
			t.Fatalf("execution %s ended %s, want completed\n%s", id, st.Status, logs([]*proc{w}))
		}
	}
	peak, total := hs.stats()
	t.Logf("5 runs in %v; peak concurrent requests %d, total requests %d, bypassed runs %d", time.Since(began), peak, total,
		strings.Count(w.stderr.String(), `"event":"worker.tenant_quota_bypass"`))
	if total != 5 {
		t.Errorf("the server saw %d requests, want 5", total)
	}
	return peak
}

// TestE2ETenantQuotaBoundsConcurrentRuns: with a deferral budget that cannot run out during the
// test (PLAITA_TENANT_QUOTA_DEFER_MAX=1000000) at most 2 runs of the tenant are in flight.
func TestE2ETenantQuotaBoundsConcurrentRuns(t *testing.T) {
	t.Parallel()
	if peak := runQuotaScenario(t, map[string]string{"PLAITA_TENANT_QUOTA_DEFER_MAX": "1000000"}); peak > 2 {
		t.Errorf("peak concurrent requests %d > PLAITA_TENANT_MAX_RUNNING=2", peak)
	}
}

// TestE2ETenantQuotaDefaultDeferBudget runs the same scenario with the default
// PLAITA_TENANT_QUOTA_DEFER_MAX (64): a deferred start waits Admission.RetryAfter before it is
// re-enqueued, so the budget lasts and the limit holds without any bypass.
func TestE2ETenantQuotaDefaultDeferBudget(t *testing.T) {
	t.Parallel()
	if peak := runQuotaScenario(t, nil); peak > 2 {
		t.Fatalf("%d requests in flight with PLAITA_TENANT_MAX_RUNNING=2", peak)
	}
}
