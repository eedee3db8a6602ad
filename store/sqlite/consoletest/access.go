package consoletest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"plaita/store"
	"plaita/store/sqlite"
)

// A user's memberships: set, changed, read, listed by tenant and by user, removed.
func testMemberships(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	must[sqlite.Tenant](t)(f.CreateTenant(c, sqlite.NewTenant{Slug: "acme"}))
	ann := must[sqlite.User](t)(f.CreateUser(c, sqlite.NewUser{Login: "ann", Password: "correct horse"}))
	bob := must[sqlite.User](t)(f.CreateUser(c, sqlite.NewUser{Login: "bob", Password: "correct horse"}))
	if m := must[sqlite.Membership](t)(f.SetMembership(c, ann.ID, "acme", sqlite.RoleViewer)); m.Role != sqlite.RoleViewer || m.Tenant != "acme" {
		t.Fatalf("set: %+v", m)
	}
	f.clock.Advance(time.Second)
	if m := must[sqlite.Membership](t)(f.SetMembership(c, ann.ID, "acme", sqlite.RoleAdmin)); m.Role != sqlite.RoleAdmin || !m.UpdatedAt.Equal(f.clock.Now()) {
		t.Fatalf("changed: %+v", m)
	}
	must[sqlite.Membership](t)(f.SetMembership(c, bob.ID, "acme", sqlite.RoleEditor))
	must[sqlite.Membership](t)(f.SetMembership(c, ann.ID, "default", sqlite.RoleViewer))
	if m := must[sqlite.Membership](t)(f.Membership(c, ann.ID, "acme")); m.Role != sqlite.RoleAdmin || m.Login != "ann" || m.TenantStatus != sqlite.TenantActive {
		t.Errorf("read: %+v", m)
	}
	members := must[sqlite.Page[sqlite.Membership]](t)(f.ListMembers(c, "acme", sqlite.ListOptions{Limit: 1}))
	if len(members.Items) != 1 || members.Items[0].Login != "ann" || members.Next == "" {
		t.Fatalf("first page of members: %+v", members)
	}
	members = must[sqlite.Page[sqlite.Membership]](t)(f.ListMembers(c, "acme", sqlite.ListOptions{Limit: 1, Cursor: members.Next}))
	if len(members.Items) != 1 || members.Items[0].Login != "bob" {
		t.Fatalf("second page of members: %+v", members)
	}
	if all := must[[]sqlite.Membership](t)(f.UserMemberships(c, ann.ID)); len(all) != 2 || all[0].Tenant != "acme" || all[1].Tenant != "default" {
		t.Errorf("ann's memberships: %+v", all)
	}
	_, err := f.SetMembership(c, ann.ID, "nowhere", sqlite.RoleViewer)
	wantErr(t, "a membership of an unknown tenant", err, store.ErrNotFound, sqlite.ErrTenantNotFound)
	_, err = f.SetMembership(c, "usr_nobody", "acme", sqlite.RoleViewer)
	wantErr(t, "a membership of an unknown user", err, store.ErrNotFound, sqlite.ErrUserNotFound)
	if err := f.RemoveMembership(c, bob.ID, "acme"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "removed twice", f.RemoveMembership(c, bob.ID, "acme"), store.ErrNotFound, sqlite.ErrMemberNotFound)
	_, err = f.Membership(c, bob.ID, "acme")
	wantErr(t, "a removed membership", err, store.ErrNotFound, sqlite.ErrMemberNotFound)
}

// A session's token authenticates until it expires, is logged out, or its user's sessions
// end; the database keeps only the token's hash.
func testSessions(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	ann := must[sqlite.User](t)(f.CreateUser(c, sqlite.NewUser{Login: "ann", Password: "correct horse"}))
	token, s, err := f.CreateSession(c, ann.ID, time.Hour, sqlite.SessionMeta{IP: "10.0.0.1", UserAgent: "test"})
	if err != nil || s.UserID != ann.ID || !s.ExpiresAt.Equal(f.clock.Now().Add(time.Hour)) || s.ID != sqlite.Fingerprint(token) {
		t.Fatalf("create: %+v %v", s, err)
	}
	got, u, err := f.LookupSession(c, token)
	if err != nil || got.ID != s.ID || u.ID != ann.ID || got.IP != "10.0.0.1" {
		t.Fatalf("lookup: %+v %+v %v", got, u, err)
	}
	// last_seen_at moves, at most once a minute.
	f.clock.Advance(2 * time.Minute)
	if got, _ := must2[sqlite.Session, sqlite.User](t)(f.LookupSession(c, token)); !got.LastSeenAt.Equal(f.clock.Now()) {
		t.Errorf("last seen %s, want %s", got.LastSeenAt, f.clock.Now())
	}
	_, _, err = f.LookupSession(c, token+"x")
	wantErr(t, "a malformed token", err, sqlite.ErrUnauthenticated, sqlite.ErrSessionInvalid)
	// Expiry.
	short, _, err := f.CreateSession(c, ann.ID, time.Minute, sqlite.SessionMeta{})
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)
	_, _, err = f.LookupSession(c, short)
	wantErr(t, "an expired session", err, sqlite.ErrUnauthenticated, sqlite.ErrSessionInvalid)
	other, _, err := f.CreateSession(c, ann.ID, time.Minute, sqlite.SessionMeta{})
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Minute)
	if n, err := f.ExpireSessions(c); err != nil || n != 1 {
		t.Errorf("expired %d: %v", n, err)
	}
	_, _, err = f.LookupSession(c, other)
	wantErr(t, "a session the janitor expired", err, sqlite.ErrUnauthenticated, sqlite.ErrSessionInvalid)
	// Logout, and every session of a user.
	if err := f.DeleteSession(c, token); err != nil {
		t.Fatal(err)
	}
	_, _, err = f.LookupSession(c, token)
	wantErr(t, "a logged-out session", err, sqlite.ErrUnauthenticated, sqlite.ErrSessionInvalid)
	for range 3 {
		if _, _, err := f.CreateSession(c, ann.ID, time.Hour, sqlite.SessionMeta{}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := f.DeleteUserSessions(c, ann.ID); err != nil || n != 3 {
		t.Errorf("ended %d of ann's sessions: %v", n, err)
	}
	if n := f.count("sessions"); n != 0 {
		t.Errorf("%d sessions left", n)
	}
}

// An API key authenticates by its secret until revoked; another tenant cannot revoke it; the
// list pages a tenant's keys, revoked ones included.
func testAPIKeys(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	must[sqlite.Tenant](t)(f.CreateTenant(c, sqlite.NewTenant{Slug: "acme"}))
	secret, k, err := f.CreateAPIKey(c, sqlite.NewAPIKey{Tenant: "acme", Name: "ci", Role: sqlite.RoleEditor, CreatedBy: "ann"})
	if err != nil || k.Tenant != "acme" || k.Role != sqlite.RoleEditor || k.Fingerprint != sqlite.Fingerprint(secret) {
		t.Fatalf("create: %+v %v", k, err)
	}
	got, err := f.AuthenticateAPIKey(c, secret)
	if err != nil || got.ID != k.ID || got.TenantStatus != sqlite.TenantActive {
		t.Fatalf("authenticate: %+v %v", got, err)
	}
	wrong := secret[:len(secret)-1] + "a"
	if strings.HasSuffix(secret, "a") {
		wrong = secret[:len(secret)-1] + "b"
	}
	_, err = f.AuthenticateAPIKey(c, wrong)
	wantErr(t, "a wrong secret", err, sqlite.ErrUnauthenticated, sqlite.ErrAPIKeyInvalid)
	f.clock.Advance(time.Second)
	second, _, err := f.CreateAPIKey(c, sqlite.NewAPIKey{Tenant: "acme", Name: "deploy", Role: sqlite.RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.RevokeAPIKey(c, "default", k.ID)
	wantErr(t, "another tenant's revocation", err, store.ErrNotFound, sqlite.ErrAPIKeyNotFound)
	f.clock.Advance(time.Second)
	r, err := f.RevokeAPIKey(c, "acme", k.ID)
	if err != nil || !r.Revoked() || !r.RevokedAt.Equal(f.clock.Now()) {
		t.Fatalf("revoke: %+v %v", r, err)
	}
	if again := must[sqlite.APIKey](t)(f.RevokeAPIKey(c, "acme", k.ID)); !again.RevokedAt.Equal(r.RevokedAt) {
		t.Errorf("revoked twice moved the time: %+v", again)
	}
	_, err = f.AuthenticateAPIKey(c, secret)
	wantErr(t, "a revoked key", err, sqlite.ErrUnauthenticated, sqlite.ErrAPIKeyInvalid)
	must[sqlite.APIKey](t)(f.AuthenticateAPIKey(c, second))
	page := must[sqlite.Page[sqlite.APIKey]](t)(f.ListAPIKeys(c, "acme", sqlite.ListOptions{}))
	if len(page.Items) != 2 || page.Items[0].ID != k.ID || !page.Items[0].Revoked() || page.Items[1].Revoked() {
		t.Errorf("the keys: %+v", page.Items)
	}
}

// A tenant's contract keys: several active at once, newest first; a retired one is listed
// only with the retired; a rewrap needs the sealed value it replaces.
func testContractKeys(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	t0 := f.clock.Now()
	for i, id := range []string{"k1", "k2"} {
		k := sqlite.ContractKey{Tenant: "acme", ID: id, Sealed: "sealed-" + id, CreatedAt: t0.Add(time.Duration(i) * time.Second), CreatedBy: "ann"}
		if err := f.CreateContractKey(c, k); err != nil {
			t.Fatal(err)
		}
	}
	err := f.CreateContractKey(c, sqlite.ContractKey{Tenant: "acme", ID: "k1", Sealed: "x", CreatedAt: t0})
	wantErr(t, "a taken key id", err, sqlite.ErrExists, nil)
	keys := must[[]sqlite.ContractKey](t)(f.ContractKeys(c, "acme", true))
	if len(keys) != 2 || keys[0].ID != "k2" || keys[1].Sealed != "sealed-k1" || keys[1].CreatedBy != "ann" || keys[0].RetiredAt != nil {
		t.Fatalf("active keys: %+v", keys)
	}
	if err := f.RetireContractKey(c, "acme", "k1", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := f.RetireContractKey(c, "acme", "k1", t0.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("retired twice: %v", err)
	}
	if keys := must[[]sqlite.ContractKey](t)(f.ContractKeys(c, "acme", true)); len(keys) != 1 || keys[0].ID != "k2" {
		t.Errorf("active after a retirement: %+v", keys)
	}
	all := must[[]sqlite.ContractKey](t)(f.ContractKeys(c, "acme", false))
	if len(all) != 2 || all[1].RetiredAt == nil || !all[1].RetiredAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("all keys: %+v", all)
	}
	if ok := must[bool](t)(f.ReplaceContractKeySealed(c, "acme", "k2", "not-what-it-holds", "new")); ok {
		t.Error("a rewrap over another value wrote")
	}
	if ok := must[bool](t)(f.ReplaceContractKeySealed(c, "acme", "k2", "sealed-k2", "new")); !ok {
		t.Error("a rewrap did not write")
	}
	if keys := must[[]sqlite.ContractKey](t)(f.ContractKeys(c, "acme", true)); keys[0].Sealed != "new" {
		t.Errorf("after the rewrap: %+v", keys)
	}
	if keys := must[[]sqlite.ContractKey](t)(f.ContractKeys(c, "beta", false)); len(keys) != 0 {
		t.Errorf("another tenant's keys: %+v", keys)
	}
}

// must2 fails the test on err, for a call of two results.
func must2[A, B any](t testing.TB) func(a A, b B, err error) (A, B) {
	return func(a A, b B, err error) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

// The audit's filters: by actor, target and outcome exactly, by an action or its family, by
// time; they combine, and bad ones are refused.
func testAuditFilters(t *testing.T, open Opener) {
	t.Parallel()
	f := setup(t, open)
	c := ctx(t)
	t0 := f.clock.Now()
	for _, e := range []sqlite.AuditEntry{
		{Actor: "ann", Action: "flow.save", Target: "order", Outcome: sqlite.OutcomeAllow},
		{Actor: "ann", Action: "flow.publish", Target: "order", Outcome: sqlite.OutcomeAllow},
		{Actor: "bob", Action: "flow.publish.denied", Target: "order", Outcome: sqlite.OutcomeDeny, Reason: "role"},
		{Actor: "bob", Action: "flows_x", Target: "pay", Outcome: sqlite.OutcomeAllow},
		{Actor: "kim", Action: "instance.drain", Target: "worker-1", Outcome: sqlite.OutcomeAllow},
	} {
		e.ActorKind, e.Tenant = sqlite.ActorUser, "acme"
		must[sqlite.AuditAppend](t)(f.AppendAudit(c, e))
		f.clock.Advance(time.Minute)
	}
	list := func(q sqlite.AuditQuery) []string {
		t.Helper()
		q.Tenant = "acme"
		var out []string
		for _, e := range must[sqlite.AuditPage](t)(f.ListAudit(c, q)).Entries {
			out = append(out, e.Actor+" "+e.Action)
		}
		return out
	}
	for _, tc := range []struct {
		q    sqlite.AuditQuery
		want string
	}{
		{sqlite.AuditQuery{Actor: "ann"}, "ann flow.publish,ann flow.save"},
		{sqlite.AuditQuery{Action: "flow"}, "bob flow.publish.denied,ann flow.publish,ann flow.save"},
		{sqlite.AuditQuery{Action: "FLOW.publish"}, "bob flow.publish.denied,ann flow.publish"},
		{sqlite.AuditQuery{Action: "flows_"}, ""},
		{sqlite.AuditQuery{Target: "order", Outcome: sqlite.OutcomeDeny}, "bob flow.publish.denied"},
		{sqlite.AuditQuery{Since: t0.Add(2 * time.Minute), Until: t0.Add(4 * time.Minute)}, "bob flows_x,bob flow.publish.denied"},
		{sqlite.AuditQuery{Actor: "kim", Action: "instance"}, "kim instance.drain"},
	} {
		if got := strings.Join(list(tc.q), ","); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.q, got, tc.want)
		}
	}
	_, err := f.ListAudit(c, sqlite.AuditQuery{Tenant: "acme", Outcome: "maybe"})
	wantErr(t, "an unknown outcome", err, store.ErrInvalid, nil)
	_, err = f.ListAudit(c, sqlite.AuditQuery{Tenant: "acme", Actor: strings.Repeat("a", sqlite.MaxAuditFilter+1)})
	wantErr(t, "a filter too long", err, store.ErrInvalid, nil)
}
