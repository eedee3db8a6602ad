package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"plaita/engine/state"
	"plaita/store/keys"
)

// Subscriptions as the filter reads them: the index of each event type's waits, the correlated
// buckets, and the stale entries removed on the way.

// SubscriptionRead is one member of a subscription index with its record.
type SubscriptionRead struct {
	ExecutionID string
	Sub         Subscription
	// Raw is the record as stored ("" when Missing): RemoveStaleSubscription deletes the
	// record only while it still holds exactly this.
	Raw string
	// Missing: the index lists the execution but its record is gone.
	Missing bool
	// Err: the record does not decode (ErrInvalid); it is left for an operator.
	Err error
}

// subscriptionPage bounds one index read of Subscriptions.
const subscriptionPage = 500

// expiredMargin is how long past its timeout an index member stays: a clock a little ahead
// of the worker's must not drop a wait that has not timed out yet.
const expiredMargin = time.Minute

// SubscriptionReads is what Subscriptions read of a subscription index.
type SubscriptionReads struct {
	Reads []SubscriptionRead
	// Invalid counts the index members that are no execution id (a ':' or braces, over 200
	// characters …): no worker writes one and no record can have one, so they are skipped and
	// removed from the index on the way — never an error that would hold the reconciler.
	Invalid int
}

// Subscriptions reads the uncorrelated waits of an event type in this tenant that have not
// timed out at now (the per-type index) with their records, in pages of a few hundred.
// Members that are no execution id are removed on the way (counted in Invalid); members that
// timed out are skipped (the delay role resumes them with their timeout) and dropped by the
// next registration of the type (PutSubscription). An index key that is not a sorted set is
// ErrInvalid: no retry reads it. Waits reads the correlated waits beside them.
func (ts *TenantStore) Subscriptions(ctx context.Context, eventType string, now time.Time) (SubscriptionReads, error) {
	if _, err := ts.subscriptionIndex(eventType); err != nil {
		return SubscriptionReads{}, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.readIndex(ctx, eventType, now, nil, false)
}

// readIndex pages through the per-type index from rank 0; first is the first page when read is
// true (the caller read it already).
func (ts *TenantStore) readIndex(ctx context.Context, eventType string, now time.Time, first []string, read bool) (SubscriptionReads, error) {
	var out SubscriptionReads
	for skip := 0; ; {
		ids := first
		if !read || skip > 0 {
			var err error
			if ids, err = ts.r.w.Index(ctx, ts.sp, eventType, now, skip, subscriptionPage); err != nil {
				return SubscriptionReads{}, err
			}
		}
		valid := ids[:0:0]
		var bad []string
		for _, id := range ids {
			if _, err := ts.sp.Subscription(id); err != nil {
				bad = append(bad, id)
				continue
			}
			valid = append(valid, id)
		}
		out.Invalid += len(bad)
		removed := int64(0)
		if len(bad) > 0 {
			// Best effort: a member left here is skipped again by the next read.
			removed, _ = ts.r.w.Drop(ctx, ts.sp, eventType, DropFrom{}, bad...)
		}
		reads, err := ts.readSubscriptions(ctx, valid)
		if err != nil {
			return SubscriptionReads{}, err
		}
		out.Reads = append(out.Reads, reads...)
		if len(ids) < subscriptionPage {
			return out, nil
		}
		// The members removed from this page no longer take a rank in the next.
		skip += len(ids) - int(removed)
	}
}

// CorrelatedWait is a bucket member that events of a batch look up (docs/events.md,
// "Correlation"): an execution's suspension indexed under Term.
type CorrelatedWait struct {
	ExecutionID string
	Since       time.Time // the suspension's since (to the nanosecond)
	Term        state.Correlation
	// Events are the indexes, in the events given to Waits, of those whose value at the
	// term's path is the term's value: the only ones of the batch the wait can take.
	Events []int
	member string
}

// Waits is what Waits read: the candidates of a batch of events of one type.
type Waits struct {
	// Uncorrelated are the per-type index's waits with their records, as Subscriptions reads
	// them: every event of the type is checked against each.
	Uncorrelated SubscriptionReads
	// Correlated are the members of the buckets the events' values look up.
	Correlated []CorrelatedWait
	// Paths is how many paths correlated waits of the type are indexed by.
	Paths int
	// Invalid counts the paths and bucket members no writer makes, skipped and removed.
	Invalid int
}

// Waits reads what may take events of one type in this tenant (their data, decoded JSON, in
// publish order) at now: the uncorrelated waits, and for every path in use by correlated
// waits of the type (SubscriptionPaths) the bucket of each event's value at that path
// (SubscriptionBucket) — the paths and the first page of the index in one round trip, the
// buckets in a second, the index's records in a third. An event without a canonical value at a
// path looks up no bucket there: no wait indexed by that path can take it. What is not a
// sorted set where an index should be is ErrInvalid; a Redis failure ErrRedis.
//
// For one event with one path in use and nothing uncorrelated, that is three commands however
// many waits there are: the paths, the index, the event's bucket.
func (ts *TenantStore) Waits(ctx context.Context, eventType string, events []any, now time.Time) (Waits, error) {
	if _, err := ts.subscriptionIndex(eventType); err != nil {
		return Waits{}, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	members, first, err := ts.r.w.PathsAndIndex(ctx, ts.sp, eventType, now, subscriptionPage)
	if err != nil {
		return Waits{}, err
	}
	var out Waits
	// The buckets the events look up, each with the events that look it up.
	type lookup struct {
		term   state.Correlation
		bucket BucketTerm
		events []int
	}
	var order []string
	lookups := map[string]*lookup{}
	var badPaths []string
	for _, m := range members {
		path, ok := decodePath(m)
		if !ok {
			badPaths = append(badPaths, m)
			continue
		}
		out.Paths++
		for i, data := range events {
			v, ok := state.CorrelationValueAt(data, path)
			if !ok {
				continue
			}
			key := m + "\x00" + v
			l := lookups[key]
			if l == nil {
				l = &lookup{term: state.Correlation{Path: path, Value: v}, bucket: BucketTerm{Path: m, Value: v}}
				lookups[key] = l
				order = append(order, key)
			}
			l.events = append(l.events, i)
		}
	}
	if len(badPaths) > 0 {
		out.Invalid += len(badPaths)
		_, _ = ts.r.w.Drop(ctx, ts.sp, eventType, DropFrom{Paths: true}, badPaths...) // best effort: skipped again next time
	}
	terms := make([]BucketTerm, len(order))
	for i, key := range order {
		terms[i] = lookups[key].bucket
	}
	buckets, err := ts.r.w.Buckets(ctx, ts.sp, eventType, terms, now)
	if err != nil {
		return Waits{}, err
	}
	for i, key := range order {
		l, b := lookups[key], buckets[i]
		var bad []string
		for _, m := range b {
			id, since, ok := parseBucketMember(m)
			if !ok {
				bad = append(bad, m)
				continue
			}
			out.Correlated = append(out.Correlated, CorrelatedWait{ExecutionID: id, Since: since, Term: l.term, Events: l.events, member: m})
		}
		if len(bad) > 0 {
			out.Invalid += len(bad)
			_, _ = ts.r.w.Drop(ctx, ts.sp, eventType, DropFrom{Term: &l.bucket}, bad...) // best effort
		}
	}
	if out.Uncorrelated, err = ts.readIndex(ctx, eventType, now, first, true); err != nil {
		return Waits{}, err
	}
	return out, nil
}

// RemoveCorrelatedWait removes a correlated wait's bucket member: the suspension it names is
// over (its execution moved on, was cancelled, was woken by this event). The member names its
// suspension, so a later one of the same execution in the same bucket stays. One command.
func (ts *TenantStore) RemoveCorrelatedWait(ctx context.Context, eventType string, w CorrelatedWait) (bool, error) {
	path, _, err := ts.bucket(eventType, w.Term)
	if err != nil {
		return false, err
	}
	m := w.member
	if m == "" {
		m = bucketMember(w.ExecutionID, w.Since)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	n, err := ts.r.w.Drop(ctx, ts.sp, eventType, DropFrom{Term: &BucketTerm{Path: path, Value: w.Term.Value}}, m)
	if err != nil {
		return false, fmt.Errorf("remove the correlated wait of %s: %w", w.ExecutionID, err)
	}
	return n == 1, nil
}

// WaitingFor counts the executions of this tenant that may take an event of a type with data
// (decoded JSON) at now: the uncorrelated waits of the type and the correlated ones in the
// buckets of its values — the members, hints as the filter reads them (the states decide).
func (ts *TenantStore) WaitingFor(ctx context.Context, eventType string, data any, now time.Time) (int64, error) {
	if _, err := ts.subscriptionIndex(eventType); err != nil {
		return 0, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	members, n, err := ts.r.w.CountPaths(ctx, ts.sp, eventType, now)
	if err != nil {
		return 0, err
	}
	var terms []BucketTerm
	for _, m := range members {
		path, ok := decodePath(m)
		if !ok {
			continue
		}
		if v, ok := state.CorrelationValueAt(data, path); ok {
			terms = append(terms, BucketTerm{Path: m, Value: v})
		}
	}
	k, err := ts.r.w.CountBuckets(ctx, ts.sp, eventType, terms, now)
	return n + k, err
}

// SubscriptionRegistered reports whether execution id's event wait is registered as the filter
// and a publish's count read it: its subscription record, and its member in the type's index
// or its term's bucket. A worker saves the suspended state first, then writes the record, then
// the index (PutSubscription: two round trips), so a reader that must not see the state without
// the wait checks this. For a correlated wait the bucket is counted (a hint, as WaitingFor
// reads it), not searched for this member.
func (ts *TenantStore) SubscriptionRegistered(ctx context.Context, id string, now time.Time) (bool, error) {
	if _, err := ts.sp.Subscription(id); err != nil {
		return false, err
	}
	reads, err := ts.readSubscriptions(ctx, []string{id})
	if err != nil || reads[0].Missing || reads[0].Err != nil {
		return false, cmp.Or(err, reads[0].Err)
	}
	sub := reads[0].Sub
	ctx, cancel := opCtx(ctx)
	defer cancel()
	if sub.Correlation == nil {
		_, n, err := ts.r.w.CountPaths(ctx, ts.sp, sub.EventType, now)
		return n > 0, err
	}
	path, _, err := ts.bucket(sub.EventType, *sub.Correlation)
	if err != nil {
		return false, err
	}
	k, err := ts.r.w.CountBuckets(ctx, ts.sp, sub.EventType, []BucketTerm{{Path: path, Value: sub.Correlation.Value}}, now)
	return k > 0, err
}

// readSubscriptions reads the records of valid execution ids.
func (ts *TenantStore) readSubscriptions(ctx context.Context, ids []string) ([]SubscriptionRead, error) {
	out := make([]SubscriptionRead, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	for i, id := range ids {
		out[i].ExecutionID = id
	}
	recs, err := ts.r.w.Subscriptions(ctx, ts.sp, ids)
	if err != nil {
		return nil, err
	}
	for i, rec := range recs {
		r := &out[i]
		switch {
		case rec.Err != nil:
			r.Err = fmt.Errorf("%w: subscription of %s: %w", ErrInvalid, r.ExecutionID, rec.Err)
		case !rec.Found:
			r.Missing = true
		default:
			r.Raw = rec.Value
			r.Sub, r.Err = DecodeSubscription(r.ExecutionID, []byte(rec.Value))
		}
	}
	return out, nil
}

// DecodeSubscription reads a subscription record of execution id strictly: JSON with the
// same execution id, a node, a valid event type and a since time (ErrInvalid otherwise).
func DecodeSubscription(id string, b []byte) (Subscription, error) {
	var sub Subscription
	if err := json.Unmarshal(b, &sub); err != nil {
		return Subscription{}, fmt.Errorf("%w: subscription of %s is not a record: %w", ErrInvalid, id, err)
	}
	switch {
	case sub.ExecutionID != id:
		return Subscription{}, fmt.Errorf("%w: the subscription of %s names execution %q", ErrInvalid, id, sub.ExecutionID)
	case sub.Node == "" || sub.Since.IsZero():
		return Subscription{}, fmt.Errorf("%w: the subscription of %s has no node or since", ErrInvalid, id)
	case keys.ValidName("event type", sub.EventType) != nil:
		return Subscription{}, fmt.Errorf("%w: the subscription of %s has event type %q", ErrInvalid, id, sub.EventType)
	}
	return sub, nil
}

// RemoveStaleSubscription removes an execution's uncorrelated subscription to an event type
// once its state shows it waits for something else (or nothing): the record — only while it
// still holds raw ("" = leave the record: it is gone, or it is not this index's), so a record
// the worker rewrote for a new suspension stays — and the index member. The record and the index live in two Cluster
// slots, so this is not one script: after removing the member it reads the record again and,
// when a new one appeared meanwhile (a worker registered a new uncorrelated wait of the same
// type between the two steps), puts the member back. It reports whether anything was removed.
//
// A member that is no execution id has no record: only the member is removed.
func (ts *TenantStore) RemoveStaleSubscription(ctx context.Context, executionID, eventType, raw string) (bool, error) {
	if _, err := ts.subscriptionIndex(eventType); err != nil {
		return false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	if _, err := ts.sp.Subscription(executionID); err != nil {
		n, err := ts.r.w.Drop(ctx, ts.sp, eventType, DropFrom{}, executionID)
		if err != nil {
			return false, fmt.Errorf("remove an invalid member of the %s index: %w", eventType, err)
		}
		return n == 1, nil
	}
	removed, again, err := ts.r.w.RemoveStale(ctx, ts.sp, executionID, eventType, raw)
	if err != nil || !removed || again == "" {
		return removed, err
	}
	sub, err := DecodeSubscription(executionID, []byte(again))
	if err != nil || sub.EventType != eventType || sub.Correlation != nil {
		return true, nil // not a wait this index lists (a correlated one is in its bucket)
	}
	score := math.Inf(1)
	if !sub.ExpiresAt.IsZero() {
		score = float64(sub.ExpiresAt.UnixMilli())
	}
	return true, ts.r.w.Reindex(ctx, ts.sp, executionID, eventType, score)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
