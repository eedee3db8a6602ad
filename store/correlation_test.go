package store_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
	"plaita/test/redistest"
)

// corrSub is a correlated wait of ex on type "payment", indexed under EVENT.<path> == value.
func corrSub(ex string, since, expires time.Time, value string, path ...string) store.Subscription {
	return store.Subscription{ExecutionID: ex, FlowID: "f", FlowVersion: "1", Node: "w", EventType: "payment",
		Match: "EVENT.order_id == INPUT.order_id", Since: since, ExpiresAt: expires,
		Correlation: &state.Correlation{Path: path, Value: value}}
}

// decoded is event data as the filter has it (decoded JSON).
func decoded(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// A correlated wait is written to its term's bucket (member "<id>:<since ns>") and its path to
// the type's paths, not to the per-type index; the record says where it is indexed.
func TestCorrelatedSubscriptionRecordAndBuckets(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	acme := f.tenant("acme")
	since := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	due := since.Add(2 * time.Minute)
	sub := corrSub("ex_1", since, due, `"A1"`, "order_id")
	for range 2 { // idempotent
		f.must(acme.PutSubscription(c, sub, 2*time.Hour))
	}
	rec, _ := acme.Space().Subscription("ex_1")
	const want = `{"execution_id":"ex_1","tenant_id":"acme","flow_id":"f","flow_version":"1","node":"w","event_type":"payment",` +
		`"match":"EVENT.order_id == INPUT.order_id","since":"2026-11-29T12:00:00.123456789Z","expires_at":"2026-11-29T12:02:00.123456789Z",` +
		`"correlation":{"path":["order_id"],"value":"\"A1\""}}`
	if got, _ := f.get(rec); got != want {
		t.Errorf("record\n got %s\nwant %s", got, want)
	}
	bucket, _ := acme.Space().SubscriptionBucket("payment", `["order_id"]`, `"A1"`)
	paths, _ := acme.Space().SubscriptionPaths("payment")
	idx, _ := acme.Space().SubscriptionIndex("payment")
	member := "ex_1:" + strconv.FormatInt(since.UnixNano(), 10)
	if s, ok := f.zscore(bucket, member); !ok || s != strconv.FormatInt(due.UnixMilli(), 10) || f.zcard(bucket) != 1 {
		t.Errorf("bucket member %s: %q %v (%d members)", member, s, ok, f.zcard(bucket))
	}
	if s, ok := f.zscore(paths, `["order_id"]`); !ok || s != strconv.FormatInt(due.UnixMilli(), 10) {
		t.Errorf("paths member: %q %v", s, ok)
	}
	if f.exists(idx) {
		t.Error("a correlated wait is in the per-type index")
	}
	// A path keeps the latest timeout of its waits, and no key lives shorter than a wait
	// registered in it needs: a wait with a shorter TTL does not shorten them.
	f.must(acme.PutSubscription(c, corrSub("ex_2", since, time.Time{}, `"A1"`, "order_id"), time.Hour))
	if s, _ := f.zscore(paths, `["order_id"]`); s != "inf" {
		t.Errorf("paths score %q after a wait without timeout", s)
	}
	f.must(acme.PutSubscription(c, corrSub("ex_3", since, due, `"A1"`, "order_id"), time.Hour))
	if s, _ := f.zscore(paths, `["order_id"]`); s != "inf" {
		t.Errorf("paths score %q: lowered by a later wait", s)
	}
	for _, k := range []string{bucket, paths} {
		if ttl := f.ttl(k); ttl <= 119*time.Minute || ttl > 2*time.Hour {
			t.Errorf("%s TTL %s: the shorter registration shortened it", k, ttl)
		}
	}
	// A member more than a minute past its timeout is dropped by a registration in its bucket.
	f.must(acme.PutSubscription(c, corrSub("ex_4", due.Add(2*time.Minute), time.Time{}, `"A1"`, "order_id"), time.Hour))
	if _, ok := f.zscore(bucket, member); ok {
		t.Error("a timed-out member stays in its bucket")
	}
	// Terms without a path or a value are refused.
	for _, bad := range []store.Subscription{corrSub("ex_5", since, due, `"A1"`), corrSub("ex_5", since, due, "", "a")} {
		if err := acme.PutSubscription(c, bad, time.Hour); err == nil {
			t.Errorf("%+v accepted", bad.Correlation)
		}
	}
}

// Waits reads, for a batch of events, the uncorrelated waits and the buckets of the events'
// values at every path in use; equal values under == share a bucket (1 and 1.0), others do not
// ("1" and 1); an event without a value at a path looks nothing up there.
func TestWaitsLookUpTheBucketsOfTheEventsValues(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	acme := f.tenant("acme")
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	since := now.Add(-time.Minute)
	put := func(sub store.Subscription) { t.Helper(); f.must(acme.PutSubscription(c, sub, time.Hour)) }
	num, _ := state.CorrelationValue(1.0)
	str, _ := state.CorrelationValue("1")
	put(corrSub("ex_num", since, time.Time{}, num, "n"))
	put(corrSub("ex_str", since, time.Time{}, str, "n"))
	put(corrSub("ex_nested", since, time.Time{}, `"A1"`, "data", "order"))
	put(corrSub("ex_timed_out", since, now.Add(-time.Second), num, "n"))
	put(store.Subscription{ExecutionID: "ex_any", FlowID: "f", FlowVersion: "1", Node: "w", EventType: "payment", Since: since})

	events := []any{decoded(t, `{"n":1}`), decoded(t, `{"n":1.0,"data":{"order":"A1"}}`), decoded(t, `{"n":"1"}`),
		decoded(t, `{"n":null}`), decoded(t, `{"n":{"x":1}}`), decoded(t, `{"other":2}`), decoded(t, `"not an object"`)}
	w, err := acme.Waits(c, "payment", events, now)
	f.must(err)
	got := map[string][]int{}
	for _, cw := range w.Correlated {
		got[cw.ExecutionID] = cw.Events
		if cw.Since.UnixNano() != since.UnixNano() {
			t.Errorf("%s: since %s", cw.ExecutionID, cw.Since)
		}
	}
	if want := map[string][]int{"ex_num": {0, 1}, "ex_str": {2}, "ex_nested": {1}}; !mapsEqual(got, want) {
		t.Errorf("correlated %v, want %v", got, want)
	}
	if w.Paths != 2 || len(w.Uncorrelated.Reads) != 1 || w.Uncorrelated.Reads[0].ExecutionID != "ex_any" || w.Invalid != 0 {
		t.Errorf("paths %d, uncorrelated %+v, invalid %d", w.Paths, w.Uncorrelated.Reads, w.Invalid)
	}
	// The count of what may take an event.
	for data, want := range map[string]int64{`{"n":1}`: 2, `{"n":"1"}`: 2, `{"x":1}`: 1, `{"n":1,"data":{"order":"A1"}}`: 3} {
		if n, err := acme.WaitingFor(c, "payment", decoded(t, data), now); err != nil || n != want {
			t.Errorf("waiting for %s: %d %v, want %d", data, n, err, want)
		}
	}

	// Removing a used wait takes only its suspension's member: a later suspension of the same
	// execution in the same bucket stays.
	later := since.Add(time.Second)
	put(corrSub("ex_num", later, time.Time{}, num, "n"))
	var first store.CorrelatedWait
	for _, cw := range w.Correlated {
		if cw.ExecutionID == "ex_num" {
			first = cw
		}
	}
	if ok, err := acme.RemoveCorrelatedWait(c, "payment", first); !ok || err != nil {
		t.Fatalf("remove: %v %v", ok, err)
	}
	w, err = acme.Waits(c, "payment", events[:1], now)
	f.must(err)
	if len(w.Correlated) != 1 || !w.Correlated[0].Since.Equal(later) {
		t.Fatalf("after the removal: %+v", w.Correlated)
	}

	// Members and paths no writer makes are skipped, counted and removed.
	bucket, _ := acme.Space().SubscriptionBucket("payment", `["n"]`, num)
	paths, _ := acme.Space().SubscriptionPaths("payment")
	for _, m := range []string{"no-since", "a:b{c}:1", "ex_1:-5", "ex_1:01", ":1"} {
		f.must(f.do(f.c.B().Zadd().Key(bucket).ScoreMember().ScoreMember(1e18, m).Build()).Error())
	}
	for _, m := range []string{"order_id", `[]`, `["a",1]`, `[ "a"]`} {
		f.must(f.do(f.c.B().Zadd().Key(paths).ScoreMember().ScoreMember(1e18, m).Build()).Error())
	}
	w, err = acme.Waits(c, "payment", events[:1], now)
	f.must(err)
	if w.Invalid != 9 || len(w.Correlated) != 1 || w.Paths != 2 {
		t.Errorf("%d invalid, %d correlated, %d paths", w.Invalid, len(w.Correlated), w.Paths)
	}
	if f.zcard(bucket) != 2 || f.zcard(paths) != 2 { // ex_num's later wait, and ex_timed_out (skipped by reads)
		left, _ := f.do(f.c.B().Zrange().Key(bucket).Min("0").Max("-1").Build()).AsStrSlice()
		t.Errorf("left: bucket %d %v, paths %d", f.zcard(bucket), left, f.zcard(paths))
	}
	// Another tenant sees none of it.
	if w, err := f.ts.Waits(c, "payment", events, now); err != nil || len(w.Correlated)+len(w.Uncorrelated.Reads) != 0 {
		t.Errorf("default tenant: %+v %v", w, err)
	}
}

// A bucket larger than a page is read whole.
func TestWaitsReadsABucketPastAPage(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const n = 1234
	for i := range n {
		f.must(f.ts.PutSubscription(c, corrSub("ex_"+strconv.Itoa(i), now.Add(-time.Duration(i)*time.Millisecond), time.Time{}, `"paid"`, "status"), time.Hour))
	}
	w, err := f.ts.Waits(c, "payment", []any{decoded(t, `{"status":"paid"}`)}, now)
	f.must(err)
	seen := map[string]bool{}
	for _, cw := range w.Correlated {
		seen[cw.ExecutionID] = true
	}
	if len(w.Correlated) != n || len(seen) != n {
		t.Fatalf("%d members read (%d distinct), want %d", len(w.Correlated), len(seen), n)
	}
}

// On a Redis Cluster: every index write and read is a command or script of one key.
func TestCorrelatedWaitsOnACluster(t *testing.T) {
	t.Parallel()
	c, _ := redistest.StartCluster(t, 3)
	f := setupOn(t, c, "plaita", nil)
	waitClusterOK(t, c)
	bg := ctx(t)
	now := time.Now()
	for _, tenant := range []string{"", "acme"} {
		ts := f.tenant(tenant)
		var events []any
		for i := range 24 { // values on every node
			v := "o" + strconv.Itoa(i)
			f.must(ts.PutSubscription(bg, corrSub("ex_"+v, now.Add(-time.Second), now.Add(time.Hour), strconv.Quote(v), "order_id"), time.Hour))
			events = append(events, map[string]any{"order_id": v})
		}
		f.must(ts.PutSubscription(bg, store.Subscription{ExecutionID: "ex_any", EventType: "payment", Node: "w", Since: now}, time.Hour))
		w, err := ts.Waits(bg, "payment", events, now)
		f.must(err)
		if len(w.Correlated) != 24 || len(w.Uncorrelated.Reads) != 1 {
			t.Fatalf("%s: %d correlated, %d uncorrelated", tenant, len(w.Correlated), len(w.Uncorrelated.Reads))
		}
		for _, cw := range w.Correlated {
			if ok, err := ts.RemoveCorrelatedWait(bg, "payment", cw); !ok || err != nil {
				t.Fatalf("remove %s: %v %v", cw.ExecutionID, ok, err)
			}
		}
		if n, err := ts.WaitingFor(bg, "payment", events[0], now); err != nil || n != 1 {
			t.Fatalf("%s: waiting %d %v", tenant, n, err)
		}
	}
}

func mapsEqual(a, b map[string][]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// On a Redis Cluster an event is published — its record, indexes, feed, tenant list and
// notification — and read back, in every tenant.
func TestPublishEventOnACluster(t *testing.T) {
	t.Parallel()
	c, _ := redistest.StartCluster(t, 3)
	waitClusterOK(t, c)
	ev := store.NewEvents(store.RedisEvents(c), store.EventSettings{TTL: time.Hour}, "plaita")
	bg := ctx(t)
	for _, tenant := range []string{"default", "acme"} {
		for i := range 10 {
			stored, dup, err := ev.Publish(bg, store.Event{TenantID: tenant, Type: "payment.t" + strconv.Itoa(i), Data: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)})
			if err != nil || dup {
				t.Fatalf("%s: publish %d: %v (duplicate %v)", tenant, i, err, dup)
			}
			if got, err := ev.Get(bg, tenant, stored.ID); err != nil || got.ID != stored.ID {
				t.Fatalf("%s: get %s: %+v %v", tenant, stored.ID, got, err)
			}
		}
	}
}
