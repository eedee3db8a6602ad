package control

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"plaita/store"
	"plaita/test/redistest"
)

// PlanDispatch: only running workers of the start's queue with a fresh snapshot and a free
// slot qualify; the most free slots wins, then the least loaded, then the smallest id.
func TestPlanDispatch(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	w := func(id, status, q string, active, capacity int, age time.Duration) store.InstanceRecord {
		return store.InstanceRecord{InstanceID: id, Role: "worker", Status: status, Queue: q, ActiveTasks: active, Capacity: capacity, HeartbeatAt: now.Add(-age)}
	}
	for _, tc := range []struct {
		name   string
		live   []store.InstanceRecord
		target string
		why    map[string]string // candidate → a word of its Why
	}{
		{"none", nil, "", nil},
		{"most free slots", []store.InstanceRecord{w("w1", "running", "q", 3, 4, time.Second), w("w2", "running", "q", 1, 4, time.Second)}, "w2",
			map[string]string{"w1": "1 free of 4", "w2": "3 free of 4"}},
		{"least loaded among equals", []store.InstanceRecord{w("w1", "running", "q", 6, 8, 0), w("w2", "running", "q", 0, 2, 0)}, "w2", nil},
		{"smallest id among equals", []store.InstanceRecord{w("w2", "running", "q", 0, 2, 0), w("w1", "running", "q", 0, 2, 0)}, "w1", nil},
		{"ineligible", []store.InstanceRecord{
			w("draining", "draining", "q", 0, 4, 0), w("other", "running", "q2", 0, 4, 0), w("stale", "running", "q", 0, 4, 2*time.Minute),
			w("full", "running", "q", 4, 4, 0), w("nocap", "running", "q", 0, 0, 0),
			{InstanceID: "console", Role: "console", Status: "running", Queue: "q", HeartbeatAt: now},
		}, "", map[string]string{"draining": "draining", "other": "q2", "stale": "stale", "full": "full", "nocap": "no capacity"}},
		{"dev counts as a worker", []store.InstanceRecord{{InstanceID: "dev1", Role: "dev", Status: "running", Queue: "q", Capacity: 1, HeartbeatAt: now}}, "dev1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, reason, cands := PlanDispatch(now, tc.live, "q", 90*time.Second)
			if target != tc.target || reason == "" {
				t.Fatalf("target %q (%s), want %q; %+v", target, reason, tc.target, cands)
			}
			for id, word := range tc.why {
				found := false
				for _, c := range cands {
					if c.InstanceID == id {
						found = true
						if !strings.Contains(c.Why, word) || c.Eligible != strings.Contains(c.Why, "free of") {
							t.Errorf("%s: %+v, want %q", id, c, word)
						}
					}
				}
				if !found {
					t.Errorf("%s is not a candidate: %+v", id, cands)
				}
			}
			for _, c := range cands {
				if c.InstanceID == "console" {
					t.Errorf("a console is a candidate: %+v", c)
				}
			}
		})
	}
}

// A start with capacity dispatch on: applied, it carries the chosen worker; in shadow mode it
// carries none; either way the ledger has the decision with its candidates and the start's
// stream entry.
func TestStartDispatchesByCapacity(t *testing.T) {
	for _, shadow := range []bool{false, true} {
		var ledger *store.DispatchLedger
		lc := redistest.Client(t)
		f := newFixture(t, func(d *Deps) {
			var err error
			if ledger, err = store.NewDispatchLedger(lc, d.Root+":dispatch:ledger", 0); err != nil {
				t.Fatal(err)
			}
			d.Dispatch = DispatchSettings{Ledger: ledger, Stale: time.Minute, Shadow: shadow, Actor: "console-1"}
		})
		ctx := context.Background()
		if _, err := f.p.PublishFlow(ctx, "acme", []byte(askFlow), ""); err != nil {
			t.Fatal(err)
		}
		reg := store.NewRegistry(store.OnRedis(f.c), f.root)
		now := time.Now().UTC()
		for _, rec := range []store.InstanceRecord{
			{InstanceID: "w-busy", Role: "worker", Status: "running", Queue: f.root + ":flow:queue", ActiveTasks: 3, Capacity: 4, HeartbeatAt: now},
			{InstanceID: "w-idle", Role: "worker", Status: "running", Queue: f.root + ":flow:queue", ActiveTasks: 0, Capacity: 4, HeartbeatAt: now},
		} {
			if err := reg.Register(ctx, rec, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		s, err := f.p.Start(ctx, StartRequest{Tenant: "acme", FlowID: "ask"})
		if err != nil || s.Dispatch == nil {
			t.Fatalf("shadow %v: start %+v %v", shadow, s, err)
		}
		ds, err := f.q.Read(ctx, "c", 10, 0)
		if err != nil || len(ds) != 1 {
			t.Fatalf("read: %d %v", len(ds), err)
		}
		want, mode := "w-idle", store.DispatchApplied
		if shadow {
			want, mode = "", store.DispatchShadow
		}
		if got := ds[0].Envelope.TargetInstanceID; got != want {
			t.Fatalf("shadow %v: target_instance_id %q, want %q", shadow, got, want)
		}
		recs, err := ledger.Recent(ctx, 10)
		if err != nil || len(recs) != 1 {
			t.Fatalf("ledger: %+v %v", recs, err)
		}
		r := recs[0]
		if r.Target != "w-idle" || r.Mode != mode || r.Actor != "console-1" || r.ExecutionID != s.ExecutionID || r.MessageID != s.MessageID ||
			r.TenantID != "acme" || len(r.Candidates) != 2 || s.Dispatch.LedgerID != r.ID || s.Dispatch.Considered != 2 || s.Dispatch.Eligible != 2 ||
			s.WorkersAlive != 2 {
			raw, _ := json.Marshal(r)
			t.Fatalf("shadow %v: ledger entry %s; start %+v", shadow, raw, s.Dispatch)
		}
	}
}
