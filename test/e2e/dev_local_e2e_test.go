//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/engine"
	"plaita/queue"
	"plaita/store/sqlite"
	"plaita/test/redistest"
)

// plaita dev with no Redis is the whole product: a cron schedule fires, a poison task lands in
// the dead letters and is replayed from the UI once its flow version exists, and a kill -9 of
// dev in the middle of steps — a restart with the same --state-dir — leaves every execution at
// its end, each ended once. (The delay, the correlated event wait and the approval:
// TestDevWithoutRedisRunsTheDemo.)
func TestDevWithoutRedisIsTheWholeProduct(t *testing.T) {
	t.Parallel()
	nowhere := "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"
	dir := t.TempDir()
	d := startDev(t, nowhere, "--state-dir", dir)
	if m := devMode(t, d.p); m["mode"] != "local" {
		t.Fatalf("the first dev line: %v", m)
	}
	publish := func(def string) {
		t.Helper()
		if code, body := d.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)}); code != http.StatusCreated {
			t.Fatalf("publish: %d %v", code, body)
		}
	}

	// A cron schedule, every second: the schedule role in dev's process fires it.
	publish(`{"id": "tick", "version": "1", "start": "done", "nodes": [{"id": "done", "type": "end", "params": {"output": "tock"}}]}`)
	if code, body := d.call(t, http.MethodPost, "/api/schedules", map[string]any{"id": "every-second", "cron": "* * * * * *", "flow_id": "tick"}); code != http.StatusCreated {
		t.Fatalf("schedule: %d %v", code, body)
	}
	waitFor(t, "a scheduled execution completed", 30*time.Second, func() bool {
		code, body := d.call(t, http.MethodGet, "/api/executions?flow_id=tick&status=completed", nil)
		items, _ := body["items"].([]any)
		return code == http.StatusOK && len(items) > 0
	}, d.p)
	if code, body := d.call(t, http.MethodDelete, "/api/schedules/every-second", nil); code != http.StatusOK && code != http.StatusNoContent {
		t.Fatalf("delete the schedule: %d %v", code, body)
	}

	// A poison task — a start of a flow version nobody published, from a producer beside dev
	// (the console database is SQLite in WAL mode: a second process may write) — is
	// dead-lettered; once the version is published, a replay from the UI runs it.
	db, err := sqlite.Open(context.Background(), "sqlite:///"+filepath.Join(dir, "console.db"))
	if err != nil {
		t.Fatal(err)
	}
	poison := engine.NewExecutionID()
	_, err = queue.NewProducer(db.Broker(), "plaita:flow:queue", queue.Generations{}, 1<<20, nil).Enqueue(context.Background(),
		queue.Envelope{Kind: queue.KindStart, FlowID: "later", FlowVersion: "2", ExecutionID: poison, Input: []byte(`{}`)})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	var letter string
	waitFor(t, "the poison task in the dead letters", 30*time.Second, func() bool {
		code, body := d.call(t, http.MethodGet, "/api/dead-letters", nil)
		items, _ := body["items"].([]any)
		for _, it := range items {
			if m := it.(map[string]any); code == http.StatusOK && m["execution_id"] == poison {
				letter = fmt.Sprint(m["dlq_id"])
			}
		}
		return letter != ""
	}, d.p)
	publish(`{"id": "later", "version": "2", "start": "done", "nodes": [{"id": "done", "type": "end", "params": {"output": "replayed"}}]}`)
	ui := devUI(t, d)
	res := ui.post(t, "/ui/deadletters/"+letter+"/replay", url.Values{"confirm": {"yes"}})
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the UI's replay: %d", res.StatusCode)
	}
	if st := d.waitExecution(t, poison, "the replayed start completed", statusOf("completed")); st["output"] != "replayed" {
		t.Fatalf("the replayed execution: %v", st)
	}

	// kill -9 in the middle of steps: each execution calls a server whose first few calls hang.
	var mu sync.Mutex
	calls := map[string]int{}
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		mu.Lock()
		calls[id]++
		first := calls[id] == 1
		mu.Unlock()
		if first {
			select { // a first call hangs: dev dies during it
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	publish(`{"id": "call", "version": "1", "start": "fetch", "nodes": [
	  {"id": "fetch", "type": "http", "params": {"method": "GET", "url": "` + slow.URL + `/x?id={{ INPUT.n }}", "timeout": 60}, "next": "done"},
	  {"id": "done", "type": "end", "params": {"output": "{{ INPUT.n }}"}}]}`)
	const n = 4
	ids := make([]string, n)
	for i := range n {
		ids[i] = d.startFlow(t, "call", map[string]any{"n": strconv.Itoa(i)})
	}
	waitFor(t, "every first call in flight", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) == n
	}, d.p)
	d.p.kill9(t)

	d = startDev(t, nowhere, "--state-dir", dir)
	for i, id := range ids {
		st := d.waitExecution(t, id, "completed after the restart", statusOf("completed"))
		if st["output"] != strconv.Itoa(i) {
			t.Fatalf("%s: output %v", id, st["output"])
		}
		ended := 0
		for _, e := range st["timeline"].([]any) {
			if ev := e.(map[string]any)["event"]; ev == "completed" || ev == "error" || ev == "cancelled" {
				ended++
			}
		}
		if ended != 1 {
			t.Fatalf("%s ended %d times: %v", id, ended, st["timeline"])
		}
	}
	code, body := d.call(t, http.MethodGet, "/api/executions?flow_id=call&limit=100", nil)
	if items, _ := body["items"].([]any); code != http.StatusOK || len(items) != n {
		t.Fatalf("the executions of call after the restart: %d %v", code, body)
	}
	d.p.stop(t)
}

// devClient is a browser logged in to dev's UI as its admin (the password dev printed).
type devClient struct {
	hc   *http.Client
	base string
	csrf string
}

func devUI(t *testing.T, d *devProc) *devClient {
	t.Helper()
	pw := regexp.MustCompile(`log in as admin with the password (\S+)`).FindStringSubmatch(d.stdout.String())
	if pw == nil {
		t.Fatalf("no password printed:\n%s", d.stdout)
	}
	jar, _ := cookiejar.New(nil)
	c := &devClient{hc: &http.Client{Jar: jar, Timeout: 10 * time.Second}, base: d.base}
	res, err := c.hc.Post(d.base+"/api/login", "application/json", strings.NewReader(`{"login":"admin","password":"`+pw[1]+`"}`))
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("login: %v %v", res, err)
	}
	var session struct {
		CSRF string `json:"csrf_token"`
	}
	if err := json.NewDecoder(res.Body).Decode(&session); err != nil || session.CSRF == "" {
		t.Fatalf("the login's CSRF token: %v", err)
	}
	res.Body.Close()
	c.csrf = session.CSRF
	return c
}

// post posts a form as the browser does (its CSRF token, the page's origin).
func (c *devClient) post(t *testing.T, path string, form url.Values) *http.Response {
	t.Helper()
	form.Set("csrf", c.csrf)
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.base)
	res, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}
