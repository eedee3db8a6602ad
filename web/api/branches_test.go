package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

const branchFlow = `{"id":"spend","version":"1","start":"small","nodes":[
	{"id":"small","type":"condition","params":{"expr":"INPUT.amount <= 100"},"branches":{"true":"ok","false":"ask"}},
	{"id":"ask","type":"approval","params":{"message":"ok?","on_reject":"no"},"next":"ok"},
	{"id":"ok","type":"end"},{"id":"no","type":"end"}]}`

// TestExecutionViewSaysWhyEachBranchWasTaken: GET /api/executions/{id} has `branches`, the
// reason each branching step recorded and where it went (engine.Branches, what the execution
// page shows): a run suspended at an approval after the condition's false branch, then the
// same run rejected.
func TestExecutionViewSaysWhyEachBranchWasTaken(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ctx := context.Background()
	ed := f.Key(f.APIKey(t, "default", sqlite.RoleEditor))
	ed.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(branchFlow)})
	def, err := engine.Parse([]byte(branchFlow), engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	// The engine runs it as a worker would; its state is saved where the worker leaves it.
	mem := store.NewMemory()
	ex := &engine.Executor{Store: mem, Cancel: mem, Clock: engine.SystemClock{}, Settings: engine.DefaultSettings}
	st, err := ex.Start(ctx, def, engine.StartRequest{Input: map[string]any{"amount": 500}})
	if err != nil {
		t.Fatal(err)
	}
	st.TenantID, st.FlowVersion = "default", "1"
	f.Save(t, st)
	var view api.ExecutionView
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/executions/"+st.ExecutionID, nil).Decode(t, &view)
	if len(view.Branches) != 1 || view.Branches[0].Node != "small" || view.Branches[0].Why != "INPUT.amount <= 100 is false (INPUT.amount = 500)" ||
		view.Branches[0].To != "ask" || view.Branches[0].Seq == 0 {
		t.Fatalf("suspended: branches %+v", view.Branches)
	}
	if st, err = ex.Resume(ctx, def, st.ExecutionID, engine.ResumeApproval, map[string]any{"approved": false, "by": "kim"}); err != nil {
		t.Fatal(err)
	}
	st.TenantID, st.FlowVersion = "default", "1"
	f.Save(t, st)
	var raw map[string]any
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/executions/"+st.ExecutionID, nil).Decode(t, &raw)
	bs, _ := raw["branches"].([]any)
	if len(bs) != 2 {
		t.Fatalf("completed: %v", raw["branches"])
	}
	if b := bs[1].(map[string]any); b["node"] != "ask" || b["why"] != "rejected by kim" || b["to"] != "no" {
		t.Fatalf("the approval's branch: %v", b)
	}

	// A state from before the reasons: each branching node's last result, marked as such.
	now := st.LastUpdate
	f.Save(t, &state.Execution{ExecutionID: "ex_old", TenantID: "default", FlowID: "spend", FlowVersion: "1", Status: state.Completed,
		StartTime: now, LastUpdate: now, EndTime: &now, Context: map[string]any{state.ContextNodes: map[string]any{"small": map[string]any{"result": true}}}})
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_old", nil).Decode(t, &view)
	if len(view.Branches) != 1 || view.Branches[0].Why != "the condition was true" || !view.Branches[0].FromContext {
		t.Fatalf("older state: %+v", view.Branches)
	}
}
