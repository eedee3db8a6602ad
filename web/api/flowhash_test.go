package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// TestFlowHashOverride: an execution whose flow hash differs from the published definition's in
// algorithm and value (as after an engine upgrade) is refused with 409 flow_hash_mismatch — the
// hashes, the override as the unblock hint and the resumes it lets pass among the accepted —
// until the resume carries allow_flow_hash_change; the override reaches the worker in the
// resume's data and is marked in the audit row. A definition changed under the same algorithm
// is refused even with it.
func TestFlowHashOverride(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ed := f.Key(f.APIKey(t, "default", sqlite.RoleEditor))
	ed.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(webtest.ApprovalFlow)})
	def, err := engine.Parse([]byte(webtest.ApprovalFlow), engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	suspended := func(id, algo, hash string) {
		f.Save(t, &state.Execution{ExecutionID: id, TenantID: "default", FlowID: "ask", FlowVersion: "1", FlowHash: hash, FlowHashAlgo: algo,
			Status: state.Suspended, CurrentNode: "ask", Context: map[string]any{}, StartTime: now, LastUpdate: now,
			Suspend: &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: now}})
	}
	old := strings.Repeat("0", 64)
	suspended("ex_upgraded", "sha256-canonical-json-v0", old)
	suspended("ex_changed", def.HashAlgo, old)
	answer := map[string]any{"type": "approval", "data": map[string]any{"approved": true}}

	p := ed.Want(t, http.StatusConflict, http.MethodPost, "/api/executions/ex_upgraded/resume", answer).Problem(t)
	if p.Code != "flow_hash_mismatch" || p.Fields["upgrade_suspected"] != true || p.Fields["stored_hash"] != old || p.Fields["current_hash"] != def.Hash ||
		!strings.Contains(p.Unblock, "allow_flow_hash_change") {
		t.Fatalf("mismatch: %+v", p)
	}
	var offered bool
	for _, h := range p.Accepted {
		if h.Type == engine.ResumeApproval && h.AllowFlowHashChange && strings.Contains(h.Command, "--allow-flow-hash-change") {
			offered = true
		}
	}
	if !offered {
		t.Fatalf("the override is not among the accepted: %+v", p.Accepted)
	}
	if e, ok := f.Audited(t, "execution.resume"); !ok || e.Outcome != sqlite.OutcomeDeny || e.Reason != "flow_hash_mismatch" {
		t.Fatalf("refusal audit: %+v", e)
	}
	// The execution's view offers it too.
	var view api.ExecutionView
	ed.Want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_upgraded", nil).Decode(t, &view)
	if len(view.Hints) < 2 || !view.Hints[1].AllowFlowHashChange {
		t.Fatalf("hints: %+v", view.Hints)
	}

	// Non-object data cannot carry the override.
	if p := ed.Want(t, http.StatusBadRequest, http.MethodPost, "/api/executions/ex_upgraded/resume",
		map[string]any{"type": "approval", "data": "yes", "allow_flow_hash_change": true}).Problem(t); p.Code != "invalid_data" {
		t.Fatalf("string data: %+v", p)
	}
	answer["allow_flow_hash_change"] = true
	var done map[string]any
	ed.Want(t, http.StatusOK, http.MethodPost, "/api/executions/ex_upgraded/resume", answer).Decode(t, &done)
	if done["enqueued"] != true || done["allow_flow_hash_change"] != true {
		t.Fatalf("override: %v", done)
	}
	data := f.Answers(t)["ex_upgraded"]
	if data["approved"] != true || data[engine.AllowFlowHashChangeKey] != true {
		t.Fatalf("the resume's data: %v", data)
	}
	e, ok := f.Audited(t, "execution.resume")
	var details map[string]any
	if ok {
		_ = json.Unmarshal(e.Details, &details)
	}
	if !ok || e.Outcome != sqlite.OutcomeAllow || e.Target != "ex_upgraded" || details["allow_flow_hash_change"] != true {
		t.Fatalf("override audit: %+v", e)
	}

	// Same algorithm, another hash: the definition changed; no override lets it pass.
	p = ed.Want(t, http.StatusConflict, http.MethodPost, "/api/executions/ex_changed/resume", answer).Problem(t)
	if p.Code != "resume_refused" || !strings.Contains(p.Detail, "changed") {
		t.Fatalf("changed definition: %+v", p)
	}
}
