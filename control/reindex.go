package control

import (
	"context"
	"fmt"

	"plaita/store"
)

// Reindex rebuilds tenants' execution indexes from their state keys: every state gets its
// member (a SCAN of the tenant's execution keys on every node, resumable: the position is kept
// in Redis), then every member without a state goes — from the tenant's index and from the
// keys of its indexed fields (docs/flows.md, "Indexed fields"). An operator's tool for an index lost or
// left with garbage (a restore, a FLUSH of one key, a bug); listings work meanwhile (they skip
// and count what they cannot read).

// reindexBatch is the keys (or members) one step examines.
const reindexBatch = 5000

// ReindexProgress is how far a reindex is.
type ReindexProgress struct {
	Tenant  string `json:"tenant_id"`
	Phase   string `json:"phase"` // backfill | prune
	Scanned int    `json:"scanned"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
}

// ReindexReport is what a reindex did, per tenant.
type ReindexReport struct {
	Tenants []ReindexProgress `json:"tenants"`
}

// Reindex rebuilds the named tenants' indexes (empty: the default tenant's).
func (p *Plane) Reindex(ctx context.Context, tenants []string, progress func(ReindexProgress)) (ReindexReport, error) {
	if len(tenants) == 0 {
		tenants = []string{""}
	}
	rep := ReindexReport{Tenants: []ReindexProgress{}}
	for _, t := range tenants {
		ts, err := p.tenantStore(t)
		if err != nil {
			return rep, err
		}
		pr := ReindexProgress{Tenant: ts.Tenant(), Phase: "backfill"}
		for {
			step, err := ts.Backfill(ctx, reindexBatch)
			if err != nil {
				return rep, fmt.Errorf("tenant %s: %w", ts.Tenant(), err)
			}
			pr.Scanned += step.Scanned
			pr.Added += step.Added
			if progress != nil {
				progress(pr)
			}
			if step.Done {
				break
			}
		}
		pr.Phase = "prune"
		for cursor := uint64(0); ; {
			step, err := ts.PruneIndex(ctx, cursor, reindexBatch)
			if err != nil {
				return rep, fmt.Errorf("tenant %s: %w", ts.Tenant(), err)
			}
			pr.Removed += step.Removed
			if progress != nil {
				progress(pr)
			}
			if cursor = step.Cursor; cursor == 0 {
				break
			}
		}
		for pos := (store.IndexByPosition{}); ; {
			step, err := ts.PruneIndexBy(ctx, pos, reindexBatch)
			if err != nil {
				return rep, fmt.Errorf("tenant %s: %w", ts.Tenant(), err)
			}
			pr.Removed += step.Removed
			if progress != nil && step.Keys > 0 {
				progress(pr)
			}
			if step.Done {
				break
			}
			pos = step.Next
		}
		rep.Tenants = append(rep.Tenants, pr)
	}
	return rep, nil
}
