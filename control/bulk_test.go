package control

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
)

// Bulk jobs against a real Redis and a real SQLite file: the dry run's count is what a run
// selects; a run applies each item through the single-item operation and records the
// refusals with their codes; a tenant's job touches only its executions; a runner that stops
// mid-job leaves it to the next, which resumes it without applying an item twice; one that dies
// has its items in hand reported as interrupted.

// testClock is the job store's clock, moved by the test (a lease runs out when it says so).
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type bulkFixture struct {
	*fixture
	db    *sqlite.DB
	clock *testClock
	flow  *engine.Flow
}

func newBulkFixture(t *testing.T) *bulkFixture {
	t.Helper()
	f := newFixture(t)
	clock := &testClock{t: time.Now()}
	db, err := sqlite.Open(context.Background(), "sqlite:///"+filepath.Join(t.TempDir(), "console.db"), sqlite.WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	bf := &bulkFixture{fixture: f, db: db, clock: clock}
	for _, tenant := range []string{"acme", "other"} {
		pub, err := f.p.PublishFlow(context.Background(), tenant, []byte(askFlow), "")
		if err != nil {
			t.Fatal(err)
		}
		bf.flow = pub.Flow
	}
	return bf
}

func (bf *bulkFixture) bulk(runner string, batch int) *Bulk {
	return NewBulk(bf.p, bf.db, BulkSettings{Runner: runner, Batch: batch, Lease: time.Minute, Idle: 50 * time.Millisecond,
		OnError: func(err error) { bf.t.Errorf("runner %s: %v", runner, err) }})
}

// exec saves an execution of flow ask; started orders them (the index is by start time).
func (bf *bulkFixture) exec(tenant, id string, status state.Status, started time.Time) {
	bf.t.Helper()
	st := &state.Execution{ExecutionID: id, TenantID: tenant, FlowID: "ask", FlowVersion: "1", FlowHash: bf.flow.Hash,
		FlowHashAlgo: bf.flow.HashAlgo, Status: status, CurrentNode: "ask", Context: map[string]any{}, StartTime: started, LastUpdate: started}
	switch status {
	case state.Suspended:
		st.Suspend = &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: started}
	case state.Error:
		st.Error = &state.ErrorInfo{Type: engine.ErrTypeNode, Node: "ask", Message: "boom"}
	}
	bf.save(st)
}

// runAll runs rounds until the job is finished.
func (bf *bulkFixture) runAll(b *Bulk, tenant, id string) BulkJob {
	bf.t.Helper()
	ctx := context.Background()
	for range 100 {
		if _, err := b.RunOnce(ctx); err != nil {
			bf.t.Fatal(err)
		}
		j, err := b.Job(ctx, tenant, id)
		if err != nil {
			bf.t.Fatal(err)
		}
		if j.Status.Finished() {
			return j
		}
	}
	bf.t.Fatal("the job did not finish in 100 rounds")
	return BulkJob{}
}

func (bf *bulkFixture) items(b *Bulk, tenant, id string, st sqlite.JobItemState) map[string]sqlite.JobItem {
	bf.t.Helper()
	out := map[string]sqlite.JobItem{}
	for cursor := ""; ; {
		p, err := b.Items(context.Background(), tenant, id, st, cursor, 2)
		if err != nil {
			bf.t.Fatal(err)
		}
		for _, it := range p.Items {
			out[it.Item] = it
		}
		if cursor = p.Next; cursor == "" {
			return out
		}
	}
}

func TestBulkCancelByFilter(t *testing.T) {
	bf := newBulkFixture(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Add(-time.Hour)
	for i, c := range []struct {
		tenant, id string
		status     state.Status
	}{
		{"acme", "ex_r1", state.Running}, {"acme", "ex_r2", state.Running}, {"acme", "ex_s1", state.Suspended},
		{"acme", "ex_c1", state.Completed}, {"acme", "ex_c2", state.Completed}, {"acme", "ex_x1", state.Cancelled},
		{"other", "ex_o1", state.Running}, {"other", "ex_o2", state.Suspended},
	} {
		bf.exec(c.tenant, c.id, c.status, t0.Add(time.Duration(i)*time.Minute))
	}
	b := bf.bulk("r1", 2)

	dry, job, err := b.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkCancel, Filter: BulkFilter{Status: state.Running}}, true, "ann")
	if err != nil || job != nil || dry.Count != 2 || dry.Truncated || len(dry.Sample) != 2 {
		t.Fatalf("dry run of the running: %+v %v %v", dry, job, err)
	}
	dry, _, _ = b.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkCancel, Filter: BulkFilter{FlowID: "ask"}}, true, "ann")
	if dry.Count != 6 || dry.Sample[0] != "ex_x1" { // newest first
		t.Fatalf("dry run of flow ask: %+v", dry)
	}
	dry, _, _ = b.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkCancel, MaxItems: 4}, true, "ann")
	if dry.Count != 4 || !dry.Truncated {
		t.Fatalf("a capped dry run: %+v", dry)
	}
	after := t0.Add(150 * time.Second)
	dry, _, _ = b.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkCancel, Filter: BulkFilter{StartedAfter: &after}}, true, "ann")
	if dry.Count != 3 {
		t.Fatalf("a dry run of those started after %s: %+v", after, dry)
	}

	sel, job, err := b.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkCancel, Filter: BulkFilter{FlowID: "ask"}}, false, "ann")
	if err != nil || job == nil || job.Total != sel.Count || sel.Count != 6 || job.Status != sqlite.JobPending || job.Action != BulkCancel {
		t.Fatalf("submit: %+v %+v %v", sel, job, err)
	}
	done := bf.runAll(b, "acme", job.ID)
	if done.Status != sqlite.JobCompleted || done.Succeeded != 4 || done.Failed != 2 || done.Remaining != 0 {
		t.Fatalf("finished %+v", done)
	}
	failed := bf.items(b, "acme", job.ID, sqlite.ItemFailed)
	if len(failed) != 2 || failed["ex_c1"].Code != "terminal" || failed["ex_c2"].Code != "terminal" || failed["ex_c1"].Error == "" {
		t.Fatalf("failures %+v", failed)
	}
	all := bf.items(b, "acme", job.ID, "")
	if all["ex_r1"].Result != "cancel_requested" || all["ex_x1"].Result != "already_cancelled" {
		t.Fatalf("items %+v", all)
	}
	// The single cancel's effect, the same for each: the flag is up. The other tenant's are not touched.
	ts, _ := bf.store.Tenant("acme")
	if up, err := ts.Cancelled(ctx, "ex_r1"); err != nil || !up {
		t.Fatalf("ex_r1's cancel flag: %v %v", up, err)
	}
	other, _ := bf.store.Tenant("other")
	if up, _ := other.Cancelled(ctx, "ex_o1"); up {
		t.Fatal("a job of acme cancelled another tenant's execution")
	}
	if _, err := b.Job(ctx, "other", job.ID); AsRefusal(err) == nil || AsRefusal(err).Code != "job_not_found" {
		t.Fatalf("another tenant reads the job: %v", err)
	}
	page, err := b.Jobs(ctx, "acme", "", 10)
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != job.ID {
		t.Fatalf("acme's jobs %+v %v", page, err)
	}
	if page, _ = b.Jobs(ctx, "other", "", 10); len(page.Items) != 0 {
		t.Fatalf("other's jobs %+v", page)
	}
	if _, err := b.Cancel(ctx, "acme", job.ID); AsRefusal(err) == nil || AsRefusal(err).Code != "job_finished" {
		t.Fatalf("cancel of a finished job: %v", err)
	}
}

func TestBulkRetryDeleteAndRefusals(t *testing.T) {
	bf := newBulkFixture(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Add(-time.Hour)
	bf.exec("acme", "ex_e1", state.Error, t0)
	bf.exec("acme", "ex_e2", state.Error, t0.Add(time.Second))
	bf.exec("acme", "ex_r1", state.Running, t0.Add(2*time.Second))
	ts, _ := bf.store.Tenant("acme")
	for range store.G1MaxWakeups {
		if _, err := ts.Incr(ctx, keys.FamG1Wakeups, "ex_e2"); err != nil {
			t.Fatal(err)
		}
	}
	b := bf.bulk("r1", 10)
	_, job, err := b.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkRetry}, false, "ann")
	if err != nil {
		t.Fatal(err)
	}
	done := bf.runAll(b, "acme", job.ID)
	items := bf.items(b, "acme", job.ID, "")
	if done.Succeeded != 1 || items["ex_e1"].Result != "enqueued" || items["ex_e2"].Code != "retry_budget" || items["ex_r1"].Code != "resume_refused" {
		t.Fatalf("retry: %+v %+v", done, items)
	}

	_, job, _ = b.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkDelete, Filter: BulkFilter{Status: state.Running}}, false, "ann")
	bf.runAll(b, "acme", job.ID)
	if it := bf.items(b, "acme", job.ID, "")["ex_r1"]; it.Code != "running" {
		t.Fatalf("delete of a running one without force: %+v", it)
	}
	_, job, _ = b.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkDelete, Filter: BulkFilter{Status: state.Running, Force: true}}, false, "ann")
	bf.runAll(b, "acme", job.ID)
	if it := bf.items(b, "acme", job.ID, "")["ex_r1"]; it.Result != "deleted" {
		t.Fatalf("delete with force: %+v", it)
	}
	if _, err := ts.Load(ctx, "ex_r1"); err == nil {
		t.Fatal("deleted, yet its state is there")
	}

	for _, c := range []struct {
		req  BulkRequest
		code string
	}{
		{BulkRequest{Tenant: "acme", Action: "purge"}, "invalid_action"},
		{BulkRequest{Tenant: "acme", Action: BulkReplay, Filter: BulkFilter{Status: state.Error}}, "invalid_filter"},
		{BulkRequest{Tenant: "acme", Action: BulkCancel, Filter: BulkFilter{Reason: "poison"}}, "invalid_filter"},
		{BulkRequest{Tenant: "acme", Action: BulkCancel, Filter: BulkFilter{Force: true}}, "invalid_filter"},
		{BulkRequest{Tenant: "acme", Action: BulkCancel, Filter: BulkFilter{Status: "lost"}}, "invalid_filter"},
		{BulkRequest{Tenant: "acme", Action: BulkCancel, Filter: BulkFilter{FlowID: "bad id!"}}, "invalid_filter"},
		{BulkRequest{Tenant: "acme", Action: BulkCancel, MaxItems: MaxBulkItems + 1}, "invalid_max_items"},
		{BulkRequest{Tenant: "Bad!", Action: BulkCancel}, "invalid_tenant"},
	} {
		_, _, err := b.Submit(ctx, c.req, true, "ann")
		refusal(t, string(c.req.Action)+" "+c.code, err, Invalid, c.code)
	}
}

// A replay by filter selects the tenant's dead letters of a reason, each replayed once: a
// second job finds them replayed already.
func TestBulkReplay(t *testing.T) {
	bf := newBulkFixture(t)
	ctx := context.Background()
	for i, c := range []struct{ tenant, reason string }{{"acme", "poison"}, {"acme", "poison"}, {"acme", "max_deliveries"}, {"other", "poison"}} {
		env := queue.Envelope{Kind: queue.KindStart, TenantID: c.tenant, FlowID: "ask", FlowVersion: "1", ExecutionID: engine.NewExecutionID(), Input: []byte(`{}`)}
		if _, err := bf.p.d.Producer.Enqueue(ctx, env); err != nil {
			t.Fatal(err)
		}
		ds, err := bf.q.Read(ctx, "c", 1, time.Second)
		if err != nil || len(ds) != 1 {
			t.Fatalf("read %d: %v %v", i, ds, err)
		}
		if err := bf.q.DeadLetter(ctx, ds[0], c.reason); err != nil {
			t.Fatal(err)
		}
	}
	b := bf.bulk("r1", 10)
	dry, _, err := b.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkReplay, Filter: BulkFilter{Reason: "poison", FlowID: "ask"}}, true, "ann")
	if err != nil || dry.Count != 2 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	for _, want := range []string{"replayed", "already_replayed"} {
		_, job, err := b.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkReplay, Filter: BulkFilter{Reason: "poison"}}, false, "ann")
		if err != nil {
			t.Fatal(err)
		}
		done := bf.runAll(b, "acme", job.ID)
		for id, it := range bf.items(b, "acme", job.ID, "") {
			if it.Result != want {
				t.Fatalf("%s: %+v, want %s", id, it, want)
			}
		}
		if done.Succeeded != 2 || done.Failed != 0 {
			t.Fatalf("replay: %+v", done)
		}
	}
}

// A console that stops mid-job (a drain) leaves it to the next, which goes on where it
// stopped: every item applied once. One that dies leaves the items it had in hand to the next
// claim after its lease, which reports them interrupted and applies the rest.
func TestBulkJobSurvivesARestart(t *testing.T) {
	bf := newBulkFixture(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Add(-time.Hour)
	for i := range 7 {
		bf.exec("acme", "ex_"+string(rune('a'+i)), state.Running, t0.Add(time.Duration(i)*time.Second))
	}
	first := bf.bulk("console-1", 2)
	_, job, err := first.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkCancel}, false, "ann")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := first.RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("first batch: %d %v", n, err)
	}
	first.Stop(ctx) // the drain: its lease is released
	second := bf.bulk("console-2", 2)
	if err := second.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var done BulkJob
	for deadline := time.Now().Add(10 * time.Second); !done.Status.Finished(); time.Sleep(20 * time.Millisecond) {
		if done, err = second.Job(ctx, "acme", job.ID); err != nil || time.Now().After(deadline) {
			t.Fatalf("the second console did not finish the job: %+v %v", done, err)
		}
	}
	second.Stop(ctx)
	if done.Succeeded != 7 || done.Failed != 0 {
		t.Fatalf("after the restart: %+v", done)
	}
	for id, it := range bf.items(second, "acme", job.ID, "") {
		if it.Result != "cancel_requested" { // already_cancelled would be a second cancel
			t.Fatalf("%s applied twice? %+v", id, it)
		}
	}

	// A runner that dies with two items in hand.
	for i := range 3 {
		bf.exec("acme", "ex_z"+string(rune('a'+i)), state.Suspended, t0.Add(time.Duration(10+i)*time.Second))
	}
	_, job, _ = second.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkCancel, Filter: BulkFilter{Status: state.Suspended}}, false, "ann")
	if _, in, err := bf.db.ClaimJobItems(ctx, "acme", job.ID, "console-dead", 2, time.Minute); err != nil || len(in) != 2 {
		t.Fatalf("the dying console's claim: %v %v", in, err)
	}
	third := bf.bulk("console-3", 2)
	if n, err := third.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("a live lease is honoured: %d %v", n, err)
	}
	bf.clock.advance(2 * time.Minute)
	done = bf.runAll(third, "acme", job.ID)
	failed := bf.items(third, "acme", job.ID, sqlite.ItemFailed)
	if done.Succeeded != 1 || done.Failed != 2 || len(failed) != 2 || failed["ex_zc"].Code != sqlite.CodeInterrupted {
		t.Fatalf("after a crash: %+v %+v", done, failed)
	}
}

// A cancelled job applies nothing after the batch in hand; the rest stays not applied.
func TestBulkJobCancel(t *testing.T) {
	bf := newBulkFixture(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Add(-time.Hour)
	for i := range 5 {
		bf.exec("acme", "ex_"+string(rune('a'+i)), state.Running, t0.Add(time.Duration(i)*time.Second))
	}
	b := bf.bulk("r1", 2)
	_, job, _ := b.Submit(ctx, BulkRequest{Tenant: "acme", Action: BulkCancel}, false, "ann")
	if _, err := b.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if j, err := b.Cancel(ctx, "acme", job.ID); err != nil || j.Status != sqlite.JobCancelled {
		t.Fatalf("cancel: %+v %v", j, err)
	}
	if n, err := b.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("a round after the cancel applied %d: %v", n, err)
	}
	j, _ := b.Job(ctx, "acme", job.ID)
	if j.Succeeded != 2 || j.Remaining != 3 || j.Status != sqlite.JobCancelled {
		t.Fatalf("cancelled job %+v", j)
	}
}
