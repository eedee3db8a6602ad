package state

import (
	"fmt"

	"plaita/model"
)

// Storage failures the executor acts on (README "Architecture"). Every storage backend returns
// errors matching them and the executor decides by them alone; they live with the persisted
// model so that the engine and every backend share them without importing each other. Each is
// a sentinel of one class (package model).
var (
	// ErrNotFound: no state is stored under that execution id. Permanent.
	ErrNotFound = model.New(model.NotFound, "", "execution not found")
	// ErrStateSerialization: the state holds a value JSON cannot carry. Permanent.
	ErrStateSerialization = model.New(model.Internal, "", "execution state cannot be serialized")
	// ErrStateTooLarge: the encoded state is above the state bound; nothing was written.
	// Permanent: the execution only grows.
	ErrStateTooLarge = model.New(model.Internal, "", "execution state is too large")
	// ErrLeaseLost: a fenced write found another holder's generation; the run stops at once.
	// Permanent (Conflict): the execution is another holder's now.
	ErrLeaseLost = model.New(model.Conflict, "", "execution lease lost")
)

// NotFoundError is an ErrNotFound that names the execution. A fresh start meets it on every
// first run (its state does not exist yet), so it is a plain struct whose text is built only
// when read, not a formatted error.
type NotFoundError struct{ ExecutionID string }

func (e *NotFoundError) Error() string { return ErrNotFound.Error() + ": " + e.ExecutionID }

// Unwrap makes a *NotFoundError match ErrNotFound, and gives it that class.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// DefaultMaxStateBytes is the state bound's default (PLAITA_EXECUTION_STATE_MAX_BYTES): 16 MiB.
const DefaultMaxStateBytes = 16 << 20

// StateTooLargeError is an ErrStateTooLarge with the sizes.
type StateTooLargeError struct {
	ExecutionID string
	Size, Max   int
}

func (e *StateTooLargeError) Error() string {
	return fmt.Sprintf("%v: %s encodes to %d bytes, above the %d-byte bound (PLAITA_EXECUTION_STATE_MAX_BYTES)",
		ErrStateTooLarge, e.ExecutionID, e.Size, e.Max)
}

// Unwrap makes a *StateTooLargeError match ErrStateTooLarge, and gives it that class.
func (e *StateTooLargeError) Unwrap() error { return ErrStateTooLarge }
