package web

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"plaita/control"
	"plaita/store"
)

// The operations the API has no endpoint for yet — approvals, dead letters, events, schedules,
// the cluster — run here on control, the functions `plaita approval|dlq|event|schedule|status`
// call, after the API's access check for the Route each needs (uiRoutes). When their
// endpoints land, these pages call them as the flow and execution pages call theirs.

func (u *uiServer) opsRoutes(g *echo.Group) {
	g.GET("/approvals", u.approvalsPage)
	g.GET("/deadletters", u.deadLettersPage)
	g.POST("/deadletters/:id/replay", u.replayDeadLetter)
	g.GET("/events", u.eventsPage)
	g.POST("/events", u.publishEvent)
	g.GET("/schedules", u.schedulesPage)
	g.POST("/schedules/:id/enabled", u.setSchedule)
	g.GET("/cluster", u.clusterPage)
}

// opsPage authorizes a page's read and gives its session; a nil session when it has answered
// (the login page, the refusal).
func (u *uiServer) opsPage(c echo.Context, r Route) (*uiSession, *Call, error) {
	s, err := u.page(c)
	if s == nil {
		return nil, nil, err
	}
	call, p := u.authorize(c, r)
	if p != nil {
		return nil, nil, u.fail(c, p)
	}
	return s, call, nil
}

func (u *uiServer) approvalsPage(c echo.Context) error {
	s, call, err := u.opsPage(c, uiRoutes.approvals)
	if s == nil {
		return err
	}
	ctx, cancel := withTimeout(c.Request().Context())
	defer cancel()
	page, err := u.a.d.Plane.Approvals(ctx, call.Tenant, c.QueryParam("cursor"), 50)
	if err != nil {
		return u.fail(c, problemFor(err))
	}
	return u.render(c, http.StatusOK, "approvals.html", "", uiPage{Title: "Approvals", Nav: "approvals", S: s, Data: page})
}

func (u *uiServer) deadLettersPage(c echo.Context) error {
	s, call, err := u.opsPage(c, uiRoutes.deadLetters)
	if s == nil {
		return err
	}
	ctx, cancel := withTimeout(c.Request().Context())
	defer cancel()
	es, err := u.a.d.Plane.DeadLetters(ctx, call.Tenant, false, 100)
	if err != nil {
		return u.fail(c, problemFor(err))
	}
	return u.render(c, http.StatusOK, "deadletters.html", "", uiPage{Title: "Dead letters", Nav: "deadletters", S: s, Data: es})
}

// replayDeadLetter replays one dead letter once (a second replay is refused by the queue); the
// page asks for confirmation first, and the form must say so.
func (u *uiServer) replayDeadLetter(c echo.Context) error {
	call, p := u.authorize(c, uiRoutes.replay)
	if p != nil {
		return u.fail(c, p)
	}
	id := c.Param("id")
	call.Audit.Target = id
	if c.FormValue("confirm") != "yes" {
		return u.fail(c, newProblem(http.StatusBadRequest, "unconfirmed", "replaying dead letter %s needs confirm=yes", id))
	}
	ctx, cancel := withTimeout(c.Request().Context())
	defer cancel()
	res, err := u.a.d.Plane.ReplayDeadLetter(ctx, call.Tenant, false, id)
	if err == nil {
		call.Note("status", res.Status)
		call.Note("execution", res.ExecutionID)
	}
	if p := u.done(ctx, call, err); p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "deadletters.html", "replayed", uiPage{Data: res})
}

type eventsData struct {
	Page      store.EventPage
	Type      string
	Published *control.EventPublished
}

func (u *uiServer) eventsPage(c echo.Context) error {
	s, call, err := u.opsPage(c, uiRoutes.events)
	if s == nil {
		return err
	}
	ctx, cancel := withTimeout(c.Request().Context())
	defer cancel()
	d := eventsData{Type: strings.TrimSpace(c.QueryParam("type"))}
	if d.Page, err = u.a.d.Plane.ListEvents(ctx, control.EventList{Tenant: call.Tenant, Type: d.Type, Limit: 50}); err != nil {
		return u.fail(c, problemFor(err))
	}
	return u.render(c, http.StatusOK, "events.html", "", uiPage{Title: "Events", Nav: "events", S: s, Data: d})
}

func (u *uiServer) publishEvent(c echo.Context) error {
	call, p := u.authorize(c, uiRoutes.publishEvent)
	if p != nil {
		return u.fail(c, p)
	}
	data := strings.TrimSpace(c.FormValue("data"))
	if data == "" {
		data = "{}"
	}
	if !json.Valid([]byte(data)) {
		return u.fail(c, newProblem(http.StatusBadRequest, "invalid_event", "the event's data is not valid JSON"))
	}
	ctx, cancel := withTimeout(c.Request().Context())
	defer cancel()
	ev, err := u.a.d.Plane.PublishEvent(ctx, store.Event{Type: strings.TrimSpace(c.FormValue("type")), TenantID: call.Tenant,
		ID: strings.TrimSpace(c.FormValue("id")), Data: json.RawMessage(data)})
	if err == nil {
		call.Audit.Target = ev.ID
		call.Note("type", ev.Type)
		call.Note("duplicate", ev.Duplicate)
	}
	if p := u.done(ctx, call, err); p != nil {
		return u.fail(c, p)
	}
	return u.render(c, http.StatusOK, "events.html", "published", uiPage{Data: ev})
}

type schedulesData struct {
	Records []store.ScheduleRecord
	Bad     []store.BadSchedule
}

func (u *uiServer) schedulesPage(c echo.Context) error {
	s, call, err := u.opsPage(c, uiRoutes.schedules)
	if s == nil {
		return err
	}
	ctx, cancel := withTimeout(c.Request().Context())
	defer cancel()
	var d schedulesData
	if d.Records, d.Bad, err = u.a.d.Plane.Schedules(ctx, call.Tenant); err != nil {
		return u.fail(c, problemFor(err))
	}
	return u.render(c, http.StatusOK, "schedules.html", "", uiPage{Title: "Schedules", Nav: "schedules", S: s, Data: d})
}

func (u *uiServer) setSchedule(c echo.Context) error {
	call, p := u.authorize(c, uiRoutes.setSchedule)
	if p != nil {
		return u.fail(c, p)
	}
	id, enable := c.Param("id"), c.FormValue("enabled") == "true"
	call.Audit.Target = id
	call.Note("enabled", enable)
	ctx, cancel := withTimeout(c.Request().Context())
	defer cancel()
	rec, changed, err := u.a.d.Plane.SetScheduleEnabled(ctx, call.Tenant, id, enable)
	if err == nil {
		call.Note("changed", changed)
	}
	if p := u.done(ctx, call, err); p != nil {
		return u.fail(c, p)
	}
	s, _ := u.session(c)
	return u.render(c, http.StatusOK, "schedules.html", "schedule-row", uiPage{S: s, Data: rec})
}

type clusterData struct {
	Status control.ClusterStatus
	Error  string
}

func (u *uiServer) clusterPage(c echo.Context) error {
	s, call, err := u.opsPage(c, uiRoutes.cluster)
	if s == nil {
		return err
	}
	ctx, cancel := withTimeout(c.Request().Context())
	defer cancel()
	var d clusterData
	if d.Status, err = u.a.d.Plane.Status(ctx, call.Tenant); err != nil {
		d.Error = err.Error() // a partial status is still worth showing
	}
	return u.render(c, http.StatusOK, "cluster.html", "", uiPage{Title: "Cluster", Nav: "cluster", S: s, Data: d})
}
