//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"plaita/test/redistest"
)

// Which mode a console starts in, from the binary: a console whose database has served with
// Redis does not fall back to local mode when Redis is unreachable at its start — it waits for
// Redis, not ready, its API answering 503, and starts on Redis once it answers — unless
// PLAITA_CONSOLE_LOCAL_FALLBACK allows local mode; a database that never saw Redis still gets
// local mode. The executions a console ran in local mode stay visible once it runs on Redis.

// modeConsole is a console process on a database and a Redis URL, with its metrics port.
type modeConsole struct {
	*console
	metrics int
}

// spawnModeConsole starts `plaita console` on db and redisURL without waiting for it.
func spawnModeConsole(t *testing.T, db, redisURL string, extra map[string]string) *modeConsole {
	t.Helper()
	port, metrics := redistest.FreePort(t), redistest.FreePort(t)
	env := map[string]string{"PLAITA_CONSOLE_REDIS_URL": redisURL, "PLAITA_CONSOLE_PORT": strconv.Itoa(port), "PLAITA_CONSOLE_HOST": "127.0.0.1",
		"PLAITA_CONSOLE_ADMIN_API_KEY": consoleAdminKey, "PLAITA_CONSOLE_DB_URL": "sqlite:///" + db, "PLAITA_CODE_BACKEND": "subprocess",
		"PLAITA_LOG_FORMAT": "json", "PLAITA_METRICS_PORT": strconv.Itoa(metrics), "PLAITA_METRICS_HOST": "127.0.0.1"}
	for k, v := range extra {
		env[k] = v
	}
	c := &modeConsole{console: &console{p: spawn(t, env, "console"), base: "http://127.0.0.1:" + strconv.Itoa(port)}, metrics: metrics}
	c.p.port = metrics
	return c
}

// startModeConsole is spawnModeConsole, then waits until the console is ready.
func startModeConsole(t *testing.T, db, redisURL string, extra map[string]string) *modeConsole {
	t.Helper()
	c := spawnModeConsole(t, db, redisURL, extra)
	c.waitReady(t)
	return c
}

func (c *modeConsole) waitReady(t *testing.T) {
	t.Helper()
	waitFor(t, "the console to be ready", 60*time.Second, func() bool {
		code, _ := c.text(t, "/readyz")
		return code == http.StatusOK
	}, c.p)
}

// text is a GET of the console's port that returns the body as text.
func (c *modeConsole) text(t *testing.T, path string) (int, string) {
	t.Helper()
	res, err := (&http.Client{Timeout: 5 * time.Second}).Get(c.base + path)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// mode is what /health says the console's mode is.
func (c *modeConsole) mode(t *testing.T) string {
	t.Helper()
	_, h := c.call(t, http.MethodGet, "/health", nil)
	return fmt.Sprint(h["mode"])
}

// localRows counts the console database's local executions (read-only, beside the console).
func localRows(t *testing.T, db string) int {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow("SELECT COUNT(*) FROM local_executions").Scan(&n); err != nil {
		t.Fatalf("count local executions: %v", err)
	}
	return n
}

const modeFlow = `{"id": "hello", "version": "1", "start": "done", "nodes": [{"id": "done", "type": "end", "params": {"output": "hi"}}]}`

// TestConsoleThatServedWithRedisWaitsForIt: a console on a new database starts with Redis and
// is stopped; Redis is stopped; the console started again does not run local mode: not ready
// (on its port and on the metrics port, naming why), its API 503 (a start is refused, nothing is
// written to local_executions), one waiting line in the log; Redis started again, the console
// becomes ready by itself and a start goes to Redis.
func TestConsoleThatServedWithRedisWaitsForIt(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	db := filepath.Join(t.TempDir(), "console.db")
	con := startModeConsole(t, db, srv.URL(), nil)
	if m := con.mode(t); m != "redis" {
		t.Fatalf("mode %q with Redis", m)
	}
	if code, body := con.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(modeFlow)}); code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, body)
	}
	con.p.stop(t)
	srv.Kill()

	con = spawnModeConsole(t, db, srv.URL(), nil)
	waitFor(t, "the console to say it waits for Redis", 30*time.Second, func() bool {
		return countLog(con.p, "console.waiting_for_redis", "") > 0
	}, con.p)
	waitFor(t, "the console's port to answer", 30*time.Second, func() bool {
		code, _ := con.text(t, "/readyz")
		return code != 0
	}, con.p)
	if code, body := con.text(t, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "Redis") {
		t.Fatalf("/readyz while waiting: %d %q", code, body)
	}
	if code, body := con.p.get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "Redis") {
		t.Fatalf("metrics /readyz while waiting: %d %q", code, body)
	}
	code, body := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "hello"})
	if code != http.StatusServiceUnavailable || body["code"] != "waiting_for_redis" {
		t.Fatalf("a start while waiting: %d %v", code, body)
	}
	line := logLines(con.p.stderr.String(), "console.waiting_for_redis")
	if len(line) != 1 || !strings.Contains(fmt.Sprint(line[0]), "PLAITA_CONSOLE_LOCAL_FALLBACK") ||
		!strings.Contains(fmt.Sprint(line[0]), "127.0.0.1:"+strconv.Itoa(srv.Port)) {
		t.Fatalf("the waiting line: %v", line)
	}
	if n := countLog(con.p, "console.local_mode", ""); n != 0 {
		t.Fatalf("local mode while Redis is down on a database that served with Redis:\n%s", tail(con.p.stderr.String(), 20))
	}
	if n := localRows(t, db); n != 0 {
		t.Fatalf("%d local executions written while waiting", n)
	}

	srv.Start()
	con.waitReady(t)
	if m := con.mode(t); m != "redis" {
		t.Fatalf("mode %q once Redis answers", m)
	}
	code, body = con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "hello"})
	if code != http.StatusCreated || body["queue"] != "plaita:flow:queue" {
		t.Fatalf("a start once Redis answers: %d %v", code, body)
	}
	rc := srv.Client(t)
	if n, err := rc.Do(context.Background(), rc.B().Xlen().Key("plaita:flow:queue").Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("the task stream holds %d (%v)", n, err)
	}
	if n := localRows(t, db); n != 0 {
		t.Fatalf("%d local executions", n)
	}
	con.p.stop(t)
}

// TestConsoleLocalFallbackSetting: with PLAITA_CONSOLE_LOCAL_FALLBACK=1 a database that served
// with Redis gets local mode again when Redis is unreachable; a database that never saw Redis
// gets it without the setting.
func TestConsoleLocalFallbackSetting(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	db := filepath.Join(t.TempDir(), "console.db")
	con := startModeConsole(t, db, srv.URL(), nil)
	con.p.stop(t)
	srv.Kill()
	con = startModeConsole(t, db, srv.URL(), map[string]string{"PLAITA_CONSOLE_LOCAL_FALLBACK": "1"})
	if m := con.mode(t); m != "local" {
		t.Fatalf("mode %q with PLAITA_CONSOLE_LOCAL_FALLBACK=1", m)
	}
	con.p.stop(t)

	fresh := startModeConsole(t, filepath.Join(t.TempDir(), "fresh.db"), srv.URL(), nil)
	if m := fresh.mode(t); m != "local" {
		t.Fatalf("mode %q on a database that never saw Redis", m)
	}
	fresh.p.stop(t)
}

// TestConsoleWaitingForRedisStopsOnSIGTERM: SIGTERM while the console waits for Redis ends it
// at once with status 0.
func TestConsoleWaitingForRedisStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	db := filepath.Join(t.TempDir(), "console.db")
	con := startModeConsole(t, db, srv.URL(), nil)
	con.p.stop(t)
	srv.Kill()
	con = spawnModeConsole(t, db, srv.URL(), nil)
	waitFor(t, "the console to wait for Redis", 30*time.Second, func() bool {
		return countLog(con.p, "console.waiting_for_redis", "") > 0
	}, con.p)
	con.p.ended = true
	if err := con.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !con.p.wait(5 * time.Second) {
		t.Fatalf("the waiting console did not stop within 5 s of SIGTERM\n%s", tail(con.p.stderr.String(), 20))
	}
	if con.p.err != nil {
		t.Fatalf("exit: %v\n%s", con.p.err, tail(con.p.stderr.String(), 20))
	}
}

// A console that ran local mode (killed with kill -9) and starts again with Redis hands its
// executions to the cluster before it serves: every one is in Redis afterwards, the finished
// ones as they ended, the ones waiting for an approval waiting there — answered over the API,
// the cluster's worker runs them to their end. Nothing is listed as local any more.
func TestConsoleHandsItsLocalExecutionsToRedis(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "console.db")
	down := "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"
	con := startModeConsole(t, db, down, nil)
	if m := con.mode(t); m != "local" {
		t.Fatalf("mode %q on a new database without Redis", m)
	}
	ask := `{"id": "ask", "version": "1", "start": "ask", "nodes": [
	  {"id": "ask", "type": "approval", "params": {"message": "ok?"}, "next": "done"},
	  {"id": "done", "type": "end", "params": {"output": "{{ NODE.ask.comment }}"}}]}`
	for _, def := range []string{modeFlow, ask} {
		if code, body := con.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)}); code != http.StatusCreated {
			t.Fatalf("publish: %d %v", code, body)
		}
	}
	local, asks, ended := map[string]bool{}, map[string]bool{}, map[string]any{}
	for i := range 5 {
		flow := []string{"hello", "ask"}[i%2]
		code, body := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": flow})
		if code != http.StatusCreated {
			t.Fatalf("local start: %d %v", code, body)
		}
		id := fmt.Sprint(body["execution_id"])
		local[id] = true
		if flow == "ask" {
			asks[id] = true
			con.waitExecution(t, id, "the approval", statusOf("suspended"))
		} else {
			ended[id] = con.waitExecution(t, id, "completed", statusOf("completed"))["output"]
		}
	}
	con.p.kill9(t)

	srv := redistest.StartServer(t)
	con = startModeConsole(t, db, srv.URL(), nil)
	if m := con.mode(t); m != "redis" {
		t.Fatalf("mode %q with Redis", m)
	}
	if n := countLog(con.p, "console.handed_over", "handed to Redis"); n != 1 {
		t.Fatalf("the hand-over logged %d times:\n%s", n, tail(con.p.stderr.String(), 20))
	}
	worker := spawn(t, map[string]string{"PLAITA_REDIS_URL": srv.URL(), "PLAITA_LOG_FORMAT": "json", "PLAITA_CODE_BACKEND": "subprocess"}, "worker")
	drainAtEnd(t, worker, "worker")
	onRedis := con.startFlow(t, "hello", nil)
	con.waitExecution(t, onRedis, "completed on Redis", statusOf("completed"))

	seen := map[string]int{}
	for cursor, pages := "", 0; ; pages++ {
		if pages > 50 {
			t.Fatal("no end to the listing")
		}
		path := "/api/executions?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		code, body := con.call(t, http.MethodGet, path, nil)
		if code != http.StatusOK {
			t.Fatalf("list: %d %v", code, body)
		}
		items, _ := body["items"].([]any)
		for _, it := range items {
			m := it.(map[string]any)
			seen[fmt.Sprint(m["execution_id"])]++
			if m["runtime"] != nil {
				t.Fatalf("%v listed with runtime %v after the hand-over", m["execution_id"], m["runtime"])
			}
		}
		if cursor, _ = body["next_cursor"].(string); cursor == "" {
			break
		}
	}
	if len(seen) != len(local)+1 || seen[onRedis] != 1 {
		t.Fatalf("listed %v; want the %d handed over and %s, once each", seen, len(local), onRedis)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s listed %d times", id, n)
		}
	}
	for id, out := range ended {
		if st := con.waitExecution(t, id, "completed as it ended", statusOf("completed")); st["output"] != out {
			t.Fatalf("%s: output %v, was %v", id, st["output"], out)
		}
	}
	for id := range asks {
		if code, body := con.call(t, http.MethodPost, "/api/approvals/"+id, map[string]any{"approved": true, "comment": "later"}); code != http.StatusOK {
			t.Fatalf("answer %s on Redis: %d %v", id, code, body)
		}
		if st := con.waitExecution(t, id, "completed on Redis", statusOf("completed")); st["output"] != "later" {
			t.Fatalf("%s: output %v", id, st["output"])
		}
	}
	con.p.stop(t)
	// Nothing is left to hand over: the next start says nothing.
	con = startModeConsole(t, db, srv.URL(), nil)
	if n := countLog(con.p, "console.handed_over", "handed to Redis"); n != 0 {
		t.Fatalf("a second start handed over again:\n%s", tail(con.p.stderr.String(), 20))
	}
	con.p.stop(t)
}
