//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/test/pgtest"
)

// Two consoles on one PostgreSQL database, as behind a load balancer (docs/console.md, "Several
// consoles"), from the binary: a session made on one is used on the other; a key revoked on one
// is refused on the other at once; a login locked on one is locked on the other; one
// Idempotency-Key sent to both makes one execution; the periodic tenant-status reconcile runs
// on one of them and moves to the other when it dies; and a bulk job whose console is killed
// with SIGKILL half-way is finished by the other, no item applied twice.

// replicaCall sends one request to base with the headers and a JSON body; it returns the status
// and the decoded body.
func replicaCall(t *testing.T, hc *http.Client, method, url string, headers map[string]string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

const waitingFlow = `{"id": "await", "version": "1", "start": "w", "nodes": [
	{"id": "w", "type": "wait_event", "params": {"event_type": "never", "match": "EVENT.id == INPUT.n"}, "next": "done"},
	{"id": "done", "type": "end", "params": {"output": "woken"}}]}`

func TestConsoleReplicasOnPostgres(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	env := map[string]string{
		"PLAITA_CONSOLE_DB_URL":                  pgtest.Database(t),
		"PLAITA_CREDENTIALS_KEY_FILE":            filepath.Join(t.TempDir(), "credentials.key"),
		"PLAITA_CONSOLE_ADMIN_PASSWORD":          "the-admin-password",
		"PLAITA_TENANT_STATUS_RECONCILE_SECONDS": "1",
	}
	with := func(id string) map[string]string {
		e := map[string]string{"PLAITA_INSTANCE_ID": id}
		for k, v := range env {
			e[k] = v
		}
		return e
	}
	a, b := s.startConsole(with("console-a")), s.startConsole(with("console-b"))
	worker := s.start("worker", map[string]string{"PLAITA_WORKER_CONCURRENCY": "16"})

	// A session made on a is used on b.
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Timeout: 10 * time.Second, Jar: jar}
	if code, body := replicaCall(t, hc, http.MethodPost, a.base+"/api/login", nil, map[string]string{"login": "admin", "password": "the-admin-password"}); code != http.StatusOK {
		t.Fatalf("log in on a: %d %v", code, body)
	}
	// The cookie is the host's (127.0.0.1), whatever the port: b's requests carry it.
	if code, body := replicaCall(t, hc, http.MethodGet, b.base+"/api/session", nil, nil); code != http.StatusOK || body["actor"] != "admin" {
		t.Fatalf("a's session on b: %d %v", code, body)
	}

	// A key made on a works on b until it is revoked on a: then b refuses it at once.
	code, created := a.call(t, http.MethodPost, "/api/api-keys", map[string]any{"name": "ci", "role": "editor"})
	if code != http.StatusCreated {
		t.Fatalf("create a key on a: %d %v", code, created)
	}
	key := created["key"].(string)
	keyID := created["api_key"].(map[string]any)["id"].(string)
	bearer := map[string]string{"Authorization": "Bearer " + key}
	if code, body := replicaCall(t, http.DefaultClient, http.MethodGet, b.base+"/api/executions", bearer, nil); code != http.StatusOK {
		t.Fatalf("a's key on b: %d %v", code, body)
	}
	if code, body := a.call(t, http.MethodDelete, "/api/api-keys/"+keyID, nil); code != http.StatusOK && code != http.StatusNoContent {
		t.Fatalf("revoke on a: %d %v", code, body)
	}
	if code, body := replicaCall(t, http.DefaultClient, http.MethodGet, b.base+"/api/executions", bearer, nil); code != http.StatusUnauthorized {
		t.Fatalf("the revoked key on b: %d %v, want 401", code, body)
	}

	// Failed logins of one login from one network on a lock it on b.
	attacker := from("127.0.0.3")
	for i := range 5 {
		if code, _ := replicaCall(t, attacker, http.MethodPost, a.base+"/api/login", nil, map[string]string{"login": "admin", "password": fmt.Sprint("guess-", i)}); code != http.StatusUnauthorized {
			t.Fatalf("guess %d on a: %d", i, code)
		}
	}
	if code, body := replicaCall(t, attacker, http.MethodPost, b.base+"/api/login", nil, map[string]string{"login": "admin", "password": "the-admin-password"}); code != http.StatusTooManyRequests {
		t.Fatalf("the locked pair on b: %d %v, want 429", code, body)
	}

	// One Idempotency-Key sent to both at once: one execution.
	a.publishFlow(t, "", waitingFlow)
	var wg sync.WaitGroup
	ids := make([]string, 2)
	for i, c := range []*console{a, b} {
		wg.Go(func() {
			code, body := replicaCall(t, http.DefaultClient, http.MethodPost, c.base+"/api/executions",
				map[string]string{"X-Admin-API-Key": consoleAdminKey, "Idempotency-Key": "order-7"},
				map[string]any{"flow_id": "await", "input": map[string]any{"n": "x"}})
			if code != http.StatusAccepted && code != http.StatusOK && code != http.StatusCreated {
				t.Errorf("keyed start on console %d: %d %v", i, code, body)
				return
			}
			ids[i], _ = body["execution_id"].(string)
		})
	}
	wg.Wait()
	if ids[0] == "" || ids[0] != ids[1] {
		t.Fatalf("one key, two consoles: executions %q and %q", ids[0], ids[1])
	}
	a.waitExecution(t, ids[0], "the keyed execution to wait", func(st map[string]any) bool { return st["status"] == "suspended" })

	// The periodic tenant-status reconcile runs on one console.
	holds := func(c *console) bool {
		return countLog(c.p, "console.lease", `"held":true`) > countLog(c.p, "console.lease", `"held":false`)
	}
	waitFor(t, "one console to hold the reconcile's lease", 30*time.Second, func() bool { return holds(a) != holds(b) }, a.p, b.p)

	// A bulk job over 600 waiting executions, its console killed with SIGKILL half-way.
	const n = 600
	for i := range n {
		if code, body := a.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "await", "input": map[string]any{"n": fmt.Sprint(i)}}); code != http.StatusAccepted && code != http.StatusOK && code != http.StatusCreated {
			t.Fatalf("start %d: %d %v", i, code, body)
		}
	}
	waitFor(t, "the executions to wait", 120*time.Second, func() bool {
		_, body := a.call(t, http.MethodPost, "/api/jobs", map[string]any{"action": "cancel", "filter": map[string]any{"flow_id": "await", "status": "suspended"}, "dry_run": true})
		sel, _ := body["selection"].(map[string]any)
		count, _ := sel["count"].(float64)
		return int(count) == n+1
	}, worker, a.p)
	code, job := a.call(t, http.MethodPost, "/api/jobs", map[string]any{"action": "cancel", "filter": map[string]any{"flow_id": "await", "status": "suspended"}})
	if code != http.StatusCreated {
		t.Fatalf("create the job on a: %d %v", code, job)
	}
	jobID := job["job"].(map[string]any)["id"].(string)
	readJob := func(c *console) map[string]any {
		_, body := c.call(t, http.MethodGet, "/api/jobs/"+jobID, nil)
		j, _ := body["job"].(map[string]any)
		return j
	}
	var half map[string]any
	defer func() {
		if t.Failed() {
			t.Logf("the job half-way: %v", half)
		}
	}()
	waitFor(t, "the job to be half-way", 60*time.Second, func() bool {
		half = readJob(b)
		done, _ := half["succeeded"].(float64)
		remaining, _ := half["remaining"].(float64)
		return done > 0 && remaining > 0
	}, a.p, b.p)
	reconcileOnA := holds(a)
	a.p.kill9(t)
	// What a left, read once it is dead: only b can finish it.
	if left := readJob(b); left["status"] != "running" || left["remaining"].(float64) == 0 {
		t.Fatalf("the job a left: %v", left)
	}
	var end map[string]any
	waitFor(t, "b to finish the job", 120*time.Second, func() bool {
		end = readJob(b)
		return end["status"] == "completed" || end["status"] == "failed"
	}, b.p)
	succeeded, failed, total := end["succeeded"].(float64), end["failed"].(float64), end["total"].(float64)
	if total != n+1 || succeeded+failed != total {
		t.Fatalf("the job at its end: %v", end)
	}
	// Every item once: done (cancel requested) or, the batch a held when it died, failed as
	// interrupted — not applied again.
	seen := map[string]int{}
	cursor := ""
	for {
		path := "/api/jobs/" + jobID + "/items?limit=500"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		code, page := b.call(t, http.MethodGet, path, nil)
		if code != http.StatusOK {
			t.Fatalf("the job's items: %d %v", code, page)
		}
		items, _ := page["items"].([]any)
		for _, it := range items {
			m := it.(map[string]any)
			seen[m["item"].(string)]++
			switch m["state"] {
			case "done":
			case "failed":
				if m["code"] != "interrupted" {
					t.Errorf("item %v failed: %v", m["item"], m)
				}
			default:
				t.Errorf("item %v left %v", m["item"], m["state"])
			}
		}
		if cursor, _ = page["next_cursor"].(string); cursor == "" {
			break
		}
	}
	if len(seen) != n+1 {
		t.Errorf("%d items listed, want %d", len(seen), n+1)
	}
	for item, k := range seen {
		if k != 1 {
			t.Errorf("item %s listed %d times", item, k)
		}
	}
	if strings.Count(b.p.stderr.String(), `"event":"console.jobs_failed"`) > 0 {
		t.Errorf("b's runner failed rounds:\n%s", b.p.stderr.String())
	}
	// The reconcile moves to b if a held it.
	if reconcileOnA {
		waitFor(t, "b to take the reconcile's lease over", 30*time.Second, func() bool { return holds(b) }, b.p)
	}
}
