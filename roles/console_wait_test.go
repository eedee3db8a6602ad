package roles

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/test/redistest"
)

// The wait for Redis tries again with a backoff until a connect succeeds and hands that client
// over; a stop during a connect that hangs returns at once, and is safe twice.
func TestRedisWaitTriesUntilRedisAnswers(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	var tries atomic.Int32
	w := &redisWait{url: srv.URL(), first: time.Millisecond, max: 4 * time.Millisecond, got: make(chan rueidis.Client, 1),
		connect: func(url string) (rueidis.Client, error) {
			if tries.Add(1) < 4 {
				return nil, errors.New("connection refused")
			}
			return RedisClient(url)
		}}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-w.got:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("no client after Redis answered")
	}
	if n := w.tries.Load(); n != 4 {
		t.Fatalf("%d tries, want 4", n)
	}
	w.Stop(context.Background())
	w.Stop(context.Background())

	hang := make(chan struct{})
	defer close(hang)
	entered := make(chan struct{}, 1)
	w = &redisWait{url: "redis://unused", first: time.Millisecond, max: time.Millisecond, got: make(chan rueidis.Client, 1),
		connect: func(string) (rueidis.Client, error) {
			entered <- struct{}{}
			<-hang
			return nil, errors.New("gave up")
		}}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-entered
	stopped := make(chan struct{})
	go func() { w.Stop(context.Background()); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop waits for a connect that hangs")
	}
}
