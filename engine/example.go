package engine

import (
	"maps"
	"slices"
	"strings"
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
//
// Beyond the match, fields the rest of the flow compares with a literal (EVENT.status ==
// "paid") are set to the first such literal, so that the example goes the way the flow was
// written to go; the other EVENT fields the flow reads are returned in more, for the operator to
// fill in.
func ExampleEvent(f *Flow, st *state.Execution, lim ExprLimits, now time.Time) (ev map[string]any, more []string, ok bool) {
	s := st.Suspend
	if f == nil || s == nil {
		return nil, nil, false
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
	reads := f.eventReads()
	for _, ev := range candidates {
		if CheckResume(f, st, ResumeEvent, ev, lim, now) != nil {
			continue
		}
		full := completeEvent(ev, reads)
		if CheckResume(f, st, ResumeEvent, full, lim, now) == nil {
			ev = full
		}
		for _, r := range reads {
			if !hasPath(ev, r.path) {
				more = append(more, "EVENT."+strings.Join(r.path, "."))
			}
		}
		return ev, more, true
	}
	return nil, nil, false
}

// eventRead is one EVENT path the flow reads, with the first literal it is compared with.
type eventRead struct {
	path    []string
	literal any // nil: compared with nothing literal
}

// eventReads are the EVENT paths of every expression of the flow, in the order written.
func (f *Flow) eventReads() []eventRead {
	var out []eventRead
	seen := map[string]int{}
	add := func(path []string, lit any) {
		k := strings.Join(path, ".")
		if i, ok := seen[k]; ok {
			if out[i].literal == nil {
				out[i].literal = lit
			}
			return
		}
		seen[k] = len(out)
		out = append(out, eventRead{path: path, literal: lit})
	}
	for _, src := range f.sources {
		tree, err := parser.Parse(src)
		if err != nil {
			continue
		}
		ast.Find(tree.Node, func(n ast.Node) bool { // visits every node (it never returns true)
			if b, ok := n.(*ast.BinaryNode); ok && b.Operator == "==" {
				for _, side := range [][2]ast.Node{{b.Left, b.Right}, {b.Right, b.Left}} {
					if p, ok := eventPath(withoutDefault(side[0])); ok {
						if lit, ok := literal(side[1]); ok {
							add(p, lit)
						}
					}
				}
			}
			if p, ok := eventPath(n); ok {
				add(p, nil)
			}
			return false
		})
	}
	// EVENT.data is read on the way to EVENT.data.order_id: only the longer path says what to set.
	kept := out[:0]
	for _, r := range out {
		if r.literal != nil || !prefixOfAnother(r.path, out) {
			kept = append(kept, r)
		}
	}
	return kept
}

func prefixOfAnother(p []string, reads []eventRead) bool {
	for _, r := range reads {
		if len(r.path) > len(p) && slices.Equal(r.path[:len(p)], p) {
			return true
		}
	}
	return false
}

// withoutDefault is x of `x ?? default`.
func withoutDefault(n ast.Node) ast.Node {
	if b, ok := n.(*ast.BinaryNode); ok && b.Operator == "??" {
		return b.Left
	}
	return n
}

func literal(n ast.Node) (any, bool) {
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.IntegerNode:
		return float64(x.Value), true
	case *ast.FloatNode:
		return x.Value, true
	case *ast.BoolNode:
		return x.Value, true
	}
	return nil, false
}

// completeEvent is ev with the literal-compared fields it does not set yet.
func completeEvent(ev map[string]any, reads []eventRead) map[string]any {
	out := deepCopyMap(ev)
	for _, r := range reads {
		if r.literal == nil || hasPath(out, r.path) {
			continue
		}
		m := out
		for _, k := range r.path[:len(r.path)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				if _, taken := m[k]; taken {
					break
				}
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		if _, taken := m[r.path[len(r.path)-1]]; !taken {
			m[r.path[len(r.path)-1]] = r.literal
		}
	}
	return out
}

func hasPath(m map[string]any, path []string) bool {
	var cur any = m
	for _, k := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = mm[k]; !ok {
			return false
		}
	}
	return true
}

func deepCopyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = deepCopyMap(sub)
		}
		out[k] = v
	}
	return out
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
		if p, v, ok := equalityTerm(b); ok {
			return [][]assignment{{{path: p, value: v}}}
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

// usesEvent reports whether n reads EVENT: by name, or through $env (the whole environment).
func usesEvent(n ast.Node) bool {
	found := false
	ast.Find(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.IdentifierNode); ok && (id.Value == "EVENT" || id.Value == "$env") {
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
