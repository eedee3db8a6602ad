package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
)

// The values a branching node's reason quotes: "INPUT.amount > 1000 is true (INPUT.amount =
// 1200)". A reason is written into the timeline entry of every step that branches, loops
// included, so what it quotes is bounded: a few operands, each value cut short, and the whole
// list cut like the expression (clip).
const (
	maxWhyOperands = 4  // operands quoted, the first in order of appearance
	maxWhyValue    = 60 // bytes of one operand's name, and of its value as JSON
	maxWhyKeys     = 16 // an object with more keys is quoted by its size, not its sorted keys
)

// operand is a value an expression reads from its environment, as written (INPUT.amount,
// VARS.count, NODE.fetch.status, NODE[VARS.which].ok) and compiled on its own to read it again.
type operand struct {
	name string
	expr *Expr
	// path: a name of the environment and keys (INPUT.a?.b), read by walking the maps rather
	// than by the VM, which reads a map through reflection, costing allocations at every
	// condition step; nil for any other form (an index, a computed key).
	path []pathStep
}

// pathStep is one key of an operand's path: optional for ?. (nil before it makes the whole
// chain nil instead of an error).
type pathStep struct {
	key      string
	optional bool
}

// value reads the operand in env: ok is false when it does not evaluate.
func (o operand) value(env map[string]any, lim ExprLimits) (v any, ok bool) {
	if o.path != nil {
		if v, ok, done := lookup(env, o.path); done {
			return v, ok
		}
	}
	v, err := o.expr.run(env, lim)
	return v, err == nil
}

// lookup reads path in env as the VM does for maps — a missing key is nil, a key of nil an
// error unless ?. — and gives up (done false) on anything but maps, for the VM to read.
// TestLookupAgreesWithTheVM holds the two together.
func lookup(env map[string]any, path []pathStep) (v any, ok, done bool) {
	var cur any = env
	for _, s := range path {
		switch m := cur.(type) {
		case nil:
			return nil, s.optional, true
		case map[string]any:
			cur = m[s.key]
		default:
			return nil, false, false
		}
	}
	return cur, true, true
}

// pathOf is n's path when it is an environment name and constant keys (INPUT.a?.b).
func pathOf(n ast.Node) []pathStep {
	switch n := n.(type) {
	case *ast.IdentifierNode:
		return []pathStep{{key: n.Value}}
	case *ast.ChainNode:
		return pathOf(n.Node)
	case *ast.MemberNode:
		prop, ok := n.Property.(*ast.StringNode)
		if !ok || n.Method {
			return nil
		}
		p := pathOf(n.Node)
		if p == nil {
			return nil
		}
		return append(p, pathStep{key: prop.Value, optional: n.Optional})
	}
	return nil
}

// operandsOf are the outermost member chains and names of the environment that src reads, in
// order of appearance, each once, at most maxWhyOperands: INPUT.a.b but not INPUT.a inside it,
// no function names, builtins or literals, nothing of a closure's own (# and .x). An
// expression that is nothing but one operand (VARS.ok) has none: its value is the result.
// Flows compile once and run many times: the work is done here, at Prepare.
func operandsOf(src string) []operand {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil
	}
	c := &operandCollector{}
	ast.Walk(&tree.Node, c)
	var out []operand
	for _, n := range c.found {
		if n == tree.Node {
			continue
		}
		src := n.String()
		name := clipTo(src, maxWhyValue)
		if slices.ContainsFunc(out, func(o operand) bool { return o.name == name }) {
			continue
		}
		e, err := compileExpr(src, DefaultExprLimits)
		if err != nil {
			continue // a form the printer writes and the compiler refuses: not quoted
		}
		out = append(out, operand{name: name, expr: e, path: pathOf(n)})
		if len(out) == maxWhyOperands {
			break
		}
	}
	return out
}

// mergeOperands is the operands of several expressions (a switch's cases), each once, at most
// maxWhyOperands.
func mergeOperands(lists ...[]operand) []operand {
	var out []operand
	for _, l := range lists {
		for _, o := range l {
			if len(out) == maxWhyOperands {
				return out
			}
			if !slices.ContainsFunc(out, func(p operand) bool { return p.name == o.name }) {
				out = append(out, o)
			}
		}
	}
	return out
}

// operandCollector gathers operand nodes. ast.Walk visits children before their parent, so
// the sub-chains of a chain are the last ones gathered when the chain itself is visited: they
// are dropped from the end of the list.
type operandCollector struct{ found []ast.Node }

func (c *operandCollector) Visit(node *ast.Node) {
	n := *node
	if !isOperand(n) {
		return
	}
	inside := map[ast.Node]bool{}
	ast.Find(n, func(d ast.Node) bool {
		if d != n {
			inside[d] = true
		}
		return false
	})
	for len(c.found) > 0 && inside[c.found[len(c.found)-1]] {
		c.found = c.found[:len(c.found)-1]
	}
	c.found = append(c.found, n)
}

// isOperand reports whether n reads the environment: one of its names, or a member chain
// (not a method) rooted at one.
func isOperand(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.IdentifierNode:
		return slices.Contains(envNames, n.Value)
	case *ast.ChainNode:
		return isOperand(n.Node)
	case *ast.MemberNode:
		return !n.Method && isOperand(n.Node)
	}
	return false
}

// appendWhyValues appends " (a = 1, b = "x")" to why: the operands' values in env, nothing
// when none could be read. An operand that does not evaluate (INPUT.a.b with no INPUT.a,
// skipped by && or ??) is left out. It never fails: the reason is for the reader, and the
// branch is decided already.
func appendWhyValues(why []byte, ops []operand, env map[string]any, lim ExprLimits) (out []byte) {
	if len(ops) == 0 {
		return why
	}
	mark := len(why)
	defer func() {
		if recover() != nil {
			out = why[:mark]
		}
	}()
	why = append(why, " ("...)
	start := len(why)
	for _, o := range ops {
		v, ok := o.value(env, lim)
		if !ok {
			continue
		}
		if len(why) > start {
			why = append(why, ", "...)
		}
		why = append(why, o.name...)
		why = append(why, " = "...)
		why = appendCompactJSON(why, v, maxWhyValue)
	}
	if len(why) == start {
		return why[:mark]
	}
	if len(why)-start > maxWhy { // the list is cut as clip cuts the expression
		why = append(cutRunes(why, start+maxWhy), "…"...)
	}
	return append(why, ')')
}

// cutRunes is b cut to n bytes, less the bytes of a rune the cut would split.
func cutRunes(b []byte, n int) []byte {
	b = b[:n]
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return b
}

// clipTo is s cut to max bytes on a rune boundary, with an ellipsis when cut.
func clipTo(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}

// compactJSON is v as compact JSON, cut to max bytes with an ellipsis. Only about max bytes
// are ever written, whatever v's size: a string is cut before it is quoted, an array or object
// is written until the budget is spent, and an object of more than maxWhyKeys keys is quoted as
// {… N keys} rather than sorting them all. Objects' keys are sorted, as encoding/json writes
// them, so a reason is the same for the same values.
func compactJSON(v any, max int) string { return string(appendCompactJSON(nil, v, max)) }

// appendCompactJSON appends compactJSON(v, max) to b.
func appendCompactJSON(b []byte, v any, max int) []byte {
	start := len(b)
	w := jsonClip{b: b, max: start + max}
	w.value(v)
	if len(w.b) <= w.max {
		return w.b
	}
	return append(cutRunes(w.b, w.max), "…"...)
}

// jsonClip writes JSON into b until it is longer than max (an offset in b).
type jsonClip struct {
	b   []byte
	max int
}

func (w *jsonClip) full() bool { return len(w.b) > w.max }

func (w *jsonClip) value(v any) {
	if w.full() {
		return
	}
	switch x := v.(type) {
	case nil:
		w.b = append(w.b, "null"...)
	case bool:
		w.b = strconv.AppendBool(w.b, x)
	case string:
		w.str(x)
	case float64:
		w.float(x)
	case int:
		w.b = strconv.AppendInt(w.b, int64(x), 10)
	case int64:
		w.b = strconv.AppendInt(w.b, x, 10)
	case []any:
		w.b = append(w.b, '[')
		for i, e := range x {
			if w.full() {
				return
			}
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.value(e)
		}
		w.b = append(w.b, ']')
	case map[string]any:
		if len(x) > maxWhyKeys {
			w.b = fmt.Appendf(w.b, "{… %d keys}", len(x))
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		w.b = append(w.b, '{')
		for i, k := range keys {
			if w.full() {
				return
			}
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.str(k)
			w.b = append(w.b, ':')
			w.value(x[k])
		}
		w.b = append(w.b, '}')
	default:
		// Not a type a state holds (those are above): whatever encoding/json makes of it.
		b, err := json.Marshal(x)
		if err != nil {
			w.str(fmt.Sprint(x))
			return
		}
		w.b = append(w.b, b...)
	}
}

// float writes a number as encoding/json does: without an exponent between 1e-6 and 1e21.
func (w *jsonClip) float(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		w.b = strconv.AppendFloat(w.b, f, 'g', -1, 64) // not JSON, and not in a state either
		return
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	w.b = strconv.AppendFloat(w.b, f, format, -1, 64)
}

// str writes s as a JSON string, at most the remaining budget of it (plus one byte, so that
// a cut shows).
func (w *jsonClip) str(s string) {
	cut := false
	if room := w.max - len(w.b) + 1; len(s) > room {
		s, cut = s[:max(room, 0)], true
	}
	w.b = append(w.b, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"' || r == '\\':
			w.b = append(w.b, '\\', byte(r))
		case r == '\n':
			w.b = append(w.b, '\\', 'n')
		case r == '\t':
			w.b = append(w.b, '\\', 't')
		case r == '\r':
			w.b = append(w.b, '\\', 'r')
		case r < 0x20:
			w.b = fmt.Appendf(w.b, `\u%04x`, r)
		case r == utf8.RuneError && size == 1:
			if cut && !utf8.FullRuneInString(s[i:]) {
				i = len(s) // a rune the cut above split: dropped
				continue
			}
			w.b = append(w.b, `\ufffd`...)
		default:
			w.b = append(w.b, s[i:i+size]...)
		}
		i += size
	}
	w.b = append(w.b, '"')
}
