//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
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
	b.shot("execution-completed-data")
	b.axe("execution (completed, with its data)")

	// The index value links to the list filtered by it.
	b.click("#exec-index a")
	b.until("the list filtered by the index", `location.pathname === "/ui/executions" && location.search.includes("o-1")`, 30*time.Second)
	if rows := eval[int](b, `document.querySelectorAll("#executions tbody tr[data-id]").length`); rows != 1 {
		t.Errorf("the list by order_id=o-1 has %d rows, want 1", rows)
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
