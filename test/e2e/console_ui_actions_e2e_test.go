//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The execution page as an operator uses it ([operator-console] 3 and 4): it shows the input,
// the output, the variables, the indexed values and the duration; it offers exactly the
// resumes the resume check accepts now — none on a completed execution, the event (its match
// filled in) on an event wait — and asks before a cancel.

const (
	uiOrderFlow = `{"id": "order", "version": "1", "index": ["order_id"], "start": "price", "nodes": [
		{"id": "price", "type": "set", "params": {"vars": {"total": "{{ INPUT.amount * 2 }}"}}, "next": "done"},
		{"id": "done", "type": "end", "params": {"output": {"order_id": "{{ INPUT.order_id }}", "total": "{{ VARS.total }}"}}}]}`
	uiPaymentFlow = `{"id": "payment", "version": "1", "index": ["order_id"], "start": "wait", "nodes": [
		{"id": "wait", "type": "wait_event", "params": {"event_type": "paid", "match": "EVENT.order_id == INPUT.order_id"}, "next": "done"},
		{"id": "done", "type": "end", "params": {"output": "{{ EVENT.order_id }}"}}]}`
)

func TestExecutionPageOffersWhatIsAccepted(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": uiAdminPassword})
	s.start("worker", nil)
	s.start("filter", nil)
	for _, def := range []string{uiOrderFlow, uiPaymentFlow} {
		con.publishFlow(t, "", def)
	}
	start := func(flow, input string) string {
		t.Helper()
		code, body := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": flow, "input": json.RawMessage(input)})
		if code != http.StatusCreated {
			t.Fatalf("start %s: %d %v", flow, code, body)
		}
		return fmt.Sprint(body["execution_id"])
	}
	done := start("order", `{"order_id": "o-1", "amount": 21}`)
	waits := start("payment", `{"order_id": "o-2"}`)
	cancelled := start("payment", `{"order_id": "o-3"}`)
	con.waitExecution(t, done, "the order to complete", statusOf("completed"))
	for _, id := range []string{waits, cancelled} {
		con.waitExecution(t, id, "the payment to wait", statusOf("suspended"))
	}

	b := newBrowser(t, con.base)
	b.open("/ui/login")
	b.login("admin", uiAdminPassword)

	// A completed execution: its data, and no resume offered.
	b.open("/ui/executions/" + done)
	b.until("the page", `document.querySelector("#live[data-status=completed]")`, 30*time.Second)
	mustContainAll(t, "the input", eval[string](b, `document.querySelector("#exec-input pre").textContent`), `"order_id": "o-1"`, `"amount": 21`)
	mustContainAll(t, "the output", b.text("#exec-output"), `"total": 42`)
	mustContainAll(t, "the variables", eval[string](b, `document.querySelector("#exec-vars pre").textContent`), `"total": 42`)
	mustContainAll(t, "the index", b.text("#exec-index"), "order_id", "o-1")
	if d := b.text("#exec-duration"); d == "" || strings.Contains(d, "so far") {
		t.Errorf("the duration of a completed execution: %q", d)
	}
	for _, sel := range []string{"#continue-button", "#retry-button", "#cancel-button", "#timeout-button", "#event-form"} {
		if b.exists(sel) {
			t.Errorf("a completed execution offers %s", sel)
		}
	}
	mustContainAll(t, "what the page says instead", b.text("#no-actions"), "No resume is accepted now", "completed")
	// The graph's nodes link to their results; its legend names every colour.
	b.click(`#exec-graph a[href="#node-result-price"]`)
	b.until("the node's result row", `location.hash === "#node-result-price" && document.querySelector("#node-result-price")`, 10*time.Second)
	mustContainAll(t, "the legend", b.text("#graph-legend"), "the path taken", "where it stands", "where it failed", "a condition not run", "a wait not run")
	b.shot("execution-completed-data")
	b.axe("execution (completed, with its data)")

	// The index value links to the list filtered by it.
	b.click("#exec-index a")
	b.until("the list filtered by the index", `location.pathname === "/ui/executions" && location.search.includes("o-1") &&
		document.readyState === "complete" && document.querySelector("#executions tbody tr[data-id]")`, 30*time.Second)
	if ids := eval[[]string](b, `[...document.querySelectorAll("#executions tbody tr[data-id]")].map(r => r.dataset.id)`); len(ids) != 1 || ids[0] != done {
		t.Errorf("the list by order_id=o-1: %v, want [%s]", ids, done)
	}

	// An event wait: the event to deliver, its match filled in; a cancel that asks first; no
	// continue or retry.
	b.open("/ui/executions/" + waits)
	b.until("the wait", `document.querySelector("#waiting[data-kind=event]")`, 30*time.Second)
	if ev := eval[string](b, `document.querySelector("#event-data").value`); !strings.Contains(ev, `"o-2"`) {
		t.Fatalf("the event offered: %q", ev)
	}
	for _, sel := range []string{"#continue-button", "#retry-button"} {
		if b.exists(sel) {
			t.Errorf("an event wait offers %s", sel)
		}
	}
	if q := eval[string](b, `document.querySelector("#cancel-button").closest("form").getAttribute("hx-confirm") || ""`); !strings.Contains(q, "Cancel execution") {
		t.Errorf("the cancel asks %q", q)
	}
	// One clock for every relative time: the start's "ago", the subscription's, the running
	// duration tick in one format, the server's first words the same as the clock's.
	clock := `[...document.querySelectorAll("#live [data-due], #live [data-since]")].map(e => e.textContent.trim())`
	first := eval[[]string](b, clock)
	if len(first) < 3 {
		t.Fatalf("relative times on the page: %q", first)
	}
	words := regexp.MustCompile(`^(in )?(\d+d \d+h|\d+h \d+m|\d+m \d+s|\d+s)( ago)?$`)
	for _, w := range first {
		if !words.MatchString(w) {
			t.Errorf("a relative time %q is not in the clock's words", w)
		}
	}
	was := eval[string](b, `JSON.stringify(`+clock+`)`)
	b.until("the times to tick", `JSON.stringify(`+clock+`) !== `+strconv.Quote(was), 10*time.Second)
	b.shot("execution-event-actions")
	b.axe("execution (event wait, its actions)")
	b.click("#event-button")
	b.until("completed by the event", `document.querySelector("#live[data-status=completed]")`, 60*time.Second)

	// The cancel, confirmed.
	b.open("/ui/executions/" + cancelled)
	b.until("the wait", `document.querySelector("#cancel-button")`, 30*time.Second)
	b.click("#cancel-button")
	b.until("cancelled", `document.querySelector("#live[data-status=cancelled]")`, 60*time.Second)
}

// The polish of [operator-console] 7, in the browser: the console has an icon (no 404), the
// words of a narrow table break between words, "Edit as a new version" publishes a new
// version (not the edited one's number, refused as changed) and says so, and logging out says
// so.
func TestConsolePolish(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": uiAdminPassword})
	s.start("worker", nil)
	con.publishFlow(t, "", uiOrderFlow)
	for i := range 3 {
		code, body := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "order", "input": map[string]any{"order_id": fmt.Sprint("o-", i), "amount": 1}})
		if code != http.StatusCreated {
			t.Fatalf("start: %d %v", code, body)
		}
		con.waitExecution(t, fmt.Sprint(body["execution_id"]), "the order to complete", statusOf("completed"))
	}
	b := newBrowser(t, con.base)
	b.open("/ui/login")
	b.login("admin", uiAdminPassword)

	// The icon: linked, and served at /favicon.ico too.
	b.open("/ui/executions")
	if !b.exists(`link[rel=icon]`) {
		t.Error("no icon linked")
	}
	status := func(path string) int {
		return eval[int](b, `(() => { const x = new XMLHttpRequest(); x.open("GET", "`+path+`", false); x.send(); return x.status })()`)
	}
	for _, p := range []string{"/favicon.ico", "/ui/static/favicon.svg"} {
		if code := status(p); code != http.StatusOK {
			t.Errorf("%s: %d", p, code)
		}
	}

	// A narrow screen: badges and buttons stay whole words.
	b.do(chromedp.EmulateViewport(320, 700))
	b.open("/ui/executions")
	broken := eval[[]string](b, `[...document.querySelectorAll("td .badge, td button, .actions button, td a:not(.mono)")].
		filter(e => e.getClientRects().length > 1 || e.offsetHeight > 2.2 * parseFloat(getComputedStyle(e).fontSize)).map(e => e.textContent.trim())`)
	if len(broken) > 0 {
		t.Errorf("broken over lines at 320 px: %q", broken)
	}
	// And by the rules that keep them so on any page: a cell's words break only between
	// words (ids and code anywhere), badges and buttons never.
	rules := eval[[]string](b, `(() => {
		const bad = [];
		for (const e of document.querySelectorAll("td")) if (getComputedStyle(e).overflowWrap === "anywhere") bad.push("td " + e.textContent.trim().slice(0, 20));
		for (const e of document.querySelectorAll(".badge, button")) if (getComputedStyle(e).whiteSpace !== "nowrap") bad.push(e.tagName + " " + e.textContent.trim());
		return bad.slice(0, 5);
	})()`)
	if len(rules) > 0 {
		t.Errorf("words that may break mid-word: %q", rules)
	}
	b.shot("narrow-executions-words")
	b.do(chromedp.EmulateViewport(1280, 900))

	// Times are typed in the page's one zone, 24-hour UTC: no browser date picker in its own
	// locale's clock.
	b.open("/ui/executions")
	if n := eval[int](b, `document.querySelectorAll("input[type=datetime-local], input[type=date], input[type=time]").length`); n != 0 {
		t.Errorf("%d browser date pickers on the list", n)
	}
	// The flow filter offers the tenant's flows as it is typed (no exact id to know by heart).
	if !eval[bool](b, `document.querySelector("#f-flow").list !== null && !!document.querySelector('#flow-ids option[value="order"]')`) {
		t.Error("the flow filter offers no flows")
	}
	b.open("/ui/executions?started_after=" + url.QueryEscape("2000-01-01 00:00"))
	if rows := eval[int](b, `document.querySelectorAll("#executions tbody tr[data-id]").length`); rows != 3 || b.exists(".problem") {
		t.Errorf("started after 2000-01-01 00:00 (UTC): %d rows, a problem shown: %v", rows, b.exists(".problem"))
	}

	// Edit as a new version: version 2, published, said so.
	b.open("/ui/flows/order")
	b.click(`a[href="/ui/flows/new?from=order"]`)
	b.until("the editor", `document.querySelector("#definition")`, 30*time.Second)
	if def := eval[string](b, `document.querySelector("#definition").value`); !strings.Contains(def, `"version": "2"`) {
		t.Fatalf("the new version's definition: %s", def)
	}
	b.click("#validate-button")
	b.until("the definition valid", `document.querySelector("#check-valid")`, 30*time.Second)
	b.click("#publish-button")
	b.until("the flow's page", `document.querySelector("#flow-version")`, 30*time.Second)
	if v := b.text("#flow-version"); v != "2" {
		t.Fatalf("published version %q", v)
	}
	mustContainAll(t, "the notice", b.text(".notice"), "Version 2 of order is published")

	// A job whose every item was refused is not shown as a success.
	code, created := con.call(t, http.MethodPost, "/api/jobs", map[string]any{"action": "retry", "filter": map[string]any{"flow_id": "order"}})
	if code != http.StatusCreated {
		t.Fatalf("a retry job: %d %v", code, created)
	}
	jobID := created["job"].(map[string]any)["id"].(string)
	waitFor(t, "the job to end", 60*time.Second, func() bool {
		_, body := con.call(t, http.MethodGet, "/api/jobs/"+jobID, nil)
		j, _ := body["job"].(map[string]any)
		return j != nil && j["status"] == "completed"
	}, con.p)
	for _, page := range []string{"/ui/jobs/" + jobID, "/ui/jobs"} {
		b.open(page)
		if !b.exists(`.badge[data-outcome="all-failed"]`) || b.exists(`.badge.s-completed`) {
			t.Errorf("%s: a job whose every item failed shows %q", page, b.text(".badge"))
		}
	}
	b.shot("job-all-failed")

	// Logging out says so.
	b.logout()
	mustContainAll(t, "the login page after a logout", b.text(".notice"), "You are logged out")
	b.axe("login (logged out)")
}

// The cluster page is the platform operator's room ([operator-console] 5 and 6): it refreshes
// itself, asks an instance for its status and drains it from its row (after a confirmation),
// and the drained instance leaves the page without a reload.
func TestClusterPageAsksAndDrains(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": uiAdminPassword})
	worker := s.start("worker", map[string]string{"PLAITA_INSTANCE_ID": "worker-ui-drain"})
	b := newBrowser(t, con.base)
	b.open("/ui/login")
	b.login("admin", uiAdminPassword)

	b.open("/ui/cluster")
	row := `document.querySelector('#instances tr[data-instance="worker-ui-drain"]')`
	b.until("the worker's row", row, 30*time.Second)
	eval[bool](b, `window.__sameDocument = true`)
	b.click(`button[aria-label="Ask worker-ui-drain for its status"]`)
	b.until("its answer", `document.querySelector('#instance-answer [data-answer="worker-ui-drain"]')`, 30*time.Second)
	mustContainAll(t, "the status answer", b.text("#instance-answer"), "worker-ui-drain", "worker", "running")
	b.shot("cluster-status-answer")
	b.axe("cluster (with its actions)")

	worker.ended = true // drained on purpose: it exits before the test ends
	b.click(`button[aria-label="Drain worker-ui-drain"]`)
	b.until("the drain's answer", `(document.querySelector("#instance-answer") || {innerText: ""}).innerText.includes("drain requested")`, 30*time.Second)
	if !worker.wait(30 * time.Second) {
		t.Fatalf("the drained worker still runs:\n%s", worker.stderr.String())
	}
	if worker.err != nil {
		t.Fatalf("the drained worker's exit: %v", worker.err)
	}
	b.until("the worker gone from the page, no reload", "!"+row, 30*time.Second)
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Fatal("the page was reloaded")
	}
}

// Pages that stay true after a write ([operator-console] 5): a published event shows in the
// recent events, a created key in the key list, a saved schedule's new cron and revision in its
// panel, and an answered approval's form goes — each without a reload.
func TestPagesRefreshAfterWrites(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": uiAdminPassword})
	s.start("worker", nil)
	con.publishFlow(t, "", uiOrderFlow)
	con.publishFlow(t, "", `{"id": "ask", "version": "1", "start": "ok", "nodes": [
		{"id": "ok", "type": "approval", "params": {"message": "ship it?"}, "next": "done"},
		{"id": "done", "type": "end"}]}`)
	if code, body := con.call(t, http.MethodPost, "/api/schedules", map[string]any{"id": "nightly", "cron": "0 3 * * *", "flow_id": "order"}); code != http.StatusCreated {
		t.Fatalf("schedule: %d %v", code, body)
	}
	code, body := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "ask"})
	if code != http.StatusCreated {
		t.Fatalf("start: %d %v", code, body)
	}
	asking := fmt.Sprint(body["execution_id"])
	con.waitExecution(t, asking, "the approval", statusOf("suspended"))

	b := newBrowser(t, con.base)
	b.open("/ui/login")
	b.login("admin", uiAdminPassword)
	same := func(what string) {
		t.Helper()
		if !eval[bool](b, `window.__sameDocument === true`) {
			t.Fatalf("%s: the page was reloaded", what)
		}
	}

	b.open("/ui/events")
	eval[bool](b, `window.__sameDocument = true`)
	b.fill("#ev-type", "order.shipped")
	b.fill("#ev-id", "ev-refresh-1")
	b.click("#publish-event")
	b.until("the event in the recent events", `[...document.querySelectorAll("#events tbody tr")].some(r => r.innerText.includes("ev-refresh-1"))`, 30*time.Second)
	same("events")

	b.open("/ui/apikeys")
	eval[bool](b, `window.__sameDocument = true`)
	b.fill("#k-name", "deploy-bot")
	b.click("#key-create")
	b.until("the key in the list", `document.querySelector("#key-created") && [...document.querySelectorAll("#apikeys tbody tr")].some(r => r.innerText.includes("deploy-bot"))`, 30*time.Second)
	same("API keys")

	b.open("/ui/schedules/nightly")
	eval[bool](b, `window.__sameDocument = true`)
	// A bad calendar is refused in the page's words, not a command line's.
	b.fill("#s-cron", "every morning")
	b.click("#schedule-save")
	b.until("the refusal", `document.querySelector("#schedule-result").innerText.includes("cron")`, 30*time.Second)
	if got := b.text("#schedule-result"); strings.Contains(got, "--") {
		t.Errorf("the refusal speaks of command-line flags: %q", got)
	}
	b.fill("#s-cron", "15 4 * * *")
	b.click("#schedule-save")
	b.until("the new cron and revision in the panel", `document.querySelector("#schedule-state").innerText.includes("15 4 * * *") &&
		document.querySelector("#schedule-state").innerText.includes("Revision\n2")`, 30*time.Second)
	same("schedule")
	// Run now: one start of the schedule's flow, linked.
	b.click("#schedule-run")
	b.until("the start linked", `document.querySelector("#schedule-ran a[href^='/ui/executions/ex_']")`, 30*time.Second)
	ran := strings.TrimPrefix(eval[string](b, `document.querySelector("#schedule-ran a").getAttribute("href")`), "/ui/executions/")
	con.waitExecution(t, ran, "the run-now execution", func(st map[string]any) bool { return st["flow_id"] == "order" })

	b.open("/ui/executions/" + asking)
	b.until("the approval form", `document.querySelector("#approve-button")`, 30*time.Second)
	eval[bool](b, `window.__sameDocument = true`)
	b.click("#approve-button")
	b.until("the form gone", `!document.querySelector("#approve-button") && document.querySelector("#approval-form, #live[data-status=completed]")`, 30*time.Second)
	same("approval")
	b.until("completed", `document.querySelector("#live[data-status=completed]")`, 60*time.Second)
}

// The audit page filters ([operator-console] 6): by action family, outcome, actor and UTC time,
// and for a platform admin across every tenant with the platform's own rows.
func TestAuditPageFilters(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": uiAdminPassword})
	con.publishFlow(t, "", uiOrderFlow)
	if code, body := con.call(t, http.MethodPost, "/api/tenants", map[string]any{"slug": "beta"}); code != http.StatusCreated {
		t.Fatalf("tenant: %d %v", code, body)
	}
	con.publishFlow(t, "beta", uiOrderFlow)
	if code, body := con.call(t, http.MethodPost, "/api/api-keys", map[string]any{"name": "ci", "role": "viewer"}); code != http.StatusCreated {
		t.Fatalf("key: %d %v", code, body)
	}
	b := newBrowser(t, con.base)
	b.open("/ui/login")
	b.login("admin", uiAdminPassword)

	actions := func() []string {
		return eval[[]string](b, `[...document.querySelectorAll("#audit tbody tr[data-action]")].map(r => r.dataset.action)`)
	}
	b.open("/ui/audit")
	all := actions()
	if len(all) < 2 {
		t.Fatalf("the default tenant's audit: %v", all)
	}
	b.fill("#a-action", "flow")
	b.click("#audit-filter-button")
	b.until("the flow family", `location.search.includes("action=flow")`, 30*time.Second)
	flow := actions()
	if len(flow) == 0 || len(flow) >= len(all) {
		t.Fatalf("the flow family %v of %v", flow, all)
	}
	for _, a := range flow {
		if !strings.HasPrefix(a, "flow.") && a != "flow" {
			t.Errorf("%q under action=flow", a)
		}
	}
	b.shot("audit-filtered")
	b.axe("audit (filtered)")

	// A time in the future keeps nothing; a bad one is named.
	b.open("/ui/audit?since=2999-01-01+00:00")
	if n := len(actions()); n != 0 {
		t.Errorf("%d rows since 2999", n)
	}
	b.open("/ui/audit?since=yesterday")
	mustContainAll(t, "a bad time", b.text("main"), "2026-12-05 09:30")

	// A bulk count (a dry run) is audited as what it was: job.dry_run, no job.create.
	b.open("/ui/executions")
	b.click("#bulk-preview-button")
	b.until("the count", `document.querySelector("#bulk-preview").children.length > 0`, 30*time.Second)
	b.open("/ui/audit?action=job")
	if got := strings.Join(actions(), ","); got != "job.dry_run" {
		t.Errorf("the job family after a count: %q, want job.dry_run", got)
	}

	// Every tenant and the platform: beta's publish and the platform's tenant.create.
	b.open("/ui/audit")
	b.click("#a-all")
	b.click("#audit-filter-button")
	b.until("every tenant", `location.search.includes("all_tenants=true")`, 30*time.Second)
	tenants := eval[[]string](b, `[...document.querySelectorAll("#audit tbody tr[data-action]")].map(r => r.cells[1].innerText.trim())`)
	mustContainAll(t, "the tenants of the rows", strings.Join(tenants, ","), "beta", "default")
	if got := strings.Join(actions(), ","); !strings.Contains(got, "tenant.create") {
		t.Errorf("no tenant.create among %s", got)
	}
}

// With Redis gone the execution page keeps what it showed under a "stale since …, retrying"
// banner — the graph, summary and timeline stay — and it recovers by itself, without a reload,
// once Redis is back ([operator-console] 5).
func TestLivePageStaysWhenRedisGoes(t *testing.T) {
	t.Parallel()
	s := newStack(t, withRedisArgs("--appendonly", "yes", "--appendfsync", "always")) // the state survives the restart
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": uiAdminPassword})
	s.start("worker", nil)
	con.publishFlow(t, "", uiPaymentFlow)
	code, body := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "payment", "input": map[string]any{"order_id": "o-9"}})
	if code != http.StatusCreated {
		t.Fatalf("start: %d %v", code, body)
	}
	id := fmt.Sprint(body["execution_id"])
	con.waitExecution(t, id, "the wait", statusOf("suspended"))

	b := newBrowser(t, con.base)
	b.open("/ui/login")
	b.login("admin", uiAdminPassword)
	b.open("/ui/executions/" + id)
	b.until("the live page", `document.querySelector("#live[data-live]") && document.querySelector("#exec-graph")`, 30*time.Second)
	eval[bool](b, `window.__sameDocument = true`)

	s.srv.Kill()
	b.until("the stale banner", `document.querySelector("#stale-banner")`, 60*time.Second)
	mustContainAll(t, "the banner", b.text("#stale-banner"), "Stale since", "retrying")
	for _, sel := range []string{"#exec-graph", "#exec-status", "#timeline", "#waiting"} {
		if !b.exists(sel) {
			t.Errorf("%s is gone with Redis", sel)
		}
	}
	if b.exists("#live .problem[data-code]") {
		t.Errorf("an error box replaced the page: %s", b.text("#live .problem[data-code]"))
	}
	b.shot("execution-stale")

	s.srv.Start()
	b.until("the banner gone, the page live again", `!document.querySelector("#stale-banner") && document.querySelector("#live[data-status=suspended]")`, 90*time.Second)
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Fatal("the page was reloaded")
	}
}

// TestExecutionPageCountsTheWholeRun: a loop of 40 passes on a worker whose timeline keeps 20
// entries. The page counts the branches of the whole run from the state (true × 40, false × 1),
// draws the loop's edges taken with those counts and each node's runs on its corner — where the
// trimmed timeline alone said "true × 9" and drew the loop grey — quotes the values each
// decision read, and zooms the graph in, out and back to fit.
func TestExecutionPageCountsTheWholeRun(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": uiAdminPassword})
	s.start("worker", map[string]string{"PLAITA_EXECUTION_TIMELINE_MAX": "20"})
	con.publishFlow(t, "", `{"id":"loop","version":"1","start":"more","vars":{"i":0},"max_steps":200,"nodes":[
		{"id":"more","type":"condition","params":{"expr":"VARS.i < 40"},"branches":{"true":"inc","false":"done"}},
		{"id":"inc","type":"set","params":{"vars":{"i":"{{ VARS.i + 1 }}"}},"next":"more"},
		{"id":"done","type":"end","params":{"output":"{{ VARS.i }}"}}]}`)
	code, body := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "loop", "input": map[string]any{}})
	if code != http.StatusCreated {
		t.Fatalf("start: %d %v", code, body)
	}
	id := fmt.Sprint(body["execution_id"])
	con.waitExecution(t, id, "the loop to complete", statusOf("completed"))

	b := newBrowser(t, con.base)
	b.open("/ui/login")
	b.login("admin", uiAdminPassword)
	b.open("/ui/executions/" + id)
	b.until("the page", `document.querySelector("#branch-counts") && document.querySelector("#exec-graph svg")`, 30*time.Second)
	counts := b.text("#branch-counts")
	mustContainAll(t, "the branch counts", counts, "more", "true × 40", "false × 1")
	if strings.Contains(counts, "counted from the timeline") {
		t.Errorf("a state of this version counted from its timeline: %s", counts)
	}
	edges := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("#exec-graph g.edge")].map(e => [e.dataset.from + "-" + e.dataset.label, e.getAttribute("class") + " " + e.dataset.runs]))`)
	if edges["more-true"] != "edge taken 40" || edges["more-false"] != "edge taken 1" {
		t.Errorf("the loop's edges: %v", edges)
	}
	if runs := eval[string](b, `(document.querySelector("#node-more .runs") || {}).textContent || ""`); runs != "×41" {
		t.Errorf("the condition's runs on its corner: %q", runs)
	}
	mustContainAll(t, "the decisions' values", b.text("#decisions"), "VARS.i < 40 is false (VARS.i = 40)")
	// A node quicker than a millisecond says so, not "0s".
	if times := eval[string](b, `[...document.querySelectorAll("#results tbody tr td:nth-child(3)")].map(e => e.textContent).join(",")`); strings.Contains(times, "0s") {
		t.Errorf("node times: %s", times)
	}

	// Zoom: in makes the picture larger than the fitted one, fit brings it back.
	width := func() float64 {
		return eval[float64](b, `document.querySelector("#exec-graph svg").getBoundingClientRect().width`)
	}
	b.until("the zoom buttons", `document.querySelector("#zoom-in")`, 10*time.Second)
	fitted := width()
	b.click("#zoom-in")
	b.click("#zoom-in")
	b.until("zoomed in", `document.querySelector("#exec-graph").dataset.scale !== "fit"`, 10*time.Second)
	if w := width(); w <= fitted {
		t.Errorf("zoomed in: %.0f px, fitted %.0f px", w, fitted)
	}
	b.shot("execution-graph-zoomed")
	b.click("#zoom-fit")
	b.until("fitted", `document.querySelector("#exec-graph").dataset.scale === "fit"`, 10*time.Second)
	if w := width(); w != fitted {
		t.Errorf("fitted again: %.0f px, was %.0f px", w, fitted)
	}
	b.shot("execution-branch-counts")
	b.axe("execution page with counts")
}

// TestEveryPageFailsAsFastWhenRedisGoes: with Redis gone, the pages that only read (flows,
// cluster, schedules, dead letters) answer their 503 as soon as the executions list does — they
// took 9.7 s, the console's Redis client retrying each read until the call's bound — and every
// page answers again once Redis is back, with no restart of the console. The cluster page
// open meanwhile keeps what it showed under a "stale since …, retrying" banner (it went on
// saying "Nothing needs attention"), and loses the banner when Redis is back, without a reload.
func TestEveryPageFailsAsFastWhenRedisGoes(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": uiAdminPassword})
	con.publishFlow(t, "", uiPaymentFlow)
	b := newBrowser(t, con.base)
	b.open("/ui/login")
	b.login("admin", uiAdminPassword)
	pages := []string{"/ui/executions", "/ui/flows", "/ui/cluster", "/ui/schedules", "/ui/deadletters", "/ui/events", "/ui/approvals"}
	get := func(path string) (int, time.Duration) {
		start := time.Now()
		code := eval[int](b, `(() => { const x = new XMLHttpRequest(); x.open("GET", "`+path+`", false); x.send(); return x.status })()`)
		return code, time.Since(start)
	}
	for _, p := range pages {
		if code, _ := get(p); code != http.StatusOK {
			t.Fatalf("%s with Redis: %d", p, code)
		}
	}
	b.open("/ui/cluster")
	b.until("the cluster page", `document.querySelector("#cluster-live")`, 30*time.Second)
	eval[bool](b, `window.__sameDocument = true`)
	s.srv.Kill()
	// The cluster page keeps what it showed under the banner (its refresh every 5 s fails).
	b.until("the cluster page's stale banner", `document.querySelector("#stale-banner")`, 30*time.Second)
	mustContainAll(t, "the banner", b.text("#stale-banner"), "Stale since", "the cluster's state", "retrying")
	if !b.exists("#cluster-live #queue") {
		t.Error("the cluster page's panel is gone with Redis")
	}
	b.shot("cluster-stale")
	// The bound is far above what a page takes (~0.1 s here) and far below the call's own
	// bound that a retrying read waited out.
	const bound = 3 * time.Second
	for _, p := range pages {
		code, took := get(p)
		if code != http.StatusServiceUnavailable || took > bound {
			t.Errorf("%s without Redis: %d after %s, want 503 within %s", p, code, took.Round(time.Millisecond), bound)
		}
	}
	s.srv.Start()
	b.until("the cluster page fresh again", `!document.querySelector("#stale-banner") && document.querySelector("#cluster-live #queue")`, 60*time.Second)
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Fatal("the cluster page was reloaded")
	}
	for _, p := range pages {
		if code, _ := get(p); code != http.StatusOK {
			t.Errorf("%s after Redis came back: %d", p, code)
		}
	}
}

// TestSavedViews: the executions list keeps named filters in the browser: saved from the
// filter the page has (less its place in the list), listed as links on every visit, and
// removable.
func TestSavedViews(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": uiAdminPassword})
	b := newBrowser(t, con.base)
	b.open("/ui/login")
	b.login("admin", uiAdminPassword)
	b.open("/ui/executions?status=suspended&sort=wake&limit=20")
	b.until("the views", `document.querySelector("#save-view")`, 30*time.Second)
	b.fill("#view-name", "waiting soonest")
	b.click("#save-view")
	b.until("the saved view", `document.querySelector("#saved-views a.view")`, 10*time.Second)
	b.open("/ui/executions")
	b.until("the view on another visit", `document.querySelector("#saved-views a.view")`, 30*time.Second)
	if got := b.text("#saved-views a.view"); got != "waiting soonest" {
		t.Errorf("the view's name: %q", got)
	}
	b.click("#saved-views a.view")
	b.until("the view's list", `location.search.includes("status=suspended")`, 30*time.Second)
	if q := eval[string](b, `location.search`); !strings.Contains(q, "sort=wake") || !strings.Contains(q, "limit=20") {
		t.Errorf("the view's query: %s", q)
	}
	if eval[string](b, `document.querySelector("#f-status").value`) != "suspended" {
		t.Error("the view's filter is not the form's")
	}
	b.shot("executions-saved-views")
	b.axe("executions with saved views")
	b.click(`#saved-views button[data-remove-view="0"]`)
	b.until("the view removed", `!document.querySelector("#saved-views a.view")`, 10*time.Second)
	b.open("/ui/executions")
	b.until("the list", `document.querySelector("#save-view")`, 30*time.Second)
	if b.exists("#saved-views a.view") {
		t.Error("a removed view is back")
	}
}

// TestEveryPageInTheBrowser: every page of the console, with something on it — executions
// (completed, waiting for an event, waiting for an approval), flows, a draft's editor, events,
// a dead letter, a schedule, a bulk job, the cluster, the audit, the admin pages — opened in
// the browser as a platform admin, each screenshotted into test/e2e/out/ui/every-*.png and
// checked by axe-core (no serious or critical violation), with no page answering an error.
func TestEveryPageInTheBrowser(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": uiAdminPassword})
	s.start("worker", nil)
	con.publishFlow(t, "", uiOrderFlow)
	con.publishFlow(t, "", uiPaymentFlow)
	con.publishFlow(t, "", `{"id":"review","version":"1","start":"ask","nodes":[
		{"id":"ask","type":"approval","params":{"message":"ship it?"},"next":"done"},{"id":"done","type":"end"}]}`)
	start := func(flow string, input map[string]any) string {
		code, body := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": flow, "input": input})
		if code != http.StatusCreated {
			t.Fatalf("start %s: %d %v", flow, code, body)
		}
		return fmt.Sprint(body["execution_id"])
	}
	done := start("order", map[string]any{"order_id": "o-1", "amount": 3})
	waiting := start("payment", map[string]any{"order_id": "o-2"})
	asking := start("review", map[string]any{})
	con.waitExecution(t, done, "the order", statusOf("completed"))
	con.waitExecution(t, waiting, "the payment wait", statusOf("suspended"))
	con.waitExecution(t, asking, "the approval", statusOf("suspended"))
	if code, body := con.call(t, http.MethodPost, "/api/events", map[string]any{"type": "shipped", "id": "evt-every", "data": map[string]any{"order_id": "o-1"}}); code >= 300 {
		t.Fatalf("event: %d %v", code, body)
	}
	if code, body := con.call(t, http.MethodPost, "/api/schedules", map[string]any{"id": "nightly", "cron": "0 3 * * *", "time_zone": "Europe/Paris", "flow_id": "order"}); code != http.StatusCreated {
		t.Fatalf("schedule: %d %v", code, body)
	}
	code, created := con.call(t, http.MethodPost, "/api/jobs", map[string]any{"action": "cancel", "filter": map[string]any{"flow_id": "order"}})
	job, _ := created["job"].(map[string]any)
	if code != http.StatusCreated || job == nil {
		t.Fatalf("job: %d %v", code, created)
	}
	s.enqueue("not-published")
	waitFor(t, "the dead letter", 60*time.Second, func() bool { return s.dlqLen() == 1 }, s.procs...)

	b := newBrowser(t, con.base)
	b.open("/ui/login")
	b.axe("login")
	b.shot("every-login")
	b.login("admin", uiAdminPassword)
	pages := []struct{ name, path, ready string }{
		{"executions", "/ui/executions", "#executions"},
		{"execution-completed", "/ui/executions/" + done, "#exec-graph svg"},
		{"execution-event-wait", "/ui/executions/" + waiting, "#waiting"},
		{"execution-approval", "/ui/executions/" + asking, "#approve-button"},
		{"flows", "/ui/flows", "main table"},
		{"flow", "/ui/flows/order", ".graph svg"},
		{"flow-new", "/ui/flows/new", "textarea"},
		{"approvals", "/ui/approvals", "main table"},
		{"events", "/ui/events", "main table"},
		{"deadletters", "/ui/deadletters", "#deadletters"},
		{"schedules", "/ui/schedules", "main table"},
		{"schedule", "/ui/schedules/nightly", "#schedule-then"},
		{"jobs", "/ui/jobs", "main table"},
		{"job", "/ui/jobs/" + fmt.Sprint(job["id"]), "#job-progress"},
		{"cluster", "/ui/cluster", "#cluster-live"},
		{"audit", "/ui/audit", "main table"},
		{"members", "/ui/members", "main"},
		{"apikeys", "/ui/apikeys", "main"},
		{"tenants", "/ui/tenants", "main"},
		{"users", "/ui/users", "main"},
	}
	for _, p := range pages {
		b.open(p.path)
		b.until(p.name, `document.querySelector(`+strconv.Quote(p.ready)+`)`, 30*time.Second)
		if b.exists("main .problem[data-code]") {
			t.Errorf("%s: %s", p.name, b.text("main .problem[data-code]"))
		}
		b.shot("every-" + p.name)
		b.axe(p.name)
	}
}
