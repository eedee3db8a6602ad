package ui_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
	"plaita/test/webtest"
)

// The bulk preview splits its count into what the job will do: "7 match" with a "Retry these
// 7" that the job then refused 7 times was the defect. The button counts the items the action
// will apply to, and there is nothing to confirm when there are none.

// pageText is a page's text: its tags dropped, its spaces collapsed.
func pageText(body string) string {
	return strings.Join(strings.Fields(html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(body, ""))), " ")
}

func TestUIBulkPreviewForecast(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ctx := context.Background()
	def, err := engine.Parse([]byte(webtest.ApprovalFlow), engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Plane.PublishFlow(ctx, "default", []byte(webtest.ApprovalFlow), ""); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		id     string
		status state.Status
	}{
		{"ex_e1", state.Error}, {"ex_e2", state.Error}, {"ex_spent", state.Error}, // retried, retried, retry_budget
		{"ex_r1", state.Running}, {"ex_r2", state.Running}, {"ex_s1", state.Suspended}, // resume_refused
		{"ex_c1", state.Completed}, // terminal
	} {
		st := webtest.LiveState("default", c.id, 1, c.status)
		st.StartTime = st.StartTime.Add(time.Duration(i) * time.Second)
		st.FlowHash, st.FlowHashAlgo, st.Context = def.Hash, def.HashAlgo, map[string]any{}
		switch c.status {
		case state.Error:
			st.Error = &state.ErrorInfo{Type: engine.ErrTypeNode, Node: "ask", Message: "boom"}
		case state.Suspended:
			st.Suspend = &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: st.StartTime}
		}
		f.Save(t, st)
	}
	ts, err := f.Redis.Tenant("default")
	if err != nil {
		t.Fatal(err)
	}
	for range store.G1MaxWakeups {
		if _, err := ts.Incr(ctx, keys.FamG1Wakeups, "ex_spent"); err != nil {
			t.Fatal(err)
		}
	}
	ed := uiUser(t, f, "fay", "default", sqlite.RoleEditor)

	_, body := ed.post(t, "/ui/jobs/preview", url.Values{"action": {"retry"}, "flow_id": {"ask"}}, true)
	mustHave(t, "the retry's preview", body, `data-count="7"`, `data-will-apply="2"`, `data-refused="5"`, `id="job-confirm"`, "Retry these 2<")
	if got, want := pageText(body), "7 execution(s) of tenant default match: 2 will be retried, 5 will be refused (resume_refused: 3, retry_budget: 1, terminal: 1)."; !strings.Contains(got, want) {
		t.Errorf("the retry's preview says %q, want %q", got, want)
	}
	mustHave(t, "the retry's preview", pageText(body), "The job goes through all 7")
	// The confirmation runs the job over the selection: the two retried, the five refused with
	// the codes the preview gave, and its badge is not a success's.
	res, _ := ed.post(t, "/ui/jobs", formFields(t, body, `hx-post="/ui/jobs"`), true)
	to := res.Header.Get("HX-Redirect")
	if !strings.HasPrefix(to, "/ui/jobs/") {
		t.Fatalf("create: %d %q", res.StatusCode, to)
	}
	apic := &webtest.Client{F: f, HC: ed.HC, CSRF: ed.CSRF}
	if v := apic.WaitJob(t, strings.TrimPrefix(to, "/ui/jobs/")); v.Job.Total != 7 || v.Job.Succeeded != 2 || v.Job.Failed != 5 {
		t.Fatalf("the job: %+v", v.Job)
	}
	_, body = ed.get(t, to, http.StatusOK)
	mustHave(t, "the job's page", body, `data-outcome="some-failed"`, "completed: 5 failed")

	// None will apply: nothing to confirm.
	_, body = ed.post(t, "/ui/jobs/preview", url.Values{"action": {"retry"}, "status": {"running"}}, true)
	mustHave(t, "a preview none of which applies", body, `data-count="2"`, `data-will-apply="0"`, `id="job-nothing"`)
	mustHave(t, "a preview none of which applies", pageText(body), "2 execution(s) of tenant default match: none will be retried, 2 will be refused (resume_refused: 2).",
		"Nothing to confirm: none of them will be retried.")
	if strings.Contains(body, `id="job-confirm"`) || strings.Contains(body, `hx-post="/ui/jobs"`) {
		t.Error("a preview none of which applies offers to confirm")
	}
	// A job of them anyway (the API takes it): every item failed, and it does not look green.
	r := apic.Want(t, http.StatusCreated, http.MethodPost, "/api/jobs", map[string]any{"action": "retry", "filter": map[string]any{"status": "running"}})
	id := fmt.Sprint(r.Body["job"].(map[string]any)["id"])
	apic.WaitJob(t, id)
	for _, page := range []string{"/ui/jobs/" + id, "/ui/jobs"} {
		_, body = ed.get(t, page, http.StatusOK)
		mustHave(t, page, body, `data-outcome="all-failed"`, "every item failed")
	}

	// A cancel: the one cancelled already is nothing to do, the finished ones are refused.
	f.Save(t, webtest.LiveState("default", "ex_x1", 1, state.Cancelled))
	_, body = ed.post(t, "/ui/jobs/preview", url.Values{"action": {"cancel"}, "status": {"cancelled"}}, true)
	mustHave(t, "a cancel's preview", pageText(body), "1 execution(s) of tenant default match: none will be cancelled, 1 already cancelled (nothing to do).",
		"Nothing to confirm")
	_, body = ed.post(t, "/ui/jobs/preview", url.Values{"action": {"cancel"}}, true)
	mustHave(t, "a cancel's preview", body, `data-count="8"`, "Cancel these 3<")
}
