//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"plaita/test/redistest"
)

// plaita dev from the binary: with no Redis reachable it runs the demo in local mode (a delay,
// an approval and an event to completion), keeps an execution suspended at a delay across a
// restart with --state-dir, and says where its state is; with a Redis at PLAITA_REDIS_URL it
// runs every role on it.

// devProc is a running `plaita dev`.
type devProc struct {
	*console
	stdout *syncBuffer
}

// startDev starts `plaita dev` with args on redisURL and waits until its console is ready and
// it printed where to go.
func startDev(t *testing.T, redisURL string, args ...string) *devProc {
	t.Helper()
	port := redistest.FreePort(t)
	env := map[string]string{"PLAITA_REDIS_URL": redisURL, "PLAITA_CONSOLE_PORT": strconv.Itoa(port), "PLAITA_CONSOLE_HOST": "127.0.0.1",
		"PLAITA_CONSOLE_ADMIN_API_KEY": consoleAdminKey, "PLAITA_LOG_FORMAT": "json"}
	cmd := exec.Command(binary, append([]string{"dev"}, args...)...)
	cmd.Dir = t.TempDir()
	out := &syncBuffer{}
	cmd.Stdout = out
	d := &devProc{console: &console{p: spawnCmd(t, cmd, env), base: "http://127.0.0.1:" + strconv.Itoa(port)}, stdout: out}
	waitFor(t, "plaita dev to serve", 60*time.Second, func() bool {
		code, _ := d.call(t, http.MethodGet, "/readyz", nil)
		return code == http.StatusOK && strings.Contains(out.String(), "open http://")
	}, d.p)
	return d
}

// devMode is the first dev.mode log line.
func devMode(t *testing.T, p *proc) map[string]any {
	t.Helper()
	lines := logLines(p.stderr.String(), "dev.mode")
	if len(lines) != 1 {
		t.Fatalf("dev.mode logged %d times:\n%s", len(lines), tail(p.stderr.String(), 20))
	}
	return lines[0]
}

// startFlow starts a published flow over the API and returns the execution id.
func (c *console) startFlow(t *testing.T, flow string, input any) string {
	t.Helper()
	code, body := c.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": flow, "input": input})
	if code != http.StatusCreated {
		t.Fatalf("start %s: %d %v", flow, code, body)
	}
	return fmt.Sprint(body["execution_id"])
}

func TestDevWithoutRedisRunsTheDemo(t *testing.T) {
	t.Parallel()
	nowhere := "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"
	d := startDev(t, nowhere)
	if m := devMode(t, d.p); m["mode"] != "local" || !strings.HasPrefix(fmt.Sprint(m["state"]), "in memory") ||
		!strings.Contains(fmt.Sprint(m["message"]), "NOT FOR PRODUCTION") {
		t.Fatalf("the first dev line: %v", m)
	}
	// The admin's password is printed once, and logs in; the UI answers.
	pw := regexp.MustCompile(`log in as admin with the password (\S+)`).FindStringSubmatch(d.stdout.String())
	if pw == nil {
		t.Fatalf("no password printed:\n%s", d.stdout)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	res, err := hc.Post(d.base+"/api/login", "application/json", strings.NewReader(`{"login":"admin","password":"`+pw[1]+`"}`))
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("login with the printed password: %v %v", res, err)
	}
	var session struct {
		CSRF string `json:"csrf_token"`
	}
	if err := json.NewDecoder(res.Body).Decode(&session); err != nil || session.CSRF == "" {
		t.Fatalf("the login's CSRF token: %v", err)
	}
	res.Body.Close()
	if res, err = hc.Get(d.base + "/ui/flows"); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the UI: %v %v", res, err)
	}
	res.Body.Close()
	// The demo flows are published in the default and the demo tenant.
	if code, body := d.call(t, http.MethodGet, "/api/flows", nil); code != http.StatusOK || len(body["items"].([]any)) < 8 {
		t.Fatalf("demo flows: %d %v", code, body)
	}

	hello := d.startFlow(t, "hello", map[string]any{"name": "dev"})
	d.waitExecution(t, hello, "hello completed", statusOf("completed"))

	// A delay (scheduled-report sleeps until run_at).
	report := d.startFlow(t, "scheduled-report", map[string]any{"run_at": time.Now().UTC().Add(2 * time.Second).Format(time.RFC3339)})
	d.waitExecution(t, report, "suspended at the delay", func(st map[string]any) bool { return st["status"] == "suspended" })

	// An approval.
	expense := d.startFlow(t, "expense-approval", map[string]any{"amount": 900})
	d.waitExecution(t, expense, "the approval", func(st map[string]any) bool { return st["status"] == "suspended" })
	// Answered in the UI: the execution page's approval form, as the browser posts it.
	if res, err = hc.Get(d.base + "/ui/executions/" + expense); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the execution page: %v %v", res, err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(page), "/ui/executions/"+expense+"/approve") {
		t.Fatalf("no approval form on the execution page:\n%s", page)
	}
	// In local mode the console times the approval out itself: nothing says no role will.
	if strings.Contains(string(page), "no delay role is alive") {
		t.Fatalf("the waiting panel says no delay role times it out in local mode:\n%s", page)
	}
	form := url.Values{"decision": {"approve"}, "comment": {"fine"}, "csrf": {session.CSRF}}
	req, _ := http.NewRequest(http.MethodPost, d.base+"/ui/executions/"+expense+"/approve", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", d.base)
	if res, err = hc.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the UI's approval: %v %v", res, err)
	}
	res.Body.Close()
	if st := d.waitExecution(t, expense, "expense completed", statusOf("completed")); st["output"].(map[string]any)["approved"] != true ||
		st["output"].(map[string]any)["by"] != "admin" {
		t.Fatalf("expense output %v", st["output"])
	}
	// Every page answers in local mode, and says it is local mode.
	for _, path := range []string{"/ui/executions", "/ui/approvals", "/ui/events", "/ui/flows", "/ui/deadletters", "/ui/schedules",
		"/ui/cluster", "/ui/jobs"} {
		res, err := hc.Get(d.base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `id="mode-banner"`) {
			t.Fatalf("%s in local mode: %d\n%s", path, res.StatusCode, body)
		}
	}

	// An event.
	pay := d.startFlow(t, "payment-wait", map[string]any{"order_id": "ord-7"})
	d.waitExecution(t, pay, "the payment wait", func(st map[string]any) bool { return st["status"] == "suspended" })
	if code, body := d.call(t, http.MethodPost, "/api/events", map[string]any{"type": "payment",
		"data": map[string]any{"order_id": "ord-7", "status": "paid", "payment_id": "p-1"}}); code != http.StatusCreated {
		t.Fatalf("event: %d %v", code, body)
	}
	if st := d.waitExecution(t, pay, "payment completed", statusOf("completed")); st["output"].(map[string]any)["status"] != "paid" {
		t.Fatalf("payment output %v", st["output"])
	}
	d.waitExecution(t, report, "the report after its delay", statusOf("completed"))
	d.p.stop(t)
}

func TestDevStateDirKeepsADelayAcrossARestart(t *testing.T) {
	t.Parallel()
	nowhere := "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"
	dir := t.TempDir()
	d := startDev(t, nowhere, "--state-dir", dir)
	if m := devMode(t, d.p); !strings.HasPrefix(fmt.Sprint(m["state"]), "kept in "+dir) {
		t.Fatalf("the first dev line: %v", m)
	}
	report := d.startFlow(t, "scheduled-report", map[string]any{"run_at": time.Now().UTC().Add(6 * time.Second).Format(time.RFC3339)})
	d.waitExecution(t, report, "suspended at the delay", func(st map[string]any) bool { return st["status"] == "suspended" })
	d.p.stop(t)

	d = startDev(t, nowhere, "--state-dir", dir)
	// The kept state has its admin already: dev makes no second one.
	if strings.Contains(d.stdout.String(), "with the password") {
		t.Fatalf("a second admin password:\n%s", d.stdout)
	}
	if st := d.waitExecution(t, report, "the report after the restart", statusOf("completed")); st["output"] == nil {
		t.Fatalf("no output: %v", st)
	}
	d.p.stop(t)
}

func TestDevWithRedisRunsEveryRoleOnIt(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	d := startDev(t, srv.URL())
	if m := devMode(t, d.p); m["mode"] != "redis" {
		t.Fatalf("the first dev line: %v", m)
	}
	code, body := d.call(t, http.MethodGet, "/api/cluster/instances", nil)
	raw, _ := json.Marshal(body)
	for _, role := range []string{"worker", "filter", "schedule", "delay", "console"} {
		if code != http.StatusOK || !strings.Contains(string(raw), `"role":"`+role+`"`) {
			t.Fatalf("instances: %d %s (no %s)", code, raw, role)
		}
	}
	pay := d.startFlow(t, "payment-wait", map[string]any{"order_id": "ord-9"})
	d.waitExecution(t, pay, "the payment wait", func(st map[string]any) bool { return st["status"] == "suspended" })
	if code, body := d.call(t, http.MethodPost, "/api/events", map[string]any{"type": "payment",
		"data": map[string]any{"order_id": "ord-9", "status": "paid"}}); code != http.StatusCreated {
		t.Fatalf("event: %d %v", code, body)
	}
	d.waitExecution(t, pay, "payment completed through the filter and the worker", statusOf("completed"))
	d.p.stop(t)
}
