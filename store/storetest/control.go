package storetest

import (
	"errors"
	"testing"
	"time"

	"plaita/store"
)

// ControlBackend is one implementation of the instances' control channels under the contract.
type ControlBackend struct {
	Name string
	// Open makes new, empty control channels for one case (cases run in parallel).
	Open func(t *testing.T) *store.Control
}

// ControlContract runs the control channels' cases against b: what `plaita ctl` and the
// console's cluster page rely on — a request reaches the instance listening on its channel,
// its answer is awaited once, and no answer in time is not an error.
func ControlContract(t *testing.T, b ControlBackend) {
	runCases(t, b.Name, b.Open, []namedCase[*store.Control]{
		{"AskedAnsweredOnce", askedAnsweredOnce},
		{"NoAnswerIsNotAnError", noAnswerIsNotAnError},
	})
}

func askedAnsweredOnce(t *testing.T, c *store.Control) {
	sub, err := c.Listen(eventsCtx(t), "w-1")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	req := store.ControlRequest{ID: "rq_contract1", Op: "status", From: "ctl@test", At: time.Now().UTC()}
	if _, err := c.Ask(eventsCtx(t), "w-1", store.ControlRequest{ID: "bad id", Op: "status"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a request id that names no reply list: %v, want ErrInvalid", err)
	}
	if n, err := c.Ask(eventsCtx(t), "w-1", req); err != nil || n != 1 {
		t.Fatalf("ask: reached %d, %v; want the one listener", n, err)
	}
	select {
	case m, ok := <-sub.C:
		if !ok {
			t.Fatalf("the subscription ended: %v", sub.Err())
		}
		got, err := store.DecodeControlRequest(m.Payload)
		if err != nil || got.ID != req.ID || got.Op != "status" || got.From != req.From {
			t.Fatalf("heard %+v %v", got, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the listener never heard the request")
	}
	reply := store.ControlReply{RequestID: req.ID, InstanceID: "w-1", Role: "worker", Status: "running", At: time.Now().UTC()}
	if err := c.Answer(eventsCtx(t), reply); err != nil {
		t.Fatal(err)
	}
	got, ok, err := c.Await(eventsCtx(t), req.ID, 5*time.Second)
	if err != nil || !ok || got.InstanceID != "w-1" || got.Status != "running" {
		t.Fatalf("await: %+v %v %v", got, ok, err)
	}
	// The answer is taken once: a second wait has none.
	if got, ok, err := c.Await(eventsCtx(t), req.ID, 100*time.Millisecond); err != nil || ok {
		t.Fatalf("a second await: %+v %v %v, want no answer", got, ok, err)
	}
}

func noAnswerIsNotAnError(t *testing.T, c *store.Control) {
	if n, err := c.Ask(eventsCtx(t), "w-gone", store.ControlRequest{ID: "rq_contract2", Op: "status", At: time.Now().UTC()}); err != nil || n != 0 {
		t.Fatalf("a request nobody listens to: reached %d, %v", n, err)
	}
	if got, ok, err := c.Await(eventsCtx(t), "rq_contract2", 100*time.Millisecond); err != nil || ok {
		t.Fatalf("await without an answer: %+v %v %v, want none and no error", got, ok, err)
	}
	if err := c.Answer(eventsCtx(t), store.ControlReply{}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an answer to no request: %v, want ErrInvalid", err)
	}
}
