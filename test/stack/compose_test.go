//go:build e2e

package stack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"plaita/test/redistest"
)

// project is the compose project of the test: its own containers, network and volumes, never
// those of a stack a user runs under the file's name (plaita).
const project = "plaita-stacktest"

// stack drives docker compose on the repository's docker-compose.yml and the test's override.
type stack struct {
	files []string
	env   []string
}

func (s *stack) args(args ...string) []string {
	out := []string{"compose", "-p", project}
	for _, f := range s.files {
		out = append(out, "-f", f)
	}
	return append(out, args...)
}

func (s *stack) run(t *testing.T, limit time.Duration, args ...string) string {
	t.Helper()
	out, err := s.runErr(limit, args...)
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(s.args(args...), " "), err, out)
	}
	return out
}

func (s *stack) runErr(limit time.Duration, args ...string) (string, error) {
	return dockerEnv(limit, s.env, s.args(args...)...)
}

// container is the id of the service's container (running or stopped).
func (s *stack) container(t *testing.T, service string) string {
	t.Helper()
	id := strings.TrimSpace(s.run(t, 30*time.Second, "ps", "-a", "-q", service))
	if id == "" || strings.Contains(id, "\n") {
		t.Fatalf("service %s: containers %q", service, id)
	}
	return id
}

// backlog is the task stream's backlog as `plaita status --json` reads it inside the console's
// container (the image's own tool, on the stack's Redis).
func (s *stack) backlog(t *testing.T) (pending, length int64) {
	t.Helper()
	// Its exit status is 1 while something needs attention (no worker alive, say): only its
	// standard output, the JSON, is read.
	out, _ := dockerStdout(30*time.Second, s.env, s.args("exec", "-T", "console", "plaita", "status", "--json", "--log-level", "error")...)
	var st struct {
		Queue struct {
			Pending int64 `json:"pending"`
			Length  int64 `json:"stream_length"`
		} `json:"queue"`
	}
	if json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("plaita status --json in the console's container: %s", out)
	}
	return st.Queue.Pending, st.Queue.Length
}

// metric is a counter or gauge of a service's /metrics (port 9100 inside its container, read
// with the image's python3: the image has no curl), summed over its label sets.
func (s *stack) metric(t *testing.T, service, name string) float64 {
	t.Helper()
	out := s.run(t, 30*time.Second, "exec", "-T", service, "python3", "-c",
		"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9100/metrics').read().decode())")
	var sum float64
	found := false
	for _, line := range strings.Split(out, "\n") {
		if line != name && !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			t.Fatalf("%s: %q", name, line)
		}
		sum += v
		found = true
	}
	if !found {
		t.Fatalf("%s has no %s in its /metrics", service, name)
	}
	return sum
}

// The flows of the test, beside the demo flows the seed publishes (payment-wait, an event wait;
// expense-approval, an approval).
const (
	delayFlow = `{"id":"stack-delay","version":"1","start":"pause","nodes":[
		{"id":"pause","type":"delay","params":{"seconds":3},"next":"done"},
		{"id":"done","type":"end","params":{"output":{"slept":"{{ NODE.pause.due }}"}}}]}`
	codeFlow = `{"id":"stack-code","version":"1","start":"py","nodes":[
		{"id":"py","type":"code","params":{"language":"python","input":"{{ INPUT }}","code":"import sys\nresult = {'double': INPUT['n'] * 2, 'python': sys.version.split()[0]}"},"next":"done"},
		{"id":"done","type":"end","params":{"output":"{{ NODE.py }}"}}]}`
	// loadFlow keeps a worker slot busy for a second: in flight when the worker dies.
	loadFlow = `{"id":"stack-load","version":"1","start":"work","nodes":[
		{"id":"work","type":"code","params":{"language":"python","input":"{{ INPUT }}","code":"import time\ntime.sleep(1)\nresult = INPUT['n']"},"next":"done"},
		{"id":"done","type":"end","params":{"output":{"n":"{{ NODE.work }}"}}}]}`
)

// TestComposeStack builds the image once and runs docker-compose.yml as a user would, then
// through the faults an operator meets: a worker killed with SIGKILL under load, a worker
// drained by `docker compose stop`, the console's container replaced, Redis restarted. Every
// execution reaches its end once.
func TestComposeStack(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	port := redistest.FreePort(t)
	password := fmt.Sprintf("stack-admin-%d", time.Now().UnixNano())
	// The override publishes the console on a free port and shortens the idle time after which a
	// dead worker's tasks are claimed (60 s by default): the reclaim is the same, sooner.
	override := filepath.Join(t.TempDir(), "override.yml")
	if err := os.WriteFile(override, []byte(fmt.Sprintf(`services:
  console:
    ports: !override
      - "127.0.0.1:%d:8080"
  worker:
    environment:
      PLAITA_CLAIM_MIN_IDLE_MS: "3000"
`, port)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &stack{
		files: []string{filepath.Join(repo, "docker-compose.yml"), override},
		env:   []string{"PLAITA_CONSOLE_ADMIN_PASSWORD=" + password},
	}
	// A stack left by an interrupted run goes first, with its volumes.
	s.run(t, 2*time.Minute, "down", "-v", "--remove-orphans")
	// The tag goes too: a build whose result is the image plaita:dev already names tags nothing
	// (the daemon sends no tag event), and the count of builds below would read 0. The layers
	// stay cached, so the build is still quick.
	if out, err := dockerErr(time.Minute, "image", "rm", "plaita:dev"); err != nil && !strings.Contains(out, "No such image") {
		t.Fatalf("docker image rm plaita:dev: %v: %s", err, out)
	}
	removed := false
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := s.runErr(time.Minute, "logs", "--no-color", "--tail", "60")
			t.Logf("the stack's logs:\n%s", out)
		}
		if !removed {
			if out, err := s.runErr(2*time.Minute, "down", "-v", "--remove-orphans"); err != nil {
				t.Logf("docker compose down -v: %v\n%s", err, out)
			}
		}
	})

	// ---- up: one build of the image for six services ----
	since := strconv.FormatInt(time.Now().Add(-time.Second).Unix(), 10)
	began := time.Now()
	out := s.run(t, 15*time.Minute, "up", "--build", "--wait", "--wait-timeout", "300", "-d")
	t.Logf("docker compose up --build --wait: %s", time.Since(began).Round(time.Second))
	tags := docker(t, 30*time.Second, "events", "--since", since, "--until", strconv.FormatInt(time.Now().Unix(), 10),
		"--filter", "type=image", "--filter", "event=tag", "--format", "{{.Actor.Attributes.name}}")
	if n := strings.Count(tags, "plaita:dev"); n != 1 {
		t.Fatalf("plaita:dev was built %d times by one `up --build` (image tags: %q), want once; compose said:\n%s", n, tags, out)
	}
	for _, svc := range []string{"redis", "console", "worker", "filter", "schedule", "delay"} {
		health := strings.TrimSpace(docker(t, 30*time.Second, "inspect", "--format", "{{.State.Health.Status}}", s.container(t, svc)))
		if health != "healthy" {
			t.Fatalf("%s: health %q after up --wait", svc, health)
		}
	}

	t.Run("the image", func(t *testing.T) { checkImage(t) })

	con := newConsole(fmt.Sprintf("http://127.0.0.1:%d", port))
	con.login(t, "admin", password)

	// ---- the seed published the demo flows ----
	waitUntil(t, "the seed to publish the demo flows", 2*time.Minute, func() bool {
		code, out := con.do(t, http.MethodGet, "/api/flows?limit=100", nil)
		if code != http.StatusOK {
			return false
		}
		var ids []string
		items, _ := out["items"].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			id, _ := m["id"].(string)
			if id == "" {
				id, _ = m["flow_id"].(string)
			}
			ids = append(ids, id)
		}
		return slices.Contains(ids, "payment-wait") && slices.Contains(ids, "expense-approval") && slices.Contains(ids, "hello")
	})
	if code := strings.TrimSpace(docker(t, 30*time.Second, "inspect", "--format", "{{.State.ExitCode}}", s.container(t, "seed"))); code != "0" {
		t.Fatalf("the seed exited %s", code)
	}
	for _, def := range []string{delayFlow, codeFlow, loadFlow} {
		con.publish(t, def)
	}

	// ---- every kind of wake-up, over the API ----
	var all []string
	// Each scenario leaves the stack as the next expects it: after a failure the rest would
	// only fail for that reason, so the test stops at the first.
	if !t.Run("a delay, an event, an approval and a code node", func(t *testing.T) {
		delayID := con.start(t, "stack-delay", nil)
		payID := con.start(t, "payment-wait", map[string]any{"order_id": "ord-stack-1", "amount": 30})
		approvalID := con.start(t, "expense-approval", map[string]any{"amount": 500, "employee": "sam"})
		codeID := con.start(t, "stack-code", map[string]any{"n": 21})
		all = append(all, delayID, payID, approvalID, codeID)

		con.waitSuspended(t, payID, "event", time.Minute)
		pub := con.want(t, http.StatusCreated, http.MethodPost, "/api/events",
			map[string]any{"type": "payment", "id": "pay-stack-1", "data": map[string]any{"order_id": "ord-stack-1", "status": "paid", "payment_id": "p-1"}})
		if alive, _ := pub["filters_alive"].(float64); alive < 1 {
			t.Fatalf("the event was published with no filter alive: %v", pub)
		}
		con.waitSuspended(t, approvalID, "approval", time.Minute)
		if done := con.want(t, http.StatusOK, http.MethodPost, "/api/approvals/"+approvalID, map[string]any{"approved": true, "comment": "within budget"}); done["enqueued"] != true {
			t.Fatalf("approve: %v", done)
		}
		views := con.waitCompleted(t, []string{delayID, payID, approvalID, codeID}, 2*time.Minute)
		if o, _ := views[payID]["output"].(map[string]any); o["status"] != "paid" || o["payment_id"] != "p-1" {
			t.Errorf("payment-wait output %v", views[payID]["output"])
		}
		if o, _ := views[approvalID]["output"].(map[string]any); o["approved"] != true || o["comment"] != "within budget" {
			t.Errorf("expense-approval output %v", views[approvalID]["output"])
		}
		if o, _ := views[codeID]["output"].(map[string]any); o["double"] != float64(42) || !strings.HasPrefix(fmt.Sprint(o["python"]), "3.") {
			t.Errorf("stack-code output %v: the image's python3 did not run it", views[codeID]["output"])
		}
		con.endedOnce(t, all)
	}) {
		return
	}

	startLoad := func(t *testing.T, n, from int) []string {
		ids := make([]string, 0, n)
		for i := range n {
			ids = append(ids, con.start(t, "stack-load", map[string]any{"n": from + i}))
		}
		return ids
	}
	// waitSomeCompleted waits until at least n of ids completed: the worker is busy with the
	// rest.
	waitSomeCompleted := func(t *testing.T, ids []string, n int) {
		waitUntil(t, fmt.Sprintf("%d executions to complete", n), 2*time.Minute, func() bool {
			done := 0
			for _, id := range ids {
				if status(con.execution(t, id)) == "completed" {
					done++
				}
			}
			return done >= n
		})
	}
	checkOutputs := func(t *testing.T, views map[string]map[string]any, ids []string, from int) {
		for i, id := range ids {
			if o, _ := views[id]["output"].(map[string]any); o["n"] != float64(from+i) {
				t.Errorf("execution %s: output %v, want n=%d", id, views[id]["output"], from+i)
			}
		}
	}

	if !t.Run("kill -9 of the worker under load", func(t *testing.T) {
		ids := startLoad(t, 32, 100)
		waitSomeCompleted(t, ids, 2)
		worker := s.container(t, "worker")
		pending, _ := s.backlog(t)
		if pending == 0 {
			t.Fatalf("nothing in flight when the worker is killed: the test would prove nothing")
		}
		docker(t, 30*time.Second, "kill", "--signal", "KILL", worker)
		waitUntil(t, "the worker to be dead", 30*time.Second, func() bool {
			return strings.TrimSpace(docker(t, 30*time.Second, "inspect", "--format", "{{.State.Running}}", worker)) == "false" ||
				strings.TrimSpace(docker(t, 30*time.Second, "inspect", "--format", "{{.RestartCount}}", worker)) != "0"
		})
		t.Logf("killed the worker with %d task(s) in flight", pending)
		s.run(t, 3*time.Minute, "up", "-d", "--wait", "--wait-timeout", "120", "worker")
		views := con.waitCompleted(t, ids, 3*time.Minute)
		checkOutputs(t, views, ids, 100)
		// The restarted worker claimed what the killed one held (its own counter: a new process).
		if n := s.metric(t, "worker", "plaita_queue_reclaimed_total"); n < 1 {
			t.Fatalf("the restarted worker reclaimed %v task(s): the in-flight ones completed some other way", n)
		} else {
			t.Logf("the restarted worker reclaimed %v task(s)", n)
		}
		con.endedOnce(t, ids)
		all = append(all, ids...)
	}) {
		return
	}

	if !t.Run("docker compose stop drains the worker", func(t *testing.T) {
		ids := startLoad(t, 16, 200)
		waitSomeCompleted(t, ids, 1)
		worker := s.container(t, "worker")
		began := time.Now()
		s.run(t, 2*time.Minute, "stop", "worker")
		took := time.Since(began)
		if code := strings.TrimSpace(docker(t, 30*time.Second, "inspect", "--format", "{{.State.ExitCode}}", worker)); code != "0" {
			t.Fatalf("the drained worker exited %s, want 0", code)
		}
		pending, length := s.backlog(t)
		if pending != 0 {
			t.Fatalf("%d task(s) pending after the drain: the worker left work claimed", pending)
		}
		t.Logf("docker compose stop worker: %s, exit 0, nothing pending, %d entries waiting in the stream", took.Round(100*time.Millisecond), length)
		s.run(t, 3*time.Minute, "up", "-d", "--wait", "--wait-timeout", "120", "worker")
		views := con.waitCompleted(t, ids, 3*time.Minute)
		checkOutputs(t, views, ids, 200)
		con.endedOnce(t, ids)
		all = append(all, ids...)
	}) {
		return
	}

	if !t.Run("a new console container keeps the database", func(t *testing.T) {
		con.want(t, http.StatusCreated, http.MethodPost, "/api/users", map[string]any{"login": "stack-operator", "password": "operator-password-1"})
		draft := con.want(t, http.StatusCreated, http.MethodPost, "/api/flows/drafts",
			map[string]any{"definition": json.RawMessage(`{"id":"stack-draft","start":"e","nodes":[{"id":"e","type":"end"}]}`)})
		old := s.container(t, "console")
		s.run(t, 3*time.Minute, "up", "-d", "--wait", "--wait-timeout", "120", "--force-recreate", "--no-deps", "console")
		if now := s.container(t, "console"); now == old {
			t.Fatalf("the console's container was not replaced")
		}
		fresh := newConsole(con.base)
		fresh.login(t, "admin", password)
		newConsole(con.base).login(t, "stack-operator", "operator-password-1")
		if draft["flow_id"] != "stack-draft" {
			t.Fatalf("draft %v", draft)
		}
		if code, out := fresh.do(t, http.MethodGet, "/api/flows/drafts/stack-draft", nil); code != http.StatusOK || out["revision"] != float64(1) {
			t.Fatalf("the draft is gone after the console's container was replaced: %d %v", code, out)
		}
		// An execution the old container started is read by the new one.
		if ex := fresh.execution(t, all[0]); status(ex) != "completed" {
			t.Fatalf("execution %s: %v", all[0], ex)
		}
		con = fresh
	}) {
		return
	}

	if !t.Run("a Redis restart keeps every execution", func(t *testing.T) {
		delayID := con.start(t, "stack-delay", nil)
		payID := con.start(t, "payment-wait", map[string]any{"order_id": "ord-stack-2"})
		con.waitSuspended(t, payID, "event", time.Minute)
		con.waitSuspended(t, delayID, "delay", time.Minute)
		s.run(t, 2*time.Minute, "restart", "redis")
		s.run(t, 3*time.Minute, "up", "-d", "--wait", "--wait-timeout", "120")
		// The restarted Redis read its append-only file: the wait is still there, and the
		// event wakes it.
		waitUntil(t, "the console to read the suspended wait again", time.Minute, func() bool {
			return status(con.execution(t, payID)) == "suspended"
		})
		con.want(t, http.StatusCreated, http.MethodPost, "/api/events",
			map[string]any{"type": "payment", "id": "pay-stack-2", "data": map[string]any{"order_id": "ord-stack-2", "status": "paid"}})
		views := con.waitCompleted(t, []string{delayID, payID}, 2*time.Minute)
		if o, _ := views[payID]["output"].(map[string]any); o["status"] != "paid" {
			t.Errorf("payment-wait after the restart: %v", views[payID]["output"])
		}
		con.endedOnce(t, []string{delayID, payID})
		all = append(all, delayID, payID)
	}) {
		return
	}

	// Every execution of the test, read once more at the end: all completed, each once.
	con.waitCompleted(t, all, time.Minute)
	con.endedOnce(t, all)

	t.Run("down -v removes the stack", func(t *testing.T) {
		s.run(t, 2*time.Minute, "down", "-v", "--remove-orphans")
		removed = true
		label := "label=com.docker.compose.project=" + project
		if left := strings.TrimSpace(docker(t, 30*time.Second, "ps", "-a", "-q", "--filter", label)); left != "" {
			t.Errorf("containers left: %s", left)
		}
		if left := strings.TrimSpace(docker(t, 30*time.Second, "volume", "ls", "-q", "--filter", label)); left != "" {
			t.Errorf("volumes left: %s", left)
		}
	})
}

// checkImage holds plaita:dev, as the stack built it, to docs/operations.md "Containers": a
// non-root user, `plaita probe` as the health check, python3 and node for the code node, the
// demo flows, no default role; its size is logged.
func checkImage(t *testing.T) {
	var img struct {
		Size   int64
		Config struct {
			User        string
			Healthcheck struct{ Test []string }
			Entrypoint  []string
			Cmd         []string
		}
	}
	raw := docker(t, 30*time.Second, "image", "inspect", "--format", "{{json .}}", "plaita:dev")
	if err := json.Unmarshal([]byte(raw), &img); err != nil {
		t.Fatalf("docker image inspect: %v: %s", err, raw)
	}
	if img.Config.User != "10001:10001" {
		t.Errorf("user %q, want the non-root 10001:10001", img.Config.User)
	}
	if got := strings.Join(img.Config.Healthcheck.Test, " "); got != "CMD plaita probe --quiet" {
		t.Errorf("health check %q, want plaita probe", got)
	}
	out := docker(t, time.Minute, "run", "--rm", "--entrypoint", "/bin/sh", "plaita:dev", "-c",
		"id -u; python3 --version; node --version; ls /usr/share/plaita/flows | wc -l; plaita version")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 5 || lines[0] != "10001" || !strings.HasPrefix(lines[1], "Python 3") || !strings.HasPrefix(lines[2], "v") {
		t.Fatalf("inside the image: %q", out)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(lines[3])); n < 5 {
		t.Errorf("demo flows in the image: %s", lines[3])
	}
	// No default role: the bare image prints the roles and tools and runs none.
	roles, err := dockerErr(time.Minute, "run", "--rm", "plaita:dev")
	if err != nil || !strings.Contains(roles, "worker") || !strings.Contains(roles, "console") {
		t.Errorf("docker run plaita:dev: %v: %s", err, roles)
	}
	t.Logf("plaita:dev: %.0f MB, user %s, %s, %s, %s", float64(img.Size)/1e6, img.Config.User, lines[1], "node "+lines[2], lines[4])
}
