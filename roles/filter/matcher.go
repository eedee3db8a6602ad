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
	"plaita/internal/tracing"
	"plaita/model"
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
	tenantSkipped, uncheckable, errs, invalid, refused, uncorrelated               *metrics.Counter
}

// NewMatcher builds the matcher and registers its counters on d.Metrics.
func NewMatcher(d Deps, s Settings) *Matcher {
	s, d = s.withDefaults(), d.withDefaults()
	set := d.Metrics
	return &Matcher{d: d, s: s, defs: newDefinitions(d.Flows, s.Expr, d.Now), log: d.Log,
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
		refused:       set.GetOrCreateCounter(`plaita_filter_wakeups_refused_total`),
		uncorrelated:  set.GetOrCreateCounter(`plaita_filter_uncorrelated_checked_total`),
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
	// Refused: wake-ups the queue refuses to enqueue (event data over
	// PLAITA_EXECUTION_STATE_MAX_BYTES, not an acceptable document), refused now or found
	// refused; final for that (execution, suspension, event).
	Refused int
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
	r.Refused += o.Refused
	r.Hold = r.Hold || o.Hold
}

// maxParallel bounds the subscriptions of one event handled at once.
const maxParallel = 8

// Handle delivers one event. An error is transient (Redis, an enqueue that failed): the caller
// (the reconciler) sees the event again later; what could be delivered was delivered.
//
// The tenant's status is read every time, and decided by the worker's rule
// (store.TenantStatusRead.Admits): a disabled tenant is never sent a resume the worker would
// refuse, and its events wait for the reconciler, which keeps the tenant's cursor until it is
// active again. The worker's epoch gate only ever holds a message (it stays pending, nothing is
// lost), so it is not repeated here.
func (m *Matcher) Handle(ctx context.Context, ref store.EventRef) (Result, error) {
	ok, why, err := m.d.Store.TenantAdmits(ctx, ref.TenantID)
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
	res, errs := m.handleBatch(ctx, ref.TenantID, []store.EventRef{ref})
	return res[0], errs[0]
}

// handleBatch delivers events of one admitted tenant, given in publish order (a page of the
// reconciler's feed, or one notification): the result and the error of each event, at its
// index. An error is transient, as Handle's.
//
// The events of one type are matched together against that type's subscriptions, read once:
// each waiting execution's state is read once for the batch and checked against the events
// in publish order, and the first one that it takes wakes it. So a burst of N events of a type
// W executions wait for costs W state reads a batch, not N·W (docs/events.md, Cost). A state
// read once for the batch may be older, by the batch's handling, than one read per event: a
// resume enqueued from it after the execution moved on (woken by another event or filter) is
// refused by the worker as a no-op — what two events racing for one wait already come to.
func (m *Matcher) handleBatch(ctx context.Context, tenant string, refs []store.EventRef) ([]Result, []error) {
	res, errs := make([]Result, len(refs)), make([]error, len(refs))
	m.events.Add(len(refs))
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	evs, evErrs, err := m.d.Events.GetMany(ctx, tenant, ids)
	if err != nil {
		m.errs.Add(len(refs))
		for i := range errs {
			errs[i] = fmt.Errorf("read event %s: %w", refs[i].ID, err)
		}
		return res, errs
	}
	ts, err := m.d.Store.Tenant(tenant)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return res, errs
	}
	// The events by type, in publish order.
	var types []string
	byType := map[string][]batchEvent{}
	for i, ev := range evs {
		switch err := evErrs[i]; {
		case errors.Is(err, store.ErrEventNotFound):
			m.expired.Inc()
			continue
		case err != nil:
			m.errs.Inc()
			m.log.Warn().Err(err).Str("event", "filter.bad_event").Str("tenant", tenant).Str("event_id", refs[i].ID).
				Msg("the event record is unreadable: skipped")
			continue
		}
		var data any
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			errs[i] = fmt.Errorf("event %s: data: %w", ev.ID, err) // DecodeEvent checked it: not reached
			continue
		}
		if _, ok := byType[ev.Type]; !ok {
			types = append(types, ev.Type)
		}
		byType[ev.Type] = append(byType[ev.Type], batchEvent{i: i, ev: ev, data: data})
	}
	now := m.d.Now()
	for _, typ := range types {
		m.deliverType(ctx, ts, byType[typ], now, res, errs)
	}
	return res, errs
}

// batchEvent is one event of a batch: its index in the batch, its record and its data.
type batchEvent struct {
	i    int
	ev   store.Event
	data any
}

// deliverType delivers the events of one type (in publish order) to the waits that may take
// them, maxParallel waits at once, and adds each outcome to its event's result (a failure
// before any event is looked at is the first event's: the reconciler holds its cursor there,
// so the whole batch is seen again).
//
// The waits are those store.TenantStore.Waits reads (docs/events.md, "Correlation"): each
// correlated wait is offered only the events whose value at its term's path is its term's
// value (the others cannot satisfy its match), each uncorrelated one every event of the
// batch — those checks are counted (plaita_filter_uncorrelated_checked_total) and each such
// wait's flow and node is logged once.
func (m *Matcher) deliverType(ctx context.Context, ts *store.TenantStore, evs []batchEvent, now time.Time, res []Result, errs []error) {
	typ, first := evs[0].ev.Type, evs[0].i
	data := make([]any, len(evs))
	for j, be := range evs {
		data[j] = be.data
	}
	waits, err := ts.Waits(ctx, typ, data, now)
	switch {
	case err != nil && model.IsTransient(err):
		m.errs.Inc()
		errs[first] = fmt.Errorf("subscriptions to %s: %w", typ, err)
		return
	case err != nil:
		// An index itself is unusable (not a sorted set): no retry reads it, so the events are
		// not held for it.
		m.errs.Inc()
		if m.first("index\x00" + ts.Tenant() + "\x00" + typ) {
			m.log.Warn().Err(err).Str("event", "filter.bad_subscription_index").Str("tenant", ts.Tenant()).Str("event_type", typ).
				Msg("a subscription index is unreadable: events of this type wake nothing until an operator repairs it")
		}
		return
	}
	if invalid := waits.Invalid + waits.Uncorrelated.Invalid; invalid > 0 {
		res[first].Invalid += invalid
		m.invalid.Add(invalid)
		m.log.Warn().Str("event", "filter.invalid_subscriptions").Str("tenant", ts.Tenant()).Str("event_type", typ).
			Int("members", invalid).Msg("subscription index members no worker writes: skipped and removed")
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, maxParallel)
	)
	note := func(i int, o Result, err error) {
		mu.Lock()
		defer mu.Unlock()
		res[i].add(o)
		if err != nil {
			m.errs.Inc()
			res[i].Hold = true
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	run := func(w wait) {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			m.deliver(ctx, ts, w, now, note)
		}()
	}
	for _, cw := range waits.Correlated {
		offered := make([]batchEvent, len(cw.Events))
		for j, k := range cw.Events {
			offered[j] = evs[k]
		}
		run(wait{id: cw.ExecutionID, typ: typ, since: cw.Since, evs: offered, correlated: &cw})
	}
	for _, sr := range waits.Uncorrelated.Reads {
		run(wait{id: sr.ExecutionID, typ: typ, since: sr.Sub.Since, evs: evs, indexed: &sr})
	}
	wg.Wait()
}

// wait is one wait an event of a batch may wake, as the indexes list it: a correlated one
// (its bucket member) or an uncorrelated one (its member of the type's index and its record).
type wait struct {
	id, typ    string
	since      time.Time // when the suspension listed began (the member's or the record's)
	evs        []batchEvent
	correlated *store.CorrelatedWait
	indexed    *store.SubscriptionRead
}

// deliver is the events of one type, in publish order, against one wait: the first event the
// wait takes wakes it, and the later ones are not offered to it. note records an outcome for
// the event at an index.
func (m *Matcher) deliver(ctx context.Context, ts *store.TenantStore, w wait, now time.Time, note func(int, Result, error)) {
	evs := w.evs
	logFor := func(ev store.Event) deliveryLog {
		return deliveryLog{l: &m.log, tenant: ts.Tenant(), execution: w.id, eventID: ev.ID, eventType: w.typ}
	}
	if sr := w.indexed; sr != nil {
		switch {
		case sr.Err != nil:
			if m.first("corrupt\x00" + ts.Tenant() + "\x00" + w.id) {
				logFor(evs[0].ev).Warn().Err(sr.Err).Str("event", "filter.bad_subscription").Msg("a subscription record does not decode: left for an operator")
			}
			return
		case sr.Missing:
			o, err := m.removeStale(ctx, ts, w, "the index lists it without a record", logFor(evs[0].ev))
			note(evs[0].i, o, err)
			return
		}
	}
	// The member or record is written after the state: the state's suspension is no older,
	// and the events published before its since are not for it.
	for len(evs) > 0 && evs[0].ev.PublishedAt.Before(w.since) {
		m.early.Inc()
		evs = evs[1:]
	}
	if len(evs) == 0 {
		return
	}
	st, err := ts.Peek(ctx, w.id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		o, err := m.removeStale(ctx, ts, w, "the execution does not exist", logFor(evs[0].ev))
		note(evs[0].i, o, err)
		return
	case err != nil && model.IsTransient(err):
		note(evs[0].i, Result{}, fmt.Errorf("load execution %s: %w", w.id, err))
		return
	case err != nil:
		if m.first("state\x00" + ts.Tenant() + "\x00" + w.id) {
			logFor(evs[0].ev).Warn().Err(err).Str("event", "filter.bad_state").Msg("the execution state is unreadable: event not delivered")
		}
		return
	}
	s := st.Suspend
	if st.Status != state.Suspended || s == nil || s.Kind != state.SuspendEvent || s.EventType != w.typ ||
		(w.correlated != nil && !s.Since.Equal(w.since)) {
		// A bucket member names its suspension: one that is over is stale even when the
		// execution waits for this type again (it is listed again under its new suspension).
		o, err := m.removeStale(ctx, ts, w, "the execution is "+describe(st), logFor(evs[0].ev))
		note(evs[0].i, o, err)
		return
	}
	if w.indexed != nil {
		m.uncorrelatedWait(ts.Tenant(), st, logFor(evs[0].ev))
	}
	for _, be := range evs {
		// The state, not the record, says which suspension waits: a record from an earlier
		// wait of the same type is being rewritten by the worker.
		if be.ev.PublishedAt.Before(s.Since) {
			m.early.Inc()
			continue
		}
		if s.Due != nil && !now.Before(*s.Due) {
			// Timed out: the delay role resumes it with a timeout.
			m.timedOut.Inc()
			continue
		}
		if w.indexed != nil {
			m.uncorrelated.Inc()
		}
		log := logFor(be.ev)
		if o, done := m.check(ctx, ts.Tenant(), st, be.data, now, log); done {
			note(be.i, o, nil)
			if o.NoMatch == 1 {
				continue // the wait goes on: the next event may match
			}
			return // the flow is not published or not readable now: no event of the batch is checked
		}
		res, err := m.wake(ctx, ts.Tenant(), st, be.ev, log)
		note(be.i, res, err)
		if err == nil && res.Refused == 1 {
			continue // this event can never wake the wait; the next one may
		}
		if err == nil && res.Woken == 1 {
			m.used(ctx, ts, w, s, log)
		}
		// Woken now, already (a sent marker), being woken by another filter, or the enqueue
		// failed (held): no later event of the batch is for this suspension.
		return
	}
}

// used removes the index entry of a wait just woken: the consumer removes what it used
// (docs/wakeups.md), so the next events of the type do not read this execution again. A
// bucket member names the suspension it was for; an index member is removed only while the
// record is the one read (a wait registered meanwhile stays).
func (m *Matcher) used(ctx context.Context, ts *store.TenantStore, w wait, s *state.Suspend, log deliveryLog) {
	ctx = context.WithoutCancel(ctx)
	var err error
	switch {
	case w.correlated != nil:
		_, err = ts.RemoveCorrelatedWait(ctx, w.typ, *w.correlated)
	case w.indexed.Sub.Since.Equal(s.Since):
		_, err = ts.RemoveStaleSubscription(ctx, w.id, w.typ, ownRecord(w))
	}
	if err != nil {
		log.Warn().Err(err).Str("event", "filter.subscription_not_removed").Msg("the used subscription stays (it is removed as stale later)")
	}
}

// ownRecord is the record an uncorrelated wait's removal may delete: the one read, when it is
// this index's (an uncorrelated wait of this type); "" leaves the record — the execution
// rewrote it for another wait, which must keep it.
func ownRecord(w wait) string {
	if sr := w.indexed; sr != nil && !sr.Missing && sr.Err == nil && sr.Sub.EventType == w.typ && sr.Sub.Correlation == nil {
		return sr.Raw
	}
	return ""
}

// uncorrelatedWait logs, once per tenant, flow and node, that a wait is checked against every
// event of its type (its match has no correlation term, or no term had a value).
func (m *Matcher) uncorrelatedWait(tenant string, st *state.Execution, log deliveryLog) {
	s := st.Suspend
	if !m.first("uncorrelated\x00" + tenant + "\x00" + st.FlowID + "\x00" + s.Node) {
		return
	}
	log.Info().Str("event", "filter.uncorrelated_wait").Str("flow_id", st.FlowID).Str("flow_version", st.FlowVersion).
		Str("node", s.Node).Str("match", s.Match).
		Msg("an uncorrelated wait: every event of its type is checked against it (its match has no correlation term with a value; docs/events.md, \"Correlation\")")
}

// check runs the worker's resume check. done is true when the event must not be delivered.
func (m *Matcher) check(ctx context.Context, tenant string, st *state.Execution, data any, now time.Time, log deliveryLog) (Result, bool) {
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

// wake enqueues the resume once per (execution, suspension, event). A resume the queue refuses
// (queue.ErrInvalidEnvelope: the event's data is over the input bound or not an acceptable
// document) can never be enqueued: the wake-up is marked refused, counted and logged once, and
// no filter claims it again — as the CLI's start, it ends with nothing enqueued instead of a
// retry every pass.
func (m *Matcher) wake(ctx context.Context, tenant string, st *state.Execution, ev store.Event, log deliveryLog) (Result, error) {
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
	case store.WakeRefused:
		return Result{Refused: 1}, nil
	case store.WakeTakenOver:
		m.takeovers.Inc()
		log.Warn().Str("event", "filter.wakeup_taken_over").Str("previous", w.Previous).
			Msg("a wake-up claimed by another filter was never marked sent: enqueuing it (the worker refuses a duplicate)")
	}
	env := queue.Envelope{Kind: queue.KindResume, TenantID: tenant, FlowID: st.FlowID, FlowVersion: st.FlowVersion,
		ExecutionID: st.ExecutionID, ResumeType: engine.ResumeEvent, ResumeData: ev.Data,
		SourceMessageID: engine.EventCarrier(ev.ID, st.Suspend.Since), TraceParent: st.TraceParent, TraceState: st.TraceState}
	if tracing.Enabled() {
		// The resume continues the execution's trace and links the event's publish.
		exec := tracing.Execution(st.Trace(), st.ExecutionID)
		env.TraceParent, env.TraceState = exec.TraceParent, exec.TraceState
		ctx = ev.Trace().Context(ctx)
	}
	streamID, err := m.d.Enqueue(ctx, env)
	if errors.Is(err, queue.ErrInvalidEnvelope) {
		m.refused.Inc()
		log.Error().Err(err).Str("event", "filter.wakeup_refused").Str("node", st.Suspend.Node).
			Msg("the resume cannot be enqueued: this event never wakes this wait (nothing enqueued; a later event still can)")
		if ok, rerr := m.d.Events.WakeRefused(context.WithoutCancel(ctx), w, err.Error()); rerr != nil || !ok {
			log.Warn().Err(rerr).Bool("marked", ok).Str("event", "filter.refusal_not_marked").
				Msg("the refused wake-up is not marked: after the grace period it is claimed and refused again")
		}
		return Result{Refused: 1}, nil
	}
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

// removeStale removes the index entry of a wait whose execution no longer waits there.
func (m *Matcher) removeStale(ctx context.Context, ts *store.TenantStore, w wait, why string, log deliveryLog) (Result, error) {
	var removed bool
	var err error
	if w.correlated != nil {
		removed, err = ts.RemoveCorrelatedWait(ctx, w.typ, *w.correlated)
	} else {
		removed, err = ts.RemoveStaleSubscription(ctx, w.id, w.typ, ownRecord(w))
	}
	if err != nil {
		return Result{}, fmt.Errorf("remove the stale subscription of %s: %w", w.id, err)
	}
	if !removed {
		return Result{}, nil
	}
	m.stale.Inc()
	log.Debug().Str("event", "filter.stale_subscription").Str("reason", why).Msg("stale subscription removed")
	return Result{Stale: 1}, nil
}

// deliveryLog writes the lines of one delivery (an event against a waiting execution) with the
// fields that name it, added to each line rather than kept in a sub-logger: a batch checks
// events × waits deliveries, and a line whose level is off then costs nothing.
type deliveryLog struct {
	l                                     *zerolog.Logger
	tenant, execution, eventID, eventType string
}

func (d deliveryLog) with(e *zerolog.Event) *zerolog.Event {
	return e.Str("tenant", d.tenant).Str("execution_id", d.execution).Str("event_id", d.eventID).Str("event_type", d.eventType)
}

func (d deliveryLog) Error() *zerolog.Event { return d.with(d.l.Error()) }
func (d deliveryLog) Warn() *zerolog.Event  { return d.with(d.l.Warn()) }
func (d deliveryLog) Info() *zerolog.Event  { return d.with(d.l.Info()) }
func (d deliveryLog) Debug() *zerolog.Event { return d.with(d.l.Debug()) }

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
