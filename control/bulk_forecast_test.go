package control

import (
	"context"
	"maps"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
)

// A dry run's forecast is what the job then does: for each action, over executions of every
// kind of status a selection meets, the outcome forecast for each item is the one the job's
// runner records for it (BulkApply through the single-item operation), and the dry run's
// counts are those outcomes counted.

// forecastExecutions saves, in tenant, one execution of each kind a bulk action decides
// differently, and returns their ids.
func (bf *bulkFixture) forecastExecutions(tenant string) []string {
	bf.t.Helper()
	ctx := context.Background()
	if _, err := bf.p.PublishFlow(ctx, tenant, []byte(askFlow), ""); err != nil {
		bf.t.Fatal(err)
	}
	t0 := time.Now().UTC().Add(-time.Hour)
	var ids []string
	for i, c := range []struct {
		id     string
		status state.Status
		edit   func(*state.Execution)
	}{
		{"ex_completed", state.Completed, nil},
		{"ex_cancelled", state.Cancelled, nil},
		{"ex_running", state.Running, nil},
		{"ex_pending", state.Pending, nil},
		{"ex_suspended", state.Suspended, nil},
		{"ex_retryable", state.Error, nil},
		{"ex_budget", state.Error, nil}, // its retry wake-ups are spent (below)
		{"ex_permanent", state.Error, func(st *state.Execution) {
			st.Error = &state.ErrorInfo{Type: engine.ErrTypeStepLimit, Node: "ask", Message: "used all its steps", Permanent: true}
		}},
		{"ex_hash", state.Error, func(st *state.Execution) { st.FlowHashAlgo, st.FlowHash = "sha1-v0", "0ld" }},
		{"ex_unpublished", state.Error, func(st *state.Execution) { st.FlowVersion = "9" }},
		{"ex_unpublished2", state.Error, func(st *state.Execution) { st.FlowVersion = "9" }},
	} {
		bf.exec(tenant, c.id, c.status, t0.Add(time.Duration(i)*time.Second))
		if c.edit != nil {
			ts, _ := bf.store.Tenant(tenant)
			st, err := ts.Load(ctx, c.id)
			if err != nil {
				bf.t.Fatal(err)
			}
			c.edit(st)
			bf.save(st)
		}
		ids = append(ids, c.id)
	}
	ts, _ := bf.store.Tenant(tenant)
	for range store.G1MaxWakeups {
		if _, err := ts.Incr(ctx, keys.FamG1Wakeups, "ex_budget"); err != nil {
			bf.t.Fatal(err)
		}
	}
	return ids
}

func TestBulkForecastIsWhatTheJobDoes(t *testing.T) {
	bf := newBulkFixture(t)
	ctx := context.Background()
	b := bf.bulk("r1", 5)
	for _, c := range []struct {
		tenant string
		action BulkAction
		filter BulkFilter
		want   map[string]string // item → the result or refusal code the job records
	}{
		{"f-cancel", BulkCancel, BulkFilter{}, map[string]string{
			"ex_completed": "terminal", "ex_cancelled": "already_cancelled", "ex_running": "cancel_requested", "ex_pending": "cancel_requested",
			"ex_suspended": "cancel_requested", "ex_retryable": "terminal", "ex_permanent": "terminal"}},
		{"f-retry", BulkRetry, BulkFilter{}, map[string]string{
			"ex_completed": "terminal", "ex_cancelled": "terminal", "ex_running": "resume_refused", "ex_pending": "resume_refused",
			"ex_suspended": "resume_refused", "ex_retryable": "enqueued", "ex_budget": "retry_budget", "ex_permanent": "resume_refused",
			"ex_hash": "flow_hash_mismatch", "ex_unpublished": "resume_refused"}},
		{"f-delete", BulkDelete, BulkFilter{}, map[string]string{
			"ex_completed": "deleted", "ex_running": "running", "ex_pending": "running", "ex_suspended": "deleted", "ex_retryable": "deleted"}},
		{"f-force", BulkDelete, BulkFilter{Force: true}, map[string]string{"ex_running": "deleted", "ex_pending": "deleted"}},
	} {
		{
			ids := bf.forecastExecutions(c.tenant)
			req := BulkRequest{Tenant: c.tenant, Action: c.action, Filter: c.filter}
			dry, _, err := b.Submit(ctx, req, true, "ann")
			if err != nil || dry.Forecast == nil || dry.Count != len(ids) {
				t.Fatalf("%s: dry run: %+v %v", c.tenant, dry, err)
			}
			// Each item's forecast, on its state as it is now.
			ts, _ := bf.store.Tenant(c.tenant)
			fc := bf.p.newForecaster(c.tenant, c.action, c.filter)
			forecast := map[string]BulkOutcome{}
			for _, id := range ids {
				st, err := ts.Load(ctx, id)
				if err != nil {
					t.Fatalf("%s: %v", c.tenant, err)
				}
				if forecast[id], err = fc.execution(ctx, st); err != nil {
					t.Fatalf("%s: forecast of %s: %v", c.tenant, id, err)
				}
			}
			if c.action == BulkRetry && len(fc.flows) != 2 {
				t.Errorf("%s: the forecast read %d flow versions, want 2 (ask 1 and ask 9), each once", c.tenant, len(fc.flows))
			}

			sel, job, err := b.Submit(ctx, req, false, "ann")
			if err != nil || sel.Forecast != nil || job == nil || job.Total != len(ids) {
				t.Fatalf("%s: the job: %+v %+v %v", c.tenant, sel, job, err)
			}
			bf.runAll(b, c.tenant, job.ID)
			counted := BulkForecast{Refused: map[string]int{}}
			for id, it := range bf.items(b, c.tenant, job.ID, "") {
				did := BulkOutcome{Result: it.Result, Code: it.Code}
				counted.add(did)
				if f := forecast[id]; f.Result != did.Result || f.Code != did.Code {
					t.Errorf("%s: %s: forecast %s, the job %s (%s)", c.tenant, id, outcomeText(f), outcomeText(did), it.Error)
				}
				if w, ok := c.want[id]; ok && w != did.Result+did.Code {
					t.Errorf("%s: %s: the job recorded %s, want %s", c.tenant, id, outcomeText(did), w)
				}
			}
			if got := *dry.Forecast; got.WillApply != counted.WillApply || got.NothingToDo != counted.NothingToDo || !maps.Equal(got.Refused, counted.Refused) {
				t.Errorf("%s: the dry run forecast %+v, the job did %+v", c.tenant, got, counted)
			}
			if n := dry.Forecast.WillApply + dry.Forecast.NothingToDo + sum(dry.Forecast.Refused); n != dry.Count {
				t.Errorf("%s: the forecast counts %d items of %d", c.tenant, n, dry.Count)
			}
		}
	}
}

// outcomeText is an item's result, or its refusal's code.
func outcomeText(o BulkOutcome) string {
	if o.Code != "" {
		return "refused " + o.Code
	}
	return o.Result
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// A dry run of a replay knows a dead letter replayed already: nothing to do.
func TestBulkForecastReplay(t *testing.T) {
	bf := newBulkFixture(t)
	ctx := context.Background()
	for range 2 {
		env := queue.Envelope{Kind: queue.KindStart, TenantID: "acme", FlowID: "ask", FlowVersion: "1", ExecutionID: engine.NewExecutionID(), Input: []byte(`{}`)}
		if _, err := bf.p.d.Producer.Enqueue(ctx, env); err != nil {
			t.Fatal(err)
		}
		ds, err := bf.q.Read(ctx, "c", 1, time.Second)
		if err != nil || len(ds) != 1 {
			t.Fatalf("read: %v %v", ds, err)
		}
		if err := bf.q.DeadLetter(ctx, ds[0], "poison"); err != nil {
			t.Fatal(err)
		}
	}
	b := bf.bulk("r1", 10)
	req := BulkRequest{Tenant: "acme", Action: BulkReplay, Filter: BulkFilter{Reason: "poison"}}
	for _, want := range []BulkForecast{{WillApply: 2, Refused: map[string]int{}}, {NothingToDo: 2, Refused: map[string]int{}}} {
		dry, _, err := b.Submit(ctx, req, true, "ann")
		if err != nil || dry.Forecast == nil || dry.Forecast.WillApply != want.WillApply || dry.Forecast.NothingToDo != want.NothingToDo ||
			len(dry.Forecast.Refused) != 0 {
			t.Fatalf("dry run: %+v %v, want %+v", dry.Forecast, err, want)
		}
		_, job, err := b.Submit(ctx, req, false, "ann")
		if err != nil {
			t.Fatal(err)
		}
		if done := bf.runAll(b, "acme", job.ID); done.Status != sqlite.JobCompleted || done.Succeeded != 2 {
			t.Fatalf("replay: %+v", done)
		}
	}
}
