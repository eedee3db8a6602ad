package sqlite

import (
	"errors"
	"testing"
	"time"

	"plaita/store"
)

// The database remembers each mode it was served in: the first time stays, the last time and
// where move on; a mode it never served in is not there.
func TestMarkServed(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_000_000).UTC()
	f := setup(t, WithClock(func() time.Time { return now }))
	c := ctx(t)
	if _, ok, err := f.ServedIn(c, ServedCluster); err != nil || ok {
		t.Fatalf("a new database served in cluster mode: %v %v", ok, err)
	}
	if err := f.MarkServed(c, ServedCluster, "redis://a:6379/0"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if err := f.MarkServed(c, ServedCluster, "redis://b:6379/0"); err != nil {
		t.Fatal(err)
	}
	s, ok, err := f.ServedIn(c, ServedCluster)
	if err != nil || !ok || s.Detail != "redis://b:6379/0" || s.First.UnixMilli() != 1_000_000 || !s.Last.Equal(now) {
		t.Fatalf("served in cluster mode: %+v %v %v", s, ok, err)
	}
	if _, ok, err := f.ServedIn(c, ServedLocal); err != nil || ok {
		t.Fatalf("served in local mode: %v %v", ok, err)
	}
	if err := f.MarkServed(c, "other", ""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an unknown mode: %v", err)
	}
}
