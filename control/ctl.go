package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"plaita/store"
)

// The instances' control channel (store/control.go, internal/presence/control.go): `plaita ctl
// status|stop INSTANCE` and the console's cluster routes ask one role instance for its status or
// for a drain. A stop always means a drain, as SIGTERM does: the instance stops taking work,
// finishes (or, past its drain timeout, leaves for redelivery) what it runs, and exits 0.

// DefaultAnswerWait bounds the wait for an instance's answer.
const DefaultAnswerWait = 5 * time.Second

// goneEvery is how often a stop that waits for the instance to go re-reads the registry.
const goneEvery = 200 * time.Millisecond

// InstanceRequest is one request to an instance.
type InstanceRequest struct {
	ID   string        // the instance id (PLAITA_INSTANCE_ID), as `plaita status` lists it
	Wait time.Duration // for its answer (≤ 0: DefaultAnswerWait)
	From string        // who asks, for the instance's log ("ctl@host", "console:admin")
	// Graceful is `stop --graceful` as operators' scripts write it: accepted; every stop drains
	// (docs/operations.md).
	Graceful bool
	// GoneWait, for a stop: after the answer, wait up to this long for the instance to leave the
	// registry (0: do not wait).
	GoneWait time.Duration
}

// InstanceAnswer is an instance's answer, as the asker reads it.
type InstanceAnswer struct {
	InstanceID string        `json:"instance_id"`
	Role       string        `json:"role"`
	Status     string        `json:"status"`
	Draining   bool          `json:"draining"`
	Host       string        `json:"host"`
	PID        int           `json:"pid"`
	StartedAt  time.Time     `json:"started_at"`
	Uptime     time.Duration `json:"uptime_ns"`
	// InFlight is the number of tasks the instance runs; absent for a role that runs none.
	InFlight *int `json:"in_flight,omitempty"`
	Capacity int  `json:"capacity,omitempty"`
	// DrainRequested: a stop was accepted; the instance drains (or already did).
	DrainRequested bool          `json:"drain_requested,omitempty"`
	Message        string        `json:"message,omitempty"`
	AnsweredIn     time.Duration `json:"answered_in_ns"`
	// Deregistered: the stop waited (GoneWait) and the instance has left the registry.
	Deregistered bool `json:"deregistered,omitempty"`
}

// InstanceStatus asks an instance for its status.
func (p *Plane) InstanceStatus(ctx context.Context, req InstanceRequest) (InstanceAnswer, error) {
	return p.ask(ctx, req, store.ControlStatus)
}

// StopInstance asks an instance to drain and exit, as SIGTERM does; with GoneWait it then waits
// for the instance to deregister.
func (p *Plane) StopInstance(ctx context.Context, req InstanceRequest) (InstanceAnswer, error) {
	a, err := p.ask(ctx, req, store.ControlStop)
	if err != nil || req.GoneWait <= 0 {
		return a, err
	}
	deadline := p.now().Add(req.GoneWait)
	for {
		_, ok, err := p.d.Registry.Get(ctx, req.ID)
		if err != nil {
			return a, err
		}
		if !ok {
			a.Deregistered = true
			return a, nil
		}
		if p.now().After(deadline) {
			return a, refuse(Unavailable, "instance_still_registered", nil,
				"instance %q accepted the drain but is still registered after %s (its drain may take up to its PLAITA_WORKER_DRAIN_TIMEOUT)",
				req.ID, RoundDuration(req.GoneWait))
		}
		select {
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(goneEvery):
		}
	}
}

func (p *Plane) ask(ctx context.Context, req InstanceRequest, op string) (InstanceAnswer, error) {
	if req.ID == "" {
		return InstanceAnswer{}, refuse(Invalid, "invalid_instance", nil, "no instance id: `plaita status` lists the live instances")
	}
	if _, ok, err := p.d.Registry.Get(ctx, req.ID); err != nil {
		return InstanceAnswer{}, err
	} else if !ok {
		return InstanceAnswer{}, refuse(NotFound, "instance_not_found", nil,
			"no instance %q in the registry: it is not running, or its id is another (`plaita status` lists the live instances)", req.ID)
	}
	wait := req.Wait
	if wait <= 0 {
		wait = DefaultAnswerWait
	}
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand does not fail (Go 1.24+)
	r := store.ControlRequest{ID: "req_" + hex.EncodeToString(b[:]), Op: op, Graceful: req.Graceful, From: req.From, At: p.now().UTC()}
	asked := p.now()
	heard, err := p.d.Control.Ask(ctx, req.ID, r)
	if err != nil {
		return InstanceAnswer{}, err
	}
	reply, ok, err := p.d.Control.Await(ctx, r.ID, wait)
	if err != nil {
		return InstanceAnswer{}, err
	}
	if !ok {
		why := ""
		if heard == 0 {
			why = ": nothing listens on its control channel (a build without one, or it has just stopped)"
		}
		return InstanceAnswer{}, refuse(Unavailable, "instance_no_answer", nil, "instance %q did not answer within %s%s",
			req.ID, RoundDuration(wait), why)
	}
	return InstanceAnswer{InstanceID: reply.InstanceID, Role: reply.Role, Status: reply.Status, Draining: reply.Draining,
		Host: reply.Host, PID: reply.PID, StartedAt: reply.StartedAt, Uptime: max(reply.At.Sub(reply.StartedAt), 0),
		InFlight: reply.InFlight, Capacity: reply.Capacity, DrainRequested: reply.Accepted, Message: reply.Message,
		AnsweredIn: p.now().Sub(asked)}, nil
}
