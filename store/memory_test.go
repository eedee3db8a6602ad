package store

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"plaita/engine/state"
)

func TestMemoryRoundTripsThroughJSON(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	st := &state.Execution{ExecutionID: "ex_1", Status: state.Running, StartTime: time.Unix(100, 0).UTC(),
		Input: map[string]any{"n": 1}, Context: map[string]any{"$VARS": map[string]any{"i": 2}}}
	if err := m.Save(ctx, st); err != nil {
		t.Fatal(err)
	}
	got, err := m.Load(ctx, "ex_1")
	if err != nil {
		t.Fatal(err)
	}
	// Numbers come back as JSON gives them, as from Redis: the backends never diverge.
	if got.Input.(map[string]any)["n"] != float64(1) || got.Vars()["i"] != float64(2) {
		t.Errorf("round trip: %+v %+v", got.Input, got.Context)
	}
	// The loaded state shares nothing with the saved one.
	got.Vars()["i"] = 99
	again, _ := m.Load(ctx, "ex_1")
	if again.Vars()["i"] != float64(2) {
		t.Error("loaded states alias each other")
	}
}

func TestMemoryFailureClasses(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	if _, err := m.Load(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
	bad := &state.Execution{ExecutionID: "ex_nan", Input: math.NaN()}
	err := m.Save(ctx, bad)
	if !errors.Is(err, ErrStateSerialization) {
		t.Fatalf("NaN: %v", err)
	}
	if _, err := m.Load(ctx, "ex_nan"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a failed save stored something: %v", err)
	}
	for _, raw := range []string{"{not json", `{"status":"running"}`, `[]`} {
		if _, err := m.Put([]byte(raw)); !errors.Is(err, ErrStateCorrupt) {
			t.Errorf("Put(%q): %v", raw, err)
		}
	}
	m.Cancel("ex_c")
	if c, _ := m.Cancelled(ctx, "ex_c"); !c {
		t.Error("cancel flag lost")
	}
}
