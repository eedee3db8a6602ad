package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/model"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

// numsub is how many subscribers a channel has.
func numsub(t *testing.T, c rueidis.Client, channel string) int64 {
	t.Helper()
	res, err := c.Do(context.Background(), c.B().PubsubNumsub().Channel(channel).Build()).ToArray()
	if err != nil || len(res) != 2 {
		t.Fatalf("PUBSUB NUMSUB %s: %v %v", channel, res, err)
	}
	n, _ := res[1].AsInt64()
	return n
}

func waitNumsub(t *testing.T, c rueidis.Client, channel string, want int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); numsub(t, c, channel) != want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d subscribers, want %d", channel, numsub(t, c, channel), want)
		}
	}
}

func next(t *testing.T, s *store.LiveSubscription) store.LiveMessage {
	t.Helper()
	select {
	case m, ok := <-s.C:
		if !ok {
			t.Fatalf("the subscription ended: %v", s.Err())
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message")
	}
	return store.LiveMessage{}
}

// A subscription is confirmed when Subscribe returns: a message published right after is
// heard. Two subscriptions of one channel are independent (closing one leaves the other
// subscribed), and a closed one leaves no subscriber behind — the worker stops publishing.
func TestSubscribeExecutionAndStatus(t *testing.T) {
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	live := store.NewLiveEvents(store.OnRedis(c), root)
	ctx := t.Context()
	channel, _ := keys.MustFor(root, "acme").ExecutionEvents("ex_1")

	a, err := live.SubscribeExecution(ctx, "acme", "ex_1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := live.SubscribeExecution(ctx, "acme", "ex_1")
	if err != nil {
		t.Fatal(err)
	}
	if n := numsub(t, c, channel); n != 2 {
		t.Fatalf("after two Subscribe calls returned: %d subscribers", n)
	}
	if err := live.Publish(ctx, "acme", "ex_1", []byte(`{"seq":1}`)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*store.LiveSubscription{a, b} {
		if m := next(t, s); string(m.Payload) != `{"seq":1}` || m.Channel != channel {
			t.Fatalf("heard %+v", m)
		}
	}
	a.Close()
	a.Close() // twice: fine
	if _, open := <-a.C; open {
		t.Fatal("a closed subscription still delivers")
	}
	waitNumsub(t, c, channel, 1)
	if err := live.Publish(ctx, "acme", "ex_1", []byte(`{"seq":2}`)); err != nil {
		t.Fatal(err)
	}
	if m := next(t, b); string(m.Payload) != `{"seq":2}` {
		t.Fatalf("the other subscription heard %+v", m)
	}
	b.Close()
	waitNumsub(t, c, channel, 0)
	if a.Err() != nil || b.Err() != nil {
		t.Fatalf("closed subscriptions report errors: %v %v", a.Err(), b.Err())
	}

	st, err := live.SubscribeStatus(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := live.PublishStatus(ctx, "default", "ex_2", []byte(`{"status":"completed"}`)); err != nil {
		t.Fatal(err)
	}
	if m := next(t, st); m.Channel != keys.MustFor(root, "").ExecutionStatus() {
		t.Fatalf("status heard on %s", m.Channel)
	}
	if _, err := live.SubscribeStatus(ctx, "Bad Tenant"); err == nil {
		t.Fatal("a bad tenant subscribed")
	}
}

// A reader that does not read loses what does not fit the buffer, and is told so; the
// subscription itself goes on. The end of the context ends the subscription.
func TestSubscriptionLostAndContext(t *testing.T) {
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	live := store.NewLiveEvents(store.OnRedis(c), root)
	ctx, cancel := context.WithCancel(t.Context())
	s, err := live.SubscribeExecution(ctx, "", "ex_flood")
	if err != nil {
		t.Fatal(err)
	}
	const n = store.SubscriptionBuffer + 50
	for i := range n {
		if err := live.Publish(ctx, "", "ex_flood", fmt.Appendf(nil, `{"seq":%d}`, i+1)); err != nil {
			t.Fatal(err)
		}
	}
	// The last message is the positive signal that all were handed to the subscription.
	if err := live.Publish(ctx, "", "ex_flood", []byte(`{"last":true}`)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !s.Lost(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a full buffer was never reported")
		}
	}
	if got := len(s.C); got != store.SubscriptionBuffer {
		t.Fatalf("%d messages held, want the buffer's %d", got, store.SubscriptionBuffer)
	}
	cancel()
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the end of the context did not end the subscription")
	}
	if s.Err() != nil {
		t.Fatalf("a cancelled subscription reports %v", s.Err())
	}
}

// A Redis that goes away ends the subscription with a transient error; Subscribe against a
// dead Redis fails the same way.
func TestSubscriptionEndsWithTheConnection(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	live := store.NewLiveEvents(store.OnRedis(c), "plaita")
	s, err := live.SubscribeExecution(t.Context(), "", "ex_1")
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription outlived its server")
	}
	if err := s.Err(); !errors.Is(err, store.ErrRedis) || !model.IsTransient(err) {
		t.Fatalf("err %v, want a transient ErrRedis", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := live.SubscribeExecution(ctx, "", "ex_1"); err == nil {
		t.Fatal("subscribed with no server")
	}
}
