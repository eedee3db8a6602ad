package store

import (
	"context"
	"sync"

	"plaita/engine/state"
)

// Memory keeps execution states in process. It stores the encoded bytes, not the Go value, so
// a state that would fail to save or load in Redis fails here the same way, and a loaded state
// shares nothing with the one that was saved.
type Memory struct {
	// MaxStateBytes bounds an encoded state like PLAITA_EXECUTION_STATE_MAX_BYTES does for
	// Redis (0: DefaultMaxStateBytes). Set it before first use.
	MaxStateBytes int

	mu        sync.Mutex
	states    map[string][]byte
	cancelled map[string]bool
}

// NewMemory returns an empty in-process store.
func NewMemory() *Memory {
	return &Memory{states: map[string][]byte{}, cancelled: map[string]bool{}}
}

// Save stores the state.
func (m *Memory) Save(_ context.Context, st *state.Execution) error {
	b, err := EncodeBounded(st, m.MaxStateBytes)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[st.ExecutionID] = b
	return nil
}

// Load returns a fresh copy of the stored state.
func (m *Memory) Load(_ context.Context, id string) (*state.Execution, error) {
	m.mu.Lock()
	b, ok := m.states[id]
	m.mu.Unlock()
	if !ok {
		return nil, ErrNotFound
	}
	return Decode(b)
}

// Raw returns the stored bytes of an execution (for tools that write state to disk).
func (m *Memory) Raw(id string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.states[id]
	return b, ok
}

// Put stores already-encoded bytes after checking they decode.
func (m *Memory) Put(b []byte) (*state.Execution, error) {
	st, err := Decode(b)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[st.ExecutionID] = append([]byte(nil), b...)
	return st, nil
}

// Cancel raises the cancel flag of an execution.
func (m *Memory) Cancel(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cancelled[id] = true
}

// Cancelled reports the cancel flag.
func (m *Memory) Cancelled(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cancelled[id], nil
}
