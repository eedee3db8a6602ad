package storetest

import (
	"testing"
	"time"

	"plaita/store"
)

// LiveBackend is one implementation of the live events under the contract.
type LiveBackend struct {
	Name string
	// Open makes a new publisher with no subscriber for one case (cases run in parallel).
	Open func(t *testing.T) *store.LiveEvents
}

// LiveContract runs the live events' cases against b: what the console's live views rely on —
// an event published after a subscription returned is heard, the publisher knows who listens
// (and publishes nothing when nobody does), and a closed subscription is gone.
func LiveContract(t *testing.T, b LiveBackend) {
	runCases(t, b.Name, b.Open, []namedCase[*store.LiveEvents]{
		{"HeardAfterSubscribe", heardAfterSubscribe},
		{"ListenedNamesTheWatched", listenedNamesTheWatched},
	})
}

func heardAfterSubscribe(t *testing.T, l *store.LiveEvents) {
	sub, err := l.SubscribeExecution(eventsCtx(t), "acme", "ex_live1")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	status, err := l.SubscribeStatus(eventsCtx(t), "acme")
	if err != nil {
		t.Fatal(err)
	}
	defer status.Close()
	if err := l.Publish(eventsCtx(t), "acme", "ex_live1", []byte(`{"type":"node_started"}`)); err != nil {
		t.Fatal(err)
	}
	if err := l.Publish(eventsCtx(t), "acme", "ex_other", []byte(`{"type":"other"}`)); err != nil {
		t.Fatal(err)
	}
	if err := l.PublishStatus(eventsCtx(t), "acme", "ex_live1", []byte(`{"status":"running"}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sub  *store.LiveSubscription
		want string
	}{{sub, `{"type":"node_started"}`}, {status, `{"status":"running"}`}} {
		select {
		case m := <-c.sub.C:
			if string(m.Payload) != c.want {
				t.Fatalf("heard %s, want %s (another execution's event must not reach it)", m.Payload, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing heard, want %s", c.want)
		}
	}
}

func listenedNamesTheWatched(t *testing.T, l *store.LiveEvents) {
	w, err := l.Listened(eventsCtx(t))
	if err != nil || w.Execution("ex_watched") || w.Tenant("acme") {
		t.Fatalf("before any subscription: %+v %v", w, err)
	}
	sub, err := l.SubscribeExecution(eventsCtx(t), "acme", "ex_watched")
	if err != nil {
		t.Fatal(err)
	}
	status, err := l.SubscribeStatus(eventsCtx(t), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if w, err = l.Listened(eventsCtx(t)); err != nil || !w.Execution("ex_watched") || !w.Tenant("acme") || (!w.All && w.Tenant("globex")) {
		t.Fatalf("while subscribed: %+v %v", w, err)
	}
	sub.Close()
	status.Close()
	// An unsubscription reaches the server after Close returns on some backends: wait for it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if w, err = l.Listened(eventsCtx(t)); err != nil {
			t.Fatal(err)
		}
		if w.All || !w.Execution("ex_watched") && !w.Tenant("acme") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still listened after Close: %+v", w)
		}
	}
}
