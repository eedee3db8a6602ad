package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/tracing"
)

// Flows and executions: adapters over package control, the operations `plaita start`,
// `plaita flow` and `plaita execution` run. Each handler parses its input, calls one
// operation and returns its typed result; a refusal is rendered by problemFor (400 Invalid,
// 404 NotFound, 409 Conflict, with what is accepted instead and how to unblock it).

// ---- flows ----

type flowListIn struct {
	Cursor string `query:"cursor" maxLength:"4096" doc:"the next_cursor of the page before"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"` // control.MaxFlowList
}

type flowListOut struct{ Body FlowList }

func (a *API) listFlows(ctx context.Context, c *Call, in *flowListIn) (*flowListOut, error) {
	page, err := a.d.Plane.FlowPage(ctx, c.Tenant, in.Cursor, in.Limit)
	if err != nil {
		return nil, err
	}
	out := FlowList{TenantID: c.Tenant, Page: control.Page[FlowSummary]{Items: make([]FlowSummary, 0, len(page.Items)), NextCursor: page.NextCursor}}
	for _, f := range page.Items {
		out.Items = append(out.Items, FlowSummary{FlowID: f.FlowID, PublishedAt: f.PublishedAt, Latest: f.Latest, Versions: f.Versions})
	}
	return &flowListOut{Body: out}, nil
}

type flowGetIn struct {
	ID      string `path:"id" minLength:"1" maxLength:"200"`
	Version string `query:"version" maxLength:"200" doc:"a published version (default: the latest)"`
}

type flowGetOut struct{ Body FlowView }

func (a *API) getFlow(ctx context.Context, c *Call, in *flowGetIn) (*flowGetOut, error) {
	f, err := a.catalog.Flow(ctx, c.Tenant, in.ID, in.Version)
	if err != nil {
		return nil, err
	}
	return &flowGetOut{Body: flowViewOf(f)}, nil
}

type flowDefIn struct {
	Body struct {
		Definition json.RawMessage `json:"definition" doc:"the flow definition (docs/flows.md)"`
		Version    string          `json:"version,omitempty" maxLength:"200" doc:"publish only: the version, when the definition names none (default: 12 hex digits of its hash)"`
	}
}

// FlowProblem is one problem of a definition, at its JSON path.
type FlowProblem struct {
	Path    string `json:"path" doc:"JSON path in the definition: nodes[2].params.url"`
	Message string `json:"message"`
}

// FlowValidation is what validate says of a definition.
type FlowValidation struct {
	Valid    bool          `json:"valid"`
	FlowID   string        `json:"flow_id,omitempty"`
	Nodes    int           `json:"nodes,omitempty"`
	Hash     string        `json:"flow_hash,omitempty"`
	Problems []FlowProblem `json:"problems"`
}

type flowValidationOut struct{ Body FlowValidation }

// validateFlow parses a definition with a worker's node types: a 200 either way, with every
// problem and its path (an invalid flow is the answer, not an error of the request).
func (a *API) validateFlow(_ context.Context, _ *Call, in *flowDefIn) (*flowValidationOut, error) {
	if len(in.Body.Definition) == 0 {
		return nil, NewProblem(http.StatusBadRequest, "invalid_request", "definition is required")
	}
	out := FlowValidation{Problems: []FlowProblem{}}
	f, err := a.d.Plane.ParseFlow(in.Body.Definition)
	var ve *engine.ValidationError
	switch {
	case errors.As(err, &ve):
		out.FlowID = ve.FlowID
		for _, p := range ve.Problems {
			out.Problems = append(out.Problems, FlowProblem{Path: p.Path, Message: p.Message})
		}
		return &flowValidationOut{Body: out}, nil
	case err != nil:
		return nil, err
	}
	out.Valid, out.FlowID, out.Nodes = true, f.ID, len(f.Nodes)
	if out.Hash, err = engine.FlowHash(in.Body.Definition); err != nil {
		return nil, err
	}
	return &flowValidationOut{Body: out}, nil
}

// FlowPublished is what publish did.
type FlowPublished struct {
	TenantID string `json:"tenant_id"`
	FlowID   string `json:"flow_id"`
	Version  string `json:"version"`
	Hash     string `json:"flow_hash"`
	Result   string `json:"result" doc:"published, or already_published (the same definition under that version)"`
	// PublishedBy is who published the version first (the console's record).
	PublishedBy string `json:"published_by,omitempty"`
}

type flowPublishedOut struct {
	Status int
	Body   FlowPublished
}

// publishFlow publishes a definition as an immutable version (control.Catalog.Publish: a
// changed definition under a published version is a 409 with the unblock hint) and records it
// in the console database (flow_versions: who published what, when).
func (a *API) publishFlow(ctx context.Context, c *Call, in *flowDefIn) (*flowPublishedOut, error) {
	if len(in.Body.Definition) == 0 {
		return nil, NewProblem(http.StatusBadRequest, "invalid_request", "definition is required")
	}
	pub, err := a.catalog.Publish(ctx, control.PublishRequest{Tenant: c.Tenant, Definition: in.Body.Definition, Version: in.Body.Version,
		By: c.Principal.Actor})
	if err != nil {
		return nil, err
	}
	status, body := a.published(c, pub)
	return &flowPublishedOut{Status: status, Body: body}, nil
}

// published renders a publication (of a definition, or of a draft) and notes it for the audit
// row; a record the console database could not write is logged.
func (a *API) published(c *Call, pub control.FlowPublished) (int, FlowPublished) {
	c.Audit.Target = pub.Flow.ID + "@" + pub.Version
	c.Note("result", pub.Result)
	c.Note("flow_hash", pub.Hash)
	if pub.RecordErr != nil {
		// Redis has the version (the workers run it); the console's record of it lags.
		a.d.Log.Warn().Str("event", "console.version_record_failed").Str("flow", pub.Flow.ID).Str("version", pub.Version).
			Str("request_id", c.RequestID).Err(pub.RecordErr).Msg("flow published, but its record in the console database was not written")
	}
	status := http.StatusCreated
	if pub.Result == control.AlreadyPublished {
		status = http.StatusOK
	}
	return status, FlowPublished{TenantID: c.Tenant, FlowID: pub.Flow.ID, Version: pub.Version, Hash: pub.Hash, Result: string(pub.Result),
		PublishedBy: pub.Record.PublishedBy}
}

// ---- executions ----

type startIn struct {
	IdempotencyKey string `header:"Idempotency-Key" maxLength:"255" doc:"a client's retry with the same key makes no second execution"`
	Body           struct {
		FlowID  string          `json:"flow_id" minLength:"1" maxLength:"200"`
		Version string          `json:"version,omitempty" maxLength:"200" doc:"default: the latest published"`
		Input   json.RawMessage `json:"input,omitempty" doc:"the execution's INPUT (default {})"`
	}
}

// ExecutionStarted is a start enqueued (or, for a retried Idempotency-Key, the one enqueued
// before: replayed).
type ExecutionStarted struct {
	control.Started
}

type startOut struct {
	Status int
	Body   ExecutionStarted
}

func (a *API) startExecution(ctx context.Context, c *Call, in *startIn) (*startOut, error) {
	req := control.StartRequest{Tenant: c.Tenant, FlowID: in.Body.FlowID, Version: in.Body.Version, Input: in.Body.Input}
	if k := in.IdempotencyKey; k != "" {
		c.Note("idempotency_key", control.IdempotencyKeyFingerprint(k))
		c.Audit.Target = control.IdempotentID(c.Tenant, k)
	}
	s, err := control.StartOnce(ctx, a.d.Plane, req, in.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	c.Audit.Target = s.ExecutionID
	if s.Replayed {
		c.Note("replayed", true)
		return &startOut{Status: http.StatusOK, Body: ExecutionStarted{Started: s}}, nil
	}
	c.Note("flow", s.FlowID+"@"+s.FlowVersion)
	if s.EnqueueRetries > 0 {
		c.Note("enqueue_retries", s.EnqueueRetries) // the connection failed under the first XADD
	}
	return &startOut{Status: http.StatusCreated, Body: ExecutionStarted{Started: s}}, nil
}

type executionListIn struct {
	Status        string    `query:"status" enum:"pending,running,suspended,completed,error,cancelled"`
	FlowID        string    `query:"flow_id" maxLength:"200"`
	StartedAfter  time.Time `query:"started_after" doc:"only executions started at or after this time (RFC 3339)"`
	StartedBefore time.Time `query:"started_before" doc:"only executions started before this time (RFC 3339)"`
	WakeBefore    time.Time `query:"wake_before" doc:"suspended executions whose due time (a delay's end, a timeout) is before this time (RFC 3339)"`
	WakeAfter     time.Time `query:"wake_after" doc:"suspended executions whose due time is at or after this time (RFC 3339)"`
	// index[order_id]=ord-1 (OpenAPI deepObject): the one form of a query parameter with a
	// name of the caller's that huma checks and documents.
	Index   map[string]string `query:"index,deepObject" doc:"index[<field>]=<value>: only executions of flows that index <field> (docs/flows.md, \"Indexed fields\") started with that value; the value is read as JSON when it parses (17, true, \"17\"), else as a string; several are all required"`
	WokenBy string            `query:"woken_by" maxLength:"200" doc:"only the executions this event (its id) woke"`
	Count   bool              `query:"count" doc:"also count every execution the filter matches (total; the newest 10,000 at most, total_bounded when there may be more)"`
	Sort    string            `query:"sort" enum:"started,wake" doc:"started (default): newest start first; wake: soonest next wake first (a due time, a retry's next attempt; those nothing times last), sorting the newest 10,000 matching"`
	Cursor  string            `query:"cursor" maxLength:"4096" doc:"the next_cursor of the page before"`
	Limit   int               `query:"limit" minimum:"1" maximum:"1000" default:"50"` // control.MaxListLimit, control.DefaultListLimit
}

// ExecutionList is a page of executions, newest first.
type ExecutionList struct {
	TenantID string `json:"tenant_id"`
	control.Page[ExecutionSummary]
	Skipped  int  `json:"skipped"`
	Degraded bool `json:"degraded" doc:"index members were skipped (invalid, missing or corrupt)"`
	Bounded  bool `json:"bounded,omitempty" doc:"sort=wake: only the newest 10,000 matching executions were sorted"`
	// Total is count=true's.
	Total        *int `json:"total,omitempty" doc:"count=true: the executions the filter matches, counting the newest 10,000 at most"`
	TotalBounded bool `json:"total_bounded,omitempty" doc:"count=true: the count stopped at its bound; more may match"`
}

type executionListOut struct{ Body ExecutionList }

func (a *API) listExecutions(ctx context.Context, c *Call, in *executionListIn) (*executionListOut, error) {
	req := control.ListRequest{Cursor: in.Cursor, Limit: in.Limit, Status: state.Status(in.Status), FlowID: in.FlowID,
		StartedAfter: in.StartedAfter, StartedBefore: in.StartedBefore,
		WakeBefore: in.WakeBefore, WakeAfter: in.WakeAfter, Sort: in.Sort, WokenBy: in.WokenBy}
	for _, f := range slices.Sorted(maps.Keys(in.Index)) {
		req.Index = append(req.Index, control.IndexFilter{Field: f, Value: in.Index[f]})
	}
	page, err := a.d.Plane.List(ctx, c.Tenant, req)
	if r := control.AsRefusal(err); r != nil && r.Fields["field"] != nil {
		p := fromRefusal(r) // name the query parameter, as huma names those it refuses
		where := "query.started_before"
		if r.Code == "invalid_index_filter" {
			where = fmt.Sprintf("query.index[%v]", r.Fields["field"])
		}
		p.Errors = append(p.Errors, &huma.ErrorDetail{Location: where, Message: r.Message})
		return nil, p
	}
	if err != nil {
		return nil, err
	}
	out := ExecutionList{TenantID: c.Tenant, Page: control.Page[ExecutionSummary]{Items: make([]ExecutionSummary, 0, len(page.Items)),
		NextCursor: page.NextCursor}, Skipped: page.Skipped, Degraded: page.Degraded, Bounded: page.Bounded}
	if in.Count {
		n, bounded, err := a.d.Plane.Count(ctx, c.Tenant, req)
		if err != nil {
			return nil, err
		}
		out.Total, out.TotalBounded = &n, bounded
	}
	for _, s := range page.Items {
		out.Items = append(out.Items, ExecutionSummary{ExecutionID: s.ExecutionID, TenantID: s.TenantID, FlowID: s.FlowID,
			FlowVersion: s.FlowVersion, Status: s.Status, CurrentNode: s.CurrentNode, StepCount: s.StepCount, StartTime: s.StartTime,
			LastUpdate: s.LastUpdate, EndTime: s.EndTime, Suspend: s.Suspend, Error: s.Error, Index: s.Index, RetryNext: s.RetryNext})
	}
	return &executionListOut{Body: out}, nil
}

type executionIDIn struct {
	ID string `path:"id" minLength:"1" maxLength:"200"`
}

// ExecutionView is one execution as the console shows it: its state, what wakes it
// (waiting: the wake-up report — which role must act and whether one is alive, the due time
// and its delay-queue entry; progress: a running one's workers and retry back-off; timers),
// what can be done next and why each branch was taken (branches); or, when it has no state
// yet, its queued start with what holds it (a busy worker, the tenant's running quota, a config
// family no worker runs); or, when its state cannot be read, what is stored.
type ExecutionView struct {
	View      string               `json:"view" enum:"state,queued,corrupt"`
	Execution *state.Execution     `json:"execution,omitempty"`
	Waiting   *control.WakeUp      `json:"waiting,omitempty"`
	Progress  *control.Progress    `json:"progress,omitempty" doc:"a running or pending one: its workers, its node's retry back-off"`
	Timers    []control.Timer      `json:"timers,omitempty" doc:"what will happen to it by itself, soonest first: a delay's end, a timeout, a retry's next attempt"`
	Hints     []control.Hint       `json:"hints,omitempty" doc:"what can be done next: each resume checked as the worker will"`
	HintsNote string               `json:"hints_note,omitempty" doc:"why there are no hints"`
	Branches  []engine.Branch      `json:"branches,omitempty" doc:"why each branch was taken, oldest first: the reason each branching step recorded and the node it went to (view state)"`
	Queued    *control.QueuedView  `json:"queued,omitempty"`
	Corrupt   *control.CorruptView `json:"corrupt,omitempty"`
	Trace     *TraceLink           `json:"trace,omitempty" doc:"the execution's trace, when it was started with tracing on (docs/tracing.md)"`
}

// TraceLink is an execution's trace: its id, and the link PLAITA_TRACE_URL_TEMPLATE builds.
type TraceLink struct {
	TraceID string `json:"trace_id"`
	URL     string `json:"url,omitempty" doc:"PLAITA_TRACE_URL_TEMPLATE with the trace id; absent when none is set"`
}

// traceLink is st's trace as the view shows it; nil when it has none.
func (a *API) traceLink(st *state.Execution) *TraceLink {
	id := st.Trace().TraceID()
	if id == "" {
		return nil
	}
	return &TraceLink{TraceID: id, URL: tracing.Link(a.s.TraceURLTemplate, id)}
}

type executionViewOut struct{ Body ExecutionView }

func (a *API) getExecution(ctx context.Context, c *Call, in *executionIDIn) (*executionViewOut, error) {
	shown, err := a.d.Plane.Show(ctx, c.Tenant, in.ID)
	switch {
	case err != nil:
		return nil, err
	case shown.Corrupt != nil:
		return &executionViewOut{Body: ExecutionView{View: "corrupt", Corrupt: shown.Corrupt}}, nil
	case shown.Queued != nil:
		return &executionViewOut{Body: ExecutionView{View: "queued", Queued: shown.Queued}}, nil
	}
	d := a.d.Plane.Detail(ctx, c.Tenant, shown.Execution)
	v := ExecutionView{View: "state", Execution: shown.Execution, Waiting: shown.WakeUp, Progress: shown.Progress, Timers: shown.Timers,
		Hints: d.Hints, HintsNote: d.HintsNote, Branches: d.Branches, Trace: a.traceLink(shown.Execution)}
	return &executionViewOut{Body: v}, nil
}

type resumeIn struct {
	ID   string `path:"id" minLength:"1" maxLength:"200"`
	Body struct {
		Type  engine.ResumeType `json:"type" enum:"continue,retry,event,timeout,cancel,approval"`
		Data  json.RawMessage   `json:"data,omitempty" doc:"the event, the approval answer …"`
		Force bool              `json:"force,omitempty" doc:"enqueue without the check (the worker still decides)"`
		// The flow_hash override (docs/flows.md), an explicit field rather than a key hidden in data.
		AllowFlowHashChange bool `json:"allow_flow_hash_change,omitempty" doc:"override a flow_hash_mismatch (the execution's flow hash differs from the published definition's in algorithm and value, as after an engine upgrade): only when the definition is unchanged. Sent to the worker as data.allow_flow_hash_change; it never lets a definition changed under the same algorithm pass. Audited."`
	}
}

// resumeExecution checks the resume the way the worker will and enqueues it: a resume the
// worker would refuse is a 409 with the reason, what is accepted instead and, for an exhausted
// retry budget, the counter key and the unblock hint, for a flow_hash_mismatch the hashes and
// the override (control.CheckResume).
func (a *API) resumeExecution(ctx context.Context, c *Call, in *resumeIn) (*doneOut, error) {
	c.Audit.Target = in.ID
	c.Note("type", in.Body.Type)
	if in.Body.Force {
		c.Note("force", true)
	}
	req := control.ResumeRequest{Tenant: c.Tenant, ID: in.ID, Type: in.Body.Type, Data: in.Body.Data, Force: in.Body.Force,
		AllowFlowHashChange: in.Body.AllowFlowHashChange}
	if req.HashOverride() {
		c.Note("allow_flow_hash_change", true) // who overrode the flow hash check, and when
	}
	return done(a.d.Plane.Resume(ctx, req))
}

func (a *API) cancelExecution(ctx context.Context, c *Call, in *executionIDIn) (*doneOut, error) {
	c.Audit.Target = in.ID
	return done(a.d.Plane.Cancel(ctx, c.Tenant, in.ID))
}

type deleteIn struct {
	ID    string `path:"id" minLength:"1" maxLength:"200"`
	Force bool   `query:"force" doc:"delete even a running or pending execution"`
}

func (a *API) deleteExecution(ctx context.Context, c *Call, in *deleteIn) (*doneOut, error) {
	c.Audit.Target = in.ID
	return done(a.d.Plane.Delete(ctx, c.Tenant, in.ID, in.Force))
}
