package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"plaita/store"
)

// The ledger keeps each decision with its candidates, newest first, and stays bounded.
func TestDispatchLedger(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	if _, err := store.NewDispatchLedger(f.c, " ", 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a blank key: %v", err)
	}
	l, err := store.NewDispatchLedger(f.c, f.root+":dispatch:ledger", 100)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i := range 300 {
		rec := store.DispatchRecord{At: at, Actor: "host-a", TenantID: "acme", ExecutionID: fmt.Sprint("ex_", i), FlowID: "f", FlowVersion: "1",
			Queue: "q", MessageID: "1-1", Mode: store.DispatchApplied, Target: "w1", Reason: "most free slots",
			Candidates: []store.DispatchCandidate{{InstanceID: "w1", Status: "running", ActiveTasks: 1, Capacity: 4, Eligible: true, Why: "3 free of 4"},
				{InstanceID: "w2", Status: "draining", Why: "draining"}}}
		if _, err := l.Record(c, rec); err != nil {
			t.Fatal(err)
		}
	}
	n, err := f.do(f.c.B().Xlen().Key(l.Key()).Build()).AsInt64()
	f.must(err)
	if n < 100 || n > 200 {
		t.Fatalf("the ledger holds %d entries, want about 100", n)
	}
	recs, err := l.Recent(c, 2)
	if err != nil || len(recs) != 2 {
		t.Fatalf("recent: %+v %v", recs, err)
	}
	r := recs[0]
	if r.ExecutionID != "ex_299" || r.ID == "" || !r.At.Equal(at) || r.Actor != "host-a" || r.Target != "w1" || r.Mode != store.DispatchApplied ||
		len(r.Candidates) != 2 || !r.Candidates[0].Eligible || r.Candidates[1].Why != "draining" {
		t.Fatalf("newest: %+v", r)
	}
}
