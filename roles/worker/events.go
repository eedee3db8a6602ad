package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/store/keys"
)

// LiveEvent is what the worker publishes on an execution's channel
// (<prefix>execution_events:{<id>}) for the console's live view.
type LiveEvent struct {
	ExecutionID string       `json:"execution_id"`
	TenantID    string       `json:"tenant_id"`
	FlowID      string       `json:"flow_id"`
	Status      state.Status `json:"status"`
	Seq         int          `json:"seq,omitempty"` // timeline sequence; 0 for node_started
	Time        string       `json:"time"`
	Node        string       `json:"node,omitempty"`
	Event       string       `json:"event"` // node_started, step, retry, suspended, resumed, completed, error, cancelled …
	Millis      int64        `json:"ms,omitempty"`
	Detail      string       `json:"detail,omitempty"`
}

// EventQueueSize bounds the events waiting to be published.
const EventQueueSize = 4096

// Observer turns engine events into metrics (step durations, executions by terminal status)
// and publishes them for live views unless PLAITA_EXECUTION_EVENTS_PUBLISH is exactly 0 (read
// per event). Publishing goes through a bounded queue and a background sender: a slow Redis
// never slows the step loop; when the queue is full the event is dropped and counted.
type Observer struct {
	c    rueidis.Client
	cfg  *config.Config
	root string
	log  zerolog.Logger
	set  *metrics.Set

	queue   chan LiveEvent
	steps   *metrics.PrometheusHistogram
	dropped *metrics.Counter
	failed  *metrics.Counter
	sent    *metrics.Counter

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
	cancel   context.CancelFunc
}

// NewObserver returns the observer; Event is the engine's OnEvent hook.
func NewObserver(c rueidis.Client, cfg *config.Config, root string, set *metrics.Set, log zerolog.Logger) *Observer {
	return &Observer{
		c: c, cfg: cfg, root: root, log: log, set: set,
		queue:   make(chan LiveEvent, EventQueueSize),
		steps:   set.GetOrCreatePrometheusHistogram(`plaita_step_duration_seconds`),
		dropped: set.GetOrCreateCounter(`plaita_execution_events_dropped_total`),
		failed:  set.GetOrCreateCounter(`plaita_execution_events_failed_total`),
		sent:    set.GetOrCreateCounter(`plaita_execution_events_published_total`),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// Event records metrics and queues the event for publishing; it never blocks.
func (o *Observer) Event(ev engine.Event) {
	e := ev.Entry
	switch e.Event {
	case "step", "retry":
		o.steps.Update(float64(e.Millis) / 1000)
	}
	if ev.Status.Terminal() && e.Event == string(ev.Status) {
		o.set.GetOrCreateCounter(fmt.Sprintf(`plaita_executions_total{status=%q}`, ev.Status)).Inc()
	}
	if o.cfg != nil && !config.ExecutionEventsPublish.In(o.cfg) {
		return
	}
	select {
	case o.queue <- LiveEvent{ExecutionID: ev.ExecutionID, TenantID: ev.TenantID, FlowID: ev.FlowID, Status: ev.Status,
		Seq: e.Seq, Time: string(e.Time), Node: e.Node, Event: e.Event, Millis: e.Millis, Detail: e.Detail}:
	default:
		o.dropped.Inc()
	}
}

// Start runs the publisher until Stop.
func (o *Observer) Start(ctx context.Context) {
	ctx, o.cancel = context.WithCancel(ctx)
	go func() {
		defer close(o.done)
		for {
			select {
			case ev := <-o.queue:
				o.publish(ctx, ev)
			case <-o.stop:
				for {
					select {
					case ev := <-o.queue:
						o.publish(ctx, ev)
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

// Stop publishes what is queued until ctx ends; safe to call twice or without Start.
func (o *Observer) Stop(ctx context.Context) {
	o.stopOnce.Do(func() {
		if o.cancel == nil {
			return
		}
		close(o.stop)
		select {
		case <-o.done:
		case <-ctx.Done():
			o.cancel()
			<-o.done
		}
		o.cancel()
	})
}

func (o *Observer) publish(ctx context.Context, ev LiveEvent) {
	sp, err := keys.For(o.root, ev.TenantID)
	if err != nil {
		o.failed.Inc()
		return
	}
	channel, err := sp.ExecutionEvents(ev.ExecutionID)
	if err != nil {
		o.failed.Inc()
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		o.failed.Inc()
		return
	}
	octx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := o.c.Do(octx, o.c.B().Publish().Channel(channel).Message(string(b)).Build()).Error(); err != nil {
		o.failed.Inc()
		o.log.Debug().Err(err).Str("execution_id", ev.ExecutionID).Msg("live event not published")
		return
	}
	o.sent.Inc()
}
