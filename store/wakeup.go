package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"plaita/engine/state"
	"plaita/store/keys"
)

// Wake-up records of suspended executions (docs/wakeups.md): what a wait_event or approval
// node leaves for the filter role and the console. Per tenant:
//
//	<prefix>subscription:<id>                          JSON record (Subscription), TTL
//	<prefix>subscription_index:<event_type>            ZSET id → expires_at (Unix ms, +inf = no timeout):
//	                                                   the uncorrelated waits
//	<prefix>subscription_bucket:<event_type>:<digest>  ZSET "<id>:<since ns>" → expires_at: the
//	                                                   correlated waits of one term (docs/events.md)
//	<prefix>subscription_paths:<event_type>            ZSET path (JSON) → latest expires_at under it
//	<prefix>approval:<id>                              JSON record (Approval), TTL
//	<prefix>approval_index                             ZSET id → since (Unix ms)
//
// A record and its indexes live in different Cluster slots: the record is written first, then
// each index by a script of its own key (indexScript), never one script over several.
// Writes are idempotent (the same record and members again), so a registration that failed
// half way is simply repeated; readers treat them all as hints next to the execution state.

// Subscription is the record of an execution waiting for an event, as stored. Times are
// written in UTC with nanoseconds (RFC 3339); ExpiresAt is zero for a wait without timeout.
type Subscription struct {
	ExecutionID string    `json:"execution_id"`
	TenantID    string    `json:"tenant_id"`
	FlowID      string    `json:"flow_id"`
	FlowVersion string    `json:"flow_version"`
	Node        string    `json:"node"`
	EventType   string    `json:"event_type"`
	Match       string    `json:"match,omitempty"`
	Since       time.Time `json:"since"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
	// Correlation is the term the wait is indexed under — the first of its suspension's
	// state.Suspend.Correlation — or nil for an uncorrelated wait (the per-type index).
	Correlation *state.Correlation `json:"correlation,omitempty"`
}

// Approval is the record of an execution waiting for a human answer, as stored. Due is zero
// when the approval never times out.
type Approval struct {
	ExecutionID string    `json:"execution_id"`
	TenantID    string    `json:"tenant_id"`
	FlowID      string    `json:"flow_id"`
	FlowVersion string    `json:"flow_version"`
	Node        string    `json:"node"`
	Message     string    `json:"message,omitempty"`
	Since       time.Time `json:"since"`
	Due         time.Time `json:"due,omitzero"`
}

// utc puts a record time in UTC (the zero time stays zero, so omitzero still omits it).
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// subscriptionIndex is the index of an event type. A type that is not a key name (it comes
// from a flow) is ErrInvalid as well as keys.ErrBadName: retrying cannot fix it.
func (ts *TenantStore) subscriptionIndex(eventType string) (string, error) {
	idx, err := ts.sp.SubscriptionIndex(eventType)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return idx, nil
}

// PutSubscription writes the subscription record (TenantID is the store's tenant) with TTL
// ttl, then indexes the wait: an uncorrelated one (Correlation nil) in the event type's index,
// member the execution id; a correlated one in the bucket of its term, member "<execution
// id>:<since in Unix ns>", and its path in the type's paths. Scores are ExpiresAt (+inf
// without a timeout); every index lives at least ttl (never shortened), and its members that
// timed out more than a minute before Since are dropped on the way. Two round trips. A bad
// execution id is keys.ErrBadID, a bad event type or a ttl under a second ErrInvalid; a Redis
// failure is ErrRedis.
func (ts *TenantStore) PutSubscription(ctx context.Context, sub Subscription, ttl time.Duration) error {
	if _, err := ts.sp.Subscription(sub.ExecutionID); err != nil {
		return err
	}
	if _, err := ts.subscriptionIndex(sub.EventType); err != nil {
		return err
	}
	if ttl < time.Second {
		return fmt.Errorf("%w: subscription of %s with TTL %s", ErrInvalid, sub.ExecutionID, ttl)
	}
	sub.TenantID, sub.Since, sub.ExpiresAt = ts.sp.Tenant(), utc(sub.Since), utc(sub.ExpiresAt)
	b, err := json.Marshal(sub)
	if err != nil {
		return fmt.Errorf("%w: subscription of %s: %w", ErrInvalid, sub.ExecutionID, err)
	}
	w := SubscriptionWrite{ID: sub.ExecutionID, EventType: sub.EventType, Record: b, TTL: ttl, Score: math.Inf(1),
		Drop: sub.Since.Add(-expiredMargin).UnixMilli()}
	if !sub.ExpiresAt.IsZero() {
		w.Score = float64(sub.ExpiresAt.UnixMilli())
	}
	if sub.Correlation != nil {
		path, _, err := ts.bucket(sub.EventType, *sub.Correlation)
		if err != nil {
			return err
		}
		w.Term = &BucketTerm{Path: path, Value: sub.Correlation.Value}
		w.Member = bucketMember(sub.ExecutionID, sub.Since)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.r.w.PutSubscription(ctx, ts.sp, w)
}

// bucket is the paths member of a term's path and the term's bucket key. A term without a
// path or value is ErrInvalid (the engine never keeps one).
func (ts *TenantStore) bucket(eventType string, c state.Correlation) (path, key string, err error) {
	if len(c.Path) == 0 || c.Value == "" {
		return "", "", fmt.Errorf("%w: a correlation term without a path or value: %+v", ErrInvalid, c)
	}
	path = encodePath(c.Path)
	key, err = ts.sp.SubscriptionBucket(eventType, path, c.Value)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return path, key, nil
}

// encodePath is a path as the paths member and the bucket digest spell it: a JSON array.
func encodePath(path []string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(path) // strings always encode
	return strings.TrimSuffix(buf.String(), "\n")
}

// decodePath reads a paths member (false for one no writer makes).
func decodePath(m string) ([]string, bool) {
	var p []string
	if err := json.Unmarshal([]byte(m), &p); err != nil || len(p) == 0 || encodePath(p) != m {
		return nil, false
	}
	return p, true
}

// bucketMember is a correlated wait's member: the execution and its suspension, so that
// removing the member of a suspension that is over never takes one of a later suspension of
// the same execution in the same bucket (a loop waiting twice for one value).
func bucketMember(executionID string, since time.Time) string {
	return executionID + ":" + strconv.FormatInt(since.UnixNano(), 10)
}

// parseBucketMember reads a bucket member (false for one no writer makes).
func parseBucketMember(m string) (executionID string, since time.Time, ok bool) {
	i := strings.LastIndexByte(m, ':')
	if i < 0 || keys.ValidID(m[:i]) != nil {
		return "", time.Time{}, false
	}
	ns, err := strconv.ParseInt(m[i+1:], 10, 64)
	if err != nil || ns <= 0 || strconv.FormatInt(ns, 10) != m[i+1:] {
		return "", time.Time{}, false
	}
	return m[:i], time.Unix(0, ns).UTC(), true
}

// RemoveSubscription deletes the subscription record and the execution's member of the event
// type's index (what a consumer does once it has enqueued the resume). Idempotent. The
// member of a correlated wait is removed by RemoveCorrelatedWait.
func (ts *TenantStore) RemoveSubscription(ctx context.Context, executionID, eventType string) error {
	if _, err := ts.sp.Subscription(executionID); err != nil {
		return err
	}
	if _, err := ts.subscriptionIndex(eventType); err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.r.w.RemoveSubscription(ctx, ts.sp, executionID, eventType)
}

// PutApproval writes the approval record (TenantID is the store's tenant) with TTL ttl and
// adds the execution to the tenant's pending-approval index with score Since. One round trip.
// The index has no TTL: it lists what waits for an answer, and answers remove members.
func (ts *TenantStore) PutApproval(ctx context.Context, ap Approval, ttl time.Duration) error {
	if _, err := ts.sp.Approval(ap.ExecutionID); err != nil {
		return err
	}
	if ttl < time.Second {
		return fmt.Errorf("%w: approval of %s with TTL %s", ErrInvalid, ap.ExecutionID, ttl)
	}
	ap.TenantID, ap.Since, ap.Due = ts.sp.Tenant(), utc(ap.Since), utc(ap.Due)
	b, err := json.Marshal(ap)
	if err != nil {
		return fmt.Errorf("%w: approval of %s: %w", ErrInvalid, ap.ExecutionID, err)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.r.w.PutApproval(ctx, ts.sp, ap.ExecutionID, b, ap.Since, ttl)
}

// RemoveApproval deletes the approval record and the execution's index member (what the
// console does once the answer is enqueued). Idempotent.
func (ts *TenantStore) RemoveApproval(ctx context.Context, executionID string) error {
	if _, err := ts.sp.Approval(executionID); err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.r.w.RemoveApproval(ctx, ts.sp, executionID)
}
