package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"plaita/engine/state"
	"plaita/internal/tracing"
)

// Version is the engine version written into every execution state.
const Version = "plaita-go/1"

// contextEvent holds the event that last resumed the execution (EVENT in expressions).
const contextEvent = "$EVENT"

// ResumeType says why a suspended or stopped execution continues (state.ResumeType).
type ResumeType = state.ResumeType

// The resume types.
const (
	ResumeContinue = state.ResumeContinue
	ResumeRetry    = state.ResumeRetry
	ResumeEvent    = state.ResumeEvent
	ResumeTimeout  = state.ResumeTimeout
	ResumeCancel   = state.ResumeCancel
	ResumeApproval = state.ResumeApproval
)

// ParseResumeType validates a resume type name; its error matches ErrInvalidResume.
func ParseResumeType(s string) (ResumeType, error) {
	rt, err := state.ParseResumeType(s)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidResume, err)
	}
	return rt, nil
}

// Clock is the executor's time source; tests inject one.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current time.
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits for d or until ctx ends.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Storage is what the executor needs of an execution store: a save at every step boundary and
// a load. Failures match ErrNotFound, ErrStateSerialization, ErrStateTooLarge, ErrLeaseLost;
// anything else is transient (the caller redelivers from the last checkpoint).
type Storage interface {
	Save(ctx context.Context, st *state.Execution) error
	Load(ctx context.Context, executionID string) (*state.Execution, error)
}

// CancelChecker reads an execution's cancel flag.
type CancelChecker interface {
	Cancelled(ctx context.Context, executionID string) (bool, error)
}

// Settings are the knobs the executor reads at the start of every run, so call-timed
// variables take effect without a restart.
type Settings struct {
	Deadline                time.Duration // budget of one run when the flow sets no timeout
	TimelineMax             int
	DisableNodeRetry        bool
	DisableCancelCheckpoint bool
	Expr                    ExprLimits
	// MaxStateBytes bounds the execution state (PLAITA_EXECUTION_STATE_MAX_BYTES; < 1: 16 MiB).
	// The store checks the encoded state at every save; the executor refuses, before encoding
	// it, a node result that alone would cross it.
	MaxStateBytes int
}

// DefaultMaxStateBytes is PLAITA_EXECUTION_STATE_MAX_BYTES's default.
const DefaultMaxStateBytes = state.DefaultMaxStateBytes

// DefaultSettings are the documented defaults.
func DefaultSettings() Settings {
	return Settings{Deadline: 1800 * time.Second, TimelineMax: 500, Expr: DefaultExprLimits, MaxStateBytes: DefaultMaxStateBytes}
}

// Executor runs executions step by step, persisting the state at every step boundary.
type Executor struct {
	Store    Storage
	Cancel   CancelChecker // nil: no cancel flag
	Clock    Clock
	Settings func() Settings
	Log      zerolog.Logger
	// OnEvent, when set, hears every timeline entry as it is recorded and a node_started
	// event before each node runs (metrics, live views). It runs on the step loop: it must not
	// block.
	OnEvent func(Event)
	// Credentials opens the tenants' credentials for the nodes that send them (Call.Credential);
	// nil: a node that asks for one fails, naming why.
	Credentials CredentialResolver
	// LeaseEpoch, when set, is the fencing generation of the lease the run holds, recorded on
	// each node's span (tracing on only).
	LeaseEpoch func() int64
}

// Event is one thing an execution did.
type Event struct {
	ExecutionID string
	TenantID    string
	FlowID      string
	Status      state.Status // the execution's status after the event
	Entry       state.TimelineEntry
}

// NewExecutor returns an executor with the system clock and default settings.
func NewExecutor(s Storage) *Executor {
	return &Executor{Store: s, Clock: SystemClock{}, Settings: DefaultSettings, Log: zerolog.Nop()}
}

// StartRequest starts one execution.
type StartRequest struct {
	ExecutionID string // minted by the producer; a redelivered start finds its state
	TenantID    string
	FlowVersion string
	Input       any
	// Trace is the trace the execution belongs to (the span of the task that started it): its
	// state keeps it, so every run and wake-up of the execution continues it.
	Trace tracing.Parent
}

// NewExecutionID mints a random execution id.
func NewExecutionID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return "ex_" + hex.EncodeToString(b[:])
}

// Start runs a new execution, or continues the one a redelivered start already created.
// The returned error is nil whenever the state reached a step boundary and was saved, even
// when the execution itself ended in error: that outcome is in the state.
func (ex *Executor) Start(ctx context.Context, f *Flow, req StartRequest) (*state.Execution, error) {
	e := ex.begin()
	if req.ExecutionID == "" {
		req.ExecutionID = NewExecutionID()
	}
	st, err := e.Store.Load(ctx, req.ExecutionID)
	switch {
	case err == nil:
		if st.Status == state.Running {
			return e.run(ctx, f, st)
		}
		return st, nil // terminal or suspended: nothing to redo
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	st, err = NewState(f, req, e.Clock.Now())
	if err != nil {
		return e.fail(ctx, st, &state.ErrorInfo{Type: ErrTypeSerialization, Message: err.Error(), Permanent: true})
	}
	// No save before the first node: its step boundary is the first save (a worker writes the
	// new state in the round trip that takes the lease, see store.Begin). A run that dies in the
	// first step replays that step from the new state, as from any checkpoint.
	e.emit(st, st.Timeline[0])
	return e.run(ctx, f, st)
}

// NewState is the state a start creates: running at the flow's start node, with its input and
// the flow's vars as storage gives them back, and the "started" timeline entry. A value that
// cannot be stored is an ErrStateSerialization (the state is returned without it).
func NewState(f *Flow, req StartRequest, now time.Time) (*state.Execution, error) {
	now = now.UTC()
	st := &state.Execution{
		ExecutionID: req.ExecutionID, TenantID: req.TenantID, FlowID: f.ID, FlowVersion: cmp.Or(req.FlowVersion, f.Version),
		FlowHash: f.Hash, FlowHashAlgo: f.HashAlgo, Engine: Version, Status: state.Running, CurrentNode: f.Start,
		Context: map[string]any{}, NodeTimings: map[string]*state.NodeTiming{}, Branches: map[string]map[string]int{},
		StartTime: now, LastUpdate: now, TraceParent: req.Trace.TraceParent, TraceState: req.Trace.TraceState,
		Timeline: []state.TimelineEntry{{Seq: 1, Time: state.Stamp(now), Event: "started", Node: f.Start}},
	}
	if req.Input == nil {
		req.Input = map[string]any{} // INPUT.x on an empty start is nil, not an error
	}
	input, ierr := normalize(req.Input)
	vars, verr := normalize(f.Vars)
	if ierr != nil || verr != nil {
		st.Timeline = nil
		return st, fmt.Errorf("input or flow vars: %w", errors.Join(ierr, verr))
	}
	st.Input = input
	st.Index = IndexValues(f, input)
	if m, ok := vars.(map[string]any); ok {
		st.Context[state.ContextVars] = m
	}
	return st, nil
}

// ResumeRequest is one resume of an execution.
type ResumeRequest struct {
	ExecutionID string
	Type        ResumeType
	Data        any
	// Key identifies the carrier (the task message; a copy of it keeps its source's id). It is
	// recorded with the applied resume, so that a redelivery of the same carrier is recognised.
	Key string
}

// Resume continues an execution: from a suspension with the data that woke it, from its
// checkpoint, or by retrying the node it failed at. A refused resume (wrong type, changed flow,
// event not matching) returns an error and leaves the state untouched.
func (ex *Executor) Resume(ctx context.Context, f *Flow, executionID string, rt ResumeType, data any) (*state.Execution, error) {
	return ex.ResumeWith(ctx, f, ResumeRequest{ExecutionID: executionID, Type: rt, Data: data})
}

// ResumeWith is Resume with the carrier's identity. A resume whose effect is already in the
// state — the execution is running and its last applied resume is this one — continues from
// the checkpoint: its first delivery applied it, and the worker died before settling.
func (ex *Executor) ResumeWith(ctx context.Context, f *Flow, req ResumeRequest) (*state.Execution, error) {
	e := ex.begin()
	st, err := e.Store.Load(ctx, req.ExecutionID)
	if err != nil {
		return nil, err
	}
	data, err := normalize(req.Data)
	if err != nil {
		return st, fmt.Errorf("%w: resume data: %w", ErrInvalidResume, err)
	}
	rt := req.Type
	// Cancelling runs no node, so it works whatever happened to the definition.
	if rt != ResumeCancel {
		if err := e.checkHash(st, f, data); err != nil {
			return st, err
		}
	}
	now := e.Clock.Now().UTC()
	p, err := e.plan(st, f, rt, data, req.Key, now)
	if err != nil {
		return st, err
	}
	mark := &state.ResumeMark{Type: string(rt), Node: st.CurrentNode, Key: req.Key, At: state.Stamp(now)}
	switch p.action {
	case actionCancel:
		e.finish(st, state.Cancelled, nil)
		e.timeline(st, state.TimelineEntry{Event: "cancelled", Detail: "cancel requested"})
		return st, e.save(ctx, st, "")
	case actionContinue:
		return e.run(ctx, f, st)
	case actionRetry:
		if st.Error != nil && st.Error.Node != "" {
			st.CurrentNode = st.Error.Node
		}
		delete(st.NodeAttempts, st.CurrentNode)
		st.Status, st.Error, st.EndTime = state.Running, nil, nil
		mark.Node = st.CurrentNode
		st.LastResume = mark
		e.timeline(st, state.TimelineEntry{Event: "retry", Node: st.CurrentNode, Detail: "retry from the failed node"})
		if err := e.save(ctx, st, ""); err != nil {
			return st, err
		}
		return e.run(ctx, f, st)
	}
	// actionApply: the suspension's node took the resume.
	node := p.node
	if p.err != nil {
		return e.fail(ctx, st, &state.ErrorInfo{Type: ErrTypeNode, Message: p.err.Error(), Node: node.ID, Permanent: true})
	}
	if rt == ResumeEvent {
		st.Context[contextEvent] = data
	}
	detail := string(rt)
	if id, ok := eventCarrierID(req.Key); ok && rt == ResumeEvent {
		detail += " " + id // which event woke it (the filter's carrier names it)
	}
	e.timeline(st, state.TimelineEntry{Event: "resumed", Node: node.ID, Detail: detail, Why: p.out.Why})
	// Counted in the state saved with the resume's mark: its redelivery finds the mark and runs
	// on from the checkpoint, counting nothing again.
	st.CountBranch(node.ID, p.out.Branch)
	st.Status, st.Suspend = state.Running, nil
	mark.Node = node.ID
	st.LastResume = mark
	if err := e.apply(st, f, node, p.out, now); err != nil {
		return e.fail(ctx, st, storeError(node.ID, err))
	}
	if err := e.checkpoint(ctx, st, f, node); err != nil {
		return st, err
	}
	return e.run(ctx, f, st)
}

// resumeAction is what a resume does to an execution.
type resumeAction int

const (
	actionApply    resumeAction = iota // the suspended node takes it (out, or err: the node failed)
	actionCancel                       // end the execution as cancelled
	actionRetry                        // re-run the node an errored execution stopped at
	actionContinue                     // run on from the checkpoint
)

type resumePlan struct {
	action resumeAction
	node   *Node
	out    Outcome
	err    error // actionApply: the node's own failure (the execution ends in error)
}

// plan decides what a resume does, or why it is refused; it changes nothing in st.
func (e *execRun) plan(st *state.Execution, f *Flow, rt ResumeType, data any, key string, now time.Time) (resumePlan, error) {
	switch rt {
	case ResumeCancel:
		if st.Status.Terminal() {
			return resumePlan{}, fmt.Errorf("%w: execution is already %s", ErrInvalidResume, st.Status)
		}
		return resumePlan{action: actionCancel}, nil
	case ResumeRetry:
		if st.Status == state.Running && redelivered(st, rt, key) {
			return resumePlan{action: actionContinue}, nil
		}
		if st.Status != state.Error {
			return resumePlan{}, fmt.Errorf("%w: only an execution in error can be retried (it is %s)", ErrInvalidResume, st.Status)
		}
		if st.Error != nil && st.Error.Type == ErrTypeStepLimit {
			// Its step budget is spent: a retry would stop again at once. The flow loops
			// without a guard; fix it (or raise max_steps) and start a new execution.
			return resumePlan{}, fmt.Errorf("%w: the execution used all its steps (%s); start a new execution of a fixed flow", ErrInvalidResume, st.Error.Message)
		}
		if why, ok := deterministicFailure(f, st.Error); ok {
			return resumePlan{}, fmt.Errorf("%w: %s (%s): a retry runs the node again on the same data and ends the same way; "+
				"start a new execution (with other input, or of a fixed flow)", ErrInvalidResume, why, st.Error.Type)
		}
		return resumePlan{action: actionRetry}, nil
	}
	if st.Status == state.Running && (rt == ResumeContinue || redelivered(st, rt, key)) {
		return resumePlan{action: actionContinue}, nil
	}
	if st.Status != state.Suspended || st.Suspend == nil {
		return resumePlan{}, fmt.Errorf("%w: the execution's status is %s, not suspended", ErrInvalidResume, st.Status)
	}
	if since, ok := eventCarrierSuspension(key); ok && rt == ResumeEvent && since != st.Suspend.Since.UnixNano() {
		return resumePlan{}, fmt.Errorf("%w: the event's wake-up was sent for the suspension that began at %s; the execution waits in the one that began at %s",
			ErrInvalidResume, time.Unix(0, since).UTC().Format(time.RFC3339Nano), st.Suspend.Since.UTC().Format(time.RFC3339Nano))
	}
	node, ok := f.Node(st.Suspend.Node)
	if !ok {
		return resumePlan{}, fmt.Errorf("%w: suspended at node %q, which the flow no longer has", ErrInvalidResume, st.Suspend.Node)
	}
	res, ok := node.runner.(Resumer)
	if !ok || !slices.Contains(res.Accepts(), rt) {
		return resumePlan{}, fmt.Errorf("%w: the %s suspension at node %q does not take a resume of type %q", ErrInvalidResume, st.Suspend.Kind, node.ID, rt)
	}
	// The node sees EVENT = the event being delivered; the state itself is left alone.
	call := e.call(st, f, node, now)
	if rt == ResumeEvent {
		call.Event = data // EVENT in the environment too
	}
	out, err := res.Resume(context.Background(), call, rt, data)
	if err != nil {
		if errors.Is(err, ErrEventMismatch) || errors.Is(err, ErrInvalidResume) {
			return resumePlan{}, err
		}
		return resumePlan{action: actionApply, node: node, err: err}, nil
	}
	return resumePlan{action: actionApply, node: node, out: out}, nil
}

// EventCarrier is the carrier identity (the task's source_message_id) of the resume that
// delivers event eventID to the suspension that began at since: "event:<event id>:<since in
// Unix ns>". The suspension mark makes a second copy of a wake-up harmless wherever it lands
// (docs/events.md, "One-shot wake-up markers"): while the execution runs on the first, the
// copy is its redelivery (continue from the checkpoint); once it waits again — in a later
// suspension, even of the same node and type — the copy is refused, since the event was for
// the earlier one. Event ids have no ':'.
func EventCarrier(eventID string, since time.Time) string {
	return "event:" + eventID + ":" + strconv.FormatInt(since.UnixNano(), 10)
}

// eventCarrierSuspension reads the suspension mark of an EventCarrier (ok is false for any
// other key, such as the "event:<id>" of a filter that sent no mark).
func eventCarrierSuspension(key string) (since int64, ok bool) {
	rest, ok := strings.CutPrefix(key, "event:")
	if !ok {
		return 0, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 1 {
		return 0, false
	}
	since, err := strconv.ParseInt(rest[i+1:], 10, 64)
	return since, err == nil
}

// WokenBy reports whether event eventID woke st: a "resumed" entry of its timeline names it
// (the executor writes "event <id>"), or its last resume was carried by it (when the timeline
// has dropped that entry since).
func WokenBy(st *state.Execution, eventID string) bool {
	if m := st.LastResume; m != nil && m.Type == string(ResumeEvent) {
		if id, ok := eventCarrierID(m.Key); ok && id == eventID {
			return true
		}
	}
	want := string(ResumeEvent) + " " + eventID
	for _, e := range st.Timeline {
		if e.Event == "resumed" && e.Detail == want {
			return true
		}
	}
	return false
}

// eventCarrierID is the event id an EventCarrier names (ok is false for any other key).
func eventCarrierID(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "event:")
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 1 {
		return "", false
	}
	return rest[:i], true
}

// redelivered reports whether a resume of a running execution is the one last applied to it
// (same type and, when both are known, the same carrier): its effect is in the state.
func redelivered(st *state.Execution, rt ResumeType, key string) bool {
	m := st.LastResume
	return m != nil && m.Type == string(rt) && (key == "" || m.Key == "" || m.Key == key)
}

// CheckResume reports whether a resume would be accepted, without changing st or running
// anything: nil when the worker would take it, else the error Resume would return (a
// changed flow, a type the execution does not take, an event its match refuses …). It is
// advice for producers such as the CLI; the worker decides again when it runs the resume.
func CheckResume(f *Flow, st *state.Execution, rt ResumeType, data any, limits ExprLimits, now time.Time) error {
	data, err := normalize(data)
	if err != nil {
		return fmt.Errorf("%w: resume data: %w", ErrInvalidResume, err)
	}
	if rt != ResumeCancel {
		if _, err := CheckFlowHash(st.FlowHashAlgo, st.FlowHash, f.HashAlgo, f.Hash, AllowsFlowHashChange(data)); err != nil {
			return err
		}
	}
	e := &execRun{Executor: &Executor{}, set: Settings{Expr: limits}}
	_, err = e.plan(st, f, rt, data, "", now)
	return err
}

// AllowFlowHashChangeKey is the key of resume data that overrides a flow_hash_mismatch (a hash
// that differs in algorithm and value, as after an engine upgrade; docs/flows.md): the operator
// confirms the definition is unchanged. It does not override a definition changed under the
// same algorithm (ErrFlowChanged).
const AllowFlowHashChangeKey = "allow_flow_hash_change"

// AllowsFlowHashChange reports whether resume data carries the override.
func AllowsFlowHashChange(data any) bool {
	m, ok := data.(map[string]any)
	if !ok {
		return false
	}
	allow, _ := m[AllowFlowHashChangeKey].(bool)
	return allow
}

func (e *execRun) checkHash(st *state.Execution, f *Flow, data any) error {
	check, err := CheckFlowHash(st.FlowHashAlgo, st.FlowHash, f.HashAlgo, f.Hash, AllowsFlowHashChange(data))
	if err != nil {
		return err
	}
	if check.WriteNewHash {
		e.Log.Warn().Str("event", "engine.flow_hash_change_allowed").Str("execution_id", st.ExecutionID).
			Str("old_hash", st.FlowHash).Str("old_algo", st.FlowHashAlgo).Str("new_hash", f.Hash).Str("new_algo", f.HashAlgo).
			Msg("flow hash changed across an engine upgrade; resuming because allow_flow_hash_change was given")
		e.timeline(st, state.TimelineEntry{Event: "flow_hash_changed", Detail: st.FlowHash + " → " + f.Hash})
		st.FlowHash = f.Hash
	}
	st.FlowHashAlgo = f.HashAlgo
	return nil
}

func (e *Executor) settings() Settings {
	if e.Settings == nil {
		return DefaultSettings()
	}
	return e.Settings()
}

// execRun is one Start or Resume call: the executor plus the settings read for it.
type execRun struct {
	*Executor
	set Settings
	// unsaved is the last node whose step is in the state but not saved yet ("" when the
	// state in memory is the one saved), unsavedSince when the first of those steps ended: see
	// checkpoint.
	unsaved      string
	unsavedSince time.Time
}

// maxUnsaved bounds how long control steps go unsaved: a long loop of control nodes is still
// saved every second, so a crash replays at most a second of it.
const maxUnsaved = time.Second

// stopSaveBudget bounds the save of the unsaved control steps when a run stops.
const stopSaveBudget = 5 * time.Second

func (e *Executor) begin() *execRun { return &execRun{Executor: e, set: e.settings()} }

// run is the step loop. It returns with the state saved at its last step boundary; an error
// means the last save failed (transient storage trouble or a lost lease) or a node could not
// be run at all, and the caller must not treat the execution as settled.
func (e *execRun) run(ctx context.Context, f *Flow, st *state.Execution) (*state.Execution, error) {
	set := e.set
	budget := set.Deadline
	if f.Timeout > 0 {
		budget = seconds(f.Timeout)
	}
	deadline := e.Clock.Now().Add(budget)
	// A step that calls out runs under the budget's context, made for the first such step: a
	// control node returns within microseconds without looking at its context, and the deadline
	// check before each step bounds a run of them, so a run of control nodes only (most starts)
	// sets no timer.
	runCtx := lazyDeadline{parent: ctx, at: time.Now().Add(budget)} // the real clock, as the calls'
	defer runCtx.stop()
	maxSteps := cmp.Or(f.MaxSteps, DefaultMaxSteps)

	for st.Status == state.Running {
		if err := ctx.Err(); err != nil {
			// Shutting down (a drain, Ctrl-C): the caller redelivers from the checkpoint. The
			// control steps since the last save end at a step boundary: they are saved first
			// (past the cancelled context; a fenced save still refuses a lost lease).
			if e.unsaved != "" {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopSaveBudget)
				serr := e.save(sctx, st, e.unsaved)
				cancel()
				if serr != nil {
					e.Log.Warn().Err(serr).Str("event", "engine.stop_save_failed").Str("execution_id", st.ExecutionID).
						Msg("the control steps since the last save could not be saved: they run again")
				}
			}
			return st, err
		}
		if e.Cancel != nil && !set.DisableCancelCheckpoint {
			cancelled, err := e.Cancel.Cancelled(ctx, st.ExecutionID)
			if err != nil {
				return st, fmt.Errorf("read cancel flag: %w", err)
			}
			if cancelled {
				e.finish(st, state.Cancelled, nil)
				e.timeline(st, state.TimelineEntry{Event: "cancelled", Node: st.CurrentNode, Detail: "cancel flag set"})
				return st, e.save(ctx, st, "")
			}
		}
		if e.Clock.Now().After(deadline) {
			return e.fail(ctx, st, deadlineError(st.CurrentNode, budget))
		}
		if st.StepCount >= maxSteps {
			return e.fail(ctx, st, &state.ErrorInfo{Type: ErrTypeStepLimit, Node: st.CurrentNode, Permanent: true,
				Message: fmt.Sprintf("the execution ran %d steps, the limit (set max_steps in the flow to change it); a loop without a guard?", maxSteps)})
		}
		node, ok := f.Node(st.CurrentNode)
		if !ok || node.runner == nil {
			return e.fail(ctx, st, &state.ErrorInfo{Type: ErrTypeUnknownNode, Node: st.CurrentNode, Permanent: true,
				Message: fmt.Sprintf("node %q is not in flow %s", st.CurrentNode, f.ID)})
		}
		if e.unsaved != "" && !node.instant() {
			// Nothing calls out before the steps that led here are saved: a crash in the call
			// replays it from them, and a reader sees the execution at the node that is running.
			if err := e.save(ctx, st, e.unsaved); err != nil {
				return st, err
			}
		}
		stepCtx := ctx
		if !node.instant() {
			stepCtx = runCtx.context()
		}
		if err := e.step(stepCtx, ctx, st, f, node); err != nil {
			return st, err
		}
	}
	return st, nil
}

// lazyDeadline is a context with a deadline made the first time it is asked for.
type lazyDeadline struct {
	parent context.Context
	at     time.Time
	ctx    context.Context
	cancel context.CancelFunc
}

func (d *lazyDeadline) context() context.Context {
	if d.ctx == nil {
		d.ctx, d.cancel = context.WithDeadline(d.parent, d.at)
	}
	return d.ctx
}

// stop releases the context's timer, if it was made.
func (d *lazyDeadline) stop() {
	if d.cancel != nil {
		d.cancel()
	}
}

// step runs one node and saves the state.
func (e *execRun) step(runCtx, ctx context.Context, st *state.Execution, f *Flow, node *Node) error {
	set := e.set
	start := e.Clock.Now().UTC()
	started := state.Stamp(start)
	e.emit(st, state.TimelineEntry{Time: started, Node: node.ID, Event: "node_started", Detail: node.Type})
	call := e.call(st, f, node, start)
	var out Outcome
	var err error
	if tracing.Enabled() {
		out, err = e.runTraced(runCtx, st, node, call)
	} else {
		out, err = node.runner.Run(runCtx, call)
	}
	end := e.Clock.Now().UTC()
	st.StepCount++
	timing(st, node.ID, started, start, end)
	ms := end.Sub(start).Milliseconds()

	if err != nil {
		switch {
		case runCtx.Err() != nil && ctx.Err() == nil:
			budget := seconds(f.Timeout)
			if budget == 0 {
				budget = set.Deadline
			}
			_, ferr := e.fail(ctx, st, deadlineError(node.ID, budget))
			return ferr
		case ctx.Err() != nil:
			return ctx.Err()
		}
		return e.nodeFailed(ctx, st, node, err, ms)
	}
	e.timeline(st, state.TimelineEntry{Event: stepEvent(out), Node: node.ID, Millis: ms, Detail: stepDetail(out), Why: out.Why})
	// Counted where the run is (timing above): in the state this step saves, so a step run
	// again from the checkpoint after a crash is counted once, as its run is.
	st.CountBranch(node.ID, out.Branch)
	if err := e.apply(st, f, node, out, end); err != nil {
		_, ferr := e.fail(ctx, st, storeError(node.ID, err))
		return ferr
	}
	return e.checkpoint(ctx, st, f, node)
}

// runTraced runs a node under a span of its own: a child of the delivery's span, which names
// the node, its type, its attempt and the lease's fencing generation, and says how it ended.
func (e *execRun) runTraced(ctx context.Context, st *state.Execution, node *Node, call *Call) (Outcome, error) {
	ctx, span := tracing.Start(ctx, "node "+node.ID, trace.SpanKindInternal)
	defer span.End()
	span.SetAttributes(attribute.String(tracing.AttrNodeID, node.ID), attribute.String(tracing.AttrNodeType, node.Type),
		attribute.Int(tracing.AttrAttempt, st.NodeAttempts[node.ID]+1), attribute.String(tracing.AttrExecution, st.ExecutionID),
		attribute.String(tracing.AttrTenant, st.TenantID), attribute.String(tracing.AttrFlow, st.FlowID))
	if e.LeaseEpoch != nil {
		span.SetAttributes(attribute.Int64(tracing.AttrLeaseEpoch, e.LeaseEpoch()))
	}
	out, err := node.runner.Run(ctx, call)
	if err != nil {
		class := "transient"
		if IsPermanent(err) {
			class = "permanent"
		}
		tracing.Fail(span, class, err)
		span.SetAttributes(attribute.String(tracing.AttrOutcome, "failed"))
		return out, err
	}
	span.SetAttributes(attribute.String(tracing.AttrOutcome, stepEvent(out)))
	if out.Branch != "" {
		span.SetAttributes(attribute.String(tracing.AttrBranch, out.Branch))
	}
	return out, nil
}

// checkpoint saves the step node just took, unless it and the next node are control nodes:
// a control step followed by another is not saved on its own. Both only evaluate expressions
// over the state, so a crash before the next save replays them from the last one to the same
// result (their log lines aside). The run saves before a node that calls out (run), at every
// end, suspension, failure and retry, and when it stops for a deadline, the step limit or a
// cancel, when it stops (run), and once a row has gone unsaved for maxUnsaved. A resume applied
// by a suspended node is such a step too: its redelivery meets the suspension again and applies
// the same resume.
func (e *execRun) checkpoint(ctx context.Context, st *state.Execution, f *Flow, node *Node) error {
	if next, ok := f.Node(st.CurrentNode); ok && st.Status == state.Running && node.instant() && next.instant() {
		now := e.Clock.Now()
		if e.unsaved == "" {
			e.unsavedSince = now
		}
		if now.Sub(e.unsavedSince) < maxUnsaved {
			e.unsaved = node.ID
			return nil
		}
	}
	return e.save(ctx, st, node.ID)
}

// apply records a node's outcome in the state. Outputs and variables go through a JSON round
// trip first, so the state holds exactly what every backend would give back, and a value that
// cannot be stored is caught here, at the node that produced it.
func (e *execRun) apply(st *state.Execution, f *Flow, node *Node, out Outcome, now time.Time) error {
	// A result that alone is over the state bound is refused before it is encoded: a node can
	// hand back many references to one large value (60 copies of a 16 MB string cost 16 MB in
	// memory, and would cost 960 MB to encode).
	if max := e.maxState(); !within(out.Output, max) || !within(out.Vars, max) {
		return &StateTooLargeError{ExecutionID: st.ExecutionID, Size: max + 1, Max: max}
	}
	output, err := normalize(out.Output)
	if err != nil {
		return err
	}
	vars, err := normalize(out.Vars)
	if err != nil {
		return err
	}
	if out.Output != nil || out.Suspend == nil {
		st.Nodes()[node.ID] = output
	}
	if m, ok := vars.(map[string]any); ok {
		dst := st.Vars()
		for k, v := range m {
			dst[k] = v
		}
	}
	delete(st.NodeAttempts, node.ID)
	switch {
	case out.Fail != nil:
		info := *out.Fail
		info.Node = node.ID
		e.finish(st, state.Error, &info)
	case out.End:
		st.Output = output
		e.finish(st, state.Completed, nil)
	case out.Suspend != nil:
		s := *out.Suspend
		s.Node, s.Since = node.ID, now
		st.Status, st.Suspend = state.Suspended, &s
		if c, ok := node.runner.(correlator); ok {
			// The state is now what a resume check will see (the step counted, the wait's
			// output not recorded): its environment is the one the match is evaluated in.
			s.Correlation = c.correlation(exprEnv(st, f, node.ID, nil), e.set.Expr)
		}
	default:
		next := cmp.Or(out.Next, node.Next)
		if next == "" {
			e.finish(st, state.Error, &state.ErrorInfo{Type: ErrTypeNoBranch, Node: node.ID, Permanent: true,
				Message: "the node gave no next node"})
			return nil
		}
		st.CurrentNode = next
	}
	st.LastUpdate = now
	return nil
}

// nodeFailed retries the node when its policy allows, else ends the execution in error.
func (e *execRun) nodeFailed(ctx context.Context, st *state.Execution, node *Node, err error, ms int64) error {
	set := e.set
	attempts := st.NodeAttempts[node.ID] + 1
	permanent := IsPermanent(err)
	r := node.Retry
	if permanent || r == nil || set.DisableNodeRetry || attempts >= r.MaxAttempts {
		info := &state.ErrorInfo{Type: ErrTypeNode, Node: node.ID, Message: err.Error(), Permanent: permanent}
		if !permanent && r != nil && !set.DisableNodeRetry {
			info.Message = fmt.Sprintf("%s (after %d attempts)", err, attempts)
		}
		_, ferr := e.fail(ctx, st, info)
		return ferr
	}
	if st.NodeAttempts == nil {
		st.NodeAttempts = map[string]int{}
	}
	st.NodeAttempts[node.ID] = attempts
	wait := r.Backoff(attempts)
	e.timeline(st, state.TimelineEntry{Event: "retry", Node: node.ID, Millis: ms,
		Detail: fmt.Sprintf("attempt %d of %d failed: %v; next in %s", attempts, r.MaxAttempts, err, wait)})
	st.LastUpdate = e.Clock.Now().UTC()
	if err := e.save(ctx, st, node.ID); err != nil {
		return err
	}
	if wait > 0 {
		if err := e.Clock.Sleep(ctx, wait); err != nil {
			return err
		}
	}
	return nil
}

// Backoff is the wait before the next try once attempt tries have failed (the control plane
// says when a node in its back-off runs again: control/progress.go).
func (r *RetryPolicy) Backoff(attempt int) time.Duration {
	mult := r.BackoffMultiplier
	if mult == 0 {
		mult = 1
	}
	s := r.BackoffSeconds * math.Pow(mult, float64(attempt-1))
	if r.MaxBackoffSeconds > 0 {
		s = min(s, r.MaxBackoffSeconds)
	}
	return seconds(min(s, MaxBackoff))
}

// fail ends the execution in error and saves it.
func (e *execRun) fail(ctx context.Context, st *state.Execution, info *state.ErrorInfo) (*state.Execution, error) {
	e.finish(st, state.Error, info)
	return st, e.save(ctx, st, info.Node)
}

func (e *execRun) finish(st *state.Execution, status state.Status, info *state.ErrorInfo) {
	now := e.Clock.Now().UTC()
	st.Status, st.Error, st.Suspend = status, info, nil
	st.EndTime, st.LastUpdate = &now, now
	ev := string(status)
	detail := ""
	if info != nil {
		detail = info.Type + ": " + info.Message
	}
	if status != state.Cancelled {
		e.timeline(st, state.TimelineEntry{Event: ev, Node: st.CurrentNode, Detail: detail})
	}
}

// save persists the state. A state that cannot be serialized, or is over the state bound, is
// turned into an error terminal state naming the node, with the offending values dropped, so
// it is never retried forever.
func (e *execRun) save(ctx context.Context, st *state.Execution, nodeID string) error {
	e.unsaved = ""
	var err error
	if tracing.Enabled() {
		err = e.saveTraced(ctx, st, nodeID)
	} else {
		err = e.Store.Save(ctx, st)
	}
	if err == nil || !unstorable(err) {
		return err
	}
	e.Log.Error().Str("event", "engine.state_unstorable").Str("execution_id", st.ExecutionID).Str("node", nodeID).
		Err(err).Msg("execution state cannot be stored; ending the execution in error")
	if nodeID != "" {
		delete(st.Nodes(), nodeID)
	}
	delete(st.Context, contextEvent)
	e.finish(st, state.Error, storeError(nodeID, err))
	if err := e.Store.Save(ctx, st); !unstorable(err) {
		return err
	}
	// Still not storable: keep the execution's identity and the error, drop the data.
	st.Context, st.Input, st.Output = map[string]any{}, nil, nil
	return e.Store.Save(ctx, st)
}

// saveTraced is a checkpoint's save under a client span of its own (one storage round trip:
// the fenced save script on Redis): a slow or refused save shows in the trace, with the status
// it wrote.
func (e *execRun) saveTraced(ctx context.Context, st *state.Execution, nodeID string) error {
	ctx, span := tracing.Start(ctx, "save state", trace.SpanKindClient)
	defer span.End()
	span.SetAttributes(attribute.String(tracing.AttrNodeID, nodeID), attribute.String(tracing.AttrExecution, st.ExecutionID),
		attribute.String("plaita.execution.status", string(st.Status)))
	err := e.Store.Save(ctx, st)
	if err != nil {
		class := "transient"
		if unstorable(err) {
			class = "unstorable"
		}
		tracing.Fail(span, class, err)
	}
	return err
}

// unstorable reports the permanent save failures: a value JSON cannot carry, a state over the
// bound.
func unstorable(err error) bool {
	return errors.Is(err, ErrStateSerialization) || errors.Is(err, ErrStateTooLarge)
}

// storeError describes a permanent save failure at a node.
func storeError(nodeID string, err error) *state.ErrorInfo {
	if !errors.Is(err, ErrStateTooLarge) {
		return serializationError(nodeID, err)
	}
	where := "the execution state"
	if nodeID != "" {
		where = fmt.Sprintf("the result of node %q", nodeID)
	}
	return &state.ErrorInfo{Type: ErrTypeStateTooLarge, Node: nodeID, Permanent: true,
		Message: fmt.Sprintf("%s makes the execution state too large to store: %v", where, err)}
}

func (e *execRun) maxState() int {
	if e.set.MaxStateBytes < 1 {
		return DefaultMaxStateBytes
	}
	return e.set.MaxStateBytes
}

func serializationError(nodeID string, err error) *state.ErrorInfo {
	where := "the execution state"
	if nodeID != "" {
		where = fmt.Sprintf("node %q produced a value that", nodeID)
	}
	return &state.ErrorInfo{Type: ErrTypeSerialization, Node: nodeID, Permanent: true,
		Message: fmt.Sprintf("%s cannot be stored as JSON (NaN, infinity, a cycle, nesting deeper than %d levels or a non-data value): %v",
			where, state.MaxDocumentDepth, err)}
}

func deadlineError(nodeID string, budget time.Duration) *state.ErrorInfo {
	return &state.ErrorInfo{Type: ErrTypeDeadline, Node: nodeID, Permanent: true,
		Message: fmt.Sprintf("the execution ran out of its %s budget (flow timeout, else PLAITA_EXECUTION_DEADLINE_SECONDS)", budget)}
}

// call builds what a node sees.
func (e *execRun) call(st *state.Execution, f *Flow, node *Node, now time.Time) *Call {
	c := &Call{Node: node, Execution: st, Now: now, Event: st.Context[contextEvent], limits: e.set.Expr, log: e.Log, creds: e.Credentials}
	c.mkEnv = func() map[string]any { return exprEnv(st, f, node.ID, c.Event) }
	return c
}

// exprEnv is what an expression of node sees: the one place the environment is built (the
// executor's nodes and ExampleEvent both use it).
func exprEnv(st *state.Execution, f *Flow, node string, event any) map[string]any {
	nodes := st.Nodes()
	return map[string]any{
		"INPUT": st.Input,
		"NODE":  nodes,
		"$NODE": nodes,
		"VARS":  st.Vars(),
		"EVENT": event,
		"EXECUTION": map[string]any{
			"id": st.ExecutionID, "tenant_id": st.TenantID, "flow_id": f.ID, "flow_version": st.FlowVersion,
			"step_count": st.StepCount, "start_time": st.StartTime.Format(time.RFC3339Nano), "node": node,
			"attempt": st.NodeAttempts[node] + 1,
		},
	}
}

func (e *execRun) timeline(st *state.Execution, entry state.TimelineEntry) {
	if entry.Time == "" {
		entry.Time = state.Stamp(e.Clock.Now())
	}
	e.emit(st, AppendTimeline(st, entry, e.set.TimelineMax))
}

func (e *execRun) emit(st *state.Execution, entry state.TimelineEntry) {
	if e.OnEvent != nil {
		e.OnEvent(Event{ExecutionID: st.ExecutionID, TenantID: st.TenantID, FlowID: st.FlowID, Status: st.Status, Entry: entry})
	}
}

// timing counts a run of node id from start (stamped as started: the step's own timeline entry
// formatted it already) to end.
func timing(st *state.Execution, id string, started state.Timestamp, start, end time.Time) {
	if st.NodeTimings == nil {
		st.NodeTimings = map[string]*state.NodeTiming{}
	}
	t := st.NodeTimings[id]
	if t == nil {
		t = &state.NodeTiming{FirstStart: started}
		st.NodeTimings[id] = t
	}
	t.Runs++
	t.LastStart, t.LastEnd = started, state.Stamp(end)
	t.TotalMillis += end.Sub(start).Milliseconds()
}

func stepEvent(out Outcome) string {
	if out.Suspend != nil {
		return "suspended"
	}
	return "step"
}

func stepDetail(out Outcome) string {
	switch {
	case out.Suspend != nil:
		return out.Suspend.Kind
	case out.Next != "":
		return "→ " + out.Next
	}
	return ""
}

// normalize gives v the shape it has after a trip through storage (JSON), or the
// serialization error it would meet there.
func normalize(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if out, ok := jsonCopy(v, 0); ok {
		return out, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateSerialization, err)
	}
	// A value nested past the document bound could be saved in a state too deep to load again
	// (a loop that wraps a variable in itself grows it by a level a step).
	if err := state.CheckDepth(b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateSerialization, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateSerialization, err)
	}
	return out, nil
}

// jsonCopy is normalize without the encoding, for values already made of JSON's own types
// (what the expression language and the nodes return almost always): a deep copy, as a trip
// through JSON would give. ok is false for anything a trip could change or reject — other
// types, NaN and infinities, invalid UTF-8, a shape nested past state.MaxDocumentDepth (or
// cyclic) — which normalize then sends through encoding/json and its depth check.
// FuzzNormalize checks the two agree.
func jsonCopy(v any, depth int) (any, bool) {
	switch x := v.(type) {
	case nil, bool:
		return x, true
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case string:
		return x, utf8.ValidString(x)
	case []any:
		if x == nil {
			return nil, true // encodes as null
		}
		if depth >= state.MaxDocumentDepth {
			return nil, false
		}
		out := make([]any, len(x))
		for i, e := range x {
			c, ok := jsonCopy(e, depth+1)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
		return out, true
	case map[string]any:
		if x == nil {
			return nil, true
		}
		if depth >= state.MaxDocumentDepth {
			return nil, false
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			if !utf8.ValidString(k) {
				return nil, false
			}
			c, ok := jsonCopy(e, depth+1)
			if !ok {
				return nil, false
			}
			out[k] = c
		}
		return out, true
	}
	return nil, false
}

// within reports whether v's JSON encoding is at most max bytes, estimated by walking it
// (string and key lengths, a bound for scalars) without encoding anything, and stopping as
// soon as the budget is gone. Shared references count every time, as they encode.
func within(v any, max int) bool {
	// Past maxWalkDepth it stops counting: a cycle, or a shape the encoder rejects itself.
	const maxWalkDepth = 1000
	budget, depth := max, 0
	var walk func(any) bool
	walk = func(v any) bool {
		if depth >= maxWalkDepth {
			return true
		}
		depth++
		defer func() { depth-- }()
		switch x := v.(type) {
		case nil, bool:
			budget -= 5
		case string:
			budget -= len(x) + 2
		case map[string]any:
			budget -= 2
			for k, e := range x {
				budget -= len(k) + 4
				if budget < 0 || !walk(e) {
					return false
				}
			}
		case []any:
			budget -= 2
			for _, e := range x {
				budget--
				if budget < 0 || !walk(e) {
					return false
				}
			}
		case []string:
			for _, e := range x {
				budget -= len(e) + 3
			}
		default: // numbers and other scalars; unusual shapes are bounded by the store
			budget -= 24
		}
		return budget >= 0
	}
	return walk(v)
}
