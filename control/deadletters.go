package control

import (
	"context"
	"errors"

	"plaita/queue"
	"plaita/store/keys"
)

// Dead letters (the DLQ stream beside the task queue): list them, show one, replay one exactly
// once (queue.Queue.Replay). The stream is shared by every tenant; an operation for one tenant
// sees only its entries, and an entry of another tenant reads as not found.

// DeadLetters lists up to limit of the newest dead letters of tenant (every tenant's when all):
// the first page of DeadLetterPage.
func (p *Plane) DeadLetters(ctx context.Context, tenant string, all bool, limit int) ([]queue.DLQEntry, error) {
	page, err := p.DeadLetterPage(ctx, DeadLetterList{Tenant: tenant, All: all, Limit: limit})
	return page.Items, err
}

// DeadLetterList asks for a page of dead letters, newest first: of Tenant (every tenant's when
// All), of the Filter's reason, kind and flow, older than Cursor ("" = from the newest; else
// the NextCursor of the page before), at most Limit (1 to 1000).
type DeadLetterList struct {
	Tenant string
	All    bool
	Filter DeadLetterFilter
	Cursor string
	Limit  int
}

// DeadLetterFilter keeps the dead letters of a reason, a task kind and a flow ("": any). The
// list and a bulk replay's selection (bulk.go) both test an entry with matches, so a replay
// acts on exactly what the list with the same filter shows.
type DeadLetterFilter struct {
	Reason string
	Kind   string // start | resume
	FlowID string
}

// check refuses a kind that is none and a flow id that cannot be one.
func (f DeadLetterFilter) check() error {
	if f.Kind != "" && f.Kind != string(queue.KindStart) && f.Kind != string(queue.KindResume) {
		r := refuse(Invalid, "invalid_filter", nil, "kind %q: use start or resume", f.Kind)
		r.Fields = map[string]any{"field": "kind"}
		return r
	}
	if f.FlowID != "" {
		if err := keys.ValidName("flow id", f.FlowID); err != nil {
			r := refuse(Invalid, "invalid_filter", err, "%v", err)
			r.Fields = map[string]any{"field": "flow_id"}
			return r
		}
	}
	return nil
}

func (f DeadLetterFilter) matches(e queue.DLQEntry) bool {
	return (f.Reason == "" || e.Reason == f.Reason) && (f.Kind == "" || e.Kind == f.Kind) && (f.FlowID == "" || e.FlowID == f.FlowID)
}

func (f DeadLetterFilter) any() bool { return f != DeadLetterFilter{} }

// DeadLetterPage is a page of dead letters; NextCursor is "" on the last one.
type DeadLetterPage struct {
	TenantID   string           `json:"tenant_id"`
	AllTenants bool             `json:"all_tenants"`
	Items      []queue.DLQEntry `json:"items"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// DeadLetterPage lists a page of dead letters. Entries of other tenants do not count towards
// the limit: up to 10 × limit entries are read, and a page that found fewer than its limit
// among them still has a next page when more entries remain.
func (p *Plane) DeadLetterPage(ctx context.Context, req DeadLetterList) (DeadLetterPage, error) {
	limit := req.Limit
	if err := checkLimit(limit, MaxListLimit); err != nil {
		return DeadLetterPage{}, err
	}
	tenant, err := p.Tenant(req.Tenant)
	if err != nil {
		return DeadLetterPage{}, err
	}
	if err := req.Filter.check(); err != nil {
		return DeadLetterPage{}, err
	}
	read := limit
	if !req.All || req.Filter.any() {
		read = 10 * limit
	}
	es, err := p.d.Queue.ListDLQBefore(ctx, req.Cursor, read)
	if errors.Is(err, queue.ErrBadDLQCursor) {
		return DeadLetterPage{}, refuse(Invalid, "invalid_cursor", err, "cursor: %v", err)
	}
	if err != nil {
		return DeadLetterPage{}, err
	}
	out := DeadLetterPage{TenantID: tenant, AllTenants: req.All, Items: []queue.DLQEntry{}}
	more := len(es) == read // the stream may hold older entries
	for i, e := range es {
		if !req.All && !sameTenant(e.TenantID, tenant) || !req.Filter.matches(e) {
			continue
		}
		out.Items = append(out.Items, e)
		if len(out.Items) == limit {
			more = more || i < len(es)-1
			es = es[:i+1]
			break
		}
	}
	if more && len(es) > 0 {
		out.NextCursor = es[len(es)-1].ID
	}
	if err := p.d.Queue.ReplayMarks(ctx, out.Items); err != nil {
		return DeadLetterPage{}, err
	}
	return out, nil
}

// DeadLetter reads one dead letter of tenant (any tenant's when all).
func (p *Plane) DeadLetter(ctx context.Context, tenant string, all bool, id string) (queue.DLQEntry, error) {
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return queue.DLQEntry{}, err
	}
	e, err := p.d.Queue.DeadLetterByID(ctx, id)
	if errors.Is(err, queue.ErrDLQEntryNotFound) || err == nil && !all && !sameTenant(e.TenantID, tenant) {
		return queue.DLQEntry{}, refuse(NotFound, "dead_letter_not_found", queue.ErrDLQEntryNotFound, "no dead letter %s in tenant %s", id, tenant)
	}
	return e, err
}

// ReplayDeadLetter enqueues a dead letter again, once: a second replay answers
// "already_replayed" and enqueues nothing.
func (p *Plane) ReplayDeadLetter(ctx context.Context, tenant string, all bool, id string) (queue.ReplayResult, error) {
	e, err := p.DeadLetter(ctx, tenant, all, id)
	if err != nil {
		return queue.ReplayResult{}, err
	}
	res, err := p.d.Queue.Replay(ctx, id)
	switch {
	case errors.Is(err, queue.ErrReplayRefused):
		return res, refuse(Conflict, "replay_refused", err, "%v", err)
	case errors.Is(err, queue.ErrDLQEntryNotFound): // trimmed since it was read
		return res, refuse(NotFound, "dead_letter_not_found", err, "no dead letter %s in tenant %s", id, e.TenantID)
	}
	return res, err
}

func sameTenant(entry, tenant string) bool {
	return entry == tenant || entry == "" && tenant == "default"
}
