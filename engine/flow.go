// Package engine holds the flow model, its validation and hash, expression evaluation, the
// executor and the control nodes. It is pure Go with no Redis: storage plugs in behind the
// Storage interface and node types behind the Registry.
package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Flow is a parsed flow definition (the JSON users write).
type Flow struct {
	ID          string         `json:"id"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Version     string         `json:"version,omitempty"`
	Timeout     float64        `json:"timeout,omitempty"`   // seconds; 0 = PLAITA_EXECUTION_DEADLINE_SECONDS
	Repo        string         `json:"repo,omitempty"`      // workspace affinity
	MaxSteps    int            `json:"max_steps,omitempty"` // 0 = DefaultMaxSteps
	Start       string         `json:"start"`
	Vars        map[string]any `json:"vars,omitempty"` // initial VARS
	// Index names the top-level INPUT fields its executions are listed by (index.go).
	Index []string `json:"index,omitempty"`
	Nodes []*Node  `json:"nodes"`

	// Hash and HashAlgo identify the definition (see FlowHash).
	Hash     string `json:"-"`
	HashAlgo string `json:"-"`
	// Warnings are what is valid but worth telling the author, each with its JSON path: a
	// wait_event whose match has no correlation term (correlation.go).
	Warnings []Problem `json:"-"`

	byID map[string]*Node // the nodes by id
	// sources are the expressions of every node, as written (ExampleEvent reads them).
	sources []string
}

// Node is one step of a flow.
type Node struct {
	ID       string            `json:"id"`
	Type     string            `json:"type"`
	Name     string            `json:"name,omitempty"`
	Params   json.RawMessage   `json:"params,omitempty"`
	Next     string            `json:"next,omitempty"`
	Branches map[string]string `json:"branches,omitempty"` // condition: "true" / "false"
	Cases    []Case            `json:"cases,omitempty"`    // switch
	Default  string            `json:"default,omitempty"`  // switch
	Retry    *RetryPolicy      `json:"retry,omitempty"`

	path   string // JSON path, for errors: nodes[3]
	runner Runner // prepared once per flow version
	// params are the successors its params name (on_timeout, on_reject), from Prepare.
	params []edge
}

// Case is one arm of a switch node.
type Case struct {
	When string `json:"when"`
	Next string `json:"next"`
}

// RetryPolicy says how often a failing node is tried again, and how long to wait between tries.
type RetryPolicy struct {
	MaxAttempts       int     `json:"max_attempts"`
	BackoffSeconds    float64 `json:"backoff_seconds,omitempty"`
	BackoffMultiplier float64 `json:"backoff_multiplier,omitempty"` // default 1 (constant backoff)
	MaxBackoffSeconds float64 `json:"max_backoff_seconds,omitempty"`
}

// StartsInstantly reports whether the flow's first step is a control node (set, condition,
// switch, log, fail, end, or one that suspends: delay, wait_event, approval): it evaluates
// expressions and returns within microseconds, so the state saved at its end is the first a
// reader needs to see. A first step that calls out (http, code, file, an external node) can
// take minutes, and the worker writes the new state before it (see roles/worker begin).
func (f *Flow) StartsInstantly() bool {
	n, ok := f.Node(f.Start)
	return ok && n.instant()
}

// instantRunner marks the control nodes' runners.
type instantRunner interface{ instant() }

// instant reports whether the node is a control node (see StartsInstantly).
func (n *Node) instant() bool {
	_, ok := n.runner.(instantRunner)
	return ok
}

// Node returns the node with that id.
func (f *Flow) Node(id string) (*Node, bool) {
	n, ok := f.byID[id]
	return n, ok
}

// Path is the node's JSON path in its flow, e.g. nodes[3].
func (n *Node) Path() string { return n.path }

// Edge is one way from a node to another: its label says which ("next", "true", "case 0",
// "default", "on_timeout", "on_reject").
type Edge struct {
	From, To, Label string
}

// Edges are the flow's edges in a fixed order (node order, then next, branches by name, cases,
// default, the params' successors): what a picture of the flow draws, and the same for the
// same definition every time.
func (f *Flow) Edges() []Edge {
	var out []Edge
	for _, n := range f.Nodes {
		add := func(to, label string) {
			if to != "" {
				out = append(out, Edge{From: n.ID, To: to, Label: label})
			}
		}
		add(n.Next, "next")
		for _, k := range sortedKeys(n.Branches) {
			add(n.Branches[k], k)
		}
		for i, c := range n.Cases {
			add(c.Next, caseLabel(i))
		}
		add(n.Default, BranchDefault)
		for _, e := range n.params {
			add(e.target, e.path[strings.LastIndexByte(e.path, '.')+1:])
		}
	}
	return out
}

// Problem is one thing wrong with a flow definition, located by its JSON path.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ErrInvalidFlow is what every flow validation failure matches with errors.Is.
var ErrInvalidFlow = errors.New("invalid flow")

// ValidationError lists every problem of a flow at once.
type ValidationError struct {
	FlowID   string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	n := len(e.Problems)
	name := e.FlowID
	if name == "" {
		name = "(no id)"
	}
	fmt.Fprintf(&b, "invalid flow %s (%d problem%s):", name, n, map[bool]string{true: "", false: "s"}[n == 1])
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

func (e *ValidationError) Unwrap() error { return ErrInvalidFlow }

// problems collects validation problems.
type problems []Problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

var (
	flowFields = []string{"id", "name", "description", "version", "timeout", "repo", "max_steps", "start", "vars", "index", "nodes"}
	nodeFields = []string{"id", "type", "name", "params", "next", "branches", "cases", "default", "retry"}
)

// decodeFlow parses the JSON strictly: unknown fields and wrong types are problems with their
// paths, and parsing goes on so that every problem is reported together.
func decodeFlow(data []byte) (*Flow, problems) {
	var ps problems
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		ps.add("", "not a JSON object: %s", jsonErrorText(data, err))
		return nil, ps
	}
	if top == nil {
		ps.add("", "not a JSON object")
		return nil, ps
	}
	f := &Flow{}
	unknownFields(&ps, "", top, flowFields)
	field(&ps, top, "", "id", &f.ID, "a string")
	field(&ps, top, "", "name", &f.Name, "a string")
	field(&ps, top, "", "description", &f.Description, "a string")
	field(&ps, top, "", "version", &f.Version, "a string")
	field(&ps, top, "", "timeout", &f.Timeout, "a number of seconds")
	field(&ps, top, "", "repo", &f.Repo, "a string")
	field(&ps, top, "", "max_steps", &f.MaxSteps, "an integer")
	field(&ps, top, "", "start", &f.Start, "a string")
	field(&ps, top, "", "vars", &f.Vars, "an object")
	decodeIndex(&ps, top, f)
	var rawNodes []json.RawMessage
	field(&ps, top, "", "nodes", &rawNodes, "an array of nodes")
	for i, raw := range rawNodes {
		path := fmt.Sprintf("nodes[%d]", i)
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			ps.add(path, "must be an object")
			continue
		}
		n := &Node{path: path}
		unknownFields(&ps, path, obj, nodeFields)
		field(&ps, obj, path, "id", &n.ID, "a string")
		field(&ps, obj, path, "type", &n.Type, "a string")
		field(&ps, obj, path, "name", &n.Name, "a string")
		if p, ok := obj["params"]; ok && !bytes.Equal(bytes.TrimSpace(p), []byte("null")) {
			if t := bytes.TrimSpace(p); len(t) == 0 || t[0] != '{' {
				ps.add(path+".params", "must be an object")
			} else {
				n.Params = p
			}
		}
		field(&ps, obj, path, "next", &n.Next, "a string")
		field(&ps, obj, path, "branches", &n.Branches, "an object of node ids")
		field(&ps, obj, path, "default", &n.Default, "a string")
		if raw, ok := obj["cases"]; ok {
			var cases []map[string]json.RawMessage
			if err := json.Unmarshal(raw, &cases); err != nil {
				ps.add(path+".cases", "must be an array of {when, next}")
			}
			for j, c := range cases {
				cp := fmt.Sprintf("%s.cases[%d]", path, j)
				unknownFields(&ps, cp, c, []string{"when", "next"})
				var k Case
				field(&ps, c, cp, "when", &k.When, "a string")
				field(&ps, c, cp, "next", &k.Next, "a string")
				n.Cases = append(n.Cases, k)
			}
		}
		if raw, ok := obj["retry"]; ok {
			var r map[string]json.RawMessage
			if err := json.Unmarshal(raw, &r); err != nil || r == nil {
				ps.add(path+".retry", "must be an object")
			} else {
				rp := path + ".retry"
				unknownFields(&ps, rp, r, []string{"max_attempts", "backoff_seconds", "backoff_multiplier", "max_backoff_seconds"})
				n.Retry = &RetryPolicy{}
				field(&ps, r, rp, "max_attempts", &n.Retry.MaxAttempts, "an integer")
				field(&ps, r, rp, "backoff_seconds", &n.Retry.BackoffSeconds, "a number of seconds")
				field(&ps, r, rp, "backoff_multiplier", &n.Retry.BackoffMultiplier, "a number")
				field(&ps, r, rp, "max_backoff_seconds", &n.Retry.MaxBackoffSeconds, "a number of seconds")
			}
		}
		f.Nodes = append(f.Nodes, n)
	}
	return f, ps
}

func field(ps *problems, obj map[string]json.RawMessage, path, name string, into any, want string) {
	raw, ok := obj[name]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return
	}
	if err := json.Unmarshal(raw, into); err != nil {
		ps.add(join(path, name), "must be %s", want)
	}
}

func unknownFields(ps *problems, path string, obj map[string]json.RawMessage, known []string) {
	var unknown []string
	for k := range obj {
		found := false
		for _, x := range known {
			if k == x {
				found = true
				break
			}
		}
		if !found {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		ps.add(join(path, k), "unknown field (allowed: %s)", strings.Join(known, ", "))
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// jsonErrorText adds a line and column to a JSON syntax error.
func jsonErrorText(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := 1, 1
		for _, c := range data[:min(int(se.Offset), len(data))] {
			if c == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		return fmt.Sprintf("%s at line %d, column %d", se.Error(), line, col)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "the document is " + te.Value + ", not an object"
	}
	return err.Error()
}
