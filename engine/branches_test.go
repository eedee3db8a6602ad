package engine

import (
	"context"
	"slices"
	"strings"
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
	want := []string{"more: VARS.i < 2 is true", "more: VARS.i < 2 is true", "more: VARS.i < 2 is false",
		"pick: case 1: INPUT.kind == 'b' is true", "ask: approved by lee: fine"}
	if got := whys(h.stored(st.ExecutionID)); !slices.Equal(got, want) {
		t.Fatalf("whys %q\nwant %q", got, want)
	}

	st = h.start(f, map[string]any{"kind": "z"})
	st, err = h.ex.Resume(ctx, f, st.ExecutionID, ResumeApproval, map[string]any{"approved": false, "by": "kim"})
	if err != nil || st.CurrentNode != "no" {
		t.Fatalf("reject: %v at %s", err, st.CurrentNode)
	}
	if got := whys(st); !slices.Contains(got, "pick: no case of 2 matched: default") || !slices.Contains(got, "ask: rejected by kim") {
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

// TestWhyIsBounded: a long expression or comment is quoted cut, so a loop's timeline does not
// carry it in every entry.
func TestWhyIsBounded(t *testing.T) {
	h := newHarness(t)
	long := "VARS.x == '" + strings.Repeat("é", 300) + "'"
	f := h.flow(`{"id":"long","start":"c","vars":{"x":""},"nodes":[
		{"id":"c","type":"condition","params":{"expr":"` + long + `"},"branches":{"true":"e","false":"e"}},{"id":"e","type":"end"}]}`)
	st := h.start(f, nil)
	ws := whys(st)
	if len(ws) != 1 || len(ws[0]) > maxWhy+len("c: … is false") || !strings.HasSuffix(ws[0], "… is false") || !utf8.ValidString(ws[0]) {
		t.Fatalf("whys %q", ws)
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
