package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
)

// indexedFlow indexes order_id and n (docs/flows.md, "Indexed fields").
const indexedFlow = `{"id": "shop", "start": "done", "index": ["order_id", "n"], "nodes": [{"id": "done", "type": "end"}]}`

// startState is the new state of a start of flow src with input (JSON), as the worker makes it
// (engine.NewState), started at start.
func startState(t testing.TB, src, id, input string, start time.Time) *state.Execution {
	t.Helper()
	f, err := engine.Parse([]byte(src), engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	var in any
	if err := json.Unmarshal([]byte(input), &in); err != nil {
		t.Fatal(err)
	}
	st, err := engine.NewState(f, engine.StartRequest{ExecutionID: id, Input: in}, start)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// term is the listing term of an indexed field and a value, canonical as the engine keeps it.
func term(t testing.TB, field string, v any) store.IndexTerm {
	t.Helper()
	c, ok := state.CorrelationValue(v)
	if !ok {
		t.Fatalf("%v has no canonical form", v)
	}
	return store.IndexTerm{Field: field, Value: c}
}

// byMembers are the members of the IndexBy key of one term, with their scores.
func (f *fixture) byMembers(tm store.IndexTerm) map[string]float64 {
	f.t.Helper()
	k, err := f.ts.Space().IndexBy(tm.Field, tm.Value)
	if err != nil {
		f.t.Fatal(err)
	}
	rows, err := f.do(f.c.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, r := range rows {
		out[r.Member] = r.Score
	}
	return out
}

// byKeys are the tenant's IndexBy keys.
func (f *fixture) byKeys() []string {
	f.t.Helper()
	var out []string
	for cursor := uint64(0); ; {
		e, err := f.do(f.c.B().Scan().Cursor(cursor).Match(f.ts.Space().IndexByPattern()).Count(1000).Build()).AsScanEntry()
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			return out
		}
	}
}

// listIDs pages through a listing with limit and returns the ids in order.
func (f *fixture) listIDs(req store.ListRequest) (ids []string, pages int) {
	f.t.Helper()
	for {
		p, err := f.ts.List(ctx(f.t), req)
		if err != nil {
			f.t.Fatal(err)
		}
		pages++
		if len(p.Items) > max(req.Limit, 1) || pages > 1000 {
			f.t.Fatalf("page %d: %d items", pages, len(p.Items))
		}
		for _, it := range p.Items {
			ids = append(ids, it.ExecutionID)
		}
		if req.Cursor = p.NextCursor; req.Cursor == "" {
			return ids, pages
		}
	}
}

// The first save indexes a start of a flow with "index" under each of its scalar values — in
// Begin's script, a deferred lease's first save, a plain save — and writes no IndexBy key for a
// flow without "index", nor for a value that is not a scalar. A redelivered start (a second
// Begin of the same execution, then the run's fenced save) leaves one member with the same
// score.
func TestIndexByWrittenAtFirstSave(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	start := time.Date(2026, 3, 1, 12, 0, 0, 123_456_789, time.UTC)
	score := float64(start.UnixMilli())

	plain := startState(t, `{"id": "plain", "start": "done", "nodes": [{"id": "done", "type": "end"}]}`, "ex_plain", `{"order_id": "ord-1"}`, start)
	b, err := f.ts.Begin(c, "ex_plain", "w", false, plain)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Lease.Storage().Save(c, plain); err != nil {
		t.Fatal(err)
	}
	nested := startState(t, indexedFlow, "ex_nested", `{"order_id": {"id": "ord-1"}, "n": [1]}`, start)
	if err := f.ts.Save(c, nested); err != nil {
		t.Fatal(err)
	}
	if ks := f.byKeys(); len(ks) != 0 {
		t.Fatalf("IndexBy keys without an indexed value: %v", ks)
	}

	// Begin (a start whose first step calls out), twice as a redelivery would.
	begun := startState(t, indexedFlow, "ex_begun", `{"order_id": "ord-1", "n": 1}`, start)
	for i := range 2 {
		b, err := f.ts.Begin(c, "ex_begun", "w", true, begun)
		if err != nil {
			t.Fatal(err)
		}
		if created := b.State == begun; created != (i == 0) {
			t.Fatalf("delivery %d: created %v", i+1, created) // the second one finds the state
		}
		if got := f.byMembers(term(t, "order_id", "ord-1")); len(got) != 1 || got["ex_begun"] != score {
			t.Fatalf("delivery %d, after Begin: %v", i+1, got)
		}
		if err := b.Lease.Storage().Save(c, begun); err != nil {
			t.Fatal(err)
		}
		if err := b.Lease.Release(c); err != nil {
			t.Fatal(err)
		}
	}
	// A deferred lease's first save (a start whose first step is instant), with n 1.0.
	d, err := f.ts.Deferred("ex_deferred", "w")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Storage().Save(c, startState(t, indexedFlow, "ex_deferred", `{"order_id": "ord-1", "n": 1.0}`, start)); err != nil {
		t.Fatal(err)
	}
	// A plain save, with n "1": another value.
	if err := f.ts.Save(c, startState(t, indexedFlow, "ex_saved", `{"order_id": "ord-2", "n": "1"}`, start)); err != nil {
		t.Fatal(err)
	}
	// A lease taken for a resume (no Begin state): its first save indexes again, the same.
	l := f.acquire("ex_begun", "w")
	if err := l.Storage().Save(c, begun); err != nil {
		t.Fatal(err)
	}

	for tm, want := range map[store.IndexTerm][]string{
		term(t, "order_id", "ord-1"): {"ex_begun", "ex_deferred"},
		term(t, "order_id", "ord-2"): {"ex_saved"},
		term(t, "n", 1):              {"ex_begun", "ex_deferred"}, // 1 and 1.0: one value
		term(t, "n", "1"):            {"ex_saved"},                // "1" is not 1
	} {
		got := f.byMembers(tm)
		if len(got) != len(want) {
			t.Errorf("%v: members %v, want %v", tm, got, want)
		}
		for _, id := range want {
			if s, ok := got[id]; !ok || s != score {
				t.Errorf("%v: %s has score %v (%v), want %v", tm, id, s, ok, score)
			}
		}
	}
	if ks := f.byKeys(); len(ks) != 4 {
		t.Errorf("%d IndexBy keys, want 4: %v", len(ks), ks)
	}
}

// Listing by indexed fields and by start time: the terms intersect, 1 and 1.0 are one value
// and "1" another, the time range is StartedAfter ≤ start < StartedBefore to the nanosecond,
// and pages of any size give every match once, in order, with a cursor that also goes on
// with another driving key.
func TestListByIndexAndTime(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var all []string // newest first
	for i := range 60 {
		id := fmt.Sprintf("ex_%02d", i)
		order := fmt.Sprintf("ord-%d", i%3) // ord-0, ord-1, ord-2
		n := `1`
		switch i % 4 {
		case 1:
			n = `1.0`
		case 2:
			n = `"1"`
		case 3:
			n = `2`
		}
		st := startState(t, indexedFlow, id, fmt.Sprintf(`{"order_id": %q, "n": %s}`, order, n), base.Add(time.Duration(i)*time.Second+500*time.Microsecond))
		if err := f.ts.Save(c, st); err != nil {
			t.Fatal(err)
		}
		all = append([]string{id}, all...)
	}
	// Plus executions of a flow without an index: never listed by a term.
	for i := range 5 {
		st := startState(t, `{"id": "plain", "start": "done", "nodes": [{"id": "done", "type": "end"}]}`, fmt.Sprintf("ex_plain%d", i), `{"order_id": "ord-1", "n": 1}`, base)
		if err := f.ts.Save(c, st); err != nil {
			t.Fatal(err)
		}
	}
	match := func(keep func(i int) bool) []string {
		var out []string
		for _, id := range all {
			var i int
			fmt.Sscanf(id, "ex_%d", &i)
			if keep(i) {
				out = append(out, id)
			}
		}
		return out
	}
	at := func(i int) time.Time { return base.Add(time.Duration(i)*time.Second + 500*time.Microsecond) }
	for name, tc := range map[string]struct {
		req  store.ListRequest
		want []string
	}{
		"one term":  {store.ListRequest{Index: []store.IndexTerm{term(t, "order_id", "ord-1")}}, match(func(i int) bool { return i%3 == 1 })},
		"1 and 1.0": {store.ListRequest{Index: []store.IndexTerm{term(t, "n", 1.0)}}, match(func(i int) bool { return i%4 <= 1 })},
		`"1"`:       {store.ListRequest{Index: []store.IndexTerm{term(t, "n", "1")}}, match(func(i int) bool { return i%4 == 2 })},
		"two terms": {store.ListRequest{Index: []store.IndexTerm{term(t, "n", 1), term(t, "order_id", "ord-2")}},
			match(func(i int) bool { return i%4 <= 1 && i%3 == 2 })},
		"no such value":                  {store.ListRequest{Index: []store.IndexTerm{term(t, "order_id", "ord-9")}}, nil},
		"two terms, one without members": {store.ListRequest{Index: []store.IndexTerm{term(t, "n", 1), term(t, "order_id", "ord-9")}}, nil},
		"time range":                     {store.ListRequest{StartedAfter: at(10), StartedBefore: at(20)}, match(func(i int) bool { return i >= 10 && i < 20 })},
		// Within the ms of a start: after it by 1 µs leaves it out, before it by 1 µs too.
		"sub-ms bounds": {store.ListRequest{StartedAfter: at(10).Add(time.Microsecond), StartedBefore: at(20).Add(time.Microsecond)},
			match(func(i int) bool { return i > 10 && i <= 20 })},
		"after only": {store.ListRequest{StartedAfter: at(55)}, match(func(i int) bool { return i >= 55 })},
		"before only": {store.ListRequest{StartedBefore: at(3), Index: []store.IndexTerm{term(t, "order_id", "ord-0")}},
			match(func(i int) bool { return i < 3 && i%3 == 0 })},
		"time and terms": {store.ListRequest{StartedAfter: at(12), StartedBefore: at(48), Index: []store.IndexTerm{term(t, "order_id", "ord-1"), term(t, "n", 2)}},
			match(func(i int) bool { return i >= 12 && i < 48 && i%3 == 1 && i%4 == 3 })},
		"empty range": {store.ListRequest{StartedAfter: at(20), StartedBefore: at(20)}, nil},
		"match": {store.ListRequest{Index: []store.IndexTerm{term(t, "order_id", "ord-0")}, Match: func(st *state.Execution) bool { return st.ExecutionID < "ex_30" }},
			match(func(i int) bool { return i%3 == 0 && i < 30 })},
	} {
		for _, limit := range []int{1, 3, 7, 100} {
			req := tc.req
			req.Limit = limit
			got, pages := f.listIDs(req)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s, limit %d: listed %v, want %v", name, limit, got, tc.want)
			}
			if limit == 100 && pages != 1 {
				t.Errorf("%s: %d pages of 100", name, pages)
			}
		}
	}
	// A cursor from a listing of the whole index goes on in a listing by a term: positions are
	// (start time, id) in every key.
	p, err := f.ts.List(c, store.ListRequest{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.listIDs(store.ListRequest{Cursor: p.NextCursor, Limit: 4, Index: []store.IndexTerm{term(t, "order_id", "ord-1")}})
	if want := match(func(i int) bool { return i < 50 && i%3 == 1 }); !slices.Equal(got, want) {
		t.Errorf("after the first 10: %v, want %v", got, want)
	}
	// The listed summaries carry the values.
	p, err = f.ts.List(c, store.ListRequest{Limit: 1, Index: []store.IndexTerm{term(t, "order_id", "ord-2")}})
	if err != nil || len(p.Items) != 1 || p.Items[0].Index["order_id"] != `"ord-2"` {
		t.Errorf("summary: %+v, %v", p.Items, err)
	}
	if _, err := f.ts.List(c, store.ListRequest{Index: []store.IndexTerm{{Field: "order.id", Value: "1"}}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a bad field: %v", err)
	}
}

// Deleting an execution (unfenced, and through its lease) takes it out of its IndexBy keys; a
// state that expired leaves its members, which listings skip and PruneIndexBy (plaita
// reindex) removes; Backfill puts back the members of the states that have them.
func TestIndexByDeletePruneBackfill(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tm := term(t, "order_id", "ord-1")
	for i := range 4 {
		id := fmt.Sprintf("ex_%d", i)
		if err := f.ts.Save(c, startState(t, indexedFlow, id, `{"order_id": "ord-1", "n": 7}`, start.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.ts.Delete(c, "ex_0"); err != nil {
		t.Fatal(err)
	}
	l := f.acquire("ex_1", "w")
	if err := l.Storage().Delete(c, "ex_1"); err != nil {
		t.Fatal(err)
	}
	if got := f.byMembers(tm); len(got) != 2 || got["ex_0"] != 0 || got["ex_1"] != 0 {
		t.Fatalf("after two deletes: %v", got)
	}
	if got := f.byMembers(term(t, "n", 7)); len(got) != 2 {
		t.Fatalf("after two deletes, n: %v", got)
	}
	// ex_2's state expires (its key goes; the members stay, as in the tenant's index).
	f.do(f.c.B().Del().Key(f.key("ex_2")).Build())
	p, err := f.ts.List(c, store.ListRequest{Index: []store.IndexTerm{tm}})
	if err != nil || len(p.Items) != 1 || p.Items[0].ExecutionID != "ex_3" || p.Skipped != 1 || !p.Degraded {
		t.Fatalf("listing over an expired member: %+v, %v", p, err)
	}
	pr, err := f.ts.PruneIndexBy(c, store.IndexByPosition{}, 1000)
	for err == nil && !pr.Done {
		var next store.IndexByPrune
		next, err = f.ts.PruneIndexBy(c, pr.Next, 1000)
		next.Removed += pr.Removed
		pr = next
	}
	if err != nil {
		t.Fatal(err)
	}
	if pr.Removed != 2 || len(f.byMembers(tm)) != 1 || len(f.byMembers(term(t, "n", 7))) != 1 {
		t.Fatalf("prune removed %d: %v", pr.Removed, f.byMembers(tm))
	}
	// Lost IndexBy keys come back from the states with a backfill.
	for _, k := range f.byKeys() {
		f.do(f.c.B().Del().Key(k).Build())
	}
	for done := false; !done; {
		step, err := f.ts.Backfill(c, 100)
		if err != nil {
			t.Fatal(err)
		}
		done = step.Done
	}
	if got := f.byMembers(tm); len(got) != 1 || got["ex_3"] != float64(start.Add(3*time.Second).UnixMilli()) {
		t.Fatalf("after backfill: %v", got)
	}
	// A state whose index member is gone gets its IndexBy members back when it is loaded.
	f.do(f.c.B().Del().Key(f.ts.Space().Index()).Build())
	for _, k := range f.byKeys() {
		f.do(f.c.B().Del().Key(k).Build())
	}
	if _, err := f.ts.Load(c, "ex_3"); err != nil {
		t.Fatal(err)
	}
	if got := f.byMembers(term(t, "n", 7)); len(got) != 1 {
		t.Fatalf("after load: %v", got)
	}
}
