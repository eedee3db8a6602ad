// Package schedule is the schedule role's own loop and decisions: every check interval the
// Scheduler reads the due index (store.Schedules.Due), and for each due schedule decides the
// tick to fire — the newest cron tick after the last one handled, so a schedule that was not
// looked at for a while fires once for the ticks it missed — skips it (disabled tenant, flow not
// published), or claims it with a compare-and-set and enqueues its start with an execution id
// that is a function of (schedule, tick). It builds no Redis command and reads no
// configuration: store/ and queue/ hold the state, roles/schedule.go wires the services.
//
// One tick, one start: the claim succeeds for one process only (two schedule processes never
// fire the same tick twice); the claim is recorded as pending until the start is enqueued, and
// a claim whose process died is taken over by another one after store.DefaultClaimGrace, which
// looks for the start in the task stream and in the executions before enqueuing it — no tick is
// lost and none is fired twice. docs/schedules.md has the whole contract.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/callctx"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/store"
)

// Defaults of the knobs left at zero.
const (
	DefaultInterval = time.Second
	DefaultBatch    = 500
	DefaultWorkers  = 8
	// maxRounds bounds the due reads of one pass (a full batch asks for another).
	maxRounds = 20
	// handleTimeout bounds the work on one schedule (reads, claim, enqueue, completion). It runs on
	// a context the loop's Stop does not cancel, so a stopping process finishes the tick it
	// claimed instead of leaving it pending.
	handleTimeout = 10 * time.Second
	// enqueueTimeout bounds one enqueue; well below store.DefaultClaimGrace, so a takeover
	// never races an enqueue still in flight.
	enqueueTimeout = 5 * time.Second
	// streamSlack widens a takeover's look into the stream before the first claim: the stream
	// ids and the claim come from the same Redis clock, the slack covers a clock step.
	streamSlack = 5 * time.Second
	// streamScanLimit bounds the entries a takeover reads; past it the start is enqueued again
	// (the same execution id: the worker runs one execution).
	streamScanLimit = 200_000
)

// Verdict is what the tenant gate says about a tenant's schedules right now.
type Verdict int

const (
	Fire Verdict = iota // the tenant is active (or has no status entry)
	Skip                // the tenant is disabled: the tick is skipped, never fired later
	Hold                // undecidable now: the tick stays due
)

// TenantGate tells whether a tenant's schedules fire: the schedule role checks the tenant
// status before it enqueues (docs/schedules.md).
type TenantGate interface {
	Check(ctx context.Context, tenant string) (v Verdict, reason string, err error)
}

// Flows reads published flows (store.Flows).
type Flows interface {
	Latest(ctx context.Context, tenant, flowID string) (string, error)
	Get(ctx context.Context, tenant, flowID, version string) ([]byte, error)
}

// Deps is what a Scheduler needs; roles/schedule.go fills it from the configuration.
type Deps struct {
	Store   *store.Schedules
	Flows   Flows
	Tenants TenantGate
	// Enqueue writes a start to the task stream (queue.Producer.Enqueue: stamped with this
	// process's config generations, the input held to PLAITA_EXECUTION_STATE_MAX_BYTES); Stream
	// is that stream's name, where a takeover looks for it.
	Enqueue func(ctx context.Context, env queue.Envelope) (messageID string, err error)
	Stream  string
	// Started reports whether an execution exists (its state, or its deletion tombstone): a
	// worker that took a start from the stream wrote it before deleting the entry.
	Started func(ctx context.Context, tenant, executionID string) (bool, error)

	Instance string        // PLAITA_INSTANCE_ID: written into claims
	Interval time.Duration // PLAITA_CHECK_INTERVAL
	Batch    int           // due schedules read at once
	Workers  int           // schedules handled concurrently
	Log      zerolog.Logger
	Metrics  *metrics.Set
	Now      func() time.Time
}

// Scheduler is the schedule role's loop: a service.Loop calling RunOnce every Interval.
type Scheduler struct {
	service.Loop
	d    Deps
	once onceLog
	m    schedMetrics
}

type schedMetrics struct {
	passes, passErrors, fired, conflicts, enqueueFailures, badRecords *metrics.Counter
	skippedTenant, skippedFlow, skippedRefused                        *metrics.Counter
	recoveredFound, recoveredEnqueued                                 *metrics.Counter
	lag                                                               *metrics.PrometheusHistogram
	lastPass                                                          *metrics.Gauge
}

// New builds the scheduler; nothing runs until Start.
func New(d Deps) *Scheduler {
	if d.Interval <= 0 {
		d.Interval = DefaultInterval
	}
	if d.Batch <= 0 {
		d.Batch = DefaultBatch
	}
	if d.Workers <= 0 {
		d.Workers = DefaultWorkers
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Metrics == nil {
		d.Metrics = metrics.NewSet()
	}
	set := d.Metrics
	skipped := func(reason string) *metrics.Counter {
		return set.GetOrCreateCounter(`plaita_schedule_skipped_total{reason="` + reason + `"}`)
	}
	s := &Scheduler{d: d, m: schedMetrics{
		passes:            set.GetOrCreateCounter(`plaita_schedule_passes_total`),
		passErrors:        set.GetOrCreateCounter(`plaita_schedule_pass_errors_total`),
		fired:             set.GetOrCreateCounter(`plaita_schedule_fired_total`),
		conflicts:         set.GetOrCreateCounter(`plaita_schedule_claim_conflicts_total`),
		enqueueFailures:   set.GetOrCreateCounter(`plaita_schedule_enqueue_failures_total`),
		badRecords:        set.GetOrCreateCounter(`plaita_schedule_bad_records_total`),
		skippedTenant:     skipped("tenant_disabled"),
		skippedFlow:       skipped("flow_not_published"),
		skippedRefused:    skipped("start_refused"),
		recoveredFound:    set.GetOrCreateCounter(`plaita_schedule_recovered_total{how="already_enqueued"}`),
		recoveredEnqueued: set.GetOrCreateCounter(`plaita_schedule_recovered_total{how="enqueued"}`),
		lag:               set.GetOrCreatePrometheusHistogram(`plaita_schedule_fire_lag_seconds`),
		lastPass:          set.GetOrCreateGauge(`plaita_schedule_last_pass_timestamp_seconds`, nil),
	}}
	s.Loop = service.Loop{Interval: d.Interval, Once: func(ctx context.Context) { s.RunOnce(ctx) }}
	return s
}

// Pass counts what one RunOnce did.
type Pass struct {
	Due, Fired, Skipped, Conflicts, Recovered, Errors int
}

func (p *Pass) add(o Pass) {
	p.Due += o.Due
	p.Fired += o.Fired
	p.Skipped += o.Skipped
	p.Conflicts += o.Conflicts
	p.Recovered += o.Recovered
	p.Errors += o.Errors
}

// RunOnce is one pass: every schedule due now, across all tenants. ctx ending stops the pass
// between schedules; the schedules already begun are finished (see handleTimeout).
func (s *Scheduler) RunOnce(ctx context.Context) Pass {
	s.m.passes.Inc()
	var total Pass
	now := s.d.Now()
	for range maxRounds {
		if ctx.Err() != nil {
			break
		}
		refs, err := s.d.Store.Due(ctx, now, s.d.Batch)
		if err != nil && ctx.Err() != nil {
			return total // stopping
		}
		if err != nil {
			s.m.passErrors.Inc()
			total.Errors++
			if s.once.first("due-read") {
				s.d.Log.Warn().Err(err).Str("event", "schedule.pass_failed").Msg("cannot read the due schedules: retrying every check interval")
			}
			return total
		}
		s.once.forget("due-read")
		// Shuffled: two schedule processes that read the same page do not contend on each
		// schedule in lockstep.
		rand.Shuffle(len(refs), func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
		total.add(s.handleAll(ctx, refs))
		if len(refs) < s.d.Batch {
			break
		}
	}
	s.m.lastPass.Set(float64(s.d.Now().UnixMilli()) / 1000)
	return total
}

// handleAll handles refs on up to Workers goroutines.
func (s *Scheduler) handleAll(ctx context.Context, refs []store.DueRef) Pass {
	var (
		mu    sync.Mutex
		total = Pass{Due: len(refs)}
		wg    sync.WaitGroup
		next  = make(chan store.DueRef)
	)
	for range min(s.d.Workers, len(refs)) {
		wg.Go(func() {
			for ref := range next {
				p := s.handle(ctx, ref)
				mu.Lock()
				total.add(p)
				mu.Unlock()
			}
		})
	}
	for _, ref := range refs {
		if ctx.Err() != nil {
			break
		}
		next <- ref
	}
	close(next)
	wg.Wait()
	return total
}

// handle looks at one due schedule: settles its old pending claims, then fires (or skips) the
// newest tick due, or puts its due score right when nothing is due.
func (s *Scheduler) handle(parent context.Context, ref store.DueRef) (p Pass) {
	ctx, cancel := callctx.Detached(parent, handleTimeout)
	defer cancel()
	log := s.d.Log.With().Str("tenant", ref.Tenant).Str("schedule_id", ref.ID).Logger()
	rec, err := s.d.Store.Get(ctx, ref.Tenant, ref.ID)
	switch {
	case errors.Is(err, store.ErrScheduleNotFound):
		if err := s.d.Store.Forget(ctx, ref.Tenant, ref.ID); err != nil {
			p.Errors++
		}
		return p
	case errors.Is(err, store.ErrBadSchedule):
		s.m.badRecords.Inc()
		if s.once.first("bad\x00" + ref.Tenant + "\x00" + ref.ID) {
			log.Error().Err(err).Str("event", "schedule.bad_record").
				Msg("the schedule's record does not decode: it is not fired until it is written again or deleted")
		}
		if err := s.d.Store.Park(ctx, ref.Tenant, ref.ID); err != nil {
			p.Errors++
		}
		return p
	case err != nil:
		p.Errors++
		log.Warn().Err(err).Str("event", "schedule.read_failed").Msg("cannot read the schedule: it stays due")
		return p
	}
	now := s.d.Now()
	for _, pending := range rec.Pending {
		if now.UnixMilli() >= pending.ClaimedMS+s.grace().Milliseconds() {
			p.add(s.recoverClaim(ctx, rec, pending, log))
		}
	}
	if !rec.Enabled {
		if !rec.Next.IsZero() {
			if _, err := s.d.Store.Reschedule(ctx, rec, time.Time{}); err != nil {
				p.Errors++
			}
		}
		return p
	}
	cr, err := store.ParseCron(rec.Cron, rec.TimeZone)
	if err != nil { // DecodeSchedule validated it: only a zone database that changed under us
		p.Errors++
		return p
	}
	tick, ok := cr.Latest(rec.LastTick, now)
	if !ok {
		// Nothing due (an early score: an edit, another process that fired it first): make
		// next_ms right so the due score is.
		if want := cr.Next(rec.LastTick); !want.Equal(rec.Next) {
			if _, err := s.d.Store.Reschedule(ctx, rec, want); err != nil {
				p.Errors++
			}
		}
		return p
	}
	p.add(s.fire(ctx, rec, cr, tick, log))
	return p
}

func (s *Scheduler) grace() time.Duration {
	if g := s.d.Store.Grace; g > 0 {
		return g
	}
	return store.DefaultClaimGrace
}

// fire decides tick for rec: skip it (tenant disabled, flow not published), hold it (tenant
// status undecidable), or claim it and enqueue its start.
func (s *Scheduler) fire(ctx context.Context, rec store.ScheduleRecord, cr *store.Cron, tick time.Time, log zerolog.Logger) (p Pass) {
	log = log.With().Time("tick", tick).Logger()
	next := cr.Next(tick)
	verdict, reason, err := s.d.Tenants.Check(ctx, rec.TenantID)
	if err != nil {
		p.Errors++
		log.Warn().Err(err).Str("event", "schedule.tenant_check_failed").Msg("cannot read the tenant status: the tick stays due")
		return p
	}
	switch verdict {
	case Hold:
		if s.once.first("hold\x00" + rec.TenantID + "\x00" + reason) {
			log.Warn().Str("event", "schedule.tenant_held").Str("reason", reason).Msg("tenant status undecidable: the tenant's ticks stay due")
		}
		return p
	case Skip:
		return s.skip(ctx, rec, tick, next, reason, s.m.skippedTenant, log)
	}
	version, err := s.resolve(ctx, rec)
	if errors.Is(err, store.ErrFlowNotFound) {
		why := fmt.Sprintf("flow %s version %s is not published in tenant %s", rec.FlowID, rec.FlowVersion, rec.TenantID)
		if s.once.first("flow\x00" + rec.TenantID + "\x00" + rec.ID + "\x00" + why) {
			log.Warn().Str("event", "schedule.flow_not_published").Str("flow_id", rec.FlowID).Str("flow_version", rec.FlowVersion).
				Msg(why + ": the tick is skipped (publish the flow; later ticks fire)")
		}
		return s.skip(ctx, rec, tick, next, why, s.m.skippedFlow, log)
	}
	if err != nil {
		p.Errors++
		log.Warn().Err(err).Str("event", "schedule.flow_read_failed").Msg("cannot read the flow: the tick stays due")
		return p
	}
	claim := store.PendingFire{TickMS: tick.UnixMilli(), ExecutionID: store.ScheduleExecutionID(rec.TenantID, rec.ID, rec.CreatedAt, tick),
		FlowID: rec.FlowID, FlowVersion: version, By: s.d.Instance}
	claimed, ok, err := s.d.Store.Claim(ctx, rec, claim, next)
	switch {
	case err != nil:
		p.Errors++
		log.Warn().Err(err).Str("event", "schedule.claim_failed").Msg("cannot claim the tick: it stays due")
		return p
	case !ok:
		// Another schedule process claimed it first, or the schedule was edited meanwhile.
		s.m.conflicts.Inc()
		p.Conflicts++
		return p
	}
	p.add(s.start(ctx, rec, claimed, false, log))
	return p
}

// skip records tick as skipped; a lost compare-and-set means another process handled it.
func (s *Scheduler) skip(ctx context.Context, rec store.ScheduleRecord, tick, next time.Time, reason string, c *metrics.Counter,
	log zerolog.Logger) (p Pass) {
	ok, err := s.d.Store.Skip(ctx, rec, tick, reason, next, s.d.Now())
	switch {
	case err != nil:
		p.Errors++
		log.Warn().Err(err).Str("event", "schedule.skip_failed").Msg("cannot record the skipped tick: it stays due")
	case ok:
		c.Inc()
		p.Skipped++
		log.Info().Str("event", "schedule.skipped").Str("reason", reason).Msg("tick skipped")
	default:
		s.m.conflicts.Inc()
		p.Conflicts++
	}
	return p
}

// resolve is the version a start carries: "latest" is the most recently published version at
// fire time; a fixed version must be published.
func (s *Scheduler) resolve(ctx context.Context, rec store.ScheduleRecord) (string, error) {
	if rec.FlowVersion == store.LatestVersion {
		return s.d.Flows.Latest(ctx, rec.TenantID, rec.FlowID)
	}
	if _, err := s.d.Flows.Get(ctx, rec.TenantID, rec.FlowID, rec.FlowVersion); err != nil {
		return "", err
	}
	return rec.FlowVersion, nil
}

// start enqueues the start of a claimed tick and completes the claim. A transient failure
// leaves the claim pending: a takeover completes it after the grace. A start the queue refuses
// (an input above PLAITA_EXECUTION_STATE_MAX_BYTES …) can never be enqueued: the tick is
// recorded as skipped.
func (s *Scheduler) start(ctx context.Context, rec store.ScheduleRecord, claim store.PendingFire, recovered bool, log zerolog.Logger) (p Pass) {
	log = log.With().Str("execution_id", claim.ExecutionID).Str("flow_id", claim.FlowID).Str("flow_version", claim.FlowVersion).Logger()
	env := queue.Envelope{Kind: queue.KindStart, TenantID: rec.TenantID, FlowID: claim.FlowID, FlowVersion: claim.FlowVersion,
		ExecutionID: claim.ExecutionID, Input: rec.Input}
	ectx, cancel := context.WithTimeout(ctx, enqueueTimeout)
	msgID, err := s.d.Enqueue(ectx, env)
	cancel()
	if errors.Is(err, queue.ErrInvalidEnvelope) {
		s.m.skippedRefused.Inc()
		p.Skipped++
		log.Error().Err(err).Str("event", "schedule.start_refused").Msg("the start cannot be enqueued: the tick is skipped")
		if _, cerr := s.d.Store.Complete(ctx, rec.TenantID, rec.ID, claim, nil,
			&store.ScheduleSkip{Tick: claim.Tick(), Reason: "start refused: " + err.Error(), At: s.d.Now()}); cerr != nil {
			p.Errors++
		}
		return p
	}
	if err != nil {
		s.m.enqueueFailures.Inc()
		p.Errors++
		log.Warn().Err(err).Str("event", "schedule.enqueue_failed").
			Msgf("the start was not confirmed enqueued: the claim stays pending and is completed after %s", s.grace())
		return p
	}
	now := s.d.Now()
	done, err := s.d.Store.Complete(ctx, rec.TenantID, rec.ID, claim, &store.ScheduleFire{Tick: claim.Tick(), ExecutionID: claim.ExecutionID,
		FlowVersion: claim.FlowVersion, MessageID: msgID, At: now, By: s.d.Instance, Recovered: recovered}, nil)
	switch {
	case err != nil:
		// Enqueued, not recorded: a takeover finds the start in the stream and records it.
		p.Errors++
		log.Warn().Err(err).Str("event", "schedule.complete_failed").Msg("start enqueued, but the claim is not completed: a takeover records it")
	case !done:
		log.Warn().Str("event", "schedule.claim_taken_over").Msg("start enqueued after another process took the claim over (it finds this start in the stream)")
	}
	s.m.fired.Inc()
	s.m.lag.Update(now.Sub(claim.Tick()).Seconds())
	p.Fired++
	log.Info().Str("event", "schedule.fired").Str("message_id", msgID).Bool("recovered", recovered).Msg("start enqueued")
	return p
}

// recoverClaim completes a claim whose process did not: once it is older than the grace (by
// the Redis clock) this process takes it over, looks for its start in the task stream and
// among the executions, and enqueues it only when it is in neither.
func (s *Scheduler) recoverClaim(ctx context.Context, rec store.ScheduleRecord, old store.PendingFire, log zerolog.Logger) (p Pass) {
	claim, ok, _, err := s.d.Store.TakeOver(ctx, rec.TenantID, rec.ID, old, s.d.Instance)
	if err != nil {
		p.Errors++
		log.Warn().Err(err).Str("event", "schedule.takeover_failed").Msg("cannot take over a pending claim")
		return p
	}
	if !ok {
		return p // young by the Redis clock, completed or taken by another process meanwhile
	}
	log = log.With().Time("tick", claim.Tick()).Str("execution_id", claim.ExecutionID).Str("claimed_by", old.By).Logger()
	enqueued, err := s.enqueued(ctx, rec.TenantID, claim)
	if err != nil {
		p.Errors++
		log.Warn().Err(err).Str("event", "schedule.takeover_failed").Msg("cannot tell whether the pending start was enqueued: it is looked at again after the grace")
		return p
	}
	p.Recovered++
	if enqueued {
		s.m.recoveredFound.Inc()
		log.Info().Str("event", "schedule.recovered").Str("how", "already_enqueued").Msg("pending claim completed: its start was enqueued")
		if _, err := s.d.Store.Complete(ctx, rec.TenantID, rec.ID, claim, &store.ScheduleFire{Tick: claim.Tick(), ExecutionID: claim.ExecutionID,
			FlowVersion: claim.FlowVersion, At: s.d.Now(), By: s.d.Instance, Recovered: true}, nil); err != nil {
			p.Errors++
		}
		return p
	}
	// The tenant may have been disabled since the claim: its start would be refused.
	switch verdict, reason, err := s.d.Tenants.Check(ctx, rec.TenantID); {
	case err != nil || verdict == Hold:
		p.Errors++
		log.Warn().Err(err).Str("event", "schedule.tenant_check_failed").Str("reason", reason).Msg("cannot decide the pending start's tenant now: it is looked at again after the grace")
		return p
	case verdict == Skip:
		s.m.skippedTenant.Inc()
		p.Skipped++
		if _, err := s.d.Store.Complete(ctx, rec.TenantID, rec.ID, claim, nil, &store.ScheduleSkip{Tick: claim.Tick(), Reason: reason, At: s.d.Now()}); err != nil {
			p.Errors++
		}
		return p
	}
	s.m.recoveredEnqueued.Inc()
	log.Info().Str("event", "schedule.recovered").Str("how", "enqueued").Msg("pending claim's start was never enqueued: enqueuing it now")
	p.add(s.start(ctx, rec, claim, true, log))
	return p
}

// enqueued reports whether claim's start is in the task stream or already taken by a worker.
// The stream first: a worker writes the execution's state before it deletes the entry, so an
// entry gone from the stream by the time it is read has a state by the time that is read.
func (s *Scheduler) enqueued(ctx context.Context, tenant string, claim store.PendingFire) (bool, error) {
	from := claim.FirstClaimedMS - streamSlack.Milliseconds()
	found, complete, err := s.d.Store.FindInStream(ctx, s.d.Stream, from, streamScanLimit, func(e store.StreamEntry) bool {
		env, _, derr := queue.Decode(s.d.Stream, e.ID, []byte(e.Fields[queue.PayloadField]))
		return derr == nil && env.Kind == queue.KindStart && env.ExecutionID == claim.ExecutionID
	})
	if err != nil || found {
		return found, err
	}
	if !complete {
		s.d.Log.Warn().Str("event", "schedule.stream_scan_truncated").Int("limit", streamScanLimit).Str("execution_id", claim.ExecutionID).
			Msg("the task stream is too long to look through: the start is enqueued again (same execution id, one execution)")
	}
	return s.d.Started(ctx, tenant, claim.ExecutionID)
}

// onceLog remembers which keys were logged, so a condition that persists (a bad record, a
// disabled tenant's hold) is logged once, not every pass. It forgets everything past a bound.
type onceLog struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

const onceLogMax = 10_000

func (o *onceLog) first(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil || len(o.seen) >= onceLogMax {
		o.seen = map[string]struct{}{}
	}
	if _, ok := o.seen[key]; ok {
		return false
	}
	o.seen[key] = struct{}{}
	return true
}

func (o *onceLog) forget(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, key)
}
