//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"plaita/test/redistest"
)

// Local mode from the binary: `plaita console` with no Redis reachable runs executions in its
// own process on its database — a delay and an approval to completion — and a console killed
// with kill -9 mid-step finds its execution on restart and settles it as
// PLAITA_CONSOLE_RECONCILE_ORPHANS says.

// startLocalConsole starts `plaita console` with nothing listening at its Redis URL, its
// database at db, and waits until it is ready.
func startLocalConsole(t *testing.T, db string, extra map[string]string) *console {
	t.Helper()
	port := redistest.FreePort(t)
	env := map[string]string{"PLAITA_CONSOLE_REDIS_URL": "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0",
		"PLAITA_CONSOLE_PORT": strconv.Itoa(port), "PLAITA_CONSOLE_HOST": "127.0.0.1", "PLAITA_CONSOLE_ADMIN_API_KEY": consoleAdminKey,
		"PLAITA_CONSOLE_DB_URL": "sqlite:///" + db, "PLAITA_CODE_BACKEND": "subprocess", "PLAITA_LOG_FORMAT": "json"}
	for k, v := range extra {
		env[k] = v
	}
	c := &console{p: spawn(t, env, "console"), base: "http://127.0.0.1:" + strconv.Itoa(port)}
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

func TestConsoleLocalModeRunsAndReconcilesOrphans(t *testing.T) {
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

	// kill -9 during a step: the execution stays running in the database; the next start
	// suspends it (the default) and a continue runs the step again.
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
	startCall := func(c *console) string {
		code, body := c.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "call"})
		if code != http.StatusCreated {
			t.Fatalf("start: %d %v", code, body)
		}
		return fmt.Sprint(body["execution_id"])
	}
	orphan := startCall(con)
	waitFor(t, "the step's request", 30*time.Second, func() bool { return calls.Load() == 1 }, con.p)
	con.p.kill9(t)

	con = startLocalConsole(t, db, nil)
	_, h := con.call(t, http.MethodGet, "/health", nil)
	rec, _ := h["reconcile"].(map[string]any)
	changed, _ := rec["changed"].([]any)
	if rec["mode"] != "suspend" || len(changed) != 1 || changed[0].(map[string]any)["execution_id"] != orphan {
		t.Fatalf("the reconcile on /health: %v", h["reconcile"])
	}
	st := con.waitExecution(t, orphan, "suspended by the reconcile", statusOf("suspended"))
	if s, _ := st["suspend"].(map[string]any); s["kind"] != "orphan" || s["node"] != "fetch" {
		t.Fatalf("suspension %v", st["suspend"])
	}
	if code, body := con.call(t, http.MethodPost, "/api/executions/"+orphan+"/resume", map[string]any{"type": "retry"}); code != http.StatusConflict {
		t.Fatalf("a retry of an orphan: %d %v", code, body)
	}
	if code, body := con.call(t, http.MethodPost, "/api/executions/"+orphan+"/resume", map[string]any{"type": "continue"}); code != http.StatusOK {
		t.Fatalf("continue: %d %v", code, body)
	}
	if st := con.waitExecution(t, orphan, "completed after continue", statusOf("completed")); st["output"] != float64(200) || calls.Load() != 2 {
		t.Fatalf("output %v after %d calls", st["output"], calls.Load())
	}

	// With PLAITA_CONSOLE_RECONCILE_ORPHANS=fail, the orphan ends in error instead.
	calls.Store(0)
	orphan = startCall(con)
	waitFor(t, "the step's request", 30*time.Second, func() bool { return calls.Load() == 1 }, con.p)
	con.p.kill9(t)
	con = startLocalConsole(t, db, map[string]string{"PLAITA_CONSOLE_RECONCILE_ORPHANS": "fail"})
	st = con.waitExecution(t, orphan, "failed by the reconcile", statusOf("error"))
	if e, _ := st["error"].(map[string]any); e["type"] != "OrphanedExecution" || e["node"] != "fetch" {
		t.Fatalf("error %v", st["error"])
	}
	drainAtEnd(t, con.p, "the local console")
}
