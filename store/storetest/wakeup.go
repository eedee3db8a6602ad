package storetest

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
)

// WakeupBackend is one WakeupDriver under the contract.
type WakeupBackend struct {
	Name string
	// Open makes a new, empty storage for one case (cases run in parallel).
	Open func(t *testing.T) *store.Redis
}

// WakeupContract runs the wake-up records' cases against b: what the filter relies on to find
// the waits an event may take in O(1) of the waits — uncorrelated waits in their type's index,
// correlated ones in the bucket of their term, each listed while it has not timed out, each
// removed once it is used (and only its suspension's member), the count of what waits, and a
// stale record removed only while it is the one read.
func WakeupContract(t *testing.T, b WakeupBackend) {
	runCases(t, b.Name, func(t *testing.T) *store.Redis { return b.Open(t) }, []namedCase[*store.Redis]{
		{"UncorrelatedListedUntilRemoved", uncorrelatedListedUntilRemoved},
		{"CorrelatedLookUpTheirBuckets", correlatedLookUpTheirBuckets},
		{"BucketsReadPastAPage", bucketsReadPastAPage},
		{"StaleRemovedOnlyAsRead", staleRemovedOnlyAsRead},
		{"ApprovalRecords", approvalRecords},
	})
}

var wakeupNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func corrSub(ex string, since, expires time.Time, value string, path ...string) store.Subscription {
	return store.Subscription{ExecutionID: ex, FlowID: "f", FlowVersion: "1", Node: "w", EventType: "payment",
		Match: "EVENT.order_id == INPUT.order_id", Since: since, ExpiresAt: expires,
		Correlation: &state.Correlation{Path: path, Value: value}}
}

func plainSub(ex string, since, expires time.Time) store.Subscription {
	return store.Subscription{ExecutionID: ex, FlowID: "f", FlowVersion: "1", Node: "w", EventType: "payment", Since: since, ExpiresAt: expires}
}

func decodedJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func uncorrelatedListedUntilRemoved(t *testing.T, r *store.Redis) {
	acme := tenantOf(t, r)
	since := wakeupNow.Add(-time.Minute)
	must(t, acme.PutSubscription(eventsCtx(t), plainSub("ex_a", since, time.Time{}), time.Hour))
	must(t, acme.PutSubscription(eventsCtx(t), plainSub("ex_b", since, wakeupNow.Add(time.Hour)), time.Hour))
	must(t, acme.PutSubscription(eventsCtx(t), plainSub("ex_late", since, wakeupNow.Add(-time.Second)), time.Hour))
	reads, err := acme.Subscriptions(eventsCtx(t), "payment", wakeupNow)
	must(t, err)
	var ids []string
	for _, rd := range reads.Reads {
		if rd.Missing || rd.Err != nil || rd.Sub.Node != "w" || rd.Sub.TenantID != "acme" || rd.Raw == "" {
			t.Fatalf("read %+v", rd)
		}
		ids = append(ids, rd.ExecutionID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"ex_a", "ex_b"}) {
		t.Fatalf("listed %v, want the two that have not timed out", ids)
	}
	if n, err := acme.WaitingFor(eventsCtx(t), "payment", decodedJSON(t, `{"x":1}`), wakeupNow); err != nil || n != 2 {
		t.Fatalf("waiting for: %d %v", n, err)
	}
	must(t, acme.RemoveSubscription(eventsCtx(t), "ex_a", "payment"))
	reads, err = acme.Subscriptions(eventsCtx(t), "payment", wakeupNow)
	must(t, err)
	if len(reads.Reads) != 1 || reads.Reads[0].ExecutionID != "ex_b" {
		t.Fatalf("after the removal: %+v", reads.Reads)
	}
	// Another tenant sees none of it; another type neither.
	def, err := r.Tenant("")
	must(t, err)
	if reads, err := def.Subscriptions(eventsCtx(t), "payment", wakeupNow); err != nil || len(reads.Reads) != 0 {
		t.Fatalf("default tenant: %+v %v", reads, err)
	}
	if reads, err := acme.Subscriptions(eventsCtx(t), "refund", wakeupNow); err != nil || len(reads.Reads) != 0 {
		t.Fatalf("another type: %+v %v", reads, err)
	}
}

func correlatedLookUpTheirBuckets(t *testing.T, r *store.Redis) {
	acme := tenantOf(t, r)
	since := wakeupNow.Add(-time.Minute)
	put := func(sub store.Subscription) { t.Helper(); must(t, acme.PutSubscription(eventsCtx(t), sub, time.Hour)) }
	num, _ := state.CorrelationValue(1.0)
	str, _ := state.CorrelationValue("1")
	put(corrSub("ex_num", since, time.Time{}, num, "n"))
	put(corrSub("ex_str", since, time.Time{}, str, "n"))
	put(corrSub("ex_nested", since, time.Time{}, `"A1"`, "data", "order"))
	put(corrSub("ex_timed_out", since, wakeupNow.Add(-time.Second), num, "n"))
	put(plainSub("ex_any", since, time.Time{}))

	events := []any{decodedJSON(t, `{"n":1}`), decodedJSON(t, `{"n":1.0,"data":{"order":"A1"}}`), decodedJSON(t, `{"n":"1"}`),
		decodedJSON(t, `{"n":null}`), decodedJSON(t, `{"other":2}`), decodedJSON(t, `"not an object"`)}
	w, err := acme.Waits(eventsCtx(t), "payment", events, wakeupNow)
	must(t, err)
	got := map[string][]int{}
	for _, cw := range w.Correlated {
		got[cw.ExecutionID] = cw.Events
		if cw.Since.UnixNano() != since.UnixNano() {
			t.Errorf("%s: since %s", cw.ExecutionID, cw.Since)
		}
	}
	if want := map[string][]int{"ex_num": {0, 1}, "ex_str": {2}, "ex_nested": {1}}; !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("correlated %v, want %v", got, want)
	}
	if w.Paths != 2 || len(w.Uncorrelated.Reads) != 1 || w.Uncorrelated.Reads[0].ExecutionID != "ex_any" || w.Invalid != 0 {
		t.Fatalf("paths %d, uncorrelated %+v, invalid %d", w.Paths, w.Uncorrelated.Reads, w.Invalid)
	}
	for data, want := range map[string]int64{`{"n":1}`: 2, `{"n":"1"}`: 2, `{"x":1}`: 1, `{"n":1,"data":{"order":"A1"}}`: 3} {
		if n, err := acme.WaitingFor(eventsCtx(t), "payment", decodedJSON(t, data), wakeupNow); err != nil || n != want {
			t.Fatalf("waiting for %s: %d %v, want %d", data, n, err, want)
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
	if ok, err := acme.RemoveCorrelatedWait(eventsCtx(t), "payment", first); !ok || err != nil {
		t.Fatalf("remove: %v %v", ok, err)
	}
	if ok, err := acme.RemoveCorrelatedWait(eventsCtx(t), "payment", first); ok || err != nil {
		t.Fatalf("second remove: %v %v", ok, err)
	}
	w, err = acme.Waits(eventsCtx(t), "payment", events[:1], wakeupNow)
	must(t, err)
	if len(w.Correlated) != 1 || !w.Correlated[0].Since.Equal(later) {
		t.Fatalf("after the removal: %+v", w.Correlated)
	}
}

func bucketsReadPastAPage(t *testing.T, r *store.Redis) {
	ts := tenantOf(t, r)
	const n = 1234
	for i := range n {
		must(t, ts.PutSubscription(eventsCtx(t), corrSub("ex_"+strconv.Itoa(i), wakeupNow.Add(-time.Duration(i)*time.Millisecond), time.Time{}, `"paid"`, "status"), time.Hour))
	}
	w, err := ts.Waits(eventsCtx(t), "payment", []any{decodedJSON(t, `{"status":"paid"}`)}, wakeupNow)
	must(t, err)
	seen := map[string]bool{}
	for _, cw := range w.Correlated {
		seen[cw.ExecutionID] = true
	}
	if len(w.Correlated) != n || len(seen) != n {
		t.Fatalf("%d members read (%d distinct), want %d", len(w.Correlated), len(seen), n)
	}
	for i := range 600 {
		must(t, ts.PutSubscription(eventsCtx(t), plainSub("ex_u"+strconv.Itoa(i), wakeupNow, time.Time{}), time.Hour))
	}
	if reads, err := ts.Subscriptions(eventsCtx(t), "payment", wakeupNow); err != nil || len(reads.Reads) != 600 {
		t.Fatalf("index past a page: %d %v", len(reads.Reads), err)
	}
}

func staleRemovedOnlyAsRead(t *testing.T, r *store.Redis) {
	acme := tenantOf(t, r)
	must(t, acme.PutSubscription(eventsCtx(t), plainSub("ex_s", wakeupNow.Add(-time.Minute), time.Time{}), time.Hour))
	reads, err := acme.Subscriptions(eventsCtx(t), "payment", wakeupNow)
	must(t, err)
	if len(reads.Reads) != 1 {
		t.Fatalf("reads %+v", reads)
	}
	raw := reads.Reads[0].Raw
	// The worker rewrote the record for a new suspension meanwhile: the read one is not removed.
	must(t, acme.PutSubscription(eventsCtx(t), plainSub("ex_s", wakeupNow, time.Time{}), time.Hour))
	if removed, err := acme.RemoveStaleSubscription(eventsCtx(t), "ex_s", "payment", raw); err != nil || removed {
		t.Fatalf("stale removal of a rewritten record: %v %v", removed, err)
	}
	reads, err = acme.Subscriptions(eventsCtx(t), "payment", wakeupNow)
	must(t, err)
	if len(reads.Reads) != 1 || reads.Reads[0].Missing {
		t.Fatalf("the current wait was removed: %+v", reads)
	}
	if removed, err := acme.RemoveStaleSubscription(eventsCtx(t), "ex_s", "payment", reads.Reads[0].Raw); err != nil || !removed {
		t.Fatalf("stale removal as read: %v %v", removed, err)
	}
	if reads, err = acme.Subscriptions(eventsCtx(t), "payment", wakeupNow); err != nil || len(reads.Reads) != 0 {
		t.Fatalf("after the stale removal: %+v %v", reads, err)
	}
	// A member that is no execution id has no record: the member alone goes.
	if removed, err := acme.RemoveStaleSubscription(eventsCtx(t), "bad:id", "payment", ""); err != nil || removed {
		t.Fatalf("removal of a member never written: %v %v", removed, err)
	}
}

func approvalRecords(t *testing.T, r *store.Redis) {
	acme := tenantOf(t, r)
	ap := store.Approval{ExecutionID: "ex_ap", FlowID: "f", FlowVersion: "1", Node: "ok", Since: wakeupNow}
	must(t, acme.PutApproval(eventsCtx(t), ap, time.Hour))
	must(t, acme.PutApproval(eventsCtx(t), ap, time.Hour)) // again: idempotent
	must(t, acme.RemoveApproval(eventsCtx(t), "ex_ap"))
	must(t, acme.RemoveApproval(eventsCtx(t), "ex_ap"))
	if err := acme.PutApproval(eventsCtx(t), ap, time.Millisecond); err == nil {
		t.Fatal("an approval with a TTL under a second was accepted")
	}
}
