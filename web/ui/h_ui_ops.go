package ui

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"plaita/control"
	"plaita/web/api"
)

// Approvals, dead letters, events, schedules and the cluster: the pages over GET/POST
// /api/approvals, /api/dead-letters, /api/events, /api/schedules and /api/cluster/status, the
// routes `plaita approval|dlq|event|schedule|status` answer the same way.

func (u *uiServer) opsRoutes(g *echo.Group) {
	g.GET("/approvals", u.approvalsPage)
	g.GET("/deadletters", u.deadLettersPage)
	g.GET("/deadletters/:id", u.deadLetterPayload)
	g.POST("/deadletters/:id/replay", u.replayDeadLetter)
	g.GET("/events", u.eventsPage)
	g.POST("/events", u.publishEvent)
	g.GET("/cluster", u.clusterPage)
	g.GET("/cluster/instances/:id/status", u.instanceStatus)
	g.POST("/cluster/instances/:id/drain", u.instanceDrain)
	u.scheduleRoutes(g)
}

// pageQuery is a list page's cursor and limit as the API's query (limit: one of the choices
// the pages offer, else def).
func pageQuery(c echo.Context, def string) url.Values {
	q := url.Values{"limit": {def}}
	if n, err := strconv.Atoi(c.QueryParam("limit")); err == nil && n > 0 && n <= 500 {
		q.Set("limit", strconv.Itoa(n))
	}
	if cur := c.QueryParam("cursor"); cur != "" {
		q.Set("cursor", cur)
	}
	return q
}

// nextPage is the page's own URL with the cursor of the next page ("" when there is none).
func nextPage(path string, q url.Values, cursor string) string {
	if cursor == "" {
		return ""
	}
	n := url.Values{}
	for k, v := range q {
		n[k] = v
	}
	n.Set("cursor", cursor)
	return path + "?" + n.Encode()
}

// pagedData is a page of a cursor-paged list: the API's answer, the next page's URL, whether it
// is the first, and the list's filter as the form had it.
type pagedData[T any] struct {
	Page   T
	Next   string
	First  bool
	Filter string
	// Query is the list's filter as the API's query, less the page's place (cursor, limit):
	// the filter form's values, and what a bulk form carries; BulkRefused says why a bulk
	// action is not offered on it (listFilterQuery).
	Query       url.Values
	BulkRefused string
}

// pagedList renders the page of file over GET api?q (the page's cursor and limit, and q's
// filter), with the link to the next page of self (next: the answer's next cursor).
func pagedList[T any](u *uiServer, c echo.Context, api, self string, q url.Values, next func(*T) string, file string, page uiPage) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	for k, v := range pageQuery(c, q.Get("limit")) {
		q[k] = v
	}
	d := pagedData[T]{First: q.Get("cursor") == "", Filter: q.Get("type")}
	d.Query, d.BulkRefused = listFilterQuery(q)
	if p := u.call(c, http.MethodGet, api+"?"+q.Encode(), nil, &d.Page); p != nil {
		return u.fail(c, p)
	}
	d.Next = nextPage(self, q, next(&d.Page))
	page.S, page.Data = s, d
	return u.render(c, http.StatusOK, file, "", page)
}

func (u *uiServer) approvalsPage(c echo.Context) error {
	return pagedList(u, c, "/api/approvals", "/ui/approvals", url.Values{"limit": {"50"}}, func(p *api.ApprovalList) string { return p.NextCursor },
		"approvals.html", uiPage{Title: "Approvals", Nav: "approvals"})
}

// deadLettersPage lists the tenant's dead letters of a reason, a kind and a flow when the
// page's query gives them (GET /api/dead-letters's filter): its bulk replay acts on what it
// lists.
func (u *uiServer) deadLettersPage(c echo.Context) error {
	q := url.Values{"limit": {"50"}}
	for _, k := range []string{"reason", "kind", "flow_id"} {
		if v := strings.TrimSpace(c.QueryParam(k)); v != "" {
			q.Set(k, v)
		}
	}
	// Every tenant's: a platform admin's view (the API refuses anyone else's).
	if c.QueryParam("all_tenants") == "true" {
		q.Set("all_tenants", "true")
	}
	return pagedList(u, c, "/api/dead-letters", "/ui/deadletters", q, func(p *api.DeadLetterList) string { return p.NextCursor },
		"deadletters.html", uiPage{Title: "Dead letters", Nav: "deadletters"})
}

// deadLetterPayload is one dead letter's payload, on demand (GET /api/dead-letters/{id}).
func (u *uiServer) deadLetterPayload(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	var e api.DeadLetter
	if p := u.call(c, http.MethodGet, "/api/dead-letters/"+url.PathEscape(c.Param("id"))+allTenantsQuery(c), nil, &e); p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "deadletters.html", "payload", uiPage{S: s, Data: e})
}

// replayDeadLetter replays one dead letter once (POST /api/dead-letters/{id}/replay, an
// admin's); the page asks for confirmation first, and the form must say so.
func (u *uiServer) replayDeadLetter(c echo.Context) error {
	id := c.Param("id")
	if c.FormValue("confirm") != "yes" {
		return u.fail(c, api.NewProblem(http.StatusBadRequest, "unconfirmed", "replaying dead letter %s needs confirm=yes", id))
	}
	var res api.ReplayResult
	if p := u.call(c, http.MethodPost, "/api/dead-letters/"+url.PathEscape(id)+"/replay"+allTenantsQuery(c), nil, &res); p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "deadletters.html", "replayed", uiPage{Data: res})
}

// allTenantsQuery carries a platform admin's every-tenant view to the API's call on one of
// its items ("" otherwise; the API refuses it to anyone else).
func allTenantsQuery(c echo.Context) string {
	if c.QueryParam("all_tenants") == "true" {
		return "?all_tenants=true"
	}
	return ""
}

func (u *uiServer) eventsPage(c echo.Context) error {
	q := url.Values{"limit": {"50"}}
	if t := strings.TrimSpace(c.QueryParam("type")); t != "" {
		q.Set("type", t)
	}
	return pagedList(u, c, "/api/events", "/ui/events", q, func(p *api.EventList) string { return p.NextCursor },
		"events.html", uiPage{Title: "Events", Nav: "events"})
}

// publishEvent publishes the form's event (POST /api/events); empty data is {}.
func (u *uiServer) publishEvent(c echo.Context) error {
	data := strings.TrimSpace(c.FormValue("data"))
	if data == "" {
		data = "{}"
	}
	if !json.Valid([]byte(data)) {
		return u.fail(c, api.NewProblem(http.StatusBadRequest, "invalid_event", "the event's data is not valid JSON"))
	}
	body := map[string]any{"type": strings.TrimSpace(c.FormValue("type")), "data": json.RawMessage(data)}
	if id := strings.TrimSpace(c.FormValue("id")); id != "" {
		body["id"] = id
	}
	var ev api.EventPublished
	if p := u.call(c, http.MethodPost, "/api/events", body, &ev); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Trigger", "events-changed") // the recent events show it
	return u.render(c, http.StatusOK, "events.html", "published", uiPage{Data: ev})
}

func (u *uiServer) clusterPage(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	var st control.ClusterStatus
	if p := u.call(c, http.MethodGet, "/api/cluster/status?tenant="+url.QueryEscape(s.Tenant), nil, &st); p != nil {
		return u.failRefresh(c, p, "cluster-live")
	}
	// The page refreshes itself every few seconds: htmx takes #cluster-live of the whole page.
	return u.render(c, http.StatusOK, "cluster.html", "", uiPage{Title: "Cluster", Nav: "cluster", S: s, Data: st})
}

// instanceStatus asks one instance for its status over its control channel (GET
// /api/cluster/instances/{id}/status) and shows the answer in its row.
func (u *uiServer) instanceStatus(c echo.Context) error {
	var ans control.InstanceAnswer
	if p := u.call(c, http.MethodGet, "/api/cluster/instances/"+url.PathEscape(c.Param("id"))+"/status", nil, &ans); p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "cluster.html", "instance-answer", uiPage{Data: ans})
}

// instanceDrain asks one instance to drain and exit, as SIGTERM does (POST
// /api/cluster/instances/{id}/drain, after the page's confirmation).
func (u *uiServer) instanceDrain(c echo.Context) error {
	var ans control.InstanceAnswer
	if p := u.call(c, http.MethodPost, "/api/cluster/instances/"+url.PathEscape(c.Param("id"))+"/drain", nil, &ans); p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "cluster.html", "instance-answer", uiPage{Data: ans})
}

// ---- schedules ----

func (u *uiServer) scheduleRoutes(g *echo.Group) {
	g.GET("/schedules", u.schedulesPage)
	g.POST("/schedules", u.createSchedule)
	g.GET("/schedules/:id", u.schedulePage)
	g.POST("/schedules/:id", u.updateSchedule)
	g.POST("/schedules/:id/enabled", u.setSchedule)
	g.POST("/schedules/:id/delete", u.deleteSchedule)
	g.POST("/schedules/:id/run", u.runSchedule)
}

func (u *uiServer) schedulesPage(c echo.Context) error {
	return pagedList(u, c, "/api/schedules", "/ui/schedules", url.Values{"limit": {"100"}}, func(p *api.ScheduleList) string { return p.NextCursor },
		"schedules.html", uiPage{Title: "Schedules", Nav: "schedules"})
}

// scheduleForm is the schedule form's fields as the API's body: every field given (an empty
// version is the latest, empty input is {}); nil with the problem when the input is no JSON.
func scheduleForm(c echo.Context) (map[string]any, *api.Problem) {
	input := strings.TrimSpace(c.FormValue("input"))
	if input == "" {
		input = "{}"
	}
	if !json.Valid([]byte(input)) {
		return nil, api.NewProblem(http.StatusBadRequest, "invalid_input", "the schedule's input is not valid JSON")
	}
	return map[string]any{"cron": strings.TrimSpace(c.FormValue("cron")), "time_zone": strings.TrimSpace(c.FormValue("time_zone")),
		"flow_id": strings.TrimSpace(c.FormValue("flow_id")), "flow_version": strings.TrimSpace(c.FormValue("flow_version")),
		"input": json.RawMessage(input), "enabled": c.FormValue("enabled") == "true"}, nil
}

// createSchedule creates the form's schedule (POST /api/schedules) and opens its page.
func (u *uiServer) createSchedule(c echo.Context) error {
	body, p := scheduleForm(c)
	if p != nil {
		return u.fail(c, p)
	}
	if id := strings.TrimSpace(c.FormValue("id")); id != "" {
		body["id"] = id
	}
	var added api.ScheduleAdded
	if p := u.call(c, http.MethodPost, "/api/schedules", body, &added); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Redirect", "/ui/schedules/"+url.PathEscape(added.ID)+"?saved=created")
	return c.NoContent(http.StatusOK)
}

// scheduleData is one schedule's page: its firing state and the form that edits it.
type scheduleData struct {
	Rec   api.Schedule
	Input string
	Saved string
	// Then are the ticks after the next one, in UTC and in the schedule's zone: the cron
	// spec read as the times it fires.
	Then []scheduleTick
	// Fires are its newest past ticks with their executions (GET /api/schedules/{id}/fires);
	// FiresProblem says why they could not be read.
	Fires        []control.ScheduleFireRow
	FiresProblem string
}

// scheduleTick is one tick as the page shows it.
type scheduleTick struct {
	At    time.Time
	Local string // in the schedule's time zone, when it has one
}

// scheduleThen is how many ticks after the next one a schedule's page lists.
const scheduleThen = 4

func (u *uiServer) schedulePage(c echo.Context) error {
	s, err := u.page(c)
	if s == nil {
		return err
	}
	d := scheduleData{Saved: c.QueryParam("saved")}
	if p := u.call(c, http.MethodGet, "/api/schedules/"+url.PathEscape(c.Param("id")), nil, &d.Rec); p != nil {
		return u.fail(c, p)
	}
	d.Input = "{}"
	if len(d.Rec.Input) > 0 {
		d.Input = pretty(d.Rec.Input)
	}
	var fires api.ScheduleFires
	if p := u.call(c, http.MethodGet, "/api/schedules/"+url.PathEscape(d.Rec.ID)+"/fires?limit=10", nil, &fires); p != nil {
		d.FiresProblem = p.Detail
	}
	d.Fires = fires.Items
	if !d.Rec.Next.IsZero() {
		// A spec the API answered with is one it parsed: an error here leaves the list out.
		ticks, _ := control.Ticks(d.Rec.Cron, d.Rec.TimeZone, d.Rec.Next, scheduleThen)
		loc, _ := time.LoadLocation(d.Rec.TimeZone)
		for _, t := range ticks {
			tick := scheduleTick{At: t}
			if d.Rec.TimeZone != "" && loc != nil {
				tick.Local = t.In(loc).Format("2006-01-02 15:04 MST")
			}
			d.Then = append(d.Then, tick)
		}
	}
	return u.render(c, http.StatusOK, "schedule.html", "", uiPage{Title: "Schedule " + d.Rec.ID, Nav: "schedules", S: s, Data: d})
}

// updateSchedule saves the form (PATCH /api/schedules/{id}: a new calendar fires only its
// ticks after the change) and shows what changed.
func (u *uiServer) updateSchedule(c echo.Context) error {
	body, p := scheduleForm(c)
	if p != nil {
		return u.fail(c, p)
	}
	var up api.ScheduleUpdated
	if p := u.call(c, http.MethodPatch, "/api/schedules/"+url.PathEscape(c.Param("id")), body, &up); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Trigger", "schedule-changed") // the firing panel shows the new cron and revision
	return u.render(c, http.StatusOK, "schedule.html", "saved", uiPage{Data: up})
}

// setSchedule enables or disables a schedule (POST /api/schedules/{id}/enable|disable) and
// answers its row anew.
func (u *uiServer) setSchedule(c echo.Context) error {
	verb := "disable"
	if c.FormValue("enabled") == "true" {
		verb = "enable"
	}
	var up api.ScheduleUpdated
	if p := u.call(c, http.MethodPost, "/api/schedules/"+url.PathEscape(c.Param("id"))+"/"+verb, nil, &up); p != nil {
		return u.fail(c, p)
	}
	s, _ := u.session(c)
	return u.render(c, http.StatusOK, "schedules.html", "schedule-row", uiPage{S: s, Data: up.Schedule})
}

// deleteSchedule deletes a schedule (DELETE /api/schedules/{id}) after the page's confirmation.
func (u *uiServer) deleteSchedule(c echo.Context) error {
	id := c.Param("id")
	if c.FormValue("confirm") != "yes" {
		return u.fail(c, api.NewProblem(http.StatusBadRequest, "unconfirmed", "deleting schedule %s needs confirm=yes", id))
	}
	if p := u.call(c, http.MethodDelete, "/api/schedules/"+url.PathEscape(id), nil, nil); p != nil {
		return u.fail(c, p)
	}
	c.Response().Header().Set("HX-Redirect", "/ui/schedules")
	return c.NoContent(http.StatusOK)
}

// runSchedule starts what the schedule starts, now and once (POST /api/schedules/{id}/run), and
// links the execution.
func (u *uiServer) runSchedule(c echo.Context) error {
	var out api.ExecutionStarted
	if p := u.call(c, http.MethodPost, "/api/schedules/"+url.PathEscape(c.Param("id"))+"/run", nil, &out); p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "schedule.html", "ran", uiPage{Data: out})
}
