package sqlite

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/store"
)

func denial(action, reason string) AuditEntry {
	return AuditEntry{Actor: "ann", ActorKind: ActorUser, Tenant: "acme", Action: action, Outcome: OutcomeDeny, Reason: reason, IP: "10.0.0.1"}
}

func TestAuditCoalescesDenials(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	first := must[AuditAppend](t)(f.AppendAudit(c, denial("flow.publish.denied", "role")))
	if first.Coalesced || first.ID == 0 {
		t.Fatalf("first denial: %+v", first)
	}
	// Within the window, the same key counts into the row.
	for i := 1; i <= 3; i++ {
		f.clock.Advance(10 * time.Second)
		a := must[AuditAppend](t)(f.AppendAudit(c, denial("flow.publish.denied", "role")))
		if !a.Coalesced || a.ID != first.ID || a.Suppressed != i {
			t.Fatalf("denial %d: %+v", i, a)
		}
	}
	lastAt := f.clock.Now()
	// Any part of the key differing is another row: the reason (bad_credentials vs locked),
	// the actor, the ip, the tenant, the action.
	others := []AuditEntry{denial("flow.publish.denied", "locked"), denial("flow.delete.denied", "role")}
	for _, mod := range []func(*AuditEntry){
		func(e *AuditEntry) { e.Actor = "bob" }, func(e *AuditEntry) { e.IP = "10.0.0.2" }, func(e *AuditEntry) { e.Tenant = "" },
	} {
		e := denial("flow.publish.denied", "role")
		mod(&e)
		others = append(others, e)
	}
	for _, e := range others {
		if a := must[AuditAppend](t)(f.AppendAudit(c, e)); a.Coalesced {
			t.Errorf("%+v was coalesced", e)
		}
	}
	// Allowed actions are never coalesced.
	allow := AuditEntry{Actor: "ann", ActorKind: ActorUser, Tenant: "acme", Action: "flow.publish", Outcome: OutcomeAllow}
	a1, a2 := must[AuditAppend](t)(f.AppendAudit(c, allow)), must[AuditAppend](t)(f.AppendAudit(c, allow))
	if a1.Coalesced || a2.Coalesced || a1.ID == a2.ID {
		t.Errorf("allowed actions coalesced: %+v %+v", a1, a2)
	}
	// The window is fixed from the row's first denial: 60 s after it, a new row starts.
	f.clock.Advance(30 * time.Second) // 60 s after the first
	if a := must[AuditAppend](t)(f.AppendAudit(c, denial("flow.publish.denied", "role"))); a.Coalesced {
		t.Errorf("a denial a window later was coalesced: %+v", a)
	}
	p := must[AuditPage](t)(f.ListAudit(c, AuditQuery{AllTenants: true}))
	var row AuditEntry
	for _, e := range p.Entries {
		if e.ID == first.ID {
			row = e
		}
	}
	if row.Suppressed != 3 || !row.LastAt.Equal(lastAt) || row.At.Equal(row.LastAt) {
		t.Errorf("coalesced row: %+v", row)
	}
	if len(p.Entries) != 1+len(others)+2+1 {
		t.Errorf("%d rows", len(p.Entries))
	}
}

func TestAuditEntries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	e := AuditEntry{Actor: "plk_x", ActorKind: ActorAPIKey, Tenant: "acme", Action: "dlq.replay", Target: "1700000000000-0", Outcome: OutcomeAllow,
		IP: "10.0.0.1", RequestID: "req-9", Reason: strings.Repeat("r", 1000), Details: json.RawMessage(`{ "target_tenant": "acme", "key_fingerprint": "abc" }`)}
	a := must[AuditAppend](t)(f.AppendAudit(c, e))
	got := must[AuditPage](t)(f.ListAudit(c, AuditQuery{Tenant: "acme"})).Entries[0]
	if got.ID != a.ID || !got.At.Equal(f.clock.Now()) || got.Action != "dlq.replay" || got.Target != e.Target || got.RequestID != "req-9" ||
		string(got.Details) != `{"target_tenant":"acme","key_fingerprint":"abc"}` || len(got.Reason) != 256 || got.ActorKind != ActorAPIKey {
		t.Errorf("row %+v", got)
	}
	// Oversized details are replaced, not refused.
	big := e
	big.Details = json.RawMessage(`{"x":"` + strings.Repeat("y", MaxAuditDetails) + `"}`)
	must[AuditAppend](t)(f.AppendAudit(c, big))
	if got := must[AuditPage](t)(f.ListAudit(c, AuditQuery{Tenant: "acme", Limit: 1})).Entries[0]; !strings.Contains(string(got.Details), "details_dropped_bytes") {
		t.Errorf("big details: %s", got.Details)
	}
	for name, bad := range map[string]AuditEntry{
		"no action":         {ActorKind: ActorUser, Outcome: OutcomeAllow},
		"action with space": {ActorKind: ActorUser, Outcome: OutcomeAllow, Action: "a b"},
		"outcome":           {ActorKind: ActorUser, Outcome: "maybe", Action: "a"},
		"actor kind":        {ActorKind: "robot", Outcome: OutcomeAllow, Action: "a"},
		"tenant":            {ActorKind: ActorUser, Outcome: OutcomeAllow, Action: "a", Tenant: "Bad Tenant"},
		"details array":     {ActorKind: ActorUser, Outcome: OutcomeAllow, Action: "a", Details: json.RawMessage(`[1]`)},
		"details garbage":   {ActorKind: ActorUser, Outcome: OutcomeAllow, Action: "a", Details: json.RawMessage(`{`)},
	} {
		_, err := f.AppendAudit(c, bad)
		wantErr(t, name, err, store.ErrInvalid, nil)
	}
}

func TestListAudit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	for i := range 260 {
		tenant := "acme"
		if i%5 == 0 {
			tenant = "other"
		}
		must[AuditAppend](t)(f.AppendAudit(c, AuditEntry{Actor: "ann", ActorKind: ActorUser, Tenant: tenant, Action: fmt.Sprintf("a.%d", i), Outcome: OutcomeAllow}))
	}
	must[AuditAppend](t)(f.AppendAudit(c, AuditEntry{ActorKind: ActorSystem, Action: "tenant_status.reconcile", Outcome: OutcomeAllow}))
	// Default 200, newest first, before_id pages on.
	p := must[AuditPage](t)(f.ListAudit(c, AuditQuery{Tenant: "acme"}))
	if p.Limit != DefaultAuditLimit || len(p.Entries) != 200 || p.Entries[0].Action != "a.259" || p.NextBeforeID != p.Entries[199].ID {
		t.Fatalf("first page: %d entries, limit %d, next %d, first %s", len(p.Entries), p.Limit, p.NextBeforeID, p.Entries[0].Action)
	}
	for _, e := range p.Entries {
		if e.Tenant != "acme" {
			t.Fatalf("another tenant's row: %+v", e)
		}
	}
	p = must[AuditPage](t)(f.ListAudit(c, AuditQuery{Tenant: "acme", BeforeID: p.NextBeforeID}))
	if len(p.Entries) != 8 || p.NextBeforeID != 0 || p.Entries[7].Action != "a.1" {
		t.Fatalf("second page: %+v", p)
	}
	if p := must[AuditPage](t)(f.ListAudit(c, AuditQuery{Tenant: "other", Limit: 1})); len(p.Entries) != 1 || p.Entries[0].Action != "a.255" || p.NextBeforeID == 0 {
		t.Errorf("other: %+v", p)
	}
	if p := must[AuditPage](t)(f.ListAudit(c, AuditQuery{})); len(p.Entries) != 1 || p.Entries[0].Action != "tenant_status.reconcile" {
		t.Errorf("platform rows: %+v", p)
	}
	if p := must[AuditPage](t)(f.ListAudit(c, AuditQuery{AllTenants: true, Limit: 5000})); p.Limit != MaxAuditLimit || len(p.Entries) != 261 {
		t.Errorf("all: limit %d, %d entries", p.Limit, len(p.Entries))
	}
	_, err := f.ListAudit(c, AuditQuery{Limit: -1})
	wantErr(t, "negative limit", err, store.ErrInvalid, nil)
	_, err = f.ListAudit(c, AuditQuery{BeforeID: -4})
	wantErr(t, "negative before_id", err, store.ErrInvalid, nil)
}

// Twenty goroutines append at once, allowed rows and denials of one key: the one writer
// connection queues them, so none fails with SQLITE_BUSY and the counts add up.
func TestConcurrentAuditAppends(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	const writers, each = 20, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e := AuditEntry{Actor: fmt.Sprintf("w%d", w), ActorKind: ActorUser, Tenant: "acme", Action: "flow.save", Outcome: OutcomeAllow}
				if i%2 == 1 {
					e = denial("flow.publish.denied", "role")
				}
				if _, err := f.AppendAudit(c, e); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// Readers at the same time.
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if _, err := f.ListAudit(c, AuditQuery{Tenant: "acme", Limit: 10}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	allowed, denials := 0, 0
	for _, e := range must[AuditPage](t)(f.ListAudit(c, AuditQuery{Tenant: "acme", Limit: MaxAuditLimit})).Entries {
		switch e.Outcome {
		case OutcomeAllow:
			allowed++
		case OutcomeDeny:
			denials += 1 + e.Suppressed
		}
	}
	if allowed != writers*((each+1)/2) || denials != writers*(each/2) {
		t.Errorf("%d allowed, %d denials", allowed, denials)
	}
	if n := f.count("audit WHERE outcome = 'deny'"); n != 1 {
		t.Errorf("%d denial rows, want 1 (one key, one window)", n)
	}
}
