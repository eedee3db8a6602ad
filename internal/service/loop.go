package service

import (
	"context"
	"time"
)

// Loop is a service that calls Once every Interval until it is stopped: the shape of every
// periodic job (a heartbeat, a sweeper, a reconciler). Tests call Once directly instead of
// waiting for a tick.
type Loop struct {
	Base
	Interval time.Duration
	Once     func(ctx context.Context)
}

// Start begins ticking; the first call of Once comes one Interval after Start.
func (l *Loop) Start(ctx context.Context) error {
	return l.Run(ctx, func(ctx context.Context) {
		t := time.NewTicker(l.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				l.Once(ctx)
			}
		}
	})
}
