package store

import (
	"fmt"

	"plaita/model"
)

// Failure classes. Every error a store call returns is of exactly one class of package model,
// and model.IsTransient tells the two kinds apart.
//
// Transient (Unavailable): ErrStateSave, ErrStateLoad, ErrStateDelete, ErrRedis — Redis
// answered with an error, the connection failed, or the call ran out of time; nothing may be
// assumed about the write: the caller does not ack and the message is redelivered from the
// last checkpoint — and ErrConflict (another writer kept changing what the call read).
//
// Permanent: ErrNotFound (NotFound); ErrInvalid and the key-space errors keys.ErrBadID and
// keys.ErrBadTenant (Invalid); ErrLeaseHeld and ErrLeaseLost, the engine's (Conflict);
// ErrStateSerialization, ErrStateTooLarge and ErrStateCorrupt (Internal). Retrying the same
// call cannot succeed.
//
// Every other error of the package is typed and matches one of these: a sentinel with its own
// message declared a kind of one (ErrFlowNotFound and ErrScheduleNotFound are ErrNotFound,
// ErrBadSchedule is ErrInvalid …), or an error with details that unwraps to one
// (LeaseHeldError, BadRecordError, CorruptStateError, StateTooLargeError). A Redis failure
// wraps its class and its cause (transient). A new error takes one of these shapes; the
// module's errors test (errors_test.go at the root) checks every sentinel of the package.
var (
	// ErrStateSave: Redis did not confirm a state write (connection, timeout, server error).
	// Transient. Never wraps ErrStateSerialization: an unencodable state never reaches Redis.
	ErrStateSave = model.New(model.Unavailable, "redis_unavailable", "execution state save failed (transient)")
	// ErrStateLoad: Redis did not answer a state read. Transient; a missing state is
	// ErrNotFound and undecodable bytes are ErrStateCorrupt, both permanent.
	ErrStateLoad = model.New(model.Unavailable, "redis_unavailable", "execution state load failed (transient)")
	// ErrStateDelete: Redis did not confirm a delete. Transient.
	ErrStateDelete = model.New(model.Unavailable, "redis_unavailable", "execution state delete failed (transient)")
	// ErrRedis: any other Redis call of this package failed (lease, cancel flag, counters,
	// listing, backfill). Transient.
	ErrRedis = model.New(model.Unavailable, "redis_unavailable", "redis call failed (transient)")
	// ErrNeedsRedis: the call reads or repairs what only Redis keeps (the index backfill and
	// prune, the known tenants' keys), and the storage runs on another driver (local mode).
	// Permanent there.
	ErrNeedsRedis = model.New(model.Conflict, "needs_redis", "this needs Redis: the storage runs on the console's database")

	// ErrLeaseHeld: Acquire found the lease held by another holder (see LeaseHeldError for
	// who). Not transient in the retry-now sense: the holder may be alive and working.
	ErrLeaseHeld = model.New(model.Conflict, "", "execution lease is held")
	// ErrInvalid: the request itself is wrong (unknown counter family, bad node id, nil state,
	// a malformed list cursor), or names something that cannot be written as asked (a conflict
	// with what is stored). Permanent.
	ErrInvalid = model.New(model.Invalid, "", "invalid storage request")
	// ErrConflict: another writer kept changing what a read-modify-write read, or a write made
	// for a state that turned out to be there already. Transient: the same call (or the
	// ordinary path) later can succeed.
	ErrConflict = model.New(model.Unavailable, "redis_unavailable", "changed concurrently (transient)")
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

// transient wraps a Redis failure in its (transient) class, keeping the cause for errors.Is/As.
func transient(class error, what string, err error) error {
	return fmt.Errorf("%w: %s: %w", class, what, err)
}
