package graph

import (
	"plaita/engine"
	"plaita/engine/state"
)

// Overlay is what an execution adds to its flow's picture.
type Overlay struct {
	Visited map[string]bool
	Taken   map[int]bool // by index in Flow.Edges
	Current string       // where a live execution stands (running, suspended)
	Failed  string       // the node of an execution's error
	Timings map[string]*state.NodeTiming
	// EdgeRuns counts the times each branch edge was taken (by index in Flow.Edges), from the
	// counters the state keeps (engine.CountBranches; a lower bound read from the timeline for
	// a state written before them).
	EdgeRuns map[int]int
	// Link, when set, makes each node a link to Link(node id) (the page's row of its result).
	Link func(node string) string
}

// Trace is the overlay of st on f: the nodes that ran (node timings and the timeline), the
// edges between consecutive runs (the one whose label the step's reason names, when several
// join the same nodes), the current node of a live execution and the failed node of an error.
func Trace(f *engine.Flow, st *state.Execution) *Overlay {
	o := &Overlay{Visited: map[string]bool{}, Taken: map[int]bool{}, Timings: st.NodeTimings, EdgeRuns: map[int]int{}}
	for id := range st.NodeTimings {
		if _, ok := f.Node(id); ok {
			o.Visited[id] = true
		}
	}
	edges := f.Edges()
	seq := engine.Runs(st)
	for i := 0; i+1 < len(seq); i++ {
		from, to := seq[i], seq[i+1]
		if from.Node == to.Node && to.Event != "step" && to.Event != "suspended" {
			continue // a resume or a retry of the same node is no edge
		}
		if k := pick(edges, from.Node, to.Node, wantLabel(from)); k >= 0 {
			o.Taken[k] = true
		}
	}
	// The branches' counts: every edge a branch was taken along, however long ago the
	// timeline dropped the step.
	for node, labels := range engine.CountBranches(st).Nodes {
		for label, n := range labels {
			if k := labelEdge(edges, node, branchEdge(label)); k >= 0 && n > 0 {
				o.EdgeRuns[k] += n
				o.Taken[k] = true
			}
		}
	}
	switch {
	case st.Status == state.Error && st.Error != nil && st.Error.Node != "":
		o.Failed = st.Error.Node
	case !st.Status.Terminal():
		o.Current = st.CurrentNode
	}
	return o
}

// branchEdge is the label of the edge a branch counter's label names: the same for a
// condition's and a switch's; an approval's answers and a timeout leave by next, on_reject
// and on_timeout.
func branchEdge(branch string) string {
	switch branch {
	case engine.BranchApproved:
		return "next"
	case engine.BranchRejected:
		return "on_reject"
	case engine.BranchTimeout:
		return "on_timeout"
	}
	return branch
}

// labelEdge is the index of the edge from node labelled label; -1 for none.
func labelEdge(edges []engine.Edge, node, label string) int {
	for i, e := range edges {
		if e.From == node && e.Label == label {
			return i
		}
	}
	return -1
}

// wantLabel is the edge label a run's reason names ("" when it names none): the branch the
// engine reads back from it (engine.BranchLabel), as its edge is labelled.
func wantLabel(e state.TimelineEntry) string {
	if b := engine.BranchLabel(e.Event, e.Why); b != "" {
		return branchEdge(b)
	}
	return ""
}

// pick is the index of the edge from → to, preferring the one labelled label; -1 for none.
func pick(edges []engine.Edge, from, to, label string) int {
	found := -1
	for i, e := range edges {
		if e.From != from || e.To != to {
			continue
		}
		if label == "" || e.Label == label {
			return i
		}
		if found < 0 {
			found = i
		}
	}
	return found
}
