package ui_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// A bulk job started from a list page selects exactly what that page lists: its form carries
// every filter of the page's own query (status, flow, start and due times, indexed fields; a
// dead letter's reason, kind and flow), and a filter a job cannot express is refused by name —
// never dropped, which would act on more than the list shows.

// formFields are the hidden fields of the form whose opening tag has marker (without the CSRF
// token: the client adds its own).
func formFields(t *testing.T, body, marker string) url.Values {
	t.Helper()
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("no form %s in %s", marker, body)
	}
	start := strings.LastIndex(body[:i], "<form")
	end := strings.Index(body[i:], "</form>")
	if start < 0 || end < 0 {
		t.Fatalf("form %s is not closed", marker)
	}
	out := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(body[start:i+end], -1) {
		if name := html.UnescapeString(m[1]); name != "csrf" {
			out.Add(name, html.UnescapeString(m[2]))
		}
	}
	return out
}

// bulkFromPage counts from the list page's own bulk form, confirms the count the preview shows
// and waits for the cancel job it creates: the items it applied, sorted.
func bulkFromPage(t *testing.T, ed *uiClient, page string, want int) []string {
	t.Helper()
	_, body := ed.get(t, page, http.StatusOK)
	form := formFields(t, body, `id="bulk-form"`)
	form.Set("action", "cancel")
	_, body = ed.post(t, "/ui/jobs/preview", form, true)
	mustHave(t, "the preview of "+page, body, fmt.Sprintf(`data-count="%d"`, want), fmt.Sprintf("Cancel these %d<", want))
	if strings.Contains(body, `data-count=`) && !strings.Contains(body, fmt.Sprintf(`data-count="%d"`, want)) {
		t.Fatalf("the preview of %s counts what the list does not show: %s", page, body)
	}
	res, _ := ed.post(t, "/ui/jobs", formFields(t, body, `hx-post="/ui/jobs"`), true)
	to := res.Header.Get("HX-Redirect")
	if !strings.HasPrefix(to, "/ui/jobs/") {
		t.Fatalf("create from %s: %d %q", page, res.StatusCode, to)
	}
	apic := &webtest.Client{F: ed.F, HC: ed.HC, CSRF: ed.CSRF}
	id := strings.TrimPrefix(to, "/ui/jobs/")
	v := apic.WaitJob(t, id)
	if v.Job.Total != want || v.Job.Succeeded != want {
		t.Fatalf("job from %s: %+v", page, v.Job)
	}
	var items struct{ Items []sqlite.JobItem }
	apic.Want(t, http.StatusOK, http.MethodGet, "/api/jobs/"+id+"/items?limit=500", nil).Decode(t, &items)
	var ids []string
	for _, it := range items.Items {
		ids = append(ids, it.Item)
	}
	slices.Sort(ids)
	return ids
}

// wantCancelled wants exactly the executions in cancelled to have the cancel flag up, and every
// execution to keep the status it had.
func wantCancelled(t *testing.T, f *webtest.Fixture, all map[string]state.Status, cancelled []string) {
	t.Helper()
	ts, err := f.Redis.Tenant("default")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for id, was := range all {
		up, err := ts.Cancelled(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if up != slices.Contains(cancelled, id) {
			t.Errorf("%s: cancel flag %v, want %v", id, up, !up)
		}
		st, err := ts.Load(ctx, id)
		if err != nil || st.Status != was {
			t.Errorf("%s: %v %v, want it %s", id, st.Status, err, was)
		}
	}
}

// TestBulkCancelFromListByWakeTime: the list of executions sleeping until a time window shows
// 12 of many; "all matching" from that page counts those 12, and its job cancels those 12 and
// touches no other.
func TestBulkCancelFromListByWakeTime(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	now := time.Now().UTC().Truncate(time.Minute)
	from, to := now.Add(time.Hour), now.Add(3*time.Hour)
	all := map[string]state.Status{}
	var window []string
	add := func(id string, status state.Status, due *time.Time) {
		st := webtest.LiveState("default", id, 1, status)
		if status == state.Suspended {
			st.Suspend = &state.Suspend{Kind: state.SuspendDelay, Node: "ask", Since: now, Due: due}
			if due == nil {
				st.Suspend.Kind = state.SuspendApproval
			}
		}
		f.Save(t, st)
		all[id] = status
	}
	for i := range 12 {
		due := from.Add(time.Duration(i) * 10 * time.Minute)
		id := fmt.Sprintf("ex_in%02d", i)
		add(id, state.Suspended, &due)
		window = append(window, id)
	}
	for i := range 20 {
		early, late := from.Add(-time.Duration(i+1)*time.Minute), to.Add(time.Duration(i)*time.Minute) // late: at to and after
		add(fmt.Sprintf("ex_early%02d", i), state.Suspended, &early)
		add(fmt.Sprintf("ex_late%02d", i), state.Suspended, &late)
		add(fmt.Sprintf("ex_run%02d", i), state.Running, nil)
		add(fmt.Sprintf("ex_ask%02d", i), state.Suspended, nil)
	}
	slices.Sort(window)

	viewer := f.Key(f.APIKey(t, "default", sqlite.RoleViewer))
	q := url.Values{"wake_after": {from.Format(time.RFC3339)}, "wake_before": {to.Format(time.RFC3339)}, "limit": {"7"}}
	if got := webtest.ListedIDs(t, viewer, q); !slices.Equal(got, window) {
		t.Fatalf("the API's list sleeping until [%s, %s): %v, want %v", from, to, got, window)
	}
	ed := uiUser(t, f, "wen", "default", sqlite.RoleEditor)
	page := "/ui/executions?wake_after=" + url.QueryEscape(from.Format("2006-01-02T15:04")) + "&wake_before=" + url.QueryEscape(to.Format("2006-01-02T15:04"))
	_, body := ed.get(t, page, http.StatusOK)
	if strings.Contains(body, "not part of a bulk selection") {
		t.Error("the page still says its filter is not part of the selection")
	}
	got := bulkFromPage(t, ed, page, len(window))
	if !slices.Equal(got, window) {
		t.Fatalf("the job applied %v, want %v", got, window)
	}
	wantCancelled(t, f, all, window)

	// The API's own filter is the list's: a dry run with the same times counts the same.
	editor := f.Key(f.APIKey(t, "default", sqlite.RoleEditor))
	var dry api.JobCreated
	r := editor.Want(t, http.StatusOK, http.MethodPost, "/api/jobs", map[string]any{"action": "cancel", "dry_run": true,
		"filter": map[string]any{"wake_after": from.Format(time.RFC3339), "wake_before": to.Format(time.RFC3339)}})
	r.Decode(t, &dry)
	if dry.Selection.Count != len(window) || !strings.Contains(string(r.Raw), `"wake_before":"`+to.Format(time.RFC3339)) {
		t.Fatalf("the API's dry run by due time: %s", r.Raw)
	}
}

// TestBulkCancelFromListByIndex: the list of one order's executions (index[order_id]) and the
// job started from it are the same executions.
func TestBulkCancelFromListByIndex(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	flow, err := engine.Parse([]byte(`{"id": "shop", "start": "done", "index": ["order_id"], "nodes": [{"id": "done", "type": "end"}]}`),
		engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]state.Status{}
	var mine []string
	base := time.Now().UTC().Add(-time.Hour)
	for i := range 30 {
		order := []string{"ord-1", "ord-2", "ord-3"}[i%3]
		id := fmt.Sprintf("ex_%s_%02d", order, i)
		st, err := engine.NewState(flow, engine.StartRequest{ExecutionID: id, TenantID: "default", Input: map[string]any{"order_id": order}},
			base.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		st.Status = state.Running
		f.Save(t, st)
		all[id] = state.Running
		if order == "ord-2" {
			mine = append(mine, id)
		}
	}
	f.Save(t, webtest.LiveState("default", "ex_unindexed", 1, state.Running))
	all["ex_unindexed"] = state.Running
	slices.Sort(mine)

	viewer := f.Key(f.APIKey(t, "default", sqlite.RoleViewer))
	if got := webtest.ListedIDs(t, viewer, url.Values{"index[order_id]": {"ord-2"}, "limit": {"4"}}); !slices.Equal(got, mine) {
		t.Fatalf("the API's list of order ord-2: %v, want %v", got, mine)
	}
	ed := uiUser(t, f, "ida", "default", sqlite.RoleEditor)
	page := "/ui/executions?" + url.Values{"index[order_id]": {"ord-2"}}.Encode()
	_, body := ed.get(t, page, http.StatusOK)
	for id := range all {
		if listed := strings.Contains(body, `data-id="`+id+`"`); listed != slices.Contains(mine, id) {
			t.Errorf("the page of order ord-2 lists %s: %v", id, listed)
		}
	}
	// The second page keeps the filter, and so does its link to the first.
	_, body = ed.get(t, page+"&limit=4", http.StatusOK)
	next := regexp.MustCompile(`href="(/ui/executions\?[^"]+)" id="next-page"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatal("no next page")
	}
	_, body = ed.get(t, html.UnescapeString(next[1]), http.StatusOK)
	if n := strings.Count(body, `data-id="ex_ord-2_`); n != 4 || strings.Contains(body, `data-id="ex_ord-1_`) {
		t.Errorf("the second page of order ord-2 lists %d of it: %s", n, body)
	}
	mustHave(t, "the second page", body, `href="/ui/executions?index%5Border_id%5D=ord-2&amp;limit=4" id="first-page"`)

	// The form's own spelling (index=field=value) is the same filter.
	_, body = ed.get(t, "/ui/executions?index="+url.QueryEscape("order_id=ord-2"), http.StatusOK)
	if form := formFields(t, body, `id="bulk-form"`); form.Get("index[order_id]") != "ord-2" || len(form) != 1 {
		t.Errorf("the bulk form of index=order_id=ord-2 carries %v", form)
	}
	mustHave(t, "the filter form", body, `name="index[order_id]" value="ord-2"`)
	if got := bulkFromPage(t, ed, page, len(mine)); !slices.Equal(got, mine) {
		t.Fatalf("the job applied %v, want %v", got, mine)
	}
	wantCancelled(t, f, all, mine)
}

// TestBulkRefusesAFilterItCannotExpress: a filter the selection cannot honour is refused by
// name — by the UI's preview and by POST /api/jobs — and nothing is counted without it.
func TestBulkRefusesAFilterItCannotExpress(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Save(t, webtest.LiveState("default", "ex_1", 1, state.Running))
	ed := uiUser(t, f, "rex", "default", sqlite.RoleEditor)
	boss := uiUser(t, f, "bea", "default", sqlite.RoleAdmin)
	soon := time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04")
	for _, c := range []struct {
		who    *uiClient
		form   url.Values
		naming string
	}{
		// The dead-letters list's all_tenants: a job acts in one tenant.
		{ed, url.Values{"action": {"cancel"}, "all_tenants": {"true"}}, "all_tenants"},
		// A filter of the executions list on a replay of dead letters.
		{boss, url.Values{"action": {"replay"}, "wake_before": {soon}}, "wake_before"},
		{boss, url.Values{"action": {"replay"}, "index[order_id]": {"ord-1"}}, "index"},
		{ed, url.Values{"action": {"cancel"}, "colour": {"red"}}, "colour"},
	} {
		_, body := c.who.post(t, "/ui/jobs/preview", c.form, true)
		if !strings.Contains(body, `data-code="`) || strings.Contains(body, `data-count=`) || !strings.Contains(body, c.naming) {
			t.Errorf("preview of %v: not refused naming %s: %s", c.form, c.naming, body)
		}
		res, _ := c.who.post(t, "/ui/jobs", c.form, true)
		if res.Header.Get("HX-Redirect") != "" {
			t.Errorf("a job was created from %v", c.form)
		}
	}
	// A filter the list left out (it does not parse): the rows are not what was asked for, and
	// no bulk action is offered on them.
	for _, page := range []string{"/ui/executions?wake_before=soon", "/ui/executions?index=order_id"} {
		_, body := ed.get(t, page, http.StatusOK)
		if !strings.Contains(body, `id="bulk-refused"`) || strings.Contains(body, `id="bulk-form"`) {
			t.Errorf("%s offers all matching: %s", page, body)
		}
	}
}

// TestBulkReplayFromDeadLettersList: the dead-letters page filtered by reason and flow lists
// what its replay counts and replays.
func TestBulkReplayFromDeadLettersList(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	for i := range 9 {
		f.DeadLetter(t, []string{"shop", "mail"}[i%2], []string{"poison", "max_deliveries", "poison"}[i%3])
	}
	// poison: i = 0, 2, 3, 5, 6, 8; of them flow shop (even i): 0, 2, 6, 8.
	boss := uiUser(t, f, "dora", "default", sqlite.RoleAdmin)
	var listed control.DeadLetterPage
	apic := &webtest.Client{F: f, HC: boss.HC, CSRF: boss.CSRF}
	apic.Want(t, http.StatusOK, http.MethodGet, "/api/dead-letters?reason=poison&flow_id=shop&limit=1000", nil).Decode(t, &listed)
	if len(listed.Items) != 4 {
		t.Fatalf("the API's list of poison dead letters of shop: %+v", listed.Items)
	}
	page := "/ui/deadletters?reason=poison&flow_id=shop"
	_, body := boss.get(t, page, http.StatusOK)
	if n := strings.Count(body, `/replay"`); n != 4 {
		t.Errorf("the page lists %d dead letters, want 4", n)
	}
	form := formFields(t, body, `id="bulk-replay-form"`)
	if form.Get("reason") != "poison" || form.Get("flow_id") != "shop" {
		t.Fatalf("the replay form does not carry the list's filter: %v", form)
	}
	_, body = boss.post(t, "/ui/jobs/preview", form, true)
	mustHave(t, "the replay's preview", body, `data-count="4"`, "Replay these 4<")

	// The pages of the filtered list keep its filter, both ways.
	_, body = boss.get(t, page+"&limit=3", http.StatusOK)
	next := regexp.MustCompile(`href="(/ui/deadletters\?[^"]+)" id="next-page"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatal("no next page")
	}
	_, body = boss.get(t, html.UnescapeString(next[1]), http.StatusOK)
	if n := strings.Count(body, `/replay"`); n != 1 {
		t.Errorf("the second page of 3 lists %d, want 1", n)
	}
	mustHave(t, "the second page", body, `href="/ui/deadletters?flow_id=shop&amp;reason=poison" id="first-page"`)
}
