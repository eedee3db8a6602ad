package control

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/sqlite"
)

// A console database holding executions a console ran in local mode, served by a console on
// Redis (the real SQLite file and the real Redis): they are listed beside Redis's, newest
// first, pages neither skip nor repeat one whatever the page size and the filter, they are
// shown marked local, and every write on them is refused by name.

// localRunsFix is a cluster plane over Redis with a console database's local executions.
type localRunsFix struct {
	*fixture
	db   *sqlite.DB
	runs *sqlite.Executions
}

func newLocalRunsFix(t *testing.T) *localRunsFix {
	t.Helper()
	db, err := sqlite.Open(context.Background(), "sqlite:///"+filepath.Join(t.TempDir(), "console.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := newFixture(t, func(d *Deps) { d.LocalRuns = db.Executions() })
	return &localRunsFix{fixture: f, db: db, runs: db.Executions()}
}

// listAll pages through the listing with limit and returns the ids in order.
func listAll(t *testing.T, p *Plane, tenant string, req ListRequest) []store.Summary {
	t.Helper()
	var out []store.Summary
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("no end to the listing after %d pages", pages)
		}
		page, err := p.List(context.Background(), tenant, req)
		if err != nil {
			t.Fatalf("list %+v: %v", req, err)
		}
		if len(page.Items) > max(req.Limit, 1) {
			t.Fatalf("a page of %d items with limit %d", len(page.Items), req.Limit)
		}
		out = append(out, page.Items...)
		if page.NextCursor == "" {
			return out
		}
		req.Cursor = page.NextCursor
	}
}

func ids(items []store.Summary) []string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = s.ExecutionID
	}
	return out
}

// wantOrder fails unless items are exactly want's executions, each once, newest first.
func wantOrder(t *testing.T, what string, items []store.Summary, want []*state.Execution) {
	t.Helper()
	exp := slices.Clone(want)
	slices.SortFunc(exp, func(a, b *state.Execution) int {
		ka, kb := listKey{a.StartTime.UnixMilli(), a.ExecutionID}, listKey{b.StartTime.UnixMilli(), b.ExecutionID}
		switch {
		case ka.before(kb):
			return -1
		case kb.before(ka):
			return 1
		}
		return 0
	})
	wantIDs := make([]string, len(exp))
	for i, st := range exp {
		wantIDs[i] = st.ExecutionID
	}
	if got := ids(items); !slices.Equal(got, wantIDs) {
		t.Fatalf("%s:\n got  %v\n want %v", what, got, wantIDs)
	}
}

func TestClusterPlaneListsAndShowsLocalExecutions(t *testing.T) {
	f := newLocalRunsFix(t)
	ctx := context.Background()
	pub, err := f.p.PublishFlow(ctx, "", []byte(askFlow), "")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	mk := func(id string, at time.Time, status state.Status, flow string) *state.Execution {
		st := &state.Execution{ExecutionID: id, TenantID: "default", FlowID: flow, FlowVersion: "1", FlowHash: pub.Flow.Hash,
			FlowHashAlgo: pub.Flow.HashAlgo, Status: status, CurrentNode: "ask", Context: map[string]any{}, StartTime: at, LastUpdate: at}
		if status == state.Suspended {
			st.Suspend = &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: at}
		}
		return st
	}
	statuses := []state.Status{state.Completed, state.Suspended, state.Error}
	var redisRuns, localRuns, all []*state.Execution
	for i := range 30 {
		at := t0.Add(time.Duration(i) * time.Second)
		flow := []string{"ask", "other"}[i%2]
		r := mk(fmt.Sprintf("ex_r%02d", i), at.Add(300*time.Millisecond), statuses[i%3], flow)
		f.save(r)
		redisRuns = append(redisRuns, r)
		if i%3 == 0 {
			continue // stretches of Redis executions with no local one between them
		}
		// Local executions: between Redis's, and some at the very same millisecond as one.
		lat := at
		if i%5 == 0 {
			lat = r.StartTime
		}
		l := mk(fmt.Sprintf("ex_l%02d", i), lat, statuses[(i+1)%3], flow)
		if err := f.runs.Save(ctx, l); err != nil {
			t.Fatal(err)
		}
		localRuns = append(localRuns, l)
	}
	// Another tenant's local execution is not listed or shown in the default tenant.
	if err := f.runs.Save(ctx, &state.Execution{ExecutionID: "ex_acme", TenantID: "acme", FlowID: "ask", FlowVersion: "1",
		Status: state.Completed, StartTime: t0, LastUpdate: t0, Context: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	// A rare flow: Redis pages of no match come back short, with a cursor, before its one.
	rare := mk("ex_rrare", t0.Add(-time.Hour), state.Completed, "rare")
	f.save(rare)
	redisRuns = append(redisRuns, rare)
	for _, at := range []time.Duration{25 * time.Second, 3 * time.Second} {
		l := mk("ex_lrare"+fmt.Sprint(int(at.Seconds())), t0.Add(at+100*time.Millisecond), state.Suspended, "rare")
		if err := f.runs.Save(ctx, l); err != nil {
			t.Fatal(err)
		}
		localRuns = append(localRuns, l)
	}
	all = append(append(all, redisRuns...), localRuns...)

	for _, limit := range []int{1, 3, 7, 50} {
		items := listAll(t, f.p, "", ListRequest{Limit: limit})
		wantOrder(t, fmt.Sprintf("every execution, %d a page", limit), items, all)
		for _, it := range items {
			if local := it.ExecutionID[3] == 'l'; local != (it.Runtime == RuntimeLocal) {
				t.Fatalf("%s marked runtime %q", it.ExecutionID, it.Runtime)
			}
		}
	}
	keep := func(ok func(*state.Execution) bool) []*state.Execution {
		var out []*state.Execution
		for _, st := range all {
			if ok(st) {
				out = append(out, st)
			}
		}
		return out
	}
	after, before := t0.Add(5*time.Second), t0.Add(21*time.Second+300*time.Millisecond)
	for _, c := range []struct {
		what string
		req  ListRequest
		ok   func(*state.Execution) bool
	}{
		{"suspended", ListRequest{Status: state.Suspended}, func(st *state.Execution) bool { return st.Status == state.Suspended }},
		{"flow other", ListRequest{FlowID: "other"}, func(st *state.Execution) bool { return st.FlowID == "other" }},
		{"started in a range", ListRequest{StartedAfter: after, StartedBefore: before}, func(st *state.Execution) bool {
			return !st.StartTime.Before(after) && st.StartTime.Before(before)
		}},
		{"errors of flow ask", ListRequest{Status: state.Error, FlowID: "ask"}, func(st *state.Execution) bool {
			return st.Status == state.Error && st.FlowID == "ask"
		}},
		{"a rare flow", ListRequest{FlowID: "rare"}, func(st *state.Execution) bool { return st.FlowID == "rare" }},
	} {
		for _, limit := range []int{1, 4} {
			c.req.Limit = limit
			wantOrder(t, fmt.Sprintf("%s, %d a page", c.what, limit), listAll(t, f.p, "", c.req), keep(c.ok))
		}
	}
	if _, err := f.p.List(ctx, "", ListRequest{Cursor: "m1.not-base64!"}); AsRefusal(err) == nil || AsRefusal(err).Code != "invalid_cursor" {
		t.Fatalf("a forged cursor: %v", err)
	}
	// A Redis cursor from before goes on over Redis alone.
	first, err := f.p.list(ctx, "", ListRequest{Limit: 5}, false)
	if err != nil {
		t.Fatal(err)
	}
	rest := listAll(t, f.p, "", ListRequest{Limit: 5, Cursor: first.NextCursor})
	wantOrder(t, "a Redis cursor", append(first.Items, rest...), redisRuns)

	// Show: a local one is marked and read-only; a Redis one is not.
	local := localRuns[0]
	shown, err := f.p.Show(ctx, "", local.ExecutionID)
	if err != nil || shown.Execution == nil || shown.Execution.ExecutionID != local.ExecutionID || shown.Runtime != RuntimeLocal || shown.ReadOnly == "" {
		t.Fatalf("show a local execution: %+v %v", shown, err)
	}
	if d := DetailShown(ctx, f.p, "", shown); len(d.Hints) != 0 || d.HintsNote == "" {
		t.Fatalf("the detail of a local execution offers %+v (%q)", d.Hints, d.HintsNote)
	}
	if shown, err = f.p.Show(ctx, "", redisRuns[0].ExecutionID); err != nil || shown.Runtime != "" || shown.ReadOnly != "" {
		t.Fatalf("show a Redis execution: %+v %v", shown, err)
	}
	if _, err := f.p.Show(ctx, "", "ex_acme"); AsRefusal(err) == nil || AsRefusal(err).Code != "execution_not_found" {
		t.Fatalf("another tenant's local execution: %v", err)
	}
	if shown, err := f.p.Show(ctx, "acme", "ex_acme"); err != nil || shown.Runtime != RuntimeLocal {
		t.Fatalf("acme's local execution in acme: %+v %v", shown, err)
	}
	if tl, err := f.p.Timeline(ctx, "", local.ExecutionID, 0, 10); err != nil || tl.Status != local.Status {
		t.Fatalf("the timeline of a local execution: %+v %v", tl, err)
	}
}

// Every write on an execution that ran in local mode is refused by name, and nothing is
// enqueued or changed.
func TestClusterPlaneRefusesWritesOnLocalExecutions(t *testing.T) {
	f := newLocalRunsFix(t)
	ctx := context.Background()
	// Made by an earlier version's local mode: an approval it waits for.
	pub, err := f.p.PublishFlow(ctx, "", []byte(askFlow), "")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC()
	id := "ex_waiting_locally"
	if err := f.runs.Save(ctx, &state.Execution{ExecutionID: id, TenantID: "default", FlowID: "ask", FlowVersion: pub.Version,
		FlowHash: pub.Flow.Hash, FlowHashAlgo: pub.Flow.HashAlgo, Status: state.Suspended, CurrentNode: "ask", Context: map[string]any{},
		StartTime: at, LastUpdate: at, Suspend: &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: at}}); err != nil {
		t.Fatal(err)
	}
	for what, op := range map[string]func() error{
		"cancel": func() error { _, err := f.p.Cancel(ctx, "", id); return err },
		"delete": func() error { _, err := f.p.Delete(ctx, "", id, true); return err },
		"resume": func() error { _, err := f.p.Resume(ctx, ResumeRequest{ID: id, Type: engine.ResumeCancel}); return err },
		"forced": func() error {
			_, err := f.p.Resume(ctx, ResumeRequest{ID: id, Type: engine.ResumeContinue, Force: true})
			return err
		},
		"approve": func() error { _, err := f.p.AnswerApproval(ctx, Answer{ID: id, Approved: true, By: "kim"}); return err },
	} {
		r := refusal(t, what, op(), Conflict, "ran_in_local_mode")
		if r.Execution == nil || r.Execution.ExecutionID != id || r.Unblock == "" {
			t.Fatalf("%s: the refusal %+v", what, r)
		}
	}
	if n, err := f.c.Do(ctx, f.c.B().Xlen().Key(f.q.Stream()).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("the task stream holds %d (%v)", n, err)
	}
	st, err := f.runs.Load(ctx, id)
	if err != nil || st.Status != state.Suspended {
		t.Fatalf("the local execution after the refusals: %+v %v", st, err)
	}
	if cancelled, _ := f.runs.Cancelled(ctx, id); cancelled {
		t.Fatal("its cancel flag was raised")
	}
	shown, err := f.p.Show(ctx, "", id)
	if err != nil || shown.WakeUp == nil || len(shown.WakeUp.Problems) == 0 {
		t.Fatalf("the wake-up report of a local execution shown on Redis: %+v %v", shown.WakeUp, err)
	}
	var raw map[string]any
	b, _ := json.Marshal(shown)
	if json.Unmarshal(b, &raw) != nil || raw["runtime"] != "local" || raw["read_only"] == nil {
		t.Fatalf("show as JSON: %s", b)
	}
}
