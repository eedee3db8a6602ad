// Package tick runs a function periodically without a goroutine between the calls.
//
// The worker keeps several small loops per running execution (the lease watchdog, the pending
// entry toucher, the cancel poll). Most executions end long before any of them is first due,
// so a goroutine and a ticker each, made and torn down per execution, were pure overhead on
// the hot path. A timer costs no goroutine until it fires.
package tick

import (
	"context"
	"sync"
	"time"
)

// Loop is a started periodic call; Stop ends it.
type Loop struct {
	mu      sync.Mutex
	t       *time.Timer
	stopped bool
	calls   sync.WaitGroup // a pending timer or a running call
	cancel  context.CancelFunc
	unhook  func() bool
}

// Every calls fn every interval (the first call one interval from now), each call in a
// goroutine of its own that ends with it, until ctx ends, Stop is called or fn returns false.
// Calls never overlap: the next is scheduled when one returns. fn's context ends with the loop.
func Every(ctx context.Context, interval time.Duration, fn func(context.Context) bool) *Loop {
	ctx, cancel := context.WithCancel(ctx)
	l := &Loop{cancel: cancel}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls.Add(1)
	l.t = time.AfterFunc(interval, func() {
		defer l.calls.Done()
		if ctx.Err() != nil || !fn(ctx) {
			l.Stop()
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.stopped {
			l.calls.Add(1)
			l.t.Reset(interval)
		}
	})
	l.unhook = context.AfterFunc(ctx, l.Stop)
	return l
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
	l.unhook() // before cancel: the hook would otherwise run Stop again, in a goroutine
	l.cancel()
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
