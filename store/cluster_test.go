package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

// Every script (acquire, renew, release, fenced save, fenced delete, the list page) and every
// pipeline against a 3-node Redis Cluster: no CROSSSLOT, no undeclared keys.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	c, _ := redistest.StartCluster(t, 3)
	f := setupOn(t, c, "plaita", nil)
	bg := ctx(t)
	waitClusterOK(t, c)
	acme, err := f.r.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []*store.TenantStore{f.ts, acme} {
		var ids []string
		for i := range 24 { // enough ids to land on every node
			ids = append(ids, fmt.Sprintf("cl%02d", i))
		}
		for _, id := range ids {
			a, err := ts.Acquire(bg, id, "worker-a")
			if err != nil {
				t.Fatalf("acquire %s: %v", id, err)
			}
			if _, err := ts.Acquire(bg, id, "worker-b"); !errors.Is(err, store.ErrLeaseHeld) {
				t.Fatalf("second acquire %s: %v", id, err)
			}
			s := a.Storage()
			for _, status := range []state.Status{state.Running, state.Completed} {
				if err := s.Save(bg, newState(id, status)); err != nil {
					t.Fatalf("fenced save %s: %v", id, err)
				}
			}
			if err := a.Renew(bg); err != nil {
				t.Fatalf("renew %s: %v", id, err)
			}
			if _, err := ts.IncrNodeRetry(bg, id, "n1"); err != nil {
				t.Fatalf("node retry %s: %v", id, err)
			}
			if _, err := ts.Incr(bg, keys.FamG1Wakeups, id); err != nil {
				t.Fatalf("counter %s: %v", id, err)
			}
			if err := ts.SetCancel(bg, id); err != nil {
				t.Fatal(err)
			}
			if _, err := ts.Load(bg, id); err != nil {
				t.Fatalf("load %s: %v", id, err)
			}
			if err := a.Release(bg); err != nil {
				t.Fatalf("release %s: %v", id, err)
			}
			// A takeover fences the first holder out, in the cluster too.
			b, err := ts.Acquire(bg, id, "worker-b")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Save(bg, newState(id, state.Running)); !errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("stale save %s: %v", id, err)
			}
			if err := s.Delete(bg, id); !errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("stale delete %s: %v", id, err)
			}
			if id < "cl12" {
				if err := b.Storage().Delete(bg, id); err != nil {
					t.Fatalf("fenced delete %s: %v", id, err)
				}
			} else if err := b.Release(bg); err != nil {
				t.Fatal(err)
			}
		}
		if err := ts.Delete(bg, "cl23"); err != nil { // the unfenced delete
			t.Fatal(err)
		}
		if err := ts.Save(bg, newState("plain", state.Completed)); err != nil { // the unfenced save
			t.Fatal(err)
		}
		if _, err := ts.Load(bg, "plain"); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		cur := ""
		for {
			p, err := ts.List(bg, store.ListRequest{Cursor: cur, Limit: 5})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			for _, it := range p.Items {
				seen[it.ExecutionID] = true
			}
			if cur = p.NextCursor; cur == "" {
				break
			}
		}
		if len(seen) != 12 {
			t.Errorf("%s: listed %d executions, want 12: %v", ts.Tenant(), len(seen), seen)
		}
		c.Do(bg, c.B().Del().Key(ts.Space().Index()).Build())
		for done := false; !done; {
			step, err := ts.Backfill(bg, 50)
			if err != nil {
				t.Fatalf("backfill: %v", err)
			}
			done = step.Done
		}
		if n, _ := c.Do(bg, c.B().Zcard().Key(ts.Space().Index()).Build()).AsInt64(); n != 12 {
			t.Errorf("%s: backfill indexed %d, want 12", ts.Tenant(), n)
		}
		// Begin writes a start's new state in its script and indexes it with a separate ZADD
		// (the index is in another slot).
		b, err := ts.Begin(bg, "begun", "worker-a", false, newState("begun", state.Running))
		if err != nil {
			t.Fatalf("begin: %v", err)
		}
		if _, err := c.Do(bg, c.B().Zscore().Key(ts.Space().Index()).Member("begun").Build()).AsFloat64(); err != nil {
			t.Errorf("%s: begin did not index the new state: %v", ts.Tenant(), err)
		}
		if err := b.Lease.Storage().Save(bg, newState("begun", state.Completed)); err != nil {
			t.Fatalf("fenced save after begin: %v", err)
		}
		if err := b.Lease.Release(bg); err != nil {
			t.Fatal(err)
		}
		// A deferred lease's first save: begin and save in one script, the index after it.
		d, err := ts.Deferred("deferred", "worker-a")
		if err != nil {
			t.Fatal(err)
		}
		d.ReleaseOnTerminal = true
		if err := d.Storage().Save(bg, newState("deferred", state.Completed)); err != nil {
			t.Fatalf("deferred first save: %v", err)
		}
		if _, err := c.Do(bg, c.B().Zscore().Key(ts.Space().Index()).Member("deferred").Build()).AsFloat64(); err != nil {
			t.Errorf("%s: the deferred first save did not index the state: %v", ts.Tenant(), err)
		}
		clusterIndexBy(t, ts)
	}
	// Every node holds some of the keys, and every key is a state or a mechanism key.
	perNode := 0
	for _, node := range c.Nodes() {
		e, err := node.Do(bg, node.B().Scan().Cursor(0).Match("plaita:*").Count(10000).Build()).AsScanEntry()
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Elements) > 0 {
			perNode++
		}
		for _, k := range e.Elements {
			isState := f.ts.Space().ExecutionID(k) != "" || acme.Space().ExecutionID(k) != ""
			if isState == keys.IsMechanismKey("plaita", k) || strings.Contains(k, "CROSSSLOT") {
				t.Errorf("key %s", k)
			}
		}
	}
	if perNode < 3 {
		t.Errorf("keys on %d nodes; the test wants all 3", perNode)
	}
}

// waitClusterOK waits until every node sees the cluster as healthy (StartCluster checks one
// node; the others may still answer CLUSTERDOWN for a moment).
func waitClusterOK(t *testing.T, c rueidis.Client) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, node := range c.Nodes() {
		for {
			info, err := node.Do(ctx(t), node.B().ClusterInfo().Build()).ToString()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok on every node: %v %s", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// clusterIndexBy: a flow's indexed fields in a cluster, where each IndexBy key has a slot of its
// own — Begin, a deferred first save and a plain save index a start after their script, a
// listing by two terms reads them, a delete takes the execution out.
func clusterIndexBy(t *testing.T, ts *store.TenantStore) {
	t.Helper()
	bg := ctx(t)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b, err := ts.Begin(bg, "idx-begun", "worker-a", false, startState(t, indexedFlow, "idx-begun", `{"order_id": "ord-1", "n": 1}`, start))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Lease.Release(bg); err != nil {
		t.Fatal(err)
	}
	d, err := ts.Deferred("idx-deferred", "worker-a")
	if err != nil {
		t.Fatal(err)
	}
	d.ReleaseOnTerminal = true
	if err := d.Storage().Save(bg, startState(t, indexedFlow, "idx-deferred", `{"order_id": "ord-1", "n": 1.0}`, start.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	if err := ts.Save(bg, startState(t, indexedFlow, "idx-plain", `{"order_id": "ord-1", "n": "1"}`, start.Add(2*time.Second))); err != nil {
		t.Fatal(err)
	}
	terms := []store.IndexTerm{term(t, "order_id", "ord-1"), term(t, "n", 1)}
	list := func() []string {
		p, err := ts.List(bg, store.ListRequest{Index: terms})
		if err != nil {
			t.Fatalf("%s: list by index: %v", ts.Tenant(), err)
		}
		var ids []string
		for _, it := range p.Items {
			ids = append(ids, it.ExecutionID)
		}
		return ids
	}
	if got := list(); !slices.Equal(got, []string{"idx-deferred", "idx-begun"}) {
		t.Errorf("%s: listed by index %v", ts.Tenant(), got)
	}
	if err := ts.Delete(bg, "idx-begun"); err != nil {
		t.Fatal(err)
	}
	if got := list(); !slices.Equal(got, []string{"idx-deferred"}) {
		t.Errorf("%s: after the delete, listed by index %v", ts.Tenant(), got)
	}
}
