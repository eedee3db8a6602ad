package filter

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

func keysFor(t testing.TB, root, tenant string) keys.Space {
	t.Helper()
	sp, err := keys.For(root, tenant)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// bundle is one test's filter over the shared Redis under a private key root.
type bundle struct {
	t      testing.TB
	c      rueidis.Client
	root   string
	stream string
	d      Deps
	s      Settings
	clock  *atomic.Int64 // Unix ns; 0 = the real clock
	set    *metrics.Set
}

func setup(t testing.TB) *bundle {
	t.Helper()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	b := &bundle{t: t, c: c, root: root, stream: root + ":flow:queue", clock: new(atomic.Int64), set: metrics.NewSet()}
	now := func() time.Time {
		if ns := b.clock.Load(); ns != 0 {
			return time.Unix(0, ns)
		}
		return time.Now()
	}
	ev := store.NewEvents(store.RedisEvents(c), store.EventSettings{TTL: time.Hour}, root)
	ev.Now = now
	b.d = Deps{
		Events: ev,
		Store:  store.NewRedis(c, store.DefaultSettings(), root),
		Flows:  store.NewFlows(store.RedisFlows(c), root),
		Enqueue: func(ctx context.Context, env queue.Envelope) (string, error) {
			return queue.Enqueue(ctx, queue.Redis(c), b.stream, env)
		},
		Log: zerolog.Nop(), Metrics: b.set, Now: now,
	}
	b.s = Settings{InstanceID: "filter-test", Expr: engine.DefaultExprLimits, ReconcileInterval: time.Hour,
		ReconcileBackfill: time.Hour, SweepInterval: time.Hour, SweepBudget: 100}
	return b
}

func (b *bundle) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	b.t.Cleanup(cancel)
	return ctx
}

func (b *bundle) must(err error) {
	b.t.Helper()
	if err != nil {
		b.t.Fatal(err)
	}
}

// ordersFlow waits for order.approved whose order_id is the input's.
const ordersFlow = `{"id":"orders","start":"wait","nodes":[
	{"id":"wait","type":"wait_event","params":{"event_type":"order.approved","match":"EVENT.order_id == INPUT.order_id"},"next":"done"},
	{"id":"done","type":"end","params":{"output":"{{ EVENT.order_id }}"}}]}`

// loopFlow waits twice for the same type.
const loopFlow = `{"id":"twice","start":"w1","nodes":[
	{"id":"w1","type":"wait_event","params":{"event_type":"tick"},"next":"w2"},
	{"id":"w2","type":"wait_event","params":{"event_type":"tick"},"next":"done"},
	{"id":"done","type":"end"}]}`

// flow publishes a definition as version 1 in tenant and parses it.
func (b *bundle) flow(tenant, def string) *engine.Flow {
	b.t.Helper()
	f, err := engine.Parse([]byte(def), engine.NewRegistry(), engine.DefaultExprLimits)
	b.must(err)
	_, err = b.d.Flows.Publish(b.ctx(), tenant, f.ID, "1", []byte(def), time.Now(), func([]byte) (bool, error) { return true, nil })
	b.must(err)
	return f
}

// suspend starts an execution of f in tenant and registers its subscription, as a worker
// does when the run suspends at a wait_event.
func (b *bundle) suspend(tenant string, f *engine.Flow, id string, input map[string]any) *state.Execution {
	b.t.Helper()
	ts, err := b.d.Store.Tenant(tenant)
	b.must(err)
	ex := b.executor(ts)
	st, err := ex.Start(b.ctx(), f, engine.StartRequest{ExecutionID: id, TenantID: ts.Tenant(), FlowVersion: "1", Input: input})
	b.must(err)
	b.register(ts, st)
	return st
}

func (b *bundle) register(ts *store.TenantStore, st *state.Execution) {
	b.t.Helper()
	if st.Status != state.Suspended || st.Suspend == nil || st.Suspend.Kind != state.SuspendEvent {
		b.t.Fatalf("execution %s is %s, not waiting for an event", st.ExecutionID, st.Status)
	}
	s := st.Suspend
	sub := store.Subscription{ExecutionID: st.ExecutionID, FlowID: st.FlowID, FlowVersion: st.FlowVersion, Node: s.Node,
		EventType: s.EventType, Match: s.Match, Since: s.Since}
	if s.Due != nil {
		sub.ExpiresAt = *s.Due
	}
	if len(s.Correlation) > 0 { // as roles/worker/wakeup.go indexes it
		sub.Correlation = &s.Correlation[0]
	}
	b.must(ts.PutSubscription(b.ctx(), sub, time.Hour))
}

// resume applies a resume as a worker would (the subscription is left behind, as the worker
// leaves it) and registers the next wait when the run suspends again.
func (b *bundle) resume(tenant string, f *engine.Flow, id string, data any) *state.Execution {
	b.t.Helper()
	ts, err := b.d.Store.Tenant(tenant)
	b.must(err)
	st, err := b.executor(ts).Resume(b.ctx(), f, id, engine.ResumeEvent, data)
	b.must(err)
	if st.Status == state.Suspended {
		b.register(ts, st)
	}
	return st
}

func (b *bundle) publish(tenant, id, typ, data string) store.Event {
	b.t.Helper()
	ev, _, err := b.d.Events.Publish(b.ctx(), store.Event{ID: id, Type: typ, TenantID: tenant, Data: json.RawMessage(data)})
	b.must(err)
	return ev
}

func ref(ev store.Event) store.EventRef {
	return store.EventRef{TenantID: ev.TenantID, Type: ev.Type, ID: ev.ID}
}

// entries are the resume envelopes on the test's stream.
func (b *bundle) entries() []queue.Envelope {
	b.t.Helper()
	res, err := b.c.Do(b.ctx(), b.c.B().Xrange().Key(b.stream).Start("-").End("+").Build()).AsXRange()
	b.must(err)
	var out []queue.Envelope
	for _, e := range res {
		env, _, err := queue.Decode(b.stream, e.ID, []byte(e.FieldValues[queue.PayloadField]))
		b.must(err)
		out = append(out, env)
	}
	return out
}

func (b *bundle) waitEntries(n int, within time.Duration) []queue.Envelope {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := b.entries()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bundle) setTenantStatus(tenant, status string) {
	b.t.Helper()
	b.must(b.c.Do(b.ctx(), b.c.B().Hset().Key(b.root+":tenant_status").FieldValue().FieldValue(tenant, status).Build()).Error())
}

func (b *bundle) counter(name string) int {
	b.t.Helper()
	var sb strings.Builder
	b.set.WritePrometheus(&sb)
	for _, line := range strings.Split(sb.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var n int
			for _, c := range v {
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	return 0
}

// executor runs flows on the bundle's clock.
func (b *bundle) executor(ts *store.TenantStore) *engine.Executor {
	ex := engine.NewExecutor(ts)
	ex.Clock = testClock{b}
	return ex
}

type testClock struct{ b *bundle }

func (c testClock) Now() time.Time { return c.b.d.Now() }
func (testClock) Sleep(ctx context.Context, d time.Duration) error {
	return engine.SystemClock{}.Sleep(ctx, d)
}

// reconcile runs one full reconcile pass and fails the test on an error.
func (b *bundle) reconcile(r *Reconciler) PassStats {
	b.t.Helper()
	st, err := r.RunOnce(b.ctx())
	b.must(err)
	return st
}
