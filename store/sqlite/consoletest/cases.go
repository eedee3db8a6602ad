package consoletest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/engine"
	"plaita/store"
	"plaita/store/sqlite"
)

func testTenants(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	acme := must[sqlite.Tenant](t)(f.CreateTenant(c, sqlite.NewTenant{Slug: "acme", Name: "Acme Corp"}))
	if acme.Status != sqlite.TenantActive || acme.StatusEpoch != 1 || !acme.CreatedAt.Equal(f.clock.Now()) || acme.Name != "Acme Corp" {
		t.Fatalf("created: %+v", acme)
	}
	if got := must[sqlite.Tenant](t)(f.Tenant(c, "acme")); got != acme {
		t.Errorf("read back %+v, want %+v", got, acme)
	}
	// Refusals.
	_, err := f.CreateTenant(c, sqlite.NewTenant{Slug: "acme"})
	wantErr(t, "a taken slug", err, sqlite.ErrExists, sqlite.ErrTenantExists)
	_, err = f.CreateTenant(c, sqlite.NewTenant{Slug: "default"})
	wantErr(t, "the default tenant", err, sqlite.ErrExists, sqlite.ErrTenantExists)
	for _, slug := range []string{"Acme", "a:b", "execution", "a b"} {
		_, err = f.CreateTenant(c, sqlite.NewTenant{Slug: slug})
		wantErr(t, "slug "+slug, err, store.ErrInvalid, nil)
	}
	_, err = f.CreateTenant(c, sqlite.NewTenant{Slug: "ok", Name: "line\nbreak"})
	wantErr(t, "a name with a control character", err, store.ErrInvalid, nil)
	_, err = f.CreateTenant(c, sqlite.NewTenant{Slug: "ok", Status: "paused"})
	wantErr(t, "an unknown status", err, store.ErrInvalid, nil)
	_, err = f.Tenant(c, "nobody")
	wantErr(t, "an unknown tenant", err, store.ErrNotFound, sqlite.ErrTenantNotFound)

	// Status changes move the epoch; setting the same status does not.
	f.clock.Advance(time.Second)
	ch := must[sqlite.StatusChange](t)(f.SetTenantStatus(c, "acme", sqlite.TenantDisabled))
	if !ch.Changed || ch.Previous != sqlite.TenantActive || ch.Tenant.Status != sqlite.TenantDisabled || ch.Tenant.StatusEpoch != 2 || !ch.Tenant.UpdatedAt.Equal(f.clock.Now()) {
		t.Errorf("disable: %+v", ch)
	}
	ch = must[sqlite.StatusChange](t)(f.SetTenantStatus(c, "acme", sqlite.TenantDisabled))
	if ch.Changed || ch.Tenant.StatusEpoch != 2 {
		t.Errorf("disable again: %+v", ch)
	}
	_, err = f.SetTenantStatus(c, "nobody", sqlite.TenantDisabled)
	wantErr(t, "status of an unknown tenant", err, store.ErrNotFound, sqlite.ErrTenantNotFound)
	_, err = f.SetTenantStatus(c, "acme", "gone")
	wantErr(t, "an unknown status", err, store.ErrInvalid, nil)

	renamed := must[sqlite.Tenant](t)(f.RenameTenant(c, "acme", "Acme Ltd"))
	if renamed.Name != "Acme Ltd" || renamed.StatusEpoch != 2 {
		t.Errorf("rename: %+v", renamed)
	}

	// Deleting: only a disabled tenant, never the default one; its members, keys and drafts go.
	must[sqlite.Tenant](t)(f.CreateTenant(c, sqlite.NewTenant{Slug: "live"}))
	wantErr(t, "delete an active tenant", f.DeleteTenant(c, "live"), sqlite.ErrPrecondition, sqlite.ErrTenantActive)
	wantErr(t, "delete the default tenant", f.DeleteTenant(c, ""), store.ErrInvalid, sqlite.ErrDefaultTenant)
	wantErr(t, "delete an unknown tenant", f.DeleteTenant(c, "nobody"), store.ErrNotFound, sqlite.ErrTenantNotFound)
	u := must[sqlite.User](t)(f.CreateUser(c, sqlite.NewUser{Login: "ann", Password: "correct horse"}))
	must[sqlite.Membership](t)(f.SetMembership(c, u.ID, "acme", sqlite.RoleAdmin))
	if _, _, err := f.CreateAPIKey(c, sqlite.NewAPIKey{Tenant: "acme", Name: "ci", Role: sqlite.RoleEditor}); err != nil {
		t.Fatal(err)
	}
	must[sqlite.Draft](t)(f.SaveDraft(c, sqlite.DraftSave{Tenant: "acme", FlowID: "f", Definition: []byte(`{}`), By: "ann"}))
	must[sqlite.AuditAppend](t)(f.AppendAudit(c, sqlite.AuditEntry{Actor: "ann", ActorKind: sqlite.ActorUser, Tenant: "acme", Action: "tenant.disable", Outcome: sqlite.OutcomeAllow}))
	if err := f.DeleteTenant(c, "acme"); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"memberships", "api_keys", "flows"} {
		if n := f.count(table); n != 0 {
			t.Errorf("%d rows of %s left after the tenant went", n, table)
		}
	}
	if n := f.count("audit"); n != 1 {
		t.Errorf("the audit lost the deleted tenant's rows: %d", n)
	}
}

func testListTenantsPages(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	for i := range 7 {
		must[sqlite.Tenant](t)(f.CreateTenant(c, sqlite.NewTenant{Slug: fmt.Sprintf("t%02d", i)}))
	}
	var slugs []string
	cursor := ""
	for pages := 0; ; pages++ {
		p := must[sqlite.Page[sqlite.Tenant]](t)(f.ListTenants(c, sqlite.ListOptions{Cursor: cursor, Limit: 3}))
		if p.Limit != 3 || len(p.Items) > 3 {
			t.Fatalf("page %+v", p)
		}
		for _, tn := range p.Items {
			slugs = append(slugs, tn.Slug)
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
		if pages > 5 {
			t.Fatal("the pages never end")
		}
	}
	want := []string{"default", "t00", "t01", "t02", "t03", "t04", "t05", "t06"}
	if fmt.Sprint(slugs) != fmt.Sprint(want) {
		t.Errorf("pages %v, want %v", slugs, want)
	}
	all := must[[]sqlite.Tenant](t)(f.AllTenants(c))
	if len(all) != 8 {
		t.Errorf("all tenants: %d", len(all))
	}
	// The limit is bounded; a bad cursor, another list's cursor and a negative limit are refused.
	if p := must[sqlite.Page[sqlite.Tenant]](t)(f.ListTenants(c, sqlite.ListOptions{Limit: 100000})); p.Limit != sqlite.MaxLimit {
		t.Errorf("limit %d, want %d", p.Limit, sqlite.MaxLimit)
	}
	if p := must[sqlite.Page[sqlite.Tenant]](t)(f.ListTenants(c, sqlite.ListOptions{})); p.Limit != sqlite.DefaultLimit || p.Next != "" {
		t.Errorf("default page: %+v", p)
	}
	_, err := f.ListTenants(c, sqlite.ListOptions{Limit: -1})
	wantErr(t, "negative limit", err, store.ErrInvalid, nil)
	_, err = f.ListTenants(c, sqlite.ListOptions{Cursor: "!!"})
	wantErr(t, "garbage cursor", err, store.ErrInvalid, sqlite.ErrBadCursor)
	for _, login := range []string{"ann", "bob"} {
		must[sqlite.User](t)(f.CreateUser(c, sqlite.NewUser{Login: login, Password: "correct horse"}))
	}
	users := must[sqlite.Page[sqlite.User]](t)(f.ListUsers(c, sqlite.ListOptions{Limit: 1}))
	if users.Next == "" {
		t.Fatal("no next cursor for two users, one a page")
	}
	_, err = f.ListTenants(c, sqlite.ListOptions{Cursor: users.Next})
	wantErr(t, "another list's cursor", err, store.ErrInvalid, sqlite.ErrBadCursor)
	if errors.Is(err, store.ErrNotFound) {
		t.Error("a bad cursor matches two classes")
	}
}

func denial(action, reason string) sqlite.AuditEntry {
	return sqlite.AuditEntry{Actor: "ann", ActorKind: sqlite.ActorUser, Tenant: "acme", Action: action, Outcome: sqlite.OutcomeDeny, Reason: reason, IP: "10.0.0.1"}
}

func testAuditCoalescesDenials(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	first := must[sqlite.AuditAppend](t)(f.AppendAudit(c, denial("flow.publish.denied", "role")))
	if first.Coalesced || first.ID == 0 {
		t.Fatalf("first denial: %+v", first)
	}
	// Within the window, the same key counts into the row.
	for i := 1; i <= 3; i++ {
		f.clock.Advance(10 * time.Second)
		a := must[sqlite.AuditAppend](t)(f.AppendAudit(c, denial("flow.publish.denied", "role")))
		if !a.Coalesced || a.ID != first.ID || a.Suppressed != i {
			t.Fatalf("denial %d: %+v", i, a)
		}
	}
	lastAt := f.clock.Now()
	// Any part of the key differing is another row: the reason (bad_credentials vs locked),
	// the actor, the ip, the tenant, the action.
	others := []sqlite.AuditEntry{denial("flow.publish.denied", "locked"), denial("flow.delete.denied", "role")}
	for _, mod := range []func(*sqlite.AuditEntry){
		func(e *sqlite.AuditEntry) { e.Actor = "bob" }, func(e *sqlite.AuditEntry) { e.IP = "10.0.0.2" }, func(e *sqlite.AuditEntry) { e.Tenant = "" },
	} {
		e := denial("flow.publish.denied", "role")
		mod(&e)
		others = append(others, e)
	}
	for _, e := range others {
		if a := must[sqlite.AuditAppend](t)(f.AppendAudit(c, e)); a.Coalesced {
			t.Errorf("%+v was coalesced", e)
		}
	}
	// Allowed actions are never coalesced.
	allow := sqlite.AuditEntry{Actor: "ann", ActorKind: sqlite.ActorUser, Tenant: "acme", Action: "flow.publish", Outcome: sqlite.OutcomeAllow}
	a1, a2 := must[sqlite.AuditAppend](t)(f.AppendAudit(c, allow)), must[sqlite.AuditAppend](t)(f.AppendAudit(c, allow))
	if a1.Coalesced || a2.Coalesced || a1.ID == a2.ID {
		t.Errorf("allowed actions coalesced: %+v %+v", a1, a2)
	}
	// The window is fixed from the row's first denial: 60 s after it, a new row starts.
	f.clock.Advance(30 * time.Second) // 60 s after the first
	if a := must[sqlite.AuditAppend](t)(f.AppendAudit(c, denial("flow.publish.denied", "role"))); a.Coalesced {
		t.Errorf("a denial a window later was coalesced: %+v", a)
	}
	p := must[sqlite.AuditPage](t)(f.ListAudit(c, sqlite.AuditQuery{AllTenants: true}))
	var row sqlite.AuditEntry
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

func testAuditEntries(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	e := sqlite.AuditEntry{Actor: "plk_x", ActorKind: sqlite.ActorAPIKey, Tenant: "acme", Action: "dlq.replay", Target: "1700000000000-0", Outcome: sqlite.OutcomeAllow,
		IP: "10.0.0.1", RequestID: "req-9", Reason: strings.Repeat("r", 1000), Details: json.RawMessage(`{ "target_tenant": "acme", "key_fingerprint": "abc" }`)}
	a := must[sqlite.AuditAppend](t)(f.AppendAudit(c, e))
	got := must[sqlite.AuditPage](t)(f.ListAudit(c, sqlite.AuditQuery{Tenant: "acme"})).Entries[0]
	if got.ID != a.ID || !got.At.Equal(f.clock.Now()) || got.Action != "dlq.replay" || got.Target != e.Target || got.RequestID != "req-9" ||
		string(got.Details) != `{"target_tenant":"acme","key_fingerprint":"abc"}` || len(got.Reason) != 256 || got.ActorKind != sqlite.ActorAPIKey {
		t.Errorf("row %+v", got)
	}
	// Oversized details are replaced, not refused.
	big := e
	big.Details = json.RawMessage(`{"x":"` + strings.Repeat("y", sqlite.MaxAuditDetails) + `"}`)
	must[sqlite.AuditAppend](t)(f.AppendAudit(c, big))
	if got := must[sqlite.AuditPage](t)(f.ListAudit(c, sqlite.AuditQuery{Tenant: "acme", Limit: 1})).Entries[0]; !strings.Contains(string(got.Details), "details_dropped_bytes") {
		t.Errorf("big details: %s", got.Details)
	}
	for name, bad := range map[string]sqlite.AuditEntry{
		"no action":         {ActorKind: sqlite.ActorUser, Outcome: sqlite.OutcomeAllow},
		"action with space": {ActorKind: sqlite.ActorUser, Outcome: sqlite.OutcomeAllow, Action: "a b"},
		"outcome":           {ActorKind: sqlite.ActorUser, Outcome: "maybe", Action: "a"},
		"actor kind":        {ActorKind: "robot", Outcome: sqlite.OutcomeAllow, Action: "a"},
		"tenant":            {ActorKind: sqlite.ActorUser, Outcome: sqlite.OutcomeAllow, Action: "a", Tenant: "Bad sqlite.Tenant"},
		"details array":     {ActorKind: sqlite.ActorUser, Outcome: sqlite.OutcomeAllow, Action: "a", Details: json.RawMessage(`[1]`)},
		"details garbage":   {ActorKind: sqlite.ActorUser, Outcome: sqlite.OutcomeAllow, Action: "a", Details: json.RawMessage(`{`)},
	} {
		_, err := f.AppendAudit(c, bad)
		wantErr(t, name, err, store.ErrInvalid, nil)
	}
}

func testListAudit(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	for i := range 260 {
		tenant := "acme"
		if i%5 == 0 {
			tenant = "other"
		}
		must[sqlite.AuditAppend](t)(f.AppendAudit(c, sqlite.AuditEntry{Actor: "ann", ActorKind: sqlite.ActorUser, Tenant: tenant, Action: fmt.Sprintf("a.%d", i), Outcome: sqlite.OutcomeAllow}))
	}
	must[sqlite.AuditAppend](t)(f.AppendAudit(c, sqlite.AuditEntry{ActorKind: sqlite.ActorSystem, Action: "tenant_status.reconcile", Outcome: sqlite.OutcomeAllow}))
	// Default 200, newest first, before_id pages on.
	p := must[sqlite.AuditPage](t)(f.ListAudit(c, sqlite.AuditQuery{Tenant: "acme"}))
	if p.Limit != sqlite.DefaultAuditLimit || len(p.Entries) != 200 || p.Entries[0].Action != "a.259" || p.NextBeforeID != p.Entries[199].ID {
		t.Fatalf("first page: %d entries, limit %d, next %d, first %s", len(p.Entries), p.Limit, p.NextBeforeID, p.Entries[0].Action)
	}
	for _, e := range p.Entries {
		if e.Tenant != "acme" {
			t.Fatalf("another tenant's row: %+v", e)
		}
	}
	p = must[sqlite.AuditPage](t)(f.ListAudit(c, sqlite.AuditQuery{Tenant: "acme", BeforeID: p.NextBeforeID}))
	if len(p.Entries) != 8 || p.NextBeforeID != 0 || p.Entries[7].Action != "a.1" {
		t.Fatalf("second page: %+v", p)
	}
	if p := must[sqlite.AuditPage](t)(f.ListAudit(c, sqlite.AuditQuery{Tenant: "other", Limit: 1})); len(p.Entries) != 1 || p.Entries[0].Action != "a.255" || p.NextBeforeID == 0 {
		t.Errorf("other: %+v", p)
	}
	if p := must[sqlite.AuditPage](t)(f.ListAudit(c, sqlite.AuditQuery{})); len(p.Entries) != 1 || p.Entries[0].Action != "tenant_status.reconcile" {
		t.Errorf("platform rows: %+v", p)
	}
	if p := must[sqlite.AuditPage](t)(f.ListAudit(c, sqlite.AuditQuery{AllTenants: true, Limit: 5000})); p.Limit != sqlite.MaxAuditLimit || len(p.Entries) != 261 {
		t.Errorf("all: limit %d, %d entries", p.Limit, len(p.Entries))
	}
	_, err := f.ListAudit(c, sqlite.AuditQuery{Limit: -1})
	wantErr(t, "negative limit", err, store.ErrInvalid, nil)
	_, err = f.ListAudit(c, sqlite.AuditQuery{BeforeID: -4})
	wantErr(t, "negative before_id", err, store.ErrInvalid, nil)
}

// Twenty goroutines append at once, allowed rows and denials of one key: the one writer
// connection queues them, so none fails with SQLITE_BUSY and the counts add up.
func testConcurrentAuditAppends(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	const writers, each = 20, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e := sqlite.AuditEntry{Actor: fmt.Sprintf("w%d", w), ActorKind: sqlite.ActorUser, Tenant: "acme", Action: "flow.save", Outcome: sqlite.OutcomeAllow}
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
				if _, err := f.ListAudit(c, sqlite.AuditQuery{Tenant: "acme", Limit: 10}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	allowed, denials := 0, 0
	for _, e := range must[sqlite.AuditPage](t)(f.ListAudit(c, sqlite.AuditQuery{Tenant: "acme", Limit: sqlite.MaxAuditLimit})).Entries {
		switch e.Outcome {
		case sqlite.OutcomeAllow:
			allowed++
		case sqlite.OutcomeDeny:
			denials += 1 + e.Suppressed
		}
	}
	if allowed != writers*((each+1)/2) || denials != writers*(each/2) {
		t.Errorf("%d allowed, %d denials", allowed, denials)
	}
	denialRows := 0
	for _, e := range must[sqlite.AuditPage](t)(f.ListAudit(c, sqlite.AuditQuery{Tenant: "acme", Limit: sqlite.MaxAuditLimit})).Entries {
		if e.Outcome == sqlite.OutcomeDeny {
			denialRows++
		}
	}
	if n := denialRows; n != 1 {
		t.Errorf("%d denial rows, want 1 (one key, one window)", n)
	}
}

func testJobs(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	j := must[sqlite.Job](t)(f.CreateJob(c, sqlite.NewJob{Tenant: "acme", Kind: "executions.cancel", Filter: json.RawMessage(`{"status": "suspended"}`), Total: 3, CreatedBy: "ann"}))
	if j.Status != sqlite.JobPending || j.Total != 3 || string(j.Filter) != `{"status":"suspended"}` || !strings.HasPrefix(j.ID, "job_") {
		t.Fatalf("created: %+v", j)
	}
	j = must[sqlite.Job](t)(f.UpdateJob(c, "acme", j.ID, sqlite.JobUpdate{Status: sqlite.JobRunning, AddSucceeded: 1}))
	j = must[sqlite.Job](t)(f.UpdateJob(c, "acme", j.ID, sqlite.JobUpdate{AddSucceeded: 1, AddFailed: 1, Failures: []sqlite.JobFailure{{Item: "ex_3", Error: "lease held"}}}))
	if j.Status != sqlite.JobRunning || j.Succeeded != 2 || j.Failed != 1 || len(j.Failures) != 1 || j.Failures[0].Item != "ex_3" {
		t.Fatalf("progress: %+v", j)
	}
	total := 4
	j = must[sqlite.Job](t)(f.UpdateJob(c, "acme", j.ID, sqlite.JobUpdate{Total: &total, Status: sqlite.JobCompleted}))
	if got := must[sqlite.Job](t)(f.Job(c, "acme", j.ID)); got.Status != sqlite.JobCompleted || got.Total != 4 || len(got.Failures) != 1 {
		t.Errorf("read back: %+v", got)
	}
	_, err := f.UpdateJob(c, "acme", j.ID, sqlite.JobUpdate{AddSucceeded: 1})
	wantErr(t, "update a finished job", err, sqlite.ErrPrecondition, sqlite.ErrJobFinished)
	// Another tenant sees no such job.
	_, err = f.Job(c, "other", j.ID)
	wantErr(t, "another tenant's job", err, store.ErrNotFound, sqlite.ErrJobNotFound)
	_, err = f.UpdateJob(c, "other", j.ID, sqlite.JobUpdate{})
	wantErr(t, "update another tenant's job", err, store.ErrNotFound, sqlite.ErrJobNotFound)
	// Failures are kept up to the bound and counted beyond it.
	k := must[sqlite.Job](t)(f.CreateJob(c, sqlite.NewJob{Tenant: "acme", Kind: "executions.delete", DryRun: true}))
	many := make([]sqlite.JobFailure, sqlite.MaxJobFailures+5)
	for i := range many {
		many[i] = sqlite.JobFailure{Item: fmt.Sprintf("ex_%d", i), Error: strings.Repeat("e", 5000)}
	}
	k = must[sqlite.Job](t)(f.UpdateJob(c, "acme", k.ID, sqlite.JobUpdate{AddFailed: len(many), Failures: many}))
	if len(k.Failures) != sqlite.MaxJobFailures || k.FailuresDropped != 5 || len(k.Failures[0].Error) != sqlite.MaxJobFailureError || !k.DryRun || string(k.Filter) != "{}" {
		t.Errorf("bounded failures: %d kept, %d dropped", len(k.Failures), k.FailuresDropped)
	}
	for name, bad := range map[string]sqlite.NewJob{
		"kind":   {Tenant: "acme", Kind: "Bulk Cancel"},
		"filter": {Tenant: "acme", Kind: "x", Filter: json.RawMessage(`[1]`)},
		"total":  {Tenant: "acme", Kind: "x", Total: -1},
		"tenant": {Tenant: "A", Kind: "x"},
	} {
		_, err := f.CreateJob(c, bad)
		wantErr(t, name, err, store.ErrInvalid, nil)
	}
	_, err = f.UpdateJob(c, "acme", k.ID, sqlite.JobUpdate{AddFailed: -1})
	wantErr(t, "a negative count", err, store.ErrInvalid, nil)
	_, err = f.UpdateJob(c, "acme", k.ID, sqlite.JobUpdate{Status: "done"})
	wantErr(t, "an unknown status", err, store.ErrInvalid, nil)

	// Newest first, paged, without failures.
	f.clock.Advance(time.Second)
	newest := must[sqlite.Job](t)(f.CreateJob(c, sqlite.NewJob{Tenant: "acme", Kind: "executions.resume"}))
	p := must[sqlite.Page[sqlite.Job]](t)(f.ListJobs(c, "acme", sqlite.ListOptions{Limit: 2}))
	if len(p.Items) != 2 || p.Items[0].ID != newest.ID || p.Next == "" {
		t.Fatalf("jobs page 1: %+v", p)
	}
	for _, it := range p.Items {
		if len(it.Failures) != 0 {
			t.Errorf("a listed job carries its failures: %s", it.ID)
		}
	}
	p = must[sqlite.Page[sqlite.Job]](t)(f.ListJobs(c, "acme", sqlite.ListOptions{Limit: 2, Cursor: p.Next}))
	if len(p.Items) != 1 || p.Next != "" {
		t.Fatalf("jobs page 2: %+v", p)
	}
}

func testDrafts(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	must[sqlite.Tenant](t)(f.CreateTenant(c, sqlite.NewTenant{Slug: "acme"}))
	def := json.RawMessage(`{"id": "order",  "nodes": []}`)
	d := must[sqlite.Draft](t)(f.SaveDraft(c, sqlite.DraftSave{Tenant: "acme", FlowID: "order", Definition: def, By: "ann"}))
	if d.Revision != 1 || string(d.Definition) != string(def) || d.UpdatedBy != "ann" {
		t.Fatalf("saved: %+v", d)
	}
	f.clock.Advance(time.Second)
	d = must[sqlite.Draft](t)(f.SaveDraft(c, sqlite.DraftSave{Tenant: "acme", FlowID: "order", Definition: json.RawMessage(`{"id":"order","v":2}`), By: "bob", IfRevision: 1}))
	if d.Revision != 2 || d.UpdatedBy != "bob" || !d.UpdatedAt.After(d.CreatedAt) {
		t.Fatalf("saved again: %+v", d)
	}
	// An editor that started from revision 1 is refused: someone saved in between.
	_, err := f.SaveDraft(c, sqlite.DraftSave{Tenant: "acme", FlowID: "order", Definition: def, By: "ann", IfRevision: 1})
	wantErr(t, "a stale revision", err, sqlite.ErrPrecondition, sqlite.ErrDraftChanged)
	_, err = f.SaveDraft(c, sqlite.DraftSave{Tenant: "acme", FlowID: "new", Definition: def, By: "ann", IfRevision: 3})
	wantErr(t, "a revision of a draft that does not exist", err, sqlite.ErrPrecondition, sqlite.ErrDraftChanged)
	_, err = f.SaveDraft(c, sqlite.DraftSave{Tenant: "acme", FlowID: "order", Definition: def, By: "ann", Create: true})
	wantErr(t, "a creation of a draft that exists", err, sqlite.ErrExists, sqlite.ErrDraftExists)
	if got := must[sqlite.Draft](t)(f.Draft(c, "acme", "order")); string(got.Definition) != `{"id":"order","v":2}` {
		t.Errorf("a refused save changed the draft: %s", got.Definition)
	}
	for name, bad := range map[string]sqlite.DraftSave{
		"not JSON":  {Tenant: "acme", FlowID: "x", Definition: json.RawMessage(`{nope`)},
		"empty":     {Tenant: "acme", FlowID: "x"},
		"too large": {Tenant: "acme", FlowID: "x", Definition: json.RawMessage(`"` + strings.Repeat("x", sqlite.MaxDefinitionBytes) + `"`)},
		"flow id":   {Tenant: "acme", FlowID: "a:b", Definition: def},
	} {
		_, err := f.SaveDraft(c, bad)
		wantErr(t, name, err, store.ErrInvalid, nil)
	}
	_, err = f.SaveDraft(c, sqlite.DraftSave{Tenant: "nowhere", FlowID: "x", Definition: def})
	wantErr(t, "an unknown tenant", err, store.ErrNotFound, sqlite.ErrTenantNotFound)
	_, err = f.Draft(c, "default", "order")
	wantErr(t, "another tenant's draft", err, store.ErrNotFound, sqlite.ErrDraftNotFound)

	for _, id := range []string{"b", "a", "c"} {
		must[sqlite.Draft](t)(f.SaveDraft(c, sqlite.DraftSave{Tenant: "acme", FlowID: id, Definition: def, By: "ann"}))
	}
	p := must[sqlite.Page[sqlite.Draft]](t)(f.ListDrafts(c, "acme", sqlite.ListOptions{Limit: 3}))
	if len(p.Items) != 3 || p.Items[0].FlowID != "a" || p.Items[0].Definition != nil || p.Next == "" {
		t.Fatalf("drafts page 1: %+v", p)
	}
	p = must[sqlite.Page[sqlite.Draft]](t)(f.ListDrafts(c, "acme", sqlite.ListOptions{Cursor: p.Next}))
	if len(p.Items) != 1 || p.Items[0].FlowID != "order" {
		t.Fatalf("drafts page 2: %+v", p)
	}
	if err := f.DeleteDraft(c, "acme", "order"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "delete again", f.DeleteDraft(c, "acme", "order"), store.ErrNotFound, sqlite.ErrDraftNotFound)
	if sqlite.MaxDefinitionBytes != engine.MaxFlowBytes {
		t.Errorf("sqlite.MaxDefinitionBytes %d, engine.MaxFlowBytes %d", sqlite.MaxDefinitionBytes, engine.MaxFlowBytes)
	}
}

func testFlowVersions(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	must[sqlite.Tenant](t)(f.CreateTenant(c, sqlite.NewTenant{Slug: "acme"}))
	v1 := sqlite.FlowVersion{Tenant: "acme", FlowID: "order", Version: "1", Definition: json.RawMessage(`{"id":"order"}`), Hash: "h1", HashAlgo: "fh2", PublishedBy: "ann"}
	rec, dup, err := f.RecordVersion(c, v1)
	if err != nil || dup || rec.Seq != 1 || !rec.PublishedAt.Equal(f.clock.Now()) {
		t.Fatalf("recorded: %+v %v %v", rec, dup, err)
	}
	// The same version again is a duplicate; with another definition it is refused.
	f.clock.Advance(time.Second)
	if again, dup, err := f.RecordVersion(c, v1); err != nil || !dup || again.Seq != 1 || !again.PublishedAt.Equal(rec.PublishedAt) {
		t.Fatalf("again: %+v %v %v", again, dup, err)
	}
	changed := v1
	changed.Definition, changed.Hash = json.RawMessage(`{"id":"order","x":1}`), "h1b"
	_, _, err = f.RecordVersion(c, changed)
	wantErr(t, "a version with another definition", err, sqlite.ErrExists, sqlite.ErrVersionExists)
	for i := 2; i <= 4; i++ {
		v := v1
		v.Version, v.Hash = fmt.Sprint(i), fmt.Sprintf("h%d", i)
		if rec, _, err := f.RecordVersion(c, v); err != nil || rec.Seq != int64(i) {
			t.Fatalf("version %d: %+v %v", i, rec, err)
		}
	}
	other := v1
	other.FlowID = "refund"
	must3(t)(f.RecordVersion(c, other))
	defaultOne := v1
	defaultOne.Tenant = ""
	must3(t)(f.RecordVersion(c, defaultOne))

	if got := must[sqlite.FlowVersion](t)(f.FlowVersion(c, "acme", "order", "3")); got.Hash != "h3" || string(got.Definition) != `{"id":"order"}` {
		t.Errorf("version 3: %+v", got)
	}
	_, err = f.FlowVersion(c, "acme", "order", "9")
	wantErr(t, "an unknown version", err, store.ErrNotFound, sqlite.ErrVersionNotFound)
	p := must[sqlite.Page[sqlite.FlowVersion]](t)(f.ListVersions(c, "acme", "order", sqlite.ListOptions{Limit: 3}))
	if len(p.Items) != 3 || p.Items[0].Version != "4" || p.Items[0].Definition != nil || p.Next == "" {
		t.Fatalf("versions page 1: %+v", p)
	}
	p = must[sqlite.Page[sqlite.FlowVersion]](t)(f.ListVersions(c, "acme", "order", sqlite.ListOptions{Cursor: p.Next}))
	if len(p.Items) != 1 || p.Items[0].Version != "1" {
		t.Fatalf("versions page 2: %+v", p)
	}
	// Every version of every tenant, with definitions, for the engine sync.
	var all []string
	cursor := ""
	for {
		p := must[sqlite.Page[sqlite.FlowVersion]](t)(f.AllVersions(c, sqlite.ListOptions{Cursor: cursor, Limit: 2}))
		for _, v := range p.Items {
			if v.Definition == nil {
				t.Errorf("%s without its definition", v.Version)
			}
			all = append(all, v.Tenant+"/"+v.FlowID+"/"+v.Version)
		}
		if cursor = p.Next; cursor == "" {
			break
		}
	}
	want := "[acme/order/1 acme/order/2 acme/order/3 acme/order/4 acme/refund/1 default/order/1]"
	if fmt.Sprint(all) != want {
		t.Errorf("all versions %v, want %s", all, want)
	}
	for name, bad := range map[string]sqlite.FlowVersion{
		"no hash":    {Tenant: "acme", FlowID: "x", Version: "1", Definition: json.RawMessage(`{}`), HashAlgo: "fh2"},
		"no algo":    {Tenant: "acme", FlowID: "x", Version: "1", Definition: json.RawMessage(`{}`), Hash: "h"},
		"bad name":   {Tenant: "acme", FlowID: "x", Version: "a b", Definition: json.RawMessage(`{}`), Hash: "h", HashAlgo: "fh2"},
		"definition": {Tenant: "acme", FlowID: "x", Version: "1", Definition: json.RawMessage(`nope`), Hash: "h", HashAlgo: "fh2"},
	} {
		_, _, err := f.RecordVersion(c, bad)
		wantErr(t, name, err, store.ErrInvalid, nil)
	}
}

func must3(t *testing.T) func(sqlite.FlowVersion, bool, error) {
	return func(_ sqlite.FlowVersion, _ bool, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func items(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ex_%d", i+1)
	}
	return out
}

// A job's items are claimed a batch at a time under a lease, recorded with their outcomes, and
// the job completes when none is left; another runner waits for the lease, a tenant sees only
// its own jobs, and the failures page in order.
func testBulkJobClaimAndRecord(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	j := must[sqlite.Job](t)(f.CreateBulkJob(c, sqlite.NewJob{Tenant: "acme", Kind: "executions.cancel", Filter: []byte(`{"status":"running"}`), CreatedBy: "ann"}, items(450), true))
	if j.Total != 450 || j.Status != sqlite.JobPending || !j.Truncated {
		t.Fatalf("created %+v", j)
	}
	j, got, err := f.ClaimJobItems(c, "acme", j.ID, "r1", 100, time.Minute)
	if err != nil || len(got) != 100 || got[0].Seq != 1 || got[99].Item != "ex_100" || got[0].State != sqlite.ItemApplying || j.Status != sqlite.JobRunning {
		t.Fatalf("claim: %+v %d items %v", j, len(got), err)
	}
	_, _, err = f.ClaimJobItems(c, "acme", j.ID, "r2", 100, time.Minute)
	wantErr(t, "another runner's claim", err, sqlite.ErrPrecondition, sqlite.ErrJobLeased)
	_, _, err = f.ClaimJobItems(c, "other", j.ID, "r1", 100, time.Minute)
	wantErr(t, "another tenant's claim", err, store.ErrNotFound, sqlite.ErrJobNotFound)

	var out []sqlite.JobItemOutcome
	for _, it := range got {
		switch {
		case it.Seq <= 90:
			out = append(out, sqlite.JobItemOutcome{Seq: it.Seq, State: sqlite.ItemDone, Result: "cancel_requested"})
		case it.Seq < 100:
			out = append(out, sqlite.JobItemOutcome{Seq: it.Seq, State: sqlite.ItemFailed, Code: "terminal", Error: "already completed"})
		default:
			out = append(out, sqlite.JobItemOutcome{Seq: it.Seq, State: sqlite.ItemPending}) // given back
		}
	}
	j = must[sqlite.Job](t)(f.RecordJobItems(c, "acme", j.ID, "r1", time.Minute, out))
	if j.Succeeded != 90 || j.Failed != 9 || j.Status != sqlite.JobRunning {
		t.Fatalf("recorded %+v", j)
	}
	_, again, err := f.ClaimJobItems(c, "acme", j.ID, "r1", 5, time.Minute)
	if err != nil || len(again) != 5 || again[0].Seq != 100 {
		t.Fatalf("the item given back comes first: %+v %v", again, err)
	}
	p := must[sqlite.Page[sqlite.JobItem]](t)(f.JobItems(c, "acme", j.ID, sqlite.ItemFailed, sqlite.ListOptions{Limit: 5}))
	if len(p.Items) != 5 || p.Items[0].Seq != 91 || p.Items[0].Code != "terminal" || p.Next == "" {
		t.Fatalf("failures page 1 %+v", p)
	}
	p = must[sqlite.Page[sqlite.JobItem]](t)(f.JobItems(c, "acme", j.ID, sqlite.ItemFailed, sqlite.ListOptions{Limit: 5, Cursor: p.Next}))
	if len(p.Items) != 4 || p.Items[0].Seq != 96 || p.Next != "" {
		t.Fatalf("failures page 2 %+v", p)
	}
	_, err = f.JobItems(c, "other", j.ID, "", sqlite.ListOptions{})
	wantErr(t, "another tenant's items", err, store.ErrNotFound, sqlite.ErrJobNotFound)
	_, err = f.JobItems(c, "acme", j.ID, "", sqlite.ListOptions{Cursor: "bogus"})
	wantErr(t, "a bad cursor", err, store.ErrInvalid, sqlite.ErrBadCursor)

	// Runner r1 dies with 5 items applying; once its lease runs out r2 takes the job over and
	// those 5 are failed, not applied again. r1's late report changes nothing.
	f.clock.Advance(2 * time.Minute)
	refs := must[[]sqlite.JobRef](t)(f.RunnableJobs(c, "r2", 10))
	if len(refs) != 1 || refs[0] != (sqlite.JobRef{Tenant: "acme", ID: j.ID}) {
		t.Fatalf("runnable %+v", refs)
	}
	j, next, err := f.ClaimJobItems(c, "acme", j.ID, "r2", 1000, time.Minute)
	if err != nil || len(next) != 346 || next[0].Seq != 105 || j.Failed != 14 {
		t.Fatalf("take-over: %+v %d items (first %+v) %v", j, len(next), next[0], err)
	}
	p = must[sqlite.Page[sqlite.JobItem]](t)(f.JobItems(c, "acme", j.ID, sqlite.ItemFailed, sqlite.ListOptions{Limit: 500}))
	if last := p.Items[len(p.Items)-1]; last.Seq != 104 || last.Code != sqlite.CodeInterrupted {
		t.Fatalf("the interrupted items %+v", p.Items)
	}
	j = must[sqlite.Job](t)(f.RecordJobItems(c, "acme", j.ID, "r1", time.Minute, []sqlite.JobItemOutcome{{Seq: 100, State: sqlite.ItemDone}}))
	if j.Succeeded != 90 || j.Failed != 14 {
		t.Fatalf("a late report counted: %+v", j)
	}
	var rest []sqlite.JobItemOutcome
	for _, it := range next {
		rest = append(rest, sqlite.JobItemOutcome{Seq: it.Seq, State: sqlite.ItemDone, Result: "cancel_requested"})
	}
	j = must[sqlite.Job](t)(f.RecordJobItems(c, "acme", j.ID, "r2", time.Minute, rest))
	if j.Status != sqlite.JobCompleted || j.Succeeded+j.Failed != j.Total {
		t.Fatalf("all recorded: %+v", j)
	}
	if refs := must[[]sqlite.JobRef](t)(f.RunnableJobs(c, "r2", 10)); len(refs) != 0 {
		t.Fatalf("a completed job is runnable: %+v", refs)
	}
	_, err = f.CancelJob(c, "acme", j.ID)
	wantErr(t, "cancel a completed job", err, sqlite.ErrPrecondition, sqlite.ErrJobFinished)
}

// A cancelled job gives out nothing more, and still records what was in hand; a released lease
// lets another runner in at once; an empty job completes at its first claim.
func testBulkJobCancelReleaseAndEmpty(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	j := must[sqlite.Job](t)(f.CreateBulkJob(c, sqlite.NewJob{Tenant: "acme", Kind: "executions.retry"}, items(3), false))
	_, got, err := f.ClaimJobItems(c, "acme", j.ID, "r1", 1, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	must[sqlite.Job](t)(f.RecordJobItems(c, "acme", j.ID, "r1", time.Minute, []sqlite.JobItemOutcome{{Seq: 1, State: sqlite.ItemDone}}))
	if err := f.ReleaseJob(c, "acme", j.ID, "r1"); err != nil {
		t.Fatal(err)
	}
	_, got, err = f.ClaimJobItems(c, "acme", j.ID, "r2", 1, time.Minute)
	if err != nil || len(got) != 1 || got[0].Seq != 2 {
		t.Fatalf("after a release: %+v %v", got, err)
	}
	j = must[sqlite.Job](t)(f.CancelJob(c, "acme", j.ID))
	if j.Status != sqlite.JobCancelled {
		t.Fatalf("cancel: %+v", j)
	}
	// What r2 had in hand when the job was cancelled is still recorded; nothing more is given out.
	j = must[sqlite.Job](t)(f.RecordJobItems(c, "acme", j.ID, "r2", time.Minute, []sqlite.JobItemOutcome{{Seq: 2, State: sqlite.ItemFailed, Code: "terminal"}}))
	j, more, err := f.ClaimJobItems(c, "acme", j.ID, "r2", 10, time.Minute)
	if err != nil || len(more) != 0 || j.Status != sqlite.JobCancelled || j.Succeeded != 1 || j.Failed != 1 {
		t.Fatalf("claim of a cancelled job: %+v %v %v", j, more, err)
	}
	_, err = f.CancelJob(c, "other", j.ID)
	wantErr(t, "another tenant's cancel", err, store.ErrNotFound, sqlite.ErrJobNotFound)

	e := must[sqlite.Job](t)(f.CreateBulkJob(c, sqlite.NewJob{Tenant: "acme", Kind: "executions.delete"}, nil, false))
	if e, got, err := f.ClaimJobItems(c, "acme", e.ID, "r1", 10, time.Minute); err != nil || len(got) != 0 || e.Status != sqlite.JobCompleted {
		t.Fatalf("an empty job: %+v %v %v", e, got, err)
	}
	_, err = f.RecordJobItems(c, "acme", e.ID, "r1", time.Minute, []sqlite.JobItemOutcome{{Seq: 1, State: "maybe"}})
	wantErr(t, "a bad outcome", err, store.ErrInvalid, nil)
	_, err = f.CreateBulkJob(c, sqlite.NewJob{Tenant: "acme", Kind: "executions.delete"}, make([]string, sqlite.MaxJobItems+1), false)
	wantErr(t, "too many items", err, store.ErrInvalid, nil)
}

// The database remembers each mode it was served in: the first time stays, the last time and
// where move on; a mode it never served in is not there.
func testMarkServed(t *testing.T, open Opener) {
	t.Parallel()
	now := time.UnixMilli(1_000_000).UTC()
	f := setup(t, open, sqlite.WithClock(func() time.Time { return now }))
	c := ctx(t)
	if _, ok, err := f.ServedIn(c, sqlite.ServedCluster); err != nil || ok {
		t.Fatalf("a new database served in cluster mode: %v %v", ok, err)
	}
	if err := f.MarkServed(c, sqlite.ServedCluster, "redis://a:6379/0"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if err := f.MarkServed(c, sqlite.ServedCluster, "redis://b:6379/0"); err != nil {
		t.Fatal(err)
	}
	s, ok, err := f.ServedIn(c, sqlite.ServedCluster)
	if err != nil || !ok || s.Detail != "redis://b:6379/0" || s.First.UnixMilli() != 1_000_000 || !s.Last.Equal(now) {
		t.Fatalf("served in cluster mode: %+v %v %v", s, ok, err)
	}
	if _, ok, err := f.ServedIn(c, sqlite.ServedLocal); err != nil || ok {
		t.Fatalf("served in local mode: %v %v", ok, err)
	}
	if err := f.MarkServed(c, "other", ""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an unknown mode: %v", err)
	}
}

func testUsers(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	ann := must[sqlite.User](t)(f.CreateUser(c, sqlite.NewUser{Login: "  Ann@Example.com ", Password: "correct horse"}))
	if ann.Login != "ann@example.com" || ann.Name != "ann@example.com" || ann.PlatformAdmin || !strings.HasPrefix(ann.ID, "usr_") {
		t.Fatalf("created: %+v", ann)
	}
	if got := must[sqlite.User](t)(f.UserByLogin(c, "ANN@example.com")); got != ann {
		t.Errorf("by login: %+v", got)
	}
	if got := must[sqlite.User](t)(f.User(c, ann.ID)); got != ann {
		t.Errorf("by id: %+v", got)
	}

	_, err := f.CreateUser(c, sqlite.NewUser{Login: "ANN@EXAMPLE.COM", Password: "another one"})
	wantErr(t, "a taken login, in other case", err, sqlite.ErrExists, sqlite.ErrLoginTaken)
	_, err = f.CreateUser(c, sqlite.NewUser{Login: "bob", Password: "short"})
	wantErr(t, "a short password", err, store.ErrInvalid, nil)
	_, err = f.CreateUser(c, sqlite.NewUser{Login: "bob", Password: strings.Repeat("x", sqlite.MaxPasswordLen+1)})
	wantErr(t, "a long password", err, store.ErrInvalid, nil)
	for _, login := range []string{"", "a b", "tab\there", strings.Repeat("a", sqlite.MaxLoginLen+1)} {
		_, err = f.CreateUser(c, sqlite.NewUser{Login: login, Password: "correct horse"})
		wantErr(t, "login "+login, err, store.ErrInvalid, nil)
	}
	_, err = f.User(c, "usr_nobody")
	wantErr(t, "an unknown user", err, store.ErrNotFound, sqlite.ErrUserNotFound)

	admin := must[sqlite.User](t)(f.SetPlatformAdmin(c, ann.ID, true))
	if !admin.PlatformAdmin {
		t.Error("not admin")
	}
	_, err = f.SetPlatformAdmin(c, "usr_nobody", true)
	wantErr(t, "admin of an unknown user", err, store.ErrNotFound, sqlite.ErrUserNotFound)

	must[sqlite.User](t)(f.CreateUser(c, sqlite.NewUser{Login: "bob", Name: "Bob", Password: "hunter2hunter2"}))
	p := must[sqlite.Page[sqlite.User]](t)(f.ListUsers(c, sqlite.ListOptions{Limit: 1}))
	if len(p.Items) != 1 || p.Items[0].Login != "ann@example.com" || p.Next == "" {
		t.Fatalf("page 1: %+v", p)
	}
	p = must[sqlite.Page[sqlite.User]](t)(f.ListUsers(c, sqlite.ListOptions{Cursor: p.Next, Limit: 1}))
	if len(p.Items) != 1 || p.Items[0].Login != "bob" || p.Next != "" {
		t.Fatalf("page 2: %+v", p)
	}

	if err := f.DeleteUser(c, ann.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "delete again", f.DeleteUser(c, ann.ID), store.ErrNotFound, sqlite.ErrUserNotFound)
}

func testVerifyPassword(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open, sqlite.WithLockout(3, 10*time.Minute))
	c := ctx(t)
	ann := must[sqlite.User](t)(f.CreateUser(c, sqlite.NewUser{Login: "ann", Password: "correct horse"}))
	if u, err := f.VerifyPassword(c, "ANN", "correct horse"); err != nil || u.ID != ann.ID {
		t.Fatalf("right password: %+v %v", u, err)
	}
	// A wrong password, an unknown login and a malformed one all answer the same.
	for _, tc := range []struct{ login, password string }{{"ann", "Correct horse"}, {"nobody", "correct horse"}, {"a b", "x"}, {"ann", ""}} {
		_, err := f.VerifyPassword(c, tc.login, tc.password)
		if !errors.Is(err, sqlite.ErrBadCredentials) || !errors.Is(err, sqlite.ErrUnauthenticated) || err.Error() != sqlite.ErrBadCredentials.Error() {
			t.Errorf("%q/%q: %v", tc.login, tc.password, err)
		}
	}
	// Two failures so far; a success clears them.
	if u := must[sqlite.User](t)(f.User(c, ann.ID)); u.FailedLogins != 2 {
		t.Fatalf("failed logins %d", u.FailedLogins)
	}
	if u := must[sqlite.User](t)(f.VerifyPassword(c, "ann", "correct horse")); u.FailedLogins != 0 {
		t.Errorf("a success left %d failed logins", u.FailedLogins)
	}
	// The third failure in a row locks the account; while locked, even the right password is
	// refused without being checked.
	for range 2 {
		if _, err := f.VerifyPassword(c, "ann", "wrong wrong"); !errors.Is(err, sqlite.ErrBadCredentials) {
			t.Fatal(err)
		}
	}
	_, err := f.VerifyPassword(c, "ann", "wrong wrong")
	var le *sqlite.LockedError
	if !errors.As(err, &le) || !le.Until.Equal(f.clock.Now().Add(10*time.Minute)) || !errors.Is(err, sqlite.ErrUnauthenticated) {
		t.Fatalf("third failure: %v", err)
	}
	f.clock.Advance(9 * time.Minute)
	if _, err := f.VerifyPassword(c, "ann", "correct horse"); !errors.As(err, &le) {
		t.Fatalf("right password while locked: %v", err)
	}
	if u := must[sqlite.User](t)(f.User(c, ann.ID)); !u.Locked(f.clock.Now()) || u.FailedLogins != 0 {
		t.Errorf("locked user: %+v", u)
	}
	// Once the period is over, the right password works and clears the lock.
	f.clock.Advance(time.Minute)
	u := must[sqlite.User](t)(f.VerifyPassword(c, "ann", "correct horse"))
	if !u.LockedUntil.IsZero() || u.FailedLogins != 0 {
		t.Errorf("after the lock: %+v", u)
	}
	// An admin can unlock at once; a new password clears a lock too.
	for range 3 {
		_, _ = f.VerifyPassword(c, "ann", "wrong wrong")
	}
	must[sqlite.User](t)(f.UnlockUser(c, ann.ID))
	must[sqlite.User](t)(f.VerifyPassword(c, "ann", "correct horse"))
	for range 3 {
		_, _ = f.VerifyPassword(c, "ann", "wrong wrong")
	}
	must[sqlite.User](t)(f.SetPassword(c, ann.ID, "battery staple"))
	must[sqlite.User](t)(f.VerifyPassword(c, "ann", "battery staple"))
	if _, err := f.VerifyPassword(c, "ann", "correct horse"); !errors.Is(err, sqlite.ErrBadCredentials) {
		t.Errorf("the old password: %v", err)
	}
}

// Concurrent wrong passwords are all counted: the lock cannot be outrun.
func testConcurrentFailedLoginsAreAllCounted(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open, sqlite.WithLockout(50, time.Hour), sqlite.WithHashConcurrency(4))
	c := ctx(t)
	ann := must[sqlite.User](t)(f.CreateUser(c, sqlite.NewUser{Login: "ann", Password: "correct horse"}))
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := f.VerifyPassword(c, "ann", "wrong wrong"); !errors.Is(err, sqlite.ErrBadCredentials) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if u := must[sqlite.User](t)(f.User(c, ann.ID)); u.FailedLogins != 20 {
		t.Errorf("failed logins %d, want 20", u.FailedLogins)
	}
}

func testEnsureBootstrapAdmin(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	_, _, err := f.EnsureBootstrapAdmin(c, "admin", "short")
	wantErr(t, "a short bootstrap password", err, store.ErrInvalid, nil)
	u, created, err := f.EnsureBootstrapAdmin(c, "admin", "correct horse")
	if err != nil || !created || !u.PlatformAdmin || u.Login != "admin" {
		t.Fatalf("first start: %+v %v %v", u, created, err)
	}
	// Any user at all, and the bootstrap does nothing: not another admin, not a new password.
	u, created, err = f.EnsureBootstrapAdmin(c, "admin", "another password")
	if err != nil || created || u.ID != "" {
		t.Fatalf("second start: %+v %v %v", u, created, err)
	}
	if _, _, err := f.EnsureBootstrapAdmin(c, "root", "correct horse"); err != nil || f.count("users") != 1 {
		t.Fatalf("another login: %v, %d users", err, f.count("users"))
	}
	must[sqlite.User](t)(f.VerifyPassword(c, "admin", "correct horse"))

	// Concurrent first starts create one admin.
	g := setup(t, open)
	var wg sync.WaitGroup
	var mu sync.Mutex
	made := 0
	for range 4 {
		wg.Go(func() {
			_, created, err := g.EnsureBootstrapAdmin(c, "admin", "correct horse")
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if created {
				made++
			}
		})
	}
	wg.Wait()
	if made != 1 || g.count("users") != 1 {
		t.Errorf("%d admins made, %d users", made, g.count("users"))
	}
}
