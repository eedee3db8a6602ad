package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"plaita/engine/state"
)

// deep is a value nested levels objects deep.
func deep(levels int) any {
	var v any = "leaf"
	for range levels {
		v = map[string]any{"a": v}
	}
	return v
}

// Every document that enters an execution is held to state.MaxDocumentDepth, so that no state
// can be saved deeper than it can be loaded again.
func TestDocumentDepthBound(t *testing.T) {
	t.Run("a variable wrapped in itself a level a step ends in error at the bound", func(t *testing.T) {
		h := newHarness(t)
		f := h.flow(`{"id":"wrap","vars":{"x":{}},"start":"wrap","nodes":[
			{"id":"wrap","type":"set","params":{"vars":{"x":"{{ {'a': VARS.x} }}"}},"next":"again"},
			{"id":"again","type":"condition","params":{"expr":"true"},"branches":{"true":"wrap","false":"done"}},
			{"id":"done","type":"end"}]}`)
		st := h.start(f, nil)
		wantError(t, st, ErrTypeSerialization, "wrap")
		if !strings.Contains(st.Error.Message, "nested too deeply") {
			t.Fatalf("error %+v does not say the value is nested too deeply", st.Error)
		}
		stored := h.stored(st.ExecutionID) // loads: the saved state is within the bound
		wantError(t, stored, ErrTypeSerialization, "wrap")
	})
	t.Run("an input nested past the bound ends the start in error", func(t *testing.T) {
		h := newHarness(t)
		st := h.start(h.flow(`{"id":"in","start":"done","nodes":[{"id":"done","type":"end"}]}`), deep(state.MaxDocumentDepth+1))
		wantStatus(t, st, state.Error)
		h.stored(st.ExecutionID)
	})
	t.Run("an input at the bound runs", func(t *testing.T) {
		h := newHarness(t)
		st := h.start(h.flow(`{"id":"in","start":"done","nodes":[{"id":"done","type":"end"}]}`), deep(state.MaxDocumentDepth))
		wantStatus(t, st, state.Completed)
	})
	t.Run("event data nested past the bound is a refused resume: the wait goes on, readable", func(t *testing.T) {
		h := newHarness(t)
		f := h.flow(`{"id":"w","start":"wait","nodes":[
			{"id":"wait","type":"wait_event","params":{"event_type":"t"},"next":"done"},
			{"id":"done","type":"end"}]}`)
		st := h.start(f, nil)
		wantStatus(t, st, state.Suspended)
		if _, err := h.ex.Resume(context.Background(), f, st.ExecutionID, ResumeEvent, deep(9999)); !errors.Is(err, ErrInvalidResume) ||
			!errors.Is(err, state.ErrTooDeep) {
			t.Fatalf("resume with data 9,999 levels deep: %v, want ErrInvalidResume (too deep)", err)
		}
		wantStatus(t, h.stored(st.ExecutionID), state.Suspended)
	})
	t.Run("a flow definition nested past the bound is refused at its path", func(t *testing.T) {
		h := newHarness(t)
		def := `{"id":"v","vars":{"x":` + strings.Repeat(`[`, state.MaxDocumentDepth) + strings.Repeat(`]`, state.MaxDocumentDepth) +
			`},"start":"done","nodes":[{"id":"done","type":"end"}]}`
		_, err := Parse([]byte(def), h.reg, h.set.Expr)
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || !strings.HasPrefix(ve.Problems[0].Path, "vars.x[0]") ||
			!strings.Contains(ve.Problems[0].Message, "deeper than 64") {
			t.Fatalf("Parse = %v, want one problem under vars.x about the nesting", err)
		}
	})
	t.Run("a flow definition over the size bound is refused", func(t *testing.T) {
		h := newHarness(t)
		def := `{"id":"v","description":"` + strings.Repeat("x", MaxFlowBytes) + `","start":"done","nodes":[{"id":"done","type":"end"}]}`
		if _, err := Parse([]byte(def), h.reg, h.set.Expr); err == nil || !strings.Contains(err.Error(), "-byte bound") {
			t.Fatalf("Parse of a %d-byte flow = %v", len(def), err)
		}
	})
}
