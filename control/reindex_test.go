package control

import (
	"context"
	"slices"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/keys"
)

// A reindex gives every state its member back and removes the members without a state, for
// the tenant named only.
func TestReindexRebuildsTheIndexFromTheStates(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, id := range []string{"ex_1", "ex_2", "ex_3"} {
		f.save(&state.Execution{ExecutionID: id, TenantID: "acme", FlowID: "f", FlowVersion: "1", Status: state.Completed,
			Context: map[string]any{}, StartTime: now, LastUpdate: now})
	}
	f.save(&state.Execution{ExecutionID: "ex_default", TenantID: "default", FlowID: "f", FlowVersion: "1", Status: state.Completed,
		Context: map[string]any{}, StartTime: now, LastUpdate: now})
	idx := keys.MustFor(f.root, "acme").Index()
	// The index lost a member and gained two no state backs.
	if err := f.c.Do(ctx, f.c.B().Zrem().Key(idx).Member("ex_2").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Do(ctx, f.c.B().Zadd().Key(idx).ScoreMember().ScoreMember(1, "ex_gone").ScoreMember(2, "bad:member").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var phases []string
	rep, err := f.p.Reindex(ctx, []string{"acme"}, func(p ReindexProgress) {
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
	})
	if err != nil || len(rep.Tenants) != 1 || rep.Tenants[0].Added != 3 || rep.Tenants[0].Removed != 2 {
		t.Fatalf("reindex: %+v %v", rep, err)
	}
	if !slices.Equal(phases, []string{"backfill", "prune"}) {
		t.Fatalf("progress phases %v", phases)
	}
	members, err := f.c.Do(ctx, f.c.B().Zrange().Key(idx).Min("0").Max("-1").Build()).AsStrSlice()
	if slices.Sort(members); err != nil || !slices.Equal(members, []string{"ex_1", "ex_2", "ex_3"}) {
		t.Fatalf("the index: %v %v", members, err)
	}
	page, err := f.p.List(ctx, "acme", ListRequest{})
	if err != nil || len(page.Items) != 3 || page.Degraded {
		t.Fatalf("the listing after the reindex: %+v %v", page, err)
	}
	_, err = f.p.Reindex(ctx, []string{"Bad!"}, nil)
	refusal(t, "a bad tenant", err, Invalid, "invalid_tenant")
}
