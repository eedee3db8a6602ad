//go:build !e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
)

// What a new user trips over in the first hour, through the command tree: commands printed the way
// they can be run, a queued execution that looked missing, events that vanished without a word,
// uneven flags, a bench that wrote into the live key space, expression errors in Go's words,
// /metrics without types.

// An execution whose start no worker has taken yet is shown as queued, with how many workers
// are alive (it once answered "no execution", exit 1); `start` says no worker is registered.
func TestNewcomerQueuedExecutionIsShownQueued(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	r := run(t, s.env, "start", repoFlow(t, "hello.json"))
	if r.code != 0 || !strings.Contains(r.stderr, "no worker is registered") {
		t.Fatalf("start without a worker: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	r = run(t, s.env, "execution", "show", id, "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, "queued — not taken by a worker yet; workers alive: 0") {
		t.Fatalf("show of a queued start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var q struct {
		Status       string `json:"status"`
		WorkersAlive int    `json:"workers_alive"`
		Task         struct {
			Kind    string `json:"kind"`
			Pending bool   `json:"pending"`
		} `json:"task"`
	}
	r = run(t, s.env, "execution", "show", id, "--json", "--quiet")
	if err := json.Unmarshal([]byte(r.stdout), &q); err != nil || q.Status != "queued" || q.WorkersAlive != 0 || q.Task.Kind != "start" || q.Task.Pending {
		t.Fatalf("show --json of a queued start: %+v %v\n%s", q, err, r.stdout)
	}
	s.start("worker", nil)
	s.waitStatus(id, "", state.Completed, 60*time.Second)
	var started struct {
		WorkersAlive int `json:"workers_alive"`
	}
	r = run(t, s.env, "start", repoFlow(t, "hello.json"), "--json", "--quiet")
	if err := json.Unmarshal([]byte(r.stdout), &started); err != nil || started.WorkersAlive != 1 || strings.Contains(r.stderr, "no worker") {
		t.Fatalf("start with a worker: %+v %v\n%s%s", started, err, r.stdout, r.stderr)
	}
}

// `event publish` says how many executions of the tenant wait for the type and whether a filter
// is alive to deliver it (it once said "published" and nothing more).
func TestNewcomerEventPublishSaysWhoWaits(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	publish := func(args ...string) map[string]any {
		t.Helper()
		r := run(t, s.env, append([]string{"event", "publish", "payment", "--json", "--quiet"}, args...)...)
		var out map[string]any
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
			t.Fatalf("event publish: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return out
	}
	r := run(t, s.env, "event", "publish", "payment", "--data", `{"order_id":"ord-5"}`, "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, `no execution of tenant default waits for an event of type "payment" like this one: it wakes nothing`) {
		t.Fatalf("publish with no wait: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	s.start("worker", nil)
	id := s.startFlow(repoFlow(t, "payment-wait.json"), "", `{"order_id":"ord-7"}`)
	s.waitStatus(id, "", state.Suspended, 60*time.Second)
	// The wait counted is the one whose match can take this event (its order id).
	if out := publish("--data", `{"order_id":"ord-8"}`); out["waiting"] != 0.0 {
		t.Fatalf("publish of another order's payment: %v", out)
	}
	if out := publish("--data", `{"order_id":"ord-7"}`); out["waiting"] != 1.0 || out["filters_alive"] != 0.0 ||
		!strings.Contains(out["text"].(string), "no filter role is registered") {
		t.Fatalf("publish with a wait and no filter: %v", out)
	}
	s.start("filter", nil)
	waitFor(t, "the filter registered", 60*time.Second, func() bool {
		return publish("--data", `{"order_id":"ord-9"}`)["filters_alive"] == 1.0
	}, s.procs...)
}

// The flags are even: the connection flags on every command over Redis, the logging flags
// before or after a command's name, --status and --flow on execution list, suggestions for a
// mistyped command, and `plaita flow publish|list|show` (each was refused, or did not exist).
func TestNewcomerFlagsAndCommandsAreEven(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	s.start("worker", nil)
	done := s.startFlow(repoFlow(t, "hello.json"), "", "{}")
	waiting := s.startFlow(repoFlow(t, "expense-approval.json"), "", `{"amount": 900}`)
	s.waitStatus(done, "", state.Completed, 60*time.Second)
	s.waitStatus(waiting, "", state.Suspended, 60*time.Second)

	wrong := map[string]string{"PLAITA_REDIS_URL": "redis://127.0.0.1:1/0"}
	r := run(t, wrong, "execution", "list", "--redis-url", s.env["PLAITA_REDIS_URL"], "--status", "suspended", "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, waiting) || strings.Contains(r.stdout, done) || !strings.Contains(r.stdout, "1 execution(s)") {
		t.Fatalf("execution list --redis-url --status suspended: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, s.env, "execution", "list", "--flow", "hello", "--json", "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, done) || strings.Contains(r.stdout, waiting) {
		t.Fatalf("execution list --flow hello: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = run(t, s.env, "execution", "list", "--status", "queued"); r.code != 2 || !strings.Contains(r.stderr, "use one of") {
		t.Fatalf("--status queued: exit %d %s", r.code, r.stderr)
	}
	if r = run(t, nil, "wroker"); r.code != 2 || !strings.Contains(r.stderr, `did you mean "worker"`) {
		t.Fatalf("plaita wroker: exit %d %s", r.code, r.stderr)
	}
	if r = run(t, nil, "execution", "lsit"); r.code != 2 || !strings.Contains(r.stderr, `did you mean "list"`) {
		t.Fatalf("plaita execution lsit: exit %d %s", r.code, r.stderr)
	}
	for _, args := range [][]string{{"version", "--quiet"}, {"--log-level", "debug", "roles"}, {"--quiet", "version"}} {
		if r = run(t, nil, args...); r.code != 0 {
			t.Errorf("plaita %s: exit %d %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if r = run(t, s.env, "--log-level", "verbose", "execution", "list"); r.code != 2 || !strings.Contains(r.stderr, `--log-level: "verbose"`) {
		t.Errorf("a bad level before the command: exit %d %s", r.code, r.stderr)
	}

	// flow publish publishes without starting; list and show read what is published.
	before := s.streamLen()
	def := writeFile(t, "greet.json", `{"id":"greet","version":"7","start":"done","nodes":[{"id":"done","type":"end"}]}`)
	if r = run(t, s.env, "flow", "publish", def, "--quiet"); r.code != 0 || !strings.Contains(r.stdout, "flow greet version 7: published") {
		t.Fatalf("flow publish: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := s.streamLen(); n != before {
		t.Fatalf("flow publish enqueued (%d → %d entries)", before, n)
	}
	if r = run(t, s.env, "flow", "list", "--quiet"); r.code != 0 || !strings.Contains(r.stdout, "greet") || !strings.Contains(r.stdout, "hello") {
		t.Fatalf("flow list: exit %d\n%s", r.code, r.stdout)
	}
	var shown struct {
		Version  string `json:"version"`
		Versions []struct {
			Version string `json:"version"`
		} `json:"versions"`
	}
	r = run(t, s.env, "flow", "show", "greet", "--json", "--quiet")
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil || shown.Version != "7" || len(shown.Versions) != 1 {
		t.Fatalf("flow show --json: %+v %v\n%s", shown, err, r.stdout)
	}
	if r = run(t, s.env, "flow", "show", "nope", "--quiet"); r.code != 1 || !strings.Contains(r.stderr, "no flow nope") {
		t.Fatalf("flow show of an unknown flow: exit %d %s", r.code, r.stderr)
	}
	// The schedule hint names the command that publishes without starting.
	r = run(t, s.env, "schedule", "add", "--cron", "0 2 * * *", "--flow", "unpublished", "--quiet", "--log-level", "warn")
	if r.code != 0 || !strings.Contains(r.stderr, "plaita flow publish FLOW.json") {
		t.Fatalf("schedule add of an unpublished flow: exit %d\n%s", r.code, r.stderr)
	}
}

// `plaita bench --redis URL` refuses a database that holds keys (it once wrote 500 executions
// and a bench flow beside an operator's), unless --force.
func TestNewcomerBenchRefusesALiveDatabase(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	s.startFlow(repoFlow(t, "hello.json"), "", "{}")
	dbsize := func() int64 {
		n, err := s.c.Do(s.ctx, s.c.B().Dbsize().Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := dbsize()
	r := run(t, nil, "bench", "e2e", "--redis", s.env["PLAITA_REDIS_URL"], "--n", "20", "--quiet")
	if r.code != 2 || !strings.Contains(r.stderr, "--force") || !strings.Contains(r.stderr, "holds") {
		t.Fatalf("bench on a database in use: exit %d %s", r.code, r.stderr)
	}
	if after := dbsize(); after != before {
		t.Fatalf("the refused bench wrote %d keys", after-before)
	}
}

// An expression that trips over a missing value names the node, the expression and the value
// (it once read `invalid operation: <nil> > int (1:14)`).
func TestNewcomerExpressionErrorsNameTheMissingValue(t *testing.T) {
	t.Parallel()
	flow := writeFile(t, "cmp.json", `{"id":"cmp","start":"c","nodes":[
	  {"id":"c","type":"condition","params":{"expr":"INPUT.amount > 10"},"branches":{"true":"e","false":"e"}},
	  {"id":"e","type":"end"}]}`)
	r := run(t, nil, "run", flow, "--state-dir", t.TempDir(), "--quiet")
	mustContain(t, "expression error", r.stdout, `at node "c"`, `expression "INPUT.amount > 10"`, "INPUT.amount is not set")
}
