package store

import (
	"context"
	"time"

	"plaita/store/keys"
)

// FlowsDriver is the storage of published flows: each version's definition, each flow's
// versions with their publication times, and each tenant's list of flows by their last
// publication. Flows keeps every policy — names and reserved keys, a version published once
// with one definition, which time a republication keeps, cursors, the errors callers see; a
// driver only stores and reads, one method per round trip of the Redis driver. Two implement
// it: RedisFlowsDriver (the keys of flows.go, the cluster) and the console's database
// (store/sqlite's FlowStore, local mode), both held to one contract (storetest.FlowsContract).
//
// sp names the tenant (and, on Redis, the key root). Times are unix milliseconds. Versions and
// flows are ordered newest first, ties (the same millisecond) by the greater name first, in
// byte order — the order of a Redis ZSET read in reverse. A failure is transient (ErrRedis on
// Redis, the database's class on SQLite); nothing found is a result, not an error.
type FlowsDriver interface {
	// Definition reads the definition stored under (flowID, version) (found false: none).
	Definition(ctx context.Context, sp keys.Space, flowID, version string) (def []byte, found bool, err error)
	// Put stores def under (flowID, version) unless a definition is stored there (created
	// false: one is, and it is left as it is). It registers nothing (Register does).
	Put(ctx context.Context, sp keys.Space, flowID, version string, def []byte) (created bool, err error)
	// Register records version among the flow's versions and the flow in the tenant's list,
	// both at at: onlyMissing adds the entries that are missing and keeps the times of those
	// that exist; otherwise both times become at.
	Register(ctx context.Context, sp keys.Space, flowID, version string, at time.Time, onlyMissing bool) error
	// Latest is the flow's newest version (found false: it has none).
	Latest(ctx context.Context, sp keys.Space, flowID string) (version string, found bool, err error)
	// Versions reads up to n of the flow's versions, newest first.
	Versions(ctx context.Context, sp keys.Space, flowID string, n int) ([]FlowEntry, error)
	// FlowList reads up to n of the tenant's flows, most recently published first: from the
	// top of the list when atMost is nil, else from the flows last published at or before
	// *atMost.
	FlowList(ctx context.Context, sp keys.Space, atMost *float64, n int) ([]FlowEntry, error)
	// Heads reads each flow's newest version and number of versions, in one round trip.
	Heads(ctx context.Context, sp keys.Space, flowIDs []string) ([]FlowHead, error)
	// Restore writes each item back unless its definition is stored, in one round trip: the
	// definition (Put's rule: a stored one is not compared), the version with its time unless
	// the flow has it (Register's onlyMissing), and the flow in the list at that time unless
	// it is there with a later one. Outcomes are per item, in order: Written when the
	// definition was missing; Err when the item could not be written.
	Restore(ctx context.Context, items []FlowWrite) []RestoreOutcome
}

// FlowEntry is a flow of a tenant's list or a version of a flow, with the time of its (last)
// publication in unix milliseconds — a ZSET score on Redis, so a fraction written there by
// hand is kept, and a cursor made from it stays exact.
type FlowEntry struct {
	Name  string
	Score float64
}

// FlowHead is one flow's newest version ("" when it has none) and its number of versions.
type FlowHead struct {
	Latest   string
	Versions int64
}

// FlowWrite is one version for Restore, its keys checked.
type FlowWrite struct {
	Space           keys.Space
	FlowID, Version string
	Definition      []byte
	PublishedAt     time.Time
}
