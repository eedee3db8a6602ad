package control

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"plaita/model"
	"plaita/queue"
	"plaita/store"
)

// Stale delay-queue entries. An execution resumed by its answer or its event leaves its
// timeout's entry on the delay queue until it is due: the delay role then sends it and the
// worker acknowledges it as a no-op (docs/wakeups.md). Status counts such entries apart, so
// that "1 scheduled" with nothing suspended reads as what it is.
//
// Removing the entry at resume time instead was weighed and left: the worker knows the member
// then (it is a pure function of the suspended state), but the delay queue is one ZSET of all
// tenants, in another Redis Cluster slot than the execution's keys, so the fenced script that
// settles the resume cannot carry a ZREM; a separate ZREM is one more round trip on every resume
// and is not fenced — a run fenced out would still have removed the timeout of a wait that may
// stay suspended, its only way out.

// delayScanLimit bounds the entries one status checks against their executions (one state read
// each, a few at a time): the soonest ones, which are also the first to be sent.
const delayScanLimit = 200

// delayScanParallel is how many of those state reads run at once (the client pipelines them).
const delayScanParallel = 8

// staleDelayEntries checks the soonest delay-queue entries (delayScanLimit) against their
// executions' states: stale counts the entries that no longer wake their execution
// (queue.DelayEntry.Wakes), checked the members read. An execution without a state counts as
// stale (the worker drops its wake-up); one whose state does not decode, or an entry that does
// not decode, counts as neither. A Redis failure is an error, as every read of Status.
func (p *Plane) staleDelayEntries(ctx context.Context) (stale, checked int64, err error) {
	entries, read, err := p.d.Delay.Soonest(ctx, delayScanLimit)
	if err != nil {
		return 0, 0, err
	}
	var n atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(delayScanParallel)
	for _, e := range entries {
		g.Go(func() error {
			isStale, err := p.staleDelayEntry(gctx, e)
			if isStale {
				n.Add(1)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	return n.Load(), int64(read), nil
}

// staleDelayEntry says whether e no longer wakes its execution; only a transient failure is an
// error (an entry whose tenant or state cannot be judged is not stale).
func (p *Plane) staleDelayEntry(ctx context.Context, e queue.DelayEntry) (bool, error) {
	ts, err := p.d.Store.Tenant(e.TenantID)
	if err != nil {
		return false, nil // a tenant no key can name: the delay role gives the entry up
	}
	st, err := ts.Peek(ctx, e.ExecutionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return true, nil
	case err != nil && model.IsTransient(err):
		return false, fmt.Errorf("delay queue entry of %s: %w", e.ExecutionID, err)
	case err != nil:
		return false, nil
	}
	return !e.Wakes(st), nil
}
