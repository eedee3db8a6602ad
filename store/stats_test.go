package store_test

import (
	"testing"

	"plaita/store"
	"plaita/test/redistest"
)

// Commands show up in the count, those inside scripts included.
func TestCommandCalls(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	// The client's connections say HELLO when they open: open them before counting.
	if err := c.Do(ctx(t), c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	before, err := store.CommandCalls(ctx(t), c)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := c.Do(ctx(t), c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx(t), c.B().Eval().Script("redis.call('GET', KEYS[1]); return 1").Numkeys(1).Key("k").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	after, err := store.CommandCalls(ctx(t), c)
	if err != nil {
		t.Fatal(err)
	}
	// 5 SET + EVAL + its GET + the first reading's INFO; the client's keep-alive PING may land
	// in the window too.
	if d := after - before; d != 8 && d != 9 {
		t.Fatalf("%d calls counted, want 8 (9 with a keep-alive PING)", d)
	}
}
