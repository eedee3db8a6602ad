package filter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
)

// Matcher delivers one event to the executions waiting for it. It is safe for concurrent use:
// the listener's handlers and the reconciler share one.
type Matcher struct {
	d    Deps
	s    Settings
	defs *definitions
	log  zerolog.Logger
	once sync.Map // warnings logged once per key

	events, expired, woken, duplicates, takeovers, noMatch, stale, early, timedOut *metrics.Counter
	tenantSkipped, uncheckable, errs, invalid                                      *metrics.Counter
}

// NewMatcher builds the matcher and registers its counters on d.Metrics.
func NewMatcher(d Deps, s Settings) *Matcher {
	s = s.withDefaults()
	if d.Metrics == nil {
		d.Metrics = metrics.NewSet()
	}
	set := d.Metrics
	return &Matcher{d: d, s: s, defs: newDefinitions(d.Flows, s.Expr, d.now), log: d.Log,
		events:        set.GetOrCreateCounter(`plaita_filter_events_total`),
		expired:       set.GetOrCreateCounter(`plaita_filter_events_expired_total`),
		woken:         set.GetOrCreateCounter(`plaita_filter_wakeups_total`),
		duplicates:    set.GetOrCreateCounter(`plaita_filter_duplicates_total`),
		takeovers:     set.GetOrCreateCounter(`plaita_filter_takeovers_total`),
		noMatch:       set.GetOrCreateCounter(`plaita_filter_no_match_total`),
		stale:         set.GetOrCreateCounter(`plaita_filter_stale_subscriptions_total`),
		early:         set.GetOrCreateCounter(`plaita_filter_events_before_wait_total`),
		timedOut:      set.GetOrCreateCounter(`plaita_filter_timed_out_waits_total`),
		tenantSkipped: set.GetOrCreateCounter(`plaita_filter_tenant_skipped_total`),
		uncheckable:   set.GetOrCreateCounter(`plaita_filter_unchecked_total`),
		errs:          set.GetOrCreateCounter(`plaita_filter_errors_total`),
		invalid:       set.GetOrCreateCounter(`plaita_filter_invalid_subscriptions_total`),
	}
}

// Result is what handling one event did.
type Result struct {
	Woken      int // resumes enqueued
	Duplicates int // wake-ups already sent (or being sent by another filter)
	NoMatch    int // suspensions whose match refused the event
	Stale      int // subscriptions removed: the execution waits for something else
	// Invalid: subscription index members that are no execution id, skipped (and removed by
	// the read, store.TenantStore.Subscriptions).
	Invalid int
	// TenantSkipped: the tenant would be refused by the worker; nothing was delivered.
	TenantSkipped bool
	// Hold: a wake-up of this event is still pending in another filter (within the grace
	// period): the reconciler must see the event again.
	Hold bool
}

func (r *Result) add(o Result) {
	r.Woken += o.Woken
	r.Duplicates += o.Duplicates
	r.NoMatch += o.NoMatch
	r.Stale += o.Stale
	r.Invalid += o.Invalid
	r.Hold = r.Hold || o.Hold
}

// maxParallel bounds the subscriptions of one event handled at once.
const maxParallel = 8

// Handle delivers one event. An error is transient (Redis, an enqueue that failed): the caller
// (the reconciler) sees the event again later; what could be delivered was delivered.
func (m *Matcher) Handle(ctx context.Context, ref store.EventRef) (Result, error) {
	ok, why, err := tenantAdmits(ctx, m.d.Store, ref.TenantID)
	if err != nil {
		m.errs.Inc()
		return Result{}, fmt.Errorf("tenant status of %s: %w", ref.TenantID, err)
	}
	if !ok {
		m.tenantSkipped.Inc()
		m.log.Debug().Str("event", "filter.tenant_skipped").Str("tenant", ref.TenantID).Str("event_id", ref.ID).Str("reason", why).
			Msg("event of a tenant the worker refuses: not delivered (the reconciler delivers it once the tenant is active)")
		return Result{TenantSkipped: true}, nil
	}
	return m.handleAdmitted(ctx, ref)
}

// handleAdmitted is Handle once the tenant is known to be admitted.
func (m *Matcher) handleAdmitted(ctx context.Context, ref store.EventRef) (Result, error) {
	m.events.Inc()
	ev, err := m.d.Events.Get(ctx, ref.TenantID, ref.ID)
	switch {
	case errors.Is(err, store.ErrEventNotFound):
		m.expired.Inc()
		return Result{}, nil
	case err != nil && store.IsTransient(err):
		m.errs.Inc()
		return Result{}, fmt.Errorf("read event %s: %w", ref.ID, err)
	case err != nil:
		m.errs.Inc()
		m.log.Warn().Err(err).Str("event", "filter.bad_event").Str("tenant", ref.TenantID).Str("event_id", ref.ID).
			Msg("the event record is unreadable: skipped")
		return Result{}, nil
	}
	ts, err := m.d.Store.Tenant(ev.TenantID)
	if err != nil {
		return Result{}, err
	}
	now := m.d.now()
	subs, err := ts.Subscriptions(ctx, ev.Type, now)
	switch {
	case err != nil && store.IsTransient(err):
		m.errs.Inc()
		return Result{}, fmt.Errorf("subscriptions to %s: %w", ev.Type, err)
	case err != nil:
		// The index itself is unusable (not a sorted set): no retry reads it, so the event is
		// not held for it.
		m.errs.Inc()
		if m.first("index\x00" + ts.Tenant() + "\x00" + ev.Type) {
			m.log.Warn().Err(err).Str("event", "filter.bad_subscription_index").Str("tenant", ts.Tenant()).Str("event_type", ev.Type).
				Msg("the subscription index is unreadable: events of this type wake nothing until an operator repairs it")
		}
		return Result{}, nil
	}
	res := Result{Invalid: subs.Invalid}
	if subs.Invalid > 0 {
		m.invalid.Add(subs.Invalid)
		m.log.Warn().Str("event", "filter.invalid_subscriptions").Str("tenant", ts.Tenant()).Str("event_type", ev.Type).
			Int("members", subs.Invalid).Msg("subscription index members that are no execution id: skipped and removed")
	}
	var data any
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		return Result{}, fmt.Errorf("event %s: data: %w", ev.ID, err) // DecodeEvent checked it: not reached
	}
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, maxParallel)
	)
	for _, sr := range subs.Reads {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			o, err := m.deliver(ctx, ts, ev, data, sr, now)
			mu.Lock()
			defer mu.Unlock()
			res.add(o)
			if err != nil {
				m.errs.Inc()
				res.Hold = true
				if first == nil {
					first = err
				}
			}
		}()
	}
	wg.Wait()
	return res, first
}

// deliver is one event against one subscription.
func (m *Matcher) deliver(ctx context.Context, ts *store.TenantStore, ev store.Event, data any, sr store.SubscriptionRead, now time.Time) (Result, error) {
	id := sr.ExecutionID
	log := m.log.With().Str("tenant", ts.Tenant()).Str("execution_id", id).Str("event_id", ev.ID).Str("event_type", ev.Type).Logger()
	switch {
	case sr.Err != nil:
		if m.first("corrupt\x00" + ts.Tenant() + "\x00" + id) {
			log.Warn().Err(sr.Err).Str("event", "filter.bad_subscription").Msg("a subscription record does not decode: left for an operator")
		}
		return Result{}, nil
	case sr.Missing:
		return m.removeStale(ctx, ts, ev.Type, sr, "the index lists it without a record", log)
	case ev.PublishedAt.Before(sr.Sub.Since):
		// The record is written after the state: the state's suspension is no older.
		m.early.Inc()
		return Result{}, nil
	}
	st, err := ts.Load(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return m.removeStale(ctx, ts, ev.Type, sr, "the execution does not exist", log)
	case err != nil && store.IsTransient(err):
		return Result{}, fmt.Errorf("load execution %s: %w", id, err)
	case err != nil:
		if m.first("state\x00" + ts.Tenant() + "\x00" + id) {
			log.Warn().Err(err).Str("event", "filter.bad_state").Msg("the execution state is unreadable: event not delivered")
		}
		return Result{}, nil
	}
	s := st.Suspend
	if st.Status != state.Suspended || s == nil || s.Kind != state.SuspendEvent || s.EventType != ev.Type {
		return m.removeStale(ctx, ts, ev.Type, sr, "the execution is "+describe(st), log)
	}
	// The state, not the record, says which suspension waits: a record from an earlier wait
	// of the same type is being rewritten by the worker.
	if ev.PublishedAt.Before(s.Since) {
		m.early.Inc()
		return Result{}, nil
	}
	if s.Due != nil && !now.Before(*s.Due) {
		// Timed out: the delay role resumes it with a timeout.
		m.timedOut.Inc()
		return Result{}, nil
	}
	if o, done := m.check(ctx, ts.Tenant(), st, data, now, log); done {
		return o, nil
	}
	res, err := m.wake(ctx, ts.Tenant(), st, ev, log)
	if err == nil && res.Woken == 1 && sr.Sub.Since.Equal(s.Since) {
		// Used: the consumer removes it (docs/wakeups.md), so the next events of the type do not
		// read this execution again. Only while the record is the one read: a wait registered
		// meanwhile stays.
		if _, rerr := ts.RemoveStaleSubscription(context.WithoutCancel(ctx), id, ev.Type, sr.Raw); rerr != nil {
			log.Warn().Err(rerr).Str("event", "filter.subscription_not_removed").Msg("the used subscription stays (it is removed as stale later)")
		}
	}
	return res, err
}

// check runs the worker's resume check. done is true when the event must not be delivered.
func (m *Matcher) check(ctx context.Context, tenant string, st *state.Execution, data any, now time.Time, log zerolog.Logger) (Result, bool) {
	f, err := m.defs.get(ctx, tenant, st.FlowID, st.FlowVersion)
	switch {
	case errors.Is(err, store.ErrFlowNotFound):
		if m.first("noflow\x00" + tenant + "\x00" + st.FlowID + "\x00" + st.FlowVersion) {
			log.Warn().Err(err).Str("event", "filter.flow_not_found").Msg("the execution's flow version is not published: a resume could not run (not delivered)")
		}
		return Result{}, true
	case errors.Is(err, errUnparsable):
		// The worker decides: it refuses (and acks) a resume that does not fit.
		m.uncheckable.Inc()
		if m.first("unparsable\x00" + tenant + "\x00" + st.FlowID + "\x00" + st.FlowVersion) {
			log.Warn().Err(err).Str("event", "filter.match_unchecked").Msg("cannot check the match here: delivering, the worker checks it")
		}
		return Result{}, false
	case err != nil:
		log.Warn().Err(err).Str("event", "filter.flow_unreadable").Msg("the flow definition could not be read: not delivered now")
		return Result{Hold: true}, true
	}
	err = engine.CheckResume(f, st, engine.ResumeEvent, data, m.s.Expr, now)
	switch {
	case err == nil:
		return Result{}, false
	case errors.Is(err, engine.ErrEventMismatch):
		// A match that is false or cannot be evaluated for this event (a missing field, a
		// wrong type): the wait goes on.
		m.noMatch.Inc()
		log.Debug().Str("event", "filter.no_match").Str("node", st.Suspend.Node).Str("reason", err.Error()).Msg("event does not match")
		return Result{NoMatch: 1}, true
	default:
		m.noMatch.Inc()
		log.Info().Err(err).Str("event", "filter.resume_refused").Str("node", st.Suspend.Node).
			Msg("the worker would refuse this event's resume: not delivered")
		return Result{NoMatch: 1}, true
	}
}

// wake enqueues the resume once per (execution, suspension, event).
func (m *Matcher) wake(ctx context.Context, tenant string, st *state.Execution, ev store.Event, log zerolog.Logger) (Result, error) {
	suspension := strconv.FormatInt(st.Suspend.Since.UnixNano(), 10)
	w, err := m.d.Events.ClaimWake(ctx, tenant, st.ExecutionID, suspension, ev.ID, m.s.InstanceID, m.s.Grace)
	if err != nil {
		return Result{}, fmt.Errorf("claim the wake-up of %s: %w", st.ExecutionID, err)
	}
	switch w.State {
	case store.WakeSent:
		m.duplicates.Inc()
		return Result{Duplicates: 1}, nil
	case store.WakePending:
		m.duplicates.Inc()
		return Result{Duplicates: 1, Hold: true}, nil
	case store.WakeTakenOver:
		m.takeovers.Inc()
		log.Warn().Str("event", "filter.wakeup_taken_over").Str("previous", w.Previous).
			Msg("a wake-up claimed by another filter was never marked sent: enqueuing it (the worker refuses a duplicate)")
	}
	env := queue.Envelope{Kind: queue.KindResume, TenantID: tenant, FlowID: st.FlowID, FlowVersion: st.FlowVersion,
		ExecutionID: st.ExecutionID, ResumeType: engine.ResumeEvent, ResumeData: ev.Data, SourceMessageID: "event:" + ev.ID}
	streamID, err := m.d.Enqueue(ctx, env)
	if err != nil {
		// Released at once, the next delivery of the event claims it again; if the release
		// fails too, the marker is taken over after the grace period.
		if _, rerr := m.d.Events.ReleaseWake(context.WithoutCancel(ctx), w); rerr != nil {
			log.Warn().Err(rerr).Str("event", "filter.release_failed").Msg("could not release the wake-up marker")
		}
		return Result{}, fmt.Errorf("enqueue the resume of %s: %w", st.ExecutionID, err)
	}
	m.woken.Inc()
	ok, err := m.d.Events.WakeSent(context.WithoutCancel(ctx), w, streamID)
	switch {
	case err != nil:
		log.Warn().Err(err).Str("event", "filter.mark_sent_failed").Str("stream_id", streamID).
			Msg("resume enqueued but the marker is still pending: after the grace period another filter may enqueue it again (the worker refuses the second)")
	case !ok:
		log.Warn().Str("event", "filter.wakeup_overtaken").Str("stream_id", streamID).
			Msg("the wake-up was taken over while it was enqueued: it may be enqueued twice (the worker refuses the second)")
	}
	log.Info().Str("event", "filter.wakeup").Str("node", st.Suspend.Node).Str("stream_id", streamID).Msg("resume enqueued")
	return Result{Woken: 1}, nil
}

// removeStale removes a subscription whose execution no longer waits for this type.
func (m *Matcher) removeStale(ctx context.Context, ts *store.TenantStore, eventType string, sr store.SubscriptionRead, why string, log zerolog.Logger) (Result, error) {
	removed, err := ts.RemoveStaleSubscription(ctx, sr.ExecutionID, eventType, sr.Raw)
	if err != nil {
		return Result{}, fmt.Errorf("remove the stale subscription of %s: %w", sr.ExecutionID, err)
	}
	if !removed {
		return Result{}, nil
	}
	m.stale.Inc()
	log.Debug().Str("event", "filter.stale_subscription").Str("reason", why).Msg("stale subscription removed")
	return Result{Stale: 1}, nil
}

// first reports whether key is seen for the first time (a warning logged once).
func (m *Matcher) first(key string) bool {
	_, seen := m.once.LoadOrStore(key, struct{}{})
	return !seen
}

func describe(st *state.Execution) string {
	if st.Status == state.Suspended && st.Suspend != nil {
		if st.Suspend.Kind == state.SuspendEvent {
			return fmt.Sprintf("suspended at %s waiting for %q", st.Suspend.Node, st.Suspend.EventType)
		}
		return fmt.Sprintf("suspended at %s (%s)", st.Suspend.Node, st.Suspend.Kind)
	}
	return string(st.Status)
}
