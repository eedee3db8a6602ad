// Package storetest is the storage contracts every backend passes, as test helpers other
// packages' tests import: execution storage (Contract: the memory and Redis backends in store's
// tests, the console's local-mode SQLite storage in store/sqlite's), the event bus
// (EventsContract, events.go), the schedules (SchedulesContract, schedules.go), the published
// flows (FlowsContract, flows.go), leases and fencing (StateContract, state.go), wake-up records
// (WakeupContract, wakeup.go), tenant gates (TenantContract, tenant.go), listings
// (ListContract, list.go), live events (LiveContract, live.go), the instance registry
// (RegistryContract, registry.go) and the control channels (ControlContract, control.go). Each
// runs on Redis in store's tests and on local mode's backend (store/sqlite's tests, the
// in-process hub in store's). It imports "testing": only tests import it.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/model"
	"plaita/store"
)

// MaxStateBytes is the state bound a backend under the contract must be configured with
// (PLAITA_EXECUTION_STATE_MAX_BYTES=65536): the suite saves a state just above it.
const MaxStateBytes = 65536

// Backend is one implementation under the contract.
type Backend struct {
	Name    string
	Storage store.Storage
	// Down is the same backend with its server gone, or its handle closed (nil: a backend that
	// has nothing to lose, like the memory one).
	Down store.Storage
}

// Contract runs the storage contract against b: what one backend accepts, stores and refuses,
// all do.
func Contract(t *testing.T, b Backend) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := "c-" + b.Name
	// Not found is its own permanent class.
	if _, err := b.Storage.Load(c, id); !errors.Is(err, store.ErrNotFound) || model.IsTransient(err) {
		t.Fatalf("load before save: %v", err)
	}
	// Round trip: what comes back is the JSON of what went in (numbers as float64).
	st := NewState(id, state.Running)
	st.Input = map[string]any{"n": 3, "list": []any{1, "two"}}
	if err := b.Storage.Save(c, st); err != nil {
		t.Fatal(err)
	}
	got, err := b.Storage.Load(c, id)
	if err != nil {
		t.Fatal(err)
	}
	want := RoundTrip(t, st)
	if !reflect.DeepEqual(RoundTrip(t, got), want) || got.Input.(map[string]any)["n"] != 3.0 {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	// A second save replaces the first.
	st.Status, st.StepCount = state.Suspended, 2
	if err := b.Storage.Save(c, st); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Storage.Load(c, id); err != nil || got.Status != state.Suspended || got.StepCount != 2 {
		t.Fatalf("second save: %+v %v", got, err)
	}
	// A value JSON cannot carry: permanent, nothing written.
	bad := NewState(id, state.Completed)
	bad.Context["score"] = math.NaN()
	if err := b.Storage.Save(c, bad); !errors.Is(err, store.ErrStateSerialization) || model.IsTransient(err) {
		t.Fatalf("NaN: %v", err)
	}
	// Over the state bound: permanent, nothing written.
	big := NewState(id, state.Completed)
	big.Output = strings.Repeat("x", MaxStateBytes+1)
	if err := b.Storage.Save(c, big); !errors.Is(err, store.ErrStateTooLarge) || model.IsTransient(err) {
		t.Fatalf("too large: %v", err)
	}
	if got, err := b.Storage.Load(c, id); err != nil || got.Status != state.Suspended {
		t.Fatalf("a refused save changed the stored state: %+v %v", got, err)
	}
	// A backend whose server is gone fails transiently (the caller redelivers), and an
	// unserializable value is still refused as permanent before anything is sent.
	if b.Down != nil {
		short, cancel := context.WithTimeout(c, 500*time.Millisecond)
		defer cancel()
		if err := b.Down.Save(short, NewState(id, state.Running)); err == nil || !model.IsTransient(err) {
			t.Fatalf("save with the server gone: %v", err)
		}
		if _, err := b.Down.Load(short, id); err == nil || !model.IsTransient(err) || errors.Is(err, store.ErrNotFound) {
			t.Fatalf("load with the server gone: %v", err)
		}
		if err := b.Down.Save(short, bad); !errors.Is(err, store.ErrStateSerialization) || model.IsTransient(err) {
			t.Fatalf("NaN with the server gone: %v", err)
		}
	}
}

// NewState is a small execution state in status.
func NewState(id string, status state.Status) *state.Execution {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return &state.Execution{
		ExecutionID: id, FlowID: "f", FlowVersion: "1", Engine: "test", Status: status, CurrentNode: "a",
		Input: map[string]any{"k": "v"}, Context: map[string]any{state.ContextNodes: map[string]any{"a": map[string]any{"x": 1.0}}},
		StartTime: start, LastUpdate: start,
	}
}

// RoundTrip is the JSON object of a state, to compare states as every backend stores them.
func RoundTrip(t testing.TB, st *state.Execution) map[string]any {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
