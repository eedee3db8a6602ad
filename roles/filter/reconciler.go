package filter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
//
// Besides the periodic pass, a pass runs at once when it is asked for: a full one after a
// resubscription (Trigger), one of a few tenants when the listener dropped their
// notifications (TriggerTenant: a burst past its queue). Asks coalesce — a tenant asked for
// while a pass is pending is in that pass once, and passes never overlap (the next one runs
// after the current one, covering what was asked for meanwhile) — and the tenants asked for
// are bounded (past maxAskedTenants the next pass is a full one).
type Reconciler struct {
	service.Base
	d Deps
	s Settings
	m *Matcher

	trigger chan struct{} // a pass is asked for (what for: asked)
	askMu   sync.Mutex
	asked   ask

	mu      sync.Mutex
	started bool      // the start-up pass ran
	last    time.Time // the previous full pass's upper bound

	passes, scanned, failures, overflowPasses, invalid *metrics.Counter
	log                                                zerolog.Logger
}

// ask is what the passes were asked for since the last one began.
type ask struct {
	all      bool                // every tenant (a resubscription, or too many tenants)
	overflow bool                // asked for by the listener's overflow
	tenants  map[string]struct{} // the tenants whose notifications were dropped
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

// maxAskedTenants bounds the tenants a pass can be asked for one by one (the memory of a
// burst over many tenants): past it the next pass is a full one.
const maxAskedTenants = 1024

// NewReconciler builds the reconciler over the matcher.
func NewReconciler(d Deps, s Settings, m *Matcher) *Reconciler {
	s, d = s.withDefaults(), d.withDefaults()
	return &Reconciler{d: d, s: s, m: m, log: d.Log, trigger: make(chan struct{}, 1),
		passes:         d.Metrics.GetOrCreateCounter(`plaita_filter_reconcile_passes_total`),
		scanned:        d.Metrics.GetOrCreateCounter(`plaita_filter_reconcile_events_total`),
		failures:       d.Metrics.GetOrCreateCounter(`plaita_filter_reconcile_failures_total`),
		overflowPasses: d.Metrics.GetOrCreateCounter(`plaita_filter_reconcile_overflow_passes_total`),
		invalid:        d.Metrics.GetOrCreateCounter(`plaita_filter_reconcile_invalid_members_total`),
	}
}

// Start runs the start-up pass at once, then a pass every interval and whenever one is asked
// for (Trigger, TriggerTenant).
func (r *Reconciler) Start(ctx context.Context) error {
	return r.Run(ctx, func(ctx context.Context) {
		t := time.NewTicker(r.s.ReconcileInterval)
		defer t.Stop()
		full := true // the start-up pass
		for {
			a := r.take()
			switch {
			case full || a.all:
				began := time.Now()
				st, err := r.RunOnce(ctx)
				r.report(ctx, "full", a.overflow, st, err, began)
			case len(a.tenants) > 0:
				began := time.Now()
				st, err := r.RunTenants(ctx, slices.Sorted(maps.Keys(a.tenants)))
				r.report(ctx, "tenants", a.overflow, st, err, began)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				full = true
			case <-r.trigger:
				full = false
			}
		}
	})
}

// report counts and logs one pass of the loop.
func (r *Reconciler) report(ctx context.Context, scope string, overflow bool, st PassStats, err error, began time.Time) {
	if err != nil && ctx.Err() == nil {
		r.log.Warn().Err(err).Str("event", "filter.reconcile_failed").Msg("reconcile pass incomplete: the next pass goes on from the same cursor")
	}
	if overflow {
		r.overflowPasses.Inc()
		r.log.Info().Str("event", "filter.reconcile_overflow_pass").Str("scope", scope).Int("tenants", st.Tenants).
			Int("events", st.Events).Int("woken", st.Woken).Int("invalid", st.Invalid).Dur("took", time.Since(began)).
			Msg("reconcile pass for dropped notifications")
	}
	if st.Invalid > 0 {
		r.log.Warn().Str("event", "filter.reconcile_invalid_members").Str("scope", scope).Int("members", st.Invalid).
			Msg("index members no tenant, event or execution can have: skipped (the reads and the janitor remove them)")
	}
}

// Trigger asks for a full pass now (after a resubscription); it never blocks.
func (r *Reconciler) Trigger() {
	r.askMu.Lock()
	r.asked.all = true
	r.askMu.Unlock()
	r.signal()
}

// TriggerTenant asks for a pass of one tenant now, because the listener dropped one of its
// notifications; it never blocks and is cheap enough to call for every drop: the tenant is
// in the next pass once however often it is asked for.
func (r *Reconciler) TriggerTenant(tenant string) {
	r.askMu.Lock()
	r.asked.overflow = true
	if _, in := r.asked.tenants[tenant]; !in && !r.asked.all {
		if len(r.asked.tenants) >= maxAskedTenants {
			r.asked.all, r.asked.tenants = true, nil
		} else {
			if r.asked.tenants == nil {
				r.asked.tenants = map[string]struct{}{}
			}
			r.asked.tenants[tenant] = struct{}{}
		}
	}
	r.askMu.Unlock()
	r.signal()
}

func (r *Reconciler) signal() {
	select {
	case r.trigger <- struct{}{}:
	default: // a pass is asked for already: it reads what is asked when it begins
	}
}

// take returns what was asked for and clears it: the pass about to begin covers it.
func (r *Reconciler) take() ask {
	r.askMu.Lock()
	defer r.askMu.Unlock()
	a := r.asked
	r.asked = ask{}
	return a
}

// RunOnce is one pass over every tenant with events. Tests call it directly.
func (r *Reconciler) RunOnce(ctx context.Context) (PassStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passes.Inc()
	now := r.d.Now()
	var st PassStats
	list, err := r.d.Events.Tenants(ctx, time.Time{})
	if err != nil {
		r.failures.Inc()
		return st, fmt.Errorf("reconcile: %w", err)
	}
	st.Invalid += list.Invalid
	r.invalid.Add(list.Invalid)
	err = r.tenants(ctx, list.Tenants, now, &st)
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	r.started, r.last = true, now
	return st, err
}

// RunTenants is one pass over a few tenants (those whose notifications were dropped), each as
// in a full pass: from its cursor, moving it. It never runs at the same time as another pass.
func (r *Reconciler) RunTenants(ctx context.Context, tenants []string) (PassStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passes.Inc()
	var st PassStats
	err := r.tenants(ctx, tenants, r.d.Now(), &st)
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	return st, err
}

// tenants reconciles tenants up to now, one after the other.
func (r *Reconciler) tenants(ctx context.Context, tenants []string, now time.Time, st *PassStats) error {
	var errs []error
	for _, tenant := range tenants {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st.Tenants++
		if err := r.tenant(ctx, tenant, now, st); err != nil {
			r.failures.Inc()
			errs = append(errs, fmt.Errorf("tenant %s: %w", tenant, err))
		}
	}
	return errors.Join(errs...)
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
		return r.last.Add(-r.s.Overlap) // a tenant whose first event came after the last full pass
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
	ok, why, err := r.d.Store.TenantAdmits(ctx, tenant) // every pass: a re-enabled tenant is seen at once
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
