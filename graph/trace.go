package graph

import (
	"strings"

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
	// Link, when set, makes each node a link to Link(node id) (the page's row of its result).
	Link func(node string) string
}

// Trace is the overlay of st on f: the nodes that ran (node timings and the timeline), the
// edges between consecutive runs (the one whose label the step's reason names, when several
// join the same nodes), the current node of a live execution and the failed node of an error.
func Trace(f *engine.Flow, st *state.Execution) *Overlay {
	o := &Overlay{Visited: map[string]bool{}, Taken: map[int]bool{}, Timings: st.NodeTimings}
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
	switch {
	case st.Status == state.Error && st.Error != nil && st.Error.Node != "":
		o.Failed = st.Error.Node
	case !st.Status.Terminal():
		o.Current = st.CurrentNode
	}
	return o
}

// wantLabel is the edge label a run's reason names ("" when it names none).
func wantLabel(e state.TimelineEntry) string {
	w := e.Why
	switch {
	case strings.HasPrefix(w, "timed out"):
		return "on_timeout"
	case strings.HasPrefix(w, "rejected"):
		return "on_reject"
	case strings.HasPrefix(w, "case "):
		if i := strings.IndexByte(w, ':'); i > 0 {
			return w[:i]
		}
	case strings.HasPrefix(w, "no case"):
		return "default"
	case strings.HasSuffix(w, " is true"):
		return "true"
	case strings.HasSuffix(w, " is false"):
		return "false"
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
