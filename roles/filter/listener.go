package filter

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/service"
	"plaita/store"
)

// Listener subscribes to the event notifications and hands each to a bounded pool of handlers
// that run the Matcher. A notification is a hint: one that is lost (no filter subscribed, a
// dropped connection, a full queue) is found by the reconciler.
//
// A full queue drops the notification (the subscription must never block: Redis cuts a slow
// subscriber) and asks for a reconcile pass of its tenant at once (OnOverflow), so a burst
// past the queue wakes its waits within a pass, not at the next periodic one. Drops are
// counted one by one and logged as one line per burst (dropReport).
type Listener struct {
	service.Base
	d Deps
	s Settings
	m *Matcher

	// OnSubscribed runs after every (re)subscription, with first = true the first time: the
	// wiring marks the role ready and, after a resubscription, asks the reconciler for a pass
	// (what was published while the connection was down reached nobody).
	OnSubscribed func(first bool)
	// OnDown runs when the subscription failed and is retried.
	OnDown func(err error)
	// OnOverflow runs for every notification dropped because the queue is full, with its
	// tenant: the wiring asks the reconciler for a pass of that tenant (which coalesces the
	// asks). It runs on the subscription's goroutine and must not block.
	OnOverflow func(tenant string)

	subscribed atomic.Int64
	notes      chan store.EventRef
	inFlight   sync.WaitGroup
	drops      dropReport

	received, dropped, bad *metrics.Counter
	log                    zerolog.Logger
}

// NewListener builds the listener over the matcher.
func NewListener(d Deps, s Settings, m *Matcher) *Listener {
	s, d = s.withDefaults(), d.withDefaults()
	return &Listener{d: d, s: s, m: m, log: d.Log,
		received: d.Metrics.GetOrCreateCounter(`plaita_filter_notifications_total`),
		dropped:  d.Metrics.GetOrCreateCounter(`plaita_filter_notifications_dropped_total`),
		bad:      d.Metrics.GetOrCreateCounter(`plaita_filter_notifications_malformed_total`),
	}
}

// resubscribeBackoff is the wait before subscribing again after a failure (doubling, capped).
const (
	resubscribeMin = 200 * time.Millisecond
	resubscribeMax = 5 * time.Second
)

// Start subscribes in the background and starts the handlers. Stop unsubscribes, lets the
// handlers finish the notifications already queued (bounded by Stop's context) and returns.
func (l *Listener) Start(ctx context.Context) error {
	l.notes = make(chan store.EventRef, l.s.Queue)
	return l.Run(ctx, l.run)
}

func (l *Listener) run(ctx context.Context) {
	// Handlers outlive the subscription's context: queued notifications are handled through a
	// drain, each within its own bound.
	work := context.WithoutCancel(ctx)
	for range l.s.Handlers {
		l.inFlight.Add(1)
		go func() {
			defer l.inFlight.Done()
			for ref := range l.notes {
				l.handle(work, ref)
			}
		}()
	}
	reporter := make(chan struct{})
	go func() {
		defer close(reporter)
		l.reportDrops(ctx)
	}()
	defer func() {
		close(l.notes)
		l.inFlight.Wait()
		<-reporter
	}()
	backoff := resubscribeMin
	for ctx.Err() == nil {
		started := time.Now()
		err := l.d.Events.Listen(ctx, l.onSubscribed, l.onNotification)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > resubscribeMax {
			backoff = resubscribeMin
		}
		l.log.Warn().Err(err).Str("event", "filter.subscription_lost").Dur("retry_in", backoff).
			Msg("event notifications lost: subscribing again (the reconciler finds what was missed)")
		if l.OnDown != nil {
			l.OnDown(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, resubscribeMax)
	}
}

func (l *Listener) onSubscribed() {
	n := l.subscribed.Add(1)
	l.log.Info().Str("event", "filter.subscribed").Int64("times", n).Msg("listening for event notifications")
	if l.OnSubscribed != nil {
		l.OnSubscribed(n == 1)
	}
}

func (l *Listener) onNotification(ref store.EventRef, err error) {
	if err != nil {
		l.bad.Inc()
		l.log.Warn().Err(err).Str("event", "filter.bad_notification").Msg("a notification is not an event reference: ignored")
		return
	}
	l.received.Inc()
	select {
	case l.notes <- ref:
	default:
		// A full queue must not block the subscription (Redis would cut a slow subscriber).
		l.dropped.Inc()
		l.drops.add(ref.TenantID, l.d.Now())
		if l.OnOverflow != nil {
			l.OnOverflow(ref.TenantID)
		}
	}
}

// A burst's drop line is written once no notification was dropped for dropReportEvery (the
// report looks four times as often), and a burst that goes on is reported every
// dropReportLong: at most a line a second, whatever the number of drops.
const (
	dropReportEvery = time.Second
	dropReportLong  = 10 * time.Second
)

// dropReport gathers the notifications dropped since its last line.
type dropReport struct {
	mu          sync.Mutex
	n           int       // dropped since the last line
	tenants     []string  // their tenants (the first maxReportTenants)
	first, last time.Time // the first and the last drop since the last line
}

// maxReportTenants bounds the tenants a drop line names.
const maxReportTenants = 8

func (r *dropReport) add(tenant string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		r.first, r.tenants = now, r.tenants[:0]
	}
	r.n++
	r.last = now
	if len(r.tenants) < maxReportTenants && !slices.Contains(r.tenants, tenant) {
		r.tenants = append(r.tenants, tenant)
	}
}

// take returns the drops to report at now and resets them: all of them once the burst is
// over (no drop for dropReportEvery) or when flush, the ones so far every dropReportLong of a
// burst that goes on; n = 0 when there is nothing to report yet.
func (r *dropReport) take(now time.Time, flush bool) (n int, tenants []string, first, last time.Time, over bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return 0, nil, time.Time{}, time.Time{}, false
	}
	over = flush || now.Sub(r.last) >= dropReportEvery
	if !over && now.Sub(r.first) < dropReportLong {
		return 0, nil, time.Time{}, time.Time{}, false
	}
	n, tenants, first, last = r.n, slices.Clone(r.tenants), r.first, r.last
	r.n = 0
	return n, tenants, first, last, over
}

// reportDrops writes the drop lines until ctx ends (then the last one).
func (l *Listener) reportDrops(ctx context.Context) {
	t := time.NewTicker(dropReportEvery / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.logDrops(true)
			return
		case <-t.C:
			l.logDrops(false)
		}
	}
}

func (l *Listener) logDrops(flush bool) {
	n, tenants, first, last, over := l.drops.take(l.d.Now(), flush)
	if n == 0 {
		return
	}
	l.log.Warn().Str("event", "filter.notifications_dropped").Int("dropped", n).Strs("tenants", tenants).
		Time("first", first).Time("last", last).Bool("burst_over", over).Int("queue", l.s.Queue).
		Msg("handlers are behind: notifications dropped; a reconcile pass of their tenants delivers the events")
}

func (l *Listener) handle(ctx context.Context, ref store.EventRef) {
	ctx, cancel := context.WithTimeout(ctx, eventTimeout)
	defer cancel()
	if _, err := l.m.Handle(ctx, ref); err != nil {
		l.log.Warn().Err(err).Str("event", "filter.event_failed").Str("tenant", ref.TenantID).Str("event_id", ref.ID).
			Msg("event not fully delivered: the reconciler delivers the rest")
	}
}

// Subscriptions is how many times the listener subscribed (tests wait for the first).
func (l *Listener) Subscriptions() int64 { return l.subscribed.Load() }
