package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
)

// Local mode (docs/console.md): when Redis is unreachable at start, the console runs
// executions in its own process on the console database (store/sqlite: local_executions,
// flow_versions). Local is the control plane of that mode: the operations the console's API
// and web UI call (Operations) over the database and an in-process runner (local_runner.go)
// instead of the task stream and the roles. A refusal is built by the same code as in cluster
// mode — the same flow parsing, the same resume check (CheckResume), the same event rules
// (store.PrepareEvent) — so the console refuses the same things in both modes.
//
// What local mode has no counterpart for (dead letters, schedules, the cluster, bulk jobs,
// listing events) answers 503 in the API: those need the roles and Redis. Local mode has no
// at-least-once delivery either: an execution the console was running when it stopped is
// suspended (or failed) at the next start, never replayed on its own (the orphan reconcile,
// PLAITA_CONSOLE_RECONCILE_ORPHANS).

// LocalDeps is what local mode works on.
type LocalDeps struct {
	DB *sqlite.DB
	// NodeTypes builds the node types executions run with (the console's own: its code
	// backend is PLAITA_CONSOLE_CODE_BACKEND).
	NodeTypes func() (*engine.Registry, error)
	// Engine are the executor's settings (expression limits, timeline and state bounds,
	// deadline), read at every run.
	Engine func() engine.Settings
	// Workers is how many executions run at once (0: 4).
	Workers int
	// Orphans is what Start does with the executions left running by a console that stopped
	// (PLAITA_CONSOLE_RECONCILE_ORPHANS).
	Orphans sqlite.OrphanMode
	Now     func() time.Time
	Log     zerolog.Logger
}

// Local is local mode's control plane and runner. Start runs the runner (a service of the
// console's lifecycle); the operations work before it (a start waits for it).
type Local struct {
	d   LocalDeps
	x   *sqlite.Executions
	now func() time.Time
	run *localRunner

	mu     sync.Mutex
	events map[string]seenEvent // recent event ids: a publish of the same id again is idempotent
	order  []string
}

// NewLocal returns local mode over d.
func NewLocal(d LocalDeps) *Local {
	now := d.Now
	if now == nil {
		now = time.Now
	}
	if d.Workers <= 0 {
		d.Workers = 4
	}
	if d.Engine == nil {
		d.Engine = engine.DefaultSettings
	}
	if d.Orphans == "" {
		d.Orphans = sqlite.OrphanSuspend
	}
	l := &Local{d: d, x: d.DB.Executions(), now: now, events: map[string]seenEvent{}}
	l.run = newLocalRunner(l)
	return l
}

var (
	_ Operations = (*Plane)(nil)
	_ Operations = (*Local)(nil)
)

// Tenant checks a tenant slug ("" is the default tenant) and returns its canonical name.
func (l *Local) Tenant(tenant string) (string, error) {
	sp, err := keys.For(keys.DefaultRoot, tenant)
	if err != nil {
		return "", refuse(Invalid, "invalid_tenant", err, "%v", err)
	}
	return sp.Tenant(), nil
}

// QueueName is what a start's answer names as its queue: local mode has none.
func (l *Local) QueueName() string { return LocalQueue }

// LocalQueue is the queue a local start is on: the console's own runner.
const LocalQueue = "local"

// ---- flows ----

// ParseFlow validates a definition with the console's node types (as Plane.ParseFlow does with
// a worker's).
func (l *Local) ParseFlow(def []byte) (*engine.Flow, error) {
	return parseFlow(l.d.NodeTypes, l.d.Engine().Expr, def)
}

// PublishFlow validates def and records it as an immutable version in the console database:
// the same version rule and the same refusals as Plane.PublishFlow. The publisher is the
// context's actor (WithActor).
func (l *Local) PublishFlow(ctx context.Context, tenant string, def []byte, version string) (Published, error) {
	tenant, f, version, hash, err := preparePublication(l, tenant, def, version)
	if err != nil {
		return Published{}, err
	}
	_, dup, err := l.d.DB.RecordVersion(ctx, sqlite.FlowVersion{Tenant: tenant, FlowID: f.ID, Version: version, Definition: def,
		Hash: hash, HashAlgo: f.HashAlgo, PublishedBy: Actor(ctx)})
	switch {
	case errors.Is(err, sqlite.ErrVersionExists):
		prev, _ := l.d.DB.FlowVersion(ctx, tenant, f.ID, version)
		ref := refuse(Conflict, "flow_version_conflict", err, "flow %s version %q is already published with a different definition (hash %s, this one %s); "+
			"a published version is immutable (executions of it resume against that definition)", f.ID, version, shortHash(prev.Hash), shortHash(hash))
		ref.Unblock = `to publish the change, give it a new version (set "version" in the definition, or ask for another one)`
		return Published{}, ref
	case errors.Is(err, sqlite.ErrTenantNotFound):
		return Published{}, refuse(NotFound, "tenant_not_found", err, "no tenant %s", tenant)
	case err != nil:
		return Published{}, fmt.Errorf("publish flow %s version %s: %w", f.ID, version, err)
	}
	res := store.Published
	if dup {
		res = store.AlreadyPublished
	}
	return Published{Flow: f, Version: version, Result: res, Warnings: f.Warnings}, nil
}

// publishedFlow reads and parses a published version ("" the latest).
func (l *Local) publishedFlow(ctx context.Context, tenant, flowID, version string) (*engine.Flow, sqlite.FlowVersion, error) {
	var v sqlite.FlowVersion
	var err error
	if version == "" {
		v, err = l.d.DB.LatestVersion(ctx, tenant, flowID)
	} else {
		v, err = l.d.DB.FlowVersion(ctx, tenant, flowID, version)
	}
	switch {
	case errors.Is(err, sqlite.ErrVersionNotFound):
		if version == "" {
			return nil, v, refuse(NotFound, "flow_not_found", err, "no flow %s is published in tenant %s", flowID, tenant)
		}
		return nil, v, refuse(NotFound, "flow_not_found", err, "flow %s version %q is not published in tenant %s", flowID, version, tenant)
	case err != nil:
		return nil, v, fmt.Errorf("read flow %s: %w", flowID, err)
	}
	f, err := l.ParseFlow(v.Definition)
	if err != nil {
		if r := AsRefusal(err); r != nil {
			r.Message = fmt.Sprintf("published flow %s version %s: %s", flowID, v.Version, r.Message)
		}
		return nil, v, err
	}
	return f, v, nil
}

// FlowPage lists the tenant's published flows, most recently published first. Local mode
// answers with one page: every flow of the tenant up to sqlite.MaxLimit (a cursor is refused).
func (l *Local) FlowPage(ctx context.Context, tenant, cursor string, limit int) (store.FlowPage, error) {
	if err := checkLimit(limit, min(MaxFlowList, sqlite.MaxLimit)); err != nil {
		return store.FlowPage{}, err
	}
	if cursor != "" {
		return store.FlowPage{}, refuse(Invalid, "invalid_cursor", nil, "cursor %q: local mode lists its flows in one page", cursor)
	}
	tenant, err := l.Tenant(tenant)
	if err != nil {
		return store.FlowPage{}, err
	}
	fs, err := l.d.DB.PublishedFlows(ctx, tenant, limit)
	if err != nil {
		return store.FlowPage{}, err
	}
	out := store.FlowPage{Items: make([]store.FlowSummary, 0, len(fs))}
	for _, f := range fs {
		out.Items = append(out.Items, store.FlowSummary{FlowID: f.FlowID, PublishedAt: f.Latest.PublishedAt, Latest: f.Latest.Version, Versions: f.Versions})
	}
	return out, nil
}

// Flow reads a published flow (version "" = the latest) and its versions (at most the newest
// sqlite.MaxLimit).
func (l *Local) Flow(ctx context.Context, tenant, flowID, version string) (FlowShown, error) {
	if err := keys.ValidName("flow id", flowID); err != nil {
		return FlowShown{}, refuse(Invalid, "invalid_flow_id", err, "%v", err)
	}
	tenant, err := l.Tenant(tenant)
	if err != nil {
		return FlowShown{}, err
	}
	f, v, err := l.publishedFlow(ctx, tenant, flowID, version)
	if err != nil && (v.Definition == nil || AsRefusal(err) == nil || AsRefusal(err).Code != "invalid_flow") {
		return FlowShown{}, err
	}
	page, err := l.d.DB.ListVersions(ctx, tenant, flowID, sqlite.ListOptions{Limit: sqlite.MaxLimit})
	if err != nil {
		return FlowShown{}, err
	}
	out := FlowShown{FlowID: flowID, TenantID: tenant, Version: v.Version, Hash: v.Hash, Definition: v.Definition, Versions: []VersionShown{}}
	for _, pv := range page.Items {
		// Engine: local mode's runner runs the recorded versions themselves.
		out.Versions = append(out.Versions, VersionShown{FlowVersion: store.FlowVersion{Version: pv.Version, PublishedAt: pv.PublishedAt},
			PublishedBy: pv.PublishedBy, Seq: pv.Seq, Hash: pv.Hash, Engine: true, Recorded: true})
	}
	if f != nil {
		out.Name, out.Nodes = f.Name, len(f.Nodes)
	}
	return out, nil
}

// ---- executions ----

// Start checks the published flow (a definition is published first) and hands the start to
// the runner: it runs in this process. An Idempotency-Key's id names the same execution every
// time: a start of an id that exists already runs nothing new.
func (l *Local) Start(ctx context.Context, req StartRequest) (Started, error) {
	tenant, err := checkStart(l, req)
	if err != nil {
		return Started{}, err
	}
	out := Started{TenantID: tenant, Queue: LocalQueue, WorkersAlive: 1}
	if req.Definition != nil {
		pub, err := l.PublishFlow(ctx, tenant, req.Definition, req.Version)
		if err != nil {
			return Started{}, err
		}
		already := pub.Result == store.AlreadyPublished
		out.Flow, out.FlowVersion, out.Published, out.Already = pub.Flow, pub.Version, pub.Result == store.Published, &already
	} else {
		f, v, err := l.publishedFlow(ctx, tenant, req.FlowID, req.Version)
		if err != nil {
			return Started{}, err
		}
		out.Flow, out.FlowVersion = f, v.Version
	}
	out.FlowID = out.Flow.ID
	input, err := l.document("input", req.Input)
	if err != nil {
		return Started{}, refuse(Invalid, "invalid_input", err, "input: %v", err)
	}
	if input == nil {
		input = map[string]any{}
	}
	out.ExecutionID = req.ExecutionID
	if out.ExecutionID == "" {
		out.ExecutionID = engine.NewExecutionID()
	}
	out.MessageID = "local:" + out.ExecutionID
	start := &engine.StartRequest{ExecutionID: out.ExecutionID, TenantID: tenant, FlowVersion: out.FlowVersion, Input: input}
	// The state is written before the answer: the execution exists once its start is answered
	// (a read, or a client's retry of the same Idempotency-Key, finds it).
	if err := l.run.begin(ctx, out.Flow, *start); err != nil {
		return Started{}, fmt.Errorf("start %s: %w", out.ExecutionID, err)
	}
	if err := l.run.submit(ctx, localJob{tenant: tenant, id: out.ExecutionID, flowID: out.FlowID, version: out.FlowVersion, start: start}); err != nil {
		return Started{}, err
	}
	return out, nil
}

// document checks a document from outside by the rule the producer path applies
// (queue.CheckInput: the state bound, nesting and numbers) and decodes it (nil when empty).
func (l *Local) document(what string, doc json.RawMessage) (any, error) {
	if err := queue.CheckInput(what, doc, l.d.Engine().MaxStateBytes); err != nil {
		return nil, err
	}
	if len(doc) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// load reads an execution of tenant: NotFound when there is none (or it is another tenant's).
func (l *Local) load(ctx context.Context, tenant, id string) (string, *state.Execution, error) {
	if err := keys.ValidID(id); err != nil {
		return "", nil, refuse(Invalid, "invalid_id", err, "%q is not an execution id: %v", id, err)
	}
	tenant, err := l.Tenant(tenant)
	if err != nil {
		return "", nil, err
	}
	st, err := l.x.Load(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound) || err == nil && cmpTenant(st.TenantID) != tenant:
		return tenant, nil, refuse(NotFound, "execution_not_found", store.ErrNotFound, "no execution %s in tenant %s", id, tenant)
	case errors.Is(err, store.ErrStateCorrupt):
		return tenant, nil, refuse(Conflict, "state_corrupt", err, "%v: the state of execution %s cannot be read; delete it", err, id)
	case err != nil:
		return tenant, nil, err
	}
	return tenant, st, nil
}

func cmpTenant(t string) string {
	if t == "" {
		return keys.DefaultTenant
	}
	return t
}

// Show reads an execution with its wake-up report.
func (l *Local) Show(ctx context.Context, tenant, id string) (Shown, error) {
	tenant, st, err := l.load(ctx, tenant, id)
	if err != nil {
		return Shown{}, err
	}
	return Shown{Execution: st, WakeUp: l.WakeUp(tenant, st), Runtime: RuntimeLocal}, nil
}

// List is a page of the tenant's executions, newest first, each marked runtime local.
func (l *Local) List(ctx context.Context, tenant string, req ListRequest) (store.Page, error) {
	tenant, err := l.Tenant(tenant)
	if err != nil {
		return store.Page{}, err
	}
	terms, err := req.check()
	if err != nil {
		return store.Page{}, err
	}
	limit := req.Limit
	if limit <= 0 {
		limit = sqlite.DefaultLimit
	}
	page, err := listLocalRuns(ctx, l.x, tenant, req, terms, req.Cursor, limit, localListExamine)
	if err != nil {
		return store.Page{}, err
	}
	out := store.Page{Items: page.items, NextCursor: page.next, Skipped: page.skipped, Degraded: page.skipped > 0}
	if out.Items == nil {
		out.Items = []store.Summary{}
	}
	return out, nil
}

// Cancel ends an execution: a suspended one at once (through the runner), a running one at
// its next step boundary (the cancel flag the executor checks).
func (l *Local) Cancel(ctx context.Context, tenant, id string) (Done, error) {
	tenant, st, err := l.load(ctx, tenant, id)
	if err != nil {
		return Done{}, err
	}
	out := Done{ExecutionID: id, TenantID: tenant, Action: "cancel", Was: st.Status}
	if out, stop, err := cancelled(out, st); stop {
		return out, err
	}
	if err := l.x.RequestCancel(ctx, id); err != nil {
		return Done{}, fmt.Errorf("execution %s: %w", id, err)
	}
	if st.Status != state.Running {
		if err := l.run.submit(ctx, l.resumeJob(tenant, st, engine.ResumeCancel, nil, "local:cancel")); err != nil {
			return Done{}, err
		}
	}
	out.Result, out.Enqueued, out.MessageID = "cancel_requested", true, "local:"+id
	return out, nil
}

// Delete removes an execution. A running one is a Conflict unless force.
func (l *Local) Delete(ctx context.Context, tenant, id string, force bool) (Done, error) {
	tenant, st, err := l.load(ctx, tenant, id)
	r := AsRefusal(err)
	was, err := deletable(st, err, r != nil && r.Code == "state_corrupt", force)
	if err != nil {
		return Done{}, err
	}
	l.run.disarm(id)
	if err := l.x.Delete(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return Done{}, fmt.Errorf("execution %s: %w", id, err)
	}
	return Done{ExecutionID: id, TenantID: tenant, Action: "delete", Result: "deleted", Deleted: true, Was: was}, nil
}

// advice is what the resume check of st is judged against: its published definition. Local
// mode keeps no retry gates (they count redeliveries of a task stream it does not have).
func (l *Local) advice(ctx context.Context, tenant string, st *state.Execution) *Advice {
	a := &Advice{Limits: l.d.Engine().Expr, Now: l.now()}
	if st.Status != state.Completed && st.Status != state.Cancelled {
		if f, _, err := l.publishedFlow(ctx, tenant, st.FlowID, st.FlowVersion); err != nil {
			a.FlowErr = fmt.Errorf("%w: %v", ErrFlowUnavailable, err)
		} else {
			a.Flow = f
		}
	}
	return a
}

// Resume checks a resume the way the runner will run it (CheckResume, as in cluster mode) and
// hands it to the runner. An execution the orphan reconcile suspended takes continue (its step
// runs again from its checkpoint, as the operator decided) or cancel.
func (l *Local) Resume(ctx context.Context, req ResumeRequest) (Done, error) {
	tenant, st, err := l.load(ctx, req.Tenant, req.ID)
	if err != nil {
		return Done{}, err
	}
	if st.Status == state.Completed || st.Status == state.Cancelled {
		return Done{}, &Refusal{Class: Conflict, Code: "terminal", Execution: st,
			Message: fmt.Sprintf("execution %s is %s; it cannot be resumed", st.ExecutionID, st.Status)}
	}
	if req.AllowFlowHashChange && req.Type != engine.ResumeCancel {
		// The flow_hash override travels in the data, as the engine reads it (Plane.Resume).
		if req.Data, err = rawWithHashOverride(req.Data); err != nil {
			return Done{}, refuse(Invalid, "invalid_data", err, "data: %v", err)
		}
	}
	v, err := l.document("resume data", req.Data)
	if err != nil {
		return Done{}, refuse(Invalid, "invalid_data", err, "data: %v", err)
	}
	orphan := st.Status == state.Suspended && st.Suspend != nil && st.Suspend.Kind == sqlite.SuspendOrphan
	switch {
	case orphan && req.Type != engine.ResumeContinue && req.Type != engine.ResumeCancel:
		return Done{}, &Refusal{Class: Conflict, Code: "resume_refused", Execution: st,
			Message: fmt.Sprintf("execution %s was suspended when the console restarted during its step %s; it takes only continue "+
				"(run that step again from its checkpoint) or cancel", st.ExecutionID, st.CurrentNode),
			Accepted: []Hint{{Label: "run the step again with", Type: engine.ResumeContinue}, {Label: "end it with", Type: engine.ResumeCancel}}}
	case !orphan && !req.Force:
		if ref := CheckResume(st, l.advice(ctx, tenant, st), req.Type, v); ref != nil {
			return Done{}, ref
		}
	}
	if err := l.run.submit(ctx, l.resumeJob(tenant, st, req.Type, v, "local:"+string(req.Type)+":"+l.now().UTC().Format(time.RFC3339Nano))); err != nil {
		return Done{}, err
	}
	checked := !req.Force
	return Done{ExecutionID: st.ExecutionID, TenantID: tenant, FlowID: st.FlowID, FlowVersion: st.FlowVersion, Action: "resume",
		ResumeType: req.Type, Result: "enqueued", Enqueued: true, Checked: &checked, Was: st.Status, Queue: LocalQueue, MessageID: "local:" + st.ExecutionID,
		AllowFlowHashChange: req.HashOverride()}, nil
}

// Detail is what can be done next with st (each resume checked) and why each branch was
// taken, from its published definition read once (Plane.Detail).
func (l *Local) Detail(ctx context.Context, tenant string, st *state.Execution) Detail {
	a := l.advice(ctx, tenant, st)
	return Detail{Hints: a.Hints(st), Branches: engine.Branches(a.Flow, st)}
}

// Timeline is a page of an execution's timeline (Plane.Timeline).
func (l *Local) Timeline(ctx context.Context, tenant, id string, after, limit int) (TimelinePage, error) {
	return timelinePage(ctx, l, tenant, id, after, limit)
}

// Follow follows an execution live (Plane.Follow), by reading its state: local mode publishes
// no live events; its states are in this process's database, so a read is cheap.
func (l *Local) Follow(ctx context.Context, req FollowRequest, emit func(LiveItem) error) error {
	req.Poll = cmpDuration(req.Poll, localFollowPoll)
	req.Poll = min(req.Poll, localFollowPoll)
	return followExecution(ctx, l, req, emit)
}

// localFollowPoll is how often a local follow reads the state.
const localFollowPoll = 500 * time.Millisecond

func (l *Local) current(ctx context.Context, tenant, id string) (string, *state.Execution, bool, error) {
	tenant, st, err := l.load(ctx, tenant, id)
	if err != nil {
		return tenant, nil, false, err
	}
	return tenant, st, false, nil
}

func (l *Local) reload(ctx context.Context, tenant, id string) (*state.Execution, error) {
	_, st, err := l.load(ctx, tenant, id)
	if r := AsRefusal(err); r != nil {
		return nil, r.Err
	}
	return st, err
}

func (l *Local) subscribe(context.Context, string, string) (*store.LiveSubscription, error) {
	return nil, nil
}

// WakeUp is the wake-up report of a suspended local execution: the console's runner wakes
// everything in local mode.
func (l *Local) WakeUp(tenant string, st *state.Execution) *WakeUp {
	s := st.Suspend
	if st.Status != state.Suspended || s == nil {
		return nil
	}
	// The console's runner does the delay and filter roles' work in local mode: they are alive
	// as it is (a reader of the report, the UI's waiting panel, asks for them by name).
	alive := WakeRole{Built: true, Alive: 1, Instances: []string{"console (local mode)"}}
	w := &WakeUp{Kind: s.Kind, By: roleConsole, Roles: map[string]WakeRole{roleConsole: alive, roleDelay: alive, roleFilter: alive}}
	now := l.now()
	if s.Due != nil {
		rt := engine.ResumeTimeout
		if s.Kind == state.SuspendDelay {
			rt = engine.ResumeContinue
		}
		d := &WakeDue{ResumeType: rt, Due: *s.Due, DueInMillis: s.Due.Sub(now).Milliseconds(), Entry: "scheduled"}
		if l.run.armed(st.ExecutionID) {
			d.Text = fmt.Sprintf("due %s (in %s) — the console's local runner wakes it", s.Due.UTC().Format(time.RFC3339), RoundDuration(s.Due.Sub(now)))
		} else {
			d.Entry = "missing"
			d.Text = fmt.Sprintf("due %s — no timer is armed in this process (it is armed when the runner starts or the execution suspends)", s.Due.UTC().Format(time.RFC3339))
			w.Problems = append(w.Problems, "no timer is armed for its due time")
		}
		w.Due = d
	}
	switch s.Kind {
	case state.SuspendDelay:
		if w.Due != nil {
			w.Text = w.Due.Text
		}
	case state.SuspendEvent:
		w.Text = fmt.Sprintf("an event of type %q published to this console (POST /api/events); the console delivers it in process", s.EventType)
	case state.SuspendApproval:
		w.Text = "an answer through the console (POST /api/approvals/" + st.ExecutionID + ")"
	case sqlite.SuspendOrphan:
		w.Text = "an operator: the console restarted while it ran; resume it with continue to run its step again, or cancel it"
	}
	return w
}

// ---- context: who acts ----

type actorKey struct{}

// WithActor names who performs the operations run with ctx (a console user, an API key): local
// mode records it as the publisher of a flow version.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// Actor is the actor WithActor set ("" when none).
func Actor(ctx context.Context) string {
	s, _ := ctx.Value(actorKey{}).(string)
	return s
}
