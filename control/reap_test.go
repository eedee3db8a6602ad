package control

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store/keys"
)

// A reap ends in error only the executions nothing holds or will resume: a live lease, a task
// in the stream, a recent update or another status keeps an execution as it is; a dry run
// writes nothing; another tenant is left alone unless named.
func TestReapGuards(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().UTC()
	old := now.Add(-2 * time.Hour)
	running := func(tenant, id string, last time.Time, status state.Status) {
		f.save(&state.Execution{ExecutionID: id, TenantID: tenant, FlowID: "ask", FlowVersion: "1", Status: status, CurrentNode: "ask",
			Context: map[string]any{}, StartTime: old, LastUpdate: last})
	}
	running("default", "ex_zombie", old, state.Running)
	running("default", "ex_leased", old, state.Running)
	running("default", "ex_queued", old, state.Running)
	running("default", "ex_recent", now, state.Running)
	running("default", "ex_waiting", old, state.Suspended)
	running("acme", "ex_other", old, state.Running)
	lease, _ := keys.MustFor(f.root, "").Mechanism(keys.FamLease, "ex_leased")
	if err := f.c.Do(ctx, f.c.B().Set().Key(lease).Value("worker-1").Ex(time.Minute).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.Enqueue(ctx, queue.Redis(f.c), f.q.Stream(), queue.Envelope{Kind: queue.KindResume, ResumeType: engine.ResumeRetry, FlowID: "ask",
		FlowVersion: "1", ExecutionID: "ex_queued", ResumeData: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	ts, _ := f.store.Tenant("")
	before, err := ts.Snapshot(ctx, "ex_zombie")
	if err != nil {
		t.Fatal(err)
	}

	outcomes := func(rep ReapReport) map[string]string {
		out := map[string]string{}
		for _, it := range append(rep.Reaped, rep.Skipped...) {
			out[it.ExecutionID] = it.Outcome
		}
		return out
	}
	dry, err := f.p.Reap(ctx, ReapRequest{Idle: time.Hour, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ex_zombie": "would_reap", "ex_leased": "lease_held", "ex_queued": "task_queued"}
	if got := outcomes(dry); len(got) != len(want) || got["ex_zombie"] != want["ex_zombie"] || got["ex_leased"] != want["ex_leased"] || got["ex_queued"] != want["ex_queued"] {
		t.Fatalf("dry run %v, want %v", got, want)
	}
	if after, err := ts.Snapshot(ctx, "ex_zombie"); err != nil || string(after.Raw) != string(before.Raw) {
		t.Fatalf("the dry run wrote: %v", err)
	}

	rep, err := f.p.Reap(ctx, ReapRequest{Idle: time.Hour})
	if err != nil || outcomes(rep)["ex_zombie"] != "reaped" || len(rep.Reaped) != 1 {
		t.Fatalf("reap: %+v %v", rep, err)
	}
	st, err := ts.Load(ctx, "ex_zombie")
	if err != nil || st.Status != state.Error || st.Error == nil || st.Error.Type != engine.ErrTypeOrphaned || st.Error.Node != "ask" ||
		st.Timeline[len(st.Timeline)-1].Event != "error" {
		t.Fatalf("the reaped state: %+v %v", st, err)
	}
	for _, id := range []string{"ex_leased", "ex_queued", "ex_recent"} {
		if st, err := ts.Load(ctx, id); err != nil || st.Status != state.Running {
			t.Fatalf("%s after the reap: %+v %v", id, st, err)
		}
	}
	// A second pass finds nothing more; the other tenant only when named.
	if rep, err := f.p.Reap(ctx, ReapRequest{Idle: time.Hour}); err != nil || len(rep.Reaped) != 0 {
		t.Fatalf("second pass: %+v %v", rep, err)
	}
	if rep, err := f.p.Reap(ctx, ReapRequest{Idle: time.Hour, Tenants: []string{"acme"}}); err != nil || len(rep.Reaped) != 1 || rep.Reaped[0].ExecutionID != "ex_other" {
		t.Fatalf("acme: %+v %v", rep, err)
	}
	_, err = f.p.Reap(ctx, ReapRequest{Tenants: []string{"Bad!"}})
	refusal(t, "a bad tenant", err, Invalid, "invalid_tenant")
}
