package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
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
	rows, err := f.after(ctx, sp.FlowList(), cur, limit+1)
	if err != nil {
		return FlowPage{}, transient(ErrRedis, "list flows", err)
	}
	var page FlowPage
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.NextCursor = cursor{Score: last.Score, Member: last.Member}.encode()
	}
	c := f.c
	page.Items = make([]FlowSummary, 0, len(rows))
	cmds := make(rueidis.Commands, 0, 2*len(rows))
	for _, r := range rows {
		page.Items = append(page.Items, FlowSummary{FlowID: r.Member, PublishedAt: time.UnixMilli(int64(r.Score)).UTC()})
		cmds = append(cmds, c.B().Zrevrange().Key(sp.FlowVersions(r.Member)).Start(0).Stop(0).Build(), c.B().Zcard().Key(sp.FlowVersions(r.Member)).Build())
	}
	if len(cmds) == 0 {
		return page, nil
	}
	res := c.DoMulti(ctx, cmds...)
	for i := range page.Items {
		it := &page.Items[i]
		latest, err := res[2*i].AsStrSlice()
		if err != nil {
			return FlowPage{}, transient(ErrRedis, "read versions of flow "+it.FlowID, err)
		}
		if len(latest) > 0 {
			it.Latest = latest[0]
		}
		if it.Versions, err = res[2*i+1].AsInt64(); err != nil {
			return FlowPage{}, transient(ErrRedis, "count versions of flow "+it.FlowID, err)
		}
	}
	return page, nil
}

// after reads up to n members of a ZSET after cur in ZREVRANGE order (score descending, ties
// by member descending). Members of the cursor's score that do not sort before its member
// are skipped: ties need the same millisecond, so asking for a few more each round ends fast.
func (f *Flows) after(ctx context.Context, key string, cur cursor, n int) ([]rueidis.ZScore, error) {
	c := f.c
	if cur.Member == "" {
		return c.Do(ctx, c.B().Zrevrange().Key(key).Start(0).Stop(int64(n-1)).Withscores().Build()).AsZScores()
	}
	top := strconv.FormatFloat(cur.Score, 'f', -1, 64)
	for extra := 16; ; extra *= 4 {
		rows, err := c.Do(ctx, c.B().Zrevrangebyscore().Key(key).Max(top).Min("-inf").Withscores().Limit(0, int64(n+extra)).Build()).AsZScores()
		if err != nil {
			return nil, err
		}
		kept := rows[:0]
		for _, r := range rows {
			if r.Score == cur.Score && r.Member >= cur.Member {
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
	c := f.c
	rows, err := c.Do(ctx, c.B().Zrevrange().Key(sp.FlowVersions(flowID)).Start(0).Stop(MaxFlowList-1).Withscores().Build()).AsZScores()
	if err != nil {
		return nil, transient(ErrRedis, "read versions of flow "+flowID, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: flow %s in tenant %s has no published version", ErrFlowNotFound, flowID, sp.Tenant())
	}
	out := make([]FlowVersion, 0, len(rows))
	for _, r := range rows {
		out = append(out, FlowVersion{Version: r.Member, PublishedAt: time.UnixMilli(int64(r.Score)).UTC()})
	}
	return out, nil
}
