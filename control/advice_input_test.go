package control

import (
	"strings"
	"testing"

	"plaita/engine"
	"plaita/engine/state"
)

// TestMissingInputRule: only the engine's own report of an expression that read a value INPUT
// lacks takes the retry out of the hints; a missing VARS or NODE value, another error type or a
// message that merely quotes the words keeps it.
func TestMissingInputRule(t *testing.T) {
	t.Parallel()
	const report = `expression "INPUT.order.amount > 10": INPUT.order.amount is not set: give it a value, or a default (INPUT.order.amount ?? …); invalid operation: <nil> > int (1:20)`
	for _, tc := range []struct {
		typ, msg string
		want     string // the path, "" for none
	}{
		{engine.ErrTypeNode, report, "order.amount"},
		{engine.ErrTypeNode, `expression "VARS.n > 1": VARS.n is not set: give it a value, or a default (VARS.n ?? …); x`, ""},
		{engine.ErrTypeNode, `expression "NODE.a.b": NODE.a is not set: give it a value, or a default (NODE.a ?? …); x`, ""},
		{engine.ErrTypeNode, `http 500: upstream says: INPUT.amount is not set: give it a value`, ""},
		{engine.ErrTypeFlowFailed, report, ""},
		{engine.ErrTypeOrphaned, report, ""},
	} {
		got := strings.Join(missingInput(&state.ErrorInfo{Type: tc.typ, Message: tc.msg}), ".")
		if got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.typ, tc.msg, got, tc.want)
		}
	}
	if missingInput(nil) != nil {
		t.Error("no error: a path")
	}

	for _, tc := range []struct {
		input any
		path  []string
		want  string
	}{
		{map[string]any{"who": "kim"}, []string{"amount"}, `{"amount": …, "who": "kim"}`},
		{map[string]any{"order": map[string]any{"id": "o-1"}}, []string{"order", "amount"}, `{"order": {"amount": …, "id": "o-1"}}`},
		{"not an object", []string{"amount"}, `{"amount": …}`},
		{map[string]any{"big": strings.Repeat("x", maxSuggestedInput)}, []string{"amount"}, `{"amount": …}`},
	} {
		if got := suggestedInput(tc.input, tc.path); got != tc.want {
			t.Errorf("suggestedInput(%v, %v) = %s, want %s", tc.input, tc.path, got, tc.want)
		}
	}
}
