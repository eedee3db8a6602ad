package presence

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"plaita/internal/service"
	"plaita/store"
)

// Control is an instance's control channel (store/control.go): it answers a status request
// from the registry presence — role, status, uptime, tasks in flight — and turns a stop into
// the drain SIGTERM starts (OnStop), which the role then carries out as on SIGTERM: a stop
// always drains. A subscription lost with Redis is taken again, so the channel works again once
// Redis does. The role starts it after its registry presence and stops it after its own
// services: it answers while the instance drains.
type Control struct {
	// Retry is the pause before subscribing again after the subscription was lost (default 1s).
	Retry time.Duration

	st     *store.Control
	reg    *Registry
	onStop func()
	log    zerolog.Logger
	event  string
	base   service.Base

	answered atomic.Int64 // requests answered: tests wait on it
	lost     atomic.Bool  // the subscription is down (logged once per outage)
}

// NewControl builds the control channel of the instance reg registers; onStop starts its drain
// (it may be called more than once).
func NewControl(st *store.Control, reg *Registry, onStop func(), log zerolog.Logger) *Control {
	return &Control{Retry: time.Second, st: st, reg: reg, onStop: onStop, event: reg.event,
		log: log.With().Str("instance", reg.info.InstanceID).Logger()}
}

// answerTimeout bounds writing one answer.
const answerTimeout = 5 * time.Second

// Start subscribes to the instance's channel (a failure, or ctx ending first, is returned: the
// role does not start) and then answers requests until Stop. The subscription lives as long as
// the service, not as long as ctx (a role's start-up deadline).
func (c *Control) Start(ctx context.Context) error {
	// An ended context fails before anything starts: below, a subscription that answered as
	// fast would be as ready as ctx.Done(), and select would pick either.
	if err := ctx.Err(); err != nil {
		return err
	}
	id := c.reg.info.InstanceID
	subscribed := make(chan error, 1)
	err := c.base.Run(ctx, func(ctx context.Context) {
		sub, err := c.st.Listen(ctx, id)
		subscribed <- err
		if err == nil {
			c.run(ctx, sub)
		}
	})
	if err != nil {
		return err
	}
	select {
	case err = <-subscribed:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		c.base.Stop(context.WithoutCancel(ctx))
		return err
	}
	c.log.Info().Str("event", c.event+".control_listening").Str("channel", c.st.Channel(id)).Msg("control channel open: plaita ctl status|stop")
	return nil
}

// Stop closes the channel and waits for the request in hand; safe twice and without Start.
func (c *Control) Stop(ctx context.Context) { c.base.Stop(ctx) }

func (c *Control) run(ctx context.Context, sub *store.LiveSubscription) {
	for {
		c.serve(ctx, sub)
		err := sub.Err()
		sub.Close()
		if ctx.Err() != nil {
			return
		}
		if c.lost.CompareAndSwap(false, true) {
			c.log.Warn().Str("event", c.event+".control_lost").Err(err).Msg("control channel lost; subscribing again")
		}
		if sub = c.resubscribe(ctx); sub == nil {
			return
		}
		c.lost.Store(false)
		c.log.Info().Str("event", c.event+".control_recovered").Msg("control channel open again")
	}
}

// resubscribe tries every Retry until it subscribes or ctx ends (nil).
func (c *Control) resubscribe(ctx context.Context) *store.LiveSubscription {
	t := time.NewTimer(c.Retry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if sub, err := c.st.Listen(ctx, c.reg.info.InstanceID); err == nil {
			return sub
		}
		t.Reset(c.Retry)
	}
}

func (c *Control) serve(ctx context.Context, sub *store.LiveSubscription) {
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-sub.C:
			if !ok {
				return
			}
			c.handle(ctx, m.Payload)
		}
	}
}

// handle answers one request; a stop is answered first, then the drain starts.
func (c *Control) handle(ctx context.Context, payload []byte) {
	req, err := store.DecodeControlRequest(payload)
	if err != nil {
		c.log.Warn().Str("event", c.event+".control_bad_request").Err(err).Msg("ignoring a control message that is no request")
		return
	}
	r := c.reply(req)
	if req.Op == store.ControlStop {
		r.Accepted = true
		if r.Draining {
			r.Message = "already " + r.Status
		} else {
			r.Status, r.Draining = StatusDraining, true
			r.Message = "drain started: no new work, in-flight work finishes, then the instance exits (as on SIGTERM)"
		}
		c.log.Info().Str("event", c.event+".stop_requested").Str("request_id", req.ID).Str("from", req.From).
			Bool("graceful", req.Graceful).Msg("stop requested on the control channel: draining")
	}
	if err := c.answer(ctx, r); err != nil {
		c.log.Warn().Str("event", c.event+".control_answer_failed").Str("request_id", req.ID).Err(err).Msg("could not answer a control request")
	}
	c.answered.Add(1)
	if req.Op == store.ControlStop {
		c.onStop()
	}
}

// answer writes r, again after a failure (a connection Redis dropped while it restarted fails
// the first write after it), until answerTimeout.
func (c *Control) answer(ctx context.Context, r store.ControlReply) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerTimeout)
	defer cancel()
	for {
		err := c.st.Answer(actx, r)
		if err == nil {
			return nil
		}
		select {
		case <-actx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// reply is the instance as its registry presence sees it now.
func (c *Control) reply(req store.ControlRequest) store.ControlReply {
	s := c.reg.Snapshot()
	r := store.ControlReply{RequestID: req.ID, InstanceID: s.InstanceID, Role: s.Role, Status: s.Status,
		Draining: s.Status != StatusRunning, Host: s.Host, PID: s.PID, StartedAt: s.StartedAt, Capacity: s.Capacity, At: c.reg.Now().UTC()}
	if s.Capacity > 0 {
		n := s.ActiveTasks
		r.InFlight = &n
	}
	return r
}
