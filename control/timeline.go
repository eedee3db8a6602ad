package control

import (
	"context"
	"errors"

	"plaita/engine/state"
	"plaita/store"
)

// Timeline limits: a page holds at most MaxTimelineLimit entries.
const (
	DefaultTimelineLimit = 100
	MaxTimelineLimit     = 1000
)

// TimelinePage is a page of an execution's timeline, oldest first: the polling fallback of a
// live view, and how a view of a long execution reads its timeline a page at a time.
type TimelinePage struct {
	ExecutionID string                `json:"execution_id"`
	TenantID    string                `json:"tenant_id"`
	Status      state.Status          `json:"status" doc:"the execution's status, or queued when its start waits for a worker"`
	CurrentNode string                `json:"current_node,omitempty"`
	Entries     []state.TimelineEntry `json:"entries"`
	// Dropped are the oldest entries the execution recorded and no longer keeps (the timeline
	// holds the newest PLAITA_EXECUTION_TIMELINE_MAX): seq 1 … Dropped are gone.
	Dropped int `json:"dropped" doc:"entries 1…dropped were recorded and are no longer kept (the timeline keeps the newest PLAITA_EXECUTION_TIMELINE_MAX)"`
	LastSeq int `json:"last_seq" doc:"the newest entry's seq"`
	// Next is the after of the next page; 0 when this page reaches the newest entry.
	Next int `json:"next,omitempty" doc:"pass as after for the next page (absent on the page with the newest entry)"`
}

// Timeline is the page of entries after seq after (0: from the oldest kept), at most limit
// (0: DefaultTimelineLimit). It reads the state as Show does, without the wake-up report; an
// execution whose start no worker has taken yet is "queued" with no entries.
func (p *Plane) Timeline(ctx context.Context, tenant, id string, after, limit int) (TimelinePage, error) {
	return timelinePage(ctx, p, tenant, id, after, limit)
}

// timelinePage is Timeline over src.
func timelinePage(ctx context.Context, src liveSource, tenant, id string, after, limit int) (TimelinePage, error) {
	if limit == 0 {
		limit = DefaultTimelineLimit
	}
	if err := checkLimit(limit, MaxTimelineLimit); err != nil {
		return TimelinePage{}, err
	}
	if after < 0 {
		return TimelinePage{}, refuse(Invalid, "invalid_after", nil, "after %d: use a timeline seq (0 for the oldest)", after)
	}
	tenant, st, queued, err := src.current(ctx, tenant, id)
	if err != nil {
		return TimelinePage{}, err
	}
	page := TimelinePage{ExecutionID: id, TenantID: tenant, Entries: []state.TimelineEntry{}}
	if queued {
		page.Status = statusQueued
		return page, nil
	}
	page.Status, page.CurrentNode, page.Dropped, page.LastSeq = st.Status, st.CurrentNode, st.TimelineDropped, lastSeq(st)
	for _, e := range st.Timeline {
		if e.Seq <= after {
			continue
		}
		if len(page.Entries) == limit {
			page.Next = page.Entries[limit-1].Seq
			break
		}
		page.Entries = append(page.Entries, e)
	}
	return page, nil
}

// statusQueued is the status of an execution enqueued and not started.
const statusQueued state.Status = "queued"

// current reads an execution's state for a live view: the state; or queued, when it has none
// yet and its start waits in the task stream; or the refusal (not found, unreadable).
func (p *Plane) current(ctx context.Context, tenant, id string) (string, *state.Execution, bool, error) {
	ts, st, err := p.load(ctx, tenant, id)
	var ce *store.CorruptStateError
	switch {
	case errors.As(err, &ce):
		return ts.Tenant(), nil, false, p.unreadable(ce, ts.Tenant())
	case errors.Is(err, store.ErrNotFound) && p.d.Queue != nil:
		if _, ok, qerr := p.queued(ctx, ts.Tenant(), id); qerr != nil {
			return ts.Tenant(), nil, false, qerr
		} else if ok {
			return ts.Tenant(), nil, true, nil
		}
		// A worker may have taken the start, saved its state and settled its task between the
		// two reads (no state yet, then no task any more): the state is there now.
		if st, lerr := ts.Load(ctx, id); lerr == nil {
			return ts.Tenant(), st, false, nil
		} else if errors.As(lerr, &ce) {
			return ts.Tenant(), nil, false, p.unreadable(ce, ts.Tenant())
		}
		return ts.Tenant(), nil, false, err
	case err != nil:
		return "", nil, false, err
	}
	return ts.Tenant(), st, false, nil
}

// lastSeq is the seq of the newest timeline entry st recorded.
func lastSeq(st *state.Execution) int { return st.TimelineDropped + len(st.Timeline) }
