package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"plaita/control"
	"plaita/engine/state"
	"plaita/model"
	"plaita/web/api"
)

// waitPanel is the "why is this waiting?" panel of a non-terminal execution: the one cause,
// from what GET /api/executions/{id} reports — for a suspended one the wake-up report control
// builds for `plaita execution show` (control/wakeup.go: the event awaited with its match and
// how long its subscription has waited, a delay's due time, an approval and who may answer
// it), for a running one its progress (control/progress.go: its node's retry back-off, the
// workers alive), for a queued one what holds its start (the tenant's running quota, a config
// family no live worker runs) — and what blocks it: no live role to wake it, the tenant
// disabled.
type waitPanel struct {
	Kind  string // event | delay | approval | running | pending | retry | queued | quota | family_mismatch | tenant_disabled
	Cause string // the headline
	Text  string // the report's sentence
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
	// A due time: the delay's, the wait's or approval's timeout, a retry's next attempt.
	Due     *time.Time
	DueWhat string
	Entry   string // its delay-queue entry: scheduled, retrying, dead, missing
	Detail  string // a retry: the failed attempt's entry (its error)
	Roles   []roleCount
	Lines   []string // the report's problems
}

type roleCount struct {
	Role            string
	Alive, Stopping int
	Built           bool
}

func wakeRole(role string, r control.WakeRole) roleCount {
	return roleCount{Role: role, Alive: r.Alive, Stopping: r.Stopping, Built: r.Built}
}

// waitPanel builds the panel of the execution v shows (nil for a terminal one).
func (u *uiServer) waitPanel(c echo.Context, s *uiSession, v *api.ExecutionView) *waitPanel {
	st := v.Execution
	if st != nil && st.Status.Terminal() || st == nil && v.Queued == nil {
		return nil
	}
	p := &waitPanel{}
	if disabled := u.tenantDisabled(c, s); disabled {
		p.Kind, p.Cause = "tenant_disabled", "tenant "+s.Tenant+" is disabled"
		p.Blockers = []string{"workers do not run a disabled tenant's executions; a platform admin enables it on the Tenants page"}
		return p
	}
	switch {
	case v.Queued != nil:
		queuedPanel(p, v.Queued)
	case st.Status == state.Suspended && v.Waiting != nil:
		u.suspendedPanel(p, st, v.Waiting)
	case v.Progress != nil:
		progressPanel(p, st, v.Progress, u.a.LocalMode())
	default:
		p.Kind, p.Cause = string(st.Status), "suspended, with no wake-up report"
	}
	return p
}

// queuedPanel: a start no worker has run yet, and what holds it.
func queuedPanel(p *waitPanel, q *control.QueuedView) {
	p.Kind, p.Cause = "queued", "queued: no worker has started it yet" // the page says q.Text above the panel
	p.Roles = []roleCount{{Role: "worker", Alive: q.WorkersAlive, Built: true}}
	if q.WorkersAlive == 0 {
		p.Blockers = append(p.Blockers, "no worker is alive: nothing runs it until one starts (plaita worker)")
	}
	w := q.Wait
	switch {
	case w == nil:
	case w.Family != nil:
		p.Kind, p.Cause = "family_mismatch", "a config-family mismatch holds its start pending"
		p.Blockers = append(p.Blockers, w.Family.Text)
	case w.Quota != nil:
		if w.Quota.Full {
			p.Kind = "quota"
			p.Cause = fmt.Sprintf("tenant %s is over its running quota: %d running, limit %d", w.Quota.TenantID, w.Quota.Running, w.Quota.Limit.Limit)
			p.Lines = append(p.Lines, fmt.Sprintf("the limit comes from %s", w.Quota.Source))
		}
		if w.DeferCount > 0 {
			p.Lines = append(p.Lines, fmt.Sprintf("a worker deferred this start %d time(s) for the tenant's running quota; it starts when one of the tenant's executions ends or suspends", w.DeferCount))
		}
	}
}

// progressPanel: a running or pending execution — in its node's retry back-off, or running a
// node on a worker, or with no worker alive. In local mode the worker is the console's own.
func progressPanel(p *waitPanel, st *state.Execution, pr *control.Progress, local bool) {
	p.Kind, p.Text, p.Lines = string(st.Status), pr.Text, pr.Problems
	p.Cause = fmt.Sprintf("%s at node %s", st.Status, st.CurrentNode)
	if local {
		p.Cause += ", running in the console's process (local mode)"
	}
	p.Roles = []roleCount{wakeRole("worker", pr.Workers)}
	if r := pr.Retry; r != nil {
		p.Kind, p.Detail, p.Text = "retry", r.Detail, "" // the cause, the due time and the attempt's entry say it all
		p.Cause = fmt.Sprintf("a retry back-off: attempt %d of %d of node %s failed", r.Attempt, r.MaxAttempts, r.Node)
		if r.MaxAttempts == 0 {
			p.Cause = fmt.Sprintf("a retry back-off: node %s failed %d time(s)", r.Node, r.Attempt)
		}
		if !r.Next.IsZero() {
			next := r.Next
			p.Due, p.DueWhat = &next, "tries again"
		}
	}
	if pr.Workers.Alive == 0 && len(pr.Problems) == 0 {
		p.Blockers = append(p.Blockers, "no worker is alive: nothing runs it until one starts (plaita worker)")
	}
}

// suspendedPanel fills p from the wake-up report of a suspended execution.
func (u *uiServer) suspendedPanel(p *waitPanel, st *state.Execution, w *control.WakeUp) {
	sp := st.Suspend
	p.Kind, p.Text, p.Lines = w.Kind, w.Text, w.Problems
	for _, r := range []string{"filter", "delay", "console"} {
		if rc, ok := w.Roles[r]; ok {
			p.Roles = append(p.Roles, wakeRole(r, rc))
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
		u.duePanel(p, w)
	}
}

// duePanel adds a suspension's due time and what keeps it from firing.
func (u *uiServer) duePanel(p *waitPanel, w *control.WakeUp) {
	due := w.Due.Due
	p.Due, p.Entry = &due, w.Due.Entry
	if w.Kind == state.SuspendDelay {
		p.Cause = "a delay due at " + formatTime(due)
	}
	dr := w.Roles["delay"]
	lost := w.Due.Entry == "dead" || (w.Due.Entry == "missing" && due.After(u.now()))
	switch {
	case lost && w.Kind == state.SuspendDelay:
		p.Blockers = append(p.Blockers, w.Due.Text)
	case lost:
		p.Timeouts = append(p.Timeouts, w.Due.Text)
	case dr.Alive == 0 && w.Due.Entry != "missing" && w.Kind == state.SuspendDelay:
		p.Blockers = append(p.Blockers, "no delay role is alive: nothing will continue it when it is due until one runs (plaita delay)")
	case dr.Alive == 0 && w.Due.Entry != "missing":
		p.Timeouts = append(p.Timeouts, "no delay role is alive: nothing will time it out when it is due until one runs (plaita delay)")
	}
}

// tenantDisabled is whether the pages' tenant is disabled. Only a platform admin gets this
// far in a disabled tenant (a member's requests are refused with tenant_disabled), and only a
// platform admin can read the tenant (GET /api/tenants/{slug}).
func (u *uiServer) tenantDisabled(c echo.Context, s *uiSession) bool {
	if !s.Platform {
		return false
	}
	var t model.Tenant
	if p := u.call(c, http.MethodGet, "/api/tenants/"+url.PathEscape(s.Tenant), nil, &t); p != nil {
		return false
	}
	return t.Status == model.TenantDisabled
}
