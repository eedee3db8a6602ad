package store

import (
	"context"
	"time"

	"plaita/store/keys"
)

// WakeupDriver is the storage of wake-up records (wakeup.go): subscription and approval records
// with their TTL, the per-type index of uncorrelated waits, the buckets of correlated waits and
// the paths they are indexed by, and the tenant's approval index. TenantStore keeps the rules
// (records, members, what a reader skips or repairs); the Redis driver (redisWakeups) is the
// cluster's, store/sqlite's local mode's, both held to storetest's WakeupContract.
//
// Scores are Unix ms (+Inf: no timeout). A read "at now" lists members scored now or later. An
// index where something else is stored reads as ErrInvalid.
type WakeupDriver interface {
	// PutSubscription writes the record, then indexes the wait (SubscriptionIndexing).
	PutSubscription(ctx context.Context, sp keys.Space, w SubscriptionWrite) error
	// RemoveSubscription deletes the record and the execution's member of the type's index.
	RemoveSubscription(ctx context.Context, sp keys.Space, id, eventType string) error
	// PutApproval writes the record and adds the execution to the approval index (score since).
	PutApproval(ctx context.Context, sp keys.Space, id string, record []byte, since time.Time, ttl time.Duration) error
	// RemoveApproval deletes the record and the index member.
	RemoveApproval(ctx context.Context, sp keys.Space, id string) error

	// Index reads up to limit members of the type's index at now, skipping skip.
	Index(ctx context.Context, sp keys.Space, eventType string, now time.Time, skip, limit int) ([]string, error)
	// PathsAndIndex reads the type's paths at now and the first page of its index, in one round
	// trip.
	PathsAndIndex(ctx context.Context, sp keys.Space, eventType string, now time.Time, limit int) (paths, first []string, err error)
	// Buckets reads every member of each bucket at now.
	Buckets(ctx context.Context, sp keys.Space, eventType string, terms []BucketTerm, now time.Time) ([][]string, error)
	// CountPaths reads the type's paths and counts its index at now, in one round trip; the
	// caller picks the buckets to count from the paths in use.
	CountPaths(ctx context.Context, sp keys.Space, eventType string, now time.Time) (paths []string, uncorrelated int64, err error)
	// CountBuckets counts the members of the buckets at now.
	CountBuckets(ctx context.Context, sp keys.Space, eventType string, terms []BucketTerm, now time.Time) (int64, error)
	// Subscriptions reads the records of ids (a record of another kind reads as Record.Err).
	Subscriptions(ctx context.Context, sp keys.Space, ids []string) ([]Record, error)
	// Drop removes members that no writer makes, or that are stale: from the type's index
	// (term nil, path ""), its paths (path set), or a bucket (term set). It says how many were
	// there.
	Drop(ctx context.Context, sp keys.Space, eventType string, where DropFrom, members ...string) (int64, error)
	// RemoveStale deletes the subscription record while it still holds raw (false: it changed),
	// raw "" skipping that; then removes the index member and reads the record again, in one
	// round trip (again: what it holds now, "" none).
	RemoveStale(ctx context.Context, sp keys.Space, id, eventType, raw string) (removed bool, again string, err error)
	// Reindex puts an uncorrelated wait's member back in the type's index.
	Reindex(ctx context.Context, sp keys.Space, id, eventType string, score float64) error
}

// SubscriptionWrite is a subscription record and how its wait is indexed: in the type's index
// (Term nil) or in the bucket of Term with its path in the type's paths. Members timed out
// before Drop (Unix ms) are dropped on the way; every index lives at least TTL.
type SubscriptionWrite struct {
	ID        string
	EventType string
	Record    []byte
	TTL       time.Duration
	Score     float64
	Drop      int64
	Term      *BucketTerm
	Member    string // the bucket member of a correlated wait
}

// BucketTerm names a bucket: a path (its JSON encoding, as the paths list spells it) and a
// canonical value.
type BucketTerm struct {
	Path  string
	Value string
}

// DropFrom says where Drop removes members.
type DropFrom struct {
	Paths bool        // the type's paths
	Term  *BucketTerm // a bucket
}
