package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"plaita/engine/state"
)

// The pending-approval listing: the tenant's approval index (ZSET execution id → since), newest
// first, each member checked against its execution state. A member is only a hint: an answer
// given through any front end, a timeout, a cancel or a delete leaves it behind, so a member whose
// execution no longer waits at that approval is removed on the way (Pruned), never listed. The
// removal is conditional on the score read: an execution that suspends at an approval again
// between the read and the removal has re-scored its member (since), and keeps it.

// pruneScript removes the members whose score is still the one given.
// KEYS: 1 index. ARGV: member, score pairs. Returns the number removed.
var pruneScript = rueidis.NewLuaScript(`
local n = 0
for i = 1, #ARGV, 2 do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) == tonumber(ARGV[i + 1]) then
    n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return n
`)

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
	c := ts.r.c
	page := ApprovalPage{Items: []PendingApproval{}}
	scanned, exhausted := 0, false
	for len(page.Items) < limit && scanned < limit*listScanFactor {
		want := limit - len(page.Items)
		rows, err := pageScript.Exec(ctx, c, []string{ts.sp.ApprovalIndex()},
			[]string{cur.Member, strconv.FormatFloat(cur.Score, 'g', -1, 64), strconv.Itoa(want)}).ToArray()
		if err != nil {
			return ApprovalPage{}, transient(ErrRedis, "list approvals", err)
		}
		var ids []string
		scores := map[string]float64{}
		for i := 0; i+1 < len(rows); i += 2 {
			member, _ := rows[i].ToString()
			score, err := rows[i+1].AsFloat64()
			if err != nil {
				return ApprovalPage{}, fmt.Errorf("%w: list approvals: index score of %q: %w", ErrRedis, member, err)
			}
			cur = cursor{Score: score, Member: member}
			scanned++
			ids = append(ids, member)
			scores[member] = score
		}
		items, stale, skipped, err := ts.checkApprovals(ctx, ids)
		if err != nil {
			return ApprovalPage{}, err
		}
		page.Items = append(page.Items, items...)
		page.Skipped += skipped
		if len(stale) > 0 {
			args := make([]string, 0, 2*len(stale))
			for _, m := range stale {
				args = append(args, m, strconv.FormatFloat(scores[m], 'g', -1, 64))
			}
			n, err := pruneScript.Exec(ctx, c, []string{ts.sp.ApprovalIndex()}, args).AsInt64()
			if err != nil {
				return ApprovalPage{}, transient(ErrRedis, "prune approval index", err)
			}
			page.Pruned += int(n)
		}
		if len(rows)/2 < want {
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
	c := ts.r.c
	cmds := make(rueidis.Commands, 0, 2*len(ids))
	var valid []string
	for _, id := range ids {
		rk, err1 := ts.sp.Approval(id)
		sk, err2 := ts.sp.Execution(id)
		if err1 != nil || err2 != nil {
			stale = append(stale, id) // no writer makes such a member
			continue
		}
		valid = append(valid, id)
		cmds = append(cmds, c.B().Get().Key(rk).Build(), c.B().Get().Key(sk).Build())
	}
	res := c.DoMulti(ctx, cmds...)
	for i, id := range valid {
		rec, recErr := res[2*i].AsBytes()
		raw, stErr := res[2*i+1].AsBytes()
		for _, e := range []error{recErr, stErr} {
			if e != nil && !rueidis.IsRedisNil(e) && !isWrongType(e) {
				return nil, nil, 0, transient(ErrRedis, "list approvals: read "+id, e)
			}
		}
		if rueidis.IsRedisNil(stErr) || rueidis.IsRedisNil(recErr) {
			stale = append(stale, id) // deleted, expired, or answered and cleaned up
			continue
		}
		var ap Approval
		st, err := decodeFor(id, raw)
		if err != nil || stErr != nil || recErr != nil || json.Unmarshal(rec, &ap) != nil {
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
