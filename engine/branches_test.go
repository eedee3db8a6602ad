package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"plaita/engine/state"
)

// whys are the timeline's branch reasons, as node: why.
func whys(st *state.Execution) []string {
	var out []string
	for _, e := range st.Timeline {
		if e.Why != "" {
			out = append(out, e.Node+": "+e.Why)
		}
	}
	return out
}

// TestTimelineSaysWhyEachBranchWasTaken: a condition's value, the matching switch case (or the
// default), an approval's answer with who gave it, and a timeout are each recorded in the
// timeline entry of the step that branched — for every pass of a loop, not only the last.
func TestTimelineSaysWhyEachBranchWasTaken(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	f := h.flow(`{"id":"why","start":"more","vars":{"i":0},"nodes":[
		{"id":"more","type":"condition","params":{"expr":"VARS.i < 2"},"branches":{"true":"inc","false":"pick"}},
		{"id":"inc","type":"set","params":{"vars":{"i":"{{ VARS.i + 1 }}"}},"next":"more"},
		{"id":"pick","type":"switch","cases":[{"when":"INPUT.kind == 'a'","next":"ask"},{"when":"INPUT.kind == 'b'","next":"ask"}],"default":"ask"},
		{"id":"ask","type":"approval","params":{"timeout":60,"on_timeout":"late","on_reject":"no"},"next":"yes"},
		{"id":"yes","type":"end"},{"id":"no","type":"end"},{"id":"late","type":"end"}]}`)

	st := h.start(f, map[string]any{"kind": "b"})
	wantStatus(t, st, state.Suspended)
	st, err := h.ex.Resume(ctx, f, st.ExecutionID, ResumeApproval, map[string]any{"approved": true, "by": "lee", "comment": "fine"})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, st, state.Completed)
	want := []string{"more: VARS.i < 2 is true (VARS.i = 0)", "more: VARS.i < 2 is true (VARS.i = 1)", "more: VARS.i < 2 is false (VARS.i = 2)",
		`pick: case 1: INPUT.kind == 'b' is true (INPUT.kind = "b")`, "ask: approved by lee: fine"}
	if got := whys(h.stored(st.ExecutionID)); !slices.Equal(got, want) {
		t.Fatalf("whys %q\nwant %q", got, want)
	}

	st = h.start(f, map[string]any{"kind": "z"})
	st, err = h.ex.Resume(ctx, f, st.ExecutionID, ResumeApproval, map[string]any{"approved": false, "by": "kim"})
	if err != nil || st.CurrentNode != "no" {
		t.Fatalf("reject: %v at %s", err, st.CurrentNode)
	}
	if got := whys(st); !slices.Contains(got, `pick: no case of 2 matched: default (INPUT.kind = "z")`) || !slices.Contains(got, "ask: rejected by kim") {
		t.Fatalf("whys %q", got)
	}

	st = h.start(f, map[string]any{"kind": "a"})
	if st, err = h.ex.Resume(ctx, f, st.ExecutionID, ResumeTimeout, nil); err != nil || st.CurrentNode != "late" {
		t.Fatalf("timeout: %v at %s", err, st.CurrentNode)
	}
	if got := whys(st); !slices.Contains(got, "ask: timed out: on_timeout") {
		t.Fatalf("whys %q", got)
	}
}

// TestFlowEdges: every way out of every node, params' successors included, in a fixed order.
func TestFlowEdges(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"edges","start":"c","nodes":[
		{"id":"c","type":"condition","params":{"expr":"true"},"branches":{"true":"s","false":"w"}},
		{"id":"s","type":"switch","cases":[{"when":"true","next":"a"}],"default":"w"},
		{"id":"w","type":"wait_event","params":{"event_type":"e","timeout":5,"on_timeout":"a"},"next":"a"},
		{"id":"a","type":"approval","params":{"on_reject":"c"},"next":"e"},
		{"id":"e","type":"end"}]}`)
	want := []Edge{{"c", "w", "false"}, {"c", "s", "true"}, {"s", "a", "case 0"}, {"s", "w", "default"},
		{"w", "a", "next"}, {"w", "a", "on_timeout"}, {"a", "e", "next"}, {"a", "c", "on_reject"}}
	if got := f.Edges(); !slices.Equal(got, want) {
		t.Fatalf("edges %v\nwant %v", got, want)
	}
}

// TestWhyIsBounded: a long expression or comment is quoted cut, and so are the values it read,
// so a loop's timeline does not carry them in every entry.
func TestWhyIsBounded(t *testing.T) {
	h := newHarness(t)
	long := "VARS.x == '" + strings.Repeat("é", 300) + "'"
	f := h.flow(`{"id":"long","start":"c","vars":{"x":""},"nodes":[
		{"id":"c","type":"condition","params":{"expr":"` + long + `"},"branches":{"true":"e","false":"e"}},{"id":"e","type":"end"}]}`)
	st := h.start(f, nil)
	ws := whys(st)
	if len(ws) != 1 || len(ws[0]) > maxWhy+len(`c: … is false (VARS.x = "")`) || !strings.HasSuffix(ws[0], `… is false (VARS.x = "")`) || !utf8.ValidString(ws[0]) {
		t.Fatalf("whys %q", ws)
	}

	// Four long names whose values are long: each value is cut, and the list of them too.
	var conds []string
	vars := map[string]any{}
	for i := range 4 {
		name := fmt.Sprintf("v%d_%s", i, strings.Repeat("n", 80))
		vars[name] = strings.Repeat("ü", 5000)
		conds = append(conds, fmt.Sprintf("VARS.%s != ''", name))
	}
	vj, _ := json.Marshal(vars)
	f = h.flow(`{"id":"wide","start":"c","vars":` + string(vj) + `,"nodes":[
		{"id":"c","type":"condition","params":{"expr":"` + strings.Join(conds, " && ") + `"},"branches":{"true":"e","false":"e"}},{"id":"e","type":"end"}]}`)
	st = h.start(f, nil)
	why := st.Timeline[1].Why
	expr, values, ok := strings.Cut(why, " is true (")
	if !ok || !strings.HasSuffix(expr, "…") || len(expr) > maxWhy+len("…") || len(values) > maxWhy+len("…)") ||
		!strings.HasPrefix(values, "VARS.v0_nnn") || !strings.Contains(values, `= "üü`) || !utf8.ValidString(why) {
		t.Fatalf("why (%d bytes) %q", len(why), why)
	}
}

// TestBranchesSayWhereEachWent: the branches an execution took, oldest first, each with its
// reason and the node that ran next (a loop's condition once per pass); a suspended
// approval's branch has no next node until it is answered.
func TestBranchesSayWhereEachWent(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"br","start":"more","vars":{"i":0},"nodes":[
		{"id":"more","type":"condition","params":{"expr":"VARS.i < 1"},"branches":{"true":"inc","false":"ask"}},
		{"id":"inc","type":"set","params":{"vars":{"i":"{{ VARS.i + 1 }}"}},"next":"more"},
		{"id":"ask","type":"approval","params":{"on_reject":"no"},"next":"yes"},
		{"id":"yes","type":"end"},{"id":"no","type":"end"}]}`)
	st := h.start(f, nil)
	got := Branches(f, h.stored(st.ExecutionID))
	if len(got) != 2 || got[0].Node != "more" || got[0].To != "inc" || got[1].To != "ask" || got[0].Seq >= got[1].Seq || got[0].FromContext {
		t.Fatalf("suspended: %+v", got)
	}
	st, err := h.ex.Resume(context.Background(), f, st.ExecutionID, ResumeApproval, map[string]any{"approved": false, "by": "kim"})
	if err != nil {
		t.Fatal(err)
	}
	got = Branches(f, h.stored(st.ExecutionID))
	if len(got) != 3 || got[2].Node != "ask" || got[2].Why != "rejected by kim" || got[2].To != "no" {
		t.Fatalf("completed: %+v", got)
	}
	// Without the definition: the timeline's reasons all the same.
	if n := len(Branches(nil, h.stored(st.ExecutionID))); n != 3 {
		t.Fatalf("without the flow: %d branches", n)
	}
}

// TestBranchesFromAnOlderState: a state whose timeline has no reasons (an engine before them)
// still says what its branching nodes decided, from their results.
func TestBranchesFromAnOlderState(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"old","start":"c","nodes":[
		{"id":"c","type":"condition","params":{"expr":"true"},"branches":{"true":"s","false":"a"}},
		{"id":"a","type":"approval","next":"e"},{"id":"s","type":"switch","cases":[{"when":"true","next":"a"}],"default":"e"},{"id":"e","type":"end"}]}`)
	st := &state.Execution{Status: state.Completed, Context: map[string]any{state.ContextNodes: map[string]any{
		"c": map[string]any{"result": false}, "a": map[string]any{"approved": true, "by": "lee"}, "s": map[string]any{"case": 0}}}}
	got := Branches(f, st)
	want := []string{"the condition was false", "approved by lee", "case 0"}
	if len(got) != len(want) {
		t.Fatalf("branches %+v", got)
	}
	for i, b := range got {
		if b.Why != want[i] || !b.FromContext {
			t.Fatalf("branch %d: %+v, want %q from the context", i, b, want[i])
		}
	}
	if got := Branches(nil, st); len(got) != 0 {
		t.Fatalf("without the flow and reasons: %+v", got)
	}
}

// TestBranchCountsOutliveTheTimeline: a condition decided 1,000 times in a timeline that keeps
// 50 entries is counted exactly, and the counts add up to its runs; read from the trimmed
// timeline instead (a state without counts) they are a flagged lower bound.
func TestBranchCountsOutliveTheTimeline(t *testing.T) {
	h := newHarness(t)
	h.set.TimelineMax = 50
	st := h.start(h.flow(loopFlow(1000)), map[string]any{"kind": "go"})
	wantStatus(t, st, state.Completed)
	stored := h.stored(st.ExecutionID)
	if stored.TimelineDropped < 1900 {
		t.Fatalf("the timeline kept %d entries and dropped %d: the test needs it trimmed", len(stored.Timeline), stored.TimelineDropped)
	}
	got := CountBranches(stored)
	want := map[string]map[string]int{"more": {"true": 1000, "false": 1}}
	if got.FromTimeline || !reflect.DeepEqual(got.Nodes, want) {
		t.Fatalf("counts %+v, want %v from the state", got, want)
	}
	if runs := stored.NodeTimings["more"].Runs; runs != 1001 {
		t.Fatalf("the condition ran %d times", runs)
	}

	stored.Branches = nil
	old := CountBranches(stored)
	if !old.FromTimeline || old.TimelineDropped != stored.TimelineDropped || old.Nodes["more"]["false"] != 1 ||
		old.Nodes["more"]["true"] < 1 || old.Nodes["more"]["true"] > 25 {
		t.Fatalf("from the trimmed timeline: %+v", old)
	}
}

// TestBranchCountsFromTheTimelineMatchTheState: with nothing dropped, the timeline's reasons —
// values and all — read back as the labels the state counted, for every kind of decision.
func TestBranchCountsFromTheTimelineMatchTheState(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	f := h.flow(`{"id":"all","start":"more","vars":{"i":0},"nodes":[
		{"id":"more","type":"condition","params":{"expr":"VARS.i < 3"},"branches":{"true":"inc","false":"pick"}},
		{"id":"inc","type":"set","params":{"vars":{"i":"{{ VARS.i + 1 }}"}},"next":"more"},
		{"id":"pick","type":"switch","cases":[{"when":"INPUT.kind == 'a'","next":"ask"},{"when":"INPUT.kind == 'b'","next":"ask"}],"default":"ask"},
		{"id":"ask","type":"approval","params":{"timeout":60,"on_timeout":"wait","on_reject":"wait"},"next":"wait"},
		{"id":"wait","type":"wait_event","params":{"event_type":"go","timeout":60,"on_timeout":"e"},"next":"e"},
		{"id":"e","type":"end"}]}`)
	resume := func(st *state.Execution, rt ResumeType, data any) *state.Execution {
		t.Helper()
		st, err := h.ex.Resume(ctx, f, st.ExecutionID, rt, data)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	runs := []struct {
		kind    string
		answer  ResumeType
		approve bool
		want    map[string]map[string]int
	}{
		{"a", ResumeApproval, true, map[string]map[string]int{"more": {"true": 3, "false": 1}, "pick": {"case 0": 1}, "ask": {"approved": 1}, "wait": {"timeout": 1}}},
		{"b", ResumeApproval, false, map[string]map[string]int{"more": {"true": 3, "false": 1}, "pick": {"case 1": 1}, "ask": {"rejected": 1}, "wait": {"timeout": 1}}},
		{"z", ResumeTimeout, false, map[string]map[string]int{"more": {"true": 3, "false": 1}, "pick": {"default": 1}, "ask": {"timeout": 1}, "wait": {"timeout": 1}}},
	}
	for _, r := range runs {
		st := h.start(f, map[string]any{"kind": r.kind})
		st = resume(st, r.answer, map[string]any{"approved": r.approve, "by": "lee"})
		st = resume(st, ResumeTimeout, nil)
		wantStatus(t, st, state.Completed)
		stored := h.stored(st.ExecutionID)
		if got := CountBranches(stored); got.FromTimeline || !reflect.DeepEqual(got.Nodes, r.want) {
			t.Fatalf("kind %s: counts %+v, want %v", r.kind, got, r.want)
		}
		stored.Branches = nil
		if got := CountBranches(stored); !got.FromTimeline || got.TimelineDropped != 0 || !reflect.DeepEqual(got.Nodes, r.want) {
			t.Fatalf("kind %s: from the timeline %+v, want %v", r.kind, got, r.want)
		}
	}
}

// TestBranchLabelReadsReasons: the reasons of an engine before the values, of
// this one, and what is no decision.
func TestBranchLabelReadsReasons(t *testing.T) {
	cases := []struct{ event, why, want string }{
		{"step", "VARS.i < 2 is true", "true"},
		{"step", "VARS.i < 2 is false", "false"},
		{"step", "VARS.i < 2 is false (VARS.i = 2)", "false"},
		{"step", `INPUT.s == "x is true" is false (INPUT.s = "y is true (z)")`, "false"},
		{"step", "VARS.x == 'ééé…' is true", "true"},
		{"step", "case 12: INPUT.k == 'a' is true (INPUT.k = \"a\")", "case 12"},
		{"step", "no case of 3 matched: default", "default"},
		{"step", `no case of 3 matched: default (INPUT.k = "q")`, "default"},
		{"resumed", "approved", "approved"},
		{"resumed", "approved by lee: fine", "approved"},
		{"resumed", "rejected by kim", "rejected"},
		{"resumed", "timed out: on_timeout", "timeout"},
		{"resumed", "timed out", "timeout"},
		{"step", "something else", ""},
		{"resumed", "VARS.i < 2 is true", ""},
		{"log", "approved", ""},
	}
	for _, c := range cases {
		if got := BranchLabel(c.event, c.why); got != c.want {
			t.Errorf("BranchLabel(%s, %q) = %q, want %q", c.event, c.why, got, c.want)
		}
	}
}

// TestBranchCountsAfterRedelivery: a decision is counted as its node's run is — a step whose
// save failed runs again from the checkpoint and is counted once, and a resume redelivered
// after its worker died is not counted again.
func TestBranchCountsAfterRedelivery(t *testing.T) {
	t.Run("step", func(t *testing.T) {
		h := newHarness(t)
		// The run's one save, at e's end: control steps are saved together with the next one.
		fs := &failSave{Memory: h.mem, n: 1, err: errors.New("redis: connection reset")}
		h.ex.Store = fs
		f := h.flow(`{"id":"rd","start":"s","nodes":[{"id":"s","type":"set","params":{"vars":{"x":1}},"next":"c"},
			{"id":"c","type":"condition","params":{"expr":"VARS.x == 1"},"branches":{"true":"e","false":"e"}},{"id":"e","type":"end"}]}`)
		id := NewExecutionID()
		if _, err := h.ex.Start(context.Background(), f, StartRequest{ExecutionID: id}); err == nil {
			t.Fatal("the failed save must surface")
		}
		st, err := h.ex.Start(context.Background(), f, StartRequest{ExecutionID: id})
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, st, state.Completed)
		stored := h.stored(id)
		if n, runs := stored.Branches["c"]["true"], stored.NodeTimings["c"].Runs; n != 1 || runs != 1 {
			t.Fatalf("counted %d, ran %d: want once each", n, runs)
		}
	})
	t.Run("resume", func(t *testing.T) {
		h := newHarness(t)
		var armed atomic.Bool
		h.reg.Register("gate", gateType{&armed})
		f := h.flow(`{"id":"rr","start":"w","nodes":[{"id":"w","type":"approval","next":"g"},{"id":"g","type":"gate","next":"e"},{"id":"e","type":"end"}]}`)
		id := h.start(f, nil).ExecutionID
		armed.Store(true)
		ctx, kill := context.WithCancel(context.Background())
		done := make(chan error, 1)
		answer := map[string]any{"approved": true}
		go func() {
			_, err := h.ex.ResumeWith(ctx, f, ResumeRequest{ExecutionID: id, Type: ResumeApproval, Data: answer, Key: "1-1"})
			done <- err
		}()
		waitFor(t, func() bool { return h.stored(id).CurrentNode == "g" })
		kill()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("killed run: %v", err)
		}
		if n := h.stored(id).Branches["w"]["approved"]; n != 1 {
			t.Fatalf("the applied answer counted %d times", n)
		}
		armed.Store(false)
		st, err := h.ex.ResumeWith(context.Background(), f, ResumeRequest{ExecutionID: id, Type: ResumeApproval, Data: answer, Key: "1-1"})
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, st, state.Completed)
		if got := h.stored(id).Branches; !reflect.DeepEqual(got, map[string]map[string]int{"w": {"approved": 1}}) {
			t.Fatalf("after the redelivery: %v", got)
		}
	})
}

// TestOlderStateKeepsItsCountsUnknown: a state an engine before the counts started has no
// "branches"; continued by this engine it is not counted from the middle, and its counts are
// read from its timeline, flagged as such.
func TestOlderStateKeepsItsCountsUnknown(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"older","start":"c","nodes":[
		{"id":"c","type":"condition","params":{"expr":"true"},"branches":{"true":"ask","false":"ask"}},
		{"id":"ask","type":"approval","next":"e"},{"id":"e","type":"end"}]}`)
	st := h.start(f, nil)
	wantStatus(t, st, state.Suspended)
	// What the older engine saved: the same state without the field.
	b, err := json.Marshal(h.stored(st.ExecutionID))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "branches")
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if _, err := h.mem.Put(b); err != nil {
		t.Fatal(err)
	}
	st, err = h.ex.Resume(context.Background(), f, st.ExecutionID, ResumeApproval, map[string]any{"approved": true, "by": "lee"})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, st, state.Completed)
	stored := h.stored(st.ExecutionID)
	if stored.Branches != nil {
		t.Fatalf("counted from the middle: %v", stored.Branches)
	}
	got := CountBranches(stored)
	want := map[string]map[string]int{"c": {"true": 1}, "ask": {"approved": 1}}
	if !got.FromTimeline || got.TimelineDropped != 0 || !reflect.DeepEqual(got.Nodes, want) {
		t.Fatalf("counts %+v, want %v from the timeline", got, want)
	}
}
