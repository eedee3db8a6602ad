package queue

import (
	"errors"
	"testing"
)

// DLQPage walks the whole dead-letter stream newest first, a page at a time, each entry once.
func TestDLQPageWalksTheStream(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := testCtx(t)
	var ids []string
	for range 5 {
		b.enqueue(t, startEnv("f"))
		d := b.readOne(t, b.q, "w1")
		if err := b.q.DeadLetter(ctx, d, "poison"); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range b.dlq(t) { // newest first
		ids = append(ids, e.ID)
	}
	var walked []string
	before := ""
	for pages := 0; ; pages++ {
		es, next, err := b.q.DLQPage(ctx, before, 2)
		if err != nil || pages > 5 {
			t.Fatalf("page %d: %v", pages, err)
		}
		for _, e := range es {
			walked = append(walked, e.ID)
		}
		if next == "" {
			break
		}
		before = next
	}
	if len(walked) != 5 || len(ids) != 5 {
		t.Fatalf("walked %v, the stream has %v", walked, ids)
	}
	for i := range ids {
		if walked[i] != ids[i] {
			t.Fatalf("walked %v, want %v", walked, ids)
		}
	}
	if _, _, err := b.q.DLQPage(ctx, "not-an-id", 2); !errors.Is(err, ErrDLQEntryNotFound) {
		t.Fatalf("a bad id: %v", err)
	}
}
