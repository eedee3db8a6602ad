package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"plaita/store"
)

// EventsBackend is one implementation of the event bus under the contract.
type EventsBackend struct {
	Name string
	// Open makes a new, empty event bus for one case (cases run in parallel).
	Open func(t *testing.T) *store.Events
}

// EventsContract runs the event bus's cases against b: what the console, the CLI and the
// filter rely on — a publish is idempotent by id, a listing pages newest first by type, and a
// wake-up is claimed once, taken over only after its grace, and final once sent.
func EventsContract(t *testing.T, b EventsBackend) {
	runCases(t, b.Name, b.Open, []namedCase[*store.Events]{
		{"PublishIsIdempotentByID", publishIsIdempotentByID},
		{"PagesNewestFirstByType", pagesNewestFirstByType},
		{"WakeClaimedOnce", wakeClaimedOnce},
	})
}

// namedCase is one case of a contract over a backend's value of type T.
type namedCase[T any] struct {
	name string
	run  func(t *testing.T, v T)
}

// runCases runs each case in parallel, as backend/case, on a value open makes for it alone.
func runCases[T any](t *testing.T, backend string, open func(t *testing.T) T, cases []namedCase[T]) {
	for _, c := range cases {
		t.Run(backend+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, open(t))
		})
	}
}

func eventsCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func publish(t *testing.T, e *store.Events, ev store.Event) (store.Event, bool) {
	t.Helper()
	got, dup, err := e.Publish(eventsCtx(t), ev)
	if err != nil {
		t.Fatal(err)
	}
	return got, dup
}

func publishIsIdempotentByID(t *testing.T, e *store.Events) {
	ev := store.Event{ID: "evt_contract1", Type: "order.paid", TenantID: "acme", Data: json.RawMessage(`{"order": 1}`)}
	first, dup := publish(t, e, ev)
	if dup || first.ID != ev.ID || string(first.Data) != `{"order":1}` || first.PublishedAt.IsZero() {
		t.Fatalf("first publish %+v (duplicate %v)", first, dup)
	}
	again, dup := publish(t, e, ev)
	if !dup || !again.PublishedAt.Equal(first.PublishedAt) {
		t.Fatalf("the same event again: %+v (duplicate %v), want the first one, duplicate", again, dup)
	}
	other := ev
	other.Data = json.RawMessage(`{"order": 2}`)
	if _, _, err := e.Publish(eventsCtx(t), other); !errors.Is(err, store.ErrEventConflict) {
		t.Fatalf("another event under the same id: %v, want ErrEventConflict", err)
	}
	got, err := e.Get(eventsCtx(t), "acme", ev.ID)
	if err != nil || got.Type != ev.Type || string(got.Data) != `{"order":1}` {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := e.Get(eventsCtx(t), "globex", ev.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another tenant's event: %v, want ErrNotFound", err)
	}
}

func pagesNewestFirstByType(t *testing.T, e *store.Events) {
	// The bus's clock moves a second between publications, so "newest" is well defined.
	at := time.Now()
	e.Now = func() time.Time { return at }
	var paid []string
	for i, typ := range []string{"order.paid", "order.paid", "order.shipped", "order.paid"} {
		at = at.Add(time.Second)
		ev, _ := publish(t, e, store.Event{Type: typ, TenantID: "acme", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if typ == "order.paid" {
			paid = append([]string{ev.ID}, paid...) // newest first
		}
	}
	p, err := e.Page(eventsCtx(t), store.EventQuery{Tenant: "acme", Type: "order.paid", Limit: 2})
	if err != nil || len(p.Events) != 2 || p.Events[0].ID != paid[0] || p.Events[1].ID != paid[1] || p.NextCursor == "" {
		t.Fatalf("first page %+v %v, want %v", p, err, paid[:2])
	}
	p, err = e.Page(eventsCtx(t), store.EventQuery{Tenant: "acme", Type: "order.paid", Limit: 2, Cursor: p.NextCursor})
	if err != nil || len(p.Events) != 1 || p.Events[0].ID != paid[2] || p.NextCursor != "" {
		t.Fatalf("last page %+v %v, want %v", p, err, paid[2:])
	}
	all, err := e.Page(eventsCtx(t), store.EventQuery{Tenant: "acme", Limit: 10})
	if err != nil || len(all.Events) != 4 {
		t.Fatalf("every type: %+v %v", all, err)
	}
	if none, err := e.Page(eventsCtx(t), store.EventQuery{Tenant: "globex", Limit: 10}); err != nil || len(none.Events) != 0 {
		t.Fatalf("another tenant's events: %+v %v", none, err)
	}
}

func wakeClaimedOnce(t *testing.T, e *store.Events) {
	claim := func(owner, event string, grace time.Duration) store.Wake {
		t.Helper()
		w, err := e.ClaimWake(eventsCtx(t), "acme", "ex_1", "s1", event, owner, grace)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	a := claim("a", "evt_1", time.Hour)
	if a.State != store.WakeClaimed || !a.Mine() {
		t.Fatalf("first claim %+v", a)
	}
	if b := claim("b", "evt_1", time.Hour); b.State != store.WakePending || b.Mine() {
		t.Fatalf("a claim within the grace %+v, want pending", b)
	}
	// Past the grace (0 here), another owner takes it over; the first owner's claim is gone.
	b := claim("b", "evt_1", 0)
	if b.State != store.WakeTakenOver || !b.Mine() {
		t.Fatalf("a claim past the grace %+v, want taken over", b)
	}
	if ok, err := e.WakeSent(eventsCtx(t), a, "1-1"); err != nil || ok {
		t.Fatalf("the first owner marked it sent after the takeover: %v %v", ok, err)
	}
	if ok, err := e.WakeSent(eventsCtx(t), b, "1-2"); err != nil || !ok {
		t.Fatalf("the owner's WakeSent: %v %v", ok, err)
	}
	if c := claim("c", "evt_1", 0); c.State != store.WakeSent || c.Mine() {
		t.Fatalf("a claim of a sent wake-up %+v, want sent (final)", c)
	}
	// Another event is another marker; a released one is claimed again at once.
	d := claim("d", "evt_2", time.Hour)
	if d.State != store.WakeClaimed {
		t.Fatalf("another event's claim %+v", d)
	}
	if ok, err := e.ReleaseWake(eventsCtx(t), d); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	if again := claim("e", "evt_2", time.Hour); again.State != store.WakeClaimed {
		t.Fatalf("a released wake-up %+v, want claimed again", again)
	}
}
