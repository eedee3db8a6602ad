package roles

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"plaita/test/redistest"
)

// dev's choice of a Redis, against private redis-servers: an empty one and one with plaita's
// keys only are used; one holding another key is not — the first line names the key, says dev
// did not touch it and how to choose — and its keys are as they were; one it was told to use
// is used whatever it holds; none answering is local mode.
func TestChooseDevRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	set := func(t *testing.T, c rueidis.Client, kv ...string) {
		t.Helper()
		for i := 0; i < len(kv); i += 2 {
			if err := c.Do(ctx, c.B().Set().Key(kv[i]).Value(kv[i+1]).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	dbsize := func(t *testing.T, c rueidis.Client) int64 {
		t.Helper()
		n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	empty := redistest.StartServer(t)
	if d := chooseDevRedis(ctx, empty.URL(), false, RedisClient); !d.Use || !d.Answered || d.Survey.Keys != 0 {
		t.Fatalf("an empty Redis: %+v", d)
	}

	ours := redistest.StartServer(t)
	oc := ours.Client(t)
	set(t, oc, "plaita:flow_list", "x", "plaita:demo:execution:{ex_1}", "{}", "{plaita:flow:queue:dlq}:lettered:plaita:flow:queue:1-0", "1")
	if d := chooseDevRedis(ctx, ours.URL(), false, RedisClient); !d.Use || d.Survey.Keys != 3 || !strings.Contains(d.where("plaita"), "plaita's keys only") {
		t.Fatalf("a Redis with plaita's keys only: %+v", d)
	}

	foreign := redistest.StartServer(t)
	fc := foreign.Client(t)
	set(t, fc, "plaita:flow_list", "x", "session:42", "alice", "cache:home", "<html>")
	before := dbsize(t, fc)
	d := chooseDevRedis(ctx, foreign.URL(), false, RedisClient)
	if d.Use || !d.Answered || len(d.Survey.Foreign) == 0 {
		t.Fatalf("a Redis with other keys: %+v", d)
	}
	where := d.where("go run .")
	for _, want := range []string{"local mode", foreign.Addr(), "did not touch it", `"session:42"`, "go run . dev --redis-url redis://" + foreign.Addr() + "/0",
		"redis://" + foreign.Addr() + "/1", "nothing"} {
		if !strings.Contains(where, want) {
			t.Errorf("the first line lacks %q: %s", want, where)
		}
	}
	if !strings.Contains(where, `"cache:home"`) && !strings.Contains(where, `"session:42"`) {
		t.Errorf("names no foreign key: %s", where)
	}
	if after := dbsize(t, fc); after != before {
		t.Fatalf("DBSIZE %d after the choice, %d before", after, before)
	}
	if v, err := fc.Do(ctx, fc.B().Get().Key("session:42").Build()).ToString(); err != nil || v != "alice" {
		t.Fatalf("session:42 after the choice: %q %v", v, err)
	}

	if d := chooseDevRedis(ctx, foreign.URL(), true, RedisClient); !d.Use || d.Survey.Keys != 0 {
		t.Fatalf("a Redis dev was told to use: %+v", d)
	}
	down := "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"
	if d := chooseDevRedis(ctx, down, true, RedisClient); d.Use || d.Answered || d.Err == nil || !strings.Contains(d.where("plaita"), "no Redis answers") {
		t.Fatalf("no Redis: %+v", d)
	}
}
