package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/redis/rueidis"
)

// Wake-up records of suspended executions (docs/wakeups.md): what a wait_event or approval
// node leaves for the filter role and the console. Per tenant:
//
//	<prefix>subscription:<id>                  JSON record (Subscription), TTL
//	<prefix>subscription_index:<event_type>    ZSET id → expires_at (Unix ms, +inf = no timeout)
//	<prefix>approval:<id>                      JSON record (Approval), TTL
//	<prefix>approval_index                     ZSET id → since (Unix ms)
//
// A record and its index live in different Cluster slots: they are pipelined, never one
// script. Writes are idempotent (the same record and member again), so a registration that
// failed half way is simply repeated; readers treat both as hints next to the execution state.

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
// ttl, adds the execution to the event type's index with score ExpiresAt (+inf without a
// timeout) and refreshes the index TTL to ttl. One round trip. A bad execution id is
// keys.ErrBadID, a bad event type or a ttl under a second ErrInvalid; a Redis failure is
// ErrRedis.
func (ts *TenantStore) PutSubscription(ctx context.Context, sub Subscription, ttl time.Duration) error {
	key, err := ts.sp.Subscription(sub.ExecutionID)
	if err != nil {
		return err
	}
	idx, err := ts.subscriptionIndex(sub.EventType)
	if err != nil {
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
	score := math.Inf(1)
	if !sub.ExpiresAt.IsZero() {
		score = float64(sub.ExpiresAt.UnixMilli())
	}
	c := ts.r.c
	return ts.doAll(ctx, "write subscription of "+sub.ExecutionID,
		c.B().Set().Key(key).Value(string(b)).Ex(ttl).Build(),
		c.B().Zadd().Key(idx).ScoreMember().ScoreMember(score, sub.ExecutionID).Build(),
		c.B().Expire().Key(idx).Seconds(int64(ttl/time.Second)).Build())
}

// RemoveSubscription deletes the subscription record and the execution's member of the event
// type's index (what a consumer does once it has enqueued the resume). Idempotent.
func (ts *TenantStore) RemoveSubscription(ctx context.Context, executionID, eventType string) error {
	key, err := ts.sp.Subscription(executionID)
	if err != nil {
		return err
	}
	idx, err := ts.subscriptionIndex(eventType)
	if err != nil {
		return err
	}
	c := ts.r.c
	return ts.doAll(ctx, "remove subscription of "+executionID,
		c.B().Del().Key(key).Build(), c.B().Zrem().Key(idx).Member(executionID).Build())
}

// PutApproval writes the approval record (TenantID is the store's tenant) with TTL ttl and
// adds the execution to the tenant's pending-approval index with score Since. One round trip.
// The index has no TTL: it lists what waits for an answer, and answers remove members.
func (ts *TenantStore) PutApproval(ctx context.Context, ap Approval, ttl time.Duration) error {
	key, err := ts.sp.Approval(ap.ExecutionID)
	if err != nil {
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
	c := ts.r.c
	return ts.doAll(ctx, "write approval of "+ap.ExecutionID,
		c.B().Set().Key(key).Value(string(b)).Ex(ttl).Build(),
		c.B().Zadd().Key(ts.sp.ApprovalIndex()).ScoreMember().ScoreMember(float64(ap.Since.UnixMilli()), ap.ExecutionID).Build())
}

// RemoveApproval deletes the approval record and the execution's index member (what the
// console does once the answer is enqueued). Idempotent.
func (ts *TenantStore) RemoveApproval(ctx context.Context, executionID string) error {
	key, err := ts.sp.Approval(executionID)
	if err != nil {
		return err
	}
	c := ts.r.c
	return ts.doAll(ctx, "remove approval of "+executionID,
		c.B().Del().Key(key).Build(), c.B().Zrem().Key(ts.sp.ApprovalIndex()).Member(executionID).Build())
}

// doAll pipelines cmds and fails with ErrRedis on the first error reply.
func (ts *TenantStore) doAll(ctx context.Context, what string, cmds ...rueidis.Completed) error {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	for _, r := range ts.r.c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return transient(ErrRedis, what, err)
		}
	}
	return nil
}
