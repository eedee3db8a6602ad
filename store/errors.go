package store

import (
	"errors"
	"fmt"

	"plaita/store/keys"
)

// Failure classes. Every error a store call returns matches exactly one class, and one helper
// tells the two kinds apart: IsTransient.
//
// Transient classes (IsTransient is true): ErrStateSave, ErrStateLoad, ErrStateDelete, ErrRedis
// — Redis answered with an error, the connection failed, or the call ran out of time; nothing
// may be assumed about the write: the caller does not ack and the message is redelivered from
// the last checkpoint — and ErrConflict (another writer kept changing what the call read).
//
// Permanent classes (IsTransient is false): ErrStateSerialization, ErrStateTooLarge,
// ErrNotFound, ErrLeaseLost (the engine's, package state), ErrStateCorrupt, ErrLeaseHeld,
// ErrInvalid and the key-space errors keys.ErrBadID and keys.ErrBadTenant. Retrying the same
// call cannot succeed.
//
// Every other error of the package is typed and unwraps to exactly one class: a sentinel with
// its own message (classed: ErrFlowNotFound and ErrScheduleNotFound are ErrNotFound,
// ErrBadSchedule is ErrInvalid …), or an error with details (LeaseHeldError, BadRecordError,
// CorruptStateError, StateTooLargeError). A Redis failure wraps its class and its cause
// (transient). A new error takes one of these shapes; store/errors_test.go checks every
// sentinel of the package against the classes.
var (
	// ErrStateSave: Redis did not confirm a state write (connection, timeout, server error).
	// Transient. Never wraps ErrStateSerialization: an unencodable state never reaches Redis.
	ErrStateSave = errors.New("execution state save failed (transient)")
	// ErrStateLoad: Redis did not answer a state read. Transient; a missing state is
	// ErrNotFound and undecodable bytes are ErrStateCorrupt, both permanent.
	ErrStateLoad = errors.New("execution state load failed (transient)")
	// ErrStateDelete: Redis did not confirm a delete. Transient.
	ErrStateDelete = errors.New("execution state delete failed (transient)")
	// ErrRedis: any other Redis call of this package failed (lease, cancel flag, counters,
	// listing, backfill). Transient.
	ErrRedis = errors.New("redis call failed (transient)")

	// ErrLeaseHeld: Acquire found the lease held by another holder (see LeaseHeldError for
	// who). Not transient in the retry-now sense: the holder may be alive and working.
	ErrLeaseHeld = errors.New("execution lease is held")
	// ErrInvalid: the request itself is wrong (unknown counter family, bad node id, nil state,
	// a malformed list cursor), or names something that cannot be written as asked (a conflict
	// with what is stored). Permanent.
	ErrInvalid = errors.New("invalid storage request")
	// ErrConflict: another writer kept changing what a read-modify-write read, or a write made
	// for a state that turned out to be there already. Transient: the same call (or the
	// ordinary path) later can succeed.
	ErrConflict = errors.New("changed concurrently (transient)")
)

// classError is a sentinel of its own, with its own message, that belongs to one class:
// errors.Is holds for the sentinel and for its class.
type classError struct {
	msg   string
	class error
}

// classed declares a sentinel of class.
func classed(msg string, class error) error { return &classError{msg: msg, class: class} }

func (e *classError) Error() string { return e.msg }
func (e *classError) Unwrap() error { return e.class }

// LeaseHeldError says who holds the lease an Acquire could not take. It matches ErrLeaseHeld.
type LeaseHeldError struct {
	ExecutionID string
	Holder      string // the holder instance written into the lease ("" when unreadable)
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%v: execution %s is held by %q", ErrLeaseHeld, e.ExecutionID, e.Holder)
}

// Unwrap makes errors.Is(err, ErrLeaseHeld) hold.
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// permanentClasses and transientClasses are the classes (see the top of this file).
var (
	permanentClasses = []error{ErrStateSerialization, ErrStateTooLarge, ErrNotFound, ErrLeaseLost, ErrStateCorrupt, ErrLeaseHeld,
		ErrInvalid, keys.ErrBadID, keys.ErrBadTenant}
	transientClasses = []error{ErrStateSave, ErrStateLoad, ErrStateDelete, ErrRedis, ErrConflict}
)

// IsTransient reports whether err is worth retrying from the last checkpoint: false for nil
// and for an error of a permanent class; true for the transient classes and — as the package
// contract says — for any other backend error (a connection error, a deadline).
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	for _, p := range permanentClasses {
		if errors.Is(err, p) {
			return false
		}
	}
	return true
}

// transient wraps a Redis failure in its (transient) class, keeping the cause for errors.Is/As.
func transient(class error, what string, err error) error {
	return fmt.Errorf("%w: %s: %w", class, what, err)
}
