//go:build !e2e

package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `plaita run` in process: flows written to temp files, state kept in a temp --state-dir (the
// interrupt by SIGINT is test/e2e's).

// executionID reads the id from the summary's first line: "execution ex_…: status".
func executionID(t *testing.T, r result) string {
	t.Helper()
	first, _, _ := strings.Cut(r.stdout, "\n")
	id, ok := strings.CutPrefix(first, "execution ")
	if i := strings.Index(id, ":"); ok && i > 0 {
		return id[:i]
	}
	t.Fatalf("no execution id in the first line of stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	return ""
}

// timelineHas checks that the printed timeline has these node/event pairs, in this order.
func timelineHas(t *testing.T, stdout string, nodeEvents ...string) {
	t.Helper()
	_, table, ok := strings.Cut(stdout, "\ntimeline:\n")
	if !ok {
		t.Fatalf("no timeline:\n%s", stdout)
	}
	want := nodeEvents
	for _, line := range strings.Split(table, "\n") {
		// seq, time, node, event, [ms], [detail]
		if f := strings.Fields(line); len(want) > 0 && len(f) >= 4 && f[2] == want[0] && f[3] == want[1] {
			want = want[2:]
		}
	}
	if len(want) > 0 {
		t.Errorf("timeline lacks %v (in order):\n%s", want, table)
	}
}

const completingFlow = `{
  "id": "hello", "version": "3", "start": "greet",
  "nodes": [
    {"id": "greet", "type": "set", "params": {"vars": {"greeting": "hello {{ INPUT.name }}"}}, "next": "check"},
    {"id": "check", "type": "condition", "params": {"expr": "INPUT.n > 2"}, "branches": {"true": "big", "false": "small"}},
    {"id": "big", "type": "log", "params": {"message": "big {{ INPUT.n }}"}, "next": "done"},
    {"id": "small", "type": "log", "params": {"message": "small"}, "next": "done"},
    {"id": "done", "type": "end", "params": {"output": {"greeting": "{{ VARS.greeting }}", "n": "{{ INPUT.n }}", "path": "{{ NODE.check.result }}"}}}
  ]
}`

func TestRunCompletes(t *testing.T) {
	t.Parallel()
	flow := writeFile(t, "hello.json", completingFlow)
	stateDir := filepath.Join(t.TempDir(), "state")
	input := writeFile(t, "input.json", `{"name": "ada", "n": 5}`)

	r := run(t, nil, "run", flow, "--input", "@"+input, "--state-dir", stateDir, "--quiet")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	id := executionID(t, r)
	for _, want := range []string{
		"execution " + id + ": completed\n", "flow:      hello (version 3)", "steps:     4",
		`"greeting": "hello ada"`, `"n": 5`, `"path": true`, "timeline:",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	timelineHas(t, r.stdout, "greet", "started", "check", "step", "big", "step", "done", "completed")
	if _, err := os.Stat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a completed run left a state directory (stat: %v)", err)
	}

	r = run(t, nil, "run", flow, "--input", `{"name": "bob", "n": 1}`, "--json", "--state-dir", stateDir, "--quiet")
	if r.code != 0 {
		t.Fatalf("--json: exit %d\n%s", r.code, r.stderr)
	}
	var st savedExecution
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("--json output is not the state: %v\n%s", err, r.stdout)
	}
	out, _ := st.Output.(map[string]any)
	if st.Status != "completed" || st.FlowID != "hello" || !strings.HasPrefix(st.ExecutionID, "ex_") ||
		out["greeting"] != "hello bob" || out["path"] != false || len(st.Timeline) == 0 {
		t.Errorf("--json state: %+v", st)
	}
}

func TestRunApprovalSuspendsAndResumes(t *testing.T) {
	t.Parallel()
	flow := writeFile(t, "ship.json", `{
	  "id": "ship", "start": "ask",
	  "nodes": [
	    {"id": "ask", "type": "approval", "params": {"message": "Ship {{ INPUT.what }}?", "timeout": 3600}, "next": "done"},
	    {"id": "done", "type": "end", "params": {"output": {"approved": "{{ NODE.ask.approved }}"}}}
	  ]
	}`)
	stateDir := filepath.Join(t.TempDir(), "state")

	r := run(t, nil, "run", flow, "--input", `{"what": "v2"}`, "--state-dir", stateDir, "--quiet")
	if r.code != 0 {
		t.Fatalf("a suspension is a normal outcome: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	id := executionID(t, r)
	want := "plaita run " + flow + " --state-dir " + stateDir + " --resume " + id +
		` --type approval --data '{"approved": true, "comment": "ok"}'`
	for _, s := range []string{"execution " + id + ": suspended", `approval at node "ask"`, "message:   Ship v2?", "times out:", want} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	st := readState(t, stateDir, id)
	if st.Status != "suspended" || st.Suspend == nil || st.Suspend.Kind != "approval" || st.Suspend.Message != "Ship v2?" {
		t.Fatalf("saved state: %+v", st)
	}
	if fi, err := os.Stat(filepath.Join(stateDir, id+".json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v (%v), want 0600", fi.Mode(), err)
	}
	if fi, err := os.Stat(stateDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode %v (%v), want 0700", fi.Mode(), err)
	}

	// An answer without "approved" is refused and changes nothing.
	r = run(t, nil, "run", flow, "--resume", id, "--type", "approval", "--data", `{"comment": "?"}`, "--state-dir", stateDir, "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, "resume refused") {
		t.Fatalf("approval without approved: exit %d\n%s", r.code, r.stderr)
	}
	if st := readState(t, stateDir, id); st.Status != "suspended" {
		t.Fatalf("state after a refused resume: %+v", st)
	}

	r = run(t, nil, "run", flow, "--resume", id, "--type", "approval", "--data", `{"approved":true}`, "--state-dir", stateDir, "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, "execution "+id+": completed") || !strings.Contains(r.stdout, `"approved": true`) {
		t.Fatalf("resume: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	timelineHas(t, r.stdout, "ask", "suspended", "ask", "resumed", "done", "completed")
	noStateFile(t, stateDir, id)
}

func TestRunWaitEventRefusesMismatch(t *testing.T) {
	t.Parallel()
	flow := writeFile(t, "order.json", `{
	  "id": "order", "start": "wait",
	  "nodes": [
	    {"id": "wait", "type": "wait_event", "params": {"event_type": "order.paid", "match": "EVENT.order_id == INPUT.order_id"}, "next": "done"},
	    {"id": "done", "type": "end", "params": {"output": {"paid": "{{ EVENT.amount }}"}}}
	  ]
	}`)
	stateDir := t.TempDir()
	r := run(t, nil, "run", flow, "--input", `{"order_id": 7}`, "--state-dir", stateDir, "--quiet")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	id := executionID(t, r)
	for _, s := range []string{`event "order.paid" at node "wait"`, "match:     EVENT.order_id == INPUT.order_id",
		"--resume " + id + ` --type event --data '{"type": "order.paid", "order_id": 7}'`} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}

	r = run(t, nil, "run", flow, "--resume", id, "--type", "event", "--data", `{"order_id": 8, "amount": 1}`, "--state-dir", stateDir, "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, "event does not match") || r.stdout != "" {
		t.Fatalf("non-matching event: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	st := readState(t, stateDir, id)
	if st.Status != "suspended" || st.Suspend == nil || st.Suspend.Node != "wait" || st.Context["$EVENT"] != nil {
		t.Fatalf("state after the refused event: %+v", st)
	}

	// The wrong resume type is refused too.
	r = run(t, nil, "run", flow, "--resume", id, "--type", "approval", "--data", `{"approved": true}`, "--state-dir", stateDir, "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, "invalid resume") {
		t.Fatalf("approval resume of an event wait: exit %d\n%s", r.code, r.stderr)
	}

	data := writeFile(t, "event.json", `{"order_id": 7, "amount": 12.5}`)
	r = run(t, nil, "run", flow, "--resume", id, "--type", "event", "--data", "@"+data, "--state-dir", stateDir, "--json", "--quiet")
	if r.code != 0 {
		t.Fatalf("matching event: exit %d\n%s", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if out, _ := st.Output.(map[string]any); st.Status != "completed" || out["paid"] != 12.5 {
		t.Fatalf("after the matching event: %+v", st)
	}
	noStateFile(t, stateDir, id)
}

func TestRunDelayContinues(t *testing.T) {
	t.Parallel()
	flow := writeFile(t, "sleepy.json", `{"id": "sleepy", "start": "d", "nodes": [
	  {"id": "d", "type": "delay", "params": {"seconds": 300}, "next": "e"},
	  {"id": "e", "type": "end", "params": {"output": "woke"}}
	]}`)
	stateDir := t.TempDir()
	r := run(t, nil, "run", flow, "--state-dir", stateDir, "--quiet")
	id := executionID(t, r)
	if r.code != 0 || !strings.Contains(r.stdout, "due:") || !strings.Contains(r.stdout, "--resume "+id+" --type continue\n") {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
	r = run(t, nil, "run", flow, "--resume", id, "--type", "continue", "--state-dir", stateDir, "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, `output:    "woke"`) {
		t.Fatalf("continue: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	noStateFile(t, stateDir, id)
}

func TestRunInvalidFlowListsEveryProblem(t *testing.T) {
	t.Parallel()
	flow := writeFile(t, "bad.json", `{
	  "id": "bad flow", "start": "nope", "extra": 1,
	  "nodes": [
	    {"id": "a", "type": "set", "params": {"vars": {}}, "next": "zz"},
	    {"id": "b", "type": "bogus"}
	  ]
	}`)
	r := run(t, nil, "run", flow, "--state-dir", t.TempDir(), "--quiet")
	if r.code != 2 || r.stdout != "" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"invalid flow bad flow (6 problems):",
		"\n  extra: unknown field",
		"\n  id: \"bad flow\"",
		"\n  start: unknown node \"nope\"",
		"\n  nodes[0].next: unknown node \"zz\"",
		"\n  nodes[0].params.vars: must be a non-empty object",
		"\n  nodes[1].type: unknown node type \"bogus\"",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}

	r = run(t, nil, "run", writeFile(t, "broken.json", `{"id": "x",`), "--quiet")
	if r.code != 2 || !strings.Contains(r.stderr, "not a JSON object") {
		t.Errorf("truncated flow: exit %d\n%s", r.code, r.stderr)
	}
}

func TestRunBadUsage(t *testing.T) {
	t.Parallel()
	flow := writeFile(t, "hello.json", completingFlow)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"truncated input", []string{flow, "--input", `{"a":`}, "--input: not valid JSON"},
		{"input not JSON", []string{flow, "--input", `name=ada`}, "--input: not valid JSON: invalid character"},
		{"missing input file", []string{flow, "--input", "@" + filepath.Join(t.TempDir(), "nope.json")}, "--input @"},
		{"missing flow", []string{filepath.Join(t.TempDir(), "nope.json")}, "flow file "},
		{"no flow", nil, "name the flow file"},
		{"two flows", []string{flow, flow}, "one flow file at a time"},
		{"type without resume", []string{flow, "--type", "event"}, "--type goes with --resume"},
		{"resume without type", []string{flow, "--resume", "ex_1"}, "--resume needs --type"},
		{"unknown type", []string{flow, "--resume", "ex_1", "--type", "poke"}, `--type "poke"`},
		{"bad data", []string{flow, "--resume", "ex_1", "--type", "event", "--data", "{"}, "--data: not valid JSON"},
		{"id with a path", []string{flow, "--resume", "../x", "--type", "event"}, "not an execution id"},
	}
	for _, tc := range cases {
		r := run(t, nil, append([]string{"run", "--quiet", "--state-dir", t.TempDir()}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, want 2 and %q in stderr:\n%s", tc.name, r.code, tc.want, r.stderr)
		}
	}
}

func TestRunFailNodeExitsOne(t *testing.T) {
	t.Parallel()
	flow := writeFile(t, "boom.json", `{"id": "boom", "start": "s", "nodes": [
	  {"id": "s", "type": "set", "params": {"vars": {"x": 41}}, "next": "f"},
	  {"id": "f", "type": "fail", "params": {"message": "x is {{ VARS.x + 1 }}", "type": "Oops"}}
	]}`)
	stateDir := t.TempDir()
	r := run(t, nil, "run", flow, "--state-dir", stateDir, "--quiet")
	if r.code != 1 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	id := executionID(t, r)
	for _, want := range []string{"execution " + id + ": error", `error:     Oops at node "f": x is 42`, "no retry", "fail node"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "--type retry") {
		t.Errorf("a retry is offered for the error its fail node raises:\n%s", r.stdout)
	}
	// The errored execution is kept; a retry of the fail node's own error is refused and
	// leaves it as it is (it would end the same way).
	if st := readState(t, stateDir, id); st.Status != "error" || st.Error == nil || st.Error.Node != "f" {
		t.Fatalf("saved state: %+v", st)
	}
	r = run(t, nil, "run", flow, "--resume", id, "--type", "retry", "--state-dir", stateDir, "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, "resume refused") || !strings.Contains(r.stderr, "fail node") {
		t.Fatalf("retry: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if st := readState(t, stateDir, id); st.Status != "error" || st.StepCount != 2 {
		t.Fatalf("state after the refused retry: %+v", st)
	}
}

func TestRunResumeUnknownExecution(t *testing.T) {
	t.Parallel()
	flow := writeFile(t, "hello.json", completingFlow)
	stateDir := t.TempDir()
	r := run(t, nil, "run", flow, "--resume", "ex_0000", "--type", "continue", "--state-dir", stateDir, "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, "no saved execution ex_0000") ||
		!strings.Contains(r.stderr, filepath.Join(stateDir, "ex_0000.json")) {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	// Without --state-dir it looks under $XDG_STATE_HOME, and says so.
	xdg := t.TempDir()
	r = run(t, map[string]string{"XDG_STATE_HOME": xdg}, "run", flow, "--resume", "ex_0000", "--type", "continue", "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, filepath.Join(xdg, "plaita", "run", "ex_0000.json")) {
		t.Fatalf("XDG_STATE_HOME: exit %d\n%s", r.code, r.stderr)
	}
}
