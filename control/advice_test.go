package control

import (
	"fmt"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
)

// waitingAt parses a one-wait flow with the given match and returns an execution suspended at
// it with input and vars.
func waitingAt(t *testing.T, match string, input map[string]any) (*engine.Flow, *state.Execution) {
	t.Helper()
	def := fmt.Sprintf(`{"id": "w", "start": "s", "vars": {"shop": "s1"}, "nodes": [
	  {"id": "s", "type": "set", "params": {"vars": {"n": 3}}, "next": "wait"},
	  {"id": "wait", "type": "wait_event", "params": {"event_type": "paid", "match": %q}, "next": "done"},
	  {"id": "done", "type": "end"}]}`, match)
	f, err := engine.Parse([]byte(def), engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatalf("%s: %v", match, err)
	}
	now := time.Now().UTC()
	st := &state.Execution{ExecutionID: "ex-1", FlowID: "w", FlowHash: f.Hash, FlowHashAlgo: f.HashAlgo,
		Status: state.Suspended, CurrentNode: "wait", Input: input, StartTime: now, LastUpdate: now,
		Context: map[string]any{
			state.ContextVars:  map[string]any{"shop": "s1", "n": 3.0},
			state.ContextNodes: map[string]any{"s": map[string]any{"n": 3.0}},
		},
		Suspend: &state.Suspend{Kind: state.SuspendEvent, Node: "wait", Since: now, EventType: "paid", Match: match}}
	return f, st
}

func TestExampleEvent(t *testing.T) {
	for _, tc := range []struct {
		match string
		want  string // "" = no example
	}{
		{"EVENT.order == INPUT.order", `{"type": "paid", "order": 7}`},
		{"INPUT.order == EVENT.order", `{"type": "paid", "order": 7}`},
		{"EVENT?.order == INPUT.order", `{"type": "paid", "order": 7}`},
		{`EVENT["order"] == INPUT.order`, `{"type": "paid", "order": 7}`},
		{"EVENT.data.order == INPUT.order && EVENT.shop == VARS.shop", `{"type": "paid", "data": {"order": 7}, "shop": "s1"}`},
		{"EVENT.n == NODE.s.n + 1 and EVENT.kind == 'card'", `{"type": "paid", "kind": "card", "n": 4}`},
		{"EVENT.order == 'nope' && EVENT.order != 'nope' || EVENT.order == INPUT.order", `{"type": "paid", "order": 7}`},
		{"EVENT.who == EXECUTION.id", `{"type": "paid", "who": "ex-1"}`},
		{"EVENT.tags == INPUT.tags", `{"type": "paid", "tags": ["a", "b"]}`},
		{"EVENT.amount > 10", ""},
		{"EVENT.order == EVENT.other", `{"type": "paid"}`}, // nil == nil
		{"EVENT.type == 'other'", ""},
		{"EVENT.a == 1 && EVENT.a.b == 2", ""}, // the shapes disagree
	} {
		f, st := waitingAt(t, tc.match, map[string]any{"order": 7.0, "tags": []any{"a", "b"}})
		got := ""
		ev, _, ok := engine.ExampleEvent(f, st, engine.DefaultExprLimits, time.Now())
		if ok {
			var err error
			if got, err = eventJSON(ev); err != nil {
				t.Fatal(err)
			}
		}
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: got %q (%v), want %q", tc.match, got, ok, tc.want)
		}
	}
}
