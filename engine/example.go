package engine

import (
	"maps"
	"time"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"plaita/engine/state"
)

// maxExampleEvents bounds the candidates tried for one match (each || doubles them).
const maxExampleEvents = 8

// ExampleEvent builds event data that the wait st is suspended at accepts, for an operator's
// hint: {"type": <event_type>} plus, for every `EVENT.<path> == <expr>` (or `<expr> ==
// EVENT.<path>`) comparison of the match, <path> set to <expr> evaluated against the execution,
// in the environment the wait itself evaluates in. Each candidate is put to CheckResume; ok is
// false when none is accepted (a match such as EVENT.amount > 10 says what an event must be,
// not what one is).
func ExampleEvent(f *Flow, st *state.Execution, lim ExprLimits, now time.Time) (map[string]any, bool) {
	s := st.Suspend
	if f == nil || s == nil {
		return nil, false
	}
	var candidates []map[string]any
	if s.Match != "" {
		if tree, err := parser.Parse(s.Match); err == nil {
			view := *st // the environment's sections are made on a copy, not in the caller's state
			view.Context = maps.Clone(st.Context)
			env := exprEnv(&view, f, s.Node, nil)
			for _, alt := range alternatives(tree.Node) {
				ev := map[string]any{"type": s.EventType}
				if fillEvent(ev, alt, env, lim) {
					candidates = append(candidates, ev)
				}
			}
		}
	}
	candidates = append(candidates, map[string]any{"type": s.EventType})
	for _, ev := range candidates {
		if CheckResume(f, st, ResumeEvent, ev, lim, now) == nil {
			return ev, true
		}
	}
	return nil, false
}

// assignment is one `EVENT.<path> == <value>` of a match.
type assignment struct {
	path  []string
	value ast.Node
}

// alternatives are the sets of assignments that each make the match true as far as its
// comparisons go: && joins them, || offers either side, anything else adds nothing.
func alternatives(n ast.Node) [][]assignment {
	b, ok := n.(*ast.BinaryNode)
	if !ok {
		return [][]assignment{nil}
	}
	switch b.Operator {
	case "&&", "and":
		var out [][]assignment
		for _, l := range alternatives(b.Left) {
			for _, r := range alternatives(b.Right) {
				if len(out) < maxExampleEvents {
					out = append(out, append(append([]assignment{}, l...), r...))
				}
			}
		}
		return out
	case "||", "or":
		out := append(alternatives(b.Left), alternatives(b.Right)...)
		return out[:min(len(out), maxExampleEvents)]
	case "==":
		if p, ok := eventPath(b.Left); ok && !usesEvent(b.Right) {
			return [][]assignment{{{path: p, value: b.Right}}}
		}
		if p, ok := eventPath(b.Right); ok && !usesEvent(b.Left) {
			return [][]assignment{{{path: p, value: b.Left}}}
		}
	}
	return [][]assignment{nil}
}

// eventPath reads EVENT.a.b, EVENT?.a and EVENT["a"] as the path [a b].
func eventPath(n ast.Node) ([]string, bool) {
	switch n := n.(type) {
	case *ast.ChainNode:
		return eventPath(n.Node)
	case *ast.MemberNode:
		prop, ok := n.Property.(*ast.StringNode)
		if !ok || n.Method {
			return nil, false
		}
		if id, ok := n.Node.(*ast.IdentifierNode); ok {
			return []string{prop.Value}, id.Value == "EVENT"
		}
		p, ok := eventPath(n.Node)
		return append(p, prop.Value), ok
	}
	return nil, false
}

func usesEvent(n ast.Node) bool {
	found := false
	ast.Find(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.IdentifierNode); ok && id.Value == "EVENT" {
			found = true
		}
		return found
	})
	return found
}

// fillEvent evaluates each assignment's value and sets it in ev; false when one cannot be
// evaluated or two disagree about the shape.
func fillEvent(ev map[string]any, alt []assignment, env map[string]any, lim ExprLimits) bool {
	for _, as := range alt {
		e, err := compileExpr(as.value.String(), lim)
		if err != nil {
			return false
		}
		v, err := e.Eval(env, lim)
		if err != nil {
			return false
		}
		m := ev
		for _, k := range as.path[:len(as.path)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				if _, taken := m[k]; taken {
					return false
				}
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[as.path[len(as.path)-1]] = v
	}
	return true
}
