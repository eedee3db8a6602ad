package engine

import (
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/parser"

	"plaita/engine/state"
)

// Correlation terms (docs/events.md, "Correlation"). A wait_event's match says which events
// its execution takes; when it is a conjunction one of whose parts is EVENT.<path> == <value>
// — the payment of this order: EVENT.order_id == VARS.order_id — only events whose value at
// <path> equals <value> can satisfy it. Such a part is a correlation term when:
//
//   - it is a top-level conjunct: the whole match, or a part of a chain of && (and) at its
//     top (parentheses group, they do not count), so that the match is true only when it is;
//   - one side is a path EVENT.a.b (EVENT?.a, EVENT["a"]) and the other reads no EVENT
//     (not through $env either) and calls neither now(), date() nor timezone(): its value is
//     fixed while the execution waits, and the same on every machine.
//
// The value side is evaluated when the run suspends, in the environment the match is later
// evaluated in (exprEnv of the saved state: the wait's output is not recorded, the step
// counted), and kept in the suspension in canonical form (state.Correlation). The filter
// indexes the wait under its first term with a value and looks up, for an event, the index
// of the event's own value: a wait that index does not list cannot take the event. The match
// is still evaluated in full; the index only narrows what it is evaluated for.

// maxCorrelationTerms bounds the terms kept for one wait (each costs a few bytes of state).
const maxCorrelationTerms = 8

// correlationTerm is one term: the EVENT path, and the other side compiled on its own.
type correlationTerm struct {
	path  []string
	value *Expr
}

// nondeterministic builtins give another value at another time or on another machine.
var nondeterministic = []string{"now", "date", "timezone"}

// correlationTerms are the terms of a match that compiles (none when it does not, or when
// a side does not compile alone). Each side is taken from the tree the match itself is
// compiled to (parsed, checked and optimized as expr.Compile does), and compiled from that
// very subtree: no source is printed and parsed again.
func correlationTerms(src string) []correlationTerm {
	config := conf.CreateNew()
	for _, op := range []expr.Option{expr.Env(typeEnv()), expr.MaxNodes(maxExprNodes)} {
		op(config)
	}
	config.Check()
	tree, err := checker.ParseCheck(src, config)
	if err != nil {
		return nil
	}
	if config.Optimize && optimizer.Optimize(&tree.Node, config) != nil {
		return nil
	}
	var out []correlationTerm
	for _, c := range conjuncts(tree.Node) {
		b, ok := c.(*ast.BinaryNode)
		if !ok {
			continue
		}
		path, value, ok := equalityTerm(b)
		if !ok || !validPath(path) || callsAny(value, nondeterministic) || len(out) == maxCorrelationTerms {
			continue
		}
		p, err := compiler.Compile(&parser.Tree{Node: value, Source: tree.Source}, config)
		if err != nil {
			continue
		}
		out = append(out, correlationTerm{path: path, value: &Expr{src: value.String(), program: p}})
	}
	return out
}

// conjuncts are the parts of a top-level chain of && (the node itself when it is no &&).
func conjuncts(n ast.Node) []ast.Node {
	if b, ok := n.(*ast.BinaryNode); ok && (b.Operator == "&&" || b.Operator == "and") {
		return append(conjuncts(b.Left), conjuncts(b.Right)...)
	}
	return []ast.Node{n}
}

// equalityTerm reads `EVENT.<path> == <value>` or `<value> == EVENT.<path>`, where value
// reads no EVENT.
func equalityTerm(b *ast.BinaryNode) (path []string, value ast.Node, ok bool) {
	if b.Operator != "==" {
		return nil, nil, false
	}
	if p, ok := eventPath(b.Left); ok && !usesEvent(b.Right) {
		return p, b.Right, true
	}
	if p, ok := eventPath(b.Right); ok && !usesEvent(b.Left) {
		return p, b.Left, true
	}
	return nil, nil, false
}

// validPath reports whether every field of a path is valid UTF-8: event data (JSON) has no
// other keys, and the index spells paths in JSON, which would change any other.
func validPath(path []string) bool {
	for _, k := range path {
		if !utf8.ValidString(k) {
			return false
		}
	}
	return true
}

// callsAny reports whether n calls one of the builtins named.
func callsAny(n ast.Node, names []string) bool {
	found := false
	ast.Find(n, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.BuiltinNode:
			found = found || slices.Contains(names, x.Name)
		case *ast.CallNode:
			if id, ok := x.Callee.(*ast.IdentifierNode); ok {
				found = found || slices.Contains(names, id.Value)
			}
		}
		return found
	})
	return found
}

// correlate evaluates the terms in env (the suspended execution's, without EVENT) and keeps
// those whose value has a canonical form. A term whose side fails, or is null, an object or
// an array, is left out: it narrows nothing.
func correlate(terms []correlationTerm, env map[string]any, lim ExprLimits) []state.Correlation {
	var out []state.Correlation
	for _, t := range terms {
		v, err := t.value.Eval(env, lim)
		if err != nil {
			continue
		}
		if c, ok := state.CorrelationValue(v); ok {
			out = append(out, state.Correlation{Path: slices.Clone(t.path), Value: c})
		}
	}
	return out
}

// correlator is a runner whose suspensions carry correlation terms (wait_event).
type correlator interface {
	correlation(env map[string]any, lim ExprLimits) []state.Correlation
}

// correlationWarning is the validation warning of a wait_event whose match has no correlation
// term: every event of its type is checked against every execution waiting there.
func correlationWarning(eventType string) string {
	return "the match has no correlation term (EVENT.<field> == <a value not read from EVENT>, alone or joined by &&): " +
		"every event of type " + strconv.Quote(eventType) + " is checked against each execution waiting here (docs/events.md, \"Correlation\")"
}
