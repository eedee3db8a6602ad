package store

import (
	"context"
	"strconv"
	"time"

	"plaita/store/keys"
)

// The feed, the tenant list and the reconciler's cursors: what the filter's reconciler reads to
// find the events a notification did not bring (events.go has the keys).

// TenantList is what Tenants read.
type TenantList struct {
	Tenants []string
	// Invalid counts the members that are no tenant slug: skipped and removed on the way.
	Invalid int
}

// Tenants lists the tenants that published an event at or after since (the tenant list's
// score is the last publish), in the order of their last publish (ties in slug order).
// Members that are no tenant slug are removed.
func (e *Events) Tenants(ctx context.Context, since time.Time) (TenantList, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	var from *int64 // nil: every tenant
	if !since.IsZero() {
		ms := since.UnixMilli()
		from = &ms
	}
	ts, err := e.d.Tenants(ctx, e.platform(), from)
	if err != nil {
		return TenantList{}, err
	}
	var out TenantList
	var bad []string
	for _, t := range ts {
		if keys.ValidTenant(t) == nil {
			out.Tenants = append(out.Tenants, t)
		} else {
			bad = append(bad, t)
		}
	}
	if out.Invalid = len(bad); out.Invalid > 0 {
		_ = e.d.Drop(ctx, e.platform(), EventSet{Kind: EventTenants}, bad...) // best effort: skipped again next time
	}
	return out, nil
}

// FeedRead is one page of a tenant's feed.
type FeedRead struct {
	Refs []EventRef // the usable members, oldest first
	// Read is how many members the page read, usable or not; Last is the score of the last one
	// and AtLast how many of the members read have that score: the caller pages on from there.
	Read   int
	Last   time.Time
	AtLast int
	// Invalid counts the members no event can have (not "<type> <id>", a type or an id outside
	// their alphabets): skipped and left for the janitor (SweepFeed removes them). Removing
	// them here would shift the ranks the caller pages by.
	Invalid int
}

// FeedPage is one page of a tenant's feed between two publish times (both inclusive, ms
// precision), oldest first: at most count members after the first skip ones.
func (e *Events) FeedPage(ctx context.Context, tenant string, from, to time.Time, skip, count int) (FeedRead, error) {
	sp, err := e.space(tenant)
	if err != nil {
		return FeedRead{}, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	res, err := e.d.FeedRange(ctx, sp, from.UnixMilli(), to.UnixMilli(), skip, count)
	if err != nil {
		return FeedRead{}, err
	}
	out := FeedRead{Refs: make([]EventRef, 0, len(res)), Read: len(res)}
	for _, z := range res {
		at := time.UnixMilli(int64(z.Score)).UTC()
		if at.Equal(out.Last) {
			out.AtLast++
		} else {
			out.Last, out.AtLast = at, 1
		}
		r, ok := feedRef(sp, z.Member)
		if !ok {
			out.Invalid++
			continue
		}
		r.At = at
		out.Refs = append(out.Refs, r)
	}
	return out, nil
}

// Cursor reads the reconciler's cursor of a tenant; found is false when it has none (a first
// start, or a lost cursor).
func (e *Events) Cursor(ctx context.Context, tenant string) (at time.Time, found bool, err error) {
	sp, err := e.space(tenant)
	if err != nil {
		return time.Time{}, false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	s, found, err := e.d.Cursor(ctx, sp)
	if err != nil {
		return time.Time{}, false, err
	}
	if !found {
		return time.Time{}, false, nil
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false, nil // unreadable: as lost
	}
	return time.UnixMilli(ms).UTC(), true, nil
}

// SetCursor moves a tenant's reconcile cursor to at, never backwards (several filters share
// it; the one that scanned further wins).
func (e *Events) SetCursor(ctx context.Context, tenant string, at time.Time) error {
	sp, err := e.space(tenant)
	if err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return e.d.AdvanceCursor(ctx, sp, at.UnixMilli())
}

// SweepResult is one janitor pass over one tenant's feed.
type SweepResult struct {
	Checked int // members looked at (the budget counts these)
	Removed int // expired events removed from the feed and their type's index
	Invalid int // of Removed, the members no event can have
	Next    int // the rank the next pass starts at (0: the feed was walked to its end)
}

// SweepFeed checks up to budget members of a tenant's feed from rank start (oldest first) and
// removes, from the feed and from their type's index, the events whose record has expired,
// and from the feed the members no event can have (FeedPage skips them). Next is where the
// following pass continues; it wraps to 0 at the end of the feed.
func (e *Events) SweepFeed(ctx context.Context, tenant string, start, budget int) (SweepResult, error) {
	sp, err := e.space(tenant)
	if err != nil {
		return SweepResult{}, err
	}
	if budget < 1 {
		budget = 1
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	feed := EventSet{Kind: EventFeed}
	members, err := e.d.Ranks(ctx, sp, feed, start, start+budget-1)
	if err != nil {
		return SweepResult{}, err
	}
	refs := make([]EventRef, 0, len(members))
	var bad []string
	for _, m := range members {
		r, ok := feedRef(sp, m)
		if !ok {
			bad = append(bad, m)
			continue
		}
		refs = append(refs, r)
	}
	if len(bad) > 0 {
		if err := e.d.Drop(ctx, sp, feed, bad...); err != nil {
			return SweepResult{}, err
		}
	}
	n, err := e.removeExpired(ctx, sp, refs)
	if err != nil {
		return SweepResult{}, err
	}
	removed := len(bad) + n
	res := SweepResult{Checked: len(members), Removed: removed, Invalid: len(bad)}
	if len(members) == budget {
		// Removed members shift the ranks after them down.
		res.Next = start + budget - removed
	}
	return res, nil
}

// ForgetTenant removes a tenant from the tenant list when it has published nothing since
// before (and so has no live event): the janitor's last step for an idle tenant. It reports
// whether the entry was removed; a concurrent publish keeps it.
func (e *Events) ForgetTenant(ctx context.Context, tenant string, before time.Time) (bool, error) {
	sp, err := e.space(tenant)
	if err != nil {
		return false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return e.d.ForgetTenant(ctx, sp, before.UnixMilli())
}
