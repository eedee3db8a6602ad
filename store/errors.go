package store

import (
	"errors"
	"fmt"

	"plaita/store/keys"
)

// Failure classes of the Redis backend, beside the ones every backend shares (store.go).
//
// Transient (IsTransient is true): Redis answered with an error, the connection failed, or the
// call ran out of time. Nothing may be assumed about the write: the caller does not ack and the
// message is redelivered from the last checkpoint.
//
// Permanent (IsTransient is false): ErrStateSerialization, ErrStateCorrupt, ErrNotFound,
// ErrLeaseLost, ErrLeaseHeld, ErrInvalid and the key-space errors (keys.ErrBadID,
// keys.ErrBadTenant). Retrying the same call cannot succeed.
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
	// a malformed list cursor). Permanent.
	ErrInvalid = errors.New("invalid storage request")
)

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

// permanent lists every class that retrying cannot fix.
var permanent = []error{ErrStateSerialization, ErrStateTooLarge, ErrStateCorrupt, ErrNotFound, ErrLeaseLost, ErrLeaseHeld, ErrBadRecord,
	ErrInvalid, keys.ErrBadID, keys.ErrBadTenant, ErrReservedFlowKey, ErrCorruptChanged}

// IsTransient reports whether err is worth retrying from the last checkpoint: true for
// ErrStateSave, ErrStateLoad, ErrStateDelete, ErrRedis, and — as the package contract says —
// for any backend error that is not one of the permanent classes; false for nil and for
// ErrStateSerialization, ErrStateCorrupt, ErrNotFound, ErrLeaseLost, ErrLeaseHeld, ErrInvalid
// and invalid ids or tenants.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	for _, p := range permanent {
		if errors.Is(err, p) {
			return false
		}
	}
	return true
}

// transient wraps a Redis failure in its class, keeping the cause for errors.Is/As.
func transient(class error, what string, err error) error {
	return fmt.Errorf("%w: %s: %w", class, what, err)
}
