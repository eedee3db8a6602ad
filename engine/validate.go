package engine

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"

	"plaita/engine/state"
)

// Limits of a flow definition.
const (
	DefaultMaxSteps = 100_000    // steps of one execution when the flow sets no max_steps
	MaxMaxSteps     = 10_000_000 // the largest max_steps a flow may set
	MaxNodes        = 10_000
	MaxRetries      = 100
	MaxBackoff      = 3600 // seconds
	// MaxFlowBytes bounds a definition: what `plaita start` reads from a file and what a
	// publish stores. Real flows are a few kilobytes; this leaves room for embedded code.
	MaxFlowBytes = 4 << 20
)

var (
	flowIDRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	nodeIDRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	// nameRe is the alphabet of names that become Redis key segments (versions, event types):
	// the same rule as store/keys.ValidName, which checks again where the key is built.
	nameRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./-]{0,127}$`)
)

// reservedFlowIDs would put a flow's keys on top of the task queue's default keys
// (<root>:flow:queue is the stream, <root>:flow:queue:dlq its dead-letter stream).
var reservedFlowIDs = []string{"queue"}

// checkFlowDocument refuses, before anything is decoded, a definition over MaxFlowBytes or
// nested deeper than every document plaita takes in (state.MaxDocumentDepth): its parameters
// and vars end up in execution states.
func checkFlowDocument(data []byte) (Problem, bool) {
	if len(data) > MaxFlowBytes {
		return Problem{Message: fmt.Sprintf("the definition is %d bytes, above the %d-byte bound", len(data), MaxFlowBytes)}, false
	}
	var de *state.DocumentError
	if err := state.CheckDepth(data); errors.As(err, &de) && errors.Is(err, state.ErrTooDeep) {
		return Problem{Path: de.Path, Message: fmt.Sprintf("objects and arrays nest deeper than %d levels", state.MaxDocumentDepth)}, false
	}
	return Problem{}, true
}

// Parse reads a flow definition, validates it completely and prepares every node. All problems
// are reported together in a *ValidationError, each with its JSON path.
func Parse(data []byte, reg *Registry, lim ExprLimits) (*Flow, error) {
	if p, ok := checkFlowDocument(data); !ok {
		return nil, &ValidationError{Problems: []Problem{p}}
	}
	f, ps := decodeFlow(data)
	if f == nil {
		return nil, &ValidationError{Problems: ps}
	}
	validate(f, reg, lim, &ps)
	if len(ps) > 0 {
		return nil, &ValidationError{FlowID: f.ID, Problems: ps}
	}
	hash, err := FlowHash(data)
	if err != nil {
		return nil, &ValidationError{FlowID: f.ID, Problems: []Problem{{Message: err.Error()}}}
	}
	f.Hash, f.HashAlgo = hash, FlowHashAlgo
	return f, nil
}

func validate(f *Flow, reg *Registry, lim ExprLimits, ps *problems) {
	switch {
	case f.ID == "":
		ps.add("id", "is required")
	case !flowIDRe.MatchString(f.ID):
		ps.add("id", "%q: use letters, digits, _ . - (at most 128, no spaces or colons)", f.ID)
	case slices.Contains(reservedFlowIDs, f.ID):
		ps.add("id", "%q is reserved: the task queue's keys live under flow:%s", f.ID, f.ID)
	}
	if f.Version != "" && !nameRe.MatchString(f.Version) {
		ps.add("version", "%q: use letters, digits and _ . / - (at most 128; no ':', braces or spaces)", f.Version)
	}
	if math.IsNaN(f.Timeout) || math.IsInf(f.Timeout, 0) || f.Timeout < 0 {
		ps.add("timeout", "must be a non-negative number of seconds")
	}
	if f.Timeout > MaxWaitSeconds { // a run's deadline is computed as a due time is (nodes_control.go)
		ps.add("timeout", "must be at most %d seconds (3650 days)", MaxWaitSeconds)
	}
	if f.MaxSteps < 0 || f.MaxSteps > MaxMaxSteps {
		ps.add("max_steps", "must be between 1 and %d (0 or absent = %d)", MaxMaxSteps, DefaultMaxSteps)
	}
	if len(f.Nodes) == 0 {
		ps.add("nodes", "a flow needs at least one node")
	}
	if len(f.Nodes) > MaxNodes {
		ps.add("nodes", "at most %d nodes", MaxNodes)
	}
	f.byID = map[string]*Node{}
	for _, n := range f.Nodes {
		switch {
		case n.ID == "":
			ps.add(n.path+".id", "is required")
		case !nodeIDRe.MatchString(n.ID):
			ps.add(n.path+".id", "%q: use letters, digits, _ . - (at most 128)", n.ID)
		case f.byID[n.ID] != nil:
			ps.add(n.path+".id", "duplicate node id %q (first at %s)", n.ID, f.byID[n.ID].path)
		default:
			f.byID[n.ID] = n
		}
	}
	switch {
	case f.Start == "":
		ps.add("start", "is required")
	case f.byID[f.Start] == nil:
		ps.add("start", "unknown node %q", f.Start)
	}

	target := func(path, id string) {
		if id != "" && f.byID[id] == nil {
			ps.add(path, "unknown node %q", id)
		}
	}
	succ := map[string][]string{}
	for _, n := range f.Nodes {
		nt, ok := reg.lookup(n.Type)
		switch {
		case n.Type == "":
			ps.add(n.path+".type", "is required")
		case !ok:
			ps.add(n.path+".type", "unknown node type %q (available types: %s)", n.Type, strings.Join(reg.Types(), ", "))
		}
		target(n.path+".next", n.Next)
		target(n.path+".default", n.Default)
		for _, k := range sortedKeys(n.Branches) {
			target(n.path+".branches."+k, n.Branches[k])
		}
		for i, c := range n.Cases {
			target(fmt.Sprintf("%s.cases[%d].next", n.path, i), c.Next)
		}
		validateRetry(n, ps)
		var next []string
		for _, s := range append([]string{n.Next, n.Default}, branchTargets(n)...) {
			if s != "" {
				next = append(next, s)
			}
		}
		// A duplicate's successors must not replace those of the node that owns the id.
		owner := f.byID[n.ID] == n
		if owner {
			succ[n.ID] = next
		}
		if !ok {
			continue // no params to check; its successors still count for reachability
		}
		pc := &PrepareContext{node: n, ps: ps, warns: (*problems)(&f.Warnings), limits: lim, sources: &f.sources}
		n.runner = nt.Prepare(n, pc)
		n.params = pc.edges
		for _, e := range pc.edges {
			target(e.path, e.target)
			next = append(next, e.target)
		}
		if owner {
			succ[n.ID] = next
		}
		term, isTerm := nt.(Terminal)
		_, branches := nt.(branching)
		switch {
		case isTerm && term.Terminal() && len(next) > 0:
			ps.add(n.path, "%s nodes end the flow and cannot have successors", n.Type)
		case !(isTerm && term.Terminal()) && !branches && n.Next == "":
			ps.add(n.path+".next", "is required: say where the flow goes after this %s node (end the flow with an end node)", n.Type)
		}
		if !branches {
			if len(n.Branches) > 0 {
				ps.add(n.path+".branches", "only condition nodes have branches")
			}
			if len(n.Cases) > 0 || n.Default != "" {
				ps.add(n.path+".cases", "only switch nodes have cases and default")
			}
		}
	}
	if f.byID[f.Start] != nil {
		seen := map[string]bool{f.Start: true}
		queue := []string{f.Start}
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			for _, s := range succ[id] {
				if !seen[s] && f.byID[s] != nil {
					seen[s] = true
					queue = append(queue, s)
				}
			}
		}
		for _, n := range f.Nodes {
			if n.ID != "" && !seen[n.ID] && f.byID[n.ID] == n {
				ps.add(n.path, "node %q is unreachable from start %q", n.ID, f.Start)
			}
		}
	}
}

// branching marks node types whose successors come from branches or cases, not next.
type branching interface{ branching() }

func branchTargets(n *Node) []string {
	var out []string
	for _, k := range sortedKeys(n.Branches) {
		out = append(out, n.Branches[k])
	}
	for _, c := range n.Cases {
		out = append(out, c.Next)
	}
	return out
}

func validateRetry(n *Node, ps *problems) {
	r := n.Retry
	if r == nil {
		return
	}
	p := n.path + ".retry"
	if r.MaxAttempts < 1 || r.MaxAttempts > MaxRetries {
		ps.add(p+".max_attempts", "must be between 1 and %d", MaxRetries)
	}
	if !(r.BackoffSeconds >= 0 && r.BackoffSeconds <= MaxBackoff) {
		ps.add(p+".backoff_seconds", "must be between 0 and %d", MaxBackoff)
	}
	if r.BackoffMultiplier != 0 && !(r.BackoffMultiplier >= 1 && r.BackoffMultiplier <= 10) {
		ps.add(p+".backoff_multiplier", "must be between 1 and 10")
	}
	if !(r.MaxBackoffSeconds >= 0 && r.MaxBackoffSeconds <= MaxBackoff) {
		ps.add(p+".max_backoff_seconds", "must be between 0 and %d", MaxBackoff)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
