package store

import (
	"context"
	"strconv"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// IndexPrune is what one PruneIndex call did.
type IndexPrune struct {
	Cursor   uint64 // the ZSCAN cursor to go on with; 0 when the pass is complete
	Examined int
	Removed  int // members with no state (deleted, expired) or that no writer makes
}

// PruneIndex removes from the tenant's execution index the members whose state key is gone or
// that are no execution id, examining about count members from cursor (ZSCAN: members removed
// meanwhile are never skipped or doubled). Listings already skip such members; a prune makes
// the index exact again (plaita reindex). A member whose state is written again after the check
// gets its member back from that write.
func (ts *TenantStore) PruneIndex(ctx context.Context, cursor uint64, count int) (IndexPrune, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	idx := ts.sp.Index()
	e, err := c.Do(ctx, c.B().Zscan().Key(idx).Cursor(cursor).Count(int64(max(count, 1))).Build()).AsScanEntry()
	if err != nil {
		return IndexPrune{}, transient(ErrRedis, "prune index: zscan "+idx, err)
	}
	out := IndexPrune{Cursor: e.Cursor}
	var gone, ids []string
	var cmds rueidis.Commands
	for i := 0; i+1 < len(e.Elements); i += 2 { // member, score pairs
		id := e.Elements[i]
		out.Examined++
		key, err := ts.sp.Execution(id)
		if err != nil || keys.IsMechanismKey(ts.r.root, key) || ts.sp.ExecutionID(key) != id {
			gone = append(gone, id)
			continue
		}
		ids = append(ids, id)
		cmds = append(cmds, c.B().Exists().Key(key).Build())
	}
	for i, res := range c.DoMulti(ctx, cmds...) {
		n, err := res.AsInt64()
		if err != nil {
			return out, transient(ErrRedis, "prune index: exists "+ids[i], err)
		}
		if n == 0 {
			gone = append(gone, ids[i])
		}
	}
	if len(gone) > 0 {
		n, err := c.Do(ctx, c.B().Zrem().Key(idx).Member(gone...).Build()).AsInt64()
		if err != nil {
			return out, transient(ErrRedis, "prune index: zrem "+strconv.Itoa(len(gone))+" members", err)
		}
		out.Removed = int(n)
	}
	return out, nil
}
