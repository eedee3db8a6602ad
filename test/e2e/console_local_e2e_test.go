//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/sqlite"
	"plaita/test/redistest"
)

// Local mode from the binary: `plaita console` with no Redis reachable runs the roles in its
// own process on its database — a delay and an approval to completion — and a step cut short
// by kill -9 is redelivered from the embedded task stream when the console starts again: the
// execution completes by itself. An execution an earlier version's local mode left running
// (no task to redeliver) is settled as PLAITA_CONSOLE_RECONCILE_ORPHANS says.

// startLocalConsole starts `plaita console` with nothing listening at its Redis URL, its
// database at db, and waits until it is ready (extra may fix its port: a restart on the same
// address).
func startLocalConsole(t *testing.T, db string, extra map[string]string) *console {
	t.Helper()
	port := redistest.FreePort(t)
	env := map[string]string{"PLAITA_CONSOLE_REDIS_URL": "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0",
		"PLAITA_CONSOLE_PORT": strconv.Itoa(port), "PLAITA_CONSOLE_HOST": "127.0.0.1", "PLAITA_CONSOLE_ADMIN_API_KEY": consoleAdminKey,
		"PLAITA_CONSOLE_DB_URL": "sqlite:///" + db, "PLAITA_CODE_BACKEND": "subprocess", "PLAITA_LOG_FORMAT": "json"}
	for k, v := range extra {
		env[k] = v
	}
	c := &console{p: spawn(t, env, "console"), base: "http://127.0.0.1:" + env["PLAITA_CONSOLE_PORT"]}
	waitFor(t, "the local console to be ready", 30*time.Second, func() bool {
		code, _ := c.call(t, http.MethodGet, "/readyz", nil)
		return code == http.StatusOK
	}, c.p)
	return c
}

// waitExecution reads the execution over the API until cond holds.
func (c *console) waitExecution(t *testing.T, id, what string, cond func(st map[string]any) bool) map[string]any {
	t.Helper()
	var last map[string]any
	waitFor(t, what, 30*time.Second, func() bool {
		code, body := c.call(t, http.MethodGet, "/api/executions/"+id, nil)
		if code != http.StatusOK {
			return false
		}
		last, _ = body["execution"].(map[string]any)
		return last != nil && cond(last)
	}, c.p)
	return last
}

func statusOf(want string) func(map[string]any) bool {
	return func(st map[string]any) bool { return st["status"] == want }
}

func TestConsoleLocalModeRunsAndRedelivers(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "console.db")
	con := startLocalConsole(t, db, nil)
	if code, h := con.call(t, http.MethodGet, "/health", nil); code != http.StatusOK || h["mode"] != "local" {
		t.Fatalf("health: %d %v", code, h)
	}
	if n := countLog(con.p, "console.local_mode", "LOCAL MODE"); n != 1 {
		t.Fatalf("the local-mode warning logged %d times:\n%s", n, tail(con.p.stderr.String(), 20))
	}

	// A delay and an approval, to completion.
	def := json.RawMessage(`{"id": "pay", "start": "pause", "nodes": [
	  {"id": "pause", "type": "delay", "params": {"seconds": 1}, "next": "ask"},
	  {"id": "ask", "type": "approval", "params": {"message": "pay?"}, "next": "done"},
	  {"id": "done", "type": "end", "params": {"output": "{{ NODE.ask.comment }}"}}]}`)
	if code, body := con.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": def}); code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, body)
	}
	code, body := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "pay"})
	if code != http.StatusCreated {
		t.Fatalf("start: %d %v", code, body)
	}
	id := fmt.Sprint(body["execution_id"])
	con.waitExecution(t, id, "suspended at the delay", func(st map[string]any) bool { return st["current_node"] == "pause" })
	con.waitExecution(t, id, "the approval after the delay", func(st map[string]any) bool {
		return st["status"] == "suspended" && st["current_node"] == "ask"
	})
	if code, body := con.call(t, http.MethodPost, "/api/approvals/"+id, map[string]any{"approved": true, "comment": "paid"}); code != http.StatusOK {
		t.Fatalf("answer: %d %v", code, body)
	}
	if st := con.waitExecution(t, id, "completed", statusOf("completed")); st["output"] != "paid" {
		t.Fatalf("output %v", st["output"])
	}

	// kill -9 during a step: the step's task stays pending in the embedded stream; the next
	// start claims it (once idle for PLAITA_CLAIM_MIN_IDLE_MS: 5 s in local mode) and runs the step again.
	var calls atomic.Int32
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			select { // the first call hangs: the console dies during it
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	def = json.RawMessage(`{"id": "call", "start": "fetch", "nodes": [
	  {"id": "fetch", "type": "http", "params": {"method": "GET", "url": "` + slow.URL + `/x", "timeout": 60}, "next": "done"},
	  {"id": "done", "type": "end", "params": {"output": "{{ NODE.fetch.RESPONSE.status }}"}}]}`)
	if code, body := con.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": def}); code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, body)
	}
	code, body = con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "call"})
	if code != http.StatusCreated {
		t.Fatalf("start: %d %v", code, body)
	}
	cut := fmt.Sprint(body["execution_id"])
	waitFor(t, "the step's request", 30*time.Second, func() bool { return calls.Load() == 1 }, con.p)
	con.p.kill9(t)

	con = startLocalConsole(t, db, nil)
	if st := con.waitExecution(t, cut, "completed after the redelivery", statusOf("completed")); st["output"] != float64(200) || calls.Load() != 2 {
		t.Fatalf("output %v after %d calls", st["output"], calls.Load())
	}
	drainAtEnd(t, con.p, "the local console")
}

// An execution an earlier version's local mode left running in the console database has no
// task in the embedded stream: the start settles it as PLAITA_CONSOLE_RECONCILE_ORPHANS says
// (suspend, the default: an operator continues it) and says so on /health.
func TestConsoleLocalModeSettlesAnEarlierVersionsOrphans(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "console.db")
	db, err := sqlite.Open(t.Context(), "sqlite:///"+path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Minute)
	if err := db.Executions().Save(t.Context(), &state.Execution{ExecutionID: "ex_left_running", TenantID: "default", FlowID: "call",
		FlowVersion: "1", Status: state.Running, CurrentNode: "fetch", Context: map[string]any{}, StartTime: at, LastUpdate: at}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	con := startLocalConsole(t, path, nil)
	_, h := con.call(t, http.MethodGet, "/health", nil)
	rec, _ := h["reconcile"].(map[string]any)
	changed, _ := rec["changed"].([]any)
	if rec["mode"] != "suspend" || len(changed) != 1 || changed[0].(map[string]any)["execution_id"] != "ex_left_running" {
		t.Fatalf("the reconcile on /health: %v", h["reconcile"])
	}
	st := con.waitExecution(t, "ex_left_running", "suspended by the reconcile", statusOf("suspended"))
	if s, _ := st["suspend"].(map[string]any); s["kind"] != "orphan" || s["node"] != "fetch" {
		t.Fatalf("suspension %v", st["suspend"])
	}
	drainAtEnd(t, con.p, "the local console")
}

// Keyed starts over the API while the console in local mode is killed with kill -9 again and
// again (the measure that found the earlier local mode leaving executions suspended for an
// operator): a client retries each start with its Idempotency-Key until it is answered; in the
// end every key has one execution, each completed — through a delay, so the delay role's side
// of the embedded drivers is in it too — and each ended once.
func TestConsoleLocalModeKeyedStartsSurviveKill9(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "console.db")
	port := strconv.Itoa(redistest.FreePort(t))
	fixed := map[string]string{"PLAITA_CONSOLE_PORT": port}
	con := startLocalConsole(t, db, fixed)
	def := json.RawMessage(`{"id": "nap", "start": "tag", "nodes": [
	  {"id": "tag", "type": "set", "params": {"vars": {"k": "{{ INPUT.k }}"}}, "next": "pause"},
	  {"id": "pause", "type": "delay", "params": {"seconds": 1}, "next": "done"},
	  {"id": "done", "type": "end", "params": {"output": "{{ VARS.k }}"}}]}`)
	if code, body := con.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": def}); code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, body)
	}
	const keys = 60
	ids := make([]string, keys)
	done := make(chan struct{})
	go func() { // the client: one keyed start after another, each retried until answered
		defer close(done)
		hc := &http.Client{Timeout: 5 * time.Second}
		for i := range keys {
			for {
				body := strings.NewReader(fmt.Sprintf(`{"flow_id": "nap", "input": {"k": "k-%d"}}`, i))
				req, _ := http.NewRequest(http.MethodPost, con.base+"/api/executions", body)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Admin-API-Key", consoleAdminKey)
				req.Header.Set("Idempotency-Key", fmt.Sprintf("key-%d", i))
				res, err := hc.Do(req)
				if err == nil {
					var out map[string]any
					_ = json.NewDecoder(res.Body).Decode(&out)
					res.Body.Close()
					if res.StatusCode == http.StatusCreated || res.StatusCode == http.StatusOK {
						ids[i] = fmt.Sprint(out["execution_id"])
						break
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(150 * time.Millisecond) // the starts spread over several kills
		}
	}()
	for kills := 0; ; kills++ {
		select {
		case <-done:
		case <-time.After(1500 * time.Millisecond):
			con.p.kill9(t)
			con = startLocalConsole(t, db, fixed)
			continue
		}
		if kills < 2 {
			t.Fatalf("the starts were answered before the console was killed twice (%d kills): the test proves nothing", kills)
		}
		break
	}
	for i, id := range ids {
		st := con.waitExecution(t, id, "completed", statusOf("completed"))
		if st["output"] != fmt.Sprintf("k-%d", i) {
			t.Fatalf("%s (key-%d): output %v", id, i, st["output"])
		}
		ended := 0
		for _, e := range st["timeline"].([]any) {
			if e.(map[string]any)["event"] == "completed" {
				ended++
			}
		}
		if ended != 1 {
			t.Fatalf("%s ended %d times", id, ended)
		}
	}
	code, body := con.call(t, http.MethodGet, "/api/executions?flow_id=nap&limit=1000", nil)
	if items, _ := body["items"].([]any); code != http.StatusOK || len(items) != keys {
		t.Fatalf("%d executions of nap for %d keys: %d", len(body["items"].([]any)), keys, code)
	}
	drainAtEnd(t, con.p, "the local console")
}
