package model

import "errors"

// Class is what kind of failure an error is. A front end maps it with no other knowledge: the
// console to an HTTP status, the CLI to an exit status; IsTransient reads it to decide whether
// the same call may succeed later.
type Class int

const (
	// Unknown is the class of an error nothing classified (a connection error, a deadline). It
	// counts as transient: a backend error of no class may pass on a retry. HTTP 500.
	Unknown Class = iota
	// Invalid: the request itself is wrong (bad input, an invalid flow, a malformed cursor, a
	// key or id that cannot be written). Permanent. HTTP 400; a refused CLI command exits 2.
	Invalid
	// NotFound: what it names does not exist. Permanent. HTTP 404.
	NotFound
	// Conflict: it cannot be done in the state things are in: a name is taken, a row or an
	// execution is not in the state the call requires, another holder has the execution's
	// lease. Permanent. HTTP 409.
	Conflict
	// Limited: a limit refuses it for now (a tenant at its running quota, a locked account);
	// the same request may pass later. Transient. HTTP 429.
	Limited
	// Unavailable: what it needs did not answer or failed (Redis, the console database, an
	// instance on its control channel), or kept changing under it; the same call later can
	// succeed. Transient. HTTP 503.
	Unavailable
	// Stale: the caller's copy is out of date (a draft saved by someone else since the revision
	// the caller started from). Permanent. HTTP 412.
	Stale
	// Unauthenticated: a credential does not authenticate (a wrong password, an unknown,
	// expired or revoked session or key). Permanent. HTTP 401.
	Unauthenticated
	// Internal: stored data or the stores themselves cannot serve it and no retry helps: a
	// corrupt or unencodable execution state, a state above its bound, a database schema this
	// binary cannot use. Permanent. HTTP 500.
	Internal
)

// classNames are the classes' codes, as the console's API answers them.
var classNames = [...]string{
	Unknown: "unknown", Invalid: "invalid_request", NotFound: "not_found", Conflict: "conflict", Limited: "limited",
	Unavailable: "unavailable", Stale: "stale", Unauthenticated: "unauthenticated", Internal: "internal",
}

// String is the class's name: the code of an error that has none of its own.
func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return "unknown"
	}
	return classNames[c]
}

// Transient reports whether an error of the class may pass when the same call is made again
// later: Unavailable, Limited, and Unknown (a backend error of no class).
func (c Class) Transient() bool {
	switch c {
	case Unknown, Unavailable, Limited:
		return true
	}
	return false
}

// Classed is an error that says its class and its code: *Error, and the detail errors that
// decide their own (a control plane refusal carries both as fields). ClassOf and CodeOf read
// the first one an error wraps.
type Classed interface {
	error
	ErrorClass() Class
	// ErrorCode names the error for programs; "" leaves it the class's name.
	ErrorCode() string
}

// Error is a sentinel of one class: errors.Is holds for the sentinel itself and for every
// sentinel it was declared a kind of (Kind), so a caller may test the precise error or the
// broader one. Declare sentinels with New and Kind, as package-level variables; an error with
// details (who holds a lease, the sizes of a state) is a type of its own that unwraps to one.
type Error struct {
	Class Class
	// Code names the error for programs (an API problem's code); "" is the code of the
	// sentinel it is a kind of, or its class's name.
	Code string
	msg  string
	of   *Error // the broader sentinel (nil for a root)
}

// New declares a sentinel of class with its own message and code ("" for the class's name).
func New(class Class, code, msg string) *Error { return &Error{Class: class, Code: code, msg: msg} }

// Kind declares a sentinel that is a kind of e: it has e's class, matches e (errors.Is), and
// has code, or e's code when code is "".
func (e *Error) Kind(code, msg string) *Error {
	return &Error{Class: e.Class, Code: code, msg: msg, of: e}
}

func (e *Error) Error() string { return e.msg }

// Unwrap is the sentinel e is a kind of (nil for a root): errors.Is(e, broader) holds.
func (e *Error) Unwrap() error {
	if e.of == nil {
		return nil
	}
	return e.of
}

// ErrorClass is e's class.
func (e *Error) ErrorClass() Class { return e.Class }

// ErrorCode is e's code, or that of the nearest sentinel it is a kind of that has one.
func (e *Error) ErrorCode() string {
	for s := e; s != nil; s = s.of {
		if s.Code != "" {
			return s.Code
		}
	}
	return ""
}

// ClassOf is the class of err: that of the first Classed error it wraps (errors.As order,
// the outermost first), Unknown when none (or err is nil).
func ClassOf(err error) Class {
	var c Classed
	if errors.As(err, &c) {
		return c.ErrorClass()
	}
	return Unknown
}

// CodeOf is the code of err: that of the first Classed error it wraps, or that error's class
// name when it has no code of its own; "" when err wraps no Classed error.
func CodeOf(err error) string {
	var c Classed
	if !errors.As(err, &c) {
		return ""
	}
	if code := c.ErrorCode(); code != "" {
		return code
	}
	return c.ErrorClass().String()
}

// IsTransient reports whether err is worth retrying (from the last checkpoint, later, on
// another connection): false for nil and for an error of a permanent class, true for the
// transient classes and for an error of no class — a backend that failed in a way nothing
// classified (a connection error, a deadline).
func IsTransient(err error) bool {
	return err != nil && ClassOf(err).Transient()
}
