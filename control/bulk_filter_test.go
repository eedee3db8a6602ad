package control

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/sqlite"
)

// A bulk selection is the executions list's selection: for every filter the list has, the
// items a job selects are the executions the list pages through, no more and no fewer.

func TestBulkSelectionIsTheList(t *testing.T) {
	bf := newBulkFixture(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	due := func(m int) *time.Time { d := t0.Add(2*time.Hour + time.Duration(m)*time.Minute); return &d }
	for i := range 40 {
		st := &state.Execution{ExecutionID: fmt.Sprintf("ex_%02d", i), TenantID: "acme", FlowID: []string{"ask", "pay"}[i%2], FlowVersion: "1",
			FlowHash: bf.flow.Hash, FlowHashAlgo: bf.flow.HashAlgo, CurrentNode: "ask", Context: map[string]any{},
			StartTime: t0.Add(time.Duration(i) * time.Minute), LastUpdate: t0.Add(time.Duration(i) * time.Minute),
			Status: []state.Status{state.Running, state.Suspended, state.Suspended, state.Completed, state.Error}[i%5]}
		if st.Status == state.Suspended {
			st.Suspend = &state.Suspend{Kind: state.SuspendDelay, Node: "ask", Since: st.StartTime, Due: due(i)}
			if i%10 == 2 {
				st.Suspend = &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: st.StartTime} // no due time
			}
		}
		if i%3 != 0 {
			order, _ := state.CorrelationValue(fmt.Sprintf("ord-%d", i%3))
			st.Index = map[string]string{"order_id": order}
		}
		if i%4 == 0 {
			n, _ := state.CorrelationValue(float64(i % 8))
			st.Index = mapWith(st.Index, "n", n)
		}
		bf.save(st)
	}
	bf.exec("other", "ex_other", state.Suspended, t0) // another tenant's: never selected
	at := func(m int) *time.Time { v := t0.Add(time.Duration(m) * time.Minute); return &v }
	for _, f := range []BulkFilter{
		{},
		{Status: state.Suspended},
		{FlowID: "pay"},
		{StartedAfter: at(10), StartedBefore: at(25)},
		{WakeBefore: due(21)},
		{WakeAfter: due(12)},
		{WakeAfter: due(6), WakeBefore: due(30), FlowID: "ask"},
		{WakeBefore: due(100), Status: state.Running}, // a due time is a suspended one's: none
		{Index: map[string]string{"order_id": "ord-1"}},
		{Index: map[string]string{"order_id": `"ord-2"`, "n": "0"}},
		{Index: map[string]string{"n": "4"}, StartedAfter: at(5)},
		{Index: map[string]string{"order_id": "ord-2"}, WakeBefore: due(35), Status: state.Suspended, StartedBefore: at(33)},
		{Index: map[string]string{"order_id": "ord-9"}},
	} {
		sel, err := bf.p.BulkSelect(ctx, BulkRequest{Tenant: "acme", Action: BulkCancel, Filter: f})
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		// The list as GET /api/executions asks for it, a page of 3 at a time.
		req := ListRequest{Limit: 3, Status: f.Status, FlowID: f.FlowID}
		for _, b := range []struct {
			from *time.Time
			to   *time.Time
		}{{f.StartedAfter, &req.StartedAfter}, {f.StartedBefore, &req.StartedBefore}, {f.WakeAfter, &req.WakeAfter}, {f.WakeBefore, &req.WakeBefore}} {
			if b.from != nil {
				*b.to = *b.from
			}
		}
		for _, k := range slices.Sorted(maps.Keys(f.Index)) {
			req.Index = append(req.Index, IndexFilter{Field: k, Value: f.Index[k]})
		}
		var listed []string
		for {
			page, err := bf.p.List(ctx, "acme", req)
			if err != nil {
				t.Fatalf("list %+v: %v", req, err)
			}
			for _, s := range page.Items {
				listed = append(listed, s.ExecutionID)
			}
			if req.Cursor = page.NextCursor; req.Cursor == "" {
				break
			}
		}
		if !slices.Equal(sel.Items, listed) || sel.Count != len(listed) || sel.Truncated {
			t.Errorf("filter %+v: the job selects %v, the list shows %v", f, sel.Items, listed)
		}
	}

	// What the list refuses, the selection refuses: nothing is selected without it.
	for _, f := range []BulkFilter{
		{StartedAfter: at(10), StartedBefore: at(10)},
		{Index: map[string]string{"9lives": "x"}},
		{Index: map[string]string{"a": "1", "b": "1", "c": "1", "d": "1", "e": "1"}},
		{Index: map[string]string{"order_id": "null"}},
	} {
		_, err := bf.p.BulkSelect(ctx, BulkRequest{Tenant: "acme", Action: BulkCancel, Filter: f})
		refusal(t, fmt.Sprintf("%+v", f), err, Invalid, "invalid_filter")
	}
	// A replay selects dead letters: a filter of executions is refused by name.
	for field, f := range map[string]BulkFilter{"wake_before": {WakeBefore: due(1)}, "wake_after": {WakeAfter: due(1)},
		"index": {Index: map[string]string{"order_id": "ord-1"}}, "status": {Status: state.Error}} {
		_, err := bf.p.BulkSelect(ctx, BulkRequest{Tenant: "acme", Action: BulkReplay, Filter: f})
		if r := refusal(t, field, err, Invalid, "invalid_filter"); r.Fields["field"] != field {
			t.Errorf("replay by %s: refused naming %v: %s", field, r.Fields, r.Message)
		}
	}
}

// A job stored before the filter knew due times and indexed fields is read and run as it was.
func TestBulkJobOfAnEarlierFilter(t *testing.T) {
	bf := newBulkFixture(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Add(-time.Hour)
	bf.exec("acme", "ex_a", state.Running, t0)
	bf.exec("acme", "ex_b", state.Running, t0.Add(time.Second))
	j, err := bf.db.CreateBulkJob(ctx, sqlite.NewJob{Tenant: "acme", Kind: BulkKind(BulkDelete), Filter: []byte(`{"status":"running","force":true}`),
		CreatedBy: "ann"}, []string{"ex_b", "ex_a"}, false)
	if err != nil {
		t.Fatal(err)
	}
	b := bf.bulk("r1", 10)
	done := bf.runAll(b, "acme", j.ID)
	if done.Succeeded != 2 || done.Filter.Status != state.Running || !done.Filter.Force || done.Filter.WakeBefore != nil || done.Filter.Index != nil {
		t.Fatalf("the earlier job: %+v", done)
	}
}

func mapWith(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}
