package store_test

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
)

func TestFlowsPublishGetLatest(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	fl := store.NewFlows(f.c, f.root)
	same := func(def []byte) func([]byte) (bool, error) {
		return func(stored []byte) (bool, error) { return bytes.Equal(stored, def), nil }
	}
	v1, v2 := []byte(`{"id":"f","version":"1"}`), []byte(`{"id":"f","version":"2"}`)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if _, err := fl.Get(c, "acme", "f", "1"); !errors.Is(err, store.ErrFlowNotFound) {
		t.Fatalf("unpublished: %v", err)
	}
	if _, err := fl.Latest(c, "acme", "f"); !errors.Is(err, store.ErrFlowNotFound) {
		t.Fatalf("no versions: %v", err)
	}
	if r, err := fl.Publish(c, "acme", "f", "1", v1, t0, same(v1)); err != nil || r != store.Published {
		t.Fatalf("publish: %v %v", r, err)
	}
	if r, err := fl.Publish(c, "acme", "f", "2", v2, t0.Add(time.Second), same(v2)); err != nil || r != store.Published {
		t.Fatalf("publish v2: %v %v", r, err)
	}
	// The same definition again: a no-op that does not make version 1 the latest.
	if r, err := fl.Publish(c, "acme", "f", "1", v1, t0.Add(time.Hour), same(v1)); err != nil || r != store.AlreadyPublished {
		t.Fatalf("republish: %v %v", r, err)
	}
	if v, err := fl.Latest(c, "acme", "f"); err != nil || v != "2" {
		t.Fatalf("latest %q %v", v, err)
	}
	// Another definition under a published version is refused and changes nothing.
	if _, err := fl.Publish(c, "acme", "f", "1", v2, t0, same(v2)); !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("conflict: %v", err)
	}
	if b, err := fl.Get(c, "acme", "f", "1"); err != nil || !bytes.Equal(b, v1) {
		t.Fatalf("stored %s %v", b, err)
	}
	// Tenants are apart.
	if _, err := fl.Get(c, "", "f", "1"); !errors.Is(err, store.ErrFlowNotFound) {
		t.Fatalf("default tenant sees acme's flow: %v", err)
	}
	if _, err := fl.Publish(c, "acme", "f", "bad:version", v1, t0, same(v1)); err == nil {
		t.Fatal("a version with ':' was published")
	}
}

// A flow that is not published is a permanent failure: reading it again finds nothing until
// someone publishes it, so no caller retries it as a Redis failure.
func TestFlowNotFoundIsPermanent(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	fl := store.NewFlows(f.c, f.root)
	_, getErr := fl.Get(c, "acme", "missing", "1")
	_, latestErr := fl.Latest(c, "acme", "missing")
	for name, err := range map[string]error{"get": getErr, "latest": latestErr} {
		if !errors.Is(err, store.ErrFlowNotFound) || model.IsTransient(err) {
			t.Errorf("%s of an unpublished flow: %v, IsTransient %v; want ErrFlowNotFound, permanent", name, err, model.IsTransient(err))
		}
	}
}

// TestFlowPagesByCursor: the flows a page at a time, most recently published first, with ties
// (flows published in the same millisecond) split across pages and none seen twice; a flow
// published again moves to the front; a forged cursor is ErrInvalid.
func TestFlowPagesByCursor(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	fl := store.NewFlows(f.c, f.root)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// f0..f4 in the same millisecond, then f5, f6 later.
	for i, at := range []time.Time{t0, t0, t0, t0, t0, t0.Add(time.Second), t0.Add(2 * time.Second)} {
		id := "f" + strconv.Itoa(i)
		def := []byte(`{"id":"` + id + `"}`)
		if _, err := fl.Publish(c, "acme", id, "1", def, at, func([]byte) (bool, error) { return true, nil }); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	cursor := ""
	for range 10 {
		p, err := fl.Page(c, "acme", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			seen = append(seen, it.FlowID)
			if it.Latest != "1" || it.Versions != 1 {
				t.Fatalf("item %+v", it)
			}
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if want := []string{"f6", "f5", "f4", "f3", "f2", "f1", "f0"}; !slices.Equal(seen, want) {
		t.Fatalf("pages %v, want %v", seen, want)
	}
	if _, err := fl.Page(c, "acme", "forged", 2); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("forged cursor: %v", err)
	}
	if items, err := fl.List(c, "acme", 3); err != nil || len(items) != 3 || items[0].FlowID != "f6" {
		t.Fatalf("list: %+v %v", items, err)
	}
}
