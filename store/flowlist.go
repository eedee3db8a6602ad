package store

import (
	"context"
	"fmt"
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

// List is the tenant's published flows, most recently published first (at most limit).
func (f *Flows) List(ctx context.Context, tenant string, limit int) ([]FlowSummary, error) {
	sp, err := f.space(tenant)
	if err != nil {
		return nil, err
	}
	limit = min(max(limit, 1), MaxFlowList)
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := f.c
	rows, err := c.Do(ctx, c.B().Zrevrange().Key(sp.FlowList()).Start(0).Stop(int64(limit-1)).Withscores().Build()).AsZScores()
	if err != nil {
		return nil, transient(ErrRedis, "list flows", err)
	}
	out := make([]FlowSummary, 0, len(rows))
	cmds := make(rueidis.Commands, 0, 2*len(rows))
	for _, r := range rows {
		out = append(out, FlowSummary{FlowID: r.Member, PublishedAt: time.UnixMilli(int64(r.Score)).UTC()})
		cmds = append(cmds, c.B().Zrevrange().Key(sp.FlowVersions(r.Member)).Start(0).Stop(0).Build(), c.B().Zcard().Key(sp.FlowVersions(r.Member)).Build())
	}
	if len(cmds) == 0 {
		return out, nil
	}
	res := c.DoMulti(ctx, cmds...)
	for i := range out {
		latest, err := res[2*i].AsStrSlice()
		if err != nil {
			return nil, transient(ErrRedis, "read versions of flow "+out[i].FlowID, err)
		}
		if len(latest) > 0 {
			out[i].Latest = latest[0]
		}
		if out[i].Versions, err = res[2*i+1].AsInt64(); err != nil {
			return nil, transient(ErrRedis, "count versions of flow "+out[i].FlowID, err)
		}
	}
	return out, nil
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
		return nil, fmt.Errorf("%w: flow %s in tenant %s (no versions in %s)", ErrFlowNotFound, flowID, sp.Tenant(), sp.FlowVersions(flowID))
	}
	out := make([]FlowVersion, 0, len(rows))
	for _, r := range rows {
		out = append(out, FlowVersion{Version: r.Member, PublishedAt: time.UnixMilli(int64(r.Score)).UTC()})
	}
	return out, nil
}
