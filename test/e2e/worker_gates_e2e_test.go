//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"strings"
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
	if _, err := queue.Enqueue(e.ctx, queue.Redis(e.c), config.QueueName.In(e.cfg), queue.Envelope{Kind: queue.KindStart, TenantID: tenant,
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
	t.Parallel()
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
