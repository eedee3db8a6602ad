package control

import (
	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
)

// MemoryStates hold the execution states of a flow run in this process, with no server and
// no Redis (plaita run): the engine saves each step boundary into memory, encoded as storage
// encodes it, so a state that could not be saved in Redis fails here the same way. The front
// end keeps the last state saved where it wants (a state file).
type MemoryStates struct{ mem *store.Memory }

// NewMemoryStates is an empty set of states.
func NewMemoryStates() *MemoryStates { return &MemoryStates{mem: store.NewMemory()} }

// Storage is what the engine's executor saves the states to and loads them from.
func (m *MemoryStates) Storage() engine.Storage { return m.mem }

// Saved is the last state saved of execution id: its bytes as stored, and what they decode to
// (nil when they do not decode); ok is false when none was saved.
func (m *MemoryStates) Saved(id string) (raw []byte, st *state.Execution, ok bool) {
	raw, ok = m.mem.Raw(id)
	if !ok {
		return nil, nil, false
	}
	st, err := store.Decode(raw)
	if err != nil {
		st = nil
	}
	return raw, st, true
}

// Put stores an encoded state (a state file written from Saved) after checking it decodes.
func (m *MemoryStates) Put(raw []byte) (*state.Execution, error) { return m.mem.Put(raw) }
