package ui

import (
	"net/url"
	"testing"
)

// The list's order and its count select nothing: a bulk job over a list sorted by wake time, or
// counted, acts on what the same filter matches, and is offered.
func TestListOrderIsNoBulkFilter(t *testing.T) {
	b, refused := listFilterQuery(url.Values{"status": {"suspended"}, "sort": {"wake"}, "count": {"true"}, "limit": {"50"}})
	if refused != "" || b.Has("sort") || b.Has("count") || b.Get("status") != "suspended" {
		t.Errorf("the order refused a bulk job, or went into its filter: %q %v", refused, b)
	}
}
