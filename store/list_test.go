package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

// seed writes n valid executions (indexed) through raw pipelined commands, with start times
// spaced by step (0: all equal, to exercise ties). It returns their ids.
func seed(t *testing.T, f *fixture, prefix string, n int, base time.Time, step time.Duration) []string {
	t.Helper()
	var ids []string
	var cmds rueidis.Commands
	flush := func() {
		for _, r := range f.c.DoMulti(ctx(t), cmds...) {
			if err := r.Error(); err != nil {
				t.Fatal(err)
			}
		}
		cmds = cmds[:0]
	}
	for i := range n {
		id := fmt.Sprintf("%s%05d", prefix, i)
		st := newState(id, state.Running)
		st.StartTime = base.Add(time.Duration(i) * step)
		b := mustEncode(t, st)
		cmds = append(cmds, f.c.B().Set().Key(f.key(id)).Value(string(b)).Build(),
			f.c.B().Zadd().Key(f.ts.Space().Index()).ScoreMember().ScoreMember(float64(st.StartTime.UnixMilli()), id).Build())
		ids = append(ids, id)
		if len(cmds) >= 1000 {
			flush()
		}
	}
	flush()
	return ids
}

// listAll pages through the listing, checking every page's invariants.
func listAll(t *testing.T, f *fixture, limit int) (seen map[string]int, order []string, skipped int) {
	t.Helper()
	seen = map[string]int{}
	cur := ""
	for pages := 0; ; pages++ {
		if pages > 100000 {
			t.Fatal("pagination does not end")
		}
		p, err := f.ts.List(ctx(t), store.ListRequest{Cursor: cur, Limit: limit})
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if len(p.Items) > limit {
			t.Fatalf("page of %d, limit %d", len(p.Items), limit)
		}
		if p.Degraded != (p.Skipped > 0) {
			t.Fatalf("degraded %v with %d skipped", p.Degraded, p.Skipped)
		}
		skipped += p.Skipped
		for _, it := range p.Items {
			k := f.key(it.ExecutionID)
			if keys.IsMechanismKey(f.root, k) || f.ts.Space().ExecutionID(k) != it.ExecutionID {
				t.Fatalf("listed %q, which is not an execution", it.ExecutionID)
			}
			seen[it.ExecutionID]++
			order = append(order, it.ExecutionID)
		}
		if p.NextCursor == "" {
			return seen, order, skipped
		}
		cur = p.NextCursor
	}
}

func TestList10000WithMechanismKeysAndGarbage(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ids := seed(t, f, "ex", 10000, base, time.Second)
	valid := map[string]bool{}
	for _, id := range ids {
		valid[id] = true
	}
	// Mechanism keys of real executions.
	for _, id := range ids[:50] {
		l := f.acquire(id, "w")
		if _, err := f.ts.Incr(c, keys.FamNoFail, id); err != nil {
			t.Fatal(err)
		}
		if _, err := f.ts.IncrNodeRetry(c, id, "n1"); err != nil {
			t.Fatal(err)
		}
		if err := f.ts.SetCancel(c, id); err != nil {
			t.Fatal(err)
		}
		_ = l
	}
	if err := f.ts.Delete(c, ids[0]); err != nil { // a tombstone, and one fewer execution
		t.Fatal(err)
	}
	delete(valid, ids[0])
	idx := f.ts.Space().Index()
	garbage := 0
	add := func(member string, score float64) {
		f.do(f.c.B().Zadd().Key(idx).ScoreMember().ScoreMember(score, member).Build())
		garbage++
	}
	score := float64(base.Add(5000 * time.Second).UnixMilli())
	// Non-JSON and non-state values under indexed state keys.
	for i, v := range []string{"not json", "42", `"a string"`, `{"status":"running"}`, `[1,2]`, `{"execution_id":"someone-else"}`} {
		id := fmt.Sprintf("junk%d", i)
		f.do(f.c.B().Set().Key(f.key(id)).Value(v).Build())
		add(id, score)
	}
	// A state key holding a hash.
	f.do(f.c.B().Hset().Key(f.key("hashy")).FieldValue().FieldValue("a", "b").Build())
	add("hashy", score)
	// Index members with no state, and members that name mechanism keys or are not ids.
	for _, m := range []string{"ghost", "lease:{ex00001}", "fence:{ex00002}", "{ex00003}", "index", "a b", "", strings.Repeat("x", 300)} {
		add(m, score)
	}
	// Stray keys that are not indexed.
	for _, k := range []string{f.root + ":execution:stray", f.root + ":execution:{ex00004}:x", f.root + ":junk"} {
		f.do(f.c.B().Set().Key(k).Value("1").Build())
	}

	for _, limit := range []int{1000, 137} {
		seen, order, skipped := listAll(t, f, limit)
		for id, n := range seen {
			if n != 1 || !valid[id] {
				t.Fatalf("limit %d: %s listed %d times (valid %v)", limit, id, n, valid[id])
			}
		}
		if len(seen) != len(valid) {
			t.Fatalf("limit %d: listed %d of %d executions", limit, len(seen), len(valid))
		}
		if skipped != garbage {
			t.Errorf("limit %d: skipped %d, want %d garbage members", limit, skipped, garbage)
		}
		if order[0] != ids[len(ids)-1] || order[len(order)-1] != ids[1] {
			t.Errorf("limit %d: not newest first: %s … %s", limit, order[0], order[len(order)-1])
		}
	}
}

func TestListPaginationWithTiesInsertsAndDeletes(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ids := seed(t, f, "tie", 40, base, 0) // 40 executions in the same millisecond
	ids = append(ids, seed(t, f, "old", 10, base.Add(-time.Hour), time.Second)...)
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	seen := map[string]int{}
	cur := ""
	for page := 0; ; page++ {
		p, err := f.ts.List(c, store.ListRequest{Cursor: cur, Limit: 7, States: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			seen[it.ExecutionID]++
			if it.State == nil || it.State.ExecutionID != it.ExecutionID {
				t.Fatal("States: true must return the state")
			}
		}
		if p.NextCursor == "" {
			break
		}
		switch page {
		case 1:
			// Delete the page's last member (the cursor's anchor) and an unseen one.
			last := p.Items[len(p.Items)-1].ExecutionID
			if err := f.ts.Delete(c, last); err != nil {
				t.Fatal(err)
			}
			if err := f.ts.Delete(c, "tie00000"); err != nil {
				t.Fatal(err)
			}
			delete(want, "tie00000")
		case 2:
			// Newer executions arrive in front; they belong to a later listing.
			seed(t, f, "new", 5, base.Add(time.Hour), time.Second)
		}
		cur = p.NextCursor
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("%s listed %d times", id, seen[id])
		}
	}
	for id, n := range seen {
		if !want[id] {
			t.Errorf("listed %s (%d), not expected", id, n)
		}
	}
}

// A page cut after any of its items goes on, from ListCursorAfter of that item, with the next
// item: ties of start time included, and after the item itself was deleted.
func TestListCursorAfter(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	seed(t, f, "ex_a", 6, base, time.Second)
	seed(t, f, "ex_t", 6, base.Add(3*time.Second), 0) // six at one ms, among the others
	full, err := f.ts.List(ctx(t), store.ListRequest{Limit: 100})
	if err != nil || len(full.Items) != 12 {
		t.Fatalf("list: %d %v", len(full.Items), err)
	}
	for k := range full.Items[:len(full.Items)-1] {
		p, err := f.ts.List(ctx(t), store.ListRequest{Cursor: store.ListCursorAfter(full.Items[k]), Limit: 100})
		if err != nil || len(p.Items) != len(full.Items)-k-1 || p.Items[0].ExecutionID != full.Items[k+1].ExecutionID {
			t.Fatalf("after item %d (%s): %d items from %v, %v", k, full.Items[k].ExecutionID, len(p.Items), p.Items, err)
		}
	}
	// The item gone: the page starts at the next one all the same.
	gone := full.Items[4]
	if err := f.c.Do(ctx(t), f.c.B().Zrem().Key(f.ts.Space().Index()).Member(gone.ExecutionID).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if p, err := f.ts.List(ctx(t), store.ListRequest{Cursor: store.ListCursorAfter(gone), Limit: 1}); err != nil || len(p.Items) != 1 ||
		p.Items[0].ExecutionID != full.Items[5].ExecutionID {
		t.Fatalf("after a deleted item: %+v %v", p.Items, err)
	}
}

func TestListBadCursor(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	for _, cur := range []string{"!!!", "e30", "bm90IGpzb24"} {
		if _, err := f.ts.List(ctx(t), store.ListRequest{Cursor: cur}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("cursor %q: %v", cur, err)
		}
	}
}

func TestBackfill(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ids := seed(t, f, "bf", 1200, base, time.Second)
	idx := f.ts.Space().Index()
	f.do(f.c.B().Del().Key(idx).Build()) // the index is lost
	for _, id := range ids[:20] {
		f.acquire(id, "w")
		if _, err := f.ts.IncrNodeRetry(c, id, "n"); err != nil {
			t.Fatal(err)
		}
	}
	f.do(f.c.B().Set().Key(f.key("corrupt")).Value("nope").Build())
	acme, _ := f.r.Tenant("acme")
	if err := acme.Save(c, newState("acme1", state.Running)); err != nil {
		t.Fatal(err)
	}
	f.do(f.c.B().Del().Key(acme.Space().Index()).Build())

	if ok, _ := f.ts.IndexReady(c); ok {
		t.Fatal("ready before backfill")
	}
	calls := 0
	for {
		step, err := f.ts.Backfill(c, 200)
		done := step.Done
		if err != nil {
			t.Fatal(err)
		}
		calls++
		if done {
			break
		}
		if d := f.ttl(f.ts.Space().IndexCursor()); d <= 0 || d > 24*time.Hour {
			t.Fatalf("backfill cursor TTL %v", d)
		}
		if calls > 1000 {
			t.Fatal("backfill does not finish")
		}
	}
	if calls < 2 {
		t.Errorf("a budget of 200 finished %d+ keys in %d call", len(ids), calls)
	}
	if ok, _ := f.ts.IndexReady(c); !ok {
		t.Error("ready marker not set")
	}
	if f.exists(f.ts.Space().IndexCursor()) {
		t.Error("cursor kept after completion")
	}
	members, err := f.do(f.c.B().Zrange().Key(idx).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != len(ids) {
		t.Fatalf("index holds %d members, want %d", len(members), len(ids))
	}
	for _, id := range ids[:3] {
		if s, ok := f.indexScore(id); !ok || s != float64(base.Add(mustIndex(ids, id)*time.Second).UnixMilli()) {
			t.Errorf("%s score %v %v", id, s, ok)
		}
	}
	if f.exists(acme.Space().Index()) {
		t.Error("the default tenant's backfill indexed another tenant")
	}
	seen, _, _ := listAll(t, f, 500)
	if len(seen) != len(ids) {
		t.Errorf("listed %d after backfill", len(seen))
	}
}

func mustIndex(ids []string, id string) time.Duration {
	for i, x := range ids {
		if x == id {
			return time.Duration(i)
		}
	}
	return -1
}
