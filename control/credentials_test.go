package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"plaita/internal/keyring"
	"plaita/store"
	"plaita/test/redistest"
)

// credentialsOn is the credentials on the shared test Redis under a key root of the test's
// own, sealed under whatever ring *ring holds when a key is needed.
func credentialsOn(t *testing.T, ring *keyring.Ring) *Credentials {
	t.Helper()
	c := redistest.Client(t)
	return NewCredentials(store.NewCredentials(store.RedisCredentials(c), redistest.Root(t, c)),
		func() (keyring.Ring, error) { return *ring, nil })
}

// A rotation of the master key on a real Redis: a dry run says what would move and moves
// nothing; a rotation cut short (its context ended after the first tenant) leaves every
// credential under one key or the other, each readable with the ring of both; the rerun moves
// the rest; then the old key is dropped from the ring and every value still opens. A ring
// without the key of the values opens nothing and writes nothing.
func TestRotateKeyResumesAndKeepsEveryValue(t *testing.T) {
	ctx := context.Background()
	a, b := keyring.NewKey(), keyring.NewKey()
	ring := keyring.Ring{Current: a}
	c := credentialsOn(t, &ring)
	tenants := []string{"", "acme"}
	want := map[string]string{}
	for _, tenant := range tenants {
		for i := range 15 {
			name, value := fmt.Sprintf("cred_%02d", i), fmt.Sprintf("value-%s-%d", tenant, i)
			if _, err := c.Create(ctx, tenant, name, []byte(value), "kim"); err != nil {
				t.Fatal(err)
			}
			want[tenant+"/"+name] = value
		}
	}
	readAll := func(what string) {
		t.Helper()
		for k, v := range want {
			tenant, name, _ := strings.Cut(k, "/")
			got, err := c.Resolve(ctx, tenant, name)
			if err != nil || string(got) != v {
				t.Fatalf("%s: %s opens to %q %v, want %q", what, k, got, err, v)
			}
		}
	}

	ring = keyring.Ring{Current: b, Older: []keyring.Key{a}}
	dry, err := c.RotateKey(ctx, tenants, true, nil)
	if err != nil || dry.Rewrapped != 30 || dry.ByKey[a.ID()] != 30 || dry.ByKey[b.ID()] != 0 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if list, _ := c.List(ctx, ""); list[0].KeyID != a.ID() {
		t.Fatalf("the dry run moved %s to %s", list[0].Name, list[0].KeyID)
	}

	cut, cancel := context.WithCancel(ctx)
	_, err = c.RotateKey(cut, tenants, false, func(string, KeyRotation) { cancel() })
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("the cut rotation: %v", err)
	}
	readAll("after the cut rotation")
	rep, err := c.RotateKey(ctx, tenants, false, nil)
	if err != nil || rep.Rewrapped+rep.Already != 30 || rep.ByKey[b.ID()] != 30 || len(rep.Unopenable) != 0 {
		t.Fatalf("the rerun: %+v %v", rep, err)
	}
	if rep.Already < 15 {
		t.Fatalf("the cut rotation moved nothing (already %d): the test proves no resumption", rep.Already)
	}
	ring = keyring.Ring{Current: b} // the old key retired
	readAll("with the old key retired")

	// A ring that lacks the values' key: nothing opens, a rotation writes nothing.
	ring = keyring.Ring{Current: keyring.NewKey()}
	if _, err := c.Resolve(ctx, "", "cred_00"); AsRefusal(err) == nil || AsRefusal(err).Code != "credential_unreadable" || !errors.Is(err, keyring.ErrWrongKey) {
		t.Fatalf("a wrong key: %v", err)
	}
	wrong, err := c.RotateKey(ctx, tenants, false, nil)
	if err != nil || wrong.Rewrapped != 0 || len(wrong.Unopenable) != 30 {
		t.Fatalf("a rotation with a wrong key: %+v %v", wrong, err)
	}
	ring = keyring.Ring{Current: b}
	readAll("after the wrong key's rotation")
}
