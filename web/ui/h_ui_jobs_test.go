package ui

import (
	"net/url"
	"strings"
	"testing"
)

// TestBulkListFilterQuery: a list page offers its bulk form only when a job takes every filter
// of the query it read its rows with, and the form carries that query less the page's place.
func TestBulkListFilterQuery(t *testing.T) {
	filter, refused := listFilterQuery(url.Values{"limit": {"50"}, "cursor": {"c"}, "status": {"suspended"}, "wake_before": {"2026-03-01T12:00:00Z"},
		"index[order_id]": {"ord-1"}})
	if refused != "" || len(filter) != 3 || filter.Get("index[order_id]") != "ord-1" || filter.Has("cursor") || filter.Has("limit") {
		t.Errorf("a filter a job takes: %v %q", filter, refused)
	}
	if _, refused = listFilterQuery(url.Values{"limit": {"50"}, "all_tenants": {"true"}}); !strings.Contains(refused, "all_tenants") {
		t.Errorf("a filter a job cannot take: %q", refused)
	}
	body, p := jobFilter(url.Values{"wake_after": {"2026-03-01T12:00"}, "index[n]": {"1"}, "flow_id": {" shop "}})
	if p != nil || body["wake_after"] != "2026-03-01T12:00:00Z" || body["flow_id"] != "shop" || body["index"].(map[string]string)["n"] != "1" {
		t.Errorf("the filter as POST /api/jobs takes it: %v %v", body, p)
	}
	if _, p = jobFilter(url.Values{"status": {"error", "running"}}); p == nil || !strings.Contains(p.Detail, "status") {
		t.Errorf("a filter given twice: %v", p)
	}
}
