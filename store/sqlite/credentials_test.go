package sqlite

import (
	"strings"
	"testing"
	"time"

	"plaita/store"
)

func TestRoles(t *testing.T) {
	t.Parallel()
	order := []Role{RoleViewer, RoleEditor, RoleAdmin}
	for i, r := range order {
		for j, min := range order {
			if r.AtLeast(min) != (i >= j) {
				t.Errorf("%s.AtLeast(%s) = %v", r, min, r.AtLeast(min))
			}
			if (r.Compare(min) < 0) != (i < j) {
				t.Errorf("%s.Compare(%s) = %d", r, min, r.Compare(min))
			}
		}
		if got, err := ParseRole(string(r)); err != nil || got != r {
			t.Errorf("parse %s: %v", r, err)
		}
		if r.AtLeast("owner") || Role("owner").AtLeast(RoleViewer) {
			t.Errorf("an unknown role is ordered with %s", r)
		}
	}
	if _, err := ParseRole("Admin"); err == nil {
		t.Error("roles are lower-case")
	}
}

func TestMemberships(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	ann := must[User](t)(f.CreateUser(c, NewUser{Login: "ann", Password: "correct horse"}))
	bob := must[User](t)(f.CreateUser(c, NewUser{Login: "bob", Password: "correct horse"}))
	must[Tenant](t)(f.CreateTenant(c, NewTenant{Slug: "acme"}))
	m := must[Membership](t)(f.SetMembership(c, ann.ID, "acme", RoleViewer))
	if m.Role != RoleViewer || m.Login != "ann" || m.TenantStatus != TenantActive {
		t.Fatalf("added: %+v", m)
	}
	f.clock.Advance(time.Second)
	m = must[Membership](t)(f.SetMembership(c, ann.ID, "acme", RoleAdmin))
	if m.Role != RoleAdmin || !m.UpdatedAt.After(m.CreatedAt) {
		t.Errorf("role changed: %+v", m)
	}
	must[Membership](t)(f.SetMembership(c, bob.ID, "acme", RoleEditor))
	must[Membership](t)(f.SetMembership(c, ann.ID, "", RoleViewer))

	_, err := f.SetMembership(c, "usr_nobody", "acme", RoleViewer)
	wantErr(t, "an unknown user", err, store.ErrNotFound, ErrUserNotFound)
	_, err = f.SetMembership(c, ann.ID, "nowhere", RoleViewer)
	wantErr(t, "an unknown tenant", err, store.ErrNotFound, ErrTenantNotFound)
	_, err = f.SetMembership(c, ann.ID, "acme", "owner")
	wantErr(t, "an unknown role", err, store.ErrInvalid, nil)

	p := must[Page[Membership]](t)(f.ListMembers(c, "acme", ListOptions{Limit: 1}))
	if len(p.Items) != 1 || p.Items[0].Login != "ann" || p.Next == "" {
		t.Fatalf("members page 1: %+v", p)
	}
	p = must[Page[Membership]](t)(f.ListMembers(c, "acme", ListOptions{Cursor: p.Next}))
	if len(p.Items) != 1 || p.Items[0].Login != "bob" || p.Items[0].Role != RoleEditor || p.Next != "" {
		t.Fatalf("members page 2: %+v", p)
	}

	// A user's memberships carry the tenant's status: a disabled tenant's members are refused.
	must[StatusChange](t)(f.SetTenantStatus(c, "acme", TenantDisabled))
	mm := must[[]Membership](t)(f.UserMemberships(c, ann.ID))
	if len(mm) != 2 || mm[0].Tenant != "acme" || mm[0].TenantStatus != TenantDisabled || mm[1].Tenant != "default" || mm[1].TenantStatus != TenantActive {
		t.Errorf("ann's memberships: %+v", mm)
	}
	if got := must[Membership](t)(f.Membership(c, ann.ID, "acme")); got.TenantStatus != TenantDisabled {
		t.Errorf("membership: %+v", got)
	}

	if err := f.RemoveMembership(c, ann.ID, "acme"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "remove again", f.RemoveMembership(c, ann.ID, "acme"), store.ErrNotFound, ErrMemberNotFound)
	_, err = f.Membership(c, ann.ID, "acme")
	wantErr(t, "a removed membership", err, store.ErrNotFound, ErrMemberNotFound)
	// A deleted user's memberships go with it.
	if err := f.DeleteUser(c, bob.ID); err != nil {
		t.Fatal(err)
	}
	if p := must[Page[Membership]](t)(f.ListMembers(c, "acme", ListOptions{})); len(p.Items) != 0 {
		t.Errorf("members after the user went: %+v", p)
	}
	if mm := must[[]Membership](t)(f.UserMemberships(c, "usr_nobody")); mm == nil || len(mm) != 0 {
		t.Errorf("memberships of nobody: %#v", mm)
	}
}

func TestSessions(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	ann := must[User](t)(f.CreateUser(c, NewUser{Login: "ann", Password: "correct horse"}))
	token, s, err := f.CreateSession(c, ann.ID, time.Hour, SessionMeta{IP: "10.0.0.1", UserAgent: strings.Repeat("ü", 400)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, "pls_") || s.ID != Fingerprint(token) || !s.ExpiresAt.Equal(f.clock.Now().Add(time.Hour)) || len(s.UserAgent) > 512 {
		t.Fatalf("session %q %+v", token, s)
	}
	// Only the token's hash is stored.
	var stored string
	if err := f.r.QueryRow("SELECT token_hash FROM sessions").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != secretHash(token) || strings.Contains(stored, token[4:]) {
		t.Errorf("stored %q for token %q", stored, token)
	}

	got, u, err := f.LookupSession(c, token)
	if err != nil || got.UserID != ann.ID || u.ID != ann.ID || got.ID != s.ID || got.IP != "10.0.0.1" {
		t.Fatalf("lookup: %+v %+v %v", got, u, err)
	}
	// last_seen moves at most once a minute.
	f.clock.Advance(30 * time.Second)
	if got, _, _ := f.LookupSession(c, token); !got.LastSeenAt.Equal(s.CreatedAt) {
		t.Errorf("last seen moved after 30s: %v", got.LastSeenAt)
	}
	f.clock.Advance(30 * time.Second)
	if got, _, _ := f.LookupSession(c, token); !got.LastSeenAt.Equal(f.clock.Now()) {
		t.Errorf("last seen did not move after a minute: %v", got.LastSeenAt)
	}
	for _, bad := range []string{"", "pls_", token + "x", "pls_" + strings.Repeat("a", 52), strings.Replace(token, "pls_", "plk_", 1)} {
		_, _, err := f.LookupSession(c, bad)
		wantErr(t, "token "+bad, err, ErrUnauthenticated, ErrSessionInvalid)
	}
	// An expired session is refused and deleted on the way.
	f.clock.Advance(time.Hour)
	_, _, err = f.LookupSession(c, token)
	wantErr(t, "an expired session", err, ErrUnauthenticated, ErrSessionInvalid)
	if n := f.count("sessions"); n != 0 {
		t.Errorf("%d sessions after the expired one was looked up", n)
	}

	// Logout, log out everywhere, the janitor.
	t1, _ := must2(t)(f.CreateSession(c, ann.ID, 0, SessionMeta{}))
	must2(t)(f.CreateSession(c, ann.ID, time.Minute, SessionMeta{}))
	must2(t)(f.CreateSession(c, ann.ID, time.Minute, SessionMeta{}))
	if err := f.DeleteSession(c, t1); err != nil {
		t.Fatal(err)
	}
	if err := f.DeleteSession(c, t1); err != nil {
		t.Errorf("a second logout: %v", err)
	}
	_, _, err = f.LookupSession(c, t1)
	wantErr(t, "a deleted session", err, ErrUnauthenticated, ErrSessionInvalid)
	long, _ := must2(t)(f.CreateSession(c, ann.ID, 0, SessionMeta{}))
	f.clock.Advance(2 * time.Minute)
	if n := must[int64](t)(f.ExpireSessions(c)); n != 2 {
		t.Errorf("expired %d sessions, want 2", n)
	}
	if _, _, err := f.LookupSession(c, long); err != nil {
		t.Errorf("a session of the default age expired: %v", err)
	}
	if n := must[int64](t)(f.DeleteUserSessions(c, ann.ID)); n != 1 {
		t.Errorf("deleted %d sessions, want 1", n)
	}
	_, _, err = f.CreateSession(c, "usr_nobody", time.Hour, SessionMeta{})
	wantErr(t, "a session of an unknown user", err, store.ErrNotFound, ErrUserNotFound)
}

// must2 takes the token and session of CreateSession.
func must2(t *testing.T) func(string, Session, error) (string, Session) {
	return func(s string, v Session, err error) (string, Session) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s, v
	}
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	must[Tenant](t)(f.CreateTenant(c, NewTenant{Slug: "acme"}))
	must[Tenant](t)(f.CreateTenant(c, NewTenant{Slug: "other"}))
	key, k, err := f.CreateAPIKey(c, NewAPIKey{Tenant: "acme", Name: "ci", Role: RoleEditor, CreatedBy: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, k.Prefix+"_") || !strings.HasPrefix(k.Prefix, "plk_") || k.Fingerprint != Fingerprint(key) || k.Revoked() || k.TenantStatus != TenantActive {
		t.Fatalf("key %q %+v", key, k)
	}
	var stored string
	if err := f.r.QueryRow("SELECT key_hash FROM api_keys").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored, key[len(k.Prefix)+1:]) {
		t.Error("the key's secret is stored")
	}
	got := must[APIKey](t)(f.AuthenticateAPIKey(c, key))
	if got.ID != k.ID || got.Tenant != "acme" || got.Role != RoleEditor || !got.LastUsedAt.Equal(f.clock.Now()) {
		t.Fatalf("authenticated: %+v", got)
	}
	// Near misses: same id with another secret, another id, malformed keys.
	other, _, err := f.CreateAPIKey(c, NewAPIKey{Tenant: "other", Name: "ci", Role: RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	forged := k.Prefix + other[len(k.Prefix):]
	for _, bad := range []string{"", "plk_", forged, key + "x", key[:len(key)-1] + "a", "Bearer " + key} {
		if bad == key {
			continue
		}
		_, err := f.AuthenticateAPIKey(c, bad)
		wantErr(t, "key "+bad, err, ErrUnauthenticated, ErrAPIKeyInvalid)
	}
	// A disabled tenant's key still authenticates, with the status for the console to refuse.
	must[StatusChange](t)(f.SetTenantStatus(c, "acme", TenantDisabled))
	if got := must[APIKey](t)(f.AuthenticateAPIKey(c, key)); got.TenantStatus != TenantDisabled {
		t.Errorf("status: %+v", got)
	}
	// Revocation is tenant-scoped, idempotent, and final.
	_, err = f.RevokeAPIKey(c, "other", k.ID)
	wantErr(t, "revoke another tenant's key", err, store.ErrNotFound, ErrAPIKeyNotFound)
	f.clock.Advance(time.Second)
	r := must[APIKey](t)(f.RevokeAPIKey(c, "acme", k.ID))
	if !r.Revoked() || !r.RevokedAt.Equal(f.clock.Now()) {
		t.Errorf("revoked: %+v", r)
	}
	f.clock.Advance(time.Second)
	if again := must[APIKey](t)(f.RevokeAPIKey(c, "acme", k.ID)); !again.RevokedAt.Equal(r.RevokedAt) {
		t.Errorf("revoked again: %+v", again)
	}
	_, err = f.AuthenticateAPIKey(c, key)
	wantErr(t, "a revoked key", err, ErrUnauthenticated, ErrAPIKeyInvalid)

	for range 3 {
		if _, _, err := f.CreateAPIKey(c, NewAPIKey{Tenant: "acme", Name: "more", Role: RoleViewer}); err != nil {
			t.Fatal(err)
		}
	}
	p := must[Page[APIKey]](t)(f.ListAPIKeys(c, "acme", ListOptions{Limit: 3}))
	if len(p.Items) != 3 || p.Items[0].ID != k.ID || !p.Items[0].Revoked() || p.Next == "" {
		t.Fatalf("keys page 1: %+v", p)
	}
	p = must[Page[APIKey]](t)(f.ListAPIKeys(c, "acme", ListOptions{Limit: 3, Cursor: p.Next}))
	if len(p.Items) != 1 || p.Next != "" {
		t.Fatalf("keys page 2: %+v", p)
	}
	if p := must[Page[APIKey]](t)(f.ListAPIKeys(c, "other", ListOptions{})); len(p.Items) != 1 {
		t.Errorf("other's keys: %+v", p)
	}
	_, _, err = f.CreateAPIKey(c, NewAPIKey{Tenant: "nowhere", Name: "ci", Role: RoleViewer})
	wantErr(t, "a key of an unknown tenant", err, store.ErrNotFound, ErrTenantNotFound)
	_, _, err = f.CreateAPIKey(c, NewAPIKey{Tenant: "acme", Name: "ci", Role: "root"})
	wantErr(t, "a key with an unknown role", err, store.ErrInvalid, nil)
}
