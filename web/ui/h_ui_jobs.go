package ui

import (
	"cmp"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"plaita/control"
	"plaita/web/api"
)

// errNoJob: POST /api/jobs answered a run without its job.
var errNoJob = errors.New("ui: POST /api/jobs created no job")

// Bulk actions by query (docs/console.md, "Bulk jobs"): a list page's form carries an action
// and the page's own filter — the query the page read its rows with (listFilterQuery): the
// executions list's status, flow, start and due times and indexed fields, or the dead letters'
// reason, kind and flow. POST /api/jobs with dry_run counts what it matches, which is what the
// list shows, and forecasts what the job will do to each (will apply, nothing to do, refused
// by code); the page shows the count split so, a sample, and asks to confirm only when some
// will apply (the button counts those, the job still goes through every item matched); the
// confirmed POST creates the job, whose page follows its progress (GET /api/jobs/{id}) and
// lists its failures with their codes. A filter field the job cannot take is refused by name,
// never dropped: without it the job would act on more than the list shows.

func (u *uiServer) jobRoutes(g *echo.Group) {
	g.GET("/jobs", u.jobsPage)
	g.POST("/jobs/preview", u.jobPreview)
	g.POST("/jobs", u.createJob)
	g.GET("/jobs/:id", u.jobPage)
	g.GET("/jobs/:id/progress", u.jobProgress)
	g.POST("/jobs/:id/cancel", u.cancelJob)
}

// jobFilterFields are the list query parameters a job's filter takes as they are (they are
// the names of control.BulkFilter's JSON fields); index[<field>] goes to its index.
var jobFilterFields = []string{"status", "flow_id", "started_after", "started_before", "wake_after", "wake_before", "reason", "kind"}

// jobFormFields are the bulk form's own fields besides the filter.
var jobFormFields = []string{"csrf", "action", "force"}

// indexParam reads index[<field>] (the lists' query spelling of an indexed field).
func indexParam(k string) (string, bool) {
	if f, ok := strings.CutPrefix(k, "index["); ok && strings.HasSuffix(f, "]") && len(f) > 1 {
		return strings.TrimSuffix(f, "]"), true
	}
	return "", false
}

// jobFilter reads a list's filter, as its query gives it, as POST /api/jobs's filter (the
// times read as UTC, as the list's form gives them). A parameter that is no filter a job
// takes, or one given twice, is refused by name.
func jobFilter(q url.Values) (map[string]any, *api.Problem) {
	filter := map[string]any{}
	index := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if len(q[k]) > 1 {
			return nil, api.NewProblem(http.StatusBadRequest, "invalid_filter", "filter %s is given %d times: a list takes one value", k, len(q[k]))
		}
		v := strings.TrimSpace(q.Get(k))
		field, isIndex := indexParam(k)
		switch {
		case isIndex:
			if v != "" {
				index[field] = v
			}
			continue
		case !slices.Contains(jobFilterFields, k):
			return nil, api.NewProblem(http.StatusBadRequest, "filter_not_bulk",
				"the list's filter %s is not one a bulk job can select by: without it the job would act on more than the list shows; list without it to act on all matching", k)
		case v == "":
			continue
		case strings.HasPrefix(k, "started_") || strings.HasPrefix(k, "wake_"):
			t, ok := formTime(v)
			if !ok {
				return nil, api.NewProblem(http.StatusBadRequest, "invalid_filter", "%s %q is not a time (2026-12-05 09:30, UTC)", k, v)
			}
			v = t
		}
		filter[k] = v
	}
	if len(index) > 0 {
		filter["index"] = index
	}
	return filter, nil
}

// jobForm is the form's action and filter as POST /api/jobs's body, and its fields as they
// were (carried to the confirmation). Only the form's body is read: a query on the POST is
// none of the list's.
func jobForm(c echo.Context) (map[string]any, url.Values, *api.Problem) {
	if err := c.Request().ParseForm(); err != nil {
		return nil, nil, api.NewProblem(http.StatusBadRequest, "invalid_form", "the form cannot be read: %v", err)
	}
	fields, q := url.Values{}, url.Values{}
	for k, v := range c.Request().PostForm {
		switch {
		case k == "csrf":
		case slices.Contains(jobFormFields, k):
			fields[k] = v
		default:
			fields[k], q[k] = v, v
		}
	}
	filter, p := jobFilter(q)
	if p != nil {
		return nil, nil, p
	}
	if fields.Get("force") == "true" {
		filter["force"] = true
	}
	return map[string]any{"action": fields.Get("action"), "filter": filter}, fields, nil
}

// listFilterQuery is a list page's filter, the query it read its rows with less the page's
// place (cursor, limit): what its bulk form carries. refused says why the page offers no bulk
// action — a filter a job cannot take ("" when it can take them all).
func listFilterQuery(q url.Values) (filter url.Values, refused string) {
	filter = url.Values{}
	for k, v := range q {
		if k != "cursor" && k != "limit" && k != "sort" && k != "count" { // the order and the count select nothing
			filter[k] = v
		}
	}
	if _, p := jobFilter(filter); p != nil {
		return filter, p.Detail
	}
	return filter, ""
}

// jobPreviewData is a dry run's answer, with the form that confirms it.
type jobPreviewData struct {
	S      *uiSession
	Sel    control.BulkSelection
	Fields url.Values // the form's fields, carried to the confirmation
	// The action in words: the button's verb, what an item it acts on becomes, and what one
	// with nothing to do is already.
	Button, Done, Already string
	// From the forecast: how many the confirmation acts on (every item matched when there is
	// no forecast), how many will be refused, and the refusals by code, most first.
	Confirm int
	Refused int
	Codes   []codeCount
}

// codeCount is one refusal code of a forecast and how many items it refuses.
type codeCount struct {
	Code string
	N    int
}

// jobWords are an action's words in the preview.
var jobWords = map[control.BulkAction]struct{ button, done, already string }{
	control.BulkCancel: {"Cancel", "cancelled", "already cancelled"},
	control.BulkRetry:  {"Retry", "retried", ""},
	control.BulkDelete: {"Delete", "deleted", ""},
	control.BulkReplay: {"Replay", "replayed", "already replayed"},
}

// newJobPreview reads a dry run's selection and forecast for the preview.
func newJobPreview(s *uiSession, sel control.BulkSelection, fields url.Values) jobPreviewData {
	w := jobWords[sel.Action]
	d := jobPreviewData{S: s, Sel: sel, Fields: fields, Button: w.button, Done: w.done, Already: w.already, Confirm: sel.Count}
	if f := sel.Forecast; f != nil {
		d.Confirm = f.WillApply
		for code, n := range f.Refused {
			d.Refused += n
			d.Codes = append(d.Codes, codeCount{Code: code, N: n})
		}
		slices.SortFunc(d.Codes, func(a, b codeCount) int { return cmp.Or(cmp.Compare(b.N, a.N), strings.Compare(a.Code, b.Code)) })
	}
	return d
}

// jobPreview counts what the form's filter matches (a dry run) and asks to confirm.
func (u *uiServer) jobPreview(c echo.Context) error {
	body, fields, p := jobForm(c)
	if p != nil {
		return u.fail(c, p)
	}
	body["dry_run"] = true
	var out api.JobCreated
	if p := u.call(c, http.MethodPost, "/api/jobs", body, &out); p != nil {
		return u.fail(c, p)
	}
	s, _ := u.session(c)
	return u.render(c, http.StatusOK, "jobs.html", "preview", uiPage{S: s, Data: newJobPreview(s, out.Selection, fields)})
}

// createJob creates the confirmed job and opens its page.
func (u *uiServer) createJob(c echo.Context) error {
	body, _, p := jobForm(c)
	if p != nil {
		return u.fail(c, p)
	}
	var out api.JobCreated
	if p := u.call(c, http.MethodPost, "/api/jobs", body, &out); p != nil {
		return u.fail(c, p)
	}
	if out.Job == nil {
		return u.fail(c, u.internal(c, errNoJob))
	}
	c.Response().Header().Set("HX-Redirect", "/ui/jobs/"+url.PathEscape(out.Job.ID))
	return c.NoContent(http.StatusOK)
}

func (u *uiServer) jobsPage(c echo.Context) error {
	return pagedList(u, c, "/api/jobs", "/ui/jobs", url.Values{"limit": {"50"}}, func(p *api.JobList) string { return p.NextCursor },
		"jobs.html", uiPage{Title: "Jobs", Nav: "jobs"})
}

// jobData is a job's page: its progress and a page of its failures, or of all its items.
type jobData struct {
	View api.JobView
	// Rows are the failures shown, or (All: ?items=all) every item with what became of it;
	// Replay: they are dead letters, not executions.
	Rows     []api.JobItem
	All      bool
	Replay   bool
	Next     string
	Running  bool
	Percent  int
	Finished int
}

func (u *uiServer) job(c echo.Context) (*jobData, *api.Problem) {
	id := c.Param("id")
	q := url.Values{"failures_limit": {"50"}}
	if cur := c.QueryParam("failures_cursor"); cur != "" {
		q.Set("failures_cursor", cur)
	}
	d := &jobData{All: c.QueryParam("items") == "all"}
	if p := u.call(c, http.MethodGet, "/api/jobs/"+url.PathEscape(id)+"?"+q.Encode(), nil, &d.View); p != nil {
		return nil, p
	}
	j := d.View.Job
	d.Running = j.Status == "pending" || j.Status == "running"
	d.Finished = j.Succeeded + j.Failed
	if j.Total > 0 {
		d.Percent = d.Finished * 100 / j.Total
	}
	d.Rows, d.Replay = d.View.Failures.Items, j.Action == control.BulkReplay
	d.Next = nextPage("/ui/jobs/"+url.PathEscape(id), q, d.View.Failures.NextCursor)
	return d, nil
}

func (u *uiServer) jobPage(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	d, p := u.job(c)
	if p != nil {
		return u.fail(c, p)
	}
	if d.All {
		q := pageQuery(c, "100")
		if st := c.QueryParam("state"); st != "" {
			q.Set("state", st)
		}
		var items api.JobItemList
		if p := u.call(c, http.MethodGet, "/api/jobs/"+url.PathEscape(c.Param("id"))+"/items?"+q.Encode(), nil, &items); p != nil {
			return u.fail(c, p)
		}
		q.Set("items", "all")
		d.Rows = items.Items
		d.Next = nextPage("/ui/jobs/"+url.PathEscape(c.Param("id")), q, items.NextCursor)
	}
	return u.render(c, http.StatusOK, "job.html", "", uiPage{Title: "Job " + d.View.Job.ID, Nav: "jobs", S: s, Data: d})
}

// jobProgress is the job's progress region anew (asked every second while it runs).
func (u *uiServer) jobProgress(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	d, p := u.job(c)
	if p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "job.html", "progress", uiPage{S: s, Data: d})
}

// cancelJob cancels the job (POST /api/jobs/{id}/cancel): no item is applied after the batch
// in hand.
func (u *uiServer) cancelJob(c echo.Context) error {
	var j api.Job
	if p := u.call(c, http.MethodPost, "/api/jobs/"+url.PathEscape(c.Param("id"))+"/cancel", nil, &j); p != nil {
		return u.fail(c, p)
	}
	return u.jobProgress(c)
}
