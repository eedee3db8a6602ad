package queue

import (
	"context"
	"fmt"
	"time"

	"plaita/internal/service"
)

const (
	// ResidueBatch is the most residue entries one sweep round removes.
	ResidueBatch = 256
	// DefaultSweepInterval is the worker's residue sweep period (it also sweeps at start).
	DefaultSweepInterval = 300 * time.Second
	// residueScanBudget bounds the entries one round examines, so a long backlog of pending
	// entries at the head of the stream cannot make a round unbounded; a cursor carries the
	// scan over to the next round.
	residueScanBudget = 16 * ResidueBatch
	// sweepRoundTimeout bounds one round of RunSweeper (rueidis retries reads while Redis is
	// down).
	sweepRoundTimeout = time.Minute
)

// groups is the stream's consumer groups with their last-delivered ids.
func (q *Queue) groups(ctx context.Context) ([]groupInfo, error) {
	in, err := q.d.Info(ctx, q.stream, q.dlq)
	if err != nil {
		return nil, err
	}
	out := make([]groupInfo, 0, len(in.Groups))
	for _, g := range in.Groups {
		last, ok := parseID(g.LastDelivered)
		if !ok {
			return nil, fmt.Errorf("groups of %s: group %q has last-delivered-id %q", q.stream, g.Name, g.LastDelivered)
		}
		out = append(out, groupInfo{name: g.Name, lastDelivered: last})
	}
	return out, nil
}

// groupInfo is what the sweeper needs of a group.
type groupInfo struct {
	name          string
	lastDelivered streamID
}

// SweepResidue is one round of the residue sweeper: it deletes up to ResidueBatch entries
// that are still in the stream but were already delivered and are no longer pending, i.e.
// acknowledged but not deleted (the process died between XACK and XDEL, or XDEL failed). Only
// entries every consumer group of the stream has been handed (id ≤ each group's
// last-delivered-id) and that no group has pending are touched; the undelivered backlog never
// is. Each removal is counted in residue_swept.
func (q *Queue) SweepResidue(ctx context.Context) (int, error) {
	groups, err := q.groups(ctx)
	if err != nil || len(groups) == 0 {
		return 0, err
	}
	bound := groups[0].lastDelivered
	for _, g := range groups[1:] {
		if g.lastDelivered.less(bound) {
			bound = g.lastDelivered
		}
	}
	if bound == (streamID{}) {
		return 0, nil
	}
	q.mu.Lock()
	start := q.sweepCursor
	q.mu.Unlock()

	removed, scanned := 0, 0
	for removed < ResidueBatch && scanned < residueScanBudget {
		found, err := q.d.Range(ctx, q.stream, Span{Start: start, End: bound.String(), Count: ResidueBatch})
		if err != nil {
			return removed, q.sweepDone(removed, fmt.Errorf("sweep: %w", err))
		}
		es := found[0]
		if len(es) == 0 {
			start = "-"
			break
		}
		scanned += len(es)
		spans := make([]PendingSpan, 0, len(es)*len(groups))
		for _, e := range es {
			for _, g := range groups {
				spans = append(spans, PendingSpan{Group: g.name, Start: e.ID, End: e.ID, Count: 1})
			}
		}
		res, err := q.d.Pending(ctx, q.stream, spans...)
		if err != nil {
			return removed, q.sweepDone(removed, fmt.Errorf("sweep: %w", err))
		}
		var residue []string
		for i, e := range es {
			pending := false
			for j := range groups {
				pending = pending || len(res[i*len(groups)+j]) > 0
			}
			if !pending {
				residue = append(residue, e.ID)
			}
		}
		next := "(" + es[len(es)-1].ID
		if room := ResidueBatch - removed; len(residue) > room {
			residue = residue[:room]
			next = "(" + residue[room-1]
		}
		if len(residue) > 0 {
			n, err := q.d.Delete(ctx, q.stream, residue...)
			if err != nil {
				return removed, q.sweepDone(removed, fmt.Errorf("sweep: %w", err))
			}
			removed += int(n)
		}
		start = next
		if len(es) < ResidueBatch {
			start = "-"
			break
		}
	}
	q.mu.Lock()
	q.sweepCursor = start
	q.mu.Unlock()
	return removed, q.sweepDone(removed, nil)
}

func (q *Queue) sweepDone(removed int, err error) error {
	if removed > 0 {
		q.m.residueSwept.Add(removed)
		q.log.Info().Str("event", "queue.residue_swept").Int("removed", removed).
			Msg("removed acknowledged entries left in the stream")
	}
	return err
}

// Sweeper is the residue sweeper as a service: a sweep at start and then every interval
// (<= 0: DefaultSweepInterval) until it is stopped. Errors are logged; the next tick tries again.
func (q *Queue) Sweeper(every time.Duration) service.Service {
	if every <= 0 {
		every = DefaultSweepInterval
	}
	round := func(ctx context.Context) {
		rctx, cancel := context.WithTimeout(ctx, min(every, sweepRoundTimeout))
		defer cancel()
		if _, err := q.SweepResidue(rctx); err != nil && ctx.Err() == nil {
			q.log.Warn().Err(err).Str("event", "queue.residue_sweep_failed").Msg("residue sweep failed; retrying next round")
		}
	}
	return &sweeper{Loop: service.Loop{Interval: every, Once: round}}
}

// sweeper sweeps once at start, then on every tick.
type sweeper struct{ service.Loop }

func (s *sweeper) Start(ctx context.Context) error {
	s.Once(ctx)
	return s.Loop.Start(ctx)
}
