package ui

import (
	"net/url"
	"testing"
)

// The list's order selects nothing: a bulk job over a list sorted by wake time acts on what the
// same filter matches, and is offered.
func TestListOrderIsNoBulkFilter(t *testing.T) {
	b, refused := listFilterQuery(url.Values{"status": {"suspended"}, "sort": {"wake"}, "limit": {"50"}})
	if refused != "" || b.Has("sort") || b.Get("status") != "suspended" {
		t.Errorf("the order refused a bulk job, or went into its filter: %q %v", refused, b)
	}
}
