//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"plaita/internal/redistest"
)

// The console as a process: `plaita console` on the stack's Redis, called over HTTP with the
// admin key (the suites of test/e2e that need the console's process: local mode, the wait for
// Redis, the browser).

const consoleAdminKey = "e2e-admin-key"

// console is a running `plaita console` and how to call it.
type console struct {
	p    *proc
	base string
}

// startConsole starts `plaita console` on a free port with its database in the test's
// directory, and waits until it is ready.
func (s *stack) startConsole(extra map[string]string) *console {
	s.t.Helper()
	port := redistest.FreePort(s.t)
	env := map[string]string{"PLAITA_CONSOLE_REDIS_URL": s.srv.URL(), "PLAITA_CONSOLE_PORT": strconv.Itoa(port),
		"PLAITA_CONSOLE_HOST": "127.0.0.1", "PLAITA_CONSOLE_ADMIN_API_KEY": consoleAdminKey,
		"PLAITA_CONSOLE_DB_URL": "sqlite:///" + filepath.Join(s.t.TempDir(), "console.db")}
	for k, v := range extra {
		env[k] = v
	}
	c := &console{p: s.start("console", env), base: "http://127.0.0.1:" + strconv.Itoa(port)}
	waitFor(s.t, "the console to be ready", 30*time.Second, func() bool {
		code, _ := c.call(s.t, http.MethodGet, "/readyz", nil)
		return code == http.StatusOK
	}, c.p)
	return c
}

// call sends one request with the admin key in the default tenant; the body is sent as JSON.
func (c *console) call(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-API-Key", consoleAdminKey)
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, nil
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}
