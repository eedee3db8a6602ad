package engine

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"
)

// TestIndexValues: a start of a flow with "index" keeps the canonical value of each scalar
// INPUT field it names (1 and 1.0 alike, "1" apart), and nothing for an absent field, null,
// an object or an array; a flow without "index" adds nothing to the state, not even the key.
func TestIndexValues(t *testing.T) {
	const src = `{"id": "shop", "start": "done", "index": ["order_id", "n", "paid", "x"],
		"nodes": [{"id": "done", "type": "end"}]}`
	f, err := Parse([]byte(src), NewRegistry(), DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"order_id", "n", "paid", "x"}; strings.Join(f.Index, ",") != strings.Join(want, ",") {
		t.Fatalf("Index = %v", f.Index)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		input string
		want  map[string]string
	}{
		{"scalars", `{"order_id": "ord-1", "n": 1, "paid": true, "other": "o"}`,
			map[string]string{"order_id": `"ord-1"`, "n": "1", "paid": "true"}},
		{"1.0 is 1", `{"n": 1.0}`, map[string]string{"n": "1"}},
		{`"1" is not 1`, `{"n": "1"}`, map[string]string{"n": `"1"`}},
		{"an object", `{"x": {"id": 7}, "n": -0}`, map[string]string{"n": "0"}},
		{"an array", `{"x": [1, 2]}`, nil},
		{"null", `{"x": null}`, nil},
		{"not an object", `[1, 2]`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var input any
			if err := json.Unmarshal([]byte(tc.input), &input); err != nil {
				t.Fatal(err)
			}
			st, err := NewState(f, StartRequest{ExecutionID: "ex_1", Input: input}, now)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(st.Index, tc.want) {
				t.Errorf("Index = %v, want %v", st.Index, tc.want)
			}
		})
	}
	// An int from Go (a caller's input before normalization) is the same value as JSON's 1.
	if got := IndexValues(f, map[string]any{"n": 1}); got["n"] != "1" {
		t.Errorf("IndexValues of int 1 = %v", got)
	}

	plain, err := Parse([]byte(`{"id": "plain", "start": "done", "nodes": [{"id": "done", "type": "end"}]}`), NewRegistry(), DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewState(plain, StartRequest{ExecutionID: "ex_2", Input: map[string]any{"order_id": "ord-1"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if st.Index != nil || strings.Contains(string(b), `"index"`) {
		t.Errorf("a flow without index: Index %v, state %s", st.Index, b)
	}
}
