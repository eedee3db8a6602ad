package filter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"plaita/queue"
)

// Asks for tenant passes coalesce: a tenant asked for again and again is in the next pass
// once, and past the bound the next pass is a full one (the memory stays bounded).
func TestReconcilerCoalescesTenantAsks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := NewReconciler(b.d, b.s, NewMatcher(b.d, b.s))
	for range 10_000 {
		r.TriggerTenant("acme")
		r.TriggerTenant("globex")
	}
	if len(r.trigger) != 1 {
		t.Fatalf("%d pending signals", len(r.trigger))
	}
	a := r.take()
	if a.all || !a.overflow || len(a.tenants) != 2 {
		t.Fatalf("asked %+v", a)
	}
	for i := range maxAskedTenants + 1 {
		r.TriggerTenant(fmt.Sprintf("t%d", i))
	}
	if a := r.take(); !a.all || a.tenants != nil {
		t.Fatalf("past the bound: all %v, %d tenants", a.all, len(a.tenants))
	}
	if a := r.take(); a.all || a.overflow || len(a.tenants) != 0 {
		t.Fatalf("after a take: %+v", a)
	}
}

// The drop report: one line once a burst is over, with every drop since the last line; a burst
// that goes on is reported every dropReportLong.
func TestDropReportOneLinePerBurst(t *testing.T) {
	t.Parallel()
	var r dropReport
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 5000 {
		r.add([]string{"acme", "default"}[i%2], t0.Add(time.Duration(i)*100*time.Microsecond))
	}
	last := t0.Add(4999 * 100 * time.Microsecond)
	if n, _, _, _, _ := r.take(last.Add(dropReportEvery/2), false); n != 0 {
		t.Fatalf("reported %d while the burst goes on", n)
	}
	n, tenants, first, end, over := r.take(last.Add(dropReportEvery), false)
	if n != 5000 || !over || len(tenants) != 2 || !first.Equal(t0) || !end.Equal(last) {
		t.Fatalf("report %d %v %s %s %v", n, tenants, first, end, over)
	}
	if n, _, _, _, _ := r.take(last.Add(time.Hour), false); n != 0 {
		t.Fatalf("reported %d twice", n)
	}
	// A long burst: a drop every 100 ms for 25 s.
	lines, total := 0, 0
	for i := range 250 {
		now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		r.add("acme", now)
		if n, _, _, _, _ := r.take(now, false); n > 0 {
			lines++
			total += n
		}
	}
	n, _, _, _, _ = r.take(t0.Add(time.Hour), true)
	lines, total = lines+1, total+n
	if lines != 3 || total != 250 {
		t.Fatalf("%d lines for %d drops over 25 s", lines, total)
	}
}

// Notifications past the queue are dropped — counted one by one, logged as one line — and
// each drop asks for a pass of its tenant: the reconciler runs it at once (its interval is an
// hour) and the dropped event wakes its wait.
func TestListenerOverflowTriggersATenantPass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs syncBuf
	b.d.Log = zerolog.New(&logs)
	f := b.flow("acme", ordersFlow)
	b.suspend("acme", f, "ex_block", map[string]any{"order_id": "B"})
	b.suspend("acme", f, "ex_c", map[string]any{"order_id": "C"})
	// The enqueue of ex_block's resume holds the only handler until released.
	entered, release := make(chan struct{}), make(chan struct{})
	enqueue := b.d.Enqueue
	b.d.Enqueue = func(ctx context.Context, env queue.Envelope) (string, error) {
		if env.ExecutionID == "ex_block" {
			close(entered)
			<-release
		}
		return enqueue(ctx, env)
	}
	s := b.s
	s.Handlers, s.Queue = 1, 1
	m := NewMatcher(b.d, s)
	r := NewReconciler(b.d, s, m)
	b.must(r.Start(b.ctx()))
	defer r.Stop(context.Background())
	waitCounter(t, b, "plaita_filter_reconcile_passes_total", 1) // the start-up pass is over

	l := NewListener(b.d, s, m)
	var mu sync.Mutex
	asked := map[string]int{}
	l.OnOverflow = func(tenant string) {
		mu.Lock()
		asked[tenant]++
		mu.Unlock()
		r.TriggerTenant(tenant)
	}
	subscribed := make(chan bool, 4)
	l.OnSubscribed = func(bool) { subscribed <- true }
	b.must(l.Start(b.ctx()))
	defer l.Stop(context.Background())
	<-subscribed

	b.publish("acme", "evt_b", "order.approved", `{"order_id":"B"}`)
	<-entered                                                          // the handler is busy
	b.publish("acme", "evt_n1", "order.approved", `{"order_id":"N1"}`) // queued
	b.publish("acme", "evt_c", "order.approved", `{"order_id":"C"}`)   // dropped
	b.publish("acme", "evt_n2", "order.approved", `{"order_id":"N2"}`) // dropped
	waitCounter(t, b, "plaita_filter_reconcile_overflow_passes_total", 1)
	got := b.waitEntries(1, 10*time.Second)
	if len(got) != 1 || got[0].ExecutionID != "ex_c" {
		t.Fatalf("entries %+v while ex_block's enqueue is held", got)
	}
	close(release)
	if got := b.waitEntries(2, 10*time.Second); len(got) != 2 {
		t.Fatalf("entries %+v after the release", got)
	}
	if n := b.counter("plaita_filter_notifications_dropped_total"); n != 2 {
		t.Errorf("%d dropped, want 2", n)
	}
	mu.Lock()
	if asked["acme"] != 2 || len(asked) != 1 {
		t.Errorf("overflow asks %v", asked)
	}
	mu.Unlock()
	// One line for the burst, with its count.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), `"event":"filter.notifications_dropped"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no drop line:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var lines []map[string]any
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["event"] == "filter.notifications_dropped" {
			lines = append(lines, rec)
		}
	}
	if len(lines) != 1 || lines[0]["dropped"] != float64(2) {
		t.Errorf("drop lines %v", lines)
	}
	if !strings.Contains(logs.String(), `"event":"filter.reconcile_overflow_pass"`) {
		t.Errorf("no overflow pass line:\n%s", logs.String())
	}
}

func waitCounter(t *testing.T, b *bundle, name string, atLeast int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.counter(name) < atLeast {
		if time.Now().After(deadline) {
			t.Fatalf("%s stays at %d", name, b.counter(name))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuf is a log sink safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	sb strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sb.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sb.String()
}
