package web

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"plaita/control"
	"plaita/engine/state"
	"plaita/store/sqlite"
)

// waitPanel is the "why is this waiting?" panel of a non-terminal execution: the one cause,
// from the wake-up report control builds for `plaita execution show` (control/wakeup.go) —
// the event awaited with its match and how long its subscription has waited, a delay's due
// time, an approval and who may answer it — and what blocks it: no live role to wake it, the
// tenant disabled.
type waitPanel struct {
	Kind  string // event | delay | approval | running | pending | tenant_disabled
	Cause string // the headline
	Text  string // the wake-up report's sentence
	// Blockers say why nothing will wake it: no live role of those the wake-up report counts
	// (the rules control's status uses for "unwoken" executions), a delay entry given up.
	// Timeouts say why its timeout will not fire (an event wait or an approval still wakes on
	// its answer).
	Blockers, Timeouts []string
	// Event waits.
	EventType, Match string
	Since            time.Time // when it suspended: its subscription's age
	// Approvals.
	Message, Who string
	// A due time: the delay's, or the wait's or approval's timeout.
	Due     *time.Time
	DueWhat string
	Entry   string // its delay-queue entry: scheduled, retrying, dead, missing
	Roles   []roleCount
	Lines   []string // the report's problems
}

type roleCount struct {
	Role            string
	Alive, Stopping int
	Built           bool
}

// waitPanel builds the panel of st (nil for a terminal execution).
func (u *uiServer) waitPanel(c echo.Context, s *uiSession, st *state.Execution, w *control.WakeUp) *waitPanel {
	if st.Status.Terminal() {
		return nil
	}
	p := &waitPanel{}
	if disabled := u.tenantDisabled(c, s); disabled {
		p.Kind, p.Cause = "tenant_disabled", "tenant "+s.Tenant+" is disabled"
		p.Blockers = []string{"workers do not run a disabled tenant's executions; a platform admin enables it on the Tenants page"}
		return p
	}
	switch {
	case st.Status == state.Suspended && w != nil:
		u.suspendedPanel(p, st, w)
	case st.Status == state.Running || st.Status == state.Pending:
		p.Kind = string(st.Status)
		p.Cause = fmt.Sprintf("%s at node %s", st.Status, st.CurrentNode)
		r, err := u.a.d.Plane.Alive(c.Request().Context(), "worker")
		p.Roles = []roleCount{{Role: "worker", Alive: r.Alive, Stopping: r.Stopping, Built: r.Built}}
		switch {
		case err != nil:
			p.Lines = append(p.Lines, "the registry cannot be read: "+err.Error())
		case r.Alive == 0:
			p.Blockers = append(p.Blockers, "no worker is alive: nothing runs it until one starts (plaita worker)")
		default:
			p.Text = fmt.Sprintf("a worker runs it (%d alive); it moves on when the node returns", r.Alive)
		}
	default:
		p.Kind, p.Cause = string(st.Status), "suspended, with no wake-up report"
	}
	return p
}

// suspendedPanel fills p from the wake-up report of a suspended execution.
func (u *uiServer) suspendedPanel(p *waitPanel, st *state.Execution, w *control.WakeUp) {
	sp := st.Suspend
	p.Kind, p.Text, p.Lines = w.Kind, w.Text, w.Problems
	for _, r := range []string{"filter", "delay", "console"} {
		if rc, ok := w.Roles[r]; ok {
			p.Roles = append(p.Roles, roleCount{Role: r, Alive: rc.Alive, Stopping: rc.Stopping, Built: rc.Built})
		}
	}
	if sp != nil {
		p.Since = sp.Since
	}
	switch w.Kind {
	case state.SuspendEvent:
		p.EventType, p.Match = sp.EventType, sp.Match
		p.Cause = fmt.Sprintf("waiting for an event of type %q", sp.EventType)
		p.DueWhat = "times out"
		if w.Roles["filter"].Alive == 0 {
			p.Blockers = append(p.Blockers, "no filter role is alive: a published event wakes nothing until one runs (plaita filter)")
		}
	case state.SuspendDelay:
		p.Cause, p.DueWhat = "a delay", "continues"
	case state.SuspendApproval:
		p.Cause, p.Message = "waiting for an approval", sp.Message
		p.Who = "an editor or admin of the tenant, on this page or on the Approvals page"
		p.DueWhat = "times out"
	}
	if w.Due != nil {
		due := w.Due.Due
		p.Due, p.Entry = &due, w.Due.Entry
		if w.Kind == state.SuspendDelay {
			p.Cause = "a delay due at " + formatTime(due)
		}
		dr := w.Roles["delay"]
		switch {
		case (w.Due.Entry == "dead" || (w.Due.Entry == "missing" && due.After(u.now()))) && w.Kind == state.SuspendDelay:
			p.Blockers = append(p.Blockers, w.Due.Text)
		case w.Due.Entry == "dead" || (w.Due.Entry == "missing" && due.After(u.now())):
			p.Timeouts = append(p.Timeouts, w.Due.Text)
		case dr.Alive == 0 && w.Due.Entry != "missing" && w.Kind == state.SuspendDelay:
			p.Blockers = append(p.Blockers, "no delay role is alive: nothing will continue it when it is due until one runs (plaita delay)")
		case dr.Alive == 0 && w.Due.Entry != "missing":
			p.Timeouts = append(p.Timeouts, "no delay role is alive: nothing will time it out when it is due until one runs (plaita delay)")
		}
	}
}

// tenantDisabled is whether the pages' tenant is disabled. Only a platform admin gets this
// far in a disabled tenant (a member's requests are refused with tenant_disabled), and only a
// platform admin can read the tenant (GET /api/tenants/{slug}).
func (u *uiServer) tenantDisabled(c echo.Context, s *uiSession) bool {
	if !s.Platform {
		return false
	}
	var t sqlite.Tenant
	if p := u.call(c, http.MethodGet, "/api/tenants/"+url.PathEscape(s.Tenant), nil, &t); p != nil {
		return false
	}
	return t.Status == sqlite.TenantDisabled
}
