package store_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
	"plaita/store/keys"
)

func (f *fixture) zscore(key, member string) (string, bool) {
	f.t.Helper()
	s, err := f.do(f.c.B().Zscore().Key(key).Member(member).Build()).ToString()
	if err != nil {
		return "", false
	}
	return s, true
}

func (f *fixture) tenant(tenant string) *store.TenantStore {
	f.t.Helper()
	ts, err := f.r.Tenant(tenant)
	f.must(err)
	return ts
}

// The records are byte for byte the formats of docs/wakeups.md: fields in order, times in UTC
// with nanoseconds, optional fields omitted.
func TestSubscriptionRecordAndIndex(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	acme := f.tenant("acme")
	cet := time.FixedZone("CET", 3600)
	since := time.Date(2026, 11, 29, 13, 0, 0, 123456789, cet)
	due := time.Date(2026, 11, 29, 12, 2, 0, 0, time.UTC)
	sub := store.Subscription{ExecutionID: "ex_1", TenantID: "ignored", FlowID: "orders", FlowVersion: "1", Node: "wait_paid",
		EventType: "order.paid", Match: "EVENT.order == INPUT.order", Since: since, ExpiresAt: due}
	for range 2 { // idempotent
		f.must(acme.PutSubscription(c, sub, time.Hour))
	}
	key, _ := acme.Space().Subscription("ex_1")
	idx, _ := acme.Space().SubscriptionIndex("order.paid")
	const want = `{"execution_id":"ex_1","tenant_id":"acme","flow_id":"orders","flow_version":"1","node":"wait_paid",` +
		`"event_type":"order.paid","match":"EVENT.order == INPUT.order","since":"2026-11-29T12:00:00.123456789Z",` +
		`"expires_at":"2026-11-29T12:02:00Z"}`
	if got, _ := f.get(key); got != want {
		t.Errorf("record\n got %s\nwant %s", got, want)
	}
	if ttl := f.ttl(key); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("record TTL %s", ttl)
	}
	if s, ok := f.zscore(idx, "ex_1"); !ok || s != "1795953720000" {
		t.Errorf("index score %q %v, want expires_at in ms", s, ok)
	}
	if ttl := f.ttl(idx); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("index TTL %s", ttl)
	}
	if n, _ := f.do(f.c.B().Zcard().Key(idx).Build()).AsInt64(); n != 1 {
		t.Errorf("index holds %d members after two registrations", n)
	}
	var back store.Subscription
	if raw, _ := f.get(key); json.Unmarshal([]byte(raw), &back) != nil || !back.Since.Equal(since) || !back.ExpiresAt.Equal(due) {
		t.Errorf("decoded %+v", back)
	}

	// Without a timeout and a match: the fields are omitted and the score is +inf; a longer
	// TTL refreshes the index's.
	f.must(f.ts.PutSubscription(c, store.Subscription{ExecutionID: "ex_2", FlowID: "f", FlowVersion: "2", Node: "w",
		EventType: "order.paid", Since: due}, 2*time.Hour))
	key2, _ := f.ts.Space().Subscription("ex_2")
	idx2, _ := f.ts.Space().SubscriptionIndex("order.paid")
	const want2 = `{"execution_id":"ex_2","tenant_id":"default","flow_id":"f","flow_version":"2","node":"w",` +
		`"event_type":"order.paid","since":"2026-11-29T12:02:00Z"}`
	if got, _ := f.get(key2); got != want2 {
		t.Errorf("record\n got %s\nwant %s", got, want2)
	}
	if s, ok := f.zscore(idx2, "ex_2"); !ok || s != "inf" {
		t.Errorf("index score %q %v, want inf", s, ok)
	}
	if idx2 == idx {
		t.Fatalf("tenants share an index: %s", idx)
	}

	// Removal takes the record and the member, nothing else.
	f.must(f.ts.PutSubscription(c, store.Subscription{ExecutionID: "ex_3", EventType: "order.paid", Since: due}, time.Hour))
	for range 2 {
		f.must(f.ts.RemoveSubscription(c, "ex_2", "order.paid"))
	}
	if f.exists(key2) {
		t.Error("record still there after removal")
	}
	if _, ok := f.zscore(idx2, "ex_2"); ok {
		t.Error("member still there after removal")
	}
	if _, ok := f.zscore(idx2, "ex_3"); !ok {
		t.Error("removal took another execution's member")
	}
}

func TestApprovalRecordAndIndex(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	since := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	due := since.Add(24 * time.Hour)
	f.must(f.ts.PutApproval(c, store.Approval{ExecutionID: "ex_1", FlowID: "expense", FlowVersion: "1", Node: "manager_approval",
		Message: "Approve 700 for sam?", Since: since, Due: due}, time.Hour))
	key, _ := f.ts.Space().Approval("ex_1")
	const want = `{"execution_id":"ex_1","tenant_id":"default","flow_id":"expense","flow_version":"1",` +
		`"node":"manager_approval","message":"Approve 700 for sam?","since":"2026-11-29T12:00:00Z","due":"2026-11-30T12:00:00Z"}`
	if got, _ := f.get(key); got != want {
		t.Errorf("record\n got %s\nwant %s", got, want)
	}
	if ttl := f.ttl(key); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("record TTL %s", ttl)
	}
	idx := f.ts.Space().ApprovalIndex()
	if s, ok := f.zscore(idx, "ex_1"); !ok || s != "1795953600000" {
		t.Errorf("index score %q %v, want since in ms", s, ok)
	}
	if ttl := f.ttl(idx); ttl != -1 {
		t.Errorf("the pending-approval index has TTL %s; it lists what waits for an answer", ttl)
	}
	// No message, no due: both omitted.
	f.must(f.ts.PutApproval(c, store.Approval{ExecutionID: "ex_2", FlowID: "expense", FlowVersion: "1", Node: "n", Since: since}, time.Hour))
	key2, _ := f.ts.Space().Approval("ex_2")
	const want2 = `{"execution_id":"ex_2","tenant_id":"default","flow_id":"expense","flow_version":"1","node":"n",` +
		`"since":"2026-11-29T12:00:00Z"}`
	if got, _ := f.get(key2); got != want2 {
		t.Errorf("record\n got %s\nwant %s", got, want2)
	}
	for range 2 {
		f.must(f.ts.RemoveApproval(c, "ex_1"))
	}
	if f.exists(key) {
		t.Error("record still there after removal")
	}
	if _, ok := f.zscore(idx, "ex_1"); ok {
		t.Error("member still there after removal")
	}
	if _, ok := f.zscore(idx, "ex_2"); !ok {
		t.Error("removal took another execution's member")
	}
}

func TestWakeupRecordsRefuseBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	now := time.Now()
	cases := map[string]struct {
		err  error
		want error
	}{
		"subscription id":   {f.ts.PutSubscription(c, store.Subscription{ExecutionID: "a:b", EventType: "t", Since: now}, time.Hour), keys.ErrBadID},
		"event type":        {f.ts.PutSubscription(c, store.Subscription{ExecutionID: "ex_1", EventType: "a b", Since: now}, time.Hour), keys.ErrBadName},
		"subscription TTL":  {f.ts.PutSubscription(c, store.Subscription{ExecutionID: "ex_1", EventType: "t", Since: now}, time.Millisecond), store.ErrInvalid},
		"approval id":       {f.ts.PutApproval(c, store.Approval{ExecutionID: "{x}", Since: now}, time.Hour), keys.ErrBadID},
		"approval TTL":      {f.ts.PutApproval(c, store.Approval{ExecutionID: "ex_1", Since: now}, 0), store.ErrInvalid},
		"remove event type": {f.ts.RemoveSubscription(c, "ex_1", ""), keys.ErrBadName},
		"remove approval":   {f.ts.RemoveApproval(c, ""), keys.ErrBadID},
	}
	for name, tc := range cases {
		if !errors.Is(tc.err, tc.want) || model.IsTransient(tc.err) {
			t.Errorf("%s: %v, want %v (permanent)", name, tc.err, tc.want)
		}
	}
	if written := f.scan(); len(written) != 0 {
		t.Errorf("refused writes left %v", written)
	}
}
