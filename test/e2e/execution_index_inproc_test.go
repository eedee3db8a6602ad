//go:build !e2e

package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/keys"
)

// Executions listed by the INPUT fields their flow indexes and by start time, through the
// binary: `plaita execution list --index FIELD=VALUE --started-after --started-before`
// (docs/flows.md, "Indexed fields").

// indexedShop indexes order_id and n; its first step is instant (the start's first save is the
// deferred one).
const indexedShop = `{"id": "shop", "start": "done", "index": ["order_id", "n"],
	"nodes": [{"id": "done", "type": "end", "params": {"output": "ok"}}]}`

func TestE2EExecutionListByIndexAndTime(t *testing.T) {
	t.Parallel()
	s := newStack(t, withTimeout(120*time.Second), withEnv(cliEnv()))
	s.start("worker", nil)
	def := writeFile(t, "shop.json", indexedShop)
	var ids []string // oldest first
	for _, input := range []string{
		`{"order_id": "ord-1", "n": 1}`,
		`{"order_id": "ord-1", "n": 1.0}`,
		`{"order_id": "ord-2", "n": "1"}`,
		`{"order_id": {"id": "ord-1"}, "n": [1]}`, // nothing scalar: not indexed
	} {
		id := s.startFlow(def, "", input)
		s.waitDone(id)
		ids = append(ids, id)
	}
	other := s.startFlow(def, "acme", `{"order_id": "ord-1", "n": 1}`)
	s.waitStatus(other, "acme", state.Completed, 60*time.Second)

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--index", "order_id=ord-1"}, []string{ids[1], ids[0]}},
		{[]string{"--index", "n=1"}, []string{ids[1], ids[0]}}, // 1 and 1.0: one value
		{[]string{"--index", `n="1"`}, []string{ids[2]}},       // "1" is not 1
		{[]string{"--index", "order_id=ord-1", "--index", "n=1.0"}, []string{ids[1], ids[0]}},
		{[]string{"--index", "order_id=ord-2", "--index", "n=1"}, nil},
		{[]string{"--index", "order_id=ord-1", "--tenant", "acme"}, []string{other}},
	} {
		got, items, _ := s.listJSON(tc.args...)
		if !slices.Equal(got, tc.want) {
			t.Errorf("list %v: %v, want %v", tc.args, got, tc.want)
		}
		for _, it := range items {
			if it.Index["order_id"] == "" {
				t.Errorf("list %v: %s without its indexed values: %+v", tc.args, it.ExecutionID, it)
			}
		}
	}

	// The start-time range: --started-after (alias --since) inclusive, --started-before exclusive.
	_, all, _ := s.listJSON()
	if len(all) != 4 {
		t.Fatalf("listed %d executions, want 4: %+v", len(all), all)
	}
	at := func(id string) string {
		for _, it := range all {
			if it.ExecutionID == id {
				return it.StartTime.Format(time.RFC3339Nano)
			}
		}
		t.Fatalf("%s not listed", id)
		return ""
	}
	if got, _, _ := s.listJSON("--since", at(ids[1]), "--started-before", at(ids[3])); !slices.Equal(got, []string{ids[2], ids[1]}) {
		t.Errorf("from %s to %s: %v", at(ids[1]), at(ids[3]), got)
	}
	if got, _, _ := s.listJSON("--started-after", at(ids[1]), "--index", "order_id=ord-1"); !slices.Equal(got, []string{ids[1]}) {
		t.Errorf("after %s, ord-1: %v", at(ids[1]), got)
	}

	// A page of one prints the next page's command with the filters: run as printed.
	out := s.cli("execution", "list", "--index", "order_id=ord-1", "--limit", "1")
	mustContain(t, "execution list --limit 1", out, ids[1], "next page:", "--index order_id=ord-1 --limit 1 --cursor ")
	next := strings.Fields(out[strings.Index(out, "next page:")+len("next page:"):])
	if next[0] != "plaita" {
		t.Fatalf("next page command %v", next)
	}
	out = s.cli(next[1:]...)
	mustContain(t, "the next page", out, ids[0])
	mustNotContain(t, "the next page", out, ids[1])

	// Bad filters: exit 2, naming what is wrong.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--index", "order.id=ord-1"}, `"order.id" is no field a flow can index`},
		{[]string{"--index", "order_id"}, "write field=value"},
		{[]string{"--index", `order_id={"a":1}`}, "only strings, numbers and booleans are indexed"},
		{[]string{"--since", "yesterday"}, "--started-after"},
		{[]string{"--started-after", at(ids[2]), "--started-before", at(ids[1])}, "is not later than"},
	} {
		r := run(t, s.env, append([]string{"execution", "list", "--quiet"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("list %v: exit %d, want 2 and %q\n%s%s", tc.args, r.code, tc.want, r.stdout, r.stderr)
		}
	}

	// A deleted execution leaves the index with its state.
	s.cli("execution", "delete", ids[0])
	if got, _, _ := s.listJSON("--index", "order_id=ord-1"); !slices.Equal(got, []string{ids[1]}) {
		t.Errorf("after the delete: %v", got)
	}
	by, _ := keys.MustFor("", "").IndexBy("n", "1")
	if m, err := s.c.Do(s.ctx, s.c.B().Zrange().Key(by).Min("0").Max("-1").Build()).AsStrSlice(); err != nil || !slices.Equal(m, []string{ids[1]}) {
		t.Errorf("%s after the delete: %v %v", by, m, err)
	}
}
