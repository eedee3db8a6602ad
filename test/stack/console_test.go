//go:build e2e

package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"testing"
	"time"
)

// console is a client of the stack's console over its published port: a session cookie and
// the CSRF token every write needs.
type console struct {
	base string
	hc   *http.Client
	csrf string
}

func newConsole(base string) *console {
	jar, _ := cookiejar.New(nil)
	return &console{base: base, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// do sends a request and decodes a JSON answer; it fails the test only when the request
// cannot be sent (a status is the caller's to judge).
func (c *console) do(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.csrf != "" {
		req.Header.Set("X-CSRF-Token", c.csrf)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	if len(raw) > 0 && json.Unmarshal(raw, &out) != nil {
		out = map[string]any{"raw": string(raw)}
	}
	return res.StatusCode, out
}

// want is do that fails the test unless the answer has the status.
func (c *console) want(t *testing.T, status int, method, path string, body any) map[string]any {
	t.Helper()
	code, out := c.do(t, method, path, body)
	if code != status {
		t.Fatalf("%s %s: %d %v, want %d", method, path, code, out, status)
	}
	return out
}

func (c *console) login(t *testing.T, login, password string) {
	t.Helper()
	out := c.want(t, http.StatusOK, http.MethodPost, "/api/login", map[string]string{"login": login, "password": password})
	tok, _ := out["csrf_token"].(string)
	if tok == "" {
		t.Fatalf("login as %s: no csrf_token in %v", login, out)
	}
	c.csrf = tok
}

func (c *console) publish(t *testing.T, def string) {
	t.Helper()
	code, out := c.do(t, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)})
	if code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("publish %s: %d %v", def[:min(len(def), 60)], code, out)
	}
}

func (c *console) start(t *testing.T, flow string, input any) string {
	t.Helper()
	out := c.want(t, http.StatusCreated, http.MethodPost, "/api/executions", map[string]any{"flow_id": flow, "input": input})
	id, _ := out["execution_id"].(string)
	if id == "" {
		t.Fatalf("start %s: no execution_id in %v", flow, out)
	}
	return id
}

// execution is the execution's view (GET /api/executions/{id}) — its "execution" part — or
// nil while the console does not know it yet.
func (c *console) execution(t *testing.T, id string) map[string]any {
	t.Helper()
	code, out := c.do(t, http.MethodGet, "/api/executions/"+id, nil)
	if code != http.StatusOK {
		return nil
	}
	ex, _ := out["execution"].(map[string]any)
	return ex
}

func status(ex map[string]any) string {
	s, _ := ex["status"].(string)
	return s
}

func suspendKind(ex map[string]any) string {
	sus, _ := ex["suspend"].(map[string]any)
	k, _ := sus["kind"].(string)
	return k
}

// waitSuspended waits until the execution is suspended on kind.
func (c *console) waitSuspended(t *testing.T, id, kind string, limit time.Duration) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("execution %s suspended on %s", id, kind), limit, func() bool {
		ex := c.execution(t, id)
		return status(ex) == "suspended" && suspendKind(ex) == kind
	})
}

// waitEnded waits until every execution is completed and returns their views.
func (c *console) waitCompleted(t *testing.T, ids []string, limit time.Duration) map[string]map[string]any {
	t.Helper()
	views := map[string]map[string]any{}
	deadline := time.Now().Add(limit)
	for _, id := range ids {
		for {
			ex := c.execution(t, id)
			if s := status(ex); s == "completed" {
				views[id] = ex
				break
			} else if s == "error" || s == "cancelled" {
				t.Fatalf("execution %s ended %s: %v", id, s, ex["error"])
			}
			if time.Now().After(deadline) {
				t.Fatalf("execution %s is %q after %s (%d of %d completed)", id, status(ex), limit, len(views), len(ids))
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	return views
}

// endedOnce checks that each execution's timeline records its end once: a redelivered start or
// resume that ran the last step again would record it twice.
func (c *console) endedOnce(t *testing.T, ids []string) {
	t.Helper()
	for _, id := range ids {
		out := c.want(t, http.StatusOK, http.MethodGet, "/api/executions/"+id+"/timeline?limit=1000", nil)
		items, _ := out["items"].([]any)
		ends := 0
		for _, it := range items {
			if e, _ := it.(map[string]any); e["event"] == "completed" {
				ends++
			}
		}
		if ends != 1 {
			t.Errorf("execution %s: %d completed entries in its timeline, want 1: %v", id, ends, items)
		}
	}
}
