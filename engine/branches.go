package engine

import (
	"fmt"
	"strconv"
	"strings"

	"plaita/engine/state"
)

// Why each branch was taken, read back from an execution: the console's execution view
// (`branches` of GET /api/executions/{id}) and its execution page both show this one list
// (docs/console.md).

// Branch is one branch an execution took: at which node, why, and where the flow went.
type Branch struct {
	Seq  int             `json:"seq,omitempty" doc:"the timeline entry of the step that branched (none for a reason read from the node's result)"`
	Time state.Timestamp `json:"time,omitempty"`
	Node string          `json:"node"`
	Why  string          `json:"why" doc:"the condition and its value, the switch case, the approval's answer and who gave it, a timeout"`
	To   string          `json:"to,omitempty" doc:"the node that ran next (none while it has not)"`
	// FromContext: the state's timeline has no reason for this node (an older engine, or the
	// entry was dropped from the bounded timeline); Why is read from the node's last result
	// in NODE.<id>.
	FromContext bool `json:"from_context,omitempty"`
}

// runEvents are the timeline events that end one run of a node (or resume it).
var runEvents = map[string]bool{"step": true, "suspended": true, "resumed": true, "error": true, "retry": true}

// Runs is the sequence of node runs in st's timeline, oldest first: the entries that end (or
// resume) one run of a node. Consecutive runs are the edges an execution went along.
func Runs(st *state.Execution) []state.TimelineEntry {
	var out []state.TimelineEntry
	for _, e := range st.Timeline {
		if e.Node != "" && runEvents[e.Event] {
			out = append(out, e)
		}
	}
	return out
}

// Branches are the branches st took, oldest first: every timeline entry with a reason, and for
// a branching node of f that ran with none in the timeline, its last result from the context.
// f may be nil (its definition cannot be read): then the timeline's reasons only.
func Branches(f *Flow, st *state.Execution) []Branch {
	out := []Branch{}
	seen := map[string]bool{}
	seq := Runs(st)
	for i, e := range seq {
		if e.Why == "" {
			continue
		}
		b := Branch{Seq: e.Seq, Time: e.Time, Node: e.Node, Why: e.Why}
		for _, next := range seq[i+1:] {
			if next.Node != e.Node || next.Event == "step" {
				b.To = next.Node
				break
			}
		}
		seen[e.Node] = true
		out = append(out, b)
	}
	if f == nil {
		return out
	}
	nodes, _ := st.Context[state.ContextNodes].(map[string]any)
	for _, n := range f.Nodes {
		if seen[n.ID] {
			continue
		}
		if why := contextWhy(n, nodes[n.ID]); why != "" {
			out = append(out, Branch{Node: n.ID, Why: why, FromContext: true})
		}
	}
	return out
}

// contextWhy reads a branching node's last result: a condition's result, a switch's case, an
// approval's answer.
func contextWhy(n *Node, v any) string {
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

// BranchCounts is how many times each branching node of an execution took each of its
// branches: the console's "true × 10,000" beside a loop's condition.
type BranchCounts struct {
	// Nodes: node id → branch label (Outcome.Branch: "true", "false", "case 0", "default",
	// "approved", "rejected", "timeout"; state.BranchOther past state.MaxBranchLabels) → times.
	Nodes map[string]map[string]int `json:"nodes"`
	// FromTimeline: the state keeps no counts (an engine before them started it), so they are
	// counted from the reasons in its timeline, which keeps only the last entries: with
	// TimelineDropped > 0 the decisions of the dropped entries are missing, and the counts are
	// a lower bound.
	FromTimeline    bool `json:"from_timeline,omitempty"`
	TimelineDropped int  `json:"timeline_dropped,omitempty"`
}

// CountBranches is how often each branching node of st took each branch: the state's own
// counts (state.Execution.Branches), every decision since the start; for a state without them,
// what its timeline still says (FromTimeline). The result is a copy: st is not shared.
func CountBranches(st *state.Execution) BranchCounts {
	out := BranchCounts{Nodes: make(map[string]map[string]int, len(st.Branches))}
	if st.Branches != nil {
		for node, labels := range st.Branches {
			m := make(map[string]int, len(labels))
			for l, n := range labels {
				m[l] = n
			}
			out.Nodes[node] = m
		}
		return out
	}
	out.FromTimeline, out.TimelineDropped = true, st.TimelineDropped
	counted := &state.Execution{Branches: out.Nodes}
	for _, e := range st.Timeline {
		if e.Node != "" && e.Why != "" {
			counted.CountBranch(e.Node, BranchLabel(e.Event, e.Why))
		}
	}
	return out
}

// BranchLabel reads the label of a decision back from its timeline entry: the event, and the
// reason as nodes_control.go writes it ("" when it reads as none of them). A step's reason is a
// condition's ("<expr> is true", this engine adding " (<values>)") or a switch's ("case 2: …",
// "no case of 3 matched: default"); a resume's, an approval's answer or a timeout.
func BranchLabel(event, why string) string {
	switch event {
	case "resumed":
		for _, l := range []string{BranchApproved, BranchRejected} {
			if strings.HasPrefix(why, l) {
				return l
			}
		}
		if strings.HasPrefix(why, "timed out") {
			return BranchTimeout
		}
	case "step", "suspended":
		if rest, ok := strings.CutPrefix(why, "case "); ok {
			if n, _, ok := strings.Cut(rest, ":"); ok {
				if i, err := strconv.Atoi(n); err == nil && i >= 0 {
					return caseLabel(i)
				}
			}
		}
		if strings.HasPrefix(why, "no case of ") && strings.Contains(why, " matched: default") {
			return BranchDefault
		}
		// The first " is true" or " is false" that ends the reason or opens its values: an
		// expression quoting those words in a string literal is read wrong, an approximation
		// FromTimeline owns to.
		label, at := "", len(why)
		for _, b := range []string{"true", "false"} {
			w := " is " + b
			if strings.HasSuffix(why, w) && len(why)-len(w) < at {
				label, at = b, len(why)-len(w)
			}
			if i := strings.Index(why, w+" ("); i >= 0 && i < at {
				label, at = b, i
			}
		}
		return label
	}
	return ""
}
