package store

import (
	"context"
	"encoding/json"
	"fmt"

	"plaita/engine/state"
	"plaita/store/keys"
)

// The pending-approval listing: the tenant's approval index (ZSET execution id → since), newest
// first, each member checked against its execution state. A member is only a hint: an answer
// given through any front end, a timeout, a cancel or a delete leaves it behind, so a member whose
// execution no longer waits at that approval is removed on the way (Pruned), never listed. The
// removal is conditional on the score read: an execution that suspends at an approval again
// between the read and the removal has re-scored its member (since), and keeps it.

// PendingApproval is an execution that waits for an answer, with its record.
type PendingApproval struct {
	Approval
	Status state.Status `json:"status"` // always suspended: the state was read and checked
}

// ApprovalPage is one page of the tenant's pending approvals.
type ApprovalPage struct {
	Items      []PendingApproval `json:"items"`
	NextCursor string            `json:"next_cursor,omitempty"`
	// Pruned counts the members removed because their execution no longer waits there; Skipped
	// those left alone because their state could not be read (a corrupt state is shown by
	// execution show, not hidden by a listing).
	Pruned  int `json:"pruned"`
	Skipped int `json:"skipped"`
}

// Approvals returns one page of the tenant's pending approvals, newest first (limit as List).
func (ts *TenantStore) Approvals(ctx context.Context, cursorText string, limit int) (ApprovalPage, error) {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	cur, err := decodeCursor(cursorText)
	if err != nil {
		return ApprovalPage{}, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	page := ApprovalPage{Items: []PendingApproval{}}
	scanned, exhausted := 0, false
	for len(page.Items) < limit && scanned < limit*listScanFactor {
		want := limit - len(page.Items)
		rows, err := ts.r.l.Rows(ctx, ts.sp, ListSource{Approvals: true}, ListRow{Member: cur.Member, Score: cur.Score}, want, "")
		if err != nil {
			return ApprovalPage{}, fmt.Errorf("list approvals: %w", err)
		}
		var ids []string
		scores := map[string]float64{}
		for _, row := range rows {
			cur = cursor{Score: row.Score, Member: row.Member}
			scanned++
			ids = append(ids, row.Member)
			scores[row.Member] = row.Score
		}
		items, stale, skipped, err := ts.checkApprovals(ctx, ids)
		if err != nil {
			return ApprovalPage{}, err
		}
		page.Items = append(page.Items, items...)
		page.Skipped += skipped
		if len(stale) > 0 {
			prune := make([]ListRow, 0, len(stale))
			for _, m := range stale {
				prune = append(prune, ListRow{Member: m, Score: scores[m]})
			}
			n, err := ts.r.l.PruneApprovals(ctx, ts.sp, prune)
			if err != nil {
				return ApprovalPage{}, err
			}
			page.Pruned += int(n)
		}
		if len(rows) < want {
			exhausted = true
			break
		}
	}
	if !exhausted {
		page.NextCursor = cur.encode()
	}
	return page, nil
}

// checkApprovals reads the records and states of index members in one round trip and sorts
// them into pending ones, stale members (to remove) and members left alone.
func (ts *TenantStore) checkApprovals(ctx context.Context, ids []string) (items []PendingApproval, stale []string, skipped int, err error) {
	if len(ids) == 0 {
		return nil, nil, 0, nil
	}
	var valid []string
	for _, id := range ids {
		_, err1 := ts.sp.Approval(id)
		err2 := keys.ValidID(id)
		if err1 != nil || err2 != nil {
			stale = append(stale, id) // no writer makes such a member
			continue
		}
		valid = append(valid, id)
	}
	reads, err := ts.r.l.ApprovalReads(ctx, ts.sp, valid)
	if err != nil {
		return nil, nil, 0, err
	}
	for i, id := range valid {
		rd := reads[i]
		if rd.State == nil && !rd.StateBad || rd.Record == nil && !rd.RecordBad {
			stale = append(stale, id) // deleted, expired, or answered and cleaned up
			continue
		}
		var ap Approval
		st, err := decodeFor(id, rd.State)
		if err != nil || rd.StateBad || rd.RecordBad || json.Unmarshal(rd.Record, &ap) != nil {
			skipped++
			continue
		}
		s := st.Suspend
		if st.Status != state.Suspended || s == nil || s.Kind != state.SuspendApproval || s.Node != ap.Node || !s.Since.Equal(ap.Since) {
			stale = append(stale, id)
			continue
		}
		items = append(items, PendingApproval{Approval: ap, Status: st.Status})
	}
	return items, stale, skipped, nil
}
