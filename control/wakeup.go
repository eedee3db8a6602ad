package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/presence"
	"plaita/queue"
	"plaita/store"
)

// The wake-up report: for a suspended execution, which role wakes it and whether one is
// registered and alive (the registry every role's presence heartbeat writes), and for a due time
// whether its delay-queue entry is there (queue.Delay.Lookup: the member is a pure function of
// the state). A due time alone says nothing about whether anything will fire it; this says.

// The roles that wake executions, by their command names.
const (
	roleWorker   = "worker"
	roleDelay    = "delay"
	roleFilter   = "filter"
	roleSchedule = "schedule"
	roleConsole  = "console"
	roleDev      = "dev" // plaita dev runs every role in one process
)

// WakeRole is how many instances of a role the registry knows.
type WakeRole struct {
	Built     bool     `json:"built"`     // this build has the role
	Alive     int      `json:"alive"`     // registered, fresh heartbeat, status running
	Stopping  int      `json:"stopping"`  // registered, but draining or stopping
	Instances []string `json:"instances"` // the alive ones
}

// WakeDue is a due time (a delay's, or a wait's or an approval's timeout), its delay-queue entry
// and the delay role that sends it.
type WakeDue struct {
	ResumeType  engine.ResumeType `json:"resume_type"`
	Due         time.Time         `json:"due"`
	DueInMillis int64             `json:"due_in_ms"` // negative once it has passed
	// Entry is scheduled | retrying (an enqueue failed; see attempts) | dead (given up) |
	// missing (not in the queue: sent already, or never written) | unknown (unreadable).
	Entry      string     `json:"entry"`
	EntryAt    *time.Time `json:"entry_at,omitempty"` // when the entry is sent
	Attempts   int64      `json:"attempts,omitempty"`
	DeadReason string     `json:"dead_reason,omitempty"`
	// Unschedulable says why the due time cannot be on the delay queue at all (before 1970,
	// the zero time …): its entry is missing because it was never written.
	Unschedulable string `json:"unschedulable,omitempty"`
	Text          string `json:"text"`
}

// WakeUp is the wake-up report of a suspended execution.
type WakeUp struct {
	Kind     string              `json:"kind"` // the suspension: delay | event | approval
	By       string              `json:"by"`   // the role that wakes it: delay | filter | console
	Text     string              `json:"text"`
	Roles    map[string]WakeRole `json:"roles"`
	Due      *WakeDue            `json:"due,omitempty"` // delay: the wake-up itself; event, approval: the timeout
	Problems []string            `json:"problems,omitempty"`
}

// WakeUp builds the report of st; nil when st is not suspended. What cannot be read (the
// registry, the delay queue) is said in Problems, never an error: a show still shows the rest.
func (p *Plane) WakeUp(ctx context.Context, tenant string, st *state.Execution) *WakeUp {
	s := st.Suspend
	if st.Status != state.Suspended || s == nil {
		return nil
	}
	now := p.now()
	w := &WakeUp{Kind: s.Kind, Roles: map[string]WakeRole{}}
	live, err := p.live(ctx)
	if err != nil {
		w.Problems = append(w.Problems, fmt.Sprintf("the registry cannot be read: %v", err))
	}
	count := func(role string) WakeRole {
		r := live.count(role, p.d.Built(role))
		w.Roles[role] = r
		return r
	}
	cmd := p.CommandLine(st.ExecutionID, tenant)
	if s.Due != nil {
		rt := engine.ResumeTimeout
		if s.Kind == state.SuspendDelay {
			rt = engine.ResumeContinue
		}
		w.Due = p.dueReport(ctx, tenant, st, rt, now, count(roleDelay), cmd(rt, ""), w)
	}
	switch s.Kind {
	case state.SuspendDelay:
		w.By = roleDelay
		if w.Due != nil {
			w.Text = w.Due.Text
		}
	case state.SuspendEvent:
		w.By = roleFilter
		w.Text = fmt.Sprintf("an event of type %q — %s", s.EventType, roleText(roleFilter, count(roleFilter),
			"nothing delivers a published event until one runs; the direct resume below delivers one by hand"))
	case state.SuspendApproval:
		w.By = roleConsole
		c := count(roleConsole)
		console := "the console"
		switch {
		case !c.Built:
			console += " (not built yet)"
		default:
			console += " (" + roleText(roleConsole, c, "") + ")"
		}
		w.Text = fmt.Sprintf("an answer through %s or `%s`", console, p.Command(append([]string{"approval", "approve", st.ExecutionID}, tenantArgs(tenant)...)...))
	}
	return w
}

// dueReport looks the due time's delay-queue entry up and says whether anything will send it.
func (p *Plane) dueReport(ctx context.Context, tenant string, st *state.Execution, rt engine.ResumeType, now time.Time,
	delayRole WakeRole, command string, w *WakeUp) *WakeDue {
	s := st.Suspend
	d := &WakeDue{ResumeType: rt, Due: s.Due.UTC(), DueInMillis: s.Due.Sub(now).Milliseconds(), Entry: "unknown"}
	what := "continue it"
	if rt == engine.ResumeTimeout {
		what = "time it out"
	}
	// A due time the queue refuses was never written (the worker's Schedule refuses it too):
	// nothing is looked up, and nothing is said to have been sent.
	var bad *queue.DueRangeError
	if err := queue.CheckDelayDue(*s.Due); errors.As(err, &bad) {
		d.Entry, d.Unschedulable = "missing", bad.Reason
		d.Text = fmt.Sprintf("no delay-queue entry, and none can be written: %s; nothing will %s: `%s`", d.Unschedulable, what, command)
		return d
	}
	entry := queue.DelayEntry{ExecutionID: st.ExecutionID, TenantID: tenant, FlowID: st.FlowID, FlowVersion: st.FlowVersion,
		ResumeType: rt, Node: s.Node, Due: *s.Due, TraceParent: st.TraceParent, TraceState: st.TraceState}
	l, err := p.d.Delay.Lookup(ctx, entry)
	switch {
	case err != nil:
		w.Problems = append(w.Problems, fmt.Sprintf("the delay queue cannot be read: %v", err))
	case l.Scheduled: // even with a :dead record: scheduled again since (a redelivery registers it anew)
		d.Entry, d.Attempts = "scheduled", l.Attempts
		if l.Attempts > 0 {
			d.Entry = "retrying"
		}
		at := l.At
		d.EntryAt = &at
	case l.Dead != nil:
		d.Entry, d.DeadReason = "dead", l.Dead.Reason
	default:
		d.Entry = "missing"
	}
	when := "due in " + RoundDuration(s.Due.Sub(now))
	if !s.Due.After(now) {
		when = "was due " + RoundDuration(now.Sub(*s.Due)) + " ago"
	}
	switch {
	case d.Entry == "dead":
		d.Text = fmt.Sprintf("%s — its delay-queue entry was given up (%s, in %s): nothing will %s; `%s`",
			when, d.DeadReason, p.d.Delay.DeadKey(), what, command)
	case d.Entry == "missing" && s.Due.After(now):
		d.Text = fmt.Sprintf("%s — no delay-queue entry: nothing will %s; `%s`", when, what, command)
	case d.Entry == "missing":
		// Sent (its resume waits in the task stream or runs) or never written (the suspending
		// delivery failed to register it and is redelivered, or it was removed): the queue
		// alone cannot tell which, so neither is claimed.
		d.Text = fmt.Sprintf("%s — not in the delay queue (its wake-up was sent, or never written); if it stays suspended: `%s`", when, command)
	default:
		d.Text = when + " — " + roleText(roleDelay, delayRole, "nothing will "+what+" until one runs (`"+p.Command("delay")+"`)")
		if d.Entry == "retrying" {
			d.Text += fmt.Sprintf("; %d enqueue(s) of its wake-up failed, next try %s", d.Attempts, Relative(d.EntryAt.Sub(now)))
		}
	}
	return d
}

// liveInstances are the registered instances with a fresh heartbeat.
type liveInstances struct{ recs []store.InstanceRecord }

// live reads the registry.
func (p *Plane) live(ctx context.Context) (liveInstances, error) {
	l, err := p.d.Registry.Instances(ctx, p.now(), presence.TTLFactor*presence.DefaultHeartbeatInterval)
	return liveInstances{recs: l.Live}, err
}

// count is how many instances of role are alive or stopping (plaita dev counts for every role).
func (l liveInstances) count(role string, built bool) WakeRole {
	r := WakeRole{Built: built, Instances: []string{}}
	for _, rec := range l.recs {
		if rec.Role != role && rec.Role != roleDev {
			continue
		}
		if rec.Status == presence.StatusRunning {
			r.Alive++
			r.Instances = append(r.Instances, rec.InstanceID)
		} else {
			r.Stopping++
		}
	}
	return r
}

// Alive is how many instances of role the registry knows alive (and stopping).
func (p *Plane) Alive(ctx context.Context, role string) (WakeRole, error) {
	l, err := p.live(ctx)
	return l.count(role, p.d.Built(role)), err
}

// roleText says how many instances of role are alive: "delay role: 1 alive", or "no delay
// role registered" and then none, what that means.
func roleText(role string, r WakeRole, none string) string {
	switch {
	case r.Alive > 0:
		return fmt.Sprintf("%s role: %d alive", role, r.Alive)
	case r.Stopping > 0:
		return fmt.Sprintf("%s role: 0 alive (%d stopping)", role, r.Stopping) + prefixed(": ", none)
	}
	text := fmt.Sprintf("no %s role registered", role)
	if !r.Built {
		text += " (not built yet)"
	}
	return text + prefixed(": ", none)
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
