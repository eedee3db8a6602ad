package store_test

import (
	"context"
	"fmt"
	"testing"

	"plaita/store"
	"plaita/test/redistest"
)

// A survey of a private Redis: empty; plaita's keys only (the root's and the hash-tagged
// markers beside the dead-letter stream); one foreign key among many of plaita's, found and
// named; and it writes nothing.
func TestSurveyKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	ctx := context.Background()
	s, err := store.SurveyKeys(ctx, c, "", 1000)
	if err != nil || s.Keys != 0 || !s.Complete || !s.OnlyPlaita() {
		t.Fatalf("empty: %+v %v", s, err)
	}
	for i := range 1200 {
		if err := c.Do(ctx, c.B().Set().Key(fmt.Sprintf("plaita:flow:f%d:1", i)).Value("{}").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx, c.B().Set().Key("{plaita:flow:queue:dlq}:lettered:plaita:flow:queue:1-0").Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s, err = store.SurveyKeys(ctx, c, "", 5000)
	if err != nil || s.Keys != 1201 || !s.Complete || !s.OnlyPlaita() || s.Examined < 1201 {
		t.Fatalf("plaita's keys only: %+v %v", s, err)
	}
	// COUNT is a hint: a step may return a few more keys than asked, never the whole database here.
	if s, err = store.SurveyKeys(ctx, c, "", 100); err != nil || s.Complete || !s.OnlyPlaita() || s.Examined >= 1201 {
		t.Fatalf("a bounded survey: %+v %v", s, err)
	}
	if err := c.Do(ctx, c.B().Set().Key("session:42").Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s, err = store.SurveyKeys(ctx, c, "", 5000)
	if err != nil || s.OnlyPlaita() || len(s.Foreign) != 1 || s.Foreign[0] != "session:42" || s.Keys != 1202 {
		t.Fatalf("a foreign key: %+v %v", s, err)
	}
	if n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64(); err != nil || n != 1202 {
		t.Fatalf("DBSIZE after the surveys: %d %v", n, err)
	}
}
