package control

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

// registerInstance writes a live instance of role into the fixture's registry.
func (f *fixture) registerInstance(id, role, family string) {
	f.t.Helper()
	rec := store.InstanceRecord{InstanceID: id, Role: role, Status: "running", HeartbeatAt: time.Now(), TTLMillis: 30000, ConfigFamily: family}
	if err := f.p.d.Registry.Register(context.Background(), rec, time.Minute); err != nil {
		f.t.Fatal(err)
	}
}

const retryFlow = `{"id":"flaky","version":"1","start":"a","nodes":[
	{"id":"a","type":"log","params":{"message":"x"},"retry":{"max_attempts":3,"backoff_seconds":60,"backoff_multiplier":2},"next":"done"},
	{"id":"done","type":"end"}]}`

// A running execution between two attempts of its node: the attempt that failed, of how
// many, and when the next starts (the engine's back-off from the failed attempt's entry), as a
// timer too; the workers alive.
func TestProgressOfARetryBackoff(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	f := newFixture(t, func(d *Deps) { d.Now = func() time.Time { return now } })
	ctx := context.Background()
	if _, err := f.p.PublishFlow(ctx, "", []byte(retryFlow), ""); err != nil {
		t.Fatal(err)
	}
	failed := now.Add(-10 * time.Second)
	st := &state.Execution{ExecutionID: "ex_retry", TenantID: "default", FlowID: "flaky", FlowVersion: "1", Status: state.Running,
		CurrentNode: "a", StartTime: now.Add(-time.Minute), LastUpdate: failed, Context: map[string]any{}, NodeAttempts: map[string]int{"a": 2},
		Timeline: []state.TimelineEntry{{Seq: 1, Time: state.Stamp(failed.Add(-time.Minute)), Event: "retry", Node: "a", Detail: "attempt 1 of 3 failed"},
			{Seq: 2, Time: state.Stamp(failed), Event: "retry", Node: "a", Detail: "attempt 2 of 3 failed: connection refused; next in 2m0s"}}}
	f.save(st)
	shown, err := f.p.Show(ctx, "", "ex_retry")
	if err != nil {
		t.Fatal(err)
	}
	pr := shown.Progress
	if pr == nil || pr.Retry == nil {
		t.Fatalf("no retry report: %+v", pr)
	}
	r := pr.Retry
	if r.Attempt != 2 || r.MaxAttempts != 3 || !r.Next.Equal(failed.Add(2*time.Minute)) || r.NextInMillis != 110000 ||
		r.Detail != "attempt 2 of 3 failed: connection refused; next in 2m0s" {
		t.Fatalf("retry %+v", r)
	}
	if !strings.HasPrefix(pr.Text, "retry back-off: attempt 2 of 3 of node a failed; the next attempt starts in 1m50s") {
		t.Fatalf("text %q", pr.Text)
	}
	if pr.Workers.Alive != 0 {
		t.Fatalf("workers %+v", pr.Workers)
	}
	if len(shown.Timers) != 1 || shown.Timers[0].Kind != "retry_backoff" || shown.Timers[0].InMs != 110000 || shown.Timers[0].Node != "a" {
		t.Fatalf("timers %+v", shown.Timers)
	}

	// Without a retry in progress: the workers that run it, or none.
	st.NodeAttempts = nil
	f.save(st)
	if shown, _ = f.p.Show(ctx, "", "ex_retry"); shown.Progress.Retry != nil || !strings.Contains(shown.Progress.Text, "no worker role registered") {
		t.Fatalf("no worker: %+v", shown.Progress)
	}
	f.registerInstance("w-1", "worker", "")
	if shown, _ = f.p.Show(ctx, "", "ex_retry"); shown.Progress.Workers.Alive != 1 || !strings.Contains(shown.Progress.Text, "worker role: 1 alive") ||
		len(shown.Timers) != 0 {
		t.Fatalf("a worker: %+v %+v", shown.Progress, shown.Timers)
	}
}

// A queued start held by its tenant's running quota (full, deferred twice by a worker), then
// by its config family (the live workers run another), then by nothing but a busy worker.
func TestQueuedWaitQuotaAndFamily(t *testing.T) {
	f := newFixture(t, func(d *Deps) {
		d.Producer = queue.NewProducer(queue.Redis(redistest.Client(t)), d.Producer.Stream(), queue.Generations{Family: "cf1-aaaaaaaaaaaa"}, 1<<20, nil)
	})
	ctx := context.Background()
	if _, err := f.p.PublishFlow(ctx, "", []byte(askFlow), ""); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Do(ctx, f.c.B().Hset().Key(keys.MustFor(f.root, "").TenantQuota()).FieldValue().FieldValue("default", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.AdmitRunning(ctx, store.RunningAdmit{Tenant: "default", ExecutionID: "ex_holder", Now: time.Now(), TTL: time.Hour, Limit: 0}); err != nil {
		t.Fatal(err)
	}
	id := engine.NewExecutionID()
	if _, err := f.p.d.Producer.Enqueue(ctx, queue.Envelope{Kind: queue.KindStart, TenantID: "default", FlowID: "ask", FlowVersion: "1",
		ExecutionID: id, Input: json.RawMessage(`{}`), QuotaDeferCount: 2}); err != nil {
		t.Fatal(err)
	}
	f.registerInstance("w-same", "worker", "cf1-aaaaaaaaaaaa")
	shown, err := f.p.Show(ctx, "", id)
	if err != nil || shown.Queued == nil {
		t.Fatalf("show: %+v %v", shown, err)
	}
	w := shown.Queued.Wait
	if w == nil || w.Quota == nil || !w.Quota.Full || w.Quota.Running != 1 || w.DeferCount != 2 || w.Family != nil ||
		!strings.Contains(w.Text, "tenant default runs 1 execution(s), its limit") || !strings.Contains(w.Text, "deferred this start 2 time(s)") ||
		!strings.Contains(shown.Queued.Text, w.Text) {
		t.Fatalf("quota wait: %+v", w)
	}

	// The quota is lifted; the only live worker runs another family.
	if err := f.c.Do(ctx, f.c.B().Hdel().Key(keys.MustFor(f.root, "").TenantQuota()).Field("default").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := f.p.d.Registry.Deregister(ctx, "w-same"); err != nil {
		t.Fatal(err)
	}
	f.registerInstance("w-other", "worker", "cf1-bbbbbbbbbbbb")
	shown, _ = f.p.Show(ctx, "", id)
	w = shown.Queued.Wait
	if w == nil || w.Family == nil || w.Family.Task != "cf1-aaaaaaaaaaaa" || len(w.Family.Workers) != 1 || w.Family.Workers[0] != "cf1-bbbbbbbbbbbb" ||
		!strings.Contains(w.Text, "leaves it pending") || w.Quota == nil || w.Quota.Full {
		t.Fatalf("family wait: %+v", w)
	}
	// A worker of its family: nothing holds it but the queue.
	f.registerInstance("w-same", "worker", "cf1-aaaaaaaaaaaa")
	if shown, _ = f.p.Show(ctx, "", id); shown.Queued.Wait == nil || shown.Queued.Wait.Family != nil {
		t.Fatalf("a worker of its family: %+v", shown.Queued.Wait)
	}
}

// The list's due-time filter: suspended executions whose due time is before, or at or after,
// a time; a running one and a wait without a due time match neither.
func TestListByDueTime(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	in1h, in3h := now.Add(time.Hour), now.Add(3*time.Hour)
	for i, s := range []*state.Suspend{{Kind: state.SuspendDelay, Node: "n", Due: &in1h}, {Kind: state.SuspendEvent, Node: "n", Due: &in3h},
		{Kind: state.SuspendEvent, Node: "n"}, nil} {
		status := state.Suspended
		if s == nil {
			status = state.Running
		}
		f.save(&state.Execution{ExecutionID: "ex_due" + string(rune('a'+i)), TenantID: "default", FlowID: "f", FlowVersion: "1", Status: status,
			CurrentNode: "n", StartTime: now.Add(time.Duration(i) * time.Second), LastUpdate: now, Context: map[string]any{}, Suspend: s})
	}
	ids := func(req ListRequest) string {
		t.Helper()
		page, err := f.p.List(ctx, "", req)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range page.Items {
			out = append(out, s.ExecutionID)
		}
		return strings.Join(out, ",")
	}
	two := now.Add(2 * time.Hour)
	if got := ids(ListRequest{WakeBefore: two}); got != "ex_duea" {
		t.Errorf("due before +2h: %s", got)
	}
	if got := ids(ListRequest{WakeAfter: two}); got != "ex_dueb" {
		t.Errorf("due after +2h: %s", got)
	}
	if got := ids(ListRequest{WakeAfter: in1h, WakeBefore: in3h}); got != "ex_duea" {
		t.Errorf("due in [+1h, +3h): %s", got)
	}
	if got := ids(ListRequest{}); got != "ex_dued,ex_duec,ex_dueb,ex_duea" {
		t.Errorf("no filter: %s", got)
	}
}
