package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/callctx"
	"plaita/internal/service"
	"plaita/store"
)

// LiveEvent is what the worker publishes on an execution's channel
// (<prefix>execution_events:{<id>}) for the console's live view; its definition lives beside
// the channels (store/live_event.go).
type LiveEvent = store.LiveEvent

// EventQueueSize bounds the events waiting to be published.
const EventQueueSize = 4096

// Observer turns engine events into metrics (step durations, executions by terminal status)
// and publishes them for live views unless publishing is off (PLAITA_EXECUTION_EVENTS_PUBLISH
// exactly 0): an execution's events on its channel when that channel has a subscriber, its status
// changes on its tenant's status channel when that one has (the live executions list), and
// everything while any pattern subscription exists (store.Watchers: checked every
// ListenerRefresh). An execution nobody watches costs no PUBLISH. Publishing is a best-effort
// service.Sender: a slow Redis never slows the step loop; when its queue is full the event is
// dropped and counted.
type Observer struct {
	*service.Sender[liveOffer]
	live     *store.LiveEvents
	publish  bool
	watchers atomic.Pointer[store.Watchers] // who listens now (Refresh); nil: unknown
	refresh  service.Loop
	log      zerolog.Logger
	set      *metrics.Set

	steps        *metrics.PrometheusHistogram
	failed, sent *metrics.Counter
}

// liveOffer is one event and the channels it goes to.
type liveOffer struct {
	ev                LiveEvent
	execution, status bool
}

// NewObserver returns the observer; Event is the engine's OnEvent hook. It is a service:
// Start it before the runs, Stop it after them.
func NewObserver(live *store.LiveEvents, publish bool, set *metrics.Set, log zerolog.Logger) *Observer {
	o := &Observer{
		live: live, publish: publish, log: log, set: set,
		steps:  set.GetOrCreatePrometheusHistogram(`plaita_step_duration_seconds`),
		failed: set.GetOrCreateCounter(`plaita_execution_events_failed_total`),
		sent:   set.GetOrCreateCounter(`plaita_execution_events_published_total`),
	}
	o.Sender = service.NewSender(EventQueueSize, set.GetOrCreateCounter(`plaita_execution_events_dropped_total`), o.send)
	o.refresh = service.Loop{Interval: ListenerRefresh, Once: func(ctx context.Context) { o.Refresh(ctx) }}
	return o
}

// ListenerRefresh is how often the observer asks which executions are watched: a live view
// opened now sees its execution's events from at most this much later.
const ListenerRefresh = time.Second

// Start runs the sender and the refresh of the watched executions.
func (o *Observer) Start(ctx context.Context) error {
	if !o.publish {
		return o.Sender.Start(ctx)
	}
	o.Refresh(ctx)
	if err := o.refresh.Start(ctx); err != nil {
		return err
	}
	return o.Sender.Start(ctx)
}

// Stop stops the refresh and flushes the sender.
func (o *Observer) Stop(ctx context.Context) {
	o.refresh.Stop(ctx)
	o.Sender.Stop(ctx)
}

// Refresh reads who listens. Until the first read succeeds, and while reads fail, every event is
// published (nothing is lost to an unknown answer).
func (o *Observer) Refresh(ctx context.Context) {
	octx, cancel := callctx.Within(ctx, callctx.Publish)
	defer cancel()
	w, err := o.live.Listened(octx)
	if err != nil {
		o.log.Debug().Err(err).Msg("cannot read the live-event subscribers; publishing every event meanwhile")
		o.watchers.Store(nil)
		return
	}
	o.watchers.Store(&w)
}

// watched reports whether an execution's events have a listener (true when unknown).
func (o *Observer) watched(id string) bool {
	w := o.watchers.Load()
	return w == nil || w.Execution(id)
}

// statusWatched reports whether a tenant's status changes have a listener (true when unknown).
func (o *Observer) statusWatched(tenant string) bool {
	w := o.watchers.Load()
	return w == nil || w.Tenant(tenant)
}

// statusChange reports whether an event changes the execution's status: what the live list
// shows. Steps, retries and node starts do not.
func statusChange(e string) bool {
	switch e {
	case "started", "resumed", string(state.Suspended), string(state.Completed), string(state.Error), string(state.Cancelled):
		return true
	}
	return false
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
	if !o.publish {
		return
	}
	offer := liveOffer{execution: o.watched(ev.ExecutionID), status: statusChange(e.Event) && o.statusWatched(ev.TenantID)}
	if !offer.execution && !offer.status {
		return
	}
	offer.ev = LiveEvent{ExecutionID: ev.ExecutionID, TenantID: ev.TenantID, FlowID: ev.FlowID, Status: ev.Status,
		Seq: e.Seq, Time: string(e.Time), Node: e.Node, Event: e.Event, Millis: e.Millis, Detail: e.Detail}
	o.Offer(offer)
}

func (o *Observer) send(ctx context.Context, offer liveOffer) {
	ev := offer.ev
	b, err := json.Marshal(ev)
	if err != nil {
		o.failed.Inc()
		return
	}
	octx, cancel := callctx.Within(ctx, callctx.Publish)
	defer cancel()
	for _, to := range []struct {
		on  bool
		pub func(context.Context, string, string, []byte) error
	}{{offer.execution, o.live.Publish}, {offer.status, o.live.PublishStatus}} {
		if !to.on {
			continue
		}
		if err := to.pub(octx, ev.TenantID, ev.ExecutionID, b); err != nil {
			o.failed.Inc()
			o.log.Debug().Err(err).Str("execution_id", ev.ExecutionID).Msg("live event not published")
			continue
		}
		o.sent.Inc()
	}
}
