package store_test

import (
	"errors"
	"strings"
	"testing"

	"plaita/engine/state"
	"plaita/model"
	"plaita/store"
)

// A state over PLAITA_EXECUTION_STATE_MAX_BYTES is refused by every backend and every save path
// with ErrStateTooLarge, and nothing is written.
func TestStateOverTheBoundIsRefusedEverywhere(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{"PLAITA_EXECUTION_STATE_MAX_BYTES": "4096"})
	c := ctx(t)
	small := newState("e1", state.Running)
	if err := f.ts.Save(c, small); err != nil {
		t.Fatal(err)
	}
	big := newState("e1", state.Running)
	big.Input = strings.Repeat("x", 5000)
	l := f.acquire("e1", "w1")
	mem := store.NewMemory()
	mem.MaxStateBytes = 4096
	for name, save := range map[string]func() error{
		"plain":  func() error { return f.ts.Save(c, big) },
		"fenced": func() error { return l.Storage().Save(c, big) },
		"memory": func() error { return mem.Save(c, big) },
	} {
		err := save()
		var tl *store.StateTooLargeError
		if !errors.Is(err, store.ErrStateTooLarge) || !errors.As(err, &tl) || tl.Max != 4096 || tl.Size <= 4096 || model.IsTransient(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
	got, err := f.ts.Load(c, "e1")
	if _, isBig := got.Input.(string); err != nil || isBig {
		t.Fatalf("the refused state was written: %+v %v", got, err)
	}
}
