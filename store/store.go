// Package store holds execution storage (Redis with leases and fencing, and an in-memory
// backend that serializes exactly like it) and the Redis key space. The console's SQLite store
// will live here too; it is not built yet.
//
// Every backend classifies failures the same way (defect report 004):
//   - ErrStateSerialization: the state cannot be encoded; permanent, retrying cannot help;
//   - ErrLeaseLost: a fenced write lost its lease; the caller stops at once and writes nothing;
//   - any other error from a backend call is transient: retry from the last checkpoint.
package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"plaita/engine/state"
)

var (
	// ErrStateSerialization: the state holds a value JSON cannot carry (NaN, ±Inf, a cycle,
	// a channel …). Permanent.
	ErrStateSerialization = errors.New("execution state cannot be serialized")
	// ErrStateCorrupt: stored bytes are not a valid execution state. Permanent.
	ErrStateCorrupt = errors.New("execution state is corrupt")
	// ErrNotFound: no state is stored under that execution id.
	ErrNotFound = errors.New("execution not found")
	// ErrLeaseLost: a fenced write found another holder's generation.
	ErrLeaseLost = errors.New("execution lease lost")
	// ErrStateTooLarge: the encoded state is above PLAITA_EXECUTION_STATE_MAX_BYTES; nothing
	// was written. Permanent: the execution only grows.
	ErrStateTooLarge = errors.New("execution state is too large")
)

// DefaultMaxStateBytes is PLAITA_EXECUTION_STATE_MAX_BYTES's default: 16 MiB.
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

func (e *StateTooLargeError) Is(target error) bool { return target == ErrStateTooLarge }

// Storage is what every execution storage backend provides.
type Storage interface {
	Save(ctx context.Context, st *state.Execution) error
	Load(ctx context.Context, executionID string) (*state.Execution, error)
}

// Encode serializes a state the one way every backend does.
func Encode(st *state.Execution) ([]byte, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrStateSerialization, st.ExecutionID, err)
	}
	return b, nil
}

// EncodeBounded is Encode with the state size bound checked on the encoding every save makes
// anyway (max < 1: DefaultMaxStateBytes): a *StateTooLargeError when it is larger.
func EncodeBounded(st *state.Execution, max int) ([]byte, error) {
	b, err := Encode(st)
	if err != nil {
		return nil, err
	}
	if max < 1 {
		max = DefaultMaxStateBytes
	}
	if len(b) > max {
		return nil, &StateTooLargeError{ExecutionID: st.ExecutionID, Size: len(b), Max: max}
	}
	return b, nil
}

// Decode parses stored bytes. Numbers inside input and context come back as float64, exactly
// as from any backend, which is why the engine normalizes node results the same way.
func Decode(b []byte) (*state.Execution, error) {
	var st state.Execution
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateCorrupt, err)
	}
	if st.ExecutionID == "" {
		return nil, fmt.Errorf("%w: no execution_id", ErrStateCorrupt)
	}
	return &st, nil
}
