package storetest

import (
	"errors"
	"testing"
	"time"

	"plaita/store"
)

// CredentialsBackend is one driver of the credentials under the contract.
type CredentialsBackend struct {
	Name string
	// Open makes a new, empty credential store for one case (cases run in parallel).
	Open func(t *testing.T) *store.Credentials
}

// CredentialsContract runs the credentials' cases against b: what control/credentials.go
// relies on — a record is read back as written, a name is created once, a replacement and a
// delete check the revision read, the list is by name, and tenants are apart.
func CredentialsContract(t *testing.T, b CredentialsBackend) {
	runCases(t, b.Name, b.Open, []namedCase[*store.Credentials]{
		{"WrittenThenRead", credentialWrittenThenRead},
		{"CreatedOnce", credentialCreatedOnce},
		{"ReplaceChecksTheRevision", credentialReplaceChecksTheRevision},
		{"ListedByNameTenantsApart", credentialsListedByNameTenantsApart},
		{"DeleteThenNotFound", credentialDeleteThenNotFound},
	})
}

var ct0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func credential(name, sealed string) store.StoredCredential {
	return store.StoredCredential{Name: name, Sealed: sealed, Fingerprint: "fp-" + sealed, CreatedAt: ct0, UpdatedAt: ct0.Add(time.Second),
		CreatedBy: "kim", UpdatedBy: "lee"}
}

func credentialWrittenThenRead(t *testing.T, c *store.Credentials) {
	ctx := t.Context()
	want := credential("github_token", "pk1.sealed")
	got, err := c.Create(ctx, "", want)
	if err != nil || got.Rev != 1 {
		t.Fatalf("create: %+v %v", got, err)
	}
	read, err := c.Get(ctx, "default", "github_token")
	want.Rev = 1
	if err != nil || read != want {
		t.Fatalf("read:\n got  %+v %v\n want %+v", read, err, want)
	}
}

func credentialCreatedOnce(t *testing.T, c *store.Credentials) {
	ctx := t.Context()
	if _, err := c.Create(ctx, "acme", credential("api", "one")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "acme", credential("api", "two")); !errors.Is(err, store.ErrCredentialExists) {
		t.Fatalf("a second create: %v", err)
	}
	if got, _ := c.Get(ctx, "acme", "api"); got.Sealed != "one" {
		t.Fatalf("the second create wrote: %+v", got)
	}
	for _, bad := range []string{"", "1abc", "a b", "a/b", string(make([]byte, 129))} {
		if _, err := c.Create(ctx, "acme", credential(bad, "x")); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("name %q: %v", bad, err)
		}
	}
}

func credentialReplaceChecksTheRevision(t *testing.T, c *store.Credentials) {
	ctx := t.Context()
	if _, err := c.Create(ctx, "", credential("api", "one")); err != nil {
		t.Fatal(err)
	}
	got, err := c.Replace(ctx, "", credential("api", "two"), 1)
	if err != nil || got.Rev != 2 {
		t.Fatalf("replace at revision 1: %+v %v", got, err)
	}
	if _, err := c.Replace(ctx, "", credential("api", "three"), 1); !errors.Is(err, store.ErrCredentialChanged) {
		t.Fatalf("replace at a stale revision: %v", err)
	}
	if _, err := c.Replace(ctx, "", credential("nope", "x"), 1); !errors.Is(err, store.ErrCredentialChanged) {
		t.Fatalf("replace of none: %v", err)
	}
	if read, _ := c.Get(ctx, "", "api"); read.Sealed != "two" || read.Rev != 2 {
		t.Fatalf("after the replacements: %+v", read)
	}
}

func credentialsListedByNameTenantsApart(t *testing.T, c *store.Credentials) {
	ctx := t.Context()
	for _, n := range []string{"zeta", "alpha", "mid"} {
		if _, err := c.Create(ctx, "acme", credential(n, n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Create(ctx, "other", credential("alpha", "theirs")); err != nil {
		t.Fatal(err)
	}
	list, err := c.List(ctx, "acme")
	if err != nil || len(list) != 3 || list[0].Name != "alpha" || list[1].Name != "mid" || list[2].Name != "zeta" || list[0].Sealed != "alpha" {
		t.Fatalf("acme's list: %+v %v", list, err)
	}
	if list, err := c.List(ctx, "nobody"); err != nil || len(list) != 0 {
		t.Fatalf("an empty tenant's list: %+v %v", list, err)
	}
	if got, _ := c.Get(ctx, "other", "alpha"); got.Sealed != "theirs" {
		t.Fatalf("other's alpha: %+v", got)
	}
}

func credentialDeleteThenNotFound(t *testing.T, c *store.Credentials) {
	ctx := t.Context()
	if _, err := c.Create(ctx, "", credential("api", "one")); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Delete(ctx, "", "api"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, err := c.Delete(ctx, "", "api"); ok || err != nil {
		t.Fatalf("a second delete: %v %v", ok, err)
	}
	if _, err := c.Get(ctx, "", "api"); !errors.Is(err, store.ErrCredentialNotFound) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("read after the delete: %v", err)
	}
}
