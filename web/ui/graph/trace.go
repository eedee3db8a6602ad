package graph

import (
	"fmt"
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
}

// Decision is one branch taken: at which node, why, and where the flow went.
type Decision struct {
	Seq  int
	Time state.Timestamp
	Node string
	Why  string
	To   string // the node that ran next ("" while it has not)
	// FromContext: the state's timeline has no reason (an older engine, or the entry was
	// dropped); Why is read from the node's last result in NODE.<id>.
	FromContext bool
}

// runEvents are the timeline events that end one run of a node (or resume it).
var runEvents = map[string]bool{"step": true, "suspended": true, "resumed": true}

// runs is the sequence of node runs in the timeline, with the entry of each.
func runs(st *state.Execution) []state.TimelineEntry {
	var out []state.TimelineEntry
	for _, e := range st.Timeline {
		if e.Node != "" && (runEvents[e.Event] || (e.Event == "error" || e.Event == "retry")) {
			out = append(out, e)
		}
	}
	return out
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
	seq := runs(st)
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

// Decisions are the branches st took, oldest first: every timeline entry with a reason, and
// for a branching node that ran with none in the timeline, its last result from the context.
func Decisions(f *engine.Flow, st *state.Execution) []Decision {
	var out []Decision
	seen := map[string]bool{}
	seq := runs(st)
	for i, e := range seq {
		if e.Why == "" {
			continue
		}
		d := Decision{Seq: e.Seq, Time: e.Time, Node: e.Node, Why: e.Why}
		for _, next := range seq[i+1:] {
			if next.Node != e.Node || next.Event == "step" {
				d.To = next.Node
				break
			}
		}
		seen[e.Node] = true
		out = append(out, d)
	}
	nodes, _ := st.Context[state.ContextNodes].(map[string]any)
	for _, n := range f.Nodes {
		if seen[n.ID] {
			continue
		}
		if why := contextWhy(n, nodes[n.ID]); why != "" {
			out = append(out, Decision{Node: n.ID, Why: why, FromContext: true})
		}
	}
	return out
}

// contextWhy reads a branching node's last result: a condition's result, a switch's case, an
// approval's answer.
func contextWhy(n *engine.Node, v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	switch n.Type {
	case "condition":
		if b, ok := m["result"].(bool); ok {
			return fmt.Sprintf("the condition was %t", b)
		}
	case "switch":
		if c, ok := m["case"]; ok && c != nil {
			return fmt.Sprintf("case %v", c)
		}
	case "approval", "wait_event":
		if t, _ := m["timed_out"].(bool); t {
			return "timed out"
		}
		if a, ok := m["approved"].(bool); ok {
			why := map[bool]string{true: "approved", false: "rejected"}[a]
			if by, _ := m["by"].(string); by != "" {
				why += " by " + by
			}
			return why
		}
	}
	return ""
}
