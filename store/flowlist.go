package store

import (
	"context"
	"fmt"
	"time"

	"plaita/store/keys"
)

// FlowSummary is one published flow: its id, when it was last published and its versions.
type FlowSummary struct {
	FlowID      string    `json:"flow_id"`
	PublishedAt time.Time `json:"published_at"` // its last publication
	Latest      string    `json:"latest_version"`
	Versions    int64     `json:"versions"`
}

// FlowVersion is one published version.
type FlowVersion struct {
	Version     string    `json:"version"`
	PublishedAt time.Time `json:"published_at"`
}

// MaxFlowList bounds one listing of flows or versions.
const MaxFlowList = 1000

// FlowPage is a page of the tenant's published flows, most recently published first.
type FlowPage struct {
	Items      []FlowSummary
	NextCursor string // "" on the last page
}

// List is the tenant's published flows, most recently published first (at most limit).
func (f *Flows) List(ctx context.Context, tenant string, limit int) ([]FlowSummary, error) {
	p, err := f.Page(ctx, tenant, "", limit)
	return p.Items, err
}

// Page is a page of the tenant's published flows after cursor ("" for the first; else a
// NextCursor), most recently published first. The cursor is the last flow's (publication
// time, id): a flow published again meanwhile moves to the front and is not seen again by
// the pages that follow. A malformed cursor is ErrInvalid.
func (f *Flows) Page(ctx context.Context, tenant, cursorArg string, limit int) (FlowPage, error) {
	sp, err := f.space(tenant)
	if err != nil {
		return FlowPage{}, err
	}
	cur, err := decodeCursor(cursorArg)
	if err != nil {
		return FlowPage{}, err
	}
	limit = min(max(limit, 1), MaxFlowList)
	ctx, cancel := opCtx(ctx)
	defer cancel()
	rows, err := f.after(ctx, sp, cur, limit+1)
	if err != nil {
		return FlowPage{}, err
	}
	var page FlowPage
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.NextCursor = cursor{Score: last.Score, Member: last.Name}.encode()
	}
	page.Items = make([]FlowSummary, 0, len(rows))
	ids := make([]string, 0, len(rows))
	for _, r := range rows {
		page.Items = append(page.Items, FlowSummary{FlowID: r.Name, PublishedAt: time.UnixMilli(int64(r.Score)).UTC()})
		ids = append(ids, r.Name)
	}
	if len(ids) == 0 {
		return page, nil
	}
	heads, err := f.d.Heads(ctx, sp, ids)
	if err != nil {
		return FlowPage{}, err
	}
	for i, h := range heads {
		page.Items[i].Latest, page.Items[i].Versions = h.Latest, h.Versions
	}
	return page, nil
}

// after reads up to n flows of the tenant's list after cur, most recently published first
// (ties by flow id descending). The driver reads by time only: flows of the cursor's time that
// do not sort before its flow are skipped; ties need the same millisecond, so asking for a few
// more each round ends fast.
func (f *Flows) after(ctx context.Context, sp keys.Space, cur cursor, n int) ([]FlowEntry, error) {
	if cur.Member == "" {
		return f.d.FlowList(ctx, sp, nil, n)
	}
	for extra := 16; ; extra *= 4 {
		rows, err := f.d.FlowList(ctx, sp, &cur.Score, n+extra)
		if err != nil {
			return nil, err
		}
		kept := rows[:0]
		for _, r := range rows {
			if r.Score == cur.Score && r.Name >= cur.Member {
				continue
			}
			kept = append(kept, r)
		}
		if len(kept) >= n || len(rows) < n+extra {
			return kept[:min(len(kept), n)], nil
		}
	}
}

// Versions is a flow's published versions, newest first (ErrFlowNotFound: none).
func (f *Flows) Versions(ctx context.Context, tenant, flowID string) ([]FlowVersion, error) {
	sp, err := f.space(tenant)
	if err != nil {
		return nil, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	rows, err := f.d.Versions(ctx, sp, flowID, MaxFlowList)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: flow %s in tenant %s has no published version", ErrFlowNotFound, flowID, sp.Tenant())
	}
	out := make([]FlowVersion, 0, len(rows))
	for _, r := range rows {
		out = append(out, FlowVersion{Version: r.Name, PublishedAt: time.UnixMilli(int64(r.Score)).UTC()})
	}
	return out, nil
}
