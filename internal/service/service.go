// Package service is the one lifecycle of every long-running part of plaita (a heartbeat, a
// sender, a server, a dispatcher, a sweeper …): Start launches it, Stop ends it and waits, and
// a role starts its services in order and stops them in reverse.
package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Service is a long-running part of a role. Start returns once the service runs, or with the
// error that kept it from starting (then nothing of it runs). Stop ends it and waits for it,
// bounded by ctx. Stop is safe to call twice, concurrently, and before or without Start; a
// Start after Stop does nothing and returns ErrStopped.
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context)
}

// ErrStopped is what Start returns once the service was stopped.
var ErrStopped = errors.New("service stopped")

// Base is the lifecycle a service embeds: it runs one function on a goroutine whose context
// ends at Stop (never with the caller's start-up context), and makes Stop safe twice and
// before Start.
type Base struct {
	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// Run starts run on its own goroutine. Its context carries ctx's values but is cancelled only by
// Stop: a service lives as long as the role, through a drain, whatever the deadline of the
// context that started it. It returns ErrStopped after Stop and an error when already started.
func (b *Base) Run(ctx context.Context, run func(ctx context.Context)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.stopped:
		return ErrStopped
	case b.started:
		return errors.New("service already started")
	}
	b.started = true
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b.cancel, b.done = cancel, make(chan struct{})
	done := b.done
	go func() {
		defer close(done)
		run(runCtx)
	}()
	return nil
}

// Stop cancels the run function's context and waits for it to return, or for ctx to end.
func (b *Base) Stop(ctx context.Context) {
	b.mu.Lock()
	b.stopped = true
	cancel, done := b.cancel, b.done
	b.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Done is closed when the run function has returned (nil before Run).
func (b *Base) Done() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

// Named is a service with a name for errors and logs.
type Named struct {
	Name string
	Service
}

// Group starts services in order and stops them in reverse: the first to start is the last to
// stop. A start that fails stops what already started, in reverse, and reports which one failed.
type Group struct {
	mu      sync.Mutex
	started []Named
}

// Start starts each service in turn.
func (g *Group) Start(ctx context.Context, svcs ...Named) error {
	for _, s := range svcs {
		if err := s.Start(ctx); err != nil {
			g.Stop(context.WithoutCancel(ctx))
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		g.mu.Lock()
		g.started = append(g.started, s)
		g.mu.Unlock()
	}
	return nil
}

// Stop stops every started service, the last started first; safe to call twice.
func (g *Group) Stop(ctx context.Context) {
	g.mu.Lock()
	started := g.started
	g.started = nil
	g.mu.Unlock()
	for i := len(started) - 1; i >= 0; i-- {
		started[i].Stop(ctx)
	}
}
