package sqlite

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"plaita/store"
)

func TestTenants(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	acme := must[Tenant](t)(f.CreateTenant(c, NewTenant{Slug: "acme", Name: "Acme Corp"}))
	if acme.Status != TenantActive || acme.StatusEpoch != 1 || !acme.CreatedAt.Equal(f.clock.Now()) || acme.Name != "Acme Corp" {
		t.Fatalf("created: %+v", acme)
	}
	if got := must[Tenant](t)(f.Tenant(c, "acme")); got != acme {
		t.Errorf("read back %+v, want %+v", got, acme)
	}
	// Refusals.
	_, err := f.CreateTenant(c, NewTenant{Slug: "acme"})
	wantErr(t, "a taken slug", err, ErrExists, ErrTenantExists)
	_, err = f.CreateTenant(c, NewTenant{Slug: "default"})
	wantErr(t, "the default tenant", err, ErrExists, ErrTenantExists)
	for _, slug := range []string{"Acme", "a:b", "execution", "a b"} {
		_, err = f.CreateTenant(c, NewTenant{Slug: slug})
		wantErr(t, "slug "+slug, err, store.ErrInvalid, nil)
	}
	_, err = f.CreateTenant(c, NewTenant{Slug: "ok", Name: "line\nbreak"})
	wantErr(t, "a name with a control character", err, store.ErrInvalid, nil)
	_, err = f.CreateTenant(c, NewTenant{Slug: "ok", Status: "paused"})
	wantErr(t, "an unknown status", err, store.ErrInvalid, nil)
	_, err = f.Tenant(c, "nobody")
	wantErr(t, "an unknown tenant", err, store.ErrNotFound, ErrTenantNotFound)

	// Status changes move the epoch; setting the same status does not.
	f.clock.Advance(time.Second)
	ch := must[StatusChange](t)(f.SetTenantStatus(c, "acme", TenantDisabled))
	if !ch.Changed || ch.Previous != TenantActive || ch.Tenant.Status != TenantDisabled || ch.Tenant.StatusEpoch != 2 || !ch.Tenant.UpdatedAt.Equal(f.clock.Now()) {
		t.Errorf("disable: %+v", ch)
	}
	ch = must[StatusChange](t)(f.SetTenantStatus(c, "acme", TenantDisabled))
	if ch.Changed || ch.Tenant.StatusEpoch != 2 {
		t.Errorf("disable again: %+v", ch)
	}
	_, err = f.SetTenantStatus(c, "nobody", TenantDisabled)
	wantErr(t, "status of an unknown tenant", err, store.ErrNotFound, ErrTenantNotFound)
	_, err = f.SetTenantStatus(c, "acme", "gone")
	wantErr(t, "an unknown status", err, store.ErrInvalid, nil)

	renamed := must[Tenant](t)(f.RenameTenant(c, "acme", "Acme Ltd"))
	if renamed.Name != "Acme Ltd" || renamed.StatusEpoch != 2 {
		t.Errorf("rename: %+v", renamed)
	}

	// Deleting: only a disabled tenant, never the default one; its members, keys and drafts go.
	must[Tenant](t)(f.CreateTenant(c, NewTenant{Slug: "live"}))
	wantErr(t, "delete an active tenant", f.DeleteTenant(c, "live"), ErrPrecondition, ErrTenantActive)
	wantErr(t, "delete the default tenant", f.DeleteTenant(c, ""), store.ErrInvalid, ErrDefaultTenant)
	wantErr(t, "delete an unknown tenant", f.DeleteTenant(c, "nobody"), store.ErrNotFound, ErrTenantNotFound)
	u := must[User](t)(f.CreateUser(c, NewUser{Login: "ann", Password: "correct horse"}))
	must[Membership](t)(f.SetMembership(c, u.ID, "acme", RoleAdmin))
	if _, _, err := f.CreateAPIKey(c, NewAPIKey{Tenant: "acme", Name: "ci", Role: RoleEditor}); err != nil {
		t.Fatal(err)
	}
	must[Draft](t)(f.SaveDraft(c, DraftSave{Tenant: "acme", FlowID: "f", Definition: []byte(`{}`), By: "ann"}))
	must[AuditAppend](t)(f.AppendAudit(c, AuditEntry{Actor: "ann", ActorKind: ActorUser, Tenant: "acme", Action: "tenant.disable", Outcome: OutcomeAllow}))
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

func TestListTenantsPages(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	for i := range 7 {
		must[Tenant](t)(f.CreateTenant(c, NewTenant{Slug: fmt.Sprintf("t%02d", i)}))
	}
	var slugs []string
	cursor := ""
	for pages := 0; ; pages++ {
		p := must[Page[Tenant]](t)(f.ListTenants(c, ListOptions{Cursor: cursor, Limit: 3}))
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
	all := must[[]Tenant](t)(f.AllTenants(c))
	if len(all) != 8 {
		t.Errorf("all tenants: %d", len(all))
	}
	// The limit is bounded; a bad cursor, another list's cursor and a negative limit are refused.
	if p := must[Page[Tenant]](t)(f.ListTenants(c, ListOptions{Limit: 100000})); p.Limit != MaxLimit {
		t.Errorf("limit %d, want %d", p.Limit, MaxLimit)
	}
	if p := must[Page[Tenant]](t)(f.ListTenants(c, ListOptions{})); p.Limit != DefaultLimit || p.Next != "" {
		t.Errorf("default page: %+v", p)
	}
	_, err := f.ListTenants(c, ListOptions{Limit: -1})
	wantErr(t, "negative limit", err, store.ErrInvalid, nil)
	_, err = f.ListTenants(c, ListOptions{Cursor: "!!"})
	wantErr(t, "garbage cursor", err, store.ErrInvalid, ErrBadCursor)
	_, err = f.ListTenants(c, ListOptions{Cursor: encodeCursor("users", "x")})
	wantErr(t, "another list's cursor", err, store.ErrInvalid, ErrBadCursor)
	if errors.Is(err, store.ErrNotFound) {
		t.Error("a bad cursor matches two classes")
	}
}
