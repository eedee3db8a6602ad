package filter

import (
	"context"
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

	subscribed atomic.Int64
	notes      chan store.EventRef
	inFlight   sync.WaitGroup

	received, dropped, bad *metrics.Counter
	log                    zerolog.Logger
}

// NewListener builds the listener over the matcher.
func NewListener(d Deps, s Settings, m *Matcher) *Listener {
	s = s.withDefaults()
	if d.Metrics == nil {
		d.Metrics = metrics.NewSet()
	}
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
	defer func() {
		close(l.notes)
		l.inFlight.Wait()
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
		l.log.Warn().Str("event", "filter.notification_dropped").Str("tenant", ref.TenantID).Str("event_id", ref.ID).
			Msg("handlers are behind: notification dropped, the reconciler delivers the event")
	}
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
