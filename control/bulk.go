package control

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store/sqlite"
)

// Bulk operations by filter (the console's POST /api/jobs; docs/console.md, "Bulk jobs"):
// cancel, retry or delete every execution of a tenant that matches a filter, or replay every
// dead letter that does. A dry run counts what the filter matches; a run selects the items
// once, when it is created (an execution that matches later is not in it), and a runner
// (bulk_runner.go) applies each through the same operation as the single-item endpoint —
// Cancel, Resume with retry, Delete, ReplayDeadLetter — so a bulk cancel refuses exactly what a
// cancel refuses, with the same code, recorded per item.

// BulkAction is what a bulk job does to each item.
type BulkAction string

const (
	BulkCancel BulkAction = "cancel"
	BulkRetry  BulkAction = "retry"
	BulkDelete BulkAction = "delete"
	BulkReplay BulkAction = "replay"
)

// BulkActions are the actions a job can take.
var BulkActions = []BulkAction{BulkCancel, BulkRetry, BulkDelete, BulkReplay}

// Bounds of a selection: at most MaxBulkItems items, found among at most MaxBulkScan
// executions (newest first; store.List examines up to ten index members per item it can
// return) or dead letters. A filter that matches more is truncated: the job acts on the
// first MaxBulkItems, and says so.
const (
	MaxBulkItems = 10000
	MaxBulkScan  = 100000
	bulkPage     = 1000 // executions asked per listing page (each examines up to 10 × as many)
	dlqPage      = 100  // dead letters asked per listing page (each examines up to 10 × as many, with their payloads)
	bulkSample   = 20
)

// BulkFilter selects the items of a bulk job. Cancel, retry and delete select executions by
// every filter of the executions list (ListRequest: status, flow, start times, due times,
// indexed fields), replay selects dead letters by every filter of the dead-letters list
// (DeadLetterFilter: reason, kind, flow); each selection is that list's own (listRequest,
// deadLetterFilter), so a job never acts on more than the list with the same filter shows.
// Jobs keep their filter as this JSON (the jobs table): fields are only ever added, so a job
// stored earlier is read and resumed as it was.
type BulkFilter struct {
	Status        state.Status `json:"status,omitempty" enum:"pending,running,suspended,completed,error,cancelled" doc:"executions of this status"`
	FlowID        string       `json:"flow_id,omitempty" maxLength:"200" doc:"executions (or dead letters) of this flow"`
	StartedAfter  *time.Time   `json:"started_after,omitempty" doc:"executions started at or after this time"`
	StartedBefore *time.Time   `json:"started_before,omitempty" doc:"executions started before this time"`
	WakeAfter     *time.Time   `json:"wake_after,omitempty" doc:"suspended executions whose due time (a delay's end, a wait's or an approval's timeout) is at or after this time"`
	WakeBefore    *time.Time   `json:"wake_before,omitempty" doc:"suspended executions whose due time is before this time"`
	// Index is the list's index[<field>]=<value>, each value as the query gives it.
	Index  map[string]string `json:"index,omitempty" maxProperties:"4" doc:"executions indexed under every one of these field values, as the list's index[<field>]=<value>: a value is read as JSON when it parses (17 is a number, true a boolean), else as text (ord-1)"`
	Reason string            `json:"reason,omitempty" maxLength:"200" doc:"replay: dead letters of this reason"`
	Kind   string            `json:"kind,omitempty" enum:"start,resume" doc:"replay: dead letters of this task kind"`
	// Force is delete's: running and pending executions are deleted too (as DELETE ?force).
	Force bool `json:"force,omitempty" doc:"delete only: delete running and pending executions too"`
}

// listRequest is the executions list's request with this filter: what GET /api/executions
// with the same query lists is what cancel, retry and delete select.
func (f BulkFilter) listRequest() ListRequest {
	req := ListRequest{Status: f.Status, FlowID: f.FlowID}
	for _, b := range []struct{ from, to *time.Time }{
		{f.StartedAfter, &req.StartedAfter}, {f.StartedBefore, &req.StartedBefore}, {f.WakeAfter, &req.WakeAfter}, {f.WakeBefore, &req.WakeBefore},
	} {
		if b.from != nil {
			*b.to = *b.from
		}
	}
	for _, field := range slices.Sorted(maps.Keys(f.Index)) { // the order GET /api/executions gives them in
		req.Index = append(req.Index, IndexFilter{Field: field, Value: f.Index[field]})
	}
	return req
}

// deadLetterFilter is the dead-letters list's filter with this one: what replay selects.
func (f BulkFilter) deadLetterFilter() DeadLetterFilter {
	return DeadLetterFilter{Reason: f.Reason, Kind: f.Kind, FlowID: f.FlowID}
}

// executionFields are the fields given that only executions have.
func (f BulkFilter) executionFields() []string {
	var out []string
	for _, c := range []struct {
		name  string
		given bool
	}{{"status", f.Status != ""}, {"started_after", f.StartedAfter != nil}, {"started_before", f.StartedBefore != nil},
		{"wake_after", f.WakeAfter != nil}, {"wake_before", f.WakeBefore != nil}, {"index", len(f.Index) > 0}} {
		if c.given {
			out = append(out, c.name)
		}
	}
	return out
}

// deadLetterFields are the fields given that only dead letters have.
func (f BulkFilter) deadLetterFields() []string {
	var out []string
	if f.Reason != "" {
		out = append(out, "reason")
	}
	if f.Kind != "" {
		out = append(out, "kind")
	}
	return out
}

// BulkRequest is one bulk operation asked of a tenant.
type BulkRequest struct {
	Tenant string
	Action BulkAction
	Filter BulkFilter
	// MaxItems caps the selection below MaxBulkItems (0: MaxBulkItems).
	MaxItems int
}

// BulkSelection is what a filter matched, and for a dry run what a job would do to it.
type BulkSelection struct {
	TenantID string     `json:"tenant_id"`
	Action   BulkAction `json:"action"`
	Filter   BulkFilter `json:"filter"`
	Count    int        `json:"count" doc:"the items matched (at most max_items)"`
	// Truncated: the scan stopped at a bound; more may match.
	Truncated bool     `json:"truncated" doc:"the scan stopped at a bound (max_items matched, or max_scanned examined): more may match"`
	MaxItems  int      `json:"max_items"`
	MaxScan   int      `json:"max_scanned" doc:"executions (newest first) or dead letters examined at most"`
	Sample    []string `json:"sample" doc:"the first items (execution ids or dead-letter ids)"`
	// Forecast is a dry run's (bulk_forecast.go); a run records each item's outcome instead.
	Forecast *BulkForecast `json:"forecast,omitempty" doc:"dry run only: what a job would do to the items matched (count of them), each decided as its single-item operation decides on the state read now; the job decides again when it reaches the item"`
	Items    []string      `json:"-"`
}

// BulkKind is the job kind of an action (the jobs table's kind).
func BulkKind(a BulkAction) string {
	if a == BulkReplay {
		return "dead_letters.replay"
	}
	return "executions." + string(a)
}

// bulkAction is the action of a job kind ("" when it is none).
func bulkAction(kind string) BulkAction {
	for _, a := range BulkActions {
		if BulkKind(a) == kind {
			return a
		}
	}
	return ""
}

// checkBulk refuses a request whose action is unknown, or whose filter the action's selection
// cannot honour: a field of the other kind of item (named), or a value the list would refuse.
// Dropping such a field would select more than the list with that filter shows.
func (p *Plane) checkBulk(req BulkRequest) (string, error) {
	tenant, err := p.Tenant(req.Tenant)
	if err != nil {
		return "", err
	}
	f := req.Filter
	switch {
	case !slices.Contains(BulkActions, req.Action):
		return "", refuse(Invalid, "invalid_action", nil, "action %q: use cancel, retry, delete or replay", req.Action)
	case req.MaxItems < 0 || req.MaxItems > MaxBulkItems:
		return "", refuse(Invalid, "invalid_max_items", nil, "max_items %d: use 1 to %d (0: %d)", req.MaxItems, MaxBulkItems, MaxBulkItems)
	case f.Force && req.Action != BulkDelete:
		return "", filterField("force", "force is delete's; %s takes no force", req.Action)
	}
	if req.Action == BulkReplay {
		if names := f.executionFields(); len(names) > 0 {
			return "", filterField(names[0], "replay selects dead letters, by reason, kind and flow_id: %s %s the executions list's, not a dead letter's",
				strings.Join(names, ", "), isAre(len(names)))
		}
		return tenant, f.deadLetterFilter().check()
	}
	if names := f.deadLetterFields(); len(names) > 0 {
		return "", filterField(names[0], "%s selects executions, by the executions list's filters (status, flow_id, start and due times, index): %s %s the dead letters'",
			req.Action, strings.Join(names, ", "), isAre(len(names)))
	}
	if _, err := f.listRequest().check(); err != nil {
		return "", listFilterRefusal(err)
	}
	return tenant, nil
}

// filterField is the refusal of a filter naming the field it cannot take.
func filterField(field, format string, a ...any) *Refusal {
	r := refuse(Invalid, "invalid_filter", nil, "filter."+field+": "+format, a...)
	r.Fields = map[string]any{"field": field}
	return r
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// listFilterRefusal is the list's refusal of a filter as a job's: the code every refused
// filter of a job has, the field it names as the filter's (an index field is under index).
func listFilterRefusal(err error) error {
	r := AsRefusal(err)
	if r == nil {
		return err
	}
	field := map[string]string{"invalid_status": "status", "invalid_flow_id": "flow_id", "invalid_time_range": "started_before",
		"invalid_index_filter": "index"}[r.Code]
	if field == "" {
		return err
	}
	out := refuse(Invalid, "invalid_filter", err, "filter.%s: %s", field, r.Message)
	out.Fields = map[string]any{"field": field}
	if name, ok := r.Fields["field"].(string); ok && field == "index" {
		out.Fields["index_field"] = name
	}
	return out
}

// BulkSelect finds what a filter matches, within the bounds, and forecasts what the action
// would do to each item (a dry run reports both).
func (p *Plane) BulkSelect(ctx context.Context, req BulkRequest) (BulkSelection, error) {
	return p.bulkSelect(ctx, req, true)
}

// bulkSelect is BulkSelect, with the forecast only when asked: a run keeps Items, and records
// each item's outcome as it applies it.
func (p *Plane) bulkSelect(ctx context.Context, req BulkRequest, forecast bool) (BulkSelection, error) {
	tenant, err := p.checkBulk(req)
	if err != nil {
		return BulkSelection{}, err
	}
	sel := BulkSelection{TenantID: tenant, Action: req.Action, Filter: req.Filter, MaxItems: cmp.Or(req.MaxItems, MaxBulkItems), MaxScan: MaxBulkScan}
	var fc *forecaster
	if forecast {
		fc = p.newForecaster(tenant, req.Action, req.Filter)
	}
	if req.Action == BulkReplay {
		err = p.selectDeadLetters(ctx, tenant, req.Filter, &sel, fc)
	} else {
		err = p.selectExecutions(ctx, tenant, req.Filter, &sel, fc)
	}
	if err != nil {
		return BulkSelection{}, err
	}
	if fc != nil {
		sel.Forecast = &fc.out
	}
	sel.Count = len(sel.Items)
	sel.Sample = sel.Items[:min(len(sel.Items), bulkSample)]
	return sel, nil
}

// selectExecutions pages through the list with the filter (the store's listing ListRequest
// gives, as Plane.List reads it) until the bounds, and forecasts each item selected (fc, when
// not nil) on the state the listing read it from: no state is read twice.
func (p *Plane) selectExecutions(ctx context.Context, tenant string, f BulkFilter, sel *BulkSelection, fc *forecaster) error {
	ts, err := p.tenantStore(tenant)
	if err != nil {
		return err
	}
	list := f.listRequest()
	list.Limit = bulkPage
	// A listing page examines at most bulkPage × 10 index members: MaxBulkScan bounds the pages.
	for pages := 0; pages < MaxBulkScan/(bulkPage*10); pages++ {
		sr, err := list.storeRequest()
		if err != nil {
			return listFilterRefusal(err)
		}
		sr.States = fc != nil
		page, err := ts.List(ctx, sr)
		if err != nil {
			return fmt.Errorf("select executions: %w", err)
		}
		for _, s := range page.Items {
			if len(sel.Items) == sel.MaxItems {
				sel.Truncated = true
				return nil
			}
			sel.Items = append(sel.Items, s.ExecutionID)
			if fc != nil {
				o, err := fc.execution(ctx, s.State)
				if err != nil {
					return err
				}
				fc.out.add(o)
			}
		}
		if list.Cursor = page.NextCursor; list.Cursor == "" {
			return nil
		}
	}
	sel.Truncated = true
	return nil
}

// selectDeadLetters pages through the dead-letters list with the filter (Plane.DeadLetterPage,
// the tenant's entries of the filter's reason, kind and flow, with their replay marks) until the
// bounds, and forecasts each item selected (fc, when not nil).
func (p *Plane) selectDeadLetters(ctx context.Context, tenant string, f BulkFilter, sel *BulkSelection, fc *forecaster) error {
	list := DeadLetterList{Tenant: tenant, Filter: f.deadLetterFilter(), Limit: dlqPage}
	// A page examines at most 10 × dlqPage entries: MaxBulkScan bounds the pages.
	for pages := 0; pages < MaxBulkScan/(dlqPage*10); pages++ {
		page, err := p.DeadLetterPage(ctx, list)
		if err != nil {
			return fmt.Errorf("select dead letters: %w", err)
		}
		for _, e := range page.Items {
			if len(sel.Items) == sel.MaxItems {
				sel.Truncated = true
				return nil
			}
			sel.Items = append(sel.Items, e.ID)
			if fc != nil {
				fc.out.add(fc.deadLetter(e))
			}
		}
		if list.Cursor = page.NextCursor; list.Cursor == "" {
			return nil
		}
	}
	sel.Truncated = true
	return nil
}

// BulkOutcome is what applying a job's action did to one item.
type BulkOutcome struct {
	Result string // what the operation did (cancel_requested, already_cancelled, enqueued, deleted, replayed, already_replayed)
	// Code and Err are a failure's: the refusal's code, or "error" for anything else.
	Code string
	Err  error
}

// BulkApply applies a job's action to one item through the single-item operation.
func (p *Plane) BulkApply(ctx context.Context, tenant string, action BulkAction, f BulkFilter, item string) BulkOutcome {
	var result string
	var err error
	switch action {
	case BulkCancel:
		var d Done
		d, err = p.Cancel(ctx, tenant, item)
		result = d.Result
	case BulkRetry:
		var d Done
		d, err = p.Resume(ctx, bulkResume(tenant, item))
		result = d.Result
	case BulkDelete:
		var d Done
		d, err = p.Delete(ctx, tenant, item, f.Force)
		result = d.Result
	case BulkReplay:
		var r queue.ReplayResult
		r, err = p.ReplayDeadLetter(ctx, tenant, false, item)
		result = string(r.Status)
	default:
		err = refuse(Invalid, "invalid_action", nil, "action %q: use cancel, retry, delete or replay", action)
	}
	return bulkOutcome(result, err)
}

// bulkOutcome is an operation's answer as a job's item records it: the result, or the failure
// with the refusal's code ("error" for anything else).
func bulkOutcome(result string, err error) BulkOutcome {
	if err == nil {
		return BulkOutcome{Result: result}
	}
	code := "error"
	if r := AsRefusal(err); r != nil {
		code = r.Code
	}
	return BulkOutcome{Code: code, Err: err}
}

// bulkResume is the resume a bulk retry asks of each item: what it applies (BulkApply) and
// what its forecast checks (bulk_forecast.go).
func bulkResume(tenant, id string) ResumeRequest {
	return ResumeRequest{Tenant: tenant, ID: id, Type: engine.ResumeRetry}
}

// BulkJob is a bulk job as the console shows it.
type BulkJob struct {
	ID        string           `json:"id"`
	TenantID  string           `json:"tenant_id"`
	Action    BulkAction       `json:"action"`
	Filter    BulkFilter       `json:"filter"`
	Status    sqlite.JobStatus `json:"status" enum:"pending,running,completed,failed,cancelled"`
	Total     int              `json:"total"`
	Succeeded int              `json:"succeeded"`
	Failed    int              `json:"failed"`
	Remaining int              `json:"remaining" doc:"items not applied yet (a cancelled job leaves them so)"`
	Truncated bool             `json:"truncated" doc:"the selection stopped at a bound: more may match the filter"`
	CreatedBy string           `json:"created_by,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
}

// bulkJobOf renders a job row.
func bulkJobOf(j sqlite.Job) BulkJob {
	var f BulkFilter
	_ = json.Unmarshal(j.Filter, &f) // written by Submit: a filter it cannot read shows empty
	return BulkJob{ID: j.ID, TenantID: j.Tenant, Action: bulkAction(j.Kind), Filter: f, Status: j.Status, Total: j.Total,
		Succeeded: j.Succeeded, Failed: j.Failed, Remaining: max(j.Total-j.Succeeded-j.Failed, 0), Truncated: j.Truncated,
		CreatedBy: j.CreatedBy, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt}
}

// jobRefusal turns the job store's not found and finished into refusals.
func jobRefusal(err error, id string) error {
	switch {
	case errors.Is(err, sqlite.ErrJobNotFound):
		return refuse(NotFound, "job_not_found", err, "no job %s in this tenant", id)
	case errors.Is(err, sqlite.ErrJobFinished):
		return refuse(Conflict, "job_finished", err, "job %s is finished already", id)
	}
	return err
}
