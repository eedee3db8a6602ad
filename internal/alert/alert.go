// Package alert sends operator alerts (a dead-lettered message, a reaped zombie …) to the
// webhook of PLAITA_ALERT_WEBHOOK, best effort and in the background: an alert must never slow
// or stop the work it reports on.
package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/service"
)

// Event is one JSON document POSTed to the webhook.
type Event struct {
	Event    string         `json:"event"` // dead_letter, zombie_reaped …
	Time     time.Time      `json:"time"`
	Instance string         `json:"instance"`
	Fields   map[string]any `json:"fields,omitempty"`
}

// QueueSize bounds the events waiting to be sent.
const QueueSize = 256

// PostTimeout bounds one POST: a webhook that accepts the connection and never answers must
// not hold the queue for longer.
const PostTimeout = 10 * time.Second

// Alerter sends events from a bounded queue in the background: a slow or dead endpoint never
// back-pressures the caller — when the queue is full the event is dropped and counted
// (plaita_alerts_dropped_total; sent and failed have their counters too). A nil *Alerter (no
// webhook configured) accepts and ignores events, and its Start and Stop do nothing.
type Alerter struct {
	sender   *service.Sender[Event]
	url      string
	redacted string
	instance string
	client   *http.Client
	log      zerolog.Logger

	sent, failed *metrics.Counter
	// abandoned: Stop's deadline passed with events still queued; logged once.
	abandoned atomic.Bool
}

// New returns nil when webhook is empty. The URL may carry credentials: only its redacted
// form (see Redact) is ever logged.
func New(webhook, instance string, set *metrics.Set, log zerolog.Logger) *Alerter {
	if webhook == "" {
		return nil
	}
	a := &Alerter{
		url: webhook, redacted: Redact(webhook), instance: instance, log: log,
		client: &http.Client{Timeout: PostTimeout},
		sent:   set.GetOrCreateCounter(`plaita_alerts_sent_total`),
		failed: set.GetOrCreateCounter(`plaita_alerts_failed_total`),
	}
	a.sender = service.NewSender(QueueSize, set.GetOrCreateCounter(`plaita_alerts_dropped_total`), a.post)
	return a
}

// Send queues an event without ever blocking.
func (a *Alerter) Send(event string, fields map[string]any) {
	if a == nil {
		return
	}
	a.sender.Offer(Event{Event: event, Time: time.Now().UTC(), Instance: a.instance, Fields: fields})
}

// Start runs the sender until Stop; its context ends only at Stop, so alerts raised while a
// role drains still go out.
func (a *Alerter) Start(ctx context.Context) error {
	if a == nil {
		return nil
	}
	if err := a.sender.Start(ctx); err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	return nil
}

// Stop sends what is queued until ctx ends, then stops; safe to call twice or without Start.
func (a *Alerter) Stop(ctx context.Context) {
	if a == nil {
		return
	}
	a.sender.Stop(ctx)
}

func (a *Alerter) post(ctx context.Context, ev Event) {
	if ctx.Err() != nil {
		// Stop gave up: what is left is counted, not sent, and not logged one line each.
		a.failed.Inc()
		if a.abandoned.CompareAndSwap(false, true) {
			a.log.Warn().Str("event", "alert.abandoned").Str("webhook", a.redacted).
				Msg("alerts still queued when the stop deadline passed were not sent")
		}
		return
	}
	err := a.do(ctx, ev)
	if err != nil {
		a.failed.Inc()
		a.log.Warn().Str("event", "alert.failed").Str("webhook", a.redacted).Str("alert", ev.Event).
			Str("error", a.errorText(err)).Msg("alert webhook failed")
		return
	}
	a.sent.Inc()
}

// Redact is the form of a webhook URL that may be logged: scheme, user and host. A password
// is masked, and a path or query is replaced as a whole, because many webhooks carry their
// token there (https://hooks.example/services/T0/B0/<token>, ?token=…). A URL that does not
// parse is not shown at all.
func Redact(webhook string) string {
	u, err := url.Parse(webhook)
	if err != nil || u.Host == "" {
		return "(unparseable webhook URL)"
	}
	hidden := (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != ""
	if hidden {
		u.Path, u.RawPath, u.RawQuery, u.Fragment, u.RawFragment = "/xxxxx", "", "", "", ""
	}
	return u.Redacted()
}

// errorText is err without the webhook URL in it: the HTTP client's errors quote the URL
// (with the password masked but the path and query as they are).
func (a *Alerter) errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + " " + a.redacted + ": " + a.redact(ue.Err.Error())
	}
	return a.redact(err.Error())
}

func (a *Alerter) do(ctx context.Context, ev Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode alert: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// redact replaces the raw webhook URL wherever an error text still quotes it.
func (a *Alerter) redact(s string) string {
	return strings.ReplaceAll(s, a.url, a.redacted)
}
