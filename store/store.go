// Package store holds plaita's state behind typed methods — execution states (with leases and
// fencing, and an in-memory backend that serializes exactly like them), published flows and
// versions, wake-up records (subscriptions, approvals), the event bus, schedules, the tenant
// gates, listings, registry records, the instances' control channels and live events — each
// as its rules written once over a driver:
//
//	X_driver.go   the driver interface (what is stored, one atomic step per method)
//	X_redis.go    the cluster's driver: every Redis key and script (only store and queue build
//	              Redis commands); ephemeral.go holds Redis's pub/sub, mailboxes and TTL records
//	hub.go        the same in the process, for local mode
//
// store/sqlite holds the console's database (tenants, users, audit, drafts) and local mode's
// twin of every driver; storetest holds the contracts both pass. Only store/sqlite writes SQL.
//
// Every backend classifies failures the same way (engine/state/errors.go):
//   - ErrStateSerialization: the state cannot be encoded; permanent, retrying cannot help;
//   - ErrLeaseLost: a fenced write lost its lease; the caller stops at once and writes nothing;
//   - any other error from a backend call is transient: retry from the last checkpoint.
package store

import (
	"context"
	"fmt"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"plaita/engine/state"
	"plaita/model"
)

// The failure classes the executor acts on are defined with the state model (package state,
// re-exported by the engine); the store returns errors that match them.
var (
	// ErrStateSerialization: the state holds a value JSON cannot carry (NaN, ±Inf, a cycle,
	// a channel …). Permanent.
	ErrStateSerialization = state.ErrStateSerialization
	// ErrNotFound: no state is stored under that execution id.
	ErrNotFound = state.ErrNotFound
	// ErrStateTooLarge: the encoded state is above PLAITA_EXECUTION_STATE_MAX_BYTES; nothing
	// was written. Permanent: the execution only grows.
	ErrStateTooLarge = state.ErrStateTooLarge
	// ErrLeaseLost: a fenced write found another holder's generation.
	ErrLeaseLost = state.ErrLeaseLost
	// ErrStateCorrupt: stored bytes are not a valid execution state. Permanent.
	ErrStateCorrupt = model.New(model.Internal, "", "execution state is corrupt")
)

// DefaultMaxStateBytes is PLAITA_EXECUTION_STATE_MAX_BYTES's default: 16 MiB.
const DefaultMaxStateBytes = state.DefaultMaxStateBytes

// StateTooLargeError is an ErrStateTooLarge with the sizes.
type StateTooLargeError = state.StateTooLargeError

// Storage is what every execution storage backend provides (engine.Storage has the same
// methods: the executor runs on any of them).
type Storage interface {
	Save(ctx context.Context, st *state.Execution) error
	Load(ctx context.Context, executionID string) (*state.Execution, error)
}

// Encode serializes a state the one way every backend does: json.Marshal's bytes, written by
// state.AppendJSON into a buffer made at a 1-node state's size — growing one from nothing cost
// more than the encoding itself; a larger state grows it a few times.
func Encode(st *state.Execution) ([]byte, error) {
	b, err := state.AppendJSON(make([]byte, 0, firstEncodingCap), st)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrStateSerialization, st.ExecutionID, err)
	}
	return b, nil
}

// firstEncodingCap is the capacity an encoding starts with: a fresh start's completed state
// (about 1,000 bytes) fits.
const firstEncodingCap = 1280

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
//
// It decodes with encoding/json's semantics as implemented over encoding/json/v2 (Go 1.27's;
// go-json-experiment/json is its module): twice as fast as encoding/json's own decoder on a
// state, and a resume, a filter's look at a wait and a console page all read states.
// FuzzDecodeState holds it to encoding/json's Unmarshal.
func Decode(b []byte) (*state.Execution, error) {
	var st state.Execution
	if err := jsonv1.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateCorrupt, err)
	}
	if st.ExecutionID == "" {
		return nil, fmt.Errorf("%w: no execution_id", ErrStateCorrupt)
	}
	return &st, nil
}
