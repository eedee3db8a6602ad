package engine

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
)

// corrFlow is a flow that waits for event type "pay" with match, then ends.
func corrFlow(match string) string {
	m, _ := json.Marshal(match)
	return `{"id":"c","start":"w","vars":{"order":"A1","n":1},"nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"pay","match":` + string(m) + `},"next":"e"},
		{"id":"e","type":"end"}]}`
}

// The forms a term takes, and the ones that are none: a top-level conjunct EVENT.<path> ==
// <a value not read from EVENT>, either side, in && (and) chains and parentheses.
func TestCorrelationTermsOfAMatch(t *testing.T) {
	for _, tc := range []struct {
		match string
		want  []string // the paths, joined by "/"
	}{
		{"EVENT.order_id == VARS.order", []string{"order_id"}},
		{"VARS.order == EVENT.order_id", []string{"order_id"}},
		{"EVENT.data.order.id == INPUT.id", []string{"data/order/id"}},
		{`EVENT["order-id"] == INPUT.id`, []string{"order-id"}},
		{"EVENT?.a?.b == INPUT.id", []string{"a/b"}},
		{"EVENT.a == INPUT.a && EVENT.b == 'x'", []string{"a", "b"}},
		{"(EVENT.a == INPUT.a and (EVENT.status == 'paid' && EVENT.amount > 10))", []string{"a", "status"}},
		{"EVENT.amount > 10 && EVENT.id == VARS.order", []string{"id"}},
		{"EVENT.id == 1 + VARS.n * 2", []string{"id"}},
		// Not terms: no conjunct at the top, the other side reads EVENT, inequalities, a
		// default on the EVENT side, time-dependent values.
		{"EVENT.a == INPUT.a || EVENT.b == INPUT.b", nil},
		{"!(EVENT.a != INPUT.a)", nil},
		{"EVENT.a == EVENT.b", nil},
		{"EVENT.a == $env.EVENT.b", nil},
		{`EVENT.a == $env["INPUT"].a`, nil},
		{"EVENT.a != INPUT.a", nil},
		{"EVENT.a in [1, 2]", nil},
		{"(EVENT.a ?? 'x') == INPUT.a", nil},
		{"EVENT[INPUT.k] == 1", nil},
		{"EVENT.day == string(now())", nil},
		{"EVENT.day == date('2026-01-01').Year()", nil},
		{"EVENT.tz == string(timezone('UTC'))", nil},
		{"EVENT.amount > 10", nil},
		{`EVENT["\xff"] == INPUT.id`, []string{"ÿ"}}, // expr reads \xff as the rune U+00FF
		{"true", nil},
	} {
		f, err := Parse([]byte(corrFlow(tc.match)), NewRegistry(), DefaultExprLimits)
		if err != nil {
			t.Fatalf("%s: %v", tc.match, err)
		}
		n, _ := f.Node("w")
		var got []string
		for _, term := range n.runner.(*waitEventNode).terms {
			got = append(got, strings.Join(term.path, "/"))
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: terms %v, want %v", tc.match, got, tc.want)
		}
		// The validation warning says exactly when there is none.
		warned := len(f.Warnings) == 1 && f.Warnings[0].Path == "nodes[0].params.match" &&
			strings.Contains(f.Warnings[0].Message, `every event of type "pay" is checked against each execution waiting here`)
		if warned != (len(tc.want) == 0) || len(f.Warnings) > 1 {
			t.Errorf("%s: warnings %v", tc.match, f.Warnings)
		}
	}
	// A field that is not UTF-8 is no key of any event (JSON's are), and its path could not be
	// spelled in the index.
	if validPath([]string{"a", "\xff"}) || !validPath([]string{"a", "ÿ"}) {
		t.Error("validPath")
	}
	// A wait without a match takes every event of its type: nothing to narrow, nothing said.
	f, err := Parse([]byte(`{"id":"c","start":"w","nodes":[{"id":"w","type":"wait_event","params":{"event_type":"tick"},"next":"e"},{"id":"e","type":"end"}]}`), NewRegistry(), DefaultExprLimits)
	if err != nil || len(f.Warnings) != 0 {
		t.Fatalf("no match: %v, warnings %v", err, f.Warnings)
	}
}

// Canonical forms: equal under == means the same form; null, objects, arrays, NaN and
// infinities have none.
func TestCorrelationValueIsCanonicalUnderEquality(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
		ok   bool
	}{
		{1, "1", true}, {1.0, "1", true}, {int64(1), "1", true}, {uint8(1), "1", true}, {float32(1), "1", true},
		{"1", `"1"`, true}, {true, "true", true}, {false, "false", true},
		{math.Copysign(0, -1), "0", true}, {0, "0", true}, {1.5, "1.5", true}, {-2.25, "-2.25", true},
		{int64(1) << 60, "1152921504606847000", true}, {int64(1)<<53 + 1, "9007199254740992", true}, {1e21, "1e+21", true},
		{"<a&b>", `"<a&b>"`, true}, {"é", `"é"`, true},
		{nil, "", false}, {map[string]any{"a": 1}, "", false}, {[]any{1}, "", false},
		{math.NaN(), "", false}, {math.Inf(1), "", false}, {json.Number("1"), "", false}, {time.Now(), "", false},
	} {
		got, ok := state.CorrelationValue(tc.v)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%#v: %q %v, want %q %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
	long := strings.Repeat("x", state.MaxCorrelationValue)
	got, ok := state.CorrelationValue(long)
	if !ok || len(got) != 65 || got[0] != '#' {
		t.Fatalf("a long value is %q", got)
	}
	if other, _ := state.CorrelationValue(long + "y"); other == got {
		t.Fatal("two long values share a digest")
	}
	data := map[string]any{"a": map[string]any{"b": 2.0, "n": nil}, "s": "x"}
	for path, want := range map[string]string{"a/b": "2", "s": `"x"`, "a/n": "", "a/x": "", "s/y": "", "a": ""} {
		got, _ := state.CorrelationValueAt(data, strings.Split(path, "/"))
		if got != want {
			t.Errorf("at %s: %q, want %q", path, got, want)
		}
	}
}

// The values kept at the suspension: each term with a canonical value, in the order written;
// a null or an object leaves its term out (an uncorrelated wait when none is left).
func TestSuspensionKeepsTheTermValues(t *testing.T) {
	for _, tc := range []struct {
		match string
		input any
		want  []state.Correlation
	}{
		{"EVENT.order_id == VARS.order", nil, []state.Correlation{{Path: []string{"order_id"}, Value: `"A1"`}}},
		{"EVENT.n == INPUT.n && EVENT.o == VARS.order", map[string]any{"n": 1.0}, []state.Correlation{
			{Path: []string{"n"}, Value: "1"}, {Path: []string{"o"}, Value: `"A1"`}}},
		{"INPUT.s == EVENT.x.y", map[string]any{"s": "1"}, []state.Correlation{{Path: []string{"x", "y"}, Value: `"1"`}}},
		{"EVENT.n == INPUT.missing", map[string]any{}, nil},
		{"EVENT.n == INPUT.obj", map[string]any{"obj": map[string]any{"a": 1.0}}, nil},
		{"EVENT.n == INPUT.obj && EVENT.m == 2.0", map[string]any{"obj": nil}, []state.Correlation{{Path: []string{"m"}, Value: "2"}}},
		{"EVENT.n == INPUT.a.b", map[string]any{}, nil}, // the side fails: no value
		// The environment is the resume check's: the step is counted.
		{"EVENT.step == EXECUTION.step_count && EVENT.node == EXECUTION.node", nil, []state.Correlation{
			{Path: []string{"step"}, Value: "1"}, {Path: []string{"node"}, Value: `"w"`}}},
	} {
		h := newHarness(t)
		f := h.flow(corrFlow(tc.match))
		st := h.start(f, tc.input)
		wantStatus(t, st, state.Suspended)
		if got := h.stored(st.ExecutionID).Suspend.Correlation; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.match, got, tc.want)
		}
	}
	h := newHarness(t)
	f := h.flow(corrFlow("EVENT.step == EXECUTION.step_count"))
	st := h.start(f, nil)
	if err := CheckResume(f, h.stored(st.ExecutionID), ResumeEvent, map[string]any{"step": 1.0}, h.set.Expr, time.Now()); err != nil {
		t.Fatalf("the event with the kept value is refused: %v", err)
	}
}

// A loop that waits twice at one node keeps each suspension's own value, and a second copy
// of the first wake-up (the same carrier) is refused by the second suspension even though
// its data would match it.
func TestEventCarrierRefusesAWakeUpOfAnEarlierSuspension(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"loop","start":"w","vars":{"round":1},"nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"pay","match":"EVENT.round == VARS.round || EVENT.any == true"},"next":"inc"},
		{"id":"inc","type":"set","params":{"vars":{"round":"{{ VARS.round + 1 }}"}},"next":"c"},
		{"id":"c","type":"condition","params":{"expr":"VARS.round > 2"},"branches":{"true":"e","false":"w"}},
		{"id":"e","type":"end"}]}`)
	st := h.start(f, nil)
	first := st.Suspend.Since
	key := EventCarrier("evt1", first)
	if !strings.HasPrefix(key, "event:evt1:") {
		t.Fatalf("carrier %q", key)
	}
	ev := map[string]any{"any": true}
	h.clock.Advance(time.Second)
	st, err := h.ex.ResumeWith(t.Context(), f, ResumeRequest{ExecutionID: st.ExecutionID, Type: ResumeEvent, Data: ev, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, st, state.Suspended)
	if st.Suspend.Since.Equal(first) {
		t.Fatal("the second suspension has the first one's since")
	}
	_, err = h.ex.ResumeWith(t.Context(), f, ResumeRequest{ExecutionID: st.ExecutionID, Type: ResumeEvent, Data: ev, Key: key})
	if err == nil || !strings.Contains(err.Error(), "the event's wake-up was sent for the suspension that began at") {
		t.Fatalf("the copy: %v", err)
	}
	// Without a mark (an older filter), or with this suspension's mark, it is taken.
	for _, k := range []string{"event:evt1", EventCarrier("evt2", st.Suspend.Since)} {
		if err := CheckResume(f, h.stored(st.ExecutionID), ResumeEvent, ev, h.set.Expr, time.Now()); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if _, ok := eventCarrierSuspension(k); ok != strings.Contains(k, "evt2") {
			t.Errorf("%s: mark read %v", k, ok)
		}
	}
	done, err := h.ex.ResumeWith(t.Context(), f, ResumeRequest{ExecutionID: st.ExecutionID, Type: ResumeEvent, Data: ev,
		Key: EventCarrier("evt2", st.Suspend.Since)})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, done, state.Completed)
	// Each resumed entry names the event that woke the wait (its carrier's).
	var woke []string
	for _, e := range done.Timeline {
		if e.Event == "resumed" {
			woke = append(woke, e.Detail)
		}
	}
	if !slices.Equal(woke, []string{"event evt1", "event evt2"}) {
		t.Errorf("the resumed entries: %q", woke)
	}
	if !WokenBy(done, "evt1") || !WokenBy(done, "evt2") || WokenBy(done, "evt3") {
		t.Error("WokenBy does not read the resumed entries")
	}
	// A timeline that dropped the entry: the last resume's carrier still says it.
	done.Timeline = nil
	if !WokenBy(done, "evt2") || WokenBy(done, "evt1") {
		t.Error("WokenBy does not read the last resume")
	}
}

// FuzzCorrelationIndexNeverHidesAMatch: for matches built from random conjuncts and random
// values, an event the match accepts always carries, at the path of the wait's first kept
// term, the very canonical value the wait is indexed under — the index never hides a match.
// (The index is keyed by (type, path, canonical value) and a lookup uses the event's
// canonical value at that path: store/keys.Space.SubscriptionBucket.)
func FuzzCorrelationIndexNeverHidesAMatch(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint8(2), uint8(3), "A1", 1.0, true, uint8(0))
	f.Add(uint8(5), uint8(4), uint8(9), uint8(7), "1", 1.0, false, uint8(3))
	f.Add(uint8(2), uint8(2), uint8(2), uint8(2), "", math.Copysign(0, -1), true, uint8(6))
	f.Add(uint8(11), uint8(6), uint8(0), uint8(8), "x", 9007199254740993.0, false, uint8(1))
	reg := NewRegistry()
	f.Fuzz(func(t *testing.T, a, b, c, d uint8, s string, n float64, flag bool, evShape uint8) {
		// The wait's values (INPUT) and the event's, drawn from a small world so that they
		// meet often.
		values := []any{s, n, flag, nil, map[string]any{"k": s}, []any{n}, "1", 1.0, int64(n), -n, float64(int64(n)) + 0.5}
		pick := func(i uint8) any { return values[int(i)%len(values)] }
		paths := []string{"EVENT.a", "EVENT.b.c", `EVENT["a"]`, "EVENT?.b?.c"}
		sides := []string{"INPUT.x", "INPUT.y", "INPUT.x + 0", "1", `"1"`, "true", "INPUT.obj"}
		conj := func(i uint8) string {
			p, v := paths[int(i)%len(paths)], sides[int(i/4)%len(sides)]
			switch i % 5 {
			case 0:
				return v + " == " + p
			case 1:
				return p + " != " + v
			default:
				return p + " == " + v
			}
		}
		match := conj(a) + " && (" + conj(b) + " and " + conj(c) + ")"
		if d%3 == 0 {
			match = conj(d) + " && " + match
		}
		flow, err := Parse([]byte(corrFlow(match)), reg, DefaultExprLimits)
		if err != nil {
			t.Fatalf("%s: %v", match, err)
		}
		h := newHarness(t)
		x, y := pick(a^b), pick(c^d)
		input := map[string]any{"x": x, "y": y, "obj": pick(d)}
		st, err := h.ex.Start(t.Context(), flow, StartRequest{Input: input})
		if err != nil {
			// The input is not a document a state holds (a NaN): nothing to index.
			return
		}
		wantStatus(t, st, state.Suspended)
		terms := h.stored(st.ExecutionID).Suspend.Correlation
		ev := map[string]any{"a": pick(evShape), "b": map[string]any{"c": pick(evShape / 3)}}
		if evShape%7 == 0 {
			ev["a"] = x
		}
		if evShape%5 == 0 {
			ev["b"] = map[string]any{"c": y}
		}
		data, err := normalize(ev)
		if err != nil {
			return
		}
		if CheckResume(flow, h.stored(st.ExecutionID), ResumeEvent, data, DefaultExprLimits, time.Now()) != nil {
			return // the match refuses the event: nothing to find
		}
		if len(terms) == 0 {
			return // uncorrelated: the wait is checked against every event
		}
		got, ok := state.CorrelationValueAt(data, terms[0].Path)
		if !ok || got != terms[0].Value {
			t.Fatalf("match %s with input %v accepts event %v, but its value at %v is %q (%v), the wait is indexed under %q",
				match, input, data, terms[0].Path, got, ok, terms[0].Value)
		}
		for _, term := range terms[1:] {
			if got, _ := state.CorrelationValueAt(data, term.Path); got != term.Value {
				t.Fatalf("match %s accepts event %v whose value at %v is %q, not the term's %q", match, data, term.Path, got, term.Value)
			}
		}
	})
}
