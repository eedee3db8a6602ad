package ui_test

import (
	"bufio"
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
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
	"plaita/test/webtest"
)

// The pages' live streams, bulk jobs, schedules' editing, dead letters' paging, users and API
// keys, the list's filters and the waiting panel's causes of a running or queued execution —
// over real HTTP, each through the API route the page names.

// stream opens a page's event stream and returns the first event's name and data, read while
// the stream is still open (a relay that buffered would hold it back until the stream ends).
func (c *uiClient) Stream(t *testing.T, path string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.F.URL+path, nil)
	res, err := c.HC.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s: %d %q %s", path, res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	sc := bufio.NewScanner(res.Body)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && name != "":
			return name, strings.TrimPrefix(line, "data: ")
		}
	}
	t.Fatalf("GET %s: the stream ended without an event: %v", path, sc.Err())
	return "", ""
}

// TestUIStreamsRelay: the pages' streams are the API's, in the page's tenant (its cookie, not
// a header the browser's EventSource cannot send), flushed as they come.
func TestUIStreamsRelay(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	f.Save(t, webtest.LiveState("acme", "ex_acme", 3, state.Suspended))
	c := uiUser(t, f, "ana", "acme", sqlite.RoleViewer)
	name, data := c.Stream(t, "/ui/executions/ex_acme/events?after=2")
	var snap struct {
		TenantID string `json:"tenant_id"`
		Status   string `json:"status"`
		After    int    `json:"after"`
		LastSeq  int    `json:"last_seq"`
	}
	if err := json.Unmarshal([]byte(data), &snap); name != "snapshot" || err != nil || snap.TenantID != "acme" || snap.Status != "suspended" ||
		snap.After != 2 || snap.LastSeq != 3 {
		t.Fatalf("first event %s %s", name, data)
	}
	if name, data = c.Stream(t, "/ui/executions/stream?status=running"); name != "ready" || !strings.Contains(data, `"tenant_id":"acme"`) {
		t.Fatalf("list stream: %s %s", name, data)
	}
	// Another tenant's execution is the API's 404, before any event.
	f.Save(t, webtest.LiveState("default", "ex_other", 1, state.Suspended))
	res, body := c.get(t, "/ui/executions/ex_other/events", http.StatusNotFound)
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") || !strings.Contains(body, "execution_not_found") {
		t.Fatalf("another tenant's stream: %q %s", res.Header.Get("Content-Type"), body)
	}
}

// TestUIBulkCancelByQuery: the list's "all matching" counts first (a dry run), then the
// confirmed job runs and its page shows the progress and the failure with its code.
func TestUIBulkCancelByQuery(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	for i, s := range []state.Status{state.Suspended, state.Running, state.Completed} {
		st := webtest.LiveState("default", "ex_b"+string(rune('1'+i)), 1, s)
		st.FlowID = "bulk"
		f.Save(t, st)
	}
	f.Save(t, webtest.LiveState("default", "ex_other", 1, state.Running))
	ed := uiUser(t, f, "ben", "default", sqlite.RoleEditor)
	_, body := ed.get(t, "/ui/executions?flow_id=bulk", http.StatusOK)
	mustHave(t, "the list", body, `id="bulk-form"`, `<input type="hidden" name="flow_id" value="bulk">`)
	_, body = ed.post(t, "/ui/jobs/preview", url.Values{"action": {"cancel"}, "flow_id": {"bulk"}}, true)
	// The completed one will be refused: the button counts the two a cancel acts on.
	mustHave(t, "the dry run", body, `data-count="3"`, "ex_b1", `id="job-confirm"`, "Cancel these 2<", `name="flow_id" value="bulk"`)
	apic := &webtest.Client{F: f, HC: ed.HC, CSRF: ed.CSRF}
	var jobs struct{ Items []json.RawMessage }
	if apic.Want(t, http.StatusOK, http.MethodGet, "/api/jobs", nil).Decode(t, &jobs); len(jobs.Items) != 0 {
		t.Fatalf("a dry run made a job: %d", len(jobs.Items))
	}
	res, _ := ed.post(t, "/ui/jobs", url.Values{"action": {"cancel"}, "flow_id": {"bulk"}}, true)
	to := res.Header.Get("HX-Redirect")
	if !strings.HasPrefix(to, "/ui/jobs/") {
		t.Fatalf("create: %d %q", res.StatusCode, to)
	}
	v := apic.WaitJob(t, strings.TrimPrefix(to, "/ui/jobs/"))
	if v.Job.Succeeded != 2 || v.Job.Failed != 1 {
		t.Fatalf("job %+v", v.Job)
	}
	_, body = ed.get(t, to, http.StatusOK)
	mustHave(t, "the job page", body, `data-status="completed"`, `id="job-partial"`, "1 of 3 item(s) failed", "ex_b3", "<code>terminal</code>")
	if strings.Contains(body, `hx-trigger="every 1s"`) || strings.Contains(body, `id="job-cancel"`) {
		t.Error("a finished job's page still polls or offers its cancel")
	}
	_, body = ed.get(t, to+"?items=all", http.StatusOK)
	mustHave(t, "every item", body, "ex_b1", "ex_b2", "ex_b3", "cancel_requested")
	_, body = ed.get(t, "/ui/jobs", http.StatusOK)
	mustHave(t, "the jobs", body, strings.TrimPrefix(to, "/ui/jobs/"), "cancel")
	// A viewer counts nothing: the API's access.
	viewer := uiUser(t, f, "vi", "default", sqlite.RoleViewer)
	_, body = viewer.post(t, "/ui/jobs/preview", url.Values{"action": {"cancel"}, "flow_id": {"bulk"}}, true)
	mustHave(t, "a viewer's dry run", body, `data-code="forbidden"`)
}

// TestUISchedulesEdit: an editor creates a schedule, edits its cron and input on its page
// (PATCH: audited as schedule.update), and deletes it; a bad cron is the API's refusal.
func TestUISchedulesEdit(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ed := uiUser(t, f, "sue", "default", sqlite.RoleEditor)
	res, _ := ed.post(t, "/ui/schedules", url.Values{"id": {"hourly"}, "cron": {"0 * * * *"}, "flow_id": {"report"}, "enabled": {"true"}}, true)
	if to := res.Header.Get("HX-Redirect"); to != "/ui/schedules/hourly?saved=created" {
		t.Fatalf("create: %d %q", res.StatusCode, to)
	}
	_, body := ed.get(t, "/ui/schedules/hourly?saved=created", http.StatusOK)
	mustHave(t, "the schedule", body, "Created.", `id="schedule-edit"`, `value="0 * * * *"`, `value="latest"`, `id="schedule-delete"`)
	_, body = ed.post(t, "/ui/schedules/hourly", url.Values{"cron": {"30 2 * * *"}, "time_zone": {"Europe/Paris"}, "flow_id": {"report"},
		"input": {`{"region": "eu"}`}, "enabled": {"true"}}, true)
	mustHave(t, "the save", body, `id="schedule-saved"`, "Saved: revision", "not published")
	// The cron reads as the times it fires: the ticks after the next one, in UTC and in the
	// schedule's zone.
	_, body = ed.get(t, "/ui/schedules/hourly", http.StatusOK)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.Plane.Schedule(context.Background(), "default", "hourly")
	if err != nil || rec.Next.IsZero() {
		t.Fatalf("the schedule: %+v %v", rec, err)
	}
	after := rec.Next.In(paris).AddDate(0, 0, 1) // 02:30 Paris the day after the next tick
	mustHave(t, "no fire yet", body, `id="schedule-no-fires"`)
	mustHave(t, "the ticks after the next", body, `id="schedule-then"`, after.UTC().Format("2006-01-02 15:04:05Z"), "("+after.Format("2006-01-02 15:04 MST")+")")
	if rec.Cron != "30 2 * * *" || rec.TimeZone != "Europe/Paris" || string(rec.Input) != `{"region":"eu"}` || !rec.Enabled {
		t.Fatalf("stored %+v %v", rec, err)
	}
	if row, ok := f.Audited(t, "schedule.update"); !ok || row.Actor != "sue" || row.Target != "hourly" {
		t.Fatalf("audit %+v", row)
	}
	_, body = ed.post(t, "/ui/schedules/hourly", url.Values{"cron": {"every minute"}, "flow_id": {"report"}}, true)
	mustHave(t, "a bad cron", body, `data-code="invalid_cron"`)
	viewer := uiUser(t, f, "vo", "default", sqlite.RoleViewer)
	_, body = viewer.get(t, "/ui/schedules/hourly", http.StatusOK)
	if strings.Contains(body, `id="schedule-edit"`) || strings.Contains(body, `id="schedule-delete"`) {
		t.Error("a viewer is offered the edit")
	}
	_, body = viewer.post(t, "/ui/schedules/hourly", url.Values{"cron": {"0 3 * * *"}, "flow_id": {"report"}}, true)
	mustHave(t, "a viewer's edit", body, `data-code="forbidden"`)
	res, _ = ed.post(t, "/ui/schedules/hourly/delete", url.Values{"confirm": {"yes"}}, true)
	if res.Header.Get("HX-Redirect") != "/ui/schedules" {
		t.Fatalf("delete: %d", res.StatusCode)
	}
	if _, err := f.Plane.Schedule(context.Background(), "default", "hourly"); err == nil {
		t.Fatal("the schedule is still there")
	}
}

// TestUIDeadLettersPagesAndReplay: dead letters a page at a time; the payload on demand; the
// replay button is an admin's (the route's access), and an editor's forged replay is refused.
func TestUIDeadLettersPagesAndReplay(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ids := f.DeadLetters(t, "default", "default", "default")["default"]
	ed := uiUser(t, f, "dee", "default", sqlite.RoleEditor)
	_, body := ed.get(t, "/ui/deadletters?limit=2", http.StatusOK)
	mustHave(t, "the first page", body, ids[2], ids[1], `id="next-page"`, `id="bulk-replay-form"`)
	if strings.Contains(body, ids[0]) || strings.Contains(body, "/replay") {
		t.Errorf("the first page of 2 has the oldest, or an editor a replay button")
	}
	next := regexp.MustCompile(`href="(/ui/deadletters\?[^"]+)" id="next-page"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatal("no next page link")
	}
	_, body = ed.get(t, strings.ReplaceAll(next[1], "&amp;", "&"), http.StatusOK)
	mustHave(t, "the second page", body, ids[0], `id="first-page"`)
	_, body = ed.get(t, "/ui/deadletters/"+ids[0], http.StatusOK)
	mustHave(t, "the payload", body, "<pre", "execution_id", "&#34;tenant_id&#34;: &#34;default&#34;")
	_, body = ed.post(t, "/ui/deadletters/"+ids[0]+"/replay", url.Values{"confirm": {"yes"}}, true)
	mustHave(t, "an editor's replay", body, `data-code="forbidden"`)

	boss := uiUser(t, f, "bo", "default", sqlite.RoleAdmin)
	_, body = boss.get(t, "/ui/deadletters", http.StatusOK)
	mustHave(t, "an admin's page", body, `hx-post="/ui/deadletters/`+ids[0]+`/replay"`)
	_, body = boss.post(t, "/ui/deadletters/"+ids[0]+"/replay", url.Values{"confirm": {"yes"}}, true)
	mustHave(t, "the replay", body, `class="notice"`, "replayed")
	if row, ok := f.Audited(t, "dlq.replay"); !ok || row.Actor != "bo" || row.Target != ids[0] {
		t.Fatalf("audit %+v", row)
	}
	// The list says which were replayed, as which task, and offers no second replay of them;
	// each names its flow.
	_, body = boss.get(t, "/ui/deadletters", http.StatusOK)
	mustHave(t, "the list after the replay", body, `data-replayed="`+ids[0]+`"`, `hx-post="/ui/deadletters/`+ids[1]+`/replay"`, `<a href="/ui/flows/f">f</a>`)
	if strings.Contains(body, `hx-post="/ui/deadletters/`+ids[0]+`/replay"`) || strings.Contains(body, `data-replayed="`+ids[1]+`"`) {
		t.Errorf("the replayed one is offered again, or the other marked: %s", body)
	}
	if !regexp.MustCompile(`replayed as <code>[0-9]+-[0-9]+</code>`).MatchString(body) {
		t.Errorf("no task id of the replay: %s", body)
	}
	_, body = ed.get(t, "/ui/deadletters", http.StatusOK)
	mustHave(t, "an editor sees the mark", body, `data-replayed="`+ids[0]+`"`)
}

// TestUIDeadLettersOfEveryTenant: a platform admin lists every tenant's dead letters (a tenant
// column), opens and replays another tenant's from there; a tenant admin is refused the view.
func TestUIDeadLettersOfEveryTenant(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	ids := f.DeadLetters(t, "default", "acme")
	u, err := f.DB.CreateUser(context.Background(), sqlite.NewUser{Login: "ops", Password: "password-ops", PlatformAdmin: true})
	if err != nil {
		t.Fatal(err)
	}
	ops := uiLogin(t, f, u.Login, "password-ops")
	_, body := ops.get(t, "/ui/deadletters", http.StatusOK)
	mustHave(t, "the tenant's own", body, ids["default"][0], `id="f-all"`)
	if strings.Contains(body, ids["acme"][0]) {
		t.Error("the default view lists another tenant's")
	}
	_, body = ops.get(t, "/ui/deadletters?all_tenants=true", http.StatusOK)
	mustHave(t, "every tenant's", body, "Dead letters of every tenant", ids["default"][0], ids["acme"][0], "<td>acme</td>",
		`hx-post="/ui/deadletters/`+ids["acme"][0]+`/replay?all_tenants=true"`, `id="bulk-refused"`)
	_, body = ops.get(t, "/ui/deadletters/"+ids["acme"][0]+"?all_tenants=true", http.StatusOK)
	mustHave(t, "another tenant's payload", body, "&#34;tenant_id&#34;: &#34;acme&#34;")
	_, body = ops.post(t, "/ui/deadletters/"+ids["acme"][0]+"/replay?all_tenants=true", url.Values{"confirm": {"yes"}}, true)
	mustHave(t, "another tenant's replay", body, `class="notice"`, "replayed")
	_, body = ops.get(t, "/ui/deadletters?all_tenants=true", http.StatusOK)
	mustHave(t, "marked", body, `data-replayed="`+ids["acme"][0]+`"`)

	admin := uiUser(t, f, "ta", "default", sqlite.RoleAdmin)
	_, body = admin.get(t, "/ui/deadletters?all_tenants=true", http.StatusForbidden)
	mustHave(t, "a tenant admin's every-tenant view", body, `data-code="forbidden"`)
	if strings.Contains(body, ids["acme"][0]) {
		t.Error("a tenant admin saw another tenant's dead letter")
	}
}

// TestUIListFilters: the due-time and start-time filters are the API's.
func TestUIListFilters(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	now := time.Now().UTC()
	in1h, in5h := now.Add(time.Hour), now.Add(5*time.Hour)
	for id, due := range map[string]time.Time{"ex_soon": in1h, "ex_late": in5h} {
		st := webtest.LiveState("default", id, 1, state.Suspended)
		st.Suspend = &state.Suspend{Kind: state.SuspendDelay, Node: "ask", Since: now, Due: &due}
		f.Save(t, st)
	}
	c := uiUser(t, f, "lu", "default", sqlite.RoleViewer)
	_, body := c.get(t, "/ui/executions?wake_before="+url.QueryEscape(now.Add(2*time.Hour).Format("2006-01-02T15:04")), http.StatusOK)
	if !strings.Contains(body, `data-id="ex_soon"`) || strings.Contains(body, `data-id="ex_late"`) {
		t.Errorf("sleeping until before +2h: %s", body)
	}
	_, body = c.get(t, "/ui/executions?started_after=2020-01-01T00:00&status=suspended", http.StatusOK)
	mustHave(t, "the start-time filter", body, `data-id="ex_soon"`, `data-id="ex_late"`)
	_, body = c.get(t, "/ui/executions?started_after="+url.QueryEscape(now.Add(time.Hour).Format("2006-01-02T15:04"))+"&status=suspended", http.StatusOK)
	if strings.Contains(body, `data-id="ex_soon"`) || strings.Contains(body, `data-id="ex_late"`) {
		t.Errorf("started after +1h: %s", body)
	}
	_, body = c.get(t, "/ui/executions?wake_after=soon", http.StatusOK)
	mustHave(t, "a time that is none", body, `data-code="invalid_time"`)
	// The executions an event woke: the events page links them, the list filters by it.
	woken := webtest.LiveState("default", "ex_woken", 1, state.Completed)
	woken.Timeline = append(woken.Timeline, state.TimelineEntry{Seq: 2, Time: state.Stamp(now), Node: "ask", Event: "resumed", Detail: "event evt-7"})
	f.Save(t, woken)
	_, body = c.get(t, "/ui/executions?woken_by=evt-7", http.StatusOK)
	mustHave(t, "woken by evt-7", body, `data-id="ex_woken"`, `id="f-woken" name="woken_by" value="evt-7"`)
	if strings.Contains(body, `data-id="ex_soon"`) {
		t.Error("an execution the event did not wake is listed")
	}
	// The total on demand: a link, then the count above the rows (not asked again by the live
	// refresh).
	_, body = c.get(t, "/ui/executions?status=suspended", http.StatusOK)
	mustHave(t, "the count link", body, `href="/ui/executions?count=true&amp;limit=50&amp;status=suspended" id="count-all"`)
	_, body = c.get(t, "/ui/executions?status=suspended&count=true", http.StatusOK)
	mustHave(t, "the total", body, `<p id="total"><strong>2</strong> execution(s) match.</p>`, `data-refresh="/ui/executions?limit=50&amp;status=suspended&amp;fragment=rows"`)
	if strings.Contains(body, `id="count-all"`) {
		t.Error("a counted list offers its count again")
	}
	// Sorted by wake time: the soonest first, and the live refresh reads the rows in that order.
	_, body = c.get(t, "/ui/executions?status=suspended&sort=wake", http.StatusOK)
	mustHave(t, "the wake order", body, `<option value="wake" selected>`, `data-refresh="/ui/executions?limit=50&amp;sort=wake&amp;status=suspended&amp;fragment=rows"`)
	if i, j := strings.Index(body, `data-id="ex_soon"`), strings.Index(body, `data-id="ex_late"`); i < 0 || j < i {
		t.Errorf("by wake: ex_soon at %d, ex_late at %d", i, j)
	}
	// The first page follows the status stream; the next pages do not.
	_, body = c.get(t, "/ui/executions?status=suspended", http.StatusOK)
	mustHave(t, "the live list", body, `data-follow="/ui/executions/stream?status=suspended"`, `data-refresh="/ui/executions?limit=50&amp;status=suspended&amp;fragment=rows"`)
	_, body = c.get(t, "/ui/executions?limit=50&status=suspended&fragment=rows", http.StatusOK)
	if !strings.HasPrefix(strings.TrimSpace(body), `<div class="panel" id="list"`) {
		t.Errorf("the rows' fragment: %.200s", body)
	}
}

// TestUIUsersAndAPIKeys: a platform admin creates a user and resets their password; a tenant
// admin creates an API key (shown once) and revokes it; neither page is another role's.
func TestUIUsersAndAPIKeys(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Admin("").Want(t, http.StatusCreated, http.MethodPost, "/api/users", map[string]any{"login": "root", "password": "root-password", "platform_admin": true})
	root := uiLogin(t, f, "root", "root-password")
	res, _ := root.post(t, "/ui/users", url.Values{"login": {"nina"}, "password": {"nina-password"}}, true)
	if res.Header.Get("HX-Redirect") != "/ui/users" {
		t.Fatalf("create user: %d", res.StatusCode)
	}
	_, body := root.get(t, "/ui/users", http.StatusOK)
	mustHave(t, "the users", body, `id="user-nina"`, "Set the password")
	u, err := f.DB.UserByLogin(context.Background(), "nina")
	if err != nil {
		t.Fatal(err)
	}
	res, _ = root.post(t, "/ui/users/"+u.ID, url.Values{"change": {"password"}, "password": {"another-password"}}, true)
	if res.Header.Get("HX-Redirect") != "/ui/users" {
		t.Fatalf("password: %d", res.StatusCode)
	}
	if _, err := f.DB.SetMembership(context.Background(), u.ID, "default", sqlite.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	nina := uiLogin(t, f, "nina", "another-password")
	nina.get(t, "/ui/users", http.StatusForbidden)
	_, body = nina.post(t, "/ui/apikeys", url.Values{"name": {"ci"}, "role": {"editor"}}, true)
	key := regexp.MustCompile(`id="new-key" readonly value="(plk_[^"]+)"`).FindStringSubmatch(body)
	if key == nil {
		t.Fatalf("no key shown: %s", body)
	}
	(&webtest.Client{F: f, Headers: map[string]string{"Authorization": "Bearer " + key[1]}, HC: http.DefaultClient}).Want(t, http.StatusOK, http.MethodGet, "/api/flows", nil)
	_, body = nina.get(t, "/ui/apikeys", http.StatusOK)
	if strings.Contains(body, key[1]) {
		t.Error("the list shows the key again")
	}
	id := regexp.MustCompile(`hx-post="/ui/apikeys/([^/"]+)/revoke"`).FindStringSubmatch(body)
	if id == nil {
		t.Fatal("no revoke button")
	}
	nina.post(t, "/ui/apikeys/"+id[1]+"/revoke", nil, true)
	(&webtest.Client{F: f, Headers: map[string]string{"Authorization": "Bearer " + key[1]}, HC: http.DefaultClient}).Want(t, http.StatusUnauthorized, http.MethodGet, "/api/flows", nil)
}

// newJarClient is a browser without JavaScript: a cookie jar, no redirects followed.
func newJarClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// uiLogin logs an existing user in through the login page.
func uiLogin(t *testing.T, f *webtest.Fixture, login, password string) *uiClient {
	t.Helper()
	c := &uiClient{F: f, HC: newJarClient()}
	if res, _ := c.logIn(t, login, password); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login %s: %d", login, res.StatusCode)
	}
	_, body := c.get(t, "/ui/executions", http.StatusOK)
	m := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token")
	}
	c.CSRF = m[1]
	return c
}

// TestUIWaitingPanelRunningAndQueued: the panel of a node in its retry back-off (attempt n of
// m, when it tries again, its error) with its timer, and of a queued start held by the
// tenant's running quota, or by a config family no live worker runs.
func TestUIWaitingPanelRunningAndQueued(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	admin := f.Admin("")
	def := `{"id":"flaky","version":"1","start":"a","nodes":[{"id":"a","type":"log","params":{"message":"x"},"retry":{"max_attempts":3,"backoff_seconds":600},"next":"b"},{"id":"b","type":"end"}]}`
	admin.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)})
	now := time.Now().UTC()
	st := webtest.LiveState("default", "ex_retry", 0, state.Running)
	st.FlowID, st.CurrentNode, st.NodeAttempts, st.Context = "flaky", "a", map[string]int{"a": 1}, map[string]any{}
	st.Timeline = []state.TimelineEntry{{Seq: 1, Time: state.Stamp(now), Event: "retry", Node: "a", Detail: "attempt 1 of 3 failed: connection refused; next in 10m0s"}}
	f.Save(t, st)
	c := uiUser(t, f, "wes", "default", sqlite.RoleViewer)
	_, body := c.get(t, "/ui/executions/ex_retry", http.StatusOK)
	mustHave(t, "the retry", body, `data-kind="retry"`, "a retry back-off: attempt 1 of 3 of node a failed", "It tries again", `id="waiting-detail"`,
		"connection refused", `id="timers"`, `data-kind="retry_backoff"`, "attempt 2 of 3 of the node starts", "no worker is alive")
	// Who acted on it is the audit trail's, which an admin reads: the page links its rows.
	if strings.Contains(body, `id="who-acted"`) {
		t.Error("a viewer is sent to the audit trail")
	}
	_, adminPage := uiUser(t, f, "wad", "default", sqlite.RoleAdmin).get(t, "/ui/executions/ex_retry", http.StatusOK)
	mustHave(t, "an admin's link to who acted", adminPage, `id="who-acted"`, `href="/ui/audit?target=ex_retry"`)
	// The list's next wake of a node in its back-off is its next attempt (it read "—").
	_, body = c.get(t, "/ui/executions?status=running", http.StatusOK)
	next := now.Add(10 * time.Minute)
	mustHave(t, "the list's next wake", body, `data-id="ex_retry"`, `<span data-retry>retry: <time datetime="`+next.Format(time.RFC3339))

	// A queued start of a tenant at its limit, deferred once by a worker.
	ctx := context.Background()
	if err := f.C.Do(ctx, f.C.B().Hset().Key(keys.MustFor(f.Root, "").TenantQuota()).FieldValue().FieldValue("default", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Redis.AdmitRunning(ctx, store.RunningAdmit{Tenant: "default", ExecutionID: "ex_retry", Now: now, TTL: time.Hour, Limit: 0}); err != nil {
		t.Fatal(err)
	}
	id := engine.NewExecutionID()
	p := queue.NewProducer(queue.Redis(f.C), f.Root+":flow:queue", queue.Generations{Family: "cf1-aaaaaaaaaaaa"}, 1<<20, nil)
	if _, err := p.Enqueue(ctx, queue.Envelope{Kind: queue.KindStart, TenantID: "default", FlowID: "flaky", FlowVersion: "1", ExecutionID: id,
		Input: json.RawMessage(`{}`), QuotaDeferCount: 1}); err != nil {
		t.Fatal(err)
	}
	register := func(inst, family string) {
		rec := store.InstanceRecord{InstanceID: inst, Role: "worker", Status: "running", HeartbeatAt: time.Now(), TTLMillis: 30000, ConfigFamily: family}
		if err := store.NewRegistry(store.OnRedis(f.C), f.Root).Register(ctx, rec, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	register("w-a", "cf1-aaaaaaaaaaaa")
	_, body = c.get(t, "/ui/executions/"+id, http.StatusOK)
	mustHave(t, "over quota", body, `data-kind="quota"`, "tenant default is over its running quota: 1 running, limit 1", "deferred this start 1 time(s)")
	if err := store.NewRegistry(store.OnRedis(f.C), f.Root).Deregister(ctx, "w-a"); err != nil {
		t.Fatal(err)
	}
	register("w-b", "cf1-bbbbbbbbbbbb")
	_, body = c.get(t, "/ui/executions/"+id, http.StatusOK)
	mustHave(t, "a family mismatch", body, `data-kind="family_mismatch"`, "a config-family mismatch holds its start pending", "cf1-bbbbbbbbbbbb")
}

// TestUILargeResultAndOlderEntries: a result above what the page lays out is shown in part
// with a download of the whole; older timeline entries come from the paged timeline.
func TestUILargeResultAndOlderEntries(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	admin := f.Admin("")
	def := `{"id":"big","version":"1","start":"a","nodes":[{"id":"a","type":"log","params":{"message":"x"},"next":"b"},{"id":"b","type":"end"}]}`
	admin.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)})
	st := webtest.LiveState("default", "ex_big", 120, state.Completed)
	st.FlowID, st.CurrentNode = "big", "b"
	st.TimelineDropped = 30
	st.Timeline = st.Timeline[30:]
	big := strings.Repeat("y", 600<<10) + "TAIL"
	st.Context = map[string]any{state.ContextNodes: map[string]any{"a": map[string]any{"blob": big}}}
	f.Save(t, st)
	c := uiUser(t, f, "lo", "default", sqlite.RoleViewer)
	_, body := c.get(t, "/ui/executions/ex_big", http.StatusOK)
	if len(body) > 200<<10 {
		t.Errorf("the page holds %d bytes: not a preview", len(body))
	}
	mustHave(t, "the page", body, "Show all 614415 bytes", `hx-get="/ui/executions/ex_big/timeline?before=71"`)
	_, body = c.get(t, "/ui/executions/ex_big/result?node=a", http.StatusOK)
	mustHave(t, "a large result", body, `id="result-cut-a"`, "download=1")
	if strings.Contains(body, "TAIL") {
		t.Error("the page holds the whole large result")
	}
	res, whole := c.get(t, "/ui/executions/ex_big/result?node=a&download=1", http.StatusOK)
	if res.Header.Get("Content-Type") != "application/json" || !strings.HasSuffix(whole, `TAIL"}`) ||
		!strings.Contains(res.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("the download: %q %q %d bytes", res.Header.Get("Content-Type"), res.Header.Get("Content-Disposition"), len(whole))
	}
	_, body = c.get(t, "/ui/executions/ex_big/timeline?before=71", http.StatusOK)
	rows := regexp.MustCompile(`<tr><td class="num">(\d+)</td>`).FindAllStringSubmatch(body, -1)
	if len(rows) != 40 || rows[0][1] != "70" || rows[39][1] != "31" || strings.Contains(body, "Older entries") {
		t.Fatalf("the last page: %d rows (%v … %v)", len(rows), rows[0], rows[len(rows)-1])
	}
	_, body = c.get(t, "/ui/executions/ex_big/timeline?before=110", http.StatusOK)
	if rows = regexp.MustCompile(`<tr><td class="num">(\d+)</td>`).FindAllStringSubmatch(body, -1); len(rows) != 50 || rows[0][1] != "109" ||
		!strings.Contains(body, `before=60"`) {
		t.Fatalf("a middle page: %d rows from %v", len(rows), rows[0])
	}
}
