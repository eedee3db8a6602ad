package store

import (
	"context"
	"testing"
	"time"

	"plaita/test/redistest"
)

// A member re-scored between the listing's read and its prune (the execution suspended at an
// approval again) is kept; one still at the score read is removed.
func TestApprovalPruneIsConditionalOnTheScoreRead(t *testing.T) {
	c := redistest.Client(t)
	idx := redistest.Root(t, c) + ":approval_index"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Do(ctx, c.B().Zadd().Key(idx).ScoreMember().ScoreMember(1000, "ex_old").ScoreMember(2000, "ex_again").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// The listing read ex_again at 1500; it has been re-scored to 2000 since.
	n, err := pruneScript.Exec(ctx, c, []string{idx}, []string{"ex_old", "1000", "ex_again", "1500"}).AsInt64()
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want 1", n, err)
	}
	left, err := c.Do(ctx, c.B().Zrange().Key(idx).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil || len(left) != 1 || left[0] != "ex_again" {
		t.Fatalf("left %v (%v), want [ex_again]", left, err)
	}
}
