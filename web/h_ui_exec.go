package web

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/web/ui/graph"
)

// Executions: the list (filters and cursor of GET /api/executions), and one execution's live
// page — the state, the wake-up report and the hints of GET /api/executions/{id}, drawn on its
// flow's picture; refreshed in place every 2 s while it is not terminal (an unchanged state
// answers 204 and nothing moves: a comment being typed survives the poll).

// timelinePage is how many timeline entries a page shows (older ones on demand).
const timelinePage = 50

func (u *uiServer) executionRoutes(g *echo.Group) {
	g.GET("/executions", u.executionsPage)
	g.GET("/executions/:id", u.executionPage)
	g.GET("/executions/:id/live", u.executionLive)
	g.GET("/executions/:id/timeline", u.executionTimeline)
	g.GET("/executions/:id/result", u.executionResult)
	g.POST("/executions/:id/action", u.executionAction)
	g.POST("/executions/:id/approve", u.executionApprove)
}

// listData is the executions list page.
type listData struct {
	List   ExecutionList
	Status string
	FlowID string
	Cursor string
	Limit  int
	Next   string // the next page's URL
	First  bool
}

var statuses = []string{"pending", "running", "suspended", "completed", "error", "cancelled"}

func (u *uiServer) executionsPage(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	d := listData{Status: c.QueryParam("status"), FlowID: strings.TrimSpace(c.QueryParam("flow_id")), Cursor: c.QueryParam("cursor"), Limit: 50}
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
	if d.Cursor != "" {
		q.Set("cursor", d.Cursor)
	}
	if p := u.call(c, http.MethodGet, "/api/executions?"+q.Encode(), nil, &d.List); p != nil {
		return u.fail(c, p)
	}
	d.First = d.Cursor == ""
	if d.List.NextCursor != "" {
		q.Set("cursor", d.List.NextCursor)
		d.Next = "/ui/executions?" + q.Encode()
	}
	return u.render(c, http.StatusOK, "executions.html", "", uiPage{Title: "Executions", Nav: "executions", S: s, Data: d})
}

// execData is one execution's page.
type execData struct {
	ID      string
	View    ExecutionView
	St      *state.Execution
	Version string // of what the live region shows: the poll answers 204 while it is the same
	Live    bool   // not terminal: the page polls
	SVG     template.HTML
	Graph   string
	Flow    *engine.Flow
	// Results are the nodes' results in flow order (previews; the whole on demand).
	Results        []nodeResult
	Decisions      []decisionRow
	DecisionsTotal int
	Timeline       []state.TimelineEntry
	Older          int // the seq before which older entries are fetched (0: none)
	Waiting        *waitPanel
	Approval       bool // suspended at an approval: the answer form
	Notice         string
}

// decisionRow is one decision, or the same decision taken at consecutive passes of a loop
// (the same node, reason and next node): Times of them, from the first's time to Last.
type decisionRow struct {
	engine.Branch
	Times int
	Last  state.Timestamp
}

// collapse folds consecutive equal decisions into one row.
func collapse(ds []engine.Branch) []decisionRow {
	var out []decisionRow
	for _, d := range ds {
		if n := len(out); n > 0 {
			p := &out[n-1]
			if p.Node == d.Node && p.Why == d.Why && p.To == d.To && p.FromContext == d.FromContext {
				p.Times++
				p.Last = d.Time
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
	d, p := u.execution(c, s)
	if p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "execution.html", "", uiPage{Title: "Execution " + d.ID, Nav: "executions", S: s, Data: d})
}

// executionLive is the poll: 204 while the version the page has is current, else the live
// region anew.
func (u *uiServer) executionLive(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	d, p := u.execution(c, s)
	if p != nil {
		return u.fail(c, p)
	}
	if v := c.QueryParam("v"); v != "" && v == d.Version {
		return c.NoContent(http.StatusNoContent)
	}
	return u.render(c, http.StatusOK, "execution.html", "live", uiPage{S: s, Data: d})
}

// execution reads one execution through the API and its flow version, and builds its page.
func (u *uiServer) execution(c echo.Context, s *uiSession) (*execData, *Problem) {
	d := &execData{ID: c.Param("id")}
	if p := u.call(c, http.MethodGet, "/api/executions/"+url.PathEscape(d.ID), nil, &d.View); p != nil {
		return nil, p
	}
	d.St = d.View.Execution
	d.Version = liveVersion(&d.View)
	switch {
	case d.View.Queued != nil:
		d.Live = true
		return d, nil
	case d.St == nil:
		return d, nil
	}
	d.Live = !d.St.Status.Terminal()
	d.Timeline, d.Older = timelineBefore(d.St, 0)
	d.Waiting = u.waitPanel(c, s, d.St, d.View.Waiting)
	d.Approval = d.St.Status == state.Suspended && d.St.Suspend != nil && d.St.Suspend.Kind == state.SuspendApproval
	f, err := u.flowOf(c, d.St)
	if err != nil {
		d.Graph = err.Error()
		return d, nil
	}
	d.Flow = f
	all := d.View.Branches // the API's, so the page and GET /api/executions/{id} say the same
	d.DecisionsTotal = len(all)
	d.Decisions = collapse(all)
	if n := len(d.Decisions); n > timelinePage {
		// The newest are shown; the timeline has the rest.
		d.Decisions = d.Decisions[n-timelinePage:]
	}
	d.Results = results(f, d.St)
	svg, err := u.graphs.SVG(f, graph.Trace(f, d.St))
	if err != nil {
		d.Graph = err.Error()
	}
	d.SVG = template.HTML(svg) // written by package graph, every text escaped there
	return d, nil
}

// flowOf is the flow version st runs, read through the API and parsed as a worker would.
func (u *uiServer) flowOf(c echo.Context, st *state.Execution) (*engine.Flow, error) {
	var shown control.FlowShown
	path := "/api/flows/" + url.PathEscape(st.FlowID) + "?version=" + url.QueryEscape(st.FlowVersion)
	if p := u.call(c, http.MethodGet, path, nil, &shown); p != nil {
		return nil, fmt.Errorf("flow %s version %s: %s", st.FlowID, st.FlowVersion, p.Detail)
	}
	f, err := u.a.d.Plane.ParseFlow(shown.Definition)
	if err != nil {
		return nil, fmt.Errorf("flow %s version %s: %w", st.FlowID, st.FlowVersion, err)
	}
	return f, nil
}

// liveVersion names what the live region shows: the state's progress and what wakes it (the
// roles alive, the delay entry), not the times that count down on their own.
func liveVersion(v *ExecutionView) string {
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
	if q := v.Queued; q != nil {
		fmt.Fprintf(h, "%d|", q.WorkersAlive)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// results are the nodes' results in flow order, as previews.
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
			r.Preview = preview(v)
			if b, err := json.Marshal(v); err == nil {
				r.Bytes = len(b)
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

func (u *uiServer) executionTimeline(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	var v ExecutionView
	if p := u.call(c, http.MethodGet, "/api/executions/"+url.PathEscape(c.Param("id")), nil, &v); p != nil {
		return u.fail(c, p)
	}
	d := &execData{ID: c.Param("id"), View: v, St: v.Execution}
	if d.St != nil {
		before, _ := strconv.Atoi(c.QueryParam("before"))
		d.Timeline, d.Older = timelineBefore(d.St, before)
	}
	return u.render(c, http.StatusOK, "execution.html", "timeline-rows", uiPage{S: s, Data: d})
}

// executionResult is one node's whole result, on demand.
func (u *uiServer) executionResult(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	var v ExecutionView
	if p := u.call(c, http.MethodGet, "/api/executions/"+url.PathEscape(c.Param("id")), nil, &v); p != nil {
		return u.fail(c, p)
	}
	node := c.QueryParam("node")
	if v.Execution == nil {
		return u.fail(c, newProblem(http.StatusNotFound, "no_state", "execution %s has no state yet", c.Param("id")))
	}
	nodes, _ := v.Execution.Context[state.ContextNodes].(map[string]any)
	val, ok := nodes[node]
	if !ok {
		return u.fail(c, newProblem(http.StatusNotFound, "no_result", "node %q has no result in execution %s", node, c.Param("id")))
	}
	return u.render(c, http.StatusOK, "execution.html", "result", uiPage{S: s, Data: map[string]any{"Node": node, "JSON": pretty(val)}})
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
	default:
		return u.fail(c, newProblem(http.StatusBadRequest, "invalid_action", "no action %q: cancel, continue, retry or timeout", do))
	}
	var done control.Done
	if p := u.call(c, http.MethodPost, path, body, &done); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Trigger", "execution-changed")
	return u.render(c, http.StatusOK, "execution.html", "done", uiPage{Data: done})
}

// executionApprove answers the pending approval as the logged-in user (control.AnswerApproval:
// who answered is recorded in the execution), checked as the worker will check it.
func (u *uiServer) executionApprove(c echo.Context) error {
	call, p := u.authorize(c, uiRoutes.answer)
	if p != nil {
		return u.fail(c, p)
	}
	id := c.Param("id")
	approved := c.FormValue("decision") == "approve"
	call.Audit.Target = id
	call.Note("approved", approved)
	ctx, cancel := withTimeout(c.Request().Context())
	defer cancel()
	done, err := u.a.d.Plane.AnswerApproval(ctx, control.Answer{Tenant: call.Tenant, ID: id, Approved: approved,
		Comment: c.FormValue("comment"), By: call.Principal.Actor})
	if p := u.done(ctx, call, err); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Trigger", "execution-changed")
	return u.render(c, http.StatusOK, "execution.html", "done", uiPage{Data: done})
}
