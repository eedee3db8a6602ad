// Package tick runs a function periodically without a goroutine between the calls.
//
// The worker keeps several small loops per running execution (the lease watchdog, the pending
// entry toucher, the cancel poll). Most executions end long before any of them is first due,
// so a goroutine, a ticker and a context each, made and torn down per execution, were pure
// overhead on the hot path. A loop here is one timer until it first fires.
package tick

import (
	"context"
	"sync"
	"time"
)

// Loop is a started periodic call; Stop ends it.
type Loop struct {
	ctx      context.Context
	interval time.Duration
	fn       func(context.Context) bool

	mu      sync.Mutex
	t       *time.Timer
	stopped bool
	cancel  context.CancelFunc // ends the running call's context; nil between calls
	calls   sync.WaitGroup     // a pending timer or a running call
}

// Every calls fn every interval (the first call one interval from now), each call in a
// goroutine of its own that ends with it, until Stop is called, fn returns false or ctx ends
// (noticed at the next due call: a loop is stopped, not abandoned). Calls never overlap: the
// next is due one interval after the last began (at once if it took longer). fn's context ends with ctx or with Stop.
func Every(ctx context.Context, interval time.Duration, fn func(context.Context) bool) *Loop {
	l := &Loop{ctx: ctx, interval: interval, fn: fn}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls.Add(1)
	l.t = time.AfterFunc(interval, l.fire)
	return l
}

func (l *Loop) fire() {
	defer l.calls.Done()
	l.mu.Lock()
	if l.stopped || l.ctx.Err() != nil {
		l.stopped = true
		l.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(l.ctx)
	l.cancel = cancel
	l.mu.Unlock()
	began := time.Now()
	again := l.fn(ctx)
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel = nil
	if !again {
		l.stopped = true
	}
	if !l.stopped {
		l.calls.Add(1)
		l.t.Reset(max(l.interval-time.Since(began), 0)) // a ticker's cadence: a slow call does not stretch it
	}
}

// Stop ends the loop: no call starts after it; one that is running is told to end (its
// context) and is not waited for (see Wait). Stop may be called from fn and more than once.
func (l *Loop) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	l.stopped = true
	if l.cancel != nil {
		l.cancel()
	}
	if l.t.Stop() {
		l.calls.Done() // the pending call will not run
	}
}

// Wait returns when the loop is stopped and no call is running. It must not be called from fn.
func (l *Loop) Wait() { l.calls.Wait() }

// Close stops the loop and waits for a running call.
func (l *Loop) Close() {
	l.Stop()
	l.Wait()
}
