package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// TestExecutionListByTimeAndIndex: GET /api/executions over real HTTP with started_after,
// started_before and index[<field>] (docs/console.md): the filters intersect, pages carry a
// cursor, a tenant sees its own executions only, and every bad parameter is a 400 that names
// it; the OpenAPI document describes the index parameter.
func TestExecutionListByTimeAndIndex(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	flow, err := engine.Parse([]byte(`{"id": "shop", "start": "done", "index": ["order_id", "n"], "nodes": [{"id": "done", "type": "end"}]}`),
		engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	start := func(tenant, id, input string, at time.Time) {
		var in any
		if err := json.Unmarshal([]byte(input), &in); err != nil {
			t.Fatal(err)
		}
		st, err := engine.NewState(flow, engine.StartRequest{ExecutionID: id, TenantID: tenant, Input: in}, at)
		if err != nil {
			t.Fatal(err)
		}
		f.Save(t, st)
	}
	start("default", "ex_a", `{"order_id": "ord-1", "n": 1}`, base)
	start("default", "ex_b", `{"order_id": "ord-1", "n": 1.0}`, base.Add(time.Minute))
	start("default", "ex_c", `{"order_id": "ord-1", "n": "1"}`, base.Add(2*time.Minute))
	start("default", "ex_d", `{"order_id": "ord-2", "n": 1}`, base.Add(3*time.Minute))
	start("default", "ex_e", `{"order_id": {"id": "ord-1"}}`, base.Add(4*time.Minute)) // an object: not indexed
	start("acme", "ex_x", `{"order_id": "ord-1", "n": 1}`, base)

	viewer := f.Key(f.APIKey(t, "default", sqlite.RoleViewer))
	list := func(c *webtest.Client, q url.Values) (ids []string) {
		t.Helper()
		for pages := 0; ; pages++ {
			var page api.ExecutionList
			c.Want(t, http.StatusOK, http.MethodGet, "/api/executions?"+q.Encode(), nil).Decode(t, &page)
			for _, it := range page.Items {
				ids = append(ids, it.ExecutionID)
				if it.Index == nil && it.ExecutionID != "ex_e" {
					t.Errorf("%s listed without its indexed values", it.ExecutionID)
				}
			}
			if page.NextCursor == "" || pages > 10 {
				return ids
			}
			q.Set("cursor", page.NextCursor)
		}
	}
	q := func(kv ...string) url.Values {
		v := url.Values{"limit": {"1"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	for _, tc := range []struct {
		q    url.Values
		want []string
	}{
		{q("index[order_id]", "ord-1"), []string{"ex_c", "ex_b", "ex_a"}},
		{q("index[n]", "1"), []string{"ex_d", "ex_b", "ex_a"}},
		{q("index[n]", "1.0"), []string{"ex_d", "ex_b", "ex_a"}},
		{q("index[n]", `"1"`), []string{"ex_c"}},
		{q("index[order_id]", "ord-1", "index[n]", "1"), []string{"ex_b", "ex_a"}},
		{q("index[order_id]", `"ord-2"`), []string{"ex_d"}}, // JSON or text: the same string
		{q("index[order_id]", "ord-9"), nil},
		{q("started_after", base.Add(time.Minute).Format(time.RFC3339), "started_before", base.Add(3*time.Minute).Format(time.RFC3339)), []string{"ex_c", "ex_b"}},
		{q("started_after", base.Add(time.Minute).Format(time.RFC3339), "index[n]", "1"), []string{"ex_d", "ex_b"}},
		{q("started_before", base.Add(time.Minute).Add(time.Millisecond).Format(time.RFC3339Nano), "index[order_id]", "ord-1", "status", "running"), []string{"ex_b", "ex_a"}},
	} {
		if got := list(viewer, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%s: listed %v, want %v", tc.q.Encode(), got, tc.want)
		}
	}
	// Another tenant's key sees its own execution of the same order only.
	acme := f.Key(f.APIKey(t, "acme", sqlite.RoleViewer))
	if got := list(acme, q("index[order_id]", "ord-1")); !slices.Equal(got, []string{"ex_x"}) {
		t.Errorf("acme: %v", got)
	}

	for _, tc := range []struct{ query, where string }{
		{"started_after=yesterday", "query.started_after"},
		{"started_before=2026-03-01", "query.started_before"},
		{"started_after=2026-03-02T00:00:00Z&started_before=2026-03-01T00:00:00Z", "query.started_before"},
		{"index%5Border.id%5D=1", "query.index[order.id]"},
		{"index%5Border_id%5D=%7B%22a%22%3A1%7D", "query.index[order_id]"}, // an object
		{"index%5Border_id%5D=null", "query.index[order_id]"},
		{"index=ord-1", "query.index"},
		{"index.order_id=ord-1", "query.index.order_id"},
	} {
		p := viewer.Want(t, http.StatusBadRequest, http.MethodGet, "/api/executions?"+tc.query, nil).Problem(t)
		named := false
		for _, e := range p.Errors {
			named = named || e.Location == tc.where
		}
		if !named {
			t.Errorf("%s: %+v (errors %v), want one at %s", tc.query, p, p.Errors, tc.where)
		}
	}
	five := url.Values{}
	for i := range 5 {
		five.Set(fmt.Sprintf("index[f%d]", i), "1")
	}
	if p := viewer.Want(t, http.StatusBadRequest, http.MethodGet, "/api/executions?"+five.Encode(), nil).Problem(t); p.Code != "invalid_index_filter" {
		t.Errorf("five filters: %+v", p)
	}

	doc := viewer.Want(t, http.StatusOK, http.MethodGet, "/api/openapi.json", nil)
	var spec struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name, In, Style string
			}
		}
	}
	doc.Decode(t, &spec)
	var params []string
	for _, p := range spec.Paths["/api/executions"]["get"].Parameters {
		params = append(params, p.Name+":"+p.Style)
	}
	for _, want := range []string{"index:deepObject", "started_after:", "started_before:"} {
		if !slices.Contains(params, want) {
			t.Errorf("the OpenAPI document's parameters of GET /api/executions: %v, no %s", params, want)
		}
	}
}

// TestExecutionListByWakeTime: GET /api/executions?sort=wake orders what the filter matches by
// its next wake — a delay's end, a timeout, a retry's next attempt — soonest first, whatever
// order they started in, those nothing times last; pages of it follow one another by cursor,
// and a sort or a cursor that is none is a 400 naming it.
func TestExecutionListByWakeTime(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	admin := f.Admin("")
	def := `{"id":"flaky","version":"1","start":"a","nodes":[{"id":"a","type":"log","params":{"message":"x"},"retry":{"max_attempts":3,"backoff_seconds":600},"next":"b"},{"id":"b","type":"end"}]}`
	admin.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)})
	now := time.Now().UTC().Truncate(time.Second)
	started := now.Add(-time.Hour)
	// Started in this order (ex_1 first), due in another; ex_retry's next attempt is in 10m.
	for i, c := range []struct {
		id  string
		due time.Duration // 0: an event wait without a timeout
	}{{"ex_1", 30 * time.Minute}, {"ex_2", 5 * time.Minute}, {"ex_3", 0}, {"ex_4", 20 * time.Minute}, {"ex_5", time.Minute}} {
		st := webtest.LiveState("default", c.id, 1, state.Suspended)
		st.StartTime = started.Add(time.Duration(i) * time.Minute)
		st.Suspend = &state.Suspend{Kind: state.SuspendEvent, EventType: "paid", Node: "ask", Since: now}
		if c.due > 0 {
			due := now.Add(c.due)
			st.Suspend.Due = &due
		}
		f.Save(t, st)
	}
	st := webtest.LiveState("default", "ex_retry", 0, state.Running)
	st.StartTime = started.Add(10 * time.Minute)
	st.FlowID, st.CurrentNode, st.NodeAttempts, st.Context = "flaky", "a", map[string]int{"a": 1}, map[string]any{}
	st.Timeline = []state.TimelineEntry{{Seq: 1, Time: state.Stamp(now), Event: "retry", Node: "a", Detail: "attempt 1 of 3 failed"}}
	f.Save(t, st)

	viewer := f.Key(f.APIKey(t, "default", sqlite.RoleViewer))
	var ids []string
	q := url.Values{"sort": {"wake"}, "limit": {"2"}}
	for pages := 0; ; pages++ {
		var page api.ExecutionList
		viewer.Want(t, http.StatusOK, http.MethodGet, "/api/executions?"+q.Encode(), nil).Decode(t, &page)
		for _, it := range page.Items {
			ids = append(ids, it.ExecutionID)
			if it.ExecutionID == "ex_retry" && (it.RetryNext == nil || !it.RetryNext.Equal(now.Add(10*time.Minute))) {
				t.Errorf("ex_retry's next attempt: %v", it.RetryNext)
			}
		}
		if page.NextCursor == "" || pages > 5 {
			break
		}
		q.Set("cursor", page.NextCursor)
	}
	if want := []string{"ex_5", "ex_2", "ex_retry", "ex_4", "ex_1", "ex_3"}; !slices.Equal(ids, want) {
		t.Errorf("by wake: %v, want %v", ids, want)
	}
	ids = nil
	var page api.ExecutionList
	// A total of every match, whatever the page: 5 suspended (ex_retry runs).
	var counted api.ExecutionList
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/executions?count=true&status=suspended&limit=1", nil).Decode(t, &counted)
	if counted.Total == nil || *counted.Total != 5 || counted.TotalBounded || len(counted.Items) != 1 {
		t.Errorf("count: total %v bounded %v, %d items", counted.Total, counted.TotalBounded, len(counted.Items))
	}
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/executions?sort=wake&status=suspended&wake_before="+url.QueryEscape(now.Add(25*time.Minute).Format(time.RFC3339)), nil).Decode(t, &page)
	for _, it := range page.Items {
		ids = append(ids, it.ExecutionID)
	}
	if want := []string{"ex_5", "ex_2", "ex_4"}; !slices.Equal(ids, want) || page.NextCursor != "" || page.Bounded {
		t.Errorf("suspended, due within 25m, by wake: %v (next %q, bounded %v), want %v", ids, page.NextCursor, page.Bounded, want)
	}
	if p := viewer.Want(t, http.StatusBadRequest, http.MethodGet, "/api/executions?sort=wake&cursor=abc", nil).Problem(t); p.Code != "invalid_cursor" {
		t.Errorf("a cursor that is none: %+v", p)
	}
	if p := viewer.Want(t, http.StatusBadRequest, http.MethodGet, "/api/executions?sort=due", nil).Problem(t); len(p.Errors) == 0 || p.Errors[0].Location != "query.sort" {
		t.Errorf("a sort that is none: %+v", p)
	}
}

// TestExecutionListWokenByAnEvent: GET /api/executions?woken_by=<event id> lists the executions
// that event woke — named by a resumed entry of their timeline, or by their last resume when
// the timeline dropped it — and nothing else; an id that cannot be one is a 400.
func TestExecutionListWokenByAnEvent(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	now := time.Now().UTC()
	byEntry := webtest.LiveState("default", "ex_entry", 1, state.Completed)
	byEntry.Timeline = append(byEntry.Timeline, state.TimelineEntry{Seq: 2, Time: state.Stamp(now), Node: "ask", Event: "resumed", Detail: "event evt-9"})
	byMark := webtest.LiveState("default", "ex_mark", 1, state.Running)
	byMark.LastResume = &state.ResumeMark{Type: "event", Node: "ask", Key: engine.EventCarrier("evt-9", now), At: state.Stamp(now)}
	other := webtest.LiveState("default", "ex_other", 1, state.Completed)
	other.Timeline = append(other.Timeline, state.TimelineEntry{Seq: 2, Time: state.Stamp(now), Node: "ask", Event: "resumed", Detail: "event evt-90"})
	for _, st := range []*state.Execution{byEntry, byMark, other} {
		f.Save(t, st)
	}
	viewer := f.Key(f.APIKey(t, "default", sqlite.RoleViewer))
	var page api.ExecutionList
	viewer.Want(t, http.StatusOK, http.MethodGet, "/api/executions?woken_by=evt-9", nil).Decode(t, &page)
	var ids []string
	for _, it := range page.Items {
		ids = append(ids, it.ExecutionID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"ex_entry", "ex_mark"}) {
		t.Errorf("woken by evt-9: %v", ids)
	}
	if p := viewer.Want(t, http.StatusBadRequest, http.MethodGet, "/api/executions?woken_by=a+b", nil).Problem(t); p.Code != "invalid_event_id" {
		t.Errorf("an id that is none: %+v", p)
	}
}
