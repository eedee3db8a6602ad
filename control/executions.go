package control

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/model"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
)

// StartRequest starts a new execution: of Definition (published first, under Version or its
// own), or else of the published FlowID (Version, "" = the latest).
type StartRequest struct {
	Tenant     string
	Definition []byte
	FlowID     string
	Version    string
	Input      json.RawMessage // nil: {}
	// ExecutionID is the id the start carries: "" mints a new one. A producer that must not
	// make a second execution when it retries (the console's Idempotency-Key) passes the same
	// id every time: a worker given a start whose state exists continues that execution.
	ExecutionID string
}

// Started is a start enqueued.
type Started struct {
	ExecutionID string `json:"execution_id"`
	TenantID    string `json:"tenant_id"`
	FlowID      string `json:"flow_id"`
	FlowVersion string `json:"flow_version"`
	Published   bool   `json:"published"`
	Already     *bool  `json:"already_published,omitempty"` // set when a definition was given
	Queue       string `json:"queue"`
	MessageID   string `json:"message_id"`
	// WorkersAlive is how many workers the registry knows alive: with none, nothing runs it yet.
	WorkersAlive int `json:"workers_alive"`
	// Replayed: the idempotency key named an execution that exists already; nothing was
	// enqueued (StartOnce).
	Replayed bool `json:"replayed"`
	// Dispatch is the capacity-dispatch decision, when capacity dispatch is on.
	Dispatch *DispatchDecision `json:"dispatch,omitempty"`
	// EnqueueRetries is how many times the start was sent again after the connection failed
	// under its XADD (enqueueStart).
	EnqueueRetries int          `json:"enqueue_retries,omitempty"`
	Flow           *engine.Flow `json:"-"`
}

// Start publishes (when a definition is given) and enqueues a start with a minted execution id;
// a worker runs it. A tenant at its running limit is refused (Limited) before anything is
// written (control/quota.go).
func (p *Plane) Start(ctx context.Context, req StartRequest) (Started, error) {
	tenant, err := checkStart(p, req)
	if err != nil {
		return Started{}, err
	}
	out := Started{TenantID: tenant, Queue: p.QueueName()}
	if req.Definition != nil {
		// A start refused by the quota publishes nothing either.
		if err := p.admitStart(ctx, tenant); err != nil {
			return Started{}, err
		}
		pub, err := p.PublishFlow(ctx, tenant, req.Definition, req.Version)
		if err != nil {
			return Started{}, err
		}
		already := pub.Result == store.AlreadyPublished
		out.Flow, out.FlowVersion, out.Published, out.Already = pub.Flow, pub.Version, pub.Result == store.Published, &already
	} else if out.Flow, out.FlowVersion, err = p.PublishedFlow(ctx, tenant, req.FlowID, req.Version); err != nil {
		return Started{}, err
	} else if err := p.admitStart(ctx, tenant); err != nil {
		return Started{}, err
	}
	out.FlowID = out.Flow.ID
	input := req.Input
	if input == nil {
		input = json.RawMessage(`{}`)
	}
	out.ExecutionID = req.ExecutionID
	if out.ExecutionID == "" {
		out.ExecutionID = engine.NewExecutionID()
	}
	env := queue.Envelope{Kind: queue.KindStart, TenantID: tenant, FlowID: out.FlowID, FlowVersion: out.FlowVersion,
		ExecutionID: out.ExecutionID, Input: input}
	dispatch := p.planStart(ctx, tenant, &env)
	out.MessageID, out.EnqueueRetries, err = p.enqueueStart(ctx, tenant, env)
	if errors.Is(err, queue.ErrInputTooLarge) || errors.Is(err, queue.ErrBadInput) {
		return Started{}, refuse(Invalid, "invalid_input", err, "input: %v", err)
	}
	if err != nil {
		return Started{}, err
	}
	p.recordDispatch(ctx, dispatch, out.MessageID)
	out.Dispatch = dispatch
	if dispatch != nil && dispatch.live != nil {
		// The registry the decision read: a start reads it once.
		out.WorkersAlive = liveInstances{recs: dispatch.live}.count(roleWorker, true).Alive
	} else if workers, err := p.Alive(ctx, roleWorker); err == nil {
		out.WorkersAlive = workers.Alive
	} else {
		out.WorkersAlive = -1 // unknown: the registry cannot be read
	}
	return out, nil
}

// checkStart checks a start's tenant and the execution id it carries, in both modes.
func checkStart(ops interface{ Tenant(string) (string, error) }, req StartRequest) (string, error) {
	tenant, err := ops.Tenant(req.Tenant)
	if err != nil {
		return "", err
	}
	if req.ExecutionID != "" {
		if err := keys.ValidID(req.ExecutionID); err != nil {
			return "", refuse(Invalid, "invalid_id", err, "%q is not an execution id: %v", req.ExecutionID, err)
		}
	}
	return tenant, nil
}

// startEnqueueBackoff are the waits before a start's enqueue is sent again after its
// connection failed: rueidis does not retry a write, and the first XADD on a connection Redis
// closed (a restart, a failover) fails although the next one, on a new connection, would pass.
var startEnqueueBackoff = []time.Duration{50 * time.Millisecond, 250 * time.Millisecond}

// enqueueStart enqueues a start, sending it again (at most len(startEnqueueBackoff) times, and
// never past ctx) when the connection failed under it. It is the same envelope with the same
// execution id every time, so a first XADD that did reach Redis before its answer was lost
// makes no second execution: the worker given the start again continues the one it created.
// An answer of Redis (an error reply) or a refused envelope is not retried.
func (p *Plane) enqueueStart(ctx context.Context, tenant string, env queue.Envelope) (string, int, error) {
	for retries := 0; ; retries++ {
		id, err := p.enqueue(ctx, tenant, env)
		if err == nil || retries == len(startEnqueueBackoff) || !queue.IsConnectionFailure(err) {
			return id, retries, err
		}
		select {
		case <-ctx.Done():
			return "", retries, err
		case <-time.After(startEnqueueBackoff[retries]):
		}
	}
}

// waitPollInterval is how often WaitSettled and WaitEnded read the state.
const waitPollInterval = 100 * time.Millisecond

// WaitSettled polls the state until it is terminal or suspended, or until timeout. On a timeout
// it returns the last state read (nil when none was) and an error.
func (p *Plane) WaitSettled(ctx context.Context, tenant, id string, timeout time.Duration) (*state.Execution, error) {
	return p.wait(ctx, tenant, id, timeout, false)
}

// WaitEnded is WaitSettled past suspensions: it returns once the execution is completed, in
// error or cancelled (`plaita start --wait --until`), or at the timeout, whose error says on
// what a suspended one still waits.
func (p *Plane) WaitEnded(ctx context.Context, tenant, id string, timeout time.Duration) (*state.Execution, error) {
	return p.wait(ctx, tenant, id, timeout, true)
}

// wait is the one loop of WaitSettled and WaitEnded; pastSuspensions keeps it waiting while
// the execution is suspended.
func (p *Plane) wait(ctx context.Context, tenant, id string, timeout time.Duration, pastSuspensions bool) (*state.Execution, error) {
	ts, err := p.tenantStore(tenant)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		last         *state.Execution
		unregistered time.Time // when a suspended event wait was first seen without its subscription
	)
	for {
		st, err := ts.Load(ctx, id)
		switch {
		case err == nil:
			last = st
			if st.Status.Terminal() || st.Status == state.Suspended && !pastSuspensions && waitRegistered(ctx, ts, st, &unregistered) {
				return st, nil
			}
		case errors.Is(err, store.ErrNotFound), model.IsTransient(err) && ctx.Err() == nil:
		default:
			return last, err
		}
		select {
		case <-ctx.Done():
			status := "not picked up by a worker yet"
			if last != nil {
				status = "still " + DescribeStatus(last) // suspended: on what, running: where
			}
			return last, fmt.Errorf("%s after %s (--timeout %s)", status, RoundDuration(timeout), strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64))
		case <-time.After(waitPollInterval):
		}
	}
}

// registerGrace bounds how long a wait for a suspension waits for an event wait's subscription
// after its state says suspended: the worker writes it a round trip later; one that never comes
// (its write failed: the reconciler and the worker's redelivery repair it) does not hold the
// caller.
const registerGrace = 2 * time.Second

// waitRegistered reports whether st, suspended, waits with what wakes it in place: an event wait
// once its subscription is registered — a script that publishes the event as soon as `--wait`
// returns must find the wait counted (and woken by the filter's notification, not the
// reconciler minutes later) — or after registerGrace; any other suspension at once.
func waitRegistered(ctx context.Context, ts *store.TenantStore, st *state.Execution, since *time.Time) bool {
	if st.Suspend == nil || st.Suspend.Kind != state.SuspendEvent {
		return true
	}
	if ok, err := ts.SubscriptionRegistered(ctx, st.ExecutionID, time.Now()); ok || err != nil {
		return true
	}
	if since.IsZero() {
		*since = time.Now()
	}
	return time.Since(*since) >= registerGrace
}

// load reads an execution: NotFound when there is none; a *store.CorruptStateError as it is
// when its state cannot be read (each operation decides what it can still do).
func (p *Plane) load(ctx context.Context, tenant, id string) (*store.TenantStore, *state.Execution, error) {
	if err := keys.ValidID(id); err != nil {
		return nil, nil, refuse(Invalid, "invalid_id", err, "%q is not an execution id: %v", id, err)
	}
	ts, err := p.tenantStore(tenant)
	if err != nil {
		return nil, nil, err
	}
	st, err := ts.Load(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return ts, nil, refuse(NotFound, "execution_not_found", err, "no execution %s in tenant %s", id, ts.Tenant())
	case err != nil:
		return ts, nil, err
	}
	return ts, st, nil
}

// unreadable is the refusal of an operation that needs a state that cannot be read.
func (p *Plane) unreadable(ce *store.CorruptStateError, tenant string) *Refusal {
	ref := refuse(Conflict, "state_corrupt", ce, "%v: no worker can run it; `%s` prints what is stored, `%s` ends it, `%s` removes it", ce,
		p.ExecutionCommandLine("show", ce.ID, tenant), p.ExecutionCommandLine("cancel", ce.ID, tenant), p.ExecutionCommandLine("delete", ce.ID, tenant))
	return ref
}

// Shown is an execution as `show` gives it: the state as stored, plus the wake-up report of a
// suspended one; or, when the state cannot be read, what is stored (Corrupt); or, when it has
// no state yet but its start waits in the task stream, that (Queued).
type Shown struct {
	*state.Execution
	WakeUp *WakeUp `json:"wake_up,omitempty"`
	// Progress is a running or pending one's report (control/progress.go); Timers what will
	// happen to it by itself, and when.
	Progress *Progress    `json:"progress,omitempty"`
	Timers   []Timer      `json:"timers,omitempty"`
	Corrupt  *CorruptView `json:"-"`
	Queued   *QueuedView  `json:"-"`
}

// QueuedView is an execution enqueued and not started: no worker has written its state yet.
type QueuedView struct {
	ExecutionID  string     `json:"execution_id"`
	TenantID     string     `json:"tenant_id"`
	Status       string     `json:"status"` // "queued"
	Task         QueuedTask `json:"task"`
	WorkersAlive int        `json:"workers_alive"`
	Text         string     `json:"text"`
	// Wait is what holds it besides a busy worker: the tenant's running quota, a config
	// family no live worker runs (control/progress.go).
	Wait *QueuedWait `json:"wait,omitempty"`
}

// queuedSearch bounds how many stream entries Show looks through for a queued start.
const queuedSearch = 10000

// Show reads an execution with its wake-up report.
func (p *Plane) Show(ctx context.Context, tenant, id string) (Shown, error) {
	ts, st, err := p.load(ctx, tenant, id)
	var ce *store.CorruptStateError
	switch {
	case errors.As(err, &ce):
		v := p.newCorruptView(ce, ts.Tenant())
		return Shown{Corrupt: &v}, nil
	case errors.Is(err, store.ErrNotFound) && p.d.Queue != nil:
		if q, ok, qerr := p.queued(ctx, ts.Tenant(), id); qerr != nil {
			return Shown{}, qerr
		} else if ok {
			if q.Wait = p.queuedWait(ctx, ts.Tenant(), q); q.Wait != nil {
				q.Text += "; " + q.Wait.Text
			}
			return Shown{Queued: q}, nil
		}
		// A worker may have taken the start, saved its state and settled its task between the
		// two reads (no state yet, then no task any more): the state is there now.
		again, lerr := ts.Load(ctx, id)
		switch {
		case errors.As(lerr, &ce):
			v := p.newCorruptView(ce, ts.Tenant())
			return Shown{Corrupt: &v}, nil
		case lerr != nil:
			return Shown{}, err
		}
		st = again
	case err != nil:
		return Shown{}, err
	}
	out := Shown{Execution: st, WakeUp: p.WakeUp(ctx, ts.Tenant(), st), Progress: p.Progress(ctx, ts.Tenant(), st)}
	out.Timers = p.Timers(st, out.WakeUp, out.Progress)
	return out, nil
}

// queued finds an execution's task in the stream and says who has it.
func (p *Plane) queued(ctx context.Context, tenant, id string) (*QueuedView, bool, error) {
	task, ok, err := p.d.Queue.FindTask(ctx, tenant, id, queuedSearch)
	if err != nil || !ok {
		return nil, false, err
	}
	v := &QueuedView{ExecutionID: id, TenantID: tenant, Status: "queued", Task: QueuedTask{ID: task.ID, Kind: string(task.Kind),
		Pending: task.Pending, Consumer: task.Consumer, Idle: task.Idle, Deliveries: task.Deliveries, ConfigFamily: task.ConfigFamily,
		QuotaDeferCount: task.QuotaDeferCount}}
	workers, werr := p.Alive(ctx, roleWorker)
	v.WorkersAlive = workers.Alive
	alive := fmt.Sprintf("workers alive: %d", workers.Alive)
	switch {
	case werr != nil:
		alive = fmt.Sprintf("the registry cannot be read: %v", werr)
	case workers.Alive == 0:
		alive += " (start one: " + p.Command("worker") + ")"
	}
	v.Text = "queued — not taken by a worker yet; " + alive
	if task.Pending {
		v.Text = fmt.Sprintf("queued — taken by %s %s ago, not started yet; %s", task.Consumer, RoundDuration(task.Idle), alive)
	}
	return v, true, nil
}

// ListRequest asks for a page of the tenant's executions, newest first, of one status and one
// flow when they are given, started in a time range, indexed under field values
// (listfilter.go).
type ListRequest struct {
	Cursor string
	Limit  int
	Status state.Status // "" = any
	FlowID string       // "" = any
	// StartedAfter ≤ start time < StartedBefore (zero: no bound).
	StartedAfter, StartedBefore time.Time
	// Index: executions indexed under every one of these values (docs/flows.md).
	Index []IndexFilter
	// WakeBefore and WakeAfter keep the suspended executions whose due time (a delay's end,
	// a wait's or an approval's timeout) is before, or at or after, the time given.
	WakeBefore, WakeAfter time.Time
	// WokenBy keeps the executions that event (its id) woke: a "resumed" entry of their
	// timeline names it, or their last resume was its (a timeline that dropped the entry).
	WokenBy string
	// Sort is the order: SortStarted (newest start first, "" too) or SortWake (soonest next
	// wake first: a due time, a retry's next attempt; the ones nothing times wake last).
	Sort string
}

// The orders of a listing (ListRequest.Sort).
const (
	SortStarted = "started"
	SortWake    = "wake"
)

// Bounds of a listing sorted by wake time (it reads the matching executions newest first,
// sorts them and pages the sorted list by offset) and of a count: at most maxScanItems of
// them, and at most maxScanPages store pages (each examining up to 10 × MaxListLimit index
// members), so a rare filter over a large tenant stays bounded; a bounded read says so
// (store.Page.Bounded).
const (
	maxScanItems = 10000
	maxScanPages = 10
)

// wakeCursor is the cursor of a wake-sorted listing: the offset of the page in the sort.
const wakeCursor = "wake:"

// wakes reports whether st is suspended with a due time in [after, before) (a zero bound is
// open).
func (r ListRequest) wakes(st *state.Execution) bool {
	if r.WakeBefore.IsZero() && r.WakeAfter.IsZero() {
		return true
	}
	if st.Status != state.Suspended || st.Suspend == nil || st.Suspend.Due == nil {
		return false
	}
	due := *st.Suspend.Due
	return (r.WakeBefore.IsZero() || due.Before(r.WakeBefore)) && (r.WakeAfter.IsZero() || !due.Before(r.WakeAfter))
}

// statuses are the statuses a listing can ask for.
var statuses = []state.Status{state.Pending, state.Running, state.Suspended, state.Completed, state.Error, state.Cancelled}

// check refuses a listing's filters that name no status or no flow, an empty start-time range
// or a bad index filter, in both modes and for a bulk job's selection (bulk.go), and gives the
// index filters' terms. Its messages name the filter, not a front end's spelling of it: the
// CLI, the API's list and POST /api/jobs all show them.
func (req ListRequest) check() ([]store.IndexTerm, error) {
	if req.Status != "" && !slices.Contains(statuses, req.Status) {
		return nil, refuse(Invalid, "invalid_status", nil, "status %q: use one of %v", req.Status, statuses)
	}
	if req.FlowID != "" {
		if err := keys.ValidName("flow id", req.FlowID); err != nil {
			return nil, refuse(Invalid, "invalid_flow_id", err, "%v", err)
		}
	}
	if err := checkTimeRange(req.StartedAfter, req.StartedBefore); err != nil {
		return nil, err
	}
	if req.WokenBy != "" {
		if err := keys.ValidName("event id", req.WokenBy); err != nil {
			return nil, refuse(Invalid, "invalid_event_id", err, "woken_by: %v", err)
		}
	}
	if req.Sort != "" && req.Sort != SortStarted && req.Sort != SortWake {
		return nil, refuse(Invalid, "invalid_sort", nil, "sort %q: use %s or %s", req.Sort, SortStarted, SortWake)
	}
	return indexTerms(req.Index)
}

// matches is the list's test of one state beyond what the store's listing applies itself (the
// start-time range and the index terms): its status, its flow and its due time.
func (req ListRequest) matches(st *state.Execution) bool {
	return (req.Status == "" || st.Status == req.Status) && (req.FlowID == "" || st.FlowID == req.FlowID) && req.wakes(st) &&
		(req.WokenBy == "" || engine.WokenBy(st, req.WokenBy))
}

// storeRequest checks the filters and gives the store's listing that applies every one of
// them. A page of the list and a bulk job's selection (bulk.go) both read through it, so a job
// acts on exactly what the list with the same filter shows.
func (req ListRequest) storeRequest() (store.ListRequest, error) {
	terms, err := req.check()
	if err != nil {
		return store.ListRequest{}, err
	}
	sr := store.ListRequest{Cursor: req.Cursor, Limit: req.Limit, StartedAfter: req.StartedAfter, StartedBefore: req.StartedBefore, Index: terms}
	if req.Status != "" || req.FlowID != "" || !req.WakeBefore.IsZero() || !req.WakeAfter.IsZero() || req.WokenBy != "" {
		sr.Match = req.matches
	}
	return sr, nil
}

// List is a page of the tenant's executions, newest first.
func (p *Plane) List(ctx context.Context, tenant string, req ListRequest) (store.Page, error) {
	ts, err := p.tenantStore(tenant)
	if err != nil {
		return store.Page{}, err
	}
	if req.Sort == SortWake {
		return p.listByWake(ctx, ts, req)
	}
	sr, err := req.storeRequest()
	if err != nil {
		return store.Page{}, err
	}
	page, err := ts.List(ctx, sr)
	if errors.Is(err, store.ErrInvalid) {
		return page, refuse(Invalid, "invalid_cursor", err, "cursor: %v", err)
	}
	if err == nil {
		p.retryNexts(ctx, ts.Tenant(), page.Items)
	}
	return page, err
}

// listByWake is a page of the executions the filter matches, soonest next wake first (a
// suspended one's due time, a retry back-off's next attempt), those without one last, newest
// first among equals. It sorts the newest maxScanItems matching ones (the index is by start
// time) and pages them by offset.
func (p *Plane) listByWake(ctx context.Context, ts *store.TenantStore, req ListRequest) (store.Page, error) {
	offset := 0
	if req.Cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(req.Cursor, wakeCursor))
		if !strings.HasPrefix(req.Cursor, wakeCursor) || err != nil || n < 0 || n > maxScanItems {
			return store.Page{}, refuse(Invalid, "invalid_cursor", nil, "cursor %q: not one of a listing sorted by wake time", req.Cursor)
		}
		offset = n
	}
	limit := cmp.Or(req.Limit, DefaultListLimit)
	all, out, err := scanMatching(ctx, ts, req)
	if err != nil {
		return store.Page{}, err
	}
	p.retryNexts(ctx, ts.Tenant(), all)
	slices.SortStableFunc(all, func(a, b store.Summary) int {
		wa, oka := nextWake(a)
		wb, okb := nextWake(b)
		switch {
		case oka && okb:
			return wa.Compare(wb)
		case oka:
			return -1
		case okb:
			return 1
		}
		return 0
	})
	if offset < len(all) {
		out.Items = all[offset:min(len(all), offset+limit)]
	}
	if offset+limit < len(all) {
		out.NextCursor = wakeCursor + strconv.Itoa(offset+limit)
	}
	return out, nil
}

// scanMatching reads the executions req's filter matches, newest first, up to maxScanItems of
// them and maxScanPages store pages: what a sort by wake time orders and a count counts.
// The page it gives carries no items: whether the read was cut (Bounded) and what it skipped.
func scanMatching(ctx context.Context, ts *store.TenantStore, req ListRequest) ([]store.Summary, store.Page, error) {
	scan := req
	scan.Sort, scan.Cursor, scan.Limit = "", "", store.MaxListLimit
	var all []store.Summary
	out := store.Page{}
	for pages := 0; ; pages++ {
		if pages == maxScanPages || len(all) >= maxScanItems {
			out.Bounded = true
			break
		}
		sr, err := scan.storeRequest()
		if err != nil {
			return nil, store.Page{}, err
		}
		page, err := ts.List(ctx, sr)
		if err != nil {
			return nil, store.Page{}, err
		}
		all = append(all, page.Items...)
		out.Skipped += page.Skipped
		if scan.Cursor = page.NextCursor; scan.Cursor == "" {
			break
		}
	}
	out.Degraded = out.Skipped > 0
	return all[:min(len(all), maxScanItems)], out, nil
}

// Count is how many of the tenant's executions req's filter matches (its order and page
// aside), counting the newest maxScanItems at most: bounded says there may be more.
func (p *Plane) Count(ctx context.Context, tenant string, req ListRequest) (n int, bounded bool, err error) {
	ts, err := p.tenantStore(tenant)
	if err != nil {
		return 0, false, err
	}
	all, page, err := scanMatching(ctx, ts, req) // its listing checks the filter
	return len(all), page.Bounded, err
}

// nextWake is when s wakes by itself: a suspended one's due time, or the next attempt of a
// node in its retry back-off (false: nothing times it).
func nextWake(s store.Summary) (time.Time, bool) {
	switch {
	case s.Suspend != nil && s.Suspend.Due != nil:
		return *s.Suspend.Due, true
	case s.RetryNext != nil:
		return *s.RetryNext, true
	}
	return time.Time{}, false
}

// retryNexts sets the next attempt's time of the items in a retry back-off (their next wake,
// as a suspended one's due time), reading each flow version once. A flow that cannot be read
// leaves it unset: the execution page says why.
func (p *Plane) retryNexts(ctx context.Context, tenant string, items []store.Summary) {
	flows := map[[2]string]*engine.Flow{}
	for i := range items {
		s := &items[i]
		if s.RetryAttempt == 0 || s.RetryFailedAt.IsZero() {
			continue
		}
		k := [2]string{s.FlowID, s.FlowVersion}
		f, ok := flows[k]
		if !ok {
			f, _, _ = p.PublishedFlow(ctx, tenant, s.FlowID, s.FlowVersion)
			flows[k] = f
		}
		if next, policy := nextAttempt(f, s.CurrentNode, s.RetryAttempt, s.RetryFailedAt); policy != nil {
			s.RetryNext = &next
		}
	}
}

// Done says what an operation on one execution did.
type Done struct {
	ExecutionID string       `json:"execution_id"`
	TenantID    string       `json:"tenant_id"`
	Action      string       `json:"action"` // cancel | delete | resume
	Result      string       `json:"result"`
	Was         state.Status `json:"was"` // "corrupt" for a state that could not be read
	Enqueued    bool         `json:"enqueued"`
	MessageID   string       `json:"message_id,omitempty"`
	// Resume only.
	ResumeType  engine.ResumeType `json:"resume_type,omitempty"`
	FlowID      string            `json:"flow_id,omitempty"`
	FlowVersion string            `json:"flow_version,omitempty"`
	Checked     *bool             `json:"checked,omitempty"`
	Queue       string            `json:"queue,omitempty"`
	// AllowFlowHashChange: the resume carries the flow_hash override (ResumeRequest).
	AllowFlowHashChange bool `json:"allow_flow_hash_change,omitempty"`
	// Cancel of an unreadable state: the bytes replaced by the cancelled state.
	ReplacedBytes int `json:"replaced_bytes,omitempty"`
	// Delete only.
	Deleted bool `json:"deleted,omitempty"`
}

// What an operation on one execution did (Done.Result), as a bulk job records it per item and
// its forecast (bulk_forecast.go) names it beforehand.
const (
	resultCancelRequested  = "cancel_requested"
	resultAlreadyCancelled = "already_cancelled"
	resultDeleted          = "deleted"
	resultEnqueued         = "enqueued"
)

// wasCorrupt is what Done.Was says of a state that could not be read.
const wasCorrupt state.Status = "corrupt"

// Cancel raises the cancel flag and enqueues a cancel resume: a running execution stops at its
// next step boundary, a suspended one is ended by the resume. An execution already cancelled is
// what was asked for: "already_cancelled", nothing changes; a completed or failed one is a
// Conflict. An execution whose state cannot be read is ended by replacing it (store.ReplaceCorrupt).
func (p *Plane) Cancel(ctx context.Context, tenant, id string) (Done, error) {
	ts, st, err := p.load(ctx, tenant, id)
	var ce *store.CorruptStateError
	switch {
	case errors.As(err, &ce):
		return p.cancelCorrupt(ctx, ts, ce)
	case err != nil:
		return Done{}, err
	}
	out := Done{ExecutionID: id, TenantID: ts.Tenant(), Action: "cancel", Was: st.Status}
	if out, stop, err := cancelled(out, st); stop {
		return out, err
	}
	if err := ts.SetCancel(ctx, id); err != nil {
		return Done{}, fmt.Errorf("execution %s: %w", id, err)
	}
	if out.MessageID, err = p.enqueue(ctx, ts.Tenant(), resumeEnvelope(st, engine.ResumeCancel, nil)); err != nil {
		return Done{}, fmt.Errorf("execution %s: cancel flag raised, but the cancel resume was not enqueued: %w", id, err)
	}
	out.Result, out.Enqueued = resultCancelRequested, true
	return out, nil
}

// cancelled is the part of a cancel both runtimes decide the same way: an execution cancelled
// already is what was asked for (stop, "already_cancelled"), a completed or failed one a
// Conflict; any other goes on to be cancelled.
func cancelled(out Done, st *state.Execution) (Done, bool, error) {
	switch {
	case st.Status == state.Cancelled:
		out.Result = resultAlreadyCancelled
		return out, true, nil
	case st.Status.Terminal():
		return Done{}, true, &Refusal{Class: Conflict, Code: "terminal", Execution: st,
			Message: fmt.Sprintf("execution %s is already %s; nothing to cancel", st.ExecutionID, st.Status)}
	}
	return out, false, nil
}

// deletable is the part of a delete both runtimes decide the same way, on the execution it
// loaded (st, err): an unreadable one (corrupt) is deleted as it is — no worker can run it — and
// a running or pending one is refused without force. was is the status the answer reports.
func deletable(st *state.Execution, err error, corrupt, force bool) (was state.Status, _ error) {
	switch {
	case corrupt:
		return wasCorrupt, nil
	case err != nil:
		return "", err
	case (st.Status == state.Running || st.Status == state.Pending) && !force:
		return "", &Refusal{Class: Conflict, Code: "running", Execution: st,
			Message: fmt.Sprintf("execution %s is %s; cancel it first, or pass --force", st.ExecutionID, st.Status)}
	}
	return st.Status, nil
}

// Delete removes an execution's state and keys and writes its tombstone. A running or pending
// one is a Conflict unless force; an unreadable one is deleted as it is (no worker can run it).
func (p *Plane) Delete(ctx context.Context, tenant, id string, force bool) (Done, error) {
	ts, st, err := p.load(ctx, tenant, id)
	var ce *store.CorruptStateError
	was, err := deletable(st, err, errors.As(err, &ce), force)
	if err != nil {
		return Done{}, err
	}
	if err := ts.Delete(ctx, id); err != nil {
		return Done{}, fmt.Errorf("execution %s: %w", id, err)
	}
	return Done{ExecutionID: id, TenantID: ts.Tenant(), Action: "delete", Result: resultDeleted, Deleted: true, Was: was}, nil
}

// ResumeRequest resumes an execution. Data is the resume's data (the event, the approval
// answer …); Force enqueues without the check (the worker still decides).
type ResumeRequest struct {
	Tenant string
	ID     string
	Type   engine.ResumeType
	Data   json.RawMessage
	Force  bool
	// AllowFlowHashChange overrides a flow_hash_mismatch: the execution's flow hash differs
	// from the published definition's in algorithm and value, as after an engine upgrade, and
	// the operator confirms the definition is unchanged (docs/flows.md). It is sent to the
	// worker as "allow_flow_hash_change": true in the data (the engine's key, which data may
	// carry itself); it never lets a definition changed under the same algorithm pass.
	AllowFlowHashChange bool
}

// HashOverride reports whether the resume carries the flow_hash override, as the field or as
// the key of its data.
func (r ResumeRequest) HashOverride() bool {
	if r.AllowFlowHashChange {
		return true
	}
	var m map[string]json.RawMessage
	return json.Unmarshal(r.Data, &m) == nil && string(m[engine.AllowFlowHashChangeKey]) == "true"
}

// rawWithHashOverride adds "allow_flow_hash_change": true to resume data (an object, or none),
// keeping every other value byte for byte.
func rawWithHashOverride(data json.RawMessage) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if t := bytes.TrimSpace(data); len(t) > 0 && string(t) != "null" {
		if t[0] != '{' {
			return nil, errors.New("allow_flow_hash_change needs the resume data to be a JSON object (or none)")
		}
		if err := json.Unmarshal(t, &m); err != nil {
			return nil, err
		}
	}
	m[engine.AllowFlowHashChangeKey] = json.RawMessage("true")
	return json.Marshal(m)
}

// Resume checks the resume the way the worker will — against the execution's status and
// suspension, the published definition (an event must satisfy the wait's match), and for a
// retry the wake-up budgets and the step limit — and enqueues it. A resume that would be refused
// is not enqueued: a Conflict refusal with the reason and what is accepted instead. A completed
// or cancelled execution is always refused.
func (p *Plane) Resume(ctx context.Context, req ResumeRequest) (Done, error) {
	ts, st, err := p.load(ctx, req.Tenant, req.ID)
	var ce *store.CorruptStateError
	switch {
	case errors.As(err, &ce):
		return Done{}, p.unreadable(ce, ts.Tenant())
	case err != nil:
		return Done{}, err
	}
	tenant := ts.Tenant()
	if req.Data, err = p.admitResume(ctx, tenant, st, req, p.executionFlow); err != nil {
		return Done{}, err
	}
	msgID, err := p.enqueue(ctx, tenant, resumeEnvelope(st, req.Type, req.Data))
	if errors.Is(err, queue.ErrInputTooLarge) || errors.Is(err, queue.ErrBadInput) {
		return Done{}, refuse(Invalid, "invalid_data", err, "data: %v", err)
	}
	if err != nil {
		return Done{}, fmt.Errorf("execution %s: %w", st.ExecutionID, err)
	}
	checked := !req.Force
	return Done{ExecutionID: st.ExecutionID, TenantID: tenant, FlowID: st.FlowID, FlowVersion: st.FlowVersion, Action: "resume",
		ResumeType: req.Type, Result: resultEnqueued, Enqueued: true, Checked: &checked, Was: st.Status, Queue: p.QueueName(), MessageID: msgID,
		AllowFlowHashChange: req.HashOverride()}, nil
}

// admitResume is Resume's decision on st before anything is enqueued, and a bulk retry's
// forecast of it (bulk_forecast.go), so the count a dry run shows is what the job will do: a
// completed or cancelled execution is refused ("terminal"); unless req.Force, the resume is put
// to the worker's checks (CheckResume) against st's advice, its definition read by flow. It
// gives the data to enqueue (with the flow_hash override when req asks for it).
func (p *Plane) admitResume(ctx context.Context, tenant string, st *state.Execution, req ResumeRequest, flow flowReader) (json.RawMessage, error) {
	if st.Status == state.Completed || st.Status == state.Cancelled {
		return nil, &Refusal{Class: Conflict, Code: "terminal", Execution: st,
			Message: fmt.Sprintf("execution %s is %s; it cannot be resumed", st.ExecutionID, st.Status)}
	}
	data := req.Data
	if req.AllowFlowHashChange && req.Type != engine.ResumeCancel {
		var err error
		if data, err = rawWithHashOverride(data); err != nil {
			return nil, refuse(Invalid, "invalid_data", err, "data: %v", err)
		}
	}
	if req.Force {
		return data, nil
	}
	var v any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, refuse(Invalid, "invalid_data", err, "data: %v", err)
		}
	}
	adv, err := p.advice(ctx, tenant, st, nil, flow)
	if err != nil {
		return nil, fmt.Errorf("execution %s: %w", st.ExecutionID, err)
	}
	if ref := CheckResume(st, adv, req.Type, v); ref != nil {
		ref.Accepted = p.withCommands(ref.Accepted, st, tenant)
		return nil, ref
	}
	return data, nil
}

// resumeEnvelope is a resume of st's execution, on the flow version it runs.
func resumeEnvelope(st *state.Execution, rt engine.ResumeType, data json.RawMessage) queue.Envelope {
	return queue.Envelope{Kind: queue.KindResume, FlowID: st.FlowID, FlowVersion: st.FlowVersion,
		ExecutionID: st.ExecutionID, ResumeType: rt, ResumeData: data, TraceParent: st.TraceParent, TraceState: st.TraceState}
}

// Hints is what can be done next with st, each resume checked and rendered as a command line.
func (p *Plane) Hints(ctx context.Context, tenant string, st *state.Execution, f *engine.Flow) ([]Hint, error) {
	adv, err := p.Advice(ctx, tenant, st, f)
	if err != nil {
		return nil, err
	}
	return p.withCommands(adv.Hints(st), st, tenant), nil
}

// Detail is what the console shows beside an execution's state: what can be done next and why
// each branch was taken.
type Detail struct {
	Hints []Hint
	// HintsNote says why there are no hints (the retry gates cannot be read …).
	HintsNote string
	// Branches are the branches st took, oldest first (engine.Branches): the reasons its
	// timeline recorded and, for a branching node with none there, its last result.
	Branches []engine.Branch
}

// Detail reads st's published definition once for both: without it (not readable) the
// branches are the timeline's reasons only and the hints offer what the advice can without it.
func (p *Plane) Detail(ctx context.Context, tenant string, st *state.Execution) Detail {
	f, _ := p.executionFlow(ctx, tenant, st)
	d := Detail{Branches: engine.Branches(f, st)}
	var err error
	if d.Hints, err = p.Hints(ctx, tenant, st, f); err != nil {
		d.HintsNote = err.Error()
	}
	return d
}
