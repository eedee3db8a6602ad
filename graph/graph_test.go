package graph

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
)

func parse(t testing.TB, src []byte) *engine.Flow {
	t.Helper()
	f, err := engine.Parse(src, engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func readFlow(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bigFlow is a flow of n nodes: a chain of steps with a condition every fifth node that
// skips ahead, and a loop back every seventh — branches and loops, as a real flow has them.
func bigFlow(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"id":"big","start":"n0","vars":{"i":0},"nodes":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		next := fmt.Sprintf("n%d", i+1)
		switch {
		case i == n-1:
			fmt.Fprintf(&b, `{"id":"n%d","type":"end"}`, i)
		case i%5 == 0 && i+3 < n:
			fmt.Fprintf(&b, `{"id":"n%d","type":"condition","params":{"expr":"VARS.i > %d"},"branches":{"true":"%s","false":"n%d"}}`, i, i, next, i+3)
		case i%7 == 6:
			fmt.Fprintf(&b, `{"id":"n%d","type":"switch","cases":[{"when":"VARS.i < 3","next":"n%d"}],"default":"%s"}`, i, i-4, next)
		default:
			fmt.Fprintf(&b, `{"id":"n%d","type":"set","params":{"vars":{"i":"{{ VARS.i + 1 }}"}},"next":"%s"}`, i, next)
		}
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// The groups of one node and of one edge (not the groups that hold them all).
var (
	nodeRe = regexp.MustCompile(`<g class="node[ a-z]*" id=`)
	edgeRe = regexp.MustCompile(`<g class="edge[ a-z]*" data-from=`)
)

// TestSameFlowSameSVG: a flow is drawn the same, byte for byte, by two engines (two goja
// runtimes) and by one engine twice (from its cache), and every node and edge is in it.
func TestSameFlowSameSVG(t *testing.T) {
	for _, name := range []string{"expense-approval.json", "order-routing.json", "payment-wait.json", "count-to-10000.json"} {
		f := parse(t, readFlow(t, name))
		a, err := New().SVG(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		e := New()
		b, _ := e.SVG(f, nil)
		c, _ := e.SVG(f, nil)
		if !bytes.Equal(a, b) || !bytes.Equal(b, c) {
			t.Fatalf("%s: two drawings differ", name)
		}
		if got := len(nodeRe.FindAll(a, -1)); got != len(f.Nodes) {
			t.Errorf("%s: %d nodes drawn of %d", name, got, len(f.Nodes))
		}
		if got := len(edgeRe.FindAll(a, -1)); got != len(f.Edges()) {
			t.Errorf("%s: %d edges drawn of %d", name, got, len(f.Edges()))
		}
		if bytes.Contains(a, []byte("NaN")) || !bytes.HasPrefix(a, []byte("<svg ")) {
			t.Errorf("%s: not a clean SVG: %.200s", name, a)
		}
	}
}

// TestLayoutIsLayered: dagre puts every forward edge's target below its source, and a loop's
// edge goes back up — a layered picture, branches side by side.
func TestLayoutIsLayered(t *testing.T) {
	f := parse(t, bigFlow(50))
	l, err := New().Layout(f)
	if err != nil {
		t.Fatal(err)
	}
	down, up := 0, 0
	for _, e := range l.Edges {
		if l.Nodes[e.To].Y > l.Nodes[e.From].Y {
			down++
		} else {
			up++
		}
	}
	if up == 0 || down < 3*up {
		t.Fatalf("edges down %d, up %d: not layered", down, up)
	}
	for id, b := range l.Nodes {
		if b.X-b.W/2 < 0 || b.Y-b.H/2 < 0 || b.X+b.W/2 > l.Width || b.Y+b.H/2 > l.Height {
			t.Errorf("node %s %+v outside %vx%v", id, b, l.Width, l.Height)
		}
	}
}

// TestTraceMarksThePathTakenAndWhy: an expense run to an approval, then rejected: the nodes
// that ran and the edges between them (the condition's false branch, the approval's
// on_reject), picked by the reason each branching step recorded.
func TestTraceMarksThePathTakenAndWhy(t *testing.T) {
	f := parse(t, readFlow(t, "expense-approval.json"))
	mem := store.NewMemory()
	ex := &engine.Executor{Store: mem, Cancel: mem, Clock: engine.SystemClock{}, Settings: engine.DefaultSettings}
	ctx := context.Background()
	st, err := ex.Start(ctx, f, engine.StartRequest{Input: map[string]any{"amount": 500}})
	if err != nil {
		t.Fatal(err)
	}
	o := Trace(f, st)
	if o.Current != "manager_approval" || !o.Visited["small_expense"] || o.Visited["auto_approved"] {
		t.Fatalf("suspended overlay %+v", o)
	}
	svg, err := New().SVG(f, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`class="node visited" id="node-small_expense"`, `class="node visited current" id="node-manager_approval"`,
		`class="edge taken" data-from="small_expense" data-to="manager_approval" data-label="false"`} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("no %s in\n%s", want, svg)
		}
	}
	st, err = ex.Resume(ctx, f, st.ExecutionID, engine.ResumeApproval, map[string]any{"approved": false, "by": "kim", "comment": "too much"})
	if err != nil || st.Status != state.Completed {
		t.Fatalf("reject: %v %s", err, st.Status)
	}
	o = Trace(f, st)
	taken := map[string]bool{}
	for i, e := range f.Edges() {
		if o.Taken[i] {
			taken[e.From+"-"+e.Label+"->"+e.To] = true
		}
	}
	for _, want := range []string{"small_expense-false->manager_approval", "manager_approval-on_reject->notify_rejected", "notify_rejected-next->rejected"} {
		if !taken[want] {
			t.Errorf("edge %s not taken: %v", want, taken)
		}
	}
	if len(taken) != 3 || o.Current != "" || o.Failed != "" {
		t.Errorf("completed overlay: taken %v, current %q, failed %q", taken, o.Current, o.Failed)
	}
}

func TestTooLargeToDraw(t *testing.T) {
	if _, err := New().SVG(parse(t, bigFlow(MaxNodes+1)), nil); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("err %v", err)
	}
}

// BenchmarkLayout50: a fresh layout of a 50-node flow with branches and loops (the cache is
// bypassed: each iteration lays out a flow of another hash).
func BenchmarkLayout50(b *testing.B) {
	f := parse(b, bigFlow(50))
	e := New()
	if _, err := e.SVG(f, nil); err != nil { // load dagre once, outside the timing
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		f.Hash = fmt.Sprint("bench-", i)
		if _, err := e.SVG(f, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLayout50IsQuickEnough reports the figure the benchmark measures, once, in the test log.
func TestLayout50IsQuickEnough(t *testing.T) {
	f := parse(t, bigFlow(50))
	e := New()
	t0 := time.Now()
	svg, err := e.SVG(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("50 nodes, %d edges: first layout (dagre loaded) %s, %d bytes of SVG", len(f.Edges()), time.Since(t0), len(svg))
	if n := len(nodeRe.FindAll(svg, -1)); n != 50 {
		t.Fatalf("%d nodes drawn", n)
	}
}

// TestTraceCountsFromTheStateNotTheTimeline: the edges a branch took and how often come from
// the counters the state keeps, so a state whose timeline dropped those steps (a long loop)
// still draws them taken, with their counts, and each node's runs on its corner.
func TestTraceCountsFromTheStateNotTheTimeline(t *testing.T) {
	f := parse(t, readFlow(t, "expense-approval.json"))
	now := state.Stamp(time.Now())
	st := &state.Execution{ExecutionID: "ex_1", FlowID: f.ID, Status: state.Completed,
		NodeTimings: map[string]*state.NodeTiming{
			"small_expense":    {Runs: 7, FirstStart: now, LastStart: now, LastEnd: now},
			"manager_approval": {Runs: 5, FirstStart: now, LastStart: now, LastEnd: now}},
		Branches: map[string]map[string]int{"small_expense": {"false": 5, "true": 2}, "manager_approval": {"approved": 4, "rejected": 1}},
		// The steps themselves were dropped from the bounded timeline.
		TimelineDropped: 40}
	o := Trace(f, st)
	runs := map[string]int{}
	for i, e := range f.Edges() {
		if o.Taken[i] {
			runs[e.From+"-"+e.Label] = o.EdgeRuns[i]
		}
	}
	want := map[string]int{"small_expense-false": 5, "small_expense-true": 2, "manager_approval-next": 4, "manager_approval-on_reject": 1}
	if !maps.Equal(runs, want) {
		t.Errorf("edges taken %v, want %v", runs, want)
	}
	svg, err := New().SVG(f, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`data-label="false" data-runs="5"`, `data-label="on_reject" data-runs="1"`, "false ×5",
		`<g class="runs" data-runs="7">`, ">×7</text>"} {
		if !bytes.Contains(svg, []byte(s)) {
			t.Errorf("no %s in\n%s", s, svg)
		}
	}
}
