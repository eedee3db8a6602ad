package control

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
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
	dlqPage      = 100  // dead letters read per page (each carries its payload)
	bulkSample   = 20
)

// BulkFilter selects the items of a bulk job. Status, FlowID and the start times select
// executions (cancel, retry, delete); Reason, Kind and FlowID select dead letters (replay).
type BulkFilter struct {
	Status        state.Status `json:"status,omitempty" enum:"pending,running,suspended,completed,error,cancelled" doc:"executions of this status"`
	FlowID        string       `json:"flow_id,omitempty" maxLength:"200" doc:"executions (or dead letters) of this flow"`
	StartedAfter  *time.Time   `json:"started_after,omitempty" doc:"executions started at or after this time"`
	StartedBefore *time.Time   `json:"started_before,omitempty" doc:"executions started before this time"`
	Reason        string       `json:"reason,omitempty" maxLength:"200" doc:"replay: dead letters of this reason"`
	Kind          string       `json:"kind,omitempty" enum:"start,resume" doc:"replay: dead letters of this task kind"`
	// Force is delete's: running and pending executions are deleted too (as DELETE ?force).
	Force bool `json:"force,omitempty" doc:"delete only: delete running and pending executions too"`
}

// BulkRequest is one bulk operation asked of a tenant.
type BulkRequest struct {
	Tenant string
	Action BulkAction
	Filter BulkFilter
	// MaxItems caps the selection below MaxBulkItems (0: MaxBulkItems).
	MaxItems int
}

// BulkSelection is what a filter matched.
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
	Items     []string `json:"-"`
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

// checkBulk refuses a request whose action is unknown or whose filter names fields the action
// does not select by.
func (p *Plane) checkBulk(req BulkRequest) (string, error) {
	tenant, err := p.Tenant(req.Tenant)
	if err != nil {
		return "", err
	}
	f := req.Filter
	if !slices.Contains(BulkActions, req.Action) {
		return "", refuse(Invalid, "invalid_action", nil, "action %q: use cancel, retry, delete or replay", req.Action)
	}
	if f.FlowID != "" {
		if err := keys.ValidName("flow id", f.FlowID); err != nil {
			return "", refuse(Invalid, "invalid_filter", err, "filter.flow_id: %v", err)
		}
	}
	if f.Status != "" && !slices.Contains(statuses, f.Status) {
		return "", refuse(Invalid, "invalid_filter", nil, "filter.status %q: use one of %v", f.Status, statuses)
	}
	executionsOnly := f.Status != "" || f.StartedAfter != nil || f.StartedBefore != nil
	switch {
	case req.Action == BulkReplay && executionsOnly:
		return "", refuse(Invalid, "invalid_filter", nil, "replay selects dead letters: filter by reason, kind and flow_id, not by status or start time")
	case req.Action != BulkReplay && (f.Reason != "" || f.Kind != ""):
		return "", refuse(Invalid, "invalid_filter", nil, "%s selects executions: filter by status, flow_id and start time; reason and kind are replay's", req.Action)
	case f.Force && req.Action != BulkDelete:
		return "", refuse(Invalid, "invalid_filter", nil, "force is delete's")
	case f.Kind != "" && f.Kind != string(queue.KindStart) && f.Kind != string(queue.KindResume):
		return "", refuse(Invalid, "invalid_filter", nil, "filter.kind %q: use start or resume", f.Kind)
	case req.MaxItems < 0 || req.MaxItems > MaxBulkItems:
		return "", refuse(Invalid, "invalid_max_items", nil, "max_items %d: use 1 to %d (0: %d)", req.MaxItems, MaxBulkItems, MaxBulkItems)
	}
	return tenant, nil
}

// BulkSelect finds what a filter matches, within the bounds (a dry run reports it; a run
// keeps Items).
func (p *Plane) BulkSelect(ctx context.Context, req BulkRequest) (BulkSelection, error) {
	tenant, err := p.checkBulk(req)
	if err != nil {
		return BulkSelection{}, err
	}
	sel := BulkSelection{TenantID: tenant, Action: req.Action, Filter: req.Filter, MaxItems: cmp.Or(req.MaxItems, MaxBulkItems), MaxScan: MaxBulkScan}
	if req.Action == BulkReplay {
		err = p.selectDeadLetters(ctx, tenant, req.Filter, &sel)
	} else {
		err = p.selectExecutions(ctx, tenant, req.Filter, &sel)
	}
	if err != nil {
		return BulkSelection{}, err
	}
	sel.Count = len(sel.Items)
	sel.Sample = sel.Items[:min(len(sel.Items), bulkSample)]
	return sel, nil
}

func (p *Plane) selectExecutions(ctx context.Context, tenant string, f BulkFilter, sel *BulkSelection) error {
	ts, err := p.tenantStore(tenant)
	if err != nil {
		return err
	}
	match := func(st *state.Execution) bool {
		return (f.Status == "" || st.Status == f.Status) && (f.FlowID == "" || st.FlowID == f.FlowID) &&
			(f.StartedAfter == nil || !st.StartTime.Before(*f.StartedAfter)) && (f.StartedBefore == nil || st.StartTime.Before(*f.StartedBefore))
	}
	cursor := ""
	// A listing page examines at most bulkPage × 10 index members: MaxBulkScan bounds the pages.
	for pages := 0; pages < MaxBulkScan/(bulkPage*10); pages++ {
		page, err := ts.List(ctx, store.ListRequest{Cursor: cursor, Limit: bulkPage, Match: match})
		if err != nil {
			return fmt.Errorf("select executions: %w", err)
		}
		for _, s := range page.Items {
			if len(sel.Items) == sel.MaxItems {
				sel.Truncated = true
				return nil
			}
			sel.Items = append(sel.Items, s.ExecutionID)
		}
		if cursor = page.NextCursor; cursor == "" {
			return nil
		}
	}
	sel.Truncated = true
	return nil
}

func (p *Plane) selectDeadLetters(ctx context.Context, tenant string, f BulkFilter, sel *BulkSelection) error {
	before := ""
	for scanned := 0; scanned < MaxBulkScan; {
		es, next, err := p.d.Queue.DLQPage(ctx, before, dlqPage)
		if err != nil {
			return fmt.Errorf("select dead letters: %w", err)
		}
		scanned += len(es)
		for _, e := range es {
			if !sameTenant(e.TenantID, tenant) || (f.Reason != "" && e.Reason != f.Reason) || (f.Kind != "" && e.Kind != f.Kind) ||
				(f.FlowID != "" && payloadFlow(e.Payload) != f.FlowID) {
				continue
			}
			if len(sel.Items) == sel.MaxItems {
				sel.Truncated = true
				return nil
			}
			sel.Items = append(sel.Items, e.ID)
		}
		if before = next; before == "" {
			return nil
		}
	}
	sel.Truncated = true
	return nil
}

// payloadFlow is the flow of a dead letter's task ("" when its payload does not say).
func payloadFlow(payload string) string {
	var env struct {
		FlowID string `json:"flow_id"`
	}
	if json.Unmarshal([]byte(payload), &env) != nil {
		return ""
	}
	return env.FlowID
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
		d, err = p.Resume(ctx, ResumeRequest{Tenant: tenant, ID: item, Type: engine.ResumeRetry})
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
	if err == nil {
		return BulkOutcome{Result: result}
	}
	code := "error"
	if r := AsRefusal(err); r != nil {
		code = r.Code
	}
	return BulkOutcome{Code: code, Err: err}
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
