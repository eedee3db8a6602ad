package tick

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestEveryCallsUntilStopped(t *testing.T) {
	var n atomic.Int32
	seen := make(chan struct{}, 100)
	l := Every(context.Background(), time.Millisecond, func(context.Context) bool {
		n.Add(1)
		seen <- struct{}{}
		return true
	})
	for range 3 {
		<-seen
	}
	l.Close()
	after := n.Load()
	// A call that was already due when Close ran has finished; none starts later. Wait for
	// several more intervals' worth of timers by scheduling a later loop and seeing it fire.
	probe := make(chan struct{})
	p := Every(context.Background(), 20*time.Millisecond, func(context.Context) bool { close(probe); return false })
	<-probe
	p.Wait()
	if got := n.Load(); got != after {
		t.Fatalf("%d calls after Close (had %d)", got, after)
	}
}

func TestEveryEndsWhenFnSaysSo(t *testing.T) {
	var n atomic.Int32
	l := Every(context.Background(), time.Millisecond, func(context.Context) bool { return n.Add(1) < 3 })
	l.Wait()
	if got := n.Load(); got != 3 {
		t.Fatalf("%d calls, want 3", got)
	}
}

func TestEveryEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	ended := make(chan error, 1)
	l := Every(ctx, time.Millisecond, func(c context.Context) bool {
		close(started)
		<-c.Done() // a long call is told to end
		ended <- c.Err()
		return true
	})
	<-started
	cancel()
	l.Wait()
	if err := <-ended; err == nil {
		t.Fatal("the running call's context did not end")
	}
}

func TestStopBeforeTheFirstCall(t *testing.T) {
	// Close returns at once (it would hang if the dropped pending call were still counted).
	l := Every(context.Background(), time.Hour, func(context.Context) bool { return true })
	l.Close()
	l.Stop() // twice is fine
}

func TestStopFromTheCall(t *testing.T) {
	var l *Loop
	ready := make(chan struct{})
	l = Every(context.Background(), time.Millisecond, func(context.Context) bool {
		<-ready
		l.Stop()
		return true
	})
	close(ready)
	l.Wait()
}
