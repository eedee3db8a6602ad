package engine

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func env() map[string]any {
	return map[string]any{
		"INPUT": map[string]any{"name": "Ada", "n": 3.0, "tags": []any{"a", "b"}, "o": map[string]any{"k": "v"}},
		"NODE":  map[string]any{"n-2": map[string]any{"ok": true}}, "$NODE": map[string]any{}, "VARS": map[string]any{"i": 2.0},
		"EVENT": nil, "EXECUTION": map[string]any{"id": "ex_1"},
	}
}

func TestTemplates(t *testing.T) {
	cases := map[string]any{
		"plain text":                      "plain text",
		"{{ INPUT.n + 1 }}":               4.0,
		"{{ INPUT.name }}":                "Ada",
		"hi {{ INPUT.name }}!":            "hi Ada!",
		"{{ INPUT.n }}/{{ VARS.i }}":      "3/2",
		"{{ INPUT.tags }}":                []any{"a", "b"},
		"tags={{ INPUT.tags }}":           `tags=["a","b"]`,
		"o={{ INPUT.o }}":                 `o={"k":"v"}`,
		"{{ NODE['n-2'].ok }}":            true,
		"[{{ INPUT.missing }}]":           "[]",
		"{{ INPUT.missing ?? 'dflt' }}":   "dflt",
		"{{ EXECUTION.id }}":              "ex_1",
		"{{ len(INPUT.tags) > 1 }}":       true,
		"{{ EVENT?.x ?? 'no event' }}":    "no event",
		"{{ upper(INPUT.name) }} {{ 1 }}": "ADA 1",
	}
	for src, want := range cases {
		v, err := compileValue(src, DefaultExprLimits)
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		got, err := v.Eval(env(), DefaultExprLimits)
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		if s1, s2 := render2(got), render2(want); s1 != s2 {
			t.Errorf("%q = %s, want %s", src, s1, s2)
		}
	}
}

func render2(v any) string {
	s, _ := render(v)
	return s
}

func TestTemplateCompileErrors(t *testing.T) {
	for src, want := range map[string]string{
		"{{ INPUT.n + }}":    "unexpected token",
		"{{ INPT.n }}":       "unknown name INPT",
		"open {{ INPUT.name": "{{ without }}",
		"{{ }}":              "empty expression",
		"{{ os.Exit(1) }}":   "unknown name os",
		"{{ 1 }} {{ 2 +* }}": "",
	} {
		_, err := compileValue(src, DefaultExprLimits)
		if err == nil {
			t.Errorf("%q compiled", src)
			continue
		}
		if want != "" && !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}

func TestExpressionRuntimeErrorsArePermanent(t *testing.T) {
	e, err := compileExpr("INPUT.n / INPUT.name", DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Eval(env(), DefaultExprLimits); err == nil || !IsPermanent(err) {
		t.Fatalf("want a permanent error, got %v", err)
	}
}

func TestExpressionBombsStopQuickly(t *testing.T) {
	for _, src := range []string{
		"repeat('x', 1000000000)",
		"map(1..100000000, # * 2)",
		"join(map(1..10000000, 'abcdefgh'), '')",
	} {
		e, err := compileExpr(src, DefaultExprLimits)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := e.Eval(env(), DefaultExprLimits)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: no error", src)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still running; the memory budget must stop it", src)
		}
	}
}

func TestSizeLimits(t *testing.T) {
	lim := ExprLimits{MaxResultSize: 100, GrowthFactor: 2, MaxResultHard: 1000}
	small := map[string]any{"INPUT": "xx"}
	if err := checkSize(strings.Repeat("a", 90), small, lim); err != nil {
		t.Errorf("under the base limit: %v", err)
	}
	if err := checkSize(strings.Repeat("a", 200), small, lim); !errors.Is(err, ErrExprTooLarge) {
		t.Errorf("over base, tiny input: %v", err)
	}
	big := map[string]any{"INPUT": strings.Repeat("b", 150)}
	if err := checkSize(strings.Repeat("a", 250), big, lim); err != nil {
		t.Errorf("within growth of the input: %v", err)
	}
	if err := checkSize(strings.Repeat("a", 1500), map[string]any{"INPUT": strings.Repeat("b", 5000)}, lim); !errors.Is(err, ErrExprTooLarge) {
		t.Errorf("over the hard limit: %v", err)
	}
}

// An expression that trips over a value the execution does not have names that value.
func TestExprErrorNamesTheMissingValue(t *testing.T) {
	env := map[string]any{"INPUT": map[string]any{"user": map[string]any{}}, "VARS": map[string]any{"n": 1.0}, "NODE": map[string]any{}}
	for src, want := range map[string]string{
		"INPUT.amount > 10":        "INPUT.amount is not set",
		"INPUT.user.name + 'x'":    "INPUT.user.name is not set",
		"NODE.fetch.status == 200": "NODE.fetch is not set",
		"VARS.n / 0 > VARS.m":      "VARS.m is not set",
	} {
		e, err := compileExpr(src, DefaultExprLimits)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Eval(env, DefaultExprLimits)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), src) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
	// An error that is not about a missing value is not blamed on one.
	e, _ := compileExpr("(INPUT.none ?? 0) + 'a' > 1", DefaultExprLimits)
	if _, err := e.Eval(env, DefaultExprLimits); err == nil || strings.Contains(err.Error(), "is not set") {
		t.Errorf("unrelated error: %v", err)
	}
}

// A value without an expression is evaluated without the call's environment; one with an
// expression anywhere in it builds it once.
func TestValueInBuildsTheEnvironmentOnlyForExpressions(t *testing.T) {
	for src, want := range map[string]int{`"ok"`: 0, `{"a":[1,"x"],"b":null}`: 0, `"{{ INPUT.n }}"`: 1, `{"a":[1,"{{ INPUT.n }}"]}`: 1} {
		var raw any
		if err := json.Unmarshal([]byte(src), &raw); err != nil {
			t.Fatal(err)
		}
		v, err := compileValue(raw, DefaultExprLimits)
		if err != nil {
			t.Fatal(err)
		}
		built := 0
		c := &Call{limits: DefaultExprLimits, mkEnv: func() map[string]any { built++; return map[string]any{"INPUT": map[string]any{"n": 2}} }}
		got, err := v.In(c)
		if err != nil || built != want {
			t.Fatalf("%s: %v, %v; environment built %d times, want %d", src, got, err, built, want)
		}
		if want == 0 {
			if lit, _ := v.Eval(nil, DefaultExprLimits); !reflect.DeepEqual(got, lit) {
				t.Fatalf("%s: %v, want %v", src, got, lit)
			}
		}
	}
}
