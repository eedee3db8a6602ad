package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"
)

// AlertEvent is one JSON document POSTed to PLAITA_ALERT_WEBHOOK.
type AlertEvent struct {
	Event    string         `json:"event"` // dead_letter, zombie_reaped
	Time     time.Time      `json:"time"`
	Instance string         `json:"instance"`
	Fields   map[string]any `json:"fields,omitempty"`
}

// Alerter sends alert events from a bounded queue in the background: a slow or dead endpoint
// never back-pressures consumption — when the queue is full the event is dropped and counted.
// A nil *Alerter (no webhook configured) accepts and ignores events.
type Alerter struct {
	url      string
	redacted string
	instance string
	client   *http.Client
	log      zerolog.Logger
	queue    chan AlertEvent

	sent, failed, dropped *metrics.Counter

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
	cancel   context.CancelFunc
}

// AlertQueueSize bounds the events waiting to be sent.
const AlertQueueSize = 256

// NewAlerter returns nil when webhook is empty. The URL may carry credentials: only its
// redacted form is ever logged.
func NewAlerter(webhook, instance string, set *metrics.Set, log zerolog.Logger) *Alerter {
	if webhook == "" {
		return nil
	}
	redacted := webhook
	if u, err := url.Parse(webhook); err == nil {
		redacted = u.Redacted()
	}
	return &Alerter{
		url: webhook, redacted: redacted, instance: instance, log: log,
		client:  &http.Client{Timeout: 10 * time.Second},
		queue:   make(chan AlertEvent, AlertQueueSize),
		sent:    set.GetOrCreateCounter(`plaita_alerts_sent_total`),
		failed:  set.GetOrCreateCounter(`plaita_alerts_failed_total`),
		dropped: set.GetOrCreateCounter(`plaita_alerts_dropped_total`),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// Send queues an event without ever blocking.
func (a *Alerter) Send(event string, fields map[string]any) {
	if a == nil {
		return
	}
	select {
	case a.queue <- AlertEvent{Event: event, Time: time.Now().UTC(), Instance: a.instance, Fields: fields}:
	default:
		a.dropped.Inc()
	}
}

// Start runs the sender until Stop.
func (a *Alerter) Start(ctx context.Context) {
	if a == nil {
		return
	}
	ctx, a.cancel = context.WithCancel(ctx)
	go func() {
		defer close(a.done)
		for {
			select {
			case ev := <-a.queue:
				a.post(ctx, ev)
			case <-a.stop:
				for { // send what is queued; Stop's deadline cancels ctx if it takes too long
					select {
					case ev := <-a.queue:
						a.post(ctx, ev)
					default:
						return
					}
				}
			case <-ctx.Done():
				return
			}
		}
	}()
}

// Stop sends what is queued until ctx ends, then stops; safe to call twice or without Start.
func (a *Alerter) Stop(ctx context.Context) {
	if a == nil {
		return
	}
	a.stopOnce.Do(func() {
		if a.cancel == nil {
			return
		}
		close(a.stop)
		select {
		case <-a.done:
		case <-ctx.Done():
			a.cancel()
			<-a.done
		}
		a.cancel()
	})
}

func (a *Alerter) post(ctx context.Context, ev AlertEvent) {
	body, err := json.Marshal(ev)
	if err != nil {
		a.failed.Inc()
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		a.failed.Inc()
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
	}
	if err != nil {
		a.failed.Inc()
		a.log.Warn().Str("event", "alert.failed").Str("webhook", a.redacted).Str("alert", ev.Event).
			Str("error", redactErr(err, a.url, a.redacted)).Msg("alert webhook failed")
		return
	}
	a.sent.Inc()
}

// redactErr keeps the webhook's credentials out of an error text (url.Error quotes the URL).
func redactErr(err error, raw, redacted string) string {
	return string(bytes.ReplaceAll([]byte(err.Error()), []byte(raw), []byte(redacted)))
}
