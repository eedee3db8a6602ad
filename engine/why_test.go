package engine

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"plaita/engine/state"
)

// TestOperandsOf: the values a reason quotes are the outermost reads of the environment, in
// order of appearance, each once, at most four; never a function, a builtin, a literal, a
// closure's own names, or the whole expression.
func TestOperandsOf(t *testing.T) {
	cases := []struct {
		src  string
		want []string
	}{
		{"INPUT.amount > 1000", []string{"INPUT.amount"}},
		{"VARS.count >= 3 && NODE.fetch.status == 200", []string{"VARS.count", "NODE.fetch.status"}},
		{"NODE.fetch.body.items[0].id == INPUT.id", []string{"NODE.fetch.body.items[0].id", "INPUT.id"}},
		{"NODE[VARS.which].ok == true", []string{"NODE[VARS.which].ok"}},
		{"len(VARS.items) > 0 && upper(INPUT.name) == 'X'", []string{"VARS.items", "INPUT.name"}},
		{"all(VARS.items, {.n > INPUT.min}) && any(VARS.xs, # > 1)", []string{"VARS.items", "INPUT.min", "VARS.xs"}},
		{"(INPUT?.a?.b ?? 0) > 1", []string{"INPUT?.a?.b"}},
		{"$NODE.x.y == EVENT.z", []string{"$NODE.x.y", "EVENT.z"}},
		{"EVENT != nil", []string{"EVENT"}},
		{"let x = INPUT.a; x > VARS.b", []string{"INPUT.a", "VARS.b"}},
		{"INPUT.a > 1 && INPUT.a < 5", []string{"INPUT.a"}},
		{"INPUT.a + INPUT.b + INPUT.c + INPUT.d + INPUT.e > 0", []string{"INPUT.a", "INPUT.b", "INPUT.c", "INPUT.d"}},
		{"EXECUTION.attempt > 1", []string{"EXECUTION.attempt"}},
		{"VARS.ok", nil},
		{"!VARS.ok", []string{"VARS.ok"}},
		{"true", nil},
		{"1 < 2 && 'a' in ['a']", nil},
	}
	for _, c := range cases {
		var got []string
		for _, o := range operandsOf(c.src) {
			got = append(got, o.name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: operands %q, want %q", c.src, got, c.want)
		}
	}
}

// TestWhyQuotesTheValuesRead: a condition's and a switch's reason end with the values the
// expression read, as JSON, in order of appearance; one that cannot be read (INPUT.a.b with no
// INPUT.a, which || skipped) is left out, and the branch is the one the expression decides.
func TestWhyQuotesTheValuesRead(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"vals","start":"seed","nodes":[
		{"id":"seed","type":"set","params":{"vars":{"count":3,"tags":["a","b"],"obj":{"b":1,"a":[1,"x"]}}},"next":"big"},
		{"id":"big","type":"condition","params":{"expr":"INPUT.amount > 1000"},"branches":{"true":"many","false":"many"}},
		{"id":"many","type":"condition","params":{"expr":"VARS.count >= 3 && NODE.seed.tags[0] == 'a' && VARS.obj != nil && INPUT.user.name != ''"},"branches":{"true":"safe","false":"safe"}},
		{"id":"safe","type":"condition","params":{"expr":"INPUT.a == nil || INPUT.a.b > 1"},"branches":{"true":"pick","false":"e"}},
		{"id":"pick","type":"switch","cases":[{"when":"INPUT.kind == 'a'","next":"e"},{"when":"VARS.count > 5","next":"e"}],"default":"e"},
		{"id":"e","type":"end"}]}`)
	st := h.start(f, map[string]any{"amount": 1200, "user": map[string]any{"name": `Zoë "Z"`}, "kind": "b"})
	wantStatus(t, st, state.Completed)
	want := []string{
		"big: INPUT.amount > 1000 is true (INPUT.amount = 1200)",
		`many: VARS.count >= 3 && NODE.seed.tags[0] == 'a' && VARS.obj != nil && INPUT.user.name != '' is true (VARS.count = 3, NODE.seed.tags[0] = "a", VARS.obj = {"a":[1,"x"],"b":1}, INPUT.user.name = "Zoë \"Z\"")`,
		"safe: INPUT.a == nil || INPUT.a.b > 1 is true (INPUT.a = null)",
		`pick: no case of 2 matched: default (INPUT.kind = "b", VARS.count = 3)`,
	}
	if got := whys(h.stored(st.ExecutionID)); !slices.Equal(got, want) {
		t.Fatalf("whys\n%q\nwant\n%q", got, want)
	}
	for _, e := range st.Timeline {
		if e.Node == "safe" && e.Event == "step" && e.Detail != "→ pick" {
			t.Fatalf("the unreadable operand changed the branch: %+v", e)
		}
	}
}

// TestWhyValuesAreBounded: a large value is quoted by its first bytes — an object of many keys by
// its size — so the reason stays short whatever the state holds, and reads the same each time.
func TestWhyValuesAreBounded(t *testing.T) {
	h := newHarness(t)
	wide := map[string]any{}
	for _, k := range strings.Split("a b c d e f g h i j k l m n o p q r s t", " ") {
		wide[k] = 1
	}
	input := map[string]any{"s": strings.Repeat("€", 1<<18), "wide": wide, "list": make([]any, 10000)}
	f := h.flow(`{"id":"bounded","start":"c","nodes":[
		{"id":"c","type":"condition","params":{"expr":"INPUT.s != '' && INPUT.wide != nil && len(INPUT.list) > 0"},"branches":{"true":"e","false":"e"}},
		{"id":"e","type":"end"}]}`)
	var first string
	for range 3 {
		st := h.start(f, input)
		why := st.Timeline[1].Why
		if first == "" {
			first = why
		}
		if why != first {
			t.Fatalf("the same values read differently:\n%q\n%q", why, first)
		}
	}
	want := `INPUT.s != '' && INPUT.wide != nil && len(INPUT.list) > 0 is true (INPUT.s = "` + strings.Repeat("€", 19) + `…, INPUT.wide = {… 20 keys}, INPUT.list = [null,null,`
	if !strings.HasPrefix(first, want) || !strings.HasSuffix(first, "…)") || len(first) > 2*maxWhy || !utf8.ValidString(first) {
		t.Fatalf("why (%d bytes)\n%q\nwant it to begin\n%q", len(first), first, want)
	}
}

// TestCompactJSON: values quoted as encoding/json writes them (keys sorted, no HTML escaping
// needed for reading), cut to the budget on a rune boundary.
func TestCompactJSON(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{nil, "null"},
		{true, "true"},
		{1200.0, "1200"},
		{-0.5, "-0.5"},
		{1e21, "1e+21"},
		{3, "3"},
		{"a\"b\\c\nd\x01<", `"a\"b\\c\nd\u0001<"`},
		{map[string]any{"b": 2.0, "a": []any{1.0, "x"}}, `{"a":[1,"x"],"b":2}`},
		{map[string]any{}, "{}"},
		{[]any{}, "[]"},
		{strings.Repeat("x", 100), `"` + strings.Repeat("x", 19) + "…"},
		{strings.Repeat("é", 100), `"` + strings.Repeat("é", 9) + "…"},
		{[]any{"aaaaaaaa", "bbbbbbbb", "cccccccc"}, `["aaaaaaaa","bbbbbbb…`},
	}
	for _, c := range cases {
		if got := compactJSON(c.v, 20); got != c.want {
			t.Errorf("compactJSON(%#v) = %q, want %q", c.v, got, c.want)
		}
		// What fits is exactly what encoding/json writes.
		if b, err := json.Marshal(c.v); err == nil && len(b) <= 20 && !strings.ContainsAny(string(b), "<>&") && string(b) != c.want {
			t.Errorf("compactJSON(%#v) = %q, encoding/json %s", c.v, c.want, b)
		}
	}
}

// TestLookupAgreesWithTheVM: a path operand read by walking the maps reads what the VM reads —
// the value, nil for a missing key, nothing for a key of nil unless ?. — and one the walk does
// not take (a string on the way) falls back to the VM.
func TestLookupAgreesWithTheVM(t *testing.T) {
	envs := []map[string]any{
		{"INPUT": map[string]any{}, "VARS": map[string]any{}, "EVENT": nil},
		{"INPUT": map[string]any{"a": nil}, "VARS": map[string]any{"n": 1.5}, "EVENT": map[string]any{"a": map[string]any{"b": "x"}}},
		{"INPUT": map[string]any{"a": map[string]any{"b": []any{1.0}}}, "VARS": map[string]any{"n": map[string]any{"m": nil}}, "EVENT": "text"},
		{"INPUT": map[string]any{"a": "str", "b": true}, "VARS": nil, "EVENT": map[string]any{}},
	}
	srcs := []string{"INPUT.a.b", "INPUT?.a?.b", "INPUT.a?.b", "VARS.n", "VARS.n.m", "VARS?.n?.m?.z", "EVENT", "EVENT.a.b", "EVENT?.a",
		"INPUT.missing", "INPUT.missing.deeper", "INPUT.b"}
	for _, src := range srcs {
		ops := operandsOf(src + " != 0")
		if len(ops) != 1 || ops[0].path == nil {
			t.Fatalf("%s: operands %+v, want one path", src, ops)
		}
		for i, env := range envs {
			got, gotOK := ops[0].value(env, DefaultExprLimits)
			want, err := ops[0].expr.run(env, DefaultExprLimits)
			if gotOK != (err == nil) || (gotOK && !reflect.DeepEqual(got, want)) {
				t.Errorf("%s in env %d: %v (%v), the VM %v (%v)", src, i, got, gotOK, want, err)
			}
		}
	}
}
