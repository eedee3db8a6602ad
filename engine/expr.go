package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// ExprLimits bound what one expression may produce (PLAITA_EXPR_*). A result larger than
// max(MaxResultSize, GrowthFactor × the size of its inputs), or than MaxResultHard, is an error.
type ExprLimits struct {
	MaxResultSize int
	GrowthFactor  float64
	MaxResultHard int
}

// DefaultExprLimits are the documented defaults.
var DefaultExprLimits = ExprLimits{MaxResultSize: 100000, GrowthFactor: 4, MaxResultHard: 100000000}

// maxExprNodes bounds the size of one compiled expression.
const maxExprNodes = 2000

// envNames are the identifiers an expression may use at the top level.
var envNames = []string{"INPUT", "NODE", "$NODE", "VARS", "EVENT", "EXECUTION"}

// typeEnv declares the top-level names for the compiler, so a misspelt name is a validation
// error instead of a silent nil at run time.
func typeEnv() map[string]any {
	env := make(map[string]any, len(envNames))
	for _, n := range envNames {
		env[n] = map[string]any{}
	}
	return env
}

// Expr is a compiled expression.
type Expr struct {
	src     string
	program *vm.Program
}

// ErrExprTooLarge marks results over the expression size limits.
var ErrExprTooLarge = fmt.Errorf("expression result too large")

func compileExpr(src string, _ ExprLimits) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("empty expression")
	}
	p, err := expr.Compile(src, expr.Env(typeEnv()), expr.MaxNodes(maxExprNodes))
	if err != nil {
		return nil, fmt.Errorf("expression %q: %s", src, firstLine(err.Error()))
	}
	return &Expr{src: src, program: p}, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Eval runs the expression against env within the limits.
func (e *Expr) Eval(env map[string]any, lim ExprLimits) (any, error) {
	out, err := e.run(env, lim)
	if err != nil {
		// A nil the VM tripped over is, almost always, a value the execution does not have.
		if strings.Contains(err.Error(), "<nil>") {
			if missing := missingValue(e.src, env); missing != "" {
				return nil, Permanent(fmt.Errorf("expression %q: %s is not set: give it a value, or a default (%s ?? …); %s",
					e.src, missing, missing, firstLine(err.Error())))
			}
		}
		return nil, Permanent(fmt.Errorf("expression %q: %s", e.src, firstLine(err.Error())))
	}
	if err := checkSize(out, env, lim); err != nil {
		return nil, Permanent(fmt.Errorf("expression %q: %w", e.src, err))
	}
	return out, nil
}

// run is the VM's evaluation within the memory budget, without the result size check: Eval
// and the values a reason quotes (appendWhyValues), which only read what env already holds.
func (e *Expr) run(env map[string]any, lim ExprLimits) (any, error) {
	machine := vm.VM{MemoryBudget: memoryBudget(lim)}
	return machine.Run(e.program, env)
}

// memoryBudget bounds the VM's allocations (roughly one unit per element or character
// allocated) so a repeat/map bomb stops within milliseconds, long before it can take the worker
// down: the size limits, between expr's default of 1e6 units and 1e7.
func memoryBudget(lim ExprLimits) uint {
	return uint(min(max(float64(lim.MaxResultSize)*lim.GrowthFactor, 1e6), 1e7))
}

// checkSize applies the result size limits. The inputs are only measured when the result is
// over the base limit, and never further than needed.
func checkSize(out any, env map[string]any, lim ExprLimits) error {
	size, over := sizeOf(out, lim.MaxResultHard)
	if over {
		return fmt.Errorf("%w: over the hard limit of %d bytes (PLAITA_EXPR_MAX_RESULT_HARD)", ErrExprTooLarge, lim.MaxResultHard)
	}
	if size <= lim.MaxResultSize {
		return nil
	}
	need := int(math.Ceil(float64(size) / lim.GrowthFactor))
	var in int
	for _, k := range envNames {
		n, full := sizeOf(env[k], need-in)
		in += n
		if full || in >= need {
			return nil
		}
	}
	return fmt.Errorf("%w: %d bytes, over PLAITA_EXPR_MAX_RESULT_SIZE (%d) and %g× its inputs (%d bytes)",
		ErrExprTooLarge, size, lim.MaxResultSize, lim.GrowthFactor, in)
}

// sizeOf estimates the JSON size of v, stopping once it passes limit (over = true).
func sizeOf(v any, limit int) (size int, over bool) {
	var walk func(v any, depth int) bool
	walk = func(v any, depth int) bool {
		if size > limit || depth > 256 {
			return false
		}
		switch x := v.(type) {
		case nil:
			size += 4
		case string:
			size += len(x) + 2
		case bool:
			size += 5
		case int, int64, float64, int32, float32, uint, uint64, json.Number:
			size += 8
		case map[string]any:
			size += 2
			for k, e := range x {
				size += len(k) + 4
				if !walk(e, depth+1) {
					return false
				}
			}
		case []any:
			size += 2
			for _, e := range x {
				size++
				if !walk(e, depth+1) {
					return false
				}
			}
		default:
			rv := reflect.ValueOf(v)
			switch rv.Kind() {
			case reflect.Slice, reflect.Array:
				for i := range rv.Len() {
					if !walk(rv.Index(i).Interface(), depth+1) {
						return false
					}
				}
			case reflect.Map:
				for _, k := range rv.MapKeys() {
					size += 4
					if !walk(k.Interface(), depth+1) || !walk(rv.MapIndex(k).Interface(), depth+1) {
						return false
					}
				}
			default:
				size += 16
			}
		}
		return size <= limit
	}
	walk(v, 0)
	return size, size > limit
}

// Value is a JSON value whose strings may contain {{ expression }} templates. A string that is
// exactly one template keeps the expression's type ("{{ INPUT.n + 1 }}" is a number); a string
// mixing text and templates renders to a string.
type Value struct {
	literal  any
	template *template
	object   map[string]*Value
	keys     []string
	array    []*Value
	dynamic  bool // a template somewhere in it: its value needs the environment
}

// In evaluates v in the call's environment, which is built only when v has an expression: a
// literal (an end node's constant output, a log line) costs no environment.
func (v *Value) In(c *Call) (any, error) {
	if !v.dynamic {
		return v.Eval(nil, c.limits)
	}
	return v.Eval(c.Env(), c.limits)
}

type template struct {
	parts []templatePart
}

// walk calls fn with every expression of v's templates.
func (v *Value) walk(fn func(*Expr)) {
	if v == nil {
		return
	}
	if v.template != nil {
		for _, p := range v.template.parts {
			if p.expr != nil {
				fn(p.expr)
			}
		}
	}
	for _, k := range v.keys {
		v.object[k].walk(fn)
	}
	for _, e := range v.array {
		e.walk(fn)
	}
}

type templatePart struct {
	text string
	expr *Expr
}

func compileValue(v any, lim ExprLimits) (*Value, error) {
	switch x := v.(type) {
	case string:
		t, err := compileTemplate(x, lim)
		if err != nil {
			return nil, err
		}
		if t == nil {
			return &Value{literal: x}, nil
		}
		return &Value{template: t, dynamic: true}, nil
	case map[string]any:
		val := &Value{object: map[string]*Value{}}
		for _, k := range sortedAnyKeys(x) {
			c, err := compileValue(x[k], lim)
			if err != nil {
				return nil, &valueError{path: "." + k, err: err}
			}
			val.object[k] = c
			val.keys = append(val.keys, k)
			val.dynamic = val.dynamic || c.dynamic
		}
		sort.Strings(val.keys)
		return val, nil
	case []any:
		val := &Value{array: make([]*Value, 0, len(x))}
		for i, e := range x {
			c, err := compileValue(e, lim)
			if err != nil {
				return nil, &valueError{path: fmt.Sprintf("[%d]", i), err: err}
			}
			val.array = append(val.array, c)
			val.dynamic = val.dynamic || c.dynamic
		}
		return val, nil
	}
	return &Value{literal: v}, nil
}

// valueError locates a template error inside a value: path is relative (".key", "[2]").
type valueError struct {
	path string
	err  error
}

func (e *valueError) Error() string { return e.path + ": " + e.err.Error() }
func (e *valueError) Unwrap() error { return e.err }

// split returns the full relative path and the innermost error.
func (e *valueError) split() (string, error) {
	var inner *valueError
	if errors.As(e.err, &inner) {
		p, err := inner.split()
		return e.path + p, err
	}
	return e.path, e.err
}

func sortedAnyKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// compileTemplate returns nil for a string without templates.
func compileTemplate(s string, lim ExprLimits) (*template, error) {
	if !strings.Contains(s, "{{") {
		return nil, nil
	}
	t := &template{}
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			if rest != "" {
				t.parts = append(t.parts, templatePart{text: rest})
			}
			return t, nil
		}
		if i > 0 {
			t.parts = append(t.parts, templatePart{text: rest[:i]})
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("template %q: {{ without }}", s)
		}
		e, err := compileExpr(rest[i+2:i+2+j], lim)
		if err != nil {
			return nil, fmt.Errorf("template %q: %w", s, err)
		}
		t.parts = append(t.parts, templatePart{expr: e})
		rest = rest[i+2+j+2:]
	}
}

// Eval produces the value for env.
func (v *Value) Eval(env map[string]any, lim ExprLimits) (any, error) {
	switch {
	case v.template != nil:
		return v.template.eval(env, lim)
	case v.object != nil:
		out := make(map[string]any, len(v.object))
		for _, k := range v.keys {
			e, err := v.object[k].Eval(env, lim)
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	case v.array != nil:
		out := make([]any, len(v.array))
		for i, c := range v.array {
			e, err := c.Eval(env, lim)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	return v.literal, nil
}

func (t *template) eval(env map[string]any, lim ExprLimits) (any, error) {
	if len(t.parts) == 1 && t.parts[0].expr != nil {
		return t.parts[0].expr.Eval(env, lim)
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.expr == nil {
			b.WriteString(p.text)
			continue
		}
		out, err := p.expr.Eval(env, lim)
		if err != nil {
			return nil, err
		}
		s, err := render(out)
		if err != nil {
			return nil, Permanent(fmt.Errorf("template: %w", err))
		}
		b.WriteString(s)
		if b.Len() > lim.MaxResultHard {
			return nil, Permanent(fmt.Errorf("%w: rendered template over %d bytes", ErrExprTooLarge, lim.MaxResultHard))
		}
	}
	s := b.String()
	if err := checkSize(s, env, lim); err != nil {
		return nil, Permanent(fmt.Errorf("template: %w", err))
	}
	return s, nil
}

// render turns a value into template text: strings as they are, numbers without a needless
// ".0", nil as nothing, objects and arrays as JSON.
func render(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case int:
		return strconv.Itoa(x), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// missingValue names the first value an expression reads that is not there — INPUT.amount for
// "INPUT.amount > 10" run without an amount — so that an error says what is missing rather
// than what the VM could not do with a nil ("" when every value read is set).
func missingValue(src string, env map[string]any) string {
	tree, err := parser.Parse(src)
	if err != nil {
		return ""
	}
	found := ""
	ast.Find(tree.Node, func(n ast.Node) bool {
		path, ok := memberPath(n)
		if !ok || found != "" {
			return false
		}
		var cur any = env
		for i, k := range path {
			m, isMap := cur.(map[string]any)
			v, has := m[k]
			if !isMap || !has || v == nil {
				if i > 0 { // a name that is not in the environment at all is a compile error
					found = strings.Join(path[:i+1], ".")
				}
				return found != ""
			}
			cur = v
		}
		return false
	})
	return found
}

// memberPath reads INPUT.a.b, VARS?.a and NODE["n"].x as their path from the environment.
func memberPath(n ast.Node) ([]string, bool) {
	switch n := n.(type) {
	case *ast.ChainNode:
		return memberPath(n.Node)
	case *ast.MemberNode:
		prop, ok := n.Property.(*ast.StringNode)
		if !ok || n.Method {
			return nil, false
		}
		if id, ok := n.Node.(*ast.IdentifierNode); ok {
			return []string{id.Value, prop.Value}, slices.Contains(envNames, id.Value)
		}
		p, ok := memberPath(n.Node)
		return append(p, prop.Value), ok
	}
	return nil, false
}
