package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

func TestSharedServerAndRootCleanup(t *testing.T) {
	ctx := context.Background()
	c := Client(t)
	root := Root(t, c)
	if err := c.Do(ctx, c.B().Set().Key(root+":k").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	DeleteRoot(t, c, root)
	if n, _ := c.Do(ctx, c.B().Exists().Key(root+":k").Build()).AsInt64(); n != 0 {
		t.Fatal("DeleteRoot left a key")
	}
}

func TestPrivateServerRestart(t *testing.T) {
	ctx := context.Background()
	s := StartServer(t)
	c := s.Client(t)
	if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	// rueidis retries read-only commands until the context ends: always bound it.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := c.Do(short, c.B().Get().Key("k").Build()).Error(); err == nil {
		t.Fatal("a killed server answered")
	}
	s.Restart()
	// Persistence is off: the key is gone.
	if err := c.Do(ctx, c.B().Get().Key("k").Build()).Error(); !rueidis.IsRedisNil(err) {
		t.Fatalf("after restart: %v", err)
	}
}

func TestCluster(t *testing.T) {
	ctx := context.Background()
	c, servers := StartCluster(t, 3)
	if len(servers) != 3 {
		t.Fatal("want 3 servers")
	}
	for _, k := range []string{"a", "b", "c", "{x}1", "{x}2"} {
		if err := c.Do(ctx, c.B().Set().Key(k).Value("v").Build()).Error(); err != nil {
			t.Fatalf("set %s: %v", k, err)
		}
	}
	if len(c.Nodes()) < 3 {
		t.Errorf("client sees %d nodes", len(c.Nodes()))
	}
}
