package engine

import (
	"fmt"
	"strings"
	"testing"

	"plaita/engine/state"
)

// bombFlow doubles VARS.s until it has `doublings` doublings of 32 bytes, then copies it into 60
// variables in one step: the 2 KB flow that once exhausted a worker's memory.
func bombFlow(doublings int) string {
	copies := make([]string, 60)
	for i := range copies {
		copies[i] = fmt.Sprintf(`"c%d":"{{ VARS.s }}"`, i)
	}
	return `{"id":"bomb","vars":{"s":"0123456789abcdef0123456789abcdef","i":0},"start":"grow","nodes":[
		{"id":"grow","type":"set","params":{"vars":{"s":"{{ VARS.s + VARS.s }}","i":"{{ VARS.i + 1 }}"}},"next":"more"},
		{"id":"more","type":"condition","params":{"expr":"VARS.i < ` + fmt.Sprint(doublings) + `"},"branches":{"true":"grow","false":"copy"}},
		{"id":"copy","type":"set","params":{"vars":{` + strings.Join(copies, ",") + `}},"next":"done"},
		{"id":"done","type":"end"}]}`
}

func TestStateSizeBound(t *testing.T) {
	t.Run("growth crosses the bound at a step boundary", func(t *testing.T) {
		h := newHarness(t)
		h.set.MaxStateBytes = 1 << 20
		h.mem.MaxStateBytes = 1 << 20
		st := h.start(h.flow(bombFlow(30)), nil) // 32 B × 2^15 = 1 MiB crosses the bound
		wantError(t, st, ErrTypeStateTooLarge, "grow")
		if !st.Error.Permanent || !strings.Contains(st.Error.Message, `node "grow"`) {
			t.Fatalf("error %+v", st.Error)
		}
		stored := h.stored(st.ExecutionID)
		wantError(t, stored, ErrTypeStateTooLarge, "grow")
	})
	t.Run("one result over the bound is refused before it is encoded", func(t *testing.T) {
		h := newHarness(t)
		h.set.MaxStateBytes = 1 << 20
		h.mem.MaxStateBytes = 1 << 20
		// 32 B × 2^13 = 256 KiB fits (twice: in VARS and in the set node's result); 60
		// references to it in one result do not.
		st := h.start(h.flow(bombFlow(13)), nil)
		wantError(t, st, ErrTypeStateTooLarge, "copy")
	})
	t.Run("under the bound it completes", func(t *testing.T) {
		h := newHarness(t)
		h.set.MaxStateBytes = 64 << 20
		h.mem.MaxStateBytes = 64 << 20
		st := h.start(h.flow(bombFlow(10)), nil) // 32 KiB, 60 copies ≈ 2 MiB
		wantStatus(t, st, state.Completed)
	})
}

func TestWithinEstimatesTheEncoding(t *testing.T) {
	big := strings.Repeat("x", 1000)
	v := map[string]any{"a": []any{big, big, 1.5, true, nil}, "b": map[string]any{"c": big}}
	if !within(v, 4000) || within(v, 2900) {
		t.Errorf("3 × 1000 bytes of strings: within(4000) %v, within(2900) %v", within(v, 4000), within(v, 2900))
	}
}
