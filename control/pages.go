package control

import (
	"plaita/store"
)

// Page is one page of a list, the one shape every list of the front ends answers: its items and
// the cursor of the next page ("" on the last one; pass it back to read on).
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// The list limit policy, one for every list: a request without a limit gets DefaultListLimit
// items, and none gets more than MaxListLimit (the console database's lists too: drafts, users,
// bulk jobs and their items). Events, flows and versions are read in one call each, bounded by
// their own maximum.
const (
	DefaultListLimit = store.DefaultListLimit
	MaxListLimit     = store.MaxListLimit
	MaxEventList     = store.MaxEventList
	MaxFlowList      = store.MaxFlowList
)

// checkLimit refuses a page size outside 1 to max: the one refusal of every list.
func checkLimit(limit, max int) error {
	if limit < 1 || limit > max {
		return refuse(Invalid, "invalid_limit", nil, "limit %d: use 1 to %d", limit, max)
	}
	return nil
}

// ListLimit is the policy applied to a requested limit: 0 (none asked) is DefaultListLimit,
// anything above max is max.
func ListLimit(limit, max int) int {
	if limit <= 0 {
		return DefaultListLimit
	}
	return min(limit, max)
}
