package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

// Who listens: an execution's channel, a tenant's status channel (the default tenant's and
// another's), and a pattern subscription, which makes every event listened (Redis does not say
// which patterns are held). A private server: a pattern held by another test would show here.
func TestLiveEventsListened(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	live := store.NewLiveEvents(store.OnRedis(c), "plaita")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listened := func() store.Watchers {
		t.Helper()
		w, err := live.Listened(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	if w := listened(); w.All || w.Execution("ex_1") || w.Tenant("default") {
		t.Fatalf("nobody subscribed: %+v", w)
	}
	sub := func(cmd rueidis.Completed, until func(store.Watchers) bool) context.CancelFunc {
		t.Helper()
		sctx, stop := context.WithCancel(context.Background())
		go c.Receive(sctx, cmd, func(rueidis.PubSubMessage) {})
		for deadline := time.Now().Add(5 * time.Second); !until(listened()); {
			if time.Now().After(deadline) {
				t.Fatal("the subscription never showed")
			}
			time.Sleep(10 * time.Millisecond)
		}
		return stop
	}
	ch, _ := keys.MustFor("plaita", "acme").ExecutionEvents("ex_1")
	defer sub(c.B().Subscribe().Channel(ch).Build(), func(w store.Watchers) bool { return w.Execution("ex_1") })()
	defer sub(c.B().Subscribe().Channel(keys.MustFor("plaita", "").ExecutionStatus(), keys.MustFor("plaita", "acme").ExecutionStatus()).Build(),
		func(w store.Watchers) bool { return w.Tenant("acme") && w.Tenant("default") })()
	if w := listened(); w.All || w.Execution("ex_2") || w.Tenant("other") || len(w.Executions) != 1 || len(w.Tenants) != 2 {
		t.Fatalf("one execution and two tenants subscribed: %+v", w)
	}
	defer sub(c.B().Psubscribe().Pattern("plaita:*").Build(), func(w store.Watchers) bool { return w.All })()
	if w := listened(); !w.Execution("ex_2") || !w.Tenant("other") {
		t.Fatalf("with a pattern subscriber: %+v", w)
	}
}
