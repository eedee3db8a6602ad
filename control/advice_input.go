package control

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"plaita/engine"
	"plaita/engine/state"
)

// An execution in error because its INPUT lacks a value is not offered a retry: the hint is a
// new start with the input given. The retry itself stays accepted (engine.CheckResume and the
// API take it); it is only not suggested, since it ends the same way.
//
// The rule, kept conservative: a retry runs the failed node again on the same state, and INPUT
// is set once, at the start (engine.Executor.Start), so an expression that failed because
// INPUT has no value at a path fails again. Only the engine's own report of that qualifies: a
// NodeError whose message is an expression's `INPUT.<path> is not set` (engine/expr.go,
// Expr.Eval). A missing VARS or NODE value (an earlier node may set it on another run), a
// message that merely quotes INPUT (an HTTP answer, a code node's output) and every other
// error keep their retry.

// missingInputMessage is the start of Expr.Eval's message for a value INPUT does not have.
var missingInputMessage = regexp.MustCompile(`^expression "(?s:.*?)": (INPUT(?:\.[^\s.]+)+) is not set: give it a value`)

// maxSuggestedInput bounds the --input a hint prints whole: past it, only the missing value
// is shown (the rest of the execution's input is for the operator to give again).
const maxSuggestedInput = 200

// missingInput is the INPUT path (without "INPUT") the error says is not set; nil when the
// error is not that.
func missingInput(e *state.ErrorInfo) []string {
	if e == nil || e.Type != engine.ErrTypeNode {
		return nil
	}
	m := missingInputMessage.FindStringSubmatch(e.Message)
	if m == nil {
		return nil
	}
	return strings.Split(m[1], ".")[1:]
}

// newStartHint is the note of an execution that failed on a value its INPUT lacks (path): no
// retry is suggested, a new start with the value given is. Local (plaita run) says the --input
// to give; in Redis withCommands adds the `plaita start` command line.
func (a *Advice) newStartHint(st *state.Execution, path []string) Hint {
	input := suggestedInput(st.Input, path)
	h := Hint{Note: []string{
		fmt.Sprintf("no retry suggested: the node failed on the execution's own input (INPUT.%s is not set), which a retry does not change: "+
			"it would fail the same way (a retry is still accepted)", strings.Join(path, ".")),
	}}
	if a.Local {
		h.Note = append(h.Note, "start a new execution with the input given: --input "+shellQuote(input))
		return h
	}
	h.Note = append(h.Note, "start a new execution with the input given:")
	h.startInput = input
	return h
}

// missingValue stands for the value an operator fills in: it prints as "…".
type missingValue struct{}

// suggestedInput is the execution's input with "…" at path, as typed on a command line; only
// the path when the input is not an object, or when the whole would be long.
func suggestedInput(input any, path []string) string {
	if m, ok := input.(map[string]any); ok {
		if s := renderInput(withMissing(m, path)); len(s) <= maxSuggestedInput {
			return s
		}
	}
	return renderInput(withMissing(nil, path))
}

// withMissing is a copy of m (nil: an empty object) with missingValue at path; the objects on
// the way are copied, not changed.
func withMissing(m map[string]any, path []string) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	if len(path) == 1 {
		out[path[0]] = missingValue{}
		return out
	}
	inner, _ := out[path[0]].(map[string]any)
	out[path[0]] = withMissing(inner, path[1:])
	return out
}

func renderInput(m map[string]any) string {
	var buf bytes.Buffer
	if err := writeHumanJSON(&buf, m, false); err != nil {
		return "{}"
	}
	return buf.String()
}
