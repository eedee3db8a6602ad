// Package delay is the delay role's own loop: the Mover sends the delay queue's due entries
// (a delay node's continue, a wait's or an approval's timeout) to the task stream as resumes,
// through queue.Delay.MoveDue. It builds no Redis command and reads no configuration:
// roles/delay.go builds its settings and starts it beside the registry heartbeat and the
// metrics endpoint (internal/service).
package delay

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"plaita/internal/callctx"
	"plaita/internal/health"
	"plaita/internal/service"
	"plaita/internal/tracing"
	"plaita/queue"
)

// DefaultInterval is the time between two passes when nothing is left to send. A due entry is
// sent within one interval of its due time (and never before it); a pass that finds nothing
// costs one ZRANGE, so five a second per delay process is cheap.
const DefaultInterval = 200 * time.Millisecond

// maxPassesPerTick bounds the passes one tick makes while batches come back full (a backlog
// after downtime): the loop then yields to Stop and to the next tick, and goes on.
const maxPassesPerTick = 50

// DefaultPassTimeout bounds one pass. A pass is not cancelled by Stop: its script is atomic on
// the server, and a pass cut short on the client side would send resumes it never logs.
const DefaultPassTimeout = 10 * time.Second

// Settings are the mover's knobs.
type Settings struct {
	Interval time.Duration     // DefaultInterval when zero
	Move     queue.MoveOptions // where resumes go, batch size, retries
	// PassTimeout bounds one pass (DefaultPassTimeout when zero).
	PassTimeout time.Duration
	// Now is the clock due times are compared with (nil = time.Now). Tests set it.
	Now func() time.Time
}

// Mover is the delay role's poller: every Interval it sends what is due, and keeps going
// without waiting while passes come back full. It is a service (Start/Stop); RunOnce is one
// pass, which tests call directly.
type Mover struct {
	svc service.Base
	q   *queue.Delay
	s   Settings
	log zerolog.Logger
	m   moverMetrics

	failing atomic.Bool // the last pass failed (logged once per outage)
}

type moverMetrics struct {
	fired, failures, dead, skipped, passFailures *metrics.Counter
	lateness                                     *metrics.PrometheusHistogram
	scheduled, due, deadEntries, oldestAge       *metrics.Gauge
}

// NewMover builds the mover of queue q and registers its metrics on set:
// plaita_delay_fired_total, _enqueue_failures_total, _dead_total, _skipped_total,
// _pass_failures_total, the histogram plaita_delay_lateness_seconds (due time → sent), and the
// gauges the Collector refreshes: plaita_delay_scheduled, _due, _dead_entries,
// _oldest_due_age_seconds.
func NewMover(q *queue.Delay, s Settings, set *metrics.Set, log zerolog.Logger) *Mover {
	if s.Interval <= 0 {
		s.Interval = DefaultInterval
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.PassTimeout <= 0 {
		s.PassTimeout = DefaultPassTimeout
	}
	return &Mover{q: q, s: s, log: log, m: moverMetrics{
		fired:        set.GetOrCreateCounter("plaita_delay_fired_total"),
		failures:     set.GetOrCreateCounter("plaita_delay_enqueue_failures_total"),
		dead:         set.GetOrCreateCounter("plaita_delay_dead_total"),
		skipped:      set.GetOrCreateCounter("plaita_delay_skipped_total"),
		passFailures: set.GetOrCreateCounter("plaita_delay_pass_failures_total"),
		lateness:     set.GetOrCreatePrometheusHistogram("plaita_delay_lateness_seconds"),
		scheduled:    set.GetOrCreateGauge("plaita_delay_scheduled", nil),
		due:          set.GetOrCreateGauge("plaita_delay_due", nil),
		deadEntries:  set.GetOrCreateGauge("plaita_delay_dead_entries", nil),
		oldestAge:    set.GetOrCreateGauge("plaita_delay_oldest_due_age_seconds", nil),
	}}
}

// Start runs the loop until Stop; the first pass comes at once (entries that came due while no
// delay role ran are sent right away).
func (m *Mover) Start(ctx context.Context) error {
	return m.svc.Run(ctx, m.loop)
}

// Stop ends the loop after the pass in flight, if any; safe twice and before Start.
func (m *Mover) Stop(ctx context.Context) { m.svc.Stop(ctx) }

func (m *Mover) loop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range maxPassesPerTick {
			rep, err := m.RunOnce(ctx)
			// Go on at once only while passes move members: a full batch of members that could
			// not even be counted (Redis out of memory) would otherwise be retried in a hot loop.
			if err != nil || !rep.Full || len(rep.Fired)+len(rep.Dead) == 0 || ctx.Err() != nil {
				break
			}
		}
		t.Reset(m.s.Interval)
	}
}

// RunOnce is one pass: it sends what is due now, logs and counts each entry's fate, and
// returns the report. Only a failure to reach the queue is an error (logged once per outage).
func (m *Mover) RunOnce(ctx context.Context) (queue.MoveReport, error) {
	pctx, cancel := callctx.Detached(ctx, m.s.PassTimeout)
	defer cancel()
	now := m.s.Now()
	began := time.Now()
	rep, err := m.q.MoveDue(pctx, now, m.s.Move)
	if err != nil {
		m.m.passFailures.Inc()
		if m.failing.CompareAndSwap(false, true) {
			m.log.Warn().Str("event", "delay.pass_failed").Err(err).
				Msg("cannot read the delay queue; due wake-ups wait until it can be read again")
		}
		return rep, err
	}
	if m.failing.CompareAndSwap(true, false) {
		m.log.Info().Str("event", "delay.pass_recovered").Msg("the delay queue can be read again")
	}
	for _, f := range rep.Fired {
		m.m.fired.Inc()
		m.m.lateness.Update(max(f.Late.Seconds(), 0))
		e := f.Entry
		m.log.Info().Str("event", "delay.fired").Str("execution_id", e.ExecutionID).Str("tenant_id", e.TenantID).
			Str("resume_type", string(e.ResumeType)).Str("node", e.Node).Time("due", e.Due).Dur("late", f.Late).
			Str("message_id", f.MessageID).Msg("wake-up sent")
		if tracing.Enabled() {
			wakeSpan(ctx, f, began)
		}
	}
	for _, r := range rep.Retried {
		m.m.failures.Inc()
		m.log.Warn().Str("event", "delay.enqueue_failed").Str("member", clip(r.Member)).Int64("attempts", r.Attempts).
			Str("error", r.Err).Msg("wake-up not sent; retried later")
	}
	for _, d := range rep.Dead {
		m.m.dead.Inc()
		m.log.Error().Str("event", "delay.dead").Str("member", clip(d.Member)).Str("reason", d.Record.Reason).
			Str("detail", d.Record.Detail).Int64("attempts", d.Record.Attempts).Str("dead_key", m.q.DeadKey()).
			Msg("delay queue entry given up: moved to :dead")
	}
	m.m.skipped.Add(rep.Skipped)
	return rep, nil
}

// wakeSpan is the span of one wake-up the pass sent, in its execution's trace (the entry
// carries it). The resume it sent carries that trace as the entry wrote it — the mover's script
// sends the bytes it was given — so the worker's run of the resume is this span's sibling.
func wakeSpan(ctx context.Context, f queue.Fired, began time.Time) {
	e := f.Entry
	parent := tracing.Execution(e.Trace(), e.ExecutionID).Context(ctx)
	_, span := tracing.StartAt(parent, "wake "+string(e.ResumeType)+" "+e.Node, trace.SpanKindProducer, began)
	span.SetAttributes(attribute.String(tracing.AttrExecution, e.ExecutionID), attribute.String(tracing.AttrTenant, e.TenantID),
		attribute.String(tracing.AttrFlow, e.FlowID), attribute.String(tracing.AttrNodeID, e.Node),
		attribute.String(tracing.AttrResumeType, string(e.ResumeType)), attribute.String(tracing.AttrMessageID, f.MessageID),
		attribute.String("plaita.delay.due", e.Due.Format(time.RFC3339Nano)), attribute.Float64("plaita.delay.late_seconds", f.Late.Seconds()))
	span.End()
}

// clip bounds a member in a log line: a poisoned member may be anything, of any size.
func clip(s string) string {
	const n = 512
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Collector refreshes the queue gauges before each /metrics scrape.
func (m *Mover) Collector() health.Collector {
	return func(ctx context.Context) {
		now := m.s.Now()
		s, err := m.q.Stats(ctx, now)
		if err != nil {
			m.log.Debug().Str("event", "delay.stats_failed").Err(err).Msg("queue gauges not refreshed")
			return
		}
		m.m.scheduled.Set(float64(s.Scheduled))
		m.m.due.Set(float64(s.Due))
		m.m.deadEntries.Set(float64(s.Dead))
		age := 0.0
		if !s.OldestDue.IsZero() && s.Due > 0 {
			age = now.Sub(s.OldestDue).Seconds()
		}
		m.m.oldestAge.Set(age)
	}
}
