package store_test

import (
	"errors"
	"maps"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
	"plaita/store/keys"
)

func TestCounters(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	for _, fam := range keys.CounterFamilies() {
		for want := int64(1); want <= 2; want++ {
			n, err := f.ts.Incr(c, fam, "e1")
			if err != nil || n != want {
				t.Fatalf("%s: %d %v, want %d", fam, n, err, want)
			}
		}
		if d := f.ttl(f.mech(fam, "e1")); d < store.MechanismTTL-time.Minute || d > store.MechanismTTL {
			t.Errorf("%s TTL %v, want 7d", fam, d)
		}
		if n, err := f.ts.Counter(c, fam, "e1"); n != 2 || err != nil {
			t.Errorf("%s read %d %v", fam, n, err)
		}
		if n, err := f.ts.Counter(c, fam, "e2"); n != 0 || err != nil {
			t.Errorf("%s unset read %d %v", fam, n, err)
		}
	}
	for _, fam := range []string{keys.FamLease, keys.FamFenceGen, "bogus"} {
		if _, err := f.ts.Incr(c, fam, "e1"); !errors.Is(err, store.ErrInvalid) || model.IsTransient(err) {
			t.Errorf("Incr(%s): %v", fam, err)
		}
	}

	for _, node := range []string{"a", "a", "b", "c.d"} {
		if _, err := f.ts.IncrNodeRetry(c, "e1", node); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := f.ts.NodeRetry(c, "e1", "a"); n != 2 || err != nil {
		t.Errorf("node a: %d %v", n, err)
	}
	all, err := f.ts.NodeRetries(c, "e1")
	if err != nil || !maps.Equal(all, map[string]int64{"a": 2, "b": 1, "c.d": 1}) {
		t.Errorf("node retries %v %v", all, err)
	}
	k, _ := f.ts.Space().NodeRetry("e1", "a")
	if d := f.ttl(k); d < store.MechanismTTL-time.Minute {
		t.Errorf("node counter TTL %v", d)
	}
	for _, node := range []string{"", "#nodes", "x y"} {
		if _, err := f.ts.IncrNodeRetry(c, "e1", node); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("node %q: %v", node, err)
		}
	}
	if _, err := f.ts.IncrNodeRetry(c, "bad:id", "a"); !errors.Is(err, keys.ErrBadID) {
		t.Errorf("bad id: %v", err)
	}

	if err := f.ts.ResetCounter(c, keys.FamNoFail, "e1"); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.ts.Counter(c, keys.FamNoFail, "e1"); n != 0 {
		t.Errorf("reset nofail reads %d", n)
	}
	if err := f.ts.ResetNodeRetry(c, "e1", "a"); err != nil {
		t.Fatal(err)
	}
	if all, _ := f.ts.NodeRetries(c, "e1"); !maps.Equal(all, map[string]int64{"b": 1, "c.d": 1}) {
		t.Errorf("after reset: %v", all)
	}

	if err := f.ts.Delete(c, "e1"); err != nil {
		t.Fatal(err)
	}
	tomb, _ := f.ts.Space().Tombstone("e1")
	gen, _ := f.ts.Space().Mechanism(keys.FamFenceGen, "e1") // kept (and bumped) on purpose
	for _, k := range f.scan() {
		if k != tomb && k != gen {
			t.Errorf("delete left %s", k)
		}
	}
}
