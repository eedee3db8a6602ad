package service

import (
	"context"

	"github.com/VictoriaMetrics/metrics"
)

// Sender delivers items in the background, best effort, from a bounded queue: a slow or dead
// receiver (a webhook, Redis pub/sub) never slows the caller. Offer never blocks; when the queue
// is full the item is dropped and counted. Stop delivers what is queued until its context ends.
type Sender[T any] struct {
	Base
	queue   chan T
	deliver func(ctx context.Context, item T)
	dropped *metrics.Counter
	stop    chan struct{}
}

// NewSender returns a sender of size queued items; deliver is called for each, one at a time,
// with a context that ends when Stop gives up. dropped counts the items that found the queue
// full (nil: not counted).
func NewSender[T any](size int, dropped *metrics.Counter, deliver func(ctx context.Context, item T)) *Sender[T] {
	return &Sender[T]{queue: make(chan T, max(size, 1)), deliver: deliver, dropped: dropped, stop: make(chan struct{})}
}

// Offer queues an item without blocking; false when the queue was full (the item is dropped).
func (s *Sender[T]) Offer(item T) bool {
	select {
	case s.queue <- item:
		return true
	default:
		if s.dropped != nil {
			s.dropped.Inc()
		}
		return false
	}
}

// Start runs the delivery loop.
func (s *Sender[T]) Start(ctx context.Context) error {
	return s.Run(ctx, func(ctx context.Context) {
		for {
			select {
			case item := <-s.queue:
				s.deliver(ctx, item)
			case <-s.stop:
				for { // drain: Stop's deadline cancels ctx if it takes too long
					select {
					case item := <-s.queue:
						s.deliver(ctx, item)
					default:
						return
					}
				}
			case <-ctx.Done():
				return
			}
		}
	})
}

// Stop delivers what is queued until ctx ends, then stops; safe twice and before Start.
func (s *Sender[T]) Stop(ctx context.Context) {
	s.mu.Lock()
	first := !s.stopped
	s.stopped = true
	done := s.done
	s.mu.Unlock()
	if !first || done == nil {
		s.Base.Stop(ctx)
		return
	}
	close(s.stop)
	select {
	case <-done:
	case <-ctx.Done():
	}
	s.Base.Stop(ctx) // cancels the deliveries in flight, if any are left
}
