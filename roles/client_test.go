package roles

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"plaita/test/redistest"
)

// Every role's client: no client-side cache, and buffers of connBufferBytes each way.
func TestClientOptions(t *testing.T) {
	opt, err := clientOptions("redis://127.0.0.1:6379/3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !opt.DisableCache || opt.ReadBufferEachConn != connBufferBytes || opt.WriteBufferEachConn != connBufferBytes || opt.SelectDB != 3 {
		t.Fatalf("options %+v", opt)
	}
	if _, err := clientOptions("http://x", nil); err == nil || !strings.Contains(err.Error(), "redis url") {
		t.Fatalf("a bad URL: %v", err)
	}
}

// Values far longer than the buffers go out and come back whole, alone and pipelined with
// short ones.
func TestClientCarriesValuesLongerThanItsBuffers(t *testing.T) {
	c, err := RedisClient(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // after Root's cleanup, which deletes the keys through it
	root := redistest.Root(t, c)
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), 5*connBufferBytes/16+7) // 5 buffers and a bit
	if err := c.Do(ctx, c.B().Set().Key(root+":big").Value(string(big)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	res := c.DoMulti(ctx, c.B().Set().Key(root+":small").Value("s").Build(), c.B().Get().Key(root+":big").Build(),
		c.B().Get().Key(root+":small").Build(), c.B().Get().Key(root+":big").Build())
	for i, want := range []string{"OK", string(big), "s", string(big)} {
		got, err := res[i].ToString()
		if err != nil || got != want {
			t.Fatalf("reply %d: %d bytes, %v; want %d bytes", i, len(got), err, len(want))
		}
	}
}
