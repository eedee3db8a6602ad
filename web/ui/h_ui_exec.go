package ui

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/graph"
	"plaita/web/api"
)

// Executions: the list (filters and cursor of GET /api/executions; the first page reads its
// rows again when GET /api/executions/stream says a status changed), and one execution's live
// page — the state, what it waits on and the hints of GET /api/executions/{id}, drawn on its
// flow's picture; its live region is asked for again when GET /api/executions/{id}/events
// says the execution moved, or by a poll while the stream is not held (an unchanged state
// answers 204 and nothing moves: a comment being typed survives it).

// timelinePage is how many timeline entries a page shows (older ones on demand).
const timelinePage = 50

func (u *uiServer) executionRoutes(g *echo.Group) {
	g.GET("/executions", u.executionsPage)
	g.GET("/executions/stream", u.executionsStream)
	g.GET("/executions/:id", u.executionPage)
	g.GET("/executions/:id/live", u.executionLive)
	g.GET("/executions/:id/events", u.executionEvents)
	g.GET("/executions/:id/timeline", u.executionTimeline)
	g.GET("/executions/:id/result", u.executionResult)
	g.POST("/executions/:id/action", u.executionAction)
	g.POST("/executions/:id/approve", u.executionApprove)
	g.POST("/executions/:id/delete", u.executionDelete)
}

// executionEvents relays GET /api/executions/{id}/events (the snapshot, each timeline entry,
// the end) to the page, which asks for its live region again when one arrives.
func (u *uiServer) executionEvents(c echo.Context) error {
	q := url.Values{}
	if a := c.QueryParam("after"); a != "" {
		q.Set("after", a)
	}
	path := "/api/executions/" + url.PathEscape(c.Param("id")) + "/events"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return u.relay(c, path)
}

// executionsStream relays GET /api/executions/stream (the tenant's status changes) to the
// list, which reads its rows again when one arrives.
func (u *uiServer) executionsStream(c echo.Context) error {
	q := url.Values{}
	for _, k := range []string{"status", "flow_id"} {
		if v := c.QueryParam(k); v != "" {
			q.Set(k, v)
		}
	}
	path := "/api/executions/stream"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return u.relay(c, path)
}

// listData is the executions list page.
type listData struct {
	List api.ExecutionList
	// Flows are the tenant's published flow ids: the flow filter offers them as it is typed.
	Flows  []string
	Status string
	FlowID string
	// The start and due times as the form gives them (2026-12-05 09:30, UTC).
	StartedAfter, StartedBefore, WakeAfter, WakeBefore string
	// Index are the indexed fields' filters (index[<field>]=<value>), by field.
	Index   []control.IndexFilter
	Limit   int
	Sort    string // "" (newest start first) or wake (soonest next wake first)
	WokenBy string // an event's id: the executions it woke
	Count   bool   // the total of what the filter matches was asked for
	// CountURL is the page with its total asked for.
	CountURL string
	Next     string // the next page's URL
	First    bool
	Query    string // the filter as a query string, without cursor (the live rows')
	Follow   string // the status stream the first page follows
	Deleted  string // an execution the page's last action deleted
	Via      string // what asked for the rows: sse or poll (the page's own record)
	Problem  *api.Problem
	// Bulk is the filter the "all matching" form carries: the query the rows were read with,
	// less the page's place. BulkRefused says why the form is not offered instead.
	Bulk        url.Values
	BulkRefused string
}

var statuses = []string{"pending", "running", "suspended", "completed", "error", "cancelled"}

// formTime reads a time field of a form as RFC 3339: a UTC date with an optional 24-hour time
// (2026-12-05, 2026-12-05 09:30, 2026-12-05T09:30[:00]) or RFC 3339. The pages take times as
// text in the one zone they show (a browser's date picker would show its own locale's clock).
func formTime(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC().Format(time.RFC3339), true
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t.Format(time.RFC3339), true
		}
	}
	return "", false
}

// listQuery reads the list's filter from the page's query: the API's query, and the form as
// it was filled in (a time that does not parse is left out, and said). An indexed field comes
// as index[<field>]=<value> (the API's spelling), or from the form's index=<field>=<value>.
func listQuery(c echo.Context) (listData, url.Values) {
	d := listData{Status: c.QueryParam("status"), FlowID: strings.TrimSpace(c.QueryParam("flow_id")), Limit: 50, Deleted: c.QueryParam("deleted")}
	if n, err := strconv.Atoi(c.QueryParam("limit")); err == nil && n > 0 && n <= 500 {
		d.Limit = n
	}
	q := url.Values{"limit": {strconv.Itoa(d.Limit)}}
	if slices.Contains(statuses, d.Status) {
		q.Set("status", d.Status)
	} else {
		d.Status = ""
	}
	if d.FlowID != "" {
		q.Set("flow_id", d.FlowID)
	}
	if d.WokenBy = strings.TrimSpace(c.QueryParam("woken_by")); d.WokenBy != "" {
		q.Set("woken_by", d.WokenBy)
	}
	if c.QueryParam("sort") == control.SortWake {
		d.Sort = control.SortWake
		q.Set("sort", d.Sort)
	}
	if c.QueryParam("count") == "true" {
		d.Count = true
		q.Set("count", "true")
	}
	for _, f := range []struct {
		name string
		to   *string
	}{{"started_after", &d.StartedAfter}, {"started_before", &d.StartedBefore}, {"wake_after", &d.WakeAfter}, {"wake_before", &d.WakeBefore}} {
		v := strings.TrimSpace(c.QueryParam(f.name))
		if v == "" {
			continue
		}
		*f.to = v
		if t, ok := formTime(v); ok {
			q.Set(f.name, t)
		} else if d.Problem == nil {
			d.Problem = api.NewProblem(http.StatusBadRequest, "invalid_time", "%s %q is not a time (2026-12-05 09:30, UTC): left out", f.name, v)
		}
	}
	index := map[string]string{}
	for k, vs := range c.QueryParams() {
		if field, ok := indexParam(k); ok && len(vs) > 0 {
			if v := strings.TrimSpace(vs[0]); v != "" {
				index[field] = v
			}
		}
	}
	for _, add := range c.QueryParams()["index"] {
		if add = strings.TrimSpace(add); add == "" {
			continue
		}
		f, err := control.ParseIndexFilter(add)
		if err != nil {
			if d.Problem == nil {
				d.Problem = api.NewProblem(http.StatusBadRequest, "invalid_index_filter", "indexed field %q: write field=value (order_id=ord-1): left out", add)
			}
			continue
		}
		index[f.Field] = strings.TrimSpace(f.Value)
	}
	for _, field := range slices.Sorted(maps.Keys(index)) {
		d.Index = append(d.Index, control.IndexFilter{Field: field, Value: index[field]})
		q.Set("index["+field+"]", index[field])
	}
	return d, q
}

func (u *uiServer) executionsPage(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	d, q := listQuery(c)
	list := maps.Clone(q)
	if cur := c.QueryParam("cursor"); cur != "" {
		list.Set("cursor", cur)
	}
	if p := u.call(c, http.MethodGet, "/api/executions?"+list.Encode(), nil, &d.List); p != nil {
		return u.failRefresh(c, p, "list")
	}
	// The flow filter's suggestions: a failure to read them leaves the field as it is (typed).
	var flows api.FlowList
	if p := u.call(c, http.MethodGet, "/api/flows?limit=200", nil, &flows); p == nil {
		for _, f := range flows.Items {
			d.Flows = append(d.Flows, f.FlowID)
		}
	}
	d.First = list.Get("cursor") == ""
	// The live rows' query counts nothing again: the total is the page's, as loaded.
	rq := maps.Clone(q)
	rq.Del("count")
	d.Query = rq.Encode()
	if !d.Count {
		cq := maps.Clone(q)
		cq.Set("count", "true")
		d.CountURL = "/ui/executions?" + cq.Encode()
	}
	d.Bulk, d.BulkRefused = listFilterQuery(q)
	if d.Problem != nil && d.BulkRefused == "" {
		// The rows are read without the filter that was left out: not what was asked for.
		d.BulkRefused = "A filter above was left out (" + d.Problem.Detail + "): correct it to act on all matching."
	}
	if d.List.NextCursor != "" {
		list.Set("cursor", d.List.NextCursor)
		d.Next = "/ui/executions?" + list.Encode()
	}
	if d.First {
		sq := url.Values{}
		for _, k := range []string{"status", "flow_id"} {
			if v := q.Get(k); v != "" {
				sq.Set(k, v)
			}
		}
		d.Follow = "/ui/executions/stream?" + sq.Encode()
	}
	if via := c.QueryParam("via"); via == "sse" || via == "poll" {
		d.Via = via
	}
	page := uiPage{Title: "Executions", Nav: "executions", S: s, Data: d}
	if c.QueryParam("fragment") == "rows" {
		return u.render(c, http.StatusOK, "executions.html", "list", page)
	}
	return u.render(c, http.StatusOK, "executions.html", "", page)
}

// execData is one execution's page.
type execData struct {
	ID      string
	View    api.ExecutionView
	St      *state.Execution
	Version string // of what the live region shows: a refresh answers 204 while it is the same
	Live    bool   // not terminal: the page follows its events (and polls without them)
	Follow  string // the events the page follows (the relay of GET /api/executions/{id}/events)
	Via     string // what asked for this region: sse, poll or action (the page's own record)
	SVG     template.HTML
	Graph   string
	Flow    *engine.Flow
	// Results are the nodes' results in flow order (previews; the whole on demand).
	Results        []nodeResult
	Decisions      []decisionRow
	DecisionsTotal int
	// Counts is how often each branching node took each branch, from the state's counters
	// (the whole run, however much of the timeline was dropped).
	Counts    engine.BranchCounts
	Timeline  []state.TimelineEntry
	Older     int // the seq before which older entries are fetched (0: none)
	Waiting   *waitPanel
	Timers    []control.Timer
	Approval  bool // suspended at an approval: the answer form
	Deletable bool // not running: a delete needs no force
	Notice    string
	// Actions are the buttons: exactly the resumes the resume check accepts now (the API's
	// hints), so the page offers nothing it would refuse.
	Actions []execAction
	// EventData is the event the event button delivers, pre-filled from the wait's match
	// ("" when no event is accepted or none could be built).
	EventData string
	Duration  time.Duration // from the start to the end, or to now while it runs
	Vars      map[string]any
	// Unavailable: the flow could not be read for now (the API's 5xx).
	Unavailable *api.Problem
}

// execAction is one button of the page: a resume the API accepts now.
type execAction struct {
	Do      string // cancel, continue, retry, timeout
	Label   string
	Danger  bool
	Confirm string // the question asked first ("" for none)
}

// actionsOf are the buttons of the hints: the resumes the check accepts, in the hints' order —
// an approval is answered by its own form, an event by the event form (EventData), a resume
// that needs the flow-hash override is left to the CLI, whose command the hints show.
func actionsOf(id string, hints []control.Hint) ([]execAction, string) {
	var out []execAction
	event := ""
	for _, h := range hints {
		if h.AllowFlowHashChange {
			continue
		}
		switch h.Type {
		case state.ResumeCancel:
			out = append(out, execAction{Do: "cancel", Label: "Cancel", Danger: true,
				Confirm: "Cancel execution " + id + "? It stops where it is and cannot be resumed."})
		case state.ResumeContinue:
			out = append(out, execAction{Do: "continue", Label: "Continue now"})
		case state.ResumeRetry:
			out = append(out, execAction{Do: "retry", Label: "Retry the node"})
		case state.ResumeTimeout:
			out = append(out, execAction{Do: "timeout", Label: "Time it out", Danger: true,
				Confirm: "Time out the wait of execution " + id + "? It goes on as if its timeout had passed."})
		case state.ResumeEvent:
			if event == "" {
				event = cmp.Or(h.Data, "{}")
			}
		}
	}
	return out, event
}

// decisionRow is one decision, or the same decision taken at consecutive passes of a loop
// (the same node, reason and next node): Times of them, from the first's time to Last.
type decisionRow struct {
	engine.Branch
	Times int
	Last  state.Timestamp
}

// collapse folds consecutive decisions of one node to one next node into one row, which
// keeps the newest reason (a loop's passes read other values each time).
func collapse(ds []engine.Branch) []decisionRow {
	var out []decisionRow
	for _, d := range ds {
		if n := len(out); n > 0 {
			p := &out[n-1]
			if p.Node == d.Node && p.To == d.To && p.FromContext == d.FromContext {
				p.Times++
				p.Last, p.Why = d.Time, d.Why
				continue
			}
		}
		out = append(out, decisionRow{Branch: d, Times: 1, Last: d.Time})
	}
	return out
}

// nodeResult is a node's result and timing.
type nodeResult struct {
	Node    string
	Type    string
	Has     bool
	Preview string
	Bytes   int
	Timing  *state.NodeTiming
}

func (u *uiServer) executionPage(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	d, p := u.executionView(c)
	if p != nil {
		return u.fail(c, p)
	}
	u.fill(c, s, d)
	return u.render(c, http.StatusOK, "execution.html", "", uiPage{Title: "Execution " + d.ID, Nav: "executions", S: s, Data: d})
}

// executionLive is the live region anew, asked for when the execution's events say it moved
// (or by the poll that stands in for them): 204 while the version the page has is current,
// before any of the region is built.
func (u *uiServer) executionLive(c echo.Context) error {
	s, p := u.session(c)
	if p == nil {
		var d *execData
		if d, p = u.executionView(c); p == nil {
			return u.liveRegion(c, s, d)
		}
	}
	if p.Status >= http.StatusInternalServerError {
		// What the page shows stays, under a banner (app.js): a refresh that failed for now is
		// no reason to replace the execution with an error box.
		return u.stale(c, p)
	}
	return u.fail(c, p)
}

// stale answers a live refresh that cannot be made now (the API's 5xx: Redis or the database
// gone): 503 with the problem's code in X-Plaita-Stale, which htmx does not swap in.
func (u *uiServer) stale(c echo.Context, p *api.Problem) error {
	c.Response().Header().Set("X-Plaita-Stale", cmp.Or(p.Code, "unavailable"))
	c.Response().Header().Set("Retry-After", "2")
	return c.NoContent(http.StatusServiceUnavailable)
}

// liveRegion renders the execution's live region, or 204 when it did not change.
func (u *uiServer) liveRegion(c echo.Context, s *uiSession, d *execData) error {
	if v := c.QueryParam("v"); v != "" && v == d.Version {
		return c.NoContent(http.StatusNoContent)
	}
	u.fill(c, s, d)
	if d.Unavailable != nil {
		return u.stale(c, d.Unavailable) // the picture could not be read for now: keep the one shown
	}
	if via := c.QueryParam("via"); via == "sse" || via == "poll" || via == "action" {
		d.Via = via
	}
	return u.render(c, http.StatusOK, "execution.html", "live", uiPage{S: s, Data: d})
}

// executionView reads one execution through the API and names the version of what its live
// region shows.
func (u *uiServer) executionView(c echo.Context) (*execData, *api.Problem) {
	d := &execData{ID: c.Param("id")}
	if p := u.call(c, http.MethodGet, "/api/executions/"+url.PathEscape(d.ID), nil, &d.View); p != nil {
		return nil, p
	}
	d.St = d.View.Execution
	d.Version = liveVersion(&d.View)
	return d, nil
}

// fill builds the page of the execution d read: its flow version's picture with the path, the
// decisions, the results, the newest timeline entries, what it waits on.
func (u *uiServer) fill(c echo.Context, s *uiSession, d *execData) {
	d.Timers = d.View.Timers
	if d.View.Queued != nil {
		d.Live, d.Follow = true, "/ui/executions/"+url.PathEscape(d.ID)+"/events"
		d.Waiting = u.waitPanel(c, s, &d.View)
		return
	}
	if d.St == nil {
		return // unreadable: what is stored is shown as it is
	}
	d.Live = !d.St.Status.Terminal()
	d.Deletable = d.St.Status != state.Running && d.St.Status != state.Pending
	d.Actions, d.EventData = actionsOf(d.ID, d.View.Hints)
	d.Vars = d.St.Vars()
	if end := d.St.EndTime; end != nil {
		d.Duration = end.Sub(d.St.StartTime)
	} else if !d.St.StartTime.IsZero() {
		d.Duration = u.now().Sub(d.St.StartTime)
	}
	if d.Live {
		d.Follow = "/ui/executions/" + url.PathEscape(d.ID) + "/events?after=" + strconv.Itoa(d.St.TimelineDropped+len(d.St.Timeline))
	}
	d.Timeline, d.Older = timelineBefore(d.St, 0)
	d.Waiting = u.waitPanel(c, s, &d.View)
	d.Approval = d.St.Status == state.Suspended && d.St.Suspend != nil && d.St.Suspend.Kind == state.SuspendApproval
	f, transient, err := u.flowOf(c, d.St)
	d.Unavailable = transient
	if err != nil {
		d.Graph = err.Error()
		return
	}
	d.Flow = f
	all := d.View.Branches // the API's, so the page and GET /api/executions/{id} say the same
	d.DecisionsTotal = len(all)
	d.Counts = engine.CountBranches(d.St)
	d.Decisions = collapse(all)
	if n := len(d.Decisions); n > timelinePage {
		// The newest are shown; the timeline has the rest.
		d.Decisions = d.Decisions[n-timelinePage:]
	}
	d.Results = results(f, d.St)
	overlay := graph.Trace(f, d.St)
	overlay.Link = func(node string) string { return "#node-result-" + node } // the node's row below
	svg, err := u.graphs.SVG(f, overlay)
	if err != nil {
		d.Graph = err.Error()
	}
	d.SVG = template.HTML(svg) // written by package graph, every text escaped there
}

// flowOf is the flow version st runs, read through the API and parsed as a worker would.
// A flow the API could not read for now (a 5xx) is the problem too, so a live refresh answers
// stale instead of drawing the execution without its picture.
func (u *uiServer) flowOf(c echo.Context, st *state.Execution) (*engine.Flow, *api.Problem, error) {
	var shown control.FlowShown
	path := "/api/flows/" + url.PathEscape(st.FlowID) + "?version=" + url.QueryEscape(st.FlowVersion)
	if p := u.call(c, http.MethodGet, path, nil, &shown); p != nil {
		var transient *api.Problem
		if p.Status >= http.StatusInternalServerError {
			transient = p
		}
		return nil, transient, fmt.Errorf("flow %s version %s: %s", st.FlowID, st.FlowVersion, p.Detail)
	}
	f, err := u.a.Plane().ParseFlow(shown.Definition)
	if err != nil {
		return nil, nil, fmt.Errorf("flow %s version %s: %w", st.FlowID, st.FlowVersion, err)
	}
	return f, nil, nil
}

// liveVersion names what the live region shows: the state's progress and what wakes it (the
// roles alive, the delay entry, a retry's attempt, what holds a queued start), not the times
// that count down on their own.
func liveVersion(v *api.ExecutionView) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s|", v.View)
	if st := v.Execution; st != nil {
		fmt.Fprintf(h, "%s|%s|%d|%d|%s|%d|", st.Status, st.CurrentNode, st.StepCount, st.TimelineDropped+len(st.Timeline),
			st.LastUpdate.Format(time.RFC3339Nano), len(v.Hints))
	}
	if w := v.Waiting; w != nil {
		fmt.Fprintf(h, "%s|%s|%d|", w.Kind, w.By, len(w.Problems))
		for _, r := range []string{"worker", "delay", "filter", "console"} {
			fmt.Fprintf(h, "%s=%d/%d|", r, w.Roles[r].Alive, w.Roles[r].Stopping)
		}
		if w.Due != nil {
			fmt.Fprintf(h, "%s|%d|", w.Due.Entry, w.Due.Attempts)
		}
	}
	if pr := v.Progress; pr != nil {
		fmt.Fprintf(h, "w=%d/%d|%d|", pr.Workers.Alive, pr.Workers.Stopping, len(pr.Problems))
		if pr.Retry != nil {
			fmt.Fprintf(h, "r=%d|", pr.Retry.Attempt)
		}
	}
	if q := v.Queued; q != nil {
		fmt.Fprintf(h, "%d|%s|%v|", q.WorkersAlive, q.Task.ID, q.Task.Pending)
		if w := q.Wait; w != nil {
			fmt.Fprintf(h, "%s|", w.Text)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// results are the nodes' results in flow order, as previews (each result encoded once).
func results(f *engine.Flow, st *state.Execution) []nodeResult {
	nodes, _ := st.Context[state.ContextNodes].(map[string]any)
	var out []nodeResult
	for _, n := range f.Nodes {
		v, has := nodes[n.ID]
		t := st.NodeTimings[n.ID]
		if !has && t == nil {
			continue
		}
		r := nodeResult{Node: n.ID, Type: n.Type, Has: has, Timing: t}
		if has {
			if b, err := json.Marshal(v); err == nil {
				r.Preview, r.Bytes = previewJSON(b), len(b)
			} else {
				r.Preview = preview(v)
			}
		}
		out = append(out, r)
	}
	return out
}

// timelineBefore is the page of entries older than seq (0: the newest), newest first, and
// the seq to fetch the page after it from (0: none left).
func timelineBefore(st *state.Execution, seq int) ([]state.TimelineEntry, int) {
	tl := st.Timeline
	end := len(tl)
	if seq > 0 {
		end = 0
		for end < len(tl) && tl[end].Seq < seq {
			end++
		}
	}
	start := max(0, end-timelinePage)
	page := slices.Clone(tl[start:end])
	slices.Reverse(page)
	older := 0
	if start > 0 {
		older = tl[start].Seq
	}
	return page, older
}

// executionTimeline is the page of entries before seq `before`, newest first, read from GET
// /api/executions/{id}/timeline (oldest first from after: the entries are numbered without
// gaps, so the page before `before` starts after before-1-timelinePage).
func (u *uiServer) executionTimeline(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	before, _ := strconv.Atoi(c.QueryParam("before"))
	d := &execData{ID: c.Param("id")}
	if before > 1 {
		after := max(before-1-timelinePage, 0)
		var page api.Timeline
		path := "/api/executions/" + url.PathEscape(d.ID) + "/timeline?after=" + strconv.Itoa(after) + "&limit=" + strconv.Itoa(before-1-after)
		if p := u.call(c, http.MethodGet, path, nil, &page); p != nil {
			return u.fail(c, p)
		}
		for _, e := range page.Items {
			if e.Seq < before {
				d.Timeline = append(d.Timeline, e)
			}
		}
		slices.Reverse(d.Timeline)
		if n := len(d.Timeline); n > 0 && d.Timeline[n-1].Seq > page.Dropped+1 {
			d.Older = d.Timeline[n-1].Seq
		}
	}
	return u.render(c, http.StatusOK, "execution.html", "timeline-rows", uiPage{S: s, Data: d})
}

// inlineResultBytes bounds a whole result shown in the page: a larger one is shown up to it,
// with a link that downloads it whole (a 5 MB text would hold the browser up as it lays it out).
const inlineResultBytes = 256 << 10

// executionResult is one node's whole result, on demand: in the page up to inlineResultBytes,
// or (download=1) as a JSON file.
func (u *uiServer) executionResult(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	var v api.ExecutionView
	if p := u.call(c, http.MethodGet, "/api/executions/"+url.PathEscape(c.Param("id")), nil, &v); p != nil {
		return u.fail(c, p)
	}
	node := c.QueryParam("node")
	if v.Execution == nil {
		return u.fail(c, api.NewProblem(http.StatusNotFound, "no_state", "execution %s has no state yet", c.Param("id")))
	}
	nodes, _ := v.Execution.Context[state.ContextNodes].(map[string]any)
	val, ok := nodes[node]
	if !ok {
		return u.fail(c, api.NewProblem(http.StatusNotFound, "no_result", "node %q has no result in execution %s", node, c.Param("id")))
	}
	if c.QueryParam("download") == "1" {
		b, err := json.Marshal(val)
		if err != nil {
			return u.fail(c, u.internal(c, fmt.Errorf("ui: encode the result of %s: %w", node, err)))
		}
		c.Response().Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": c.Param("id") + "-" + node + ".json"}))
		return c.Blob(http.StatusOK, "application/json", b)
	}
	text := pretty(val)
	r := resultView{Node: node, ID: c.Param("id"), Bytes: len(text)}
	r.JSON, r.Cut = cutText(text, inlineResultBytes)
	return u.render(c, http.StatusOK, "execution.html", "result", uiPage{S: s, Data: r})
}

// resultView is a node's result in the page: all of it, or (Cut) its first inlineResultBytes.
type resultView struct {
	ID, Node, JSON string
	Bytes          int
	Cut            bool
}

// cutText is s, or its first n bytes (on a rune boundary) and true.
func cutText(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// executionAction is a button of the page: cancel, or a resume (continue, retry …) through the
// API; the answer — what was enqueued, or the refusal with what is accepted instead and how to
// unblock it — is shown beside the buttons, and the live region is told to refresh.
func (u *uiServer) executionAction(c echo.Context) error {
	id := c.Param("id")
	do := c.FormValue("do")
	path, body := "/api/executions/"+url.PathEscape(id)+"/resume", map[string]any{"type": do}
	switch do {
	case "cancel":
		path, body = "/api/executions/"+url.PathEscape(id)+"/cancel", nil
	case "continue", "retry", "timeout":
	case "event":
		var data any
		if err := json.Unmarshal([]byte(c.FormValue("data")), &data); err != nil {
			return u.fail(c, api.NewProblem(http.StatusBadRequest, "invalid_event", "the event is not JSON: %v", err))
		}
		body["data"] = data
	default:
		return u.fail(c, api.NewProblem(http.StatusBadRequest, "invalid_action", "no action %q: cancel, continue, retry, timeout or event", do))
	}
	var done control.Done
	if p := u.call(c, http.MethodPost, path, body, &done); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Trigger", "execution-changed")
	return u.render(c, http.StatusOK, "execution.html", "done", uiPage{Data: done})
}

// executionApprove answers the pending approval (POST /api/approvals/{id}: checked as the
// worker will check it; who answered is the logged-in user, recorded in the execution).
func (u *uiServer) executionApprove(c echo.Context) error {
	body := map[string]any{"approved": c.FormValue("decision") == "approve", "comment": c.FormValue("comment")}
	var done control.Done
	if p := u.call(c, http.MethodPost, "/api/approvals/"+url.PathEscape(c.Param("id")), body, &done); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Trigger", "execution-changed")
	return u.render(c, http.StatusOK, "execution.html", "done", uiPage{Data: done})
}

// executionDelete deletes the execution (DELETE /api/executions/{id}; force for a running or
// pending one) after the page's confirmation, and goes back to the list.
func (u *uiServer) executionDelete(c echo.Context) error {
	id := c.Param("id")
	if c.FormValue("confirm") != "yes" {
		return u.fail(c, api.NewProblem(http.StatusBadRequest, "unconfirmed", "deleting execution %s needs confirm=yes", id))
	}
	path := "/api/executions/" + url.PathEscape(id)
	if c.FormValue("force") == "true" {
		path += "?force=true"
	}
	var done control.Done
	if p := u.call(c, http.MethodDelete, path, nil, &done); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Redirect", "/ui/executions?deleted="+url.QueryEscape(id))
	return c.NoContent(http.StatusOK)
}
