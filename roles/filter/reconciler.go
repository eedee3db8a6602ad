package filter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/service"
)

// Reconciler re-scans recent events, so that an event whose notification was lost (no filter
// was subscribed, the connection dropped, the handlers were behind) still wakes its execution.
//
// Each tenant with events has a cursor in Redis (<root>:event_bus:cursor, shared by every
// filter; it only moves forward). A pass reads the tenant's feed from the cursor minus
// Overlap up to the pass's start and hands the events to the Matcher, a page at a time (one
// batch: each waiting execution is read once for a page); the markers make the re-delivery
// of an event already delivered a no-op. The start-up pass looks back at most
// PLAITA_EVENT_RECONCILE_BACKFILL (0: not at all) — also when a tenant has no cursor yet (a
// first start, a lost cursor); later passes follow the cursor.
//
// A tenant's cursor does not move past an event that was not fully handled: a tenant the
// worker would refuse (disabled: its events are delivered once it is active again), a
// transient failure, or a wake-up still pending in another filter (a filter that died
// between claiming a wake-up and marking it sent is taken over by the pass that sees the
// claim older than the grace period).
type Reconciler struct {
	service.Base
	d Deps
	s Settings
	m *Matcher

	trigger chan struct{}
	mu      sync.Mutex
	started bool      // the start-up pass ran
	last    time.Time // the previous pass's upper bound

	passes, scanned, failures, invalid *metrics.Counter
	log                                zerolog.Logger
}

// PassStats is what one pass did (the caller logs it).
type PassStats struct {
	Tenants int // tenants reconciled
	Events  int // feed members handed to the matcher
	Woken   int // resumes enqueued
	// Invalid counts the members the pass skipped as unusable: tenant list members that are
	// no tenant, feed members no event can have, subscription index members that are no
	// execution id. They never fail a pass or hold a cursor; the reads and the janitor remove
	// them.
	Invalid int
}

// reconcilePage is how many feed members a pass reads and matches at once (one batch of the
// matcher); batchTimeout bounds the handling of one page.
const (
	reconcilePage = 500
	batchTimeout  = 2 * eventTimeout
)

// NewReconciler builds the reconciler over the matcher.
func NewReconciler(d Deps, s Settings, m *Matcher) *Reconciler {
	s = s.withDefaults()
	if d.Metrics == nil {
		d.Metrics = metrics.NewSet()
	}
	return &Reconciler{d: d, s: s, m: m, log: d.Log, trigger: make(chan struct{}, 1),
		passes:   d.Metrics.GetOrCreateCounter(`plaita_filter_reconcile_passes_total`),
		scanned:  d.Metrics.GetOrCreateCounter(`plaita_filter_reconcile_events_total`),
		failures: d.Metrics.GetOrCreateCounter(`plaita_filter_reconcile_failures_total`),
		invalid:  d.Metrics.GetOrCreateCounter(`plaita_filter_reconcile_invalid_members_total`),
	}
}

// Start runs the start-up pass at once, then a pass every interval and on Trigger.
func (r *Reconciler) Start(ctx context.Context) error {
	return r.Run(ctx, func(ctx context.Context) {
		t := time.NewTicker(r.s.ReconcileInterval)
		defer t.Stop()
		for {
			st, err := r.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				r.log.Warn().Err(err).Str("event", "filter.reconcile_failed").Msg("reconcile pass incomplete: the next pass goes on from the same cursor")
			}
			if st.Invalid > 0 {
				r.log.Warn().Str("event", "filter.reconcile_invalid_members").Int("members", st.Invalid).
					Msg("index members no tenant, event or execution can have: skipped (the reads and the janitor remove them)")
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-r.trigger:
			}
		}
	})
}

// Trigger asks for a pass now (after a resubscription); it never blocks.
func (r *Reconciler) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// RunOnce is one pass over every tenant with events. Tests call it directly.
func (r *Reconciler) RunOnce(ctx context.Context) (PassStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passes.Inc()
	now := r.d.now()
	var st PassStats
	list, err := r.d.Events.Tenants(ctx, time.Time{})
	if err != nil {
		r.failures.Inc()
		return st, fmt.Errorf("reconcile: %w", err)
	}
	st.Invalid += list.Invalid
	r.invalid.Add(list.Invalid)
	var errs []error
	for _, tenant := range list.Tenants {
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		st.Tenants++
		if err := r.tenant(ctx, tenant, now, &st); err != nil {
			r.failures.Inc()
			errs = append(errs, fmt.Errorf("tenant %s: %w", tenant, err))
		}
	}
	r.started, r.last = true, now
	return st, errors.Join(errs...)
}

// lower is where a tenant's pass starts.
func (r *Reconciler) lower(cursor time.Time, found bool, now time.Time) time.Time {
	switch {
	case !r.started:
		from := now.Add(-r.s.ReconcileBackfill)
		if found && cursor.Add(-r.s.Overlap).After(from) {
			from = cursor.Add(-r.s.Overlap)
		}
		return from
	case found:
		return cursor.Add(-r.s.Overlap)
	default:
		return r.last.Add(-r.s.Overlap) // a tenant whose first event came after the last pass
	}
}

// tenant reconciles one tenant up to now and moves its cursor as far as it may.
func (r *Reconciler) tenant(ctx context.Context, tenant string, now time.Time, st *PassStats) error {
	cursor, found, err := r.d.Events.Cursor(ctx, tenant)
	if err != nil {
		return err
	}
	from := r.lower(cursor, found, now)
	if !from.Before(now) {
		return r.d.Events.SetCursor(ctx, tenant, now) // an empty window (backfill 0 at start-up)
	}
	ok, why, err := tenantAdmits(ctx, r.d.Store, tenant)
	if err != nil {
		return err
	}
	if !ok {
		r.log.Debug().Str("event", "filter.reconcile_tenant_skipped").Str("tenant", tenant).Str("reason", why).
			Msg("tenant refused by the worker: its cursor stays until it is active")
		if !found {
			// Pin where this pass would have started, so later passes start there too.
			return r.d.Events.SetCursor(ctx, tenant, from.Add(r.s.Overlap))
		}
		return nil
	}
	// hold is the publish time of the oldest event that must be seen again.
	var hold time.Time
	var firstErr error
	at, skip := from, 0
	for {
		page, err := r.d.Events.FeedPage(ctx, tenant, at, now, skip, reconcilePage)
		if err != nil {
			return err
		}
		// Members no event can have are skipped, counted, and left for the janitor.
		st.Invalid += page.Invalid
		r.invalid.Add(page.Invalid)
		if len(page.Refs) > 0 {
			// One batch a page: each waiting execution is read once for the page's events.
			r.scanned.Add(len(page.Refs))
			bctx, cancel := context.WithTimeout(ctx, batchTimeout)
			results, errs := r.m.handleBatch(bctx, tenant, page.Refs)
			cancel()
			for i, res := range results {
				st.Events++
				st.Woken += res.Woken
				st.Invalid += res.Invalid
				if errs[i] != nil && firstErr == nil {
					firstErr = errs[i]
				}
				if (errs[i] != nil || res.Hold) && hold.IsZero() {
					hold = page.Refs[i].At
				}
			}
		}
		if page.Read < reconcilePage {
			break
		}
		// Page on from the last score; members sharing it are skipped by count.
		if page.Last.Equal(at) {
			skip += page.AtLast
		} else {
			at, skip = page.Last, page.AtLast
		}
	}
	to := now
	if !hold.IsZero() {
		// The next pass starts Overlap before the cursor: put it so that the held event is
		// inside that window.
		to = hold.Add(r.s.Overlap)
		if to.After(now) {
			to = now
		}
	}
	if err := r.d.Events.SetCursor(ctx, tenant, to); err != nil {
		return err
	}
	return firstErr
}
