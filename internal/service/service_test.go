package service

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestBaseLivesPastTheStartContextAndStopsOnce(t *testing.T) {
	var b Base
	started := make(chan struct{})
	var ended atomic.Bool
	startCtx, cancelStart := context.WithCancel(context.Background())
	if err := b.Run(startCtx, func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		ended.Store(true)
	}); err != nil {
		t.Fatal(err)
	}
	<-started
	cancelStart() // a start-up deadline must not end the service
	select {
	case <-b.Done():
		t.Fatal("the run ended with its start context")
	case <-time.After(50 * time.Millisecond):
	}
	b.Stop(testCtx(t))
	if !ended.Load() {
		t.Fatal("Stop returned before the run ended")
	}
	b.Stop(testCtx(t)) // twice: fine
	if err := b.Run(testCtx(t), func(context.Context) {}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Run after Stop: %v", err)
	}
}

func TestStopBeforeStart(t *testing.T) {
	var b Base
	b.Stop(testCtx(t))
	if err := b.Run(testCtx(t), func(context.Context) { t.Error("ran after Stop") }); !errors.Is(err, ErrStopped) {
		t.Fatalf("Run after Stop: %v", err)
	}
	var s Sender[int]
	s.Stop(testCtx(t))
	l := &Loop{Interval: time.Millisecond, Once: func(context.Context) { t.Error("ticked after Stop") }}
	l.Stop(testCtx(t))
	if err := l.Start(testCtx(t)); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
}

// rec records the order of starts and stops.
type rec struct {
	name string
	log  *[]string
	mu   *sync.Mutex
	fail bool
}

func (r rec) Start(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return errors.New("boom")
	}
	*r.log = append(*r.log, "start "+r.name)
	return nil
}

func (r rec) Stop(context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, "stop "+r.name)
}

func TestGroupStartsInOrderAndStopsInReverse(t *testing.T) {
	var log []string
	var mu sync.Mutex
	mk := func(name string, fail bool) Named { return Named{name, rec{name, &log, &mu, fail}} }
	var g Group
	if err := g.Start(testCtx(t), mk("a", false), mk("b", false), mk("c", false)); err != nil {
		t.Fatal(err)
	}
	g.Stop(testCtx(t))
	g.Stop(testCtx(t))
	if want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}; !slices.Equal(log, want) {
		t.Fatalf("%v, want %v", log, want)
	}
	log = nil
	var g2 Group
	err := g2.Start(testCtx(t), mk("a", false), mk("b", false), mk("c", true), mk("d", false))
	if err == nil || err.Error() != "c: boom" {
		t.Fatalf("err %v", err)
	}
	if want := []string{"start a", "start b", "stop b", "stop a"}; !slices.Equal(log, want) {
		t.Fatalf("after a failed start: %v, want %v", log, want)
	}
}

func TestLoopTicksUntilStopped(t *testing.T) {
	ticks := make(chan struct{}, 100)
	l := &Loop{Interval: 5 * time.Millisecond, Once: func(context.Context) { ticks <- struct{}{} }}
	if err := l.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case <-ticks:
		case <-time.After(5 * time.Second):
			t.Fatal("no tick")
		}
	}
	l.Stop(testCtx(t))
	select {
	case <-l.Done():
	default:
		t.Fatal("Stop returned before the loop ended")
	}
}

func TestSenderDeliversDropsAndDrains(t *testing.T) {
	set := metrics.NewSet()
	dropped := set.NewCounter("dropped")
	gate := make(chan struct{})
	var got []int
	var mu sync.Mutex
	s := NewSender(2, dropped, func(_ context.Context, n int) {
		<-gate
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
	})
	if err := s.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// The receiver is held on gate: at most one item in delivery and two queued, the rest
	// dropped.
	for i := range 10 {
		s.Offer(i)
	}
	close(gate)
	s.Stop(testCtx(t)) // drains what is queued
	mu.Lock()
	defer mu.Unlock()
	if n := dropped.Get(); n == 0 || int(n)+len(got) != 10 {
		t.Fatalf("delivered %v, dropped %d: want all 10 accounted for", got, n)
	}
	if !slices.IsSorted(got) {
		t.Fatalf("out of order: %v", got)
	}
}

// Stop's context bounds the drain: a receiver that hangs is cancelled.
func TestSenderStopIsBounded(t *testing.T) {
	s := NewSender(10, nil, func(ctx context.Context, _ int) { <-ctx.Done() })
	if err := s.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	s.Offer(1)
	s.Offer(2)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s.Stop(ctx)
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the sender still runs after Stop")
	}
}
