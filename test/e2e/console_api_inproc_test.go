//go:build !e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

// The console's HTTP API with the roles in process: `plaita console` on the stack's Redis, driven over
// HTTP with the admin key, beside the CLI and a worker.

// acceptedTypes are the resume types of a refusal's accepted hints, in order.
func acceptedTypes(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, h := range list {
		if m, ok := h.(map[string]any); ok && m["type"] != nil && m["type"] != "" {
			out = append(out, fmt.Sprint(m["type"]))
		}
	}
	return out
}

// TestConsoleAPIAndCLIRefuseTheSameResumes: the same refused resumes through `plaita execution
// resume` and POST /api/executions/{id}/resume — the same code, the same reason, the same
// resumes accepted instead, the same counter key and unblock hint; neither enqueues anything.
func TestConsoleAPIAndCLIRefuseTheSameResumes(t *testing.T) {
	t.Parallel()
	fx := newResumeFixture(t)
	con := fx.startConsole(nil)
	def := `{"id":"gate","version":"1","start":"ask","nodes":[
		{"id":"ask","type":"approval","params":{"message":"ok?"},"next":"done"},
		{"id":"done","type":"end"}]}`
	if code, body := con.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)}); code != http.StatusCreated {
		t.Fatalf("publish over the API: %d %v", code, body)
	}
	hash, err := engine.FlowHash([]byte(def))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	fx.seed("ex_ask", "gate", "1", hash, func(st *state.Execution) {
		st.Status, st.CurrentNode = state.Suspended, "ask"
		st.Suspend = &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: now}
	})
	fx.seed("ex_upgraded", "gate", "1", strings.Repeat("0", 64), func(st *state.Execution) {
		st.Status, st.CurrentNode, st.FlowHashAlgo = state.Suspended, "ask", "sha256-canonical-json-v0" // as before an engine upgrade
		st.Suspend = &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: now}
	})
	fx.seed("ex_run", "gate", "1", hash, func(st *state.Execution) { st.Status, st.CurrentNode = state.Running, "ask" })
	fx.seed("ex_done", "gate", "1", hash, func(st *state.Execution) { st.Status, st.EndTime = state.Completed, &now })
	for _, id := range []string{"ex_g1", "ex_nofail"} {
		fx.seed(id, "gate", "1", hash, func(st *state.Execution) {
			st.Status, st.CurrentNode = state.Error, "ask"
			st.Error = &state.ErrorInfo{Type: engine.ErrTypeNode, Node: "ask", Message: "boom"}
		})
	}
	fx.setCounter(keys.FamG1Wakeups, "ex_g1", int(store.G1MaxWakeups))
	fx.setCounter(keys.FamNoFail, "ex_nofail", int(store.DeterministicFailureMax))
	before := fx.queued()

	for _, tc := range []struct {
		name, id, typ, data, code string
	}{
		{"continue of an approval", "ex_ask", "continue", "", "resume_refused"},
		{"an event for an approval", "ex_ask", "event", `{"type":"x"}`, "resume_refused"},
		{"approval of a running execution", "ex_run", "approval", `{"approved":true}`, "resume_refused"},
		{"an answer across an engine upgrade", "ex_upgraded", "approval", `{"approved":true}`, "flow_hash_mismatch"},
		{"retry past g1wakeups", "ex_g1", "retry", "", "retry_budget"},
		{"retry past nofail", "ex_nofail", "retry", "", "retry_budget"},
		{"resume of a completed execution", "ex_done", "retry", "", "terminal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"execution", "resume", tc.id, "--type", tc.typ, "--json", "--quiet"}
			body := map[string]any{"type": tc.typ}
			if tc.data != "" {
				args = append(args, "--data", tc.data)
				body["data"] = json.RawMessage(tc.data)
			}
			cli := run(t, fx.env, args...)
			status, api := con.call(t, http.MethodPost, "/api/executions/"+tc.id+"/resume", body)
			if cli.code != 1 || status != http.StatusConflict {
				t.Fatalf("CLI exit %d (want 1), API %d (want 409)\n%s%s\n%v", cli.code, status, cli.stdout, cli.stderr, api)
			}
			if api["code"] != tc.code {
				t.Fatalf("API code %v, want %s: %v", api["code"], tc.code, api)
			}
			var c map[string]any
			if err := json.Unmarshal([]byte(cli.stdout), &c); err != nil {
				// A refusal without a resume report (a terminal execution): the CLI prints the
				// refusal's message, which is the API's detail.
				if !strings.Contains(cli.stderr, fmt.Sprint(api["detail"])) {
					t.Fatalf("CLI says %q; API says %q", cli.stderr, api["detail"])
				}
				return
			}
			if c["code"] != api["code"] || c["reason"] != api["detail"] {
				t.Fatalf("CLI %v %q; API %v %q", c["code"], c["reason"], api["code"], api["detail"])
			}
			if ct, at := acceptedTypes(c["accepted"]), acceptedTypes(api["accepted"]); !slices.Equal(ct, at) {
				t.Fatalf("accepted: CLI %v, API %v", ct, at)
			}
			if tc.code == "flow_hash_mismatch" && (c["hint"] != api["unblock"] || c["upgrade_suspected"] != true) {
				t.Fatalf("flow hash: CLI %v / %v; API %v", c["hint"], c["upgrade_suspected"], api["unblock"])
			}
			if tc.code == "retry_budget" {
				// The CLI, on the operator's host, names the counter's key; the API names no
				// storage key (docs/console.md, "Errors"): the same hint, with the key withheld.
				fields, _ := api["fields"].(map[string]any)
				key, _ := c["counter_key"].(string)
				hint, _ := c["hint"].(string)
				if key == "" || fields["counter_key"] != control.RedactedKey || strings.ReplaceAll(hint, key, control.RedactedKey) != api["unblock"] ||
					c["counter"] != fields["counter"] || strings.Contains(fmt.Sprint(api), "plaita:") {
					t.Fatalf("budget: CLI %v / %v / %v; API %v / %v / %v", c["counter"], c["counter_key"], c["hint"], fields["counter"], fields["counter_key"], api["unblock"])
				}
			}
		})
	}
	if after := fx.queued(); after != before {
		t.Fatalf("refused resumes enqueued %d task(s)", after-before)
	}
}

// TestConsoleAPIRunsAFlowWithAWorker: publish over the API, start over the API, a worker runs
// it to its approval, the approval is listed and answered over the API, and it completes with
// who answered in its result.
func TestConsoleAPIRunsAFlowWithAWorker(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	con := s.startConsole(nil)
	s.start("worker", nil)
	def := `{"id":"expense","version":"1","start":"ask","nodes":[
		{"id":"ask","type":"approval","params":{"message":"pay {{ INPUT.amount }}?"},"next":"done"},
		{"id":"done","type":"end"}]}`
	if code, body := con.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)}); code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, body)
	}
	code, started := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "expense", "input": map[string]any{"amount": 12}})
	if code != http.StatusCreated {
		t.Fatalf("start: %d %v", code, started)
	}
	id := fmt.Sprint(started["execution_id"])
	var view map[string]any
	waitFor(t, "the execution to wait for its approval", 60*time.Second, func() bool {
		var c int
		c, view = con.call(t, http.MethodGet, "/api/executions/"+id, nil)
		ex, _ := view["execution"].(map[string]any)
		return c == http.StatusOK && ex != nil && ex["status"] == "suspended"
	}, s.procs...)
	waiting, _ := view["waiting"].(map[string]any)
	if waiting == nil || waiting["by"] != "console" || !strings.Contains(fmt.Sprint(waiting["text"]), "console") {
		t.Fatalf("wake-up report: %v", view)
	}
	if roles, _ := waiting["roles"].(map[string]any); roles == nil || roles["console"].(map[string]any)["alive"].(float64) < 1 {
		t.Fatalf("the console is not counted alive: %v", waiting)
	}
	_, pending := con.call(t, http.MethodGet, "/api/approvals", nil)
	if items, _ := pending["items"].([]any); len(items) != 1 || items[0].(map[string]any)["execution_id"] != id {
		t.Fatalf("pending approvals: %v", pending)
	}
	code, done := con.call(t, http.MethodPost, "/api/approvals/"+id, map[string]any{"approved": true, "comment": "fine"})
	if code != http.StatusOK || done["enqueued"] != true {
		t.Fatalf("approve: %d %v", code, done)
	}
	waitFor(t, "the execution to complete", 60*time.Second, func() bool {
		_, view = con.call(t, http.MethodGet, "/api/executions/"+id, nil)
		ex, _ := view["execution"].(map[string]any)
		return ex != nil && ex["status"] == "completed"
	}, s.procs...)
	// Who answered is in the execution: the approval node's result.
	ex := view["execution"].(map[string]any)
	nodes, _ := ex["context"].(map[string]any)["$NODE"].(map[string]any)
	if ask, _ := nodes["ask"].(map[string]any); ask["by"] != "admin-key" || ask["approved"] != true || ask["comment"] != "fine" {
		t.Fatalf("the approval's result: %v", ex["context"])
	}
	_, list := con.call(t, http.MethodGet, "/api/executions?status=completed", nil)
	if items, _ := list["items"].([]any); len(items) != 1 {
		t.Fatalf("completed list: %v", list)
	}
	// The audit trail has the publish, the start and the resume, with the admin key's fingerprint.
	_, audit := con.call(t, http.MethodGet, "/api/audit?limit=20", nil)
	var actions []string
	for _, e := range audit["items"].([]any) {
		actions = append(actions, fmt.Sprint(e.(map[string]any)["action"]))
	}
	for _, want := range []string{"flow.publish", "execution.start", "approval.answer"} {
		if !slices.Contains(actions, want) {
			t.Errorf("audit lacks %s: %v", want, actions)
		}
	}
}

// TestConsoleAPIAndCLIRefuseTheSameEdits: an event id taken with other data, a cron spec that
// never fires or names its zone inline, a schedule id taken — refused by `plaita event
// publish` / `plaita schedule add` and by the API with the same words (one control operation
// behind both); and the console lists itself in GET /api/services with its metrics address.
func TestConsoleAPIAndCLIRefuseTheSameEdits(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	con := s.startConsole(nil)
	if r := run(t, s.env, "event", "publish", "paid", "--id", "evt-1", "--data", `{"a":1}`, "--quiet"); r.code != 0 {
		t.Fatalf("publish: exit %d %s", r.code, r.stderr)
	}
	code, api := con.call(t, http.MethodPost, "/api/events", map[string]any{"type": "paid", "id": "evt-1", "data": map[string]any{"a": 2}})
	cli := run(t, s.env, "event", "publish", "paid", "--id", "evt-1", "--data", `{"a":3}`, "--quiet")
	if code != http.StatusConflict || api["code"] != "event_conflict" || cli.code != 1 || !strings.Contains(cli.stderr, fmt.Sprint(api["detail"])) {
		t.Fatalf("event id taken: API %d %v; CLI exit %d %s", code, api, cli.code, cli.stderr)
	}
	for _, spec := range []string{"0 0 30 2 *", "CRON_TZ=UTC 0 * * * *", "@every 1s"} {
		code, api := con.call(t, http.MethodPost, "/api/schedules", map[string]any{"cron": spec, "flow_id": "f"})
		cli := run(t, s.env, "schedule", "add", "--cron", spec, "--flow", "f", "--quiet")
		if code != http.StatusBadRequest || api["code"] != "invalid_cron" || cli.code != 2 || !strings.Contains(cli.stderr, fmt.Sprint(api["detail"])) {
			t.Errorf("cron %q: API %d %v; CLI exit %d %s", spec, code, api, cli.code, cli.stderr)
		}
	}
	if code, body := con.call(t, http.MethodPost, "/api/schedules", map[string]any{"id": "nightly", "cron": "0 3 * * *", "flow_id": "f"}); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	cli = run(t, s.env, "schedule", "add", "nightly", "--cron", "0 4 * * *", "--flow", "f", "--quiet")
	code, api = con.call(t, http.MethodPost, "/api/schedules", map[string]any{"id": "nightly", "cron": "0 4 * * *", "flow_id": "f"})
	if code != http.StatusConflict || api["code"] != "schedule_exists" || cli.code != 1 || !strings.Contains(cli.stderr, fmt.Sprint(api["detail"])) {
		t.Fatalf("id taken: API %d %v; CLI exit %d %s", code, api, cli.code, cli.stderr)
	}
	if r := run(t, s.env, "schedule", "show", "nightly", "--json", "--quiet"); r.code != 0 || !strings.Contains(r.stdout, `"cron": "0 3 * * *"`) {
		t.Fatalf("the CLI reads what the API wrote: exit %d %s", r.code, r.stdout)
	}
	_, services := con.call(t, http.MethodGet, "/api/services", nil)
	found := false
	for _, r := range services["roles"].([]any) {
		role := r.(map[string]any)
		if role["role"] != "console" {
			continue
		}
		for _, in := range role["instances"].([]any) {
			found = found || in.(map[string]any)["metrics_addr"] == "127.0.0.1:"+strconv.Itoa(con.p.port)
		}
	}
	if !found {
		t.Fatalf("the console is not in /api/services with its metrics address 127.0.0.1:%d: %v", con.p.port, services)
	}
}
