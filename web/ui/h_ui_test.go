package ui_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
	"plaita/web/ui"
)

// The web UI over real HTTP, without a browser: pages render from the API's answers, writes
// need the session's CSRF token and the role the API route needs, and a page shows a viewer no
// write button. The browser tests (test/e2e) drive the same pages in Chromium.

// uiClient is a browser without JavaScript: a cookie jar, no redirects followed.
type uiClient struct {
	F    *webtest.Fixture
	HC   *http.Client
	CSRF string
}

func uiUser(t *testing.T, f *webtest.Fixture, login, tenant string, role sqlite.Role) *uiClient {
	t.Helper()
	u, err := f.DB.CreateUser(context.Background(), sqlite.NewUser{Login: login, Password: "password-" + login})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.DB.SetMembership(context.Background(), u.ID, tenant, role); err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &uiClient{F: f, HC: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	res, _ := c.logIn(t, login, "password-"+login)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", res.StatusCode)
	}
	_, body := c.get(t, "/ui/flows", http.StatusOK)
	m := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the page: %s", body)
	}
	c.CSRF = m[1]
	return c
}

// logIn posts the login form as a browser does: the page first (its form token and cookie),
// then the form.
func (c *uiClient) logIn(t *testing.T, login, password string) (*http.Response, string) {
	t.Helper()
	_, page := c.get(t, "/ui/login", http.StatusOK)
	m := regexp.MustCompile(`<input type="hidden" name="csrf" value="([^"]+)">`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the login page has no form token: %s", page)
	}
	return c.post(t, "/ui/login", url.Values{"login": {login}, "password": {password}, "csrf": {m[1]}}, false)
}

func (c *uiClient) get(t *testing.T, path string, status int) (*http.Response, string) {
	t.Helper()
	res, err := c.HC.Get(c.F.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		t.Fatalf("GET %s: %d, want %d: %s", path, res.StatusCode, status, b)
	}
	return res, string(b)
}

// post sends a form, as htmx does (HX-Request) when htmx is true; with the CSRF token when the
// client has one and the form names none.
func (c *uiClient) post(t *testing.T, path string, form url.Values, htmx bool) (*http.Response, string) {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if c.CSRF != "" && !form.Has("csrf") {
		form.Set("csrf", c.CSRF)
	}
	req, _ := http.NewRequest(http.MethodPost, c.F.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if htmx {
		req.Header.Set("HX-Request", "true")
	}
	res, err := c.HC.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func mustHave(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s has no %q", what, w)
		}
	}
}

// TestUIEditorPublishesAndRuns: an editor validates a definition (each problem on its line),
// publishes it, sees its picture, starts it and opens the execution; every page renders.
func TestUIEditorPublishesAndRuns(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ed := uiUser(t, f, "edna", "default", sqlite.RoleEditor)

	bad := "{\n  \"id\": \"ask\",\n  \"start\": \"ask\",\n  \"nodes\": [\n    {\"id\": \"ask\", \"type\": \"approval\", \"next\": \"nowhere\"}\n  ]\n}"
	_, body := ed.post(t, "/ui/flows/validate", url.Values{"definition": {bad}}, true)
	mustHave(t, "the check", body, `id="check-problems"`, `data-goto-line="5"`, `nodes[0].next`, `unknown node &#34;nowhere&#34;`)

	res, _ := ed.post(t, "/ui/flows/publish", url.Values{"definition": {webtest.ApprovalFlow}}, true)
	if res.StatusCode != http.StatusOK || res.Header.Get("HX-Redirect") != "/ui/flows/ask?version=1&published=published" {
		t.Fatalf("publish: %d %q", res.StatusCode, res.Header.Get("HX-Redirect"))
	}
	_, body = ed.get(t, "/ui/flows/ask?version=1", http.StatusOK)
	mustHave(t, "the flow page", body, `<svg xmlns="http://www.w3.org/2000/svg" class="flow-graph"`, `id="node-ask"`, `id="run-form"`)

	res, _ = ed.post(t, "/ui/flows/ask/run", url.Values{"version": {"1"}, "input": {`{"order": 42}`}}, true)
	to := res.Header.Get("HX-Redirect")
	if !strings.HasPrefix(to, "/ui/executions/ex_") {
		t.Fatalf("run: %d %q", res.StatusCode, to)
	}
	_, body = ed.get(t, to, http.StatusOK)
	id := strings.TrimPrefix(to, "/ui/executions/")
	mustHave(t, "the queued execution", body, "Queued", `data-status="queued"`, `data-follow="/ui/executions/`+id+`/events"`, `data-poll="2000"`,
		`data-kind="queued"`, "no worker is alive")
	for _, page := range []string{"/ui/executions", "/ui/executions?status=pending&flow_id=ask", "/ui/flows", "/ui/flows/new?from=ask",
		"/ui/approvals", "/ui/events", "/ui/schedules", "/ui/deadletters"} {
		ed.get(t, page, http.StatusOK)
	}
	// Pages the editor's role does not reach are the API's refusals.
	_, body = ed.get(t, "/ui/audit", http.StatusForbidden)
	mustHave(t, "the audit page", body, `data-code="forbidden"`)
	ed.get(t, "/ui/cluster", http.StatusForbidden)
}

// TestUIExecutionPage: a suspended approval's page has the graph with the current node, the
// wake-up panel, the answer form; the poll answers 204 while nothing changed, and the answer is
// checked and recorded with who gave it.
func TestUIExecutionPage(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ed := uiUser(t, f, "erin", "default", sqlite.RoleEditor)
	if res, _ := ed.post(t, "/ui/flows/publish", url.Values{"definition": {webtest.ApprovalFlow}}, true); res.StatusCode != http.StatusOK {
		t.Fatalf("publish: %d", res.StatusCode)
	}
	now := time.Now().UTC()
	hash, err := engine.FlowHash([]byte(webtest.ApprovalFlow))
	if err != nil {
		t.Fatal(err)
	}
	st := &state.Execution{ExecutionID: "ex_ui1", TenantID: "default", FlowID: "ask", FlowVersion: "1", FlowHash: hash, FlowHashAlgo: engine.FlowHashAlgo, Status: state.Suspended,
		CurrentNode: "ask", StartTime: now, LastUpdate: now, StepCount: 1,
		Context:     map[string]any{state.ContextNodes: map[string]any{"ask": map[string]any{"big": strings.Repeat("x", 5000) + "END"}}},
		NodeTimings: map[string]*state.NodeTiming{"ask": {Runs: 1, TotalMillis: 3}},
		Suspend:     &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: now, Message: "ok?"},
		Timeline:    []state.TimelineEntry{{Seq: 1, Time: state.Stamp(now), Event: "started", Node: "ask"}, {Seq: 2, Time: state.Stamp(now), Event: "suspended", Node: "ask"}}}
	f.Save(t, st)
	_, body := ed.get(t, "/ui/executions/ex_ui1", http.StatusOK)
	mustHave(t, "the page", body, `id="waiting"`, `waiting for an approval`, `class="node visited current" id="node-ask"`,
		`id="approval-form"`, `id="cancel-button"`)
	mustHave(t, "the results", body, `hx-get="/ui/executions/ex_ui1/result?node=ask"`, "Show all 5013 bytes")
	if strings.Contains(body, "END") {
		t.Error("the page holds the whole result, not its preview")
	}
	req0, _ := http.NewRequest(http.MethodGet, f.URL+"/ui/executions/ex_ui1/result?node=ask", nil)
	req0.Header.Set("HX-Request", "true")
	res0, err := ed.HC.Do(req0)
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := io.ReadAll(res0.Body)
	res0.Body.Close()
	mustHave(t, "the whole result", string(whole), "<pre", strings.Repeat("x", 5000)+"END")
	v := regexp.MustCompile(`data-version="([0-9a-f]+)"`).FindStringSubmatch(body)
	if v == nil {
		t.Fatal("no version")
	}
	req, _ := http.NewRequest(http.MethodGet, f.URL+"/ui/executions/ex_ui1/live?v="+v[1], nil)
	req.Header.Set("HX-Request", "true")
	res, err := ed.HC.Do(req)
	if err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("unchanged poll: %v %v", err, res)
	}
	res.Body.Close()

	_, body = ed.post(t, "/ui/executions/ex_ui1/approve", url.Values{"decision": {"approve"}, "comment": {"fine"}}, true)
	mustHave(t, "the answer", body, `id="action-done"`, "the approval is queued", `id="approval-form" hx-swap-oob="true"`, "Approval answered")
	if row, ok := f.Audited(t, "approval.answer"); !ok || row.Actor != "erin" || row.Outcome != sqlite.OutcomeAllow {
		t.Fatalf("audit %+v", row)
	}
	// A resume the worker would refuse shows the API's explanation (a completed one: terminal).
	done := *st
	done.ExecutionID, done.Status, done.Suspend, done.EndTime = "ex_ui2", state.Completed, nil, &now
	f.Save(t, &done)
	_, body = ed.post(t, "/ui/executions/ex_ui2/action", url.Values{"do": {"retry"}}, true)
	mustHave(t, "the refusal", body, `class="problem"`, `data-code="terminal"`)
}

// TestUIRefusesForgedWrites: a write without the CSRF token, from another origin, or by a
// viewer is refused (and audited as the API audits it); a viewer's pages show no write button.
func TestUIRefusesForgedWrites(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	viewer := uiUser(t, f, "vic", "default", sqlite.RoleViewer)
	ed := uiUser(t, f, "eve", "default", sqlite.RoleEditor)
	if res, _ := ed.post(t, "/ui/flows/publish", url.Values{"definition": {webtest.ApprovalFlow}}, true); res.StatusCode != http.StatusOK {
		t.Fatalf("publish: %d", res.StatusCode)
	}
	_, body := viewer.get(t, "/ui/flows/ask", http.StatusOK)
	for _, button := range []string{`id="run-form"`, "Edit as a new version"} {
		if strings.Contains(body, button) {
			t.Errorf("a viewer's flow page has %s", button)
		}
	}
	_, body = viewer.post(t, "/ui/flows/ask/run", url.Values{"input": {"{}"}}, true)
	mustHave(t, "a viewer's start", body, `data-code="forbidden"`)
	_, body = viewer.post(t, "/ui/events", url.Values{"type": {"x"}, "data": {"{}"}}, true)
	mustHave(t, "a viewer's event", body, `data-code="forbidden"`)

	_, body = ed.post(t, "/ui/flows/ask/run", url.Values{"csrf": {"forged"}, "input": {"{}"}}, true)
	mustHave(t, "a start without the token", body, `data-code="csrf"`)
	_, body = ed.post(t, "/ui/events", url.Values{"csrf": {""}, "type": {"x"}}, true)
	mustHave(t, "an event without the token", body, `data-code="csrf"`)
	// A published event links the executions it woke (the list filtered by it).
	_, body = ed.post(t, "/ui/events", url.Values{"type": {"x"}, "id": {"evt-ui"}, "data": {"{}"}}, true)
	mustHave(t, "the publish", body, "Published <code>evt-ui</code>")
	_, body = viewer.get(t, "/ui/events", http.StatusOK)
	mustHave(t, "the event's link", body, `<a href="/ui/executions?woken_by=evt-ui"`)

	req, _ := http.NewRequest(http.MethodPost, f.URL+"/ui/flows/ask/run", strings.NewReader(url.Values{"csrf": {ed.CSRF}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	res, err := ed.HC.Do(req)
	if err != nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin write: %v %v", err, res)
	}
	res.Body.Close()
	if row, ok := f.Audited(t, "execution.start.denied"); !ok || row.Reason != "csrf" && row.Reason != "forbidden" {
		t.Fatalf("denial audit %+v", row)
	}
}

// TestUITenantSwitcher: a member of two tenants switches between them; each page then acts in
// the chosen tenant (its API calls carry it); a tenant that is not theirs is refused.
func TestUITenantSwitcher(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	c := uiUser(t, f, "mo", "default", sqlite.RoleEditor)
	u, err := f.DB.UserByLogin(context.Background(), "mo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.DB.SetMembership(context.Background(), u.ID, "acme", sqlite.RoleViewer); err != nil {
		t.Fatal(err)
	}
	if res, _ := c.post(t, "/ui/flows/publish", url.Values{"definition": {webtest.ApprovalFlow}}, true); res.StatusCode != http.StatusOK {
		t.Fatalf("publish in default: %d", res.StatusCode)
	}
	_, body := c.get(t, "/ui/flows", http.StatusOK)
	mustHave(t, "default's flows", body, `id="tenant-switch"`, `<option value="acme">`, `href="/ui/flows/ask"`, "mo · editor")
	res, _ := c.post(t, "/ui/tenant", url.Values{"tenant": {"acme"}, "back": {"/ui/flows"}}, false)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/flows" {
		t.Fatalf("switch: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	_, body = c.get(t, "/ui/flows", http.StatusOK)
	mustHave(t, "acme's flows", body, "No flow is published in tenant acme", "mo · viewer")
	if strings.Contains(body, `id="new-flow"`) {
		t.Error("a viewer of acme is offered the editor")
	}
	res, _ = c.post(t, "/ui/tenant", url.Values{"tenant": {"other"}}, false)
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("switch to a tenant not theirs: %d", res.StatusCode)
	}
	res, _ = c.post(t, "/ui/tenant", url.Values{"tenant": {"default"}, "csrf": {"forged"}}, false)
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("switch without the token: %d", res.StatusCode)
	}
}

// TestUIWaitingPanel: the panel names what will not happen — an event wait with no filter, a
// delay whose delay-queue entry is missing, a running execution with no worker — and, to a
// platform admin, a disabled tenant. (A delay with its entry and no delay role: the browser
// test, on a real delay queue.)
func TestUIWaitingPanel(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	def := `{"id":"w","version":"1","start":"a","nodes":[{"id":"a","type":"wait_event","params":{"event_type":"paid","match":"EVENT.id == INPUT.id"},"next":"b"},{"id":"b","type":"end"}]}`
	f.Admin("").Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)})
	f.Tenant(t, "acme")
	f.Admin("acme").Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)})
	now := time.Now().UTC()
	due := now.Add(time.Hour)
	seed := func(id, tenant string, status state.Status, s *state.Suspend) {
		f.Save(t, &state.Execution{ExecutionID: id, TenantID: tenant, FlowID: "w", FlowVersion: "1", Status: status, CurrentNode: "a",
			StartTime: now, LastUpdate: now, Context: map[string]any{}, Suspend: s})
	}
	seed("ex_ev", "default", state.Suspended, &state.Suspend{Kind: state.SuspendEvent, Node: "a", Since: now.Add(-time.Minute), EventType: "paid", Match: "EVENT.id == INPUT.id"})
	seed("ex_nap", "default", state.Suspended, &state.Suspend{Kind: state.SuspendDelay, Node: "a", Since: now, Due: &due})
	seed("ex_run", "default", state.Running, nil)
	seed("ex_off", "acme", state.Suspended, &state.Suspend{Kind: state.SuspendEvent, Node: "a", Since: now, EventType: "paid"})

	c := uiUser(t, f, "pat", "default", sqlite.RoleViewer)
	for id, wants := range map[string][]string{
		"ex_ev":  {`data-kind="event"`, `waiting for an event of type &#34;paid&#34;`, "EVENT.id == INPUT.id", "subscribed <time", ">1m 0s ago<", "no filter role is alive"},
		"ex_nap": {`data-kind="delay"`, "a delay due at", `data-due="` + due.Format(time.RFC3339) + `"`, "no delay-queue entry: nothing will continue it"},
		"ex_run": {`data-kind="running"`, "no worker is alive"},
	} {
		_, body := c.get(t, "/ui/executions/"+id, http.StatusOK)
		mustHave(t, id, body, wants...)
	}

	boss := f.Admin("")
	boss.Want(t, http.StatusCreated, http.MethodPost, "/api/users", map[string]any{"login": "root", "password": "root-password", "platform_admin": true})
	f.Admin("").Want(t, http.StatusOK, http.MethodPost, "/api/tenants/acme/disable", nil)
	admin := &uiClient{F: f, HC: c.HC}
	jar, _ := cookiejar.New(nil)
	admin.HC = &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if res, _ := admin.logIn(t, "root", "root-password"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", res.StatusCode)
	}
	u, _ := url.Parse(f.URL + "/ui")
	jar.SetCookies(u, []*http.Cookie{{Name: ui.TenantCookie, Value: "acme", Path: "/ui"}})
	_, body := admin.get(t, "/ui/executions/ex_off", http.StatusOK)
	mustHave(t, "a disabled tenant's execution", body, `data-kind="tenant_disabled"`, "tenant acme is disabled")
}

// TestUISchedulesAndApprovals: an editor disables and enables a schedule on its page (audited;
// a viewer is refused), and answers a pending approval from the approvals page's list.
func TestUISchedulesAndApprovals(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ctx := context.Background()
	if _, err := f.Plane.AddSchedule(ctx, store.Schedule{ID: "nightly", TenantID: "default", Cron: "0 3 * * *", FlowID: "ask", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	ed := uiUser(t, f, "sid", "default", sqlite.RoleEditor)
	viewer := uiUser(t, f, "val", "default", sqlite.RoleViewer)
	_, body := ed.get(t, "/ui/schedules", http.StatusOK)
	mustHave(t, "the schedules", body, `id="schedule-nightly"`, "0 3 * * *", ">Disable</button>")
	_, body = ed.post(t, "/ui/schedules/nightly/enabled", url.Values{"enabled": {"false"}}, true)
	mustHave(t, "the disabled row", body, `id="schedule-nightly"`, ">Enable</button>")
	if rec, err := f.Plane.Schedule(ctx, "default", "nightly"); err != nil || rec.Enabled {
		t.Fatalf("still enabled: %+v %v", rec, err)
	}
	if row, ok := f.Audited(t, "schedule.disable"); !ok || row.Actor != "sid" || row.Target != "nightly" {
		t.Fatalf("audit %+v", row)
	}
	_, body = viewer.get(t, "/ui/schedules", http.StatusOK)
	if strings.Contains(body, "<button") && strings.Contains(body, "Enable</button>") {
		t.Error("a viewer is offered the schedule's button")
	}
	_, body = viewer.post(t, "/ui/schedules/nightly/enabled", url.Values{"enabled": {"true"}}, true)
	mustHave(t, "a viewer's toggle", body, `data-code="forbidden"`)

	ed.post(t, "/ui/flows/publish", url.Values{"definition": {webtest.ApprovalFlow}}, true)
	hash, _ := engine.FlowHash([]byte(webtest.ApprovalFlow))
	now := time.Now().UTC()
	f.Save(t, &state.Execution{ExecutionID: "ex_appr", TenantID: "default", FlowID: "ask", FlowVersion: "1", FlowHash: hash, FlowHashAlgo: engine.FlowHashAlgo,
		Status: state.Suspended, CurrentNode: "ask", StartTime: now, LastUpdate: now, Context: map[string]any{},
		Suspend: &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: now, Message: "ship it?"}})
	ts, err := f.Redis.Tenant("")
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.PutApproval(ctx, store.Approval{ExecutionID: "ex_appr", TenantID: "default", FlowID: "ask", FlowVersion: "1", Node: "ask", Message: "ship it?", Since: now}, time.Hour); err != nil {
		t.Fatal(err)
	}
	_, body = ed.get(t, "/ui/approvals", http.StatusOK)
	mustHave(t, "the approvals", body, "ex_appr", "ship it?", `hx-post="/ui/executions/ex_appr/approve"`)
	_, body = ed.post(t, "/ui/executions/ex_appr/approve", url.Values{"decision": {"reject"}, "comment": {"not yet"}}, true)
	mustHave(t, "the answer", body, `id="action-done"`)
}

// TestUIExecutionPageLinksItsTrace: an execution started with tracing on shows its trace id,
// linked through PLAITA_TRACE_URL_TEMPLATE; one without a trace shows none.
func TestUIExecutionPageLinksItsTrace(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithSettings(func(s *api.Settings) { s.TraceURLTemplate = "https://tempo.example/trace/{trace_id}" }))
	ed := uiUser(t, f, "tina", "default", sqlite.RoleEditor)
	if res, _ := ed.post(t, "/ui/flows/publish", url.Values{"definition": {webtest.ApprovalFlow}}, true); res.StatusCode != http.StatusOK {
		t.Fatalf("publish: %d", res.StatusCode)
	}
	now := time.Now().UTC()
	for _, c := range []struct{ id, traceparent string }{
		{"ex_traced1", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"ex_untraced1", ""},
	} {
		f.Save(t, &state.Execution{ExecutionID: c.id, TenantID: "default", FlowID: "ask", FlowVersion: "1", Status: state.Completed,
			CurrentNode: "ask", StartTime: now, LastUpdate: now, EndTime: &now, Context: map[string]any{}, TraceParent: c.traceparent,
			Timeline: []state.TimelineEntry{{Seq: 1, Time: state.Stamp(now), Event: "started", Node: "ask"}}})
	}
	_, body := ed.get(t, "/ui/executions/ex_traced1", http.StatusOK)
	mustHave(t, "the traced execution's page", body, `id="exec-trace"`,
		`<a href="https://tempo.example/trace/4bf92f3577b34da6a3ce929d0e0e4736" rel="noopener" target="_blank"><code>4bf92f3577b34da6a3ce929d0e0e4736</code></a>`)
	if _, body := ed.get(t, "/ui/executions/ex_untraced1", http.StatusOK); strings.Contains(body, `id="exec-trace"`) {
		t.Error("an execution without a trace shows one")
	}
}
