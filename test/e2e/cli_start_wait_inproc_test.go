//go:build !e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
)

// `plaita start --wait` as a script uses it: --until waits past suspensions, every end is said
// in words that read, the hints of an event wait lead with the publish the cluster wakes it by,
// a failure on the execution's own input is not offered a retry, and --json answers every
// outcome with a JSON object.

// askFlow suspends at an approval, then completes.
const askFlow = `{"id":"ask","version":"1","start":"ask","nodes":[
	{"id":"ask","type":"approval","params":{"message":"ship it?","timeout":3600},"next":"done"},
	{"id":"done","type":"end","params":{"output":{"approved":"{{ NODE.ask.approved }}"}}}]}`

// TestCLIStartWaitUntil: --until completed follows the execution past its approval to its end;
// --until ended exits 0 at an end in error (its summary printed) where --until completed and a
// plain --wait exit 1 with the error in words; a timeout while suspended says on what.
func TestCLIStartWaitUntil(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	env := s.env
	s.start("worker", nil)
	ask := writeFile(t, "ask.json", askFlow)

	// Past a suspension: the command is still waiting while the approval is given.
	done := make(chan result, 1)
	go func() {
		done <- run(t, env, "start", ask, "--wait", "--until", "completed", "--timeout", "60", "--quiet")
	}()
	var id string
	waitFor(t, "the execution to wait for its approval", 60*time.Second, func() bool {
		select {
		case r := <-done:
			t.Fatalf("start --wait --until completed returned before the approval: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		default:
		}
		ids, items, _ := s.listJSON()
		if len(ids) == 1 && items[0].Status == state.Suspended {
			id = ids[0]
			return true
		}
		return false
	}, s.procs...)
	s.cli("execution", "resume", id, "--type", "approval", "--data", `{"approved": true}`)
	r := <-done
	if r.code != 0 || !strings.Contains(r.stdout, "execution "+id+": completed") || !strings.Contains(r.stdout, `"approved": true`) {
		t.Fatalf("start --wait --until completed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A timeout while suspended: still suspended, and on what. The idempotency key names an
	// execution already suspended, so the second start waits on it from its first read.
	r = run(t, env, "start", ask, "--idempotency-key", "k-1", "--quiet")
	if r.code != 0 {
		t.Fatalf("start with a key: exit %d\n%s", r.code, r.stderr)
	}
	keyed := strings.TrimSpace(r.stdout)
	s.waitStatus(keyed, "", state.Suspended, 60*time.Second)
	r = run(t, env, "start", ask, "--idempotency-key", "k-1", "--wait", "--until", "completed", "--timeout", "1", "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, "execution "+keyed+`: still suspended (approval at node "ask") after 1s`) {
		t.Fatalf("--until completed, timed out while suspended: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Without --until, the first suspension ends the wait, said in words.
	r = run(t, env, "start", ask, "--wait", "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, `is suspended (approval at node "ask"), not completed`) {
		t.Fatalf("--wait at a suspension: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	fails := writeFile(t, "fails.json", `{"id":"fails","start":"no","nodes":[
		{"id":"no","type":"fail","params":{"message":"out of stock","type":"OutOfStock"}}]}`)
	r = run(t, env, "start", fails, "--wait", "--until", "ended", "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, ": error") || !strings.Contains(r.stdout, "OutOfStock") {
		t.Fatalf("--until ended at an error: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var st state.Execution
	r = run(t, env, "start", fails, "--wait", "--until", "ended", "--json", "--quiet")
	if err := json.Unmarshal([]byte(r.stdout), &st); r.code != 0 || err != nil || st.Status != state.Error {
		t.Fatalf("--until ended --json at an error: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"--until", "completed"}, nil} {
		r = run(t, env, append([]string{"start", fails, "--wait", "--quiet"}, args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "ended in error (OutOfStock: out of stock), not completed") {
			t.Fatalf("%v at an error: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		mustNotContain(t, "the error", r.stderr, "is error")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--until", "completed"}, "--until goes with --wait"},
		{[]string{"--wait", "--until", "done"}, `--until "done": use completed or ended`},
	} {
		r = run(t, env, append([]string{"start", ask, "--quiet"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, want 2 with %q\n%s", tc.args, r.code, tc.want, r.stderr)
		}
	}
}

// TestCLIStartWaitEventHintPublishes: in the cluster, an event wait is woken by publishing the
// event; the hint says so first, and the direct resume comes second. The printed publish wakes
// the execution through the filter.
func TestCLIStartWaitEventHintPublishes(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, nil)
	env := s.env
	s.start("worker", nil)
	s.filter(nil)

	r := run(t, env, "start", repoFlow(t, "payment-wait.json"), "--input", `{"order_id": "o-1"}`, "--wait", "--quiet")
	if r.code != 1 || !strings.Contains(r.stdout, ": suspended") {
		t.Fatalf("payment-wait: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	id := strings.TrimSuffix(strings.Fields(r.stdout)[1], ":")
	publish, ok := hintCommand(t, r.stdout, "publish the event with")
	if !ok {
		t.Fatalf("no event publish command:\n%s", r.stdout)
	}
	if got := strings.Join(publish, " "); got != `event publish payment --data {"order_id": "o-1", "status": "paid"}` {
		t.Fatalf("the publish command: %s\n%s", got, r.stdout)
	}
	resume, ok := hintCommand(t, r.stdout, "or resume it directly with")
	if !ok || strings.Index(r.stdout, "publish the event with") > strings.Index(r.stdout, "or resume it directly with") {
		t.Fatalf("no direct resume after the publish:\n%s", r.stdout)
	}
	mustContain(t, "the direct resume", strings.Join(resume, " "), "execution resume "+id+" --type event")
	show := run(t, env, "execution", "show", id, "--quiet")
	if again, _ := hintCommand(t, show.stdout, "publish the event with"); strings.Join(again, " ") != strings.Join(publish, " ") {
		t.Fatalf("show prints another publish command than start --wait:\n%s", show.stdout)
	}
	if r = run(t, env, append(publish, "--quiet")...); r.code != 0 {
		t.Fatalf("the printed publish command: exit %d\n%s", r.code, r.stderr)
	}
	if st := s.waitStatus(id, "", state.Completed, 60*time.Second); st.Output.(map[string]any)["status"] != "paid" {
		t.Fatalf("after the printed publish: output %v", st.Output)
	}
}

// TestCLIStartInputErrorHintsNewStart: a node that fails on a value the execution's INPUT lacks
// is not offered a retry (it fails the same way); the hint is a new start with the input given.
// A retry is still accepted.
func TestCLIStartInputErrorHintsNewStart(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	env := s.env
	s.start("worker", nil)
	flow := writeFile(t, "order-check.json", `{"id":"order-check","start":"route","nodes":[
		{"id":"route","type":"condition","params":{"expr":"INPUT.amount > 100"},"branches":{"true":"big","false":"small"}},
		{"id":"big","type":"end","params":{"output":"big"}},
		{"id":"small","type":"end","params":{"output":"small"}}]}`)

	r := run(t, env, "start", flow, "--input", `{"who": "kim"}`, "--wait", "--quiet")
	if r.code != 1 || !strings.Contains(r.stdout, "INPUT.amount is not set") {
		t.Fatalf("order-check without an amount: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	id := strings.TrimSuffix(strings.Fields(r.stdout)[1], ":")
	show := run(t, env, "execution", "show", id, "--quiet").stdout
	for what, out := range map[string]string{"start --wait": r.stdout, "show": show} {
		mustNotContain(t, what, out, "--type retry")
		mustContain(t, what, out, "no retry suggested", `plaita start order-check --input '{"amount": …, "who": "kim"}'`)
	}
	// A resume it refuses says what would help — a new start — not that nothing is accepted
	// (a retry is).
	r = run(t, env, "execution", "resume", id, "--type", "continue", "--quiet")
	mustNotContain(t, "a refused continue", r.stderr, "no resume is accepted now")
	mustContain(t, "a refused continue", r.stderr, "no resume would end otherwise now:", "plaita start order-check --input")
	// Not suggested, still accepted.
	if r = run(t, env, "execution", "resume", id, "--type", "retry", "--quiet"); r.code != 0 {
		t.Fatalf("a retry: exit %d\n%s", r.code, r.stderr)
	}

	// plaita run, on its own: the same rule, with the --input to give.
	r = run(t, nil, "run", flow, "--state-dir", t.TempDir(), "--quiet")
	mustNotContain(t, "run", r.stdout, "--type retry")
	mustContain(t, "run", r.stdout, "no retry suggested", `--input '{"amount": …}'`)
}

// TestCLIStartJSONInvalidFlow: with --json an invalid flow is a JSON object on stdout — the
// refusal's code, message and every problem at its path — and still exit 2.
func TestCLIStartJSONInvalidFlow(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	bad := writeFile(t, "order-check.json", `{"id":"order-check","start":"missing","nodes":[{"id":"a","type":"nosuch"}]}`)
	r := run(t, s.env, "start", bad, "--json", "--quiet")
	var out struct {
		Error struct {
			Code     string `json:"code"`
			Message  string `json:"message"`
			Problems []struct {
				Path    string `json:"path"`
				Message string `json:"message"`
			} `json:"problems"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); r.code != 2 || err != nil {
		t.Fatalf("start --json of an invalid flow: exit %d %v\nstdout:\n%s\nstderr:\n%s", r.code, err, r.stdout, r.stderr)
	}
	if out.Error.Code != "invalid_flow" || !strings.Contains(out.Error.Message, "invalid flow order-check") || len(out.Error.Problems) < 2 {
		t.Fatalf("start --json of an invalid flow: %+v", out)
	}
	paths := map[string]bool{}
	for _, p := range out.Error.Problems {
		paths[p.Path] = p.Message != ""
	}
	if !paths["nodes[0].type"] || !paths["start"] {
		t.Fatalf("problems: %+v", out.Error.Problems)
	}
	// Unknown flow: a JSON object too, exit 1.
	r = run(t, s.env, "start", "nope", "--json", "--quiet")
	if err := json.Unmarshal([]byte(r.stdout), &out); r.code != 1 || err != nil || out.Error.Code == "" || !strings.Contains(out.Error.Message, "nope") {
		t.Fatalf("start --json of an unknown flow: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
}
