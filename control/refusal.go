package control

import (
	"errors"
	"fmt"
	"time"

	"plaita/engine/state"
	"plaita/model"
)

// Class is what kind of refusal a Refusal is: the one error class of package model, which every
// front end maps the same way (the CLI to an exit status, the console to an HTTP status).
type Class = model.Class

// The classes a refusal takes (model/errors.go says what each means and maps to).
const (
	// Invalid: the request itself is wrong (bad input, an invalid flow): exit 2, HTTP 400.
	Invalid = model.Invalid
	// NotFound: what it names does not exist: exit 1, HTTP 404.
	NotFound = model.NotFound
	// Conflict: it cannot be done in the state things are in (a terminal execution, a resume the
	// worker would refuse, a published version that differs): exit 1, HTTP 409.
	Conflict = model.Conflict
	// Limited: a limit refuses it for now (a tenant at its running quota); the same request
	// may pass later (RetryAfter): exit 1, HTTP 429.
	Limited = model.Limited
	// Unavailable: what it needs did not answer (an instance on its control channel): exit 1,
	// HTTP 503.
	Unavailable = model.Unavailable
	// Stale: the caller's copy is out of date (a draft saved by someone else since the
	// revision the caller started from): exit 1, HTTP 412.
	Stale = model.Stale
)

// Refusal is an operation the control plane turned down: what was refused and why, what is
// accepted instead, and how to unblock it. Front ends render it; none builds its own wording.
type Refusal struct {
	Class Class `json:"-"`
	// Code names the refusal for programs: "invalid_flow", "resume_refused", "retry_budget" …
	Code    string `json:"code"`
	Message string `json:"message"`
	// Detail are lines that explain the message (the match a wait uses, the counters).
	Detail []string `json:"detail,omitempty"`
	// Accepted is what would be accepted instead (resume hints and notes).
	Accepted []Hint `json:"accepted,omitempty"`
	// Unblock says how to get past it, when something can.
	Unblock string `json:"unblock,omitempty"`
	// Fields carry structured detail (counters and limits of a retry budget, the problems of an
	// invalid flow).
	Fields map[string]any `json:"fields,omitempty"`
	// Execution is the execution refused, when there is one (front ends describe its status).
	Execution *state.Execution `json:"-"`
	// Err is the cause, for errors.Is (engine.ErrInvalidResume, store.ErrVersionConflict …).
	Err error `json:"-"`
	// RetryAfter suggests when to try a Limited request again.
	RetryAfter time.Duration `json:"-"`
}

func (r *Refusal) Error() string { return r.Message }
func (r *Refusal) Unwrap() error { return r.Err }

// ErrorClass is the refusal's class, whatever its cause's (model.ClassOf reads it).
func (r *Refusal) ErrorClass() model.Class { return r.Class }

// ErrorCode is the refusal's code (model.CodeOf reads it).
func (r *Refusal) ErrorCode() string { return r.Code }

func refuse(class Class, code string, err error, format string, a ...any) *Refusal {
	return &Refusal{Class: class, Code: code, Err: err, Message: fmt.Sprintf(format, a...)}
}

// AsRefusal finds the refusal in err (nil when err is not one).
func AsRefusal(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}
