//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The console's web UI in a real browser (Debian's chromium through chromedp), on `plaita
// console` + worker + filter (+ delay, started late on purpose) from the binary: log in,
// publish a flow from testdata/ in the editor, start it, watch it reach its approval without a
// reload, approve it, see it completed with its path drawn; an execution completed and a new
// one listed live, delivered by the event stream (the network log shows it, and no poll); the
// "why is this waiting?" panel of an event wait, a delay with no delay role and then with one,
// an approval, a retry back-off and a tenant over its running quota; a bulk cancel by query
// (count, confirmation, progress, the partial failure); a schedule's edit; dead letters a page
// at a time and replayed by an admin only; a 10,000-step execution and a 5 MB node result; a
// viewer's pages without write buttons and their forged writes refused; no request leaves
// the console; axe-core finds no serious violation on the main pages; a screenshot of each.

const uiAdminPassword = "browser-test-password"

func TestConsoleUIInTheBrowser(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": uiAdminPassword})
	// Four at once: a node in its retry back-off holds a worker's slot while it waits.
	worker := s.start("worker", map[string]string{"PLAITA_WORKER_CONCURRENCY": "4"})
	s.start("filter", nil)
	b := newBrowser(t, con.base)

	b.open("/ui/login")
	b.shot("login")
	b.axe("login")
	b.login("admin", uiAdminPassword)

	var id string
	// Each part's time is logged: what a slow run spent it on.
	for _, part := range []struct {
		name string
		run  func()
	}{
		{"publish and start", func() { id = uiPublishAndStart(t, b, "expense-approval", `{"amount": 500, "employee": "kim"}`) }},
		{"approve live", func() { uiApproveLive(t, b, id) }},
		{"waiting panels", func() { uiWaitingPanels(t, s, con, b) }},
		{"live list", func() { uiLiveList(t, con, worker, b) }},
		{"retry and quota", func() { uiRetryAndQuota(t, s, con, b) }},
		{"bulk cancel", func() { uiBulkCancel(t, con, b) }},
		{"schedule edit", func() { uiScheduleEdit(t, b) }},
		{"main pages", func() { uiMainPages(t, b) }},
		{"narrow screen", func() { uiNarrowScreen(t, b, id) }},
		{"viewer", func() {
			uiViewer(t, con, b, startOver(t, con, "expense-approval", `{"amount": 900}`))
			b.logout()
			b.login("admin", uiAdminPassword)
		}},
		{"long execution", func() { uiLongExecution(t, con, b) }},
		{"large result", func() { uiLargeResult(t, con, b) }},
		{"dead letters", func() { uiReplayDeadLetter(t, s, con, b) }},
		{"disable a tenant", func() { uiDisableTenant(t, con, b) }},
	} {
		t0 := time.Now()
		part.run()
		t.Logf("%s: %s", part.name, time.Since(t0).Round(time.Millisecond))
	}

	if f := b.foreign(); len(f) > 0 {
		t.Errorf("requests outside the console's origin %s: %v", b.base, f)
	}
	t.Logf("%d requests, all to %s", b.requestCount(), b.base)
}

// uiPublishAndStart publishes examples/NAME.json through the editor (validate, then
// publish), starts it from its page with input, and returns the execution id.
func uiPublishAndStart(t *testing.T, b *browser, name, input string) string {
	t.Helper()
	def, err := os.ReadFile(filepath.Join(repoRoot, "examples", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	b.open("/ui/flows/new")
	// An invalid definition first: its problem is shown at its line.
	b.fill("#definition", strings.Replace(string(def), `"next": "approved"`, `"next": "nowhere"`, 1))
	b.click("#validate-button")
	b.until("the problem at its line", `document.querySelector("#check .annotated .l.bad") && document.querySelector("#check-problems")`, 30*time.Second)
	mustContainAll(t, "the check", b.text("#check-problems"), `unknown node "nowhere"`, "line ")
	b.shot("flow-editor-problems")
	b.axe("flow editor")

	b.fill("#definition", string(def))
	b.click("#validate-button")
	b.until("the definition valid", `document.querySelector("#check-valid")`, 30*time.Second)
	b.click("#publish-button")
	b.until("the flow's page", `document.querySelector("#flow-version") && document.querySelector("svg.flow-graph")`, 30*time.Second)
	if v := b.text("#flow-version"); v != "1" {
		t.Fatalf("published version %q", v)
	}
	b.shot("flow")
	b.axe("flow")

	b.fill("#run-input", input)
	b.click("#run-button")
	b.until("the execution's page", `location.pathname.startsWith("/ui/executions/ex_")`, 30*time.Second)
	return strings.TrimPrefix(eval[string](b, `location.pathname`), "/ui/executions/")
}

// uiApproveLive watches the execution reach its approval with no reload (a marker set on the
// page survives), approves it on the page, and sees it completed with the path drawn.
func uiApproveLive(t *testing.T, b *browser, id string) {
	t.Helper()
	b.until("the page", `document.querySelector("#live")`, 30*time.Second)
	eval[bool](b, `window.__sameDocument = true`)
	b.until("the approval reached live", `document.querySelector("#waiting[data-kind=approval]") && document.querySelector("#approval-form")`, 60*time.Second)
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Fatal("the page was reloaded")
	}
	mustContainAll(t, "the waiting panel", b.text("#waiting"), "waiting for an approval", "Who may answer", "Approve 500 EUR for kim")
	// No delay role yet: its timeout will not fire, but the approval still wakes it.
	if b.exists("#waiting-blocker") || !strings.Contains(b.text("#waiting-timeout"), "no delay role is alive") {
		t.Errorf("the approval's panel: %q", b.text("#waiting"))
	}
	if !b.exists(`#exec-graph g.node.current[data-node="manager_approval"]`) || !b.exists(`#exec-graph g.edge.taken[data-from="small_expense"][data-label="false"]`) {
		t.Fatalf("the graph does not show where it stands: %s", eval[string](b, `document.querySelector("#exec-graph").innerHTML.slice(0, 2000)`))
	}
	b.shot("execution-waiting-approval")
	b.axe("execution (suspended)")

	b.fill("#comment", "within budget")
	b.click("#approve-button")
	b.until("completed, live", `document.querySelector("#live[data-status=completed]")`, 60*time.Second)
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Fatal("the page was reloaded")
	}
	// The answer's own refresh or the event stream brought it (whichever came first), not a
	// reload and not the poll.
	if via := eval[string](b, `document.querySelector("#live").dataset.via || ""`); via != "sse" && via != "action" {
		t.Errorf("the completion came by %q", via)
	}
	for _, sel := range []string{`g.edge.taken[data-from="small_expense"][data-to="manager_approval"]`,
		`g.edge.taken[data-from="manager_approval"][data-to="approved"]`, `g.node.visited[data-node="approved"]`} {
		if !b.exists("#exec-graph " + sel) {
			t.Errorf("the completed graph has no %s", sel)
		}
	}
	if b.exists(`#exec-graph g.node.visited[data-node="auto_approved"]`) || b.exists("#waiting") {
		t.Error("the completed page marks a node not run, or still waits")
	}
	mustContainAll(t, "the decisions", b.text("#decisions"), "is false", "approved by admin: within budget")
	b.shot("execution-completed")
	b.axe("execution (completed)")
}

// uiWaitingPanels: an event wait (with its match and its subscription's age, then woken by an
// event published on the events page), a delay while no delay role runs (the panel says nothing
// will wake it), then the same page, live, once a delay role runs.
func uiWaitingPanels(t *testing.T, s *stack, con *console, b *browser) {
	t.Helper()
	for _, name := range []string{"payment-wait", "reminder-delay"} {
		def, err := os.ReadFile(filepath.Join(repoRoot, "examples", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if code, body := con.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)}); code != http.StatusCreated {
			t.Fatalf("publish %s: %d %v", name, code, body)
		}
	}
	pay := startOver(t, con, "payment-wait", `{"order_id": "ord-77"}`)
	b.open("/ui/executions/" + pay)
	b.until("the event wait", `document.querySelector("#waiting[data-kind=event]")`, 60*time.Second)
	mustContainAll(t, "the event wait", b.text("#waiting"), `waiting for an event of type "payment"`, "EVENT.order_id == VARS.order_id",
		"subscribed", "filter: 1 alive", "times out in")
	b.shot("execution-waiting-event")
	uiCompletedByTheStream(t, con, b, pay)
	if !b.exists(`#exec-graph g.edge.taken[data-from="check_payment"][data-label="true"]`) {
		t.Error("the paid branch is not drawn as taken")
	}
	// The events page publishes: it says how many executions wait for the type.
	pay2 := startOver(t, con, "payment-wait", `{"order_id": "ord-78"}`)
	con.waitStatusIn(t, "default", pay2, "suspended", 60*time.Second)
	b.open("/ui/events")
	b.fill("#ev-type", "payment")
	b.fill("#ev-data", `{"order_id": "ord-78", "status": "paid", "payment_id": "p-2"}`)
	b.click("#publish-event")
	b.until("the event published", `document.querySelector("#published .notice")`, 30*time.Second)
	mustContainAll(t, "the publication", b.text("#published"), "Published", "1 execution(s)")
	b.shot("events")
	b.axe("events")

	nap := startOver(t, con, "reminder-delay", `{"user": "sam"}`)
	// The worker saves the suspension, then writes the delay entry: until the entry is there the
	// panel says the entry is missing; the page is opened again until it names the missing role.
	for deadline := time.Now().Add(60 * time.Second); ; {
		b.open("/ui/executions/" + nap)
		b.until("the delay without a delay role", `document.querySelector("#waiting[data-kind=delay] #waiting-blocker")`, 60*time.Second)
		if strings.Contains(b.text("#waiting"), "no delay role is alive") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delay panel never named the missing delay role: %s", b.text("#waiting"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	mustContainAll(t, "the delay panel", b.text("#waiting"), "a delay due at", "no delay role is alive", "delay: 0 alive")
	if !strings.HasPrefix(b.text("#waiting-due"), "in 59m") && !strings.HasPrefix(b.text("#waiting-due"), "in 1h") {
		t.Errorf("countdown %q", b.text("#waiting-due"))
	}
	b.shot("execution-waiting-delay-no-role")
	eval[bool](b, `window.__sameDocument = true`)
	s.start("delay", nil)
	b.until("the delay role seen, live", `document.querySelector("#waiting [data-role=delay]") && document.querySelector("#waiting [data-role=delay]").innerText.includes("1 alive") && !document.querySelector("#waiting-blocker")`, 60*time.Second)
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Fatal("the page was reloaded")
	}
	b.shot("execution-waiting-delay")
}

// uiLongExecution: the 20,002-step count-to-10000 opens with a page of its timeline and the
// newest of its decisions; older entries come on demand.
func uiLongExecution(t *testing.T, con *console, b *browser) {
	t.Helper()
	def, err := os.ReadFile(filepath.Join(repoRoot, "examples", "count-to-10000.json"))
	if err != nil {
		t.Fatal(err)
	}
	con.publishFlow(t, "default", def)
	id := startOver(t, con, "count-to-10000", `{}`)
	con.waitStatusIn(t, "default", id, "completed", 120*time.Second)
	t0 := time.Now()
	b.open("/ui/executions/" + id)
	b.until("the long execution's page", `document.querySelector("#live[data-status=completed] #timeline")`, 30*time.Second)
	t.Logf("the 20,002-step execution's page opened in %s", time.Since(t0))
	if n := eval[int](b, `document.querySelectorAll("#timeline tbody tr").length`); n != 51 {
		t.Errorf("the first timeline page has %d rows, want 50 and the button", n)
	}
	mustContainAll(t, "the decisions", b.text("#decisions"), "VARS.i < 10000 is false")
	b.click("#timeline tbody tr:last-child button")
	b.until("older entries", `document.querySelectorAll("#timeline tbody tr").length === 101`, 30*time.Second)
	b.shot("execution-long")
}

// uiReplayDeadLetter: starts of a flow not published yet are dead-lettered; the dead letters
// page shows them two at a time; an editor gets no replay button and a forged replay is
// refused (the route is an admin's); once the flow is published, an admin replays one (after
// its confirmation) and it runs.
func uiReplayDeadLetter(t *testing.T, s *stack, con *console, b *browser) {
	t.Helper()
	var ids []string
	for range 3 {
		ids = append(ids, s.enqueue("late-ui"))
	}
	waitFor(t, "the starts dead-lettered", 60*time.Second, func() bool { return s.dlqLen() == 3 }, s.procs...)
	late := `{"id":"late-ui","version":"1","start":"done","nodes":[{"id":"done","type":"end","params":{"output":"late"}}]}`
	con.publishFlow(t, "default", late)
	if code, body := con.call(t, http.MethodPost, "/api/users", map[string]any{"login": "eddie", "password": "eddie-password-1"}); code != http.StatusCreated {
		t.Fatalf("create editor: %d %v", code, body)
	}
	if code, body := con.call(t, http.MethodPut, "/api/members", map[string]any{"login": "eddie", "role": "editor"}); code != http.StatusOK {
		t.Fatalf("editor membership: %d %v", code, body)
	}
	b.logout()
	b.login("eddie", "eddie-password-1")
	b.open("/ui/deadletters?limit=2")
	b.until("the first page", `document.querySelector("#deadletters") && document.querySelector("#next-page")`, 30*time.Second)
	if n := eval[int](b, `document.querySelectorAll("#deadletters tbody tr").length`); n != 2 || b.exists(`#deadletters button[aria-label^="Replay"]`) {
		t.Errorf("an editor's first page: %d rows, replay button %v", n, b.exists(`#deadletters button[aria-label^="Replay"]`))
	}
	pages := b.text("#deadletters")
	mustContainAll(t, "the first page", pages, "flow_not_found")
	b.click("#next-page")
	b.until("the second page", `document.querySelector("#first-page") && document.querySelectorAll("#deadletters tbody tr").length === 1`, 30*time.Second)
	pages += b.text("#deadletters")
	mustContainAll(t, "the two pages", pages, ids...)
	dl := eval[string](b, `document.querySelector("#deadletters tbody tr code").innerText`)
	mustContainAll(t, "an editor's forged replay", b.post("/ui/deadletters/"+dl+"/replay", "confirm=yes", true), `data-code="forbidden"`)
	b.click(`#deadletters button[aria-label^="Payload"]`)
	b.until("the payload", `document.querySelector("#deadletters pre")`, 30*time.Second)
	mustContainAll(t, "the payload", b.text("#deadletters pre"), "late-ui", "execution_id")
	b.shot("deadletters-page-2")
	b.axe("dead letters")
	b.logout()
	b.login("admin", uiAdminPassword)
	b.open("/ui/deadletters?limit=2")
	b.until("an admin's dead letters", `document.querySelector("#deadletters button[aria-label^='Replay']")`, 30*time.Second)
	b.shot("deadletters")
	replayed := eval[string](b, `document.querySelector("#deadletters tbody tr a.mono").innerText`)
	b.click(`#deadletters button[aria-label^="Replay"]`)
	b.until("the replay", `document.querySelector("#deadletters .notice")`, 30*time.Second)
	mustContainAll(t, "the replay", b.text("#deadletters .notice"), "replayed", replayed)
	con.waitStatusIn(t, "default", replayed, "completed", 60*time.Second)
	// Read again, the list marks it replayed (as which task) and offers no second replay of
	// it; each row names its flow.
	b.open("/ui/deadletters?limit=2")
	b.until("the list after the replay", `document.querySelector("#deadletters [data-replayed]")`, 30*time.Second)
	mustContainAll(t, "the replayed mark", b.text("#deadletters [data-replayed]"), "replayed as")
	if n := eval[int](b, `[...document.querySelectorAll("#deadletters tbody tr")].filter(r => r.querySelector("[data-replayed]") && r.querySelector("button[aria-label^='Replay']")).length`); n != 0 {
		t.Errorf("%d replayed dead letter(s) offered a replay again", n)
	}
	mustContainAll(t, "the flow column", b.text("#deadletters"), "late-ui")
	b.shot("deadletters-replayed")
	b.axe("dead letters after a replay")
}

// uiDisableTenant: a platform admin creates a tenant and disables it on the tenants page; its
// member, who could work in it, is refused from the next page on.
func uiDisableTenant(t *testing.T, con *console, b *browser) {
	t.Helper()
	b.open("/ui/tenants")
	b.fill("#t-slug", "acme")
	b.click(`form[hx-post="/ui/tenants"] button`)
	b.until("the tenant created", `document.querySelector("#tenant-acme")`, 30*time.Second)
	if code, body := con.call(t, http.MethodPost, "/api/users", map[string]any{"login": "tina", "password": "tina-password-1"}); code != http.StatusCreated {
		t.Fatalf("create user: %d %v", code, body)
	}
	if code, body := con.callIn(t, "acme", http.MethodPut, "/api/members", map[string]any{"login": "tina", "role": "editor"}); code != http.StatusOK {
		t.Fatalf("membership: %d %v", code, body)
	}
	b.logout()
	b.login("tina", "tina-password-1")
	b.open("/ui/executions")
	b.until("tina's executions page in acme", `document.querySelector("h1") && document.body.innerText.includes("tenant acme")`, 30*time.Second)
	b.logout()
	b.login("admin", uiAdminPassword)
	b.open("/ui/tenants")
	b.click(`#tenant-acme button`)
	b.until("acme disabled", `document.querySelector("#tenant-acme .s-disabled")`, 30*time.Second)
	b.shot("tenants-disabled")
	b.logout()
	b.login("tina", "tina-password-1")
	b.open("/ui/executions")
	b.until("tina refused", `document.querySelector('.problem[data-code="tenant_disabled"]')`, 30*time.Second)
	b.shot("tenant-disabled-refused")
}

// startOver starts a published flow over the API (the admin key) and returns the execution id.
func startOver(t *testing.T, con *console, flow, input string) string {
	t.Helper()
	code, body := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": flow, "input": json.RawMessage(input)})
	if code != http.StatusCreated {
		t.Fatalf("start %s: %d %v", flow, code, body)
	}
	return fmt.Sprint(body["execution_id"])
}

// uiMainPages opens every main page: each renders, is screenshotted and checked by axe.
func uiMainPages(t *testing.T, b *browser) {
	t.Helper()
	for _, p := range []struct{ path, sel, name string }{
		{"/ui/executions", "#executions", "executions"},
		{"/ui/executions?status=completed", "#executions", "executions-completed"},
		{"/ui/flows", "table", "flows"},
		{"/ui/approvals", "h1", "approvals"},
		{"/ui/schedules", "h1", "schedules"},
		{"/ui/deadletters", "h1", "deadletters"},
		{"/ui/cluster", "#instances", "cluster"},
		{"/ui/jobs", "#jobs", "jobs"},
		{"/ui/tenants", "#tenants", "tenants"},
		{"/ui/users", "#users", "users"},
		{"/ui/members", "#members", "members"},
		{"/ui/apikeys", "#apikeys", "apikeys"},
		{"/ui/audit", "#audit", "audit"},
	} {
		b.open(p.path)
		b.until(p.name, fmt.Sprintf(`document.querySelector(%q)`, p.sel), 30*time.Second)
		b.shot(p.name)
		b.axe(p.name)
		if p.name == "cluster" {
			mustContainAll(t, "the cluster page", b.text("#instances"), "worker", "filter", "delay", "console")
		}
	}
	// Keyboard: the first Tab reaches the skip link, which moves focus to the content.
	b.open("/ui/executions")
	b.do(chromedp.KeyEvent("\t"))
	if got := eval[string](b, `document.activeElement.className`); got != "skip" {
		t.Errorf("the first Tab focuses %q, not the skip link", got)
	}
}

// uiNarrowScreen: at 390 px the pages fit the width (no sideways scrolling of the page itself).
func uiNarrowScreen(t *testing.T, b *browser, id string) {
	t.Helper()
	b.do(chromedp.EmulateViewport(390, 844))
	for _, p := range []struct{ path, name string }{{"/ui/executions", "narrow-executions"}, {"/ui/executions/" + id, "narrow-execution"},
		{"/ui/flows/expense-approval", "narrow-flow"}, {"/ui/jobs", "narrow-jobs"}, {"/ui/schedules", "narrow-schedules"}} {
		b.open(p.path)
		if w := eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`); w > 1 {
			t.Errorf("%s at 390 px is %d px too wide", p.path, w)
		}
		b.shot(p.name)
	}
	b.do(chromedp.EmulateViewport(1280, 900))
}

// uiViewer: on an execution waiting for an approval, a viewer sees the graph and the waiting
// panel but no write button and no answer form; a write they forge with their session's token
// is refused, as is an admin's without the token.
func uiViewer(t *testing.T, con *console, b *browser, id string) {
	t.Helper()
	if code, body := con.call(t, http.MethodPost, "/api/users", map[string]any{"login": "vera", "password": "vera-password-1"}); code != http.StatusCreated {
		t.Fatalf("create viewer: %d %v", code, body)
	}
	if code, body := con.call(t, http.MethodPut, "/api/members", map[string]any{"login": "vera", "role": "viewer"}); code != http.StatusOK {
		t.Fatalf("viewer membership: %d %v", code, body)
	}
	forged := b.post("/ui/executions/"+id+"/action", "do=cancel", false)
	mustContainAll(t, "an admin's write without the token", forged, `data-code="csrf"`)
	b.logout()
	b.login("vera", "vera-password-1")
	b.open("/ui/executions/" + id)
	b.until("the viewer's execution page", `document.querySelector("#exec-graph") && document.querySelector("#waiting[data-kind=approval]")`, 60*time.Second)
	for _, sel := range []string{"#cancel-button", "#retry-button", "#continue-button", "#timeout-button", "#event-form", "#approval-form", "#action-buttons", "#delete-form"} {
		if b.exists(sel) {
			t.Errorf("a viewer's execution page has %s", sel)
		}
	}
	b.open("/ui/flows/expense-approval")
	if b.exists("#run-form") || b.exists("a[href^='/ui/flows/new']") {
		t.Error("a viewer's flow page has the run form or the editor")
	}
	b.shot("viewer-flow")
	for _, w := range []struct{ path, form string }{
		{"/ui/executions/" + id + "/action", "do=cancel"},
		{"/ui/executions/" + id + "/approve", "decision=approve"},
		{"/ui/flows/expense-approval/run", "input=%7B%7D"},
		{"/ui/events", "type=payment&data=%7B%7D"},
	} {
		mustContainAll(t, "a viewer's write "+w.path, b.post(w.path, w.form, true), `data-code="forbidden"`)
	}
}
