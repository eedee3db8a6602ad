package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"plaita/internal/callctx"
	"plaita/store/keys"
)

// The instances' control channel (store/keys: <root>:registry:control:<id>): every role
// instance listens on its own channel (internal/presence/control.go); `plaita ctl` and the
// console's drain route publish a ControlRequest there and wait for the ControlReply the
// instance pushes to the request's reply List (<root>:registry:reply:<request id>, a TTL of
// ReplyTTL, read with BRPOP). A List, not a reply channel: an answer pushed before the asker
// blocks on it is not lost.
//
// Round trips: Ask 1 (PUBLISH), Await 1 (BRPOP, blocking up to its timeout), Answer 1 (LPUSH and
// PEXPIRE pipelined), Listen 1 (SUBSCRIBE on a connection of its own).

// Control operations.
const (
	ControlStatus = "status"
	ControlStop   = "stop"
)

// ReplyTTL bounds how long an answer nobody read stays in Redis.
const ReplyTTL = time.Minute

// ControlRequest is one request on an instance's control channel. Fields are only ever added.
type ControlRequest struct {
	ID string `json:"id"` // names the reply List
	Op string `json:"op"` // status | stop
	// Graceful is `stop --graceful` as operators' scripts write it: accepted and recorded; a stop
	// always drains, as SIGTERM does.
	Graceful bool      `json:"graceful,omitempty"`
	From     string    `json:"from,omitempty"` // who asked: "ctl@host", "console:<login>"
	At       time.Time `json:"at"`
}

// ControlReply is an instance's answer. Fields are only ever added.
type ControlReply struct {
	RequestID  string    `json:"request_id"`
	InstanceID string    `json:"instance_id"`
	Role       string    `json:"role"`
	Status     string    `json:"status"` // running | draining | stopping
	Draining   bool      `json:"draining"`
	Host       string    `json:"host"`
	PID        int       `json:"pid"`
	StartedAt  time.Time `json:"started_at"`
	// InFlight is the number of tasks the instance runs now; nil for a role that runs none.
	InFlight *int `json:"in_flight,omitempty"`
	Capacity int  `json:"capacity,omitempty"`
	// Accepted: a stop's drain has begun (or was already under way).
	Accepted bool      `json:"accepted,omitempty"`
	Message  string    `json:"message,omitempty"`
	At       time.Time `json:"at"` // the instance's clock when it answered
}

// Control is the control channels of one deployment (one client, one key root).
type Control struct {
	e  Ephemeral
	sp keys.Space
}

// NewControl returns the control channels over e under key root root ("" is
// keys.DefaultRoot).
func NewControl(e Ephemeral, root string) *Control {
	return &Control{e: e, sp: keys.MustFor(root, "")}
}

// Channel is instance id's control channel.
func (c *Control) Channel(id string) string { return c.sp.RegistryControl(id) }

// Ask publishes req on instance id's channel and returns how many subscribers it reached (on a
// Redis Cluster: on the node that took the PUBLISH only — 0 there proves nothing).
func (c *Control) Ask(ctx context.Context, id string, req ControlRequest) (int64, error) {
	if id == "" || keys.ValidID(req.ID) != nil {
		return 0, fmt.Errorf("%w: control request without instance or with request id %q", ErrInvalid, req.ID)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, fmt.Errorf("%w: control request: %w", ErrInvalid, err)
	}
	n, err := c.e.Publish(ctx, c.Channel(id), body)
	if err != nil {
		return 0, fmt.Errorf("control: %w", err)
	}
	return n, nil
}

// Await waits up to wait for the answer to request id. No answer in time is (zero, false, nil).
// A reply that does not decode is ErrBadRecord.
func (c *Control) Await(ctx context.Context, id string, wait time.Duration) (ControlReply, bool, error) {
	key := c.sp.RegistryReply(id)
	// The wait blocks on the server; the call's own deadline is past it.
	ctx, cancel := callctx.Within(ctx, wait+callctx.BlockingSlack)
	defer cancel()
	v, ok, err := c.e.Pop(ctx, key, wait)
	if err != nil || !ok {
		return ControlReply{}, false, err
	}
	var r ControlReply
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return ControlReply{}, false, &BadRecordError{ID: id, Err: err}
	}
	return r, true, nil
}

// Answer pushes r to the reply List of its request, which expires after ReplyTTL.
func (c *Control) Answer(ctx context.Context, r ControlReply) error {
	if r.RequestID == "" {
		return fmt.Errorf("%w: control reply without request id", ErrInvalid)
	}
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: control reply: %w", ErrInvalid, err)
	}
	key := c.sp.RegistryReply(r.RequestID)
	if err := c.e.Push(ctx, key, string(body), ReplyTTL); err != nil {
		return fmt.Errorf("control: answer: %w", err)
	}
	return nil
}

// Listen subscribes to instance id's control channel; it returns once Redis confirmed the
// subscription. Each message's Payload is a ControlRequest (DecodeControlRequest).
func (c *Control) Listen(ctx context.Context, id string) (*LiveSubscription, error) {
	return c.e.Subscribe(ctx, c.Channel(id))
}

// DecodeControlRequest reads one message of a control channel.
func DecodeControlRequest(payload []byte) (ControlRequest, error) {
	var r ControlRequest
	if err := json.Unmarshal(payload, &r); err != nil {
		return r, fmt.Errorf("%w: control request: %w", ErrInvalid, err)
	}
	if keys.ValidID(r.ID) != nil || (r.Op != ControlStatus && r.Op != ControlStop) {
		return r, fmt.Errorf("%w: control request with id %q and op %q (status or stop)", ErrInvalid, r.ID, r.Op)
	}
	return r, nil
}
