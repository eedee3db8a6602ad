package store

import (
	"context"
	"time"

	"plaita/store/keys"
)

// EventsDriver is the storage of the event bus (events.go has the keys): event records with
// their TTL; each type's index and the tenant's feed, sorted sets by publish time that expire
// as a whole their TTL after their last write; the write-side prune's throttle; the key root's
// tenant list and the reconciler's cursors; the one-shot wake-up markers; and the
// notifications of published events. Events keeps every policy — validation and ids, what a
// duplicate is and what a conflict, whether and what to prune, cursors, decoding, what a claim
// of a marker finds (DecideWake), the errors callers see; a driver only stores, reads and
// carries, one method per atomic operation of the Redis driver (a command, a pipeline or a
// script: one round trip each, as the comments of events_bus.go, events_feed.go and
// events_wake.go count them). RedisEvents is the cluster's; store/sqlite's EventStore is local
// mode's, both held to one contract (storetest.EventsContract).
//
// sp names the tenant (on Redis, also the key root); the tenant list and the cursors are the
// key root's, a tenant's entry named by sp's tenant. Scores are Unix ms. A set is read in the
// order of a Redis ZSET: by score, ties by member in byte order; newest first reverses both. A
// failure is transient (ErrRedis on Redis, the database's class on SQLite); nothing found is a
// result, not an error.
type EventsDriver interface {
	// Put writes an event's record for ttl unless a live record of id is stored (created
	// false: one is, and it is left as it is).
	Put(ctx context.Context, sp keys.Space, id string, record []byte, ttl time.Duration) (created bool, err error)
	// Records reads the records of ids, in order: Found false when there is none (or it
	// expired), Err when what is stored under the id is no record (Redis: another type).
	Records(ctx context.Context, sp keys.Space, ids []string) ([]Record, error)
	// Exist reports, for each id, whether its record is stored.
	Exist(ctx context.Context, sp keys.Space, ids []string) ([]bool, error)
	// Index adds the event to its type's index and to the tenant's feed, each then living at
	// least w.TTL from now (a driver with key TTLs may set them once per throttle period, for
	// TTL + w.Throttle), scores the tenant w.TenantAt in the tenant list and sends w.Note on
	// w.Channel, the notification last (a listener that hears it finds what it announces).
	// With w.Throttle > 0 it also takes the type's prune throttle for that long when the
	// throttle is free: pruneDue says it took it (failing to take it is no error).
	Index(ctx context.Context, sp keys.Space, w EventIndexWrite) (pruneDue bool, err error)
	// Unindex removes each event's member from the feed, and its id from its type's index
	// (when the type can have one).
	Unindex(ctx context.Context, sp keys.Space, members []EventMember) error
	// Drop removes members from one set: a type's index, the feed, or the tenant list.
	Drop(ctx context.Context, sp keys.Space, set EventSet, members ...string) error
	// Page reads up to limit members of a type's index or of the feed after `after`, newest
	// first. It goes on after after.Member's rank while the set holds it, else after the
	// members scored above after.Score and those of that score sorting after after.Member
	// (after.Member "": from the newest).
	Page(ctx context.Context, sp keys.Space, set EventSet, after ScoredMember, limit int) ([]ScoredMember, error)
	// Ranks reads the members of a type's index or of the feed ranked start to stop (both
	// inclusive, from 0), oldest first.
	Ranks(ctx context.Context, sp keys.Space, set EventSet, start, stop int) ([]string, error)
	// FeedRange reads the feed's members scored from `from` to `to` (both inclusive), oldest
	// first: count of them after the first skip.
	FeedRange(ctx context.Context, sp keys.Space, from, to int64, skip, count int) ([]ScoredMember, error)
	// Tenants reads the tenant list's members scored since or later (since nil: all of them),
	// in score order.
	Tenants(ctx context.Context, sp keys.Space, since *int64) ([]string, error)
	// ForgetTenant removes sp's tenant from the tenant list when its score is below before,
	// and says whether it did.
	ForgetTenant(ctx context.Context, sp keys.Space, before int64) (bool, error)
	// Cursor reads the reconciler's cursor of sp's tenant as stored (found false: none).
	Cursor(ctx context.Context, sp keys.Space) (value string, found bool, err error)
	// AdvanceCursor sets the cursor of sp's tenant to at unless it is at at or later (a
	// cursor that does not read as a number is replaced).
	AdvanceCursor(ctx context.Context, sp keys.Space, at int64) error
	// ClaimWake reads marker m and does what DecideWake says of it, in one step: when the
	// claim is the caller's, c.Token becomes the marker's value for c.TTL. It returns the
	// state found and the value read ("" when there was none).
	ClaimWake(ctx context.Context, m WakeMarker, c WakeClaim) (state WakeState, previous string, err error)
	// SetWake replaces the value of marker m with value (living ttl; "" deletes the marker)
	// while the marker holds expect, and says whether it did.
	SetWake(ctx context.Context, m WakeMarker, expect, value string, ttl time.Duration) (bool, error)
	// Listen hears the notifications sent on channel and calls fn with each payload until ctx
	// ends (nil) or the subscription fails (an error). onSubscribed (when not nil) runs once
	// the subscription is live, and again whenever notifications may have been missed since
	// (a subscription made again after a lost connection, a listener that fell behind): what
	// was sent meanwhile reached nobody.
	Listen(ctx context.Context, channel string, onSubscribed func(), fn func(payload string)) error
}

// EventSetKind says which of the bus's sorted sets an EventSet is.
type EventSetKind uint8

const (
	// EventTypeIndex is a type's index: event ids by publish time.
	EventTypeIndex EventSetKind = iota
	// EventFeed is the tenant's feed: "<type> <id>" by publish time.
	EventFeed
	// EventTenants is the key root's tenant list: tenants by their last publish.
	EventTenants
)

// EventSet names one sorted set of the bus: Type is the event type of an EventTypeIndex.
type EventSet struct {
	Kind EventSetKind
	Type string
}

// ScoredMember is a member of a sorted set with its score.
type ScoredMember struct {
	Member string
	Score  float64
}

// EventMember is an event as the indexes hold it: ID in its type's index, Feed in the feed.
type EventMember struct {
	Type, ID string
	Feed     string // "<type> <id>"
}

// EventIndexWrite is what Index writes for one published event.
type EventIndexWrite struct {
	EventMember
	Score    int64         // the publish time, Unix ms
	TTL      time.Duration // how long the index and the feed live after this write
	TenantAt int64         // the tenant's score in the tenant list, Unix ms
	Channel  string        // the notification channel of the key root
	Note     []byte        // the notification
	Throttle time.Duration // > 0: take the type's prune throttle for this long
}

// WakeMarker names one wake-up marker: delivering event EventID to suspension Suspension of
// execution ExecutionID of sp's tenant (checked: sp.EventWake takes them).
type WakeMarker struct {
	Space                            keys.Space
	ExecutionID, Suspension, EventID string
}

// WakeClaim is one claim of a marker: the caller's pending value, the time of the claim (Unix
// ms), the grace of a pending claim, and the marker's TTL from this write.
type WakeClaim struct {
	Token string
	Now   int64
	Grace time.Duration
	TTL   time.Duration
}
