package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// Admission gates (roles/worker/gates.go, tenant.go) against a real worker process.

const gatesSimpleFlow = `{"id":"hello","start":"a","nodes":[
	{"id":"a","type":"set","params":{"vars":{"x":1}},"next":"done"},
	{"id":"done","type":"end","params":{"output":"ok"}}]}`

// publishFor publishes flow id version "1" in tenant's key space.
func (e *stack) publishFor(tenant, id, flow string) {
	e.t.Helper()
	if err := e.c.Do(e.ctx, e.c.B().Set().Key(keys.MustFor("", tenant).Flow(id, "1")).Value(flow).Build()).Error(); err != nil {
		e.t.Fatal(err)
	}
}

// enqueueFor enqueues a start of flowID for tenant.
func (e *stack) enqueueFor(tenant, flowID string) string {
	e.t.Helper()
	id := engine.NewExecutionID()
	if _, err := queue.Enqueue(e.ctx, e.c, config.QueueName.In(e.cfg), queue.Envelope{Kind: queue.KindStart, TenantID: tenant,
		FlowID: flowID, FlowVersion: "1", ExecutionID: id, Input: json.RawMessage(`{}`)}); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *stack) hset(key, field, value string) {
	e.t.Helper()
	if err := e.c.Do(e.ctx, e.c.B().Hset().Key(key).FieldValue().FieldValue(field, value).Build()).Error(); err != nil {
		e.t.Fatal(err)
	}
}

// TestE2ETenantDisabledStartIsDeadLetteredThenReenabledRuns: a start of a disabled tenant is
// refused (VerdictRefuse). Its execution does not exist yet, so refuseStart does not apply and
// the dispatcher dead-letters the message with reason = the rule ("tenant_status") and detail =
// the gate's reason. Re-enabled, a new start of the tenant runs to completed.
//
// Epoch gate: the worker runs with PLAITA_DEPLOYMENT_EPOCH=7 and
// PLAITA_TENANT_STATUS_EPOCH_STRICT=1, and the test writes the same epoch "7" to
// keys.TenantStatusEpoch() (plaita:tenant_status:epoch), as the console would. The snapshot is
// then proven current and the status rule decides (without the Redis epoch the non-default
// tenant would be held, VerdictHold, and never dead-lettered).
func TestE2ETenantDisabledStartIsDeadLetteredThenReenabledRuns(t *testing.T) {
	e := newStack(t, withTimeout(60*time.Second), withEnv(map[string]string{"PLAITA_DEPLOYMENT_EPOCH": "7", "PLAITA_TENANT_STATUS_EPOCH_STRICT": "1",
		"PLAITA_CLAIM_MIN_IDLE_MS": "500"}))
	sp := keys.MustFor("", "")
	if err := e.c.Do(e.ctx, e.c.B().Set().Key(sp.TenantStatusEpoch()).Value("7").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	e.hset(sp.TenantStatus(), "acme", "disabled")
	e.publishFor("acme", "hello", gatesSimpleFlow)
	acme, err := store.NewRedis(e.c, settings.Store(e.cfg), "").Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}

	refused := e.enqueueFor("acme", "hello")
	w := e.spawn("worker", nil)
	waitFor(t, "the refused start in the DLQ", 20*time.Second, func() bool { return e.dlqLen() >= 1 }, w)

	ds := e.dlqEntries()
	if len(ds) != 1 {
		t.Fatalf("dlq has %d entries, want 1: %v", len(ds), ds)
	}
	d := ds[0]
	if d["reason"] != "tenant_status" || d["tenant_id"] != "acme" || d["execution_id"] != refused || d["kind"] != string(queue.KindStart) {
		t.Fatalf("dead letter = %v; want reason tenant_status, tenant acme, execution %s, kind start", d, refused)
	}
	if !strings.Contains(d["detail"], `tenant "acme" is disabled`) || !strings.Contains(d["detail"], sp.TenantStatus()) {
		t.Fatalf("dead letter detail %q does not name the disabled tenant and %s", d["detail"], sp.TenantStatus())
	}
	waitFor(t, "the source message settled", 10*time.Second, func() bool { return e.pending() == 0 && e.streamLen() == 0 }, w)
	if _, err := acme.Load(e.ctx, refused); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused execution has a state (err %v): it must never have run", err)
	}

	// Re-enable: a new start runs; the refused one stays dead-lettered and never ran.
	e.hset(sp.TenantStatus(), "acme", "active")
	id := e.enqueueFor("acme", "hello")
	var st *state.Execution
	waitFor(t, "the new acme execution completed", 20*time.Second, func() bool {
		st, err = acme.Load(e.ctx, id)
		return err == nil && st.Status.Terminal()
	}, w)
	if st.Status != state.Completed {
		t.Fatalf("new acme execution ended %s, want completed: %+v\n%s", st.Status, st, logs([]*proc{w}))
	}
	if _, err := acme.Load(e.ctx, refused); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused execution has a state after re-enabling (err %v)", err)
	}
	if n := e.dlqLen(); n != 1 {
		t.Fatalf("dlq length %d after re-enabling, want 1", n)
	}
}

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
	if peak := runQuotaScenario(t, map[string]string{"PLAITA_TENANT_QUOTA_DEFER_MAX": "1000000"}); peak > 2 {
		t.Errorf("peak concurrent requests %d > PLAITA_TENANT_MAX_RUNNING=2", peak)
	}
}

// TestE2ETenantQuotaDefaultDeferBudget runs the same scenario with the default
// PLAITA_TENANT_QUOTA_DEFER_MAX (64): a deferred start waits Admission.RetryAfter before it is
// re-enqueued, so the budget lasts and the limit holds without any bypass.
func TestE2ETenantQuotaDefaultDeferBudget(t *testing.T) {
	if peak := runQuotaScenario(t, nil); peak > 2 {
		t.Fatalf("%d requests in flight with PLAITA_TENANT_MAX_RUNNING=2", peak)
	}
}
