package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// TestStartDispatchesByCapacity: with capacity dispatch on, a start over the API goes to the
// running worker with the most free slots of a fresh snapshot (target_instance_id in its
// stream entry), the decision and its candidates are in the ledger and in the answer; in
// shadow mode the decision is only recorded.
func TestStartDispatchesByCapacity(t *testing.T) {
	t.Parallel()
	for _, shadow := range []bool{false, true} {
		f := webtest.New(t, webtest.WithDispatch(shadow))
		ctx := context.Background()
		ed := f.Key(f.APIKey(t, "default", sqlite.RoleEditor))
		ed.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(webtest.ApprovalFlow)})
		reg := store.NewRegistry(store.OnRedis(f.C), f.Root)
		now := time.Now().UTC()
		for _, rec := range []store.InstanceRecord{
			{InstanceID: "w-busy", Role: "worker", Status: "running", Queue: f.Root + ":flow:queue", ActiveTasks: 2, Capacity: 2, HeartbeatAt: now},
			{InstanceID: "w-free", Role: "worker", Status: "running", Queue: f.Root + ":flow:queue", ActiveTasks: 1, Capacity: 2, HeartbeatAt: now},
			{InstanceID: "w-stale", Role: "worker", Status: "running", Queue: f.Root + ":flow:queue", Capacity: 8, HeartbeatAt: now.Add(-2 * time.Minute), TTLMillis: 600000},
		} {
			if err := reg.Register(ctx, rec, 10*time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		var started api.ExecutionStarted
		ed.Want(t, http.StatusCreated, http.MethodPost, "/api/executions", map[string]any{"flow_id": "ask"}).Decode(t, &started)
		d := started.Dispatch
		if d == nil || d.Target != "w-free" || d.LedgerID == "" || d.Error != "" || d.Considered != 3 || d.Eligible != 1 || started.WorkersAlive != 3 {
			t.Fatalf("shadow %v: dispatch %+v", shadow, d)
		}
		envs := f.StreamEntries(t)
		want, mode := "w-free", store.DispatchApplied
		if shadow {
			want, mode = "", store.DispatchShadow
		}
		if len(envs) != 1 || envs[0].TargetInstanceID != want {
			t.Fatalf("shadow %v: the start's target %+v, want %q", shadow, envs, want)
		}
		recs, err := f.Ledger.Recent(ctx, 5)
		if err != nil || len(recs) != 1 || recs[0].ID != d.LedgerID || recs[0].Mode != mode || recs[0].Target != "w-free" || len(recs[0].Candidates) != 3 ||
			recs[0].ExecutionID != started.ExecutionID || recs[0].Actor != "console-test" {
			t.Fatalf("shadow %v: ledger %+v %v", shadow, recs, err)
		}
		for _, c := range recs[0].Candidates {
			if c.Eligible != (c.InstanceID == "w-free") {
				t.Fatalf("candidate %+v", c)
			}
		}
	}
}
