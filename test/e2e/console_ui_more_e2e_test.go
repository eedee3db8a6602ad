//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"plaita/config"
	"plaita/engine"
	"plaita/queue"
	"plaita/store/keys"
)

// The browser test's live updates, bulk jobs, schedules, retry back-off, running quota and
// large results (console_ui_e2e_test.go runs them in order, on one stack).

// uiCompletedByTheStream: on the page of an execution waiting for an event (the stream held),
// an event published over the API completes it; the page shows it without a reload, and it was
// the event stream that delivered it: the region that shows it answered a refresh the stream
// asked for (via=sse, on the network log too), not the poll (which, every 10 s while the
// stream is held, asks for what no event reports).
func uiCompletedByTheStream(t *testing.T, con *console, b *browser, id string) {
	t.Helper()
	b.until("the execution's stream held", `document.querySelector("#live[data-live=open]")`, 30*time.Second)
	eval[bool](b, `window.__sameDocument = true`)
	b.watchFirst("#live[data-status=completed]")
	from := b.requestCount()
	if code, body := con.call(t, http.MethodPost, "/api/events", map[string]any{"type": "payment",
		"data": map[string]any{"order_id": "ord-77", "status": "paid", "payment_id": "p-1"}}); code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, body)
	}
	b.until("the payment completed, live", `document.querySelector("#live[data-status=completed]")`, 60*time.Second)
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Fatal("the page was reloaded")
	}
	live := "/ui/executions/" + id + "/live"
	sse, polls := b.requestsSince(from, live, "via=sse"), b.requestsSince(from, live, "via=poll")
	if via := b.firstVia("#live[data-status=completed]"); via != "sse" || len(sse) == 0 {
		t.Fatalf("the completion came by %q; refreshes asked by the stream %d, by the poll %d", via, len(sse), len(polls))
	}
	if len(b.requestsSince(0, "/ui/executions/"+id+"/events")) == 0 {
		t.Error("no request of the execution's event stream in the network log")
	}
	t.Logf("completed on the page by a refresh the event stream asked for (%d asked by it, %d by the poll meanwhile)", len(sse), len(polls))
	b.shot("execution-completed-live")
}

// uiLiveList: the first page of the list follows the status stream; an execution started
// over the API appears without a reload, in rows read again because the stream said so. A
// worker publishes a tenant's status changes once it has seen the list's subscription (it
// looks every second): executions of a quick flow are started until its published-events
// counter moves, then the one the test watches.
func uiLiveList(t *testing.T, con *console, worker *proc, b *browser) {
	t.Helper()
	def, err := os.ReadFile(filepath.Join(repoRoot, "examples", "hello.json"))
	if err != nil {
		t.Fatal(err)
	}
	con.publishFlow(t, "default", def)
	b.open("/ui/executions")
	b.until("the list's stream held", `document.querySelector("#list[data-live=open]")`, 30*time.Second)
	eval[bool](b, `window.__sameDocument = true`)
	const published = "plaita_execution_events_published_total"
	before := worker.metric(published)
	waitFor(t, "the worker to publish the tenant's status changes", 30*time.Second, func() bool {
		startOver(t, con, "hello", `{}`)
		return worker.metric(published) > before
	}, worker)
	b.watchRows()
	id := startOver(t, con, "hello", `{"name": "live"}`)
	b.until("the new execution listed", fmt.Sprintf(`document.querySelector('#list tr[data-id=%q]')`, id), 60*time.Second)
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Fatal("the list was reloaded")
	}
	if via := b.rowVia(id); via != "sse" {
		t.Errorf("the new row came by %q: %v", via, b.requestsSince(0, "fragment=rows"))
	}
	b.shot("executions-live")
}

// flakyCall fails at once (nothing listens on port 1) and waits ten minutes before its next
// attempt.
const flakyCall = `{"id":"flaky-call","version":"1","start":"call","nodes":[
	{"id":"call","type":"http","params":{"url":"http://127.0.0.1:1/never","timeout":2},"retry":{"max_attempts":3,"backoff_seconds":600},"next":"done"},
	{"id":"done","type":"end"}]}`

// uiRetryAndQuota, in a tenant of its own whose running limit is 1: an execution whose node
// failed waits out its retry back-off (the panel says which attempt failed, of how many, and
// when the next starts; the timer is listed) and holds the tenant's one running slot; a start
// that reached the queue past the console's check waits for a slot (the panel says the tenant
// is over its quota, and how often a worker deferred it).
func uiRetryAndQuota(t *testing.T, s *stack, con *console, b *browser) {
	t.Helper()
	if code, body := con.call(t, http.MethodPost, "/api/tenants", map[string]any{"slug": "quota"}); code != http.StatusCreated {
		t.Fatalf("tenant: %d %v", code, body)
	}
	if err := s.c.Do(s.ctx, s.c.B().Hset().Key(keys.MustFor("", "").TenantQuota()).FieldValue().FieldValue("quota", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	quick := `{"id":"quick","version":"1","start":"done","nodes":[{"id":"done","type":"end"}]}`
	for _, def := range []string{flakyCall, quick} {
		con.publishFlow(t, "quota", def)
	}
	code, body := con.callIn(t, "quota", http.MethodPost, "/api/executions", map[string]any{"flow_id": "flaky-call"})
	if code != http.StatusCreated {
		t.Fatalf("start: %d %v", code, body)
	}
	flaky := fmt.Sprint(body["execution_id"])
	waitFor(t, "the first attempt failed", 60*time.Second, func() bool {
		_, body := con.callIn(t, "quota", http.MethodGet, "/api/executions/"+flaky, nil)
		pr, _ := body["progress"].(map[string]any)
		return pr != nil && pr["retry"] != nil
	}, s.procs...)
	queued := engine.NewExecutionID()
	if _, err := queue.Enqueue(s.ctx, queue.Redis(s.c), config.QueueName.In(s.cfg), queue.Envelope{Kind: queue.KindStart, TenantID: "quota", FlowID: "quick",
		FlowVersion: "1", ExecutionID: queued, Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}

	b.open("/ui/executions")
	b.switchTenant("quota")
	b.open("/ui/executions/" + flaky)
	b.until("the retry back-off", `document.querySelector("#waiting[data-kind=retry]") && document.querySelector("#timers tr[data-kind=retry_backoff]")`, 30*time.Second)
	mustContainAll(t, "the retry panel", b.text("#waiting"), "a retry back-off: attempt 1 of 3 of node call failed", "It tries again in", "connection refused",
		"worker: 1 alive")
	if due := b.text("#waiting-due"); !strings.HasPrefix(due, "in 9m") && !strings.HasPrefix(due, "in 10m") {
		t.Errorf("next attempt %q", due)
	}
	mustContainAll(t, "the timers", b.text("#timers"), "attempt 2 of 3 of the node starts", "call")
	b.shot("execution-waiting-retry")
	b.axe("execution (retry back-off)")

	b.open("/ui/executions/" + queued)
	b.until("the quota panel", `document.querySelector("#waiting[data-kind=quota]")`, 30*time.Second)
	mustContainAll(t, "the quota panel", b.text("#waiting"), "tenant quota is over its running quota: 1 running, limit 1", "plaita:tenant_quota")
	waitFor(t, "a worker deferred the start", 60*time.Second, func() bool {
		_, body := con.callIn(t, "quota", http.MethodGet, "/api/executions/"+queued, nil)
		q, _ := body["queued"].(map[string]any)
		w, _ := q["wait"].(map[string]any)
		n, _ := w["quota_defer_count"].(float64)
		return n >= 1
	}, s.procs...)
	b.open("/ui/executions/" + queued)
	b.until("the deferral said", `document.querySelector("#waiting[data-kind=quota]") && document.querySelector("#waiting").innerText.includes("deferred this start")`, 30*time.Second)
	b.shot("execution-waiting-quota")
	b.axe("execution (over quota)")

	// The retry is cancelled (its slot frees) and the limit lifted: the queued start runs.
	if code, body := con.callIn(t, "quota", http.MethodPost, "/api/executions/"+flaky+"/cancel", nil); code != http.StatusOK {
		t.Fatalf("cancel: %d %v", code, body)
	}
	if err := s.c.Do(s.ctx, s.c.B().Hdel().Key(keys.MustFor("", "").TenantQuota()).Field("quota").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	con.waitStatusIn(t, "quota", queued, "completed", 90*time.Second, s.procs...)
	b.switchTenant("default")
}

// uiBulkCancel: on the list filtered by a flow, "all matching" counts first (a dry run: two
// waiting, two completed), then the confirmed job runs; its page follows it to the end and
// reports the two it could not cancel, with the refusal's code.
func uiBulkCancel(t *testing.T, con *console, b *browser) {
	t.Helper()
	for _, order := range []string{"ord-b1", "ord-b2"} {
		id := startOver(t, con, "payment-wait", fmt.Sprintf(`{"order_id": %q}`, order))
		con.waitStatusIn(t, "default", id, "suspended", 60*time.Second)
	}
	// The flow's executions: ord-77 and ord-78 completed, ord-b1 and ord-b2 waiting.
	b.open("/ui/executions?flow_id=payment-wait")
	b.do(chromedp.SetValue(chromedp.CSS("#bulk-action"), "cancel"))
	b.click("#bulk-preview-button")
	b.until("the count", `document.querySelector("#job-preview[data-count]")`, 30*time.Second)
	if n := b.text("#job-count"); n != "4" {
		t.Fatalf("the dry run counted %s, want 4: %s", n, b.text("#job-preview"))
	}
	// Two of them completed already: the count says they will be refused, the button acts on two.
	mustContainAll(t, "the preview", b.text("#job-preview"), "execution(s) of tenant default match", "2 will be cancelled", "2 will be refused (terminal: 2)", "Cancel these 2")
	b.shot("bulk-preview")
	b.axe("bulk preview")
	b.click("#job-confirm")
	b.until("the job's page, finished", `location.pathname.startsWith("/ui/jobs/") && document.querySelector("#job-progress[data-status=completed]")`, 60*time.Second)
	mustContainAll(t, "the job", b.text("#job-progress"), "4 of 4 applied: 2 done, 2 failed")
	mustContainAll(t, "the failures", b.text("#job-partial")+b.text("#job-items"), "2 of 4 item(s) failed", "terminal")
	b.shot("job")
	b.axe("job")
}

// uiScheduleEdit: a schedule created on the schedules page, then its cron changed on its own
// page: saved, with the next tick of the new calendar.
func uiScheduleEdit(t *testing.T, b *browser) {
	t.Helper()
	b.open("/ui/schedules")
	b.fill("#s-id", "nightly-report")
	b.fill("#s-cron", "0 3 * * *")
	b.fill("#s-flow", "expense-approval")
	b.click("#schedule-create-button")
	b.until("the schedule's page", `location.pathname === "/ui/schedules/nightly-report" && document.querySelector("#schedule-edit")`, 30*time.Second)
	next := `document.querySelector("#schedule-next time").getAttribute("datetime")`
	before := eval[string](b, next)
	b.fill("#s-cron", "30 4 * * *")
	b.fill("#s-tz", "Europe/Paris")
	b.click("#schedule-save")
	b.until("saved", `document.querySelector("#schedule-saved")`, 30*time.Second)
	mustContainAll(t, "the save", b.text("#schedule-saved"), "Saved: revision")
	b.open("/ui/schedules/nightly-report")
	mustContainAll(t, "the schedule", b.text("#schedule-state"), "30 4 * * *", "Europe/Paris")
	if after := eval[string](b, next); after == before {
		t.Errorf("the next tick did not move: %q", after)
	}
	b.shot("schedule")
	b.axe("schedule")
}

// uiLargeResult: a node whose result is 5 MB; the page opens with its preview, "Show all"
// brings the first part and a download of the whole, and the page stays small.
func uiLargeResult(t *testing.T, con *console, b *browser) {
	t.Helper()
	blob := strings.Repeat("z", 5<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"blob":%q}`, blob)
	}))
	t.Cleanup(srv.Close)
	def := fmt.Sprintf(`{"id":"big-result","version":"1","start":"fetch","nodes":[
		{"id":"fetch","type":"http","params":{"url":%q,"timeout":30},"next":"done"},{"id":"done","type":"end"}]}`, srv.URL+"/big")
	con.publishFlow(t, "default", def)
	id := startOver(t, con, "big-result", `{}`)
	con.waitStatusIn(t, "default", id, "completed", 60*time.Second)
	t0 := time.Now()
	b.open("/ui/executions/" + id)
	b.until("the page", `document.querySelector("#live[data-status=completed] #results")`, 30*time.Second)
	t.Logf("the page of a 5 MB result opened in %s", time.Since(t0))
	if n := eval[int](b, `document.documentElement.outerHTML.length`); n > 512<<10 {
		t.Errorf("the page holds %d bytes: more than the previews", n)
	}
	t1 := time.Now()
	b.click(`#result-fetch button`)
	b.until("the first part and the download", `document.querySelector("#result-cut-fetch a[download]")`, 60*time.Second)
	t.Logf("its first part came in %s", time.Since(t1))
	if n := eval[int](b, `document.documentElement.outerHTML.length`); n > 1<<20 {
		t.Errorf("the page holds %d bytes after Show all", n)
	}
	size := eval[int](b, `fetch(document.querySelector("#result-cut-fetch a[download]").href).then(r => r.text()).then(t => t.length)`)
	if size < 5<<20 {
		t.Errorf("the download is %d bytes", size)
	}
	b.shot("execution-large-result")
}

// waitStatusIn waits until the console says execution id of tenant has status.
func (c *console) waitStatusIn(t *testing.T, tenant, id, status string, within time.Duration, ps ...*proc) {
	t.Helper()
	waitFor(t, fmt.Sprintf("execution %s %s", id, status), within, func() bool {
		_, body := c.callIn(t, tenant, http.MethodGet, "/api/executions/"+id, nil)
		ex, _ := body["execution"].(map[string]any)
		return ex != nil && ex["status"] == status
	}, ps...)
}

// publishFlow publishes a definition in tenant over the API.
func (c *console) publishFlow(t *testing.T, tenant string, def any) {
	t.Helper()
	var raw json.RawMessage
	switch d := def.(type) {
	case string:
		raw = json.RawMessage(d)
	case []byte:
		raw = d
	}
	if code, body := c.callIn(t, tenant, http.MethodPost, "/api/flows", map[string]any{"definition": raw}); code != http.StatusCreated {
		t.Fatalf("publish in %s: %d %v", tenant, code, body)
	}
}
