package store

import (
	"context"
	"maps"
	"slices"
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
	step, removed, err := ts.pruneStep(ctx, ts.sp.Index(), cursor, count)
	if err != nil {
		return IndexPrune{}, err
	}
	return IndexPrune{Cursor: step.Cursor, Examined: len(step.Elements) / 2, Removed: removed}, nil
}

// pruneStep runs one ZSCAN of an index (the tenant's, or an IndexBy key) from cursor and
// removes the members whose state is gone or that are no execution id; it returns the scan's
// entry and how many it removed.
func (ts *TenantStore) pruneStep(ctx context.Context, idx string, cursor uint64, count int) (rueidis.ScanEntry, int, error) {
	c, err := ts.r.redis("the index prune (the embedded index is its state table)")
	if err != nil {
		return rueidis.ScanEntry{}, 0, err
	}
	e, err := c.Do(ctx, c.B().Zscan().Key(idx).Cursor(cursor).Count(int64(max(count, 1))).Build()).AsScanEntry()
	if err != nil {
		return e, 0, transient(ErrRedis, "prune index: zscan "+idx, err)
	}
	var gone, ids []string
	var cmds rueidis.Commands
	for i := 0; i+1 < len(e.Elements); i += 2 { // member, score pairs
		id := e.Elements[i]
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
			return e, 0, transient(ErrRedis, "prune index: exists "+ids[i], err)
		}
		if n == 0 {
			gone = append(gone, ids[i])
		}
	}
	if len(gone) == 0 {
		return e, 0, nil
	}
	n, err := c.Do(ctx, c.B().Zrem().Key(idx).Member(gone...).Build()).AsInt64()
	if err != nil {
		return e, 0, transient(ErrRedis, "prune index: zrem "+strconv.Itoa(len(gone))+" members", err)
	}
	return e, int(n), nil
}

// IndexByPosition is where a pass of PruneIndexBy is: the node (by sorted address) and its
// SCAN cursor. The zero value starts a pass.
type IndexByPosition struct {
	Node   int    `json:"node"`
	Cursor uint64 `json:"cursor"`
}

// IndexByPrune is what one PruneIndexBy call did.
type IndexByPrune struct {
	Next     IndexByPosition // where the next call goes on
	Done     bool            // the pass is complete
	Keys     int             // IndexBy keys examined
	Examined int             // their members examined
	Removed  int             // members removed: their state is gone (deleted, expired)
}

// PruneIndexBy is PruneIndex for the tenant's IndexBy keys (docs/flows.md, "Indexed fields"):
// one SCAN step (COUNT count) of the keys of one node from pos, and every member of each key
// found whose state is gone is removed (a key left empty goes with its last member). Like
// the index, those keys keep the members of expired states until a prune (plaita reindex);
// listings skip them. An operator's tool: the one place besides Backfill that scans.
func (ts *TenantStore) PruneIndexBy(ctx context.Context, pos IndexByPosition, count int) (IndexByPrune, error) {
	c, err := ts.r.redis("the index prune (the embedded index is its state table)")
	if err != nil {
		return IndexByPrune{}, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	nodes := c.Nodes()
	addrs := slices.Sorted(maps.Keys(nodes))
	out := IndexByPrune{Next: pos}
	if pos.Node >= len(addrs) {
		out.Done = true
		return out, nil
	}
	node := nodes[addrs[pos.Node]]
	e, err := node.Do(ctx, node.B().Scan().Cursor(pos.Cursor).Match(ts.sp.IndexByPattern()).Count(int64(max(count, 1))).Build()).AsScanEntry()
	if err != nil {
		return out, transient(ErrRedis, "prune index: scan "+addrs[pos.Node], err)
	}
	for _, k := range e.Elements {
		out.Keys++
		for cursor := uint64(0); ; {
			step, removed, err := ts.pruneStep(ctx, k, cursor, backfillBatch)
			if err != nil {
				return out, err
			}
			out.Examined += len(step.Elements) / 2
			out.Removed += removed
			if cursor = step.Cursor; cursor == 0 {
				break
			}
		}
	}
	out.Next = IndexByPosition{Node: pos.Node, Cursor: e.Cursor}
	if e.Cursor == 0 {
		out.Next = IndexByPosition{Node: pos.Node + 1}
	}
	out.Done = out.Next.Node >= len(addrs)
	return out, nil
}
