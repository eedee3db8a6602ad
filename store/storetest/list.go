package storetest

import (
	"strconv"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
)

// ListBackend is one ListDriver under the contract.
type ListBackend struct {
	Name string
	// Open makes a new, empty storage for one case (cases run in parallel).
	Open func(t *testing.T) *store.Redis
}

// ListContract runs the listings' cases against b: what the console's and the CLI's lists rely
// on — every execution once, newest first, page after page (ties on a start time too), a
// start-time range, a list by indexed value, a filter; and the pending approvals, each only
// while its execution still waits there.
func ListContract(t *testing.T, b ListBackend) {
	runCases(t, b.Name, func(t *testing.T) *store.Redis { return b.Open(t) }, []namedCase[*store.Redis]{
		{"PagesNewestFirst", pagesNewestFirst},
		{"RangeIndexAndFilter", rangeIndexAndFilter},
		{"PendingApprovals", pendingApprovals},
	})
}

var listT0 = time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)

// saveAt saves execution id started at start (with indexed values).
func saveAt(t *testing.T, ts *store.TenantStore, id string, start time.Time, status state.Status, index map[string]string) *state.Execution {
	t.Helper()
	st := NewState(id, status)
	st.TenantID = ts.Tenant()
	st.StartTime, st.Index = start, index
	must(t, ts.Save(eventsCtx(t), st))
	return st
}

func pagesNewestFirst(t *testing.T, r *store.Redis) {
	ts := tenantOf(t, r)
	var want []string
	for i := range 23 {
		// Three executions share each start time: ties are ordered by id, descending.
		start := listT0.Add(time.Duration(i/3) * time.Second)
		id := "ex_" + strconv.Itoa(100+i)
		saveAt(t, ts, id, start, state.Completed, nil)
		want = append([]string{id}, want...)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("the listing never ends")
		}
		p, err := ts.List(eventsCtx(t), store.ListRequest{Cursor: cursor, Limit: 5})
		must(t, err)
		for _, s := range p.Items {
			got = append(got, s.ExecutionID)
		}
		if p.Skipped != 0 {
			t.Fatalf("skipped %d", p.Skipped)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d: %v, want %v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("listed %v, want %v", got, want)
		}
	}
	// A page after a deleted cursor member goes on where it was.
	first, err := ts.List(eventsCtx(t), store.ListRequest{Limit: 4})
	must(t, err)
	must(t, ts.Delete(eventsCtx(t), first.Items[3].ExecutionID))
	next, err := ts.List(eventsCtx(t), store.ListRequest{Cursor: first.NextCursor, Limit: 2})
	must(t, err)
	if len(next.Items) != 2 || next.Items[0].ExecutionID != want[4] || next.Items[1].ExecutionID != want[5] {
		t.Fatalf("after a deleted cursor member: %+v, want %s, %s", next.Items, want[4], want[5])
	}
}

func rangeIndexAndFilter(t *testing.T, r *store.Redis) {
	ts := tenantOf(t, r)
	for i := range 10 {
		idx := map[string]string{"order": `"A` + strconv.Itoa(i%2) + `"`}
		status := state.Completed
		if i%3 == 0 {
			status = state.Error
		}
		saveAt(t, ts, "ex_"+strconv.Itoa(i), listT0.Add(time.Duration(i)*time.Minute), status, idx)
	}
	ids := func(p store.Page) []string {
		var out []string
		for _, s := range p.Items {
			out = append(out, s.ExecutionID)
		}
		return out
	}
	p, err := ts.List(eventsCtx(t), store.ListRequest{StartedAfter: listT0.Add(3 * time.Minute), StartedBefore: listT0.Add(6 * time.Minute)})
	must(t, err)
	if got := ids(p); len(got) != 3 || got[0] != "ex_5" || got[2] != "ex_3" {
		t.Fatalf("range: %v", got)
	}
	p, err = ts.List(eventsCtx(t), store.ListRequest{Index: []store.IndexTerm{{Field: "order", Value: `"A1"`}}})
	must(t, err)
	if got := ids(p); len(got) != 5 || got[0] != "ex_9" || got[4] != "ex_1" {
		t.Fatalf("by indexed value: %v", got)
	}
	p, err = ts.List(eventsCtx(t), store.ListRequest{Index: []store.IndexTerm{{Field: "order", Value: `"none"`}}})
	must(t, err)
	if len(p.Items) != 0 || p.NextCursor != "" {
		t.Fatalf("by a value nothing has: %+v", p)
	}
	p, err = ts.List(eventsCtx(t), store.ListRequest{Match: func(st *state.Execution) bool { return st.Status == state.Error }, States: true})
	must(t, err)
	if got := ids(p); len(got) != 4 || got[0] != "ex_9" || p.Items[0].State == nil {
		t.Fatalf("filtered: %v", got)
	}
	if _, err := ts.List(eventsCtx(t), store.ListRequest{Cursor: "not a cursor"}); err == nil {
		t.Fatal("a malformed cursor was accepted")
	}
}

func pendingApprovals(t *testing.T, r *store.Redis) {
	ts := tenantOf(t, r)
	wait := func(id string, since time.Time) {
		t.Helper()
		st := NewState(id, state.Suspended)
		st.StartTime = since
		st.Suspend = &state.Suspend{Kind: state.SuspendApproval, Node: "ok", Since: since}
		must(t, ts.Save(eventsCtx(t), st))
		must(t, ts.PutApproval(eventsCtx(t), store.Approval{ExecutionID: id, FlowID: "f", FlowVersion: "1", Node: "ok", Since: since}, time.Hour))
	}
	for i := range 5 {
		wait("ex_ap"+strconv.Itoa(i), listT0.Add(time.Duration(i)*time.Minute))
	}
	// ex_ap2 was answered elsewhere: its state moved on, its index member is left behind.
	saveAt(t, ts, "ex_ap2", listT0.Add(2*time.Minute), state.Completed, nil)
	p, err := ts.Approvals(eventsCtx(t), "", 2)
	must(t, err)
	var got []string
	got = append(got, itemsOf(p)...)
	for p.NextCursor != "" {
		if p, err = ts.Approvals(eventsCtx(t), p.NextCursor, 2); err != nil {
			t.Fatal(err)
		}
		got = append(got, itemsOf(p)...)
	}
	want := []string{"ex_ap4", "ex_ap3", "ex_ap1", "ex_ap0"}
	if len(got) != len(want) {
		t.Fatalf("pending approvals %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pending approvals %v, want %v", got, want)
		}
	}
	// The stale member was pruned on the way: a second listing does not meet it.
	again, err := ts.Approvals(eventsCtx(t), "", 10)
	must(t, err)
	if len(again.Items) != 4 || again.Pruned != 0 {
		t.Fatalf("second listing: %d items, %d pruned", len(again.Items), again.Pruned)
	}
}

func itemsOf(p store.ApprovalPage) []string {
	var out []string
	for _, it := range p.Items {
		out = append(out, it.ExecutionID)
	}
	return out
}
