//go:build !e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/keys"
)

// The operator's commands against a worker: start (a file publishes first), --wait, list,
// show, resume, cancel, delete, and their refusals.

func TestCLIStartWaitListShowDelete(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	env := s.env
	s.start("worker", nil)

	flow := writeFile(t, "hello.json", `{"id":"hello","start":"greet","nodes":[
		{"id":"greet","type":"set","params":{"vars":{"msg":"hello {{ INPUT.name }}"}},"next":"done"},
		{"id":"done","type":"end","params":{"output":"{{ VARS.msg }}"}}]}`)

	// A file: validated, published, started, awaited.
	r := run(t, env, "start", flow, "--input", `{"name":"Ada"}`, "--wait", "--timeout", "30", "--quiet")
	if r.code != 0 {
		t.Fatalf("start --wait: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, ": completed") || !strings.Contains(r.stdout, `"hello Ada"`) {
		t.Fatalf("start --wait output:\n%s", r.stdout)
	}
	first := strings.TrimSuffix(strings.Fields(r.stdout)[1], ":")

	// The publication: definition under the hash version, recorded in both sets.
	c := s.c
	ctx := context.Background()
	sp := keys.MustFor("", "")
	versions, err := c.Do(ctx, c.B().Zrange().Key(sp.FlowVersions("hello")).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil || len(versions) != 1 || len(versions[0]) != 12 {
		t.Fatalf("flow versions %v %v", versions, err)
	}
	if n, _ := c.Do(ctx, c.B().Exists().Key(sp.Flow("hello", versions[0])).Build()).AsInt64(); n != 1 {
		t.Fatalf("flow key %s missing", sp.Flow("hello", versions[0]))
	}
	if s, _ := c.Do(ctx, c.B().Zscore().Key(sp.FlowList()).Member("hello").Build()).AsFloat64(); s == 0 {
		t.Fatal("hello not in the flow list")
	}

	// By id, the latest published version; --json without --wait gives the id.
	r = run(t, env, "start", "hello", "--input", `{"name":"Bo"}`, "--json", "--quiet")
	if r.code != 0 {
		t.Fatalf("start by id: exit %d\n%s", r.code, r.stderr)
	}
	var started struct {
		ExecutionID string `json:"execution_id"`
		FlowVersion string `json:"flow_version"`
		Published   bool   `json:"published"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &started); err != nil || started.ExecutionID == "" || started.FlowVersion != versions[0] || started.Published {
		t.Fatalf("start --json: %+v %v\n%s", started, err, r.stdout)
	}
	st := s.waitStatus(started.ExecutionID, "", state.Completed, 30*time.Second)
	if st.Output != "hello Bo" {
		t.Fatalf("output %v", st.Output)
	}

	// Unknown flow, unknown version.
	if r = run(t, env, "start", "nope", "--quiet"); r.code != 1 || !strings.Contains(r.stderr, "nope") {
		t.Fatalf("unknown flow: exit %d\n%s", r.code, r.stderr)
	}
	if r = run(t, env, "start", "hello", "--version", "zzz", "--quiet"); r.code != 1 || !strings.Contains(r.stderr, `"zzz"`) {
		t.Fatalf("unknown version: exit %d\n%s", r.code, r.stderr)
	}

	// list shows both, newest first.
	r = run(t, env, "execution", "list", "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, first) || !strings.Contains(r.stdout, started.ExecutionID) || !strings.Contains(r.stdout, "2 execution(s)") {
		t.Fatalf("list: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, env, "execution", "list", "--json", "--limit", "1", "--quiet")
	var page struct {
		Items []struct {
			ExecutionID string `json:"execution_id"`
			Status      string `json:"status"`
		} `json:"items"`
		NextCursor string `json:"next_cursor"`
		Skipped    int    `json:"skipped"`
		Degraded   bool   `json:"degraded"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Items) != 1 || page.NextCursor == "" || page.Degraded {
		t.Fatalf("list --json: %+v %v\n%s", page, err, r.stdout)
	}
	r = run(t, env, "execution", "list", "--json", "--limit", "1", "--cursor", page.NextCursor, "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, first) && !strings.Contains(r.stdout, started.ExecutionID) {
		t.Fatalf("second page: exit %d\n%s", r.code, r.stdout)
	}
	// A garbage index member is skipped and reported.
	c.Do(ctx, c.B().Zadd().Key(sp.Index()).ScoreMember().ScoreMember(1, "ghost").Build())
	r = run(t, env, "execution", "list", "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, "degraded: 1 index member(s) skipped") {
		t.Fatalf("degraded list: exit %d\n%s", r.code, r.stdout)
	}

	// show (text), then delete.
	r = run(t, env, "execution", "show", first, "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, "execution "+first+": completed") || !strings.Contains(r.stdout, "timeline:") {
		t.Fatalf("show: exit %d\n%s", r.code, r.stdout)
	}
	if r = run(t, env, "execution", "delete", first, "--quiet"); r.code != 0 {
		t.Fatalf("delete: exit %d\n%s", r.code, r.stderr)
	}
	if r = run(t, env, "execution", "show", first, "--quiet"); r.code != 1 || !strings.Contains(r.stderr, first) {
		t.Fatalf("show after delete: exit %d\n%s", r.code, r.stderr)
	}
}

func TestCLIApprovalResumeAndCancel(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	env := s.env
	s.start("worker", nil)

	flow := writeFile(t, "ship.json", `{"id": "ship", "version": "v1", "start": "ask", "nodes": [
	    {"id": "ask", "type": "approval", "params": {"message": "Ship {{ INPUT.what }}?", "timeout": 3600}, "next": "done"},
	    {"id": "done", "type": "end", "params": {"output": {"approved": "{{ NODE.ask.approved }}"}}}]}`)

	// --wait returns at the suspension, exit 1 (not completed).
	r := run(t, env, "start", flow, "--input", `{"what":"v2"}`, "--wait", "--quiet")
	if r.code != 1 || !strings.Contains(r.stdout, ": suspended") || !strings.Contains(r.stdout, "plaita execution resume") {
		t.Fatalf("start approval: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	id := strings.TrimSuffix(strings.Fields(r.stdout)[1], ":")
	st := s.show(id, "")
	if st.Status != state.Suspended || st.FlowVersion != "v1" || st.Suspend == nil || st.Suspend.Kind != state.SuspendApproval {
		t.Fatalf("state %+v", st)
	}
	r = run(t, env, "execution", "resume", id, "--type", "approval", "--data", `{"approved":true}`, "--quiet")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	st = s.waitStatus(id, "", state.Completed, 30*time.Second)
	if out, _ := json.Marshal(st.Output); !strings.Contains(string(out), "true") {
		t.Fatalf("output %s", out)
	}
	// A completed execution cannot be resumed or cancelled.
	if r = run(t, env, "execution", "resume", id, "--type", "continue", "--quiet"); r.code != 1 {
		t.Fatalf("resume of completed: exit %d\n%s", r.code, r.stderr)
	}
	if r = run(t, env, "execution", "cancel", id, "--quiet"); r.code != 1 || !strings.Contains(r.stderr, "already completed") {
		t.Fatalf("cancel of completed: exit %d\n%s", r.code, r.stderr)
	}

	// Cancel of a suspended execution ends it.
	r = run(t, env, "start", "ship", "--quiet")
	if r.code != 0 {
		t.Fatalf("start by id: exit %d\n%s", r.code, r.stderr)
	}
	id2 := strings.TrimSpace(r.stdout)
	s.waitStatus(id2, "", state.Suspended, 30*time.Second)
	if r = run(t, env, "execution", "cancel", id2, "--quiet"); r.code != 0 {
		t.Fatalf("cancel: exit %d\n%s", r.code, r.stderr)
	}
	s.waitStatus(id2, "", state.Cancelled, 30*time.Second)
	if r = run(t, env, "execution", "delete", id2, "--quiet"); r.code != 0 {
		t.Fatalf("delete: exit %d\n%s", r.code, r.stderr)
	}
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	env := s.env

	bad := writeFile(t, "bad.json", `{"id":"bad","start":"missing","nodes":[{"id":"a","type":"nosuch"}]}`)
	r := run(t, env, "start", bad, "--quiet")
	if r.code != 2 || !strings.Contains(r.stderr, "nodes[0]") {
		t.Fatalf("invalid flow: exit %d\n%s", r.code, r.stderr)
	}
	// Nothing was published.
	c := s.c
	if n, _ := c.Do(context.Background(), c.B().Exists().Key(keys.MustFor("", "").FlowList()).Build()).AsInt64(); n != 0 {
		t.Fatal("an invalid flow was published")
	}

	// A running execution is only deleted with --force.
	now := time.Now().UTC()
	if err := s.ts.Save(context.Background(), &state.Execution{ExecutionID: "exec-running-1", FlowID: "f", FlowVersion: "1",
		Status: state.Running, CurrentNode: "a", StartTime: now, LastUpdate: now}); err != nil {
		t.Fatal(err)
	}
	if r = run(t, env, "execution", "delete", "exec-running-1", "--quiet"); r.code != 1 || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("delete of running: exit %d\n%s", r.code, r.stderr)
	}
	if r = run(t, env, "execution", "delete", "exec-running-1", "--force", "--quiet"); r.code != 0 {
		t.Fatalf("delete --force: exit %d\n%s", r.code, r.stderr)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"start"}, 2, "name one flow"},
		{[]string{"start", "missing.json"}, 2, "missing.json"},
		{[]string{"start", "x", "--input", "{"}, 2, "--input"},
		{[]string{"start", "x", "--timeout", "5"}, 2, "--timeout goes with --wait"},
		{[]string{"start", "x", "--bogus"}, 2, "bogus"},
		{[]string{"execution", "show"}, 2, "name one execution id"},
		{[]string{"execution", "show", "exec-unknown-1"}, 1, "exec-unknown-1"},
		{[]string{"execution", "cancel", "exec-unknown-1"}, 1, "exec-unknown-1"},
		{[]string{"execution", "delete", "exec-unknown-1"}, 1, "exec-unknown-1"},
		{[]string{"execution", "resume", "exec-unknown-1", "--type", "continue"}, 1, "exec-unknown-1"},
		{[]string{"execution", "resume", "exec-unknown-1"}, 2, "--type"},
		{[]string{"execution", "resume", "exec-unknown-1", "--type", "nope"}, 2, "--type"},
		{[]string{"execution", "resume", "exec-unknown-1", "--type", "event", "--data", "[1"}, 2, "--data"},
		{[]string{"execution", "list", "--limit", "0"}, 2, "--limit"},
		{[]string{"execution", "list", "--cursor", "!!"}, 2, "cursor"},
		{[]string{"execution", "list", "--tenant", "Bad Tenant"}, 2, "--tenant"},
		{[]string{"execution", "frob"}, 2, "frob"},
	} {
		args := tc.args
		if args[len(args)-1] != "frob" {
			args = append(args, "--quiet")
		}
		r := run(t, env, args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s", tc.args, r.code, tc.code, tc.want, r.stderr)
		}
	}
}
