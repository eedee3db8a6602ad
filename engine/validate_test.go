package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	flowsDir   = "../examples"
	invalidDir = "../testdata/invalid-flows"
)

// want is one expected validation problem: its exact path and a substring of its message.
type want struct {
	path string
	msg  string
}

// invalidFlow is what Parse must report for one file of testdata/invalid-flows.
type invalidFlow struct {
	problems []want // every problem, exactly: nothing missing, nothing extra
}

const allowedTop = "unknown field (allowed: id, name, description, version, timeout, repo, max_steps, start, vars, index, nodes)"

// invalidFlows has one entry per file in testdata/invalid-flows; a file without an entry fails
// TestValidateInvalidFlows.
var invalidFlows = map[string]invalidFlow{
	// Names that become key segments: a flow id on the task queue's keys, a version and an
	// event type with ':' and braces (which once reached another tenant's execution keys).
	"key-unsafe-names.json": {problems: []want{
		{"id", `"queue" is reserved: the task queue's keys live under flow:queue`},
		{"version", `"1:dlq": use letters, digits and _ . / -`},
		{"nodes[0].params.event_type", `"execution:{ex_1}": use letters, digits and _ . / -`},
	}},
	"unknown-top-level-field.json": {problems: []want{
		{"retries", allowedTop},
	}},
	"unknown-node-field.json": {problems: []want{
		{"nodes[0].then", "unknown field (allowed: id, type, name, params, next, branches, cases, default, retry)"},
	}},
	"unknown-param.json": {problems: []want{
		{"nodes[0].params.msg", "unknown field (allowed: message, level)"},
		{"nodes[0].params.message", "is required"},
	}},
	"duplicate-node-id.json": {
		problems: []want{
			{"nodes[2].id", `duplicate node id "greet" (first at nodes[0])`},
		},
	},
	"missing-start.json": {problems: []want{
		{"start", "is required"},
	}},
	"unknown-start-node.json": {problems: []want{
		{"start", `unknown node "gret"`},
	}},
	"unknown-next-target.json": {problems: []want{
		{"nodes[0].next", `unknown node "fial"`},
		{"nodes[1]", `node "fail" is unreachable from start "check"`},
	}},
	"unknown-branch-target.json": {problems: []want{
		{"nodes[1].branches.false", `unknown node "fial"`},
		{"nodes[3]", `node "fail" is unreachable from start "read"`},
	}},
	"unknown-case-target.json": {problems: []want{
		{"nodes[0].cases[1].next", `unknown node "europe"`},
	}},
	"on-timeout-without-timeout.json": {problems: []want{
		{"nodes[0].params.on_timeout", "has no effect without a timeout"},
	}},
	"unknown-on-timeout-target.json": {problems: []want{
		{"nodes[0].params.on_timeout", `unknown node "expire"`},
	}},
	"successor-on-end-node.json": {problems: []want{
		{"nodes[1]", "end nodes end the flow and cannot have successors"},
	}},
	"successor-on-fail-node.json": {problems: []want{
		{"nodes[0]", "fail nodes end the flow and cannot have successors"},
	}},
	"unreachable-node.json": {problems: []want{
		{"nodes[2]", `node "orphan" is unreachable from start "greet"`},
	}},
	"node-missing-next.json": {problems: []want{
		{"nodes[0].next", "is required: say where the flow goes after this log node"},
	}},
	"unknown-node-type.json": {
		problems: []want{
			{"nodes[0].type", `unknown node type "print" (available types: approval, condition, delay, end, fail, log, set, switch, wait_event)`},
		},
	},
	"bad-expression-syntax.json": {problems: []want{
		{"nodes[0].params.expr", `expression "INPUT.total >= (100": unexpected token EOF`},
	}},
	"unknown-identifier.json": {problems: []want{
		{"nodes[0].params.expr", `expression "INPT.x > 1": unknown name INPT`},
	}},
	"bad-retry-policy.json": {problems: []want{
		{"nodes[0].retry.max_attempts", "must be between 1 and 100"},
		{"nodes[0].retry.backoff_seconds", "must be between 0 and 3600"},
		{"nodes[0].retry.backoff_multiplier", "must be between 1 and 10"},
		{"nodes[0].retry.max_backoff_seconds", "must be between 0 and 3600"},
	}},
	"bad-id-characters.json": {problems: []want{
		{"id", `"order routing": use letters, digits, _ . - (at most 128, no spaces or colons)`},
		{"nodes[2].id", `"tenant:step": use letters, digits, _ . - (at most 128)`},
	}},
	// Indexed fields: the alphabet (no paths), duplicates, a non-string, the bound. The count
	// is of the entries given, strings or not.
	"bad-index.json": {problems: []want{
		{"index", "at most 4 fields (8 given)"},
		{"index[1]", `"order.id": name a top-level INPUT field`},
		{"index[2]", "must be a string: the name of a top-level INPUT field"},
		{"index[3]", `duplicate field "order_id" (first at index[0])`},
		{"index[4]", `"9lives": name a top-level INPUT field`},
		{"index[7]", `"a-b": name a top-level INPUT field`},
	}},
	"index-not-array.json": {problems: []want{
		{"index", "must be an array of INPUT field names"},
	}},
	"wrong-field-type.json": {problems: []want{
		{"max_steps", "must be an integer"},
	}},
	"invalid-json-syntax.json": {problems: []want{
		{"", "not a JSON object: invalid character '}' looking for beginning of object key string at line 5, column 81"},
	}},
	"condition-branch-key.json": {problems: []want{
		{"nodes[0].branches.no", `a condition has only "true" and "false" branches`},
	}},
	"switch-without-cases.json": {problems: []want{
		{"nodes[0].cases", "a switch needs at least one case"},
	}},
	"delay-seconds-and-until.json": {problems: []want{
		{"nodes[0].params", `needs exactly one of "seconds" or "until"`},
	}},
	"several-problems.json": {
		problems: []want{
			{"owner", allowedTop},
			{"id", `"refund flow": use letters, digits, _ . -`},
			{"nodes[5].id", `duplicate node id "read" (first at nodes[0])`},
			{"nodes[0].params.vars.amount", `unknown name INPT`},
			{"nodes[1].branches.false", `unknown node "fial"`},
			{"nodes[2]", "end nodes end the flow and cannot have successors"},
			{"nodes[3].params.code", "unknown field (allowed: message, type)"},
			{"nodes[4].params.seconds", "must be a non-negative number of seconds"},
			{"nodes[4].next", "is required: say where the flow goes after this delay node"},
			{"nodes[3]", `node "refuse" is unreachable from start "read"`},
			{"nodes[4]", `node "wait" is unreachable from start "read"`},
		},
		// The duplicate "read" (nodes[5], next "refund") overwrites the successors of the real
		// "read" (next "check"), as in duplicate-node-id.json.
	},
}

func TestValidateInvalidFlows(t *testing.T) {
	entries, err := os.ReadDir(invalidDir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name := e.Name()
		seen[name] = true
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			exp, ok := invalidFlows[name]
			if !ok {
				t.Fatalf("no expectation for %s: add it to invalidFlows", name)
			}
			data, err := os.ReadFile(filepath.Join(invalidDir, name))
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(data, NewRegistry(), DefaultExprLimits)
			if f != nil {
				t.Errorf("Parse returned a flow for an invalid definition")
			}
			if !errors.Is(err, ErrInvalidFlow) {
				t.Fatalf("Parse error %v does not match ErrInvalidFlow", err)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse error is %T, not *ValidationError", err)
			}
			checkProblems(t, ve.Problems, exp)
			for _, p := range ve.Problems {
				if !strings.Contains(ve.Error(), p.String()) {
					t.Errorf("Error() does not list %q:\n%s", p, ve.Error())
				}
			}
		})
	}
	for name := range invalidFlows {
		if !seen[name] {
			t.Errorf("expectation for %s, but there is no such file in %s", name, invalidDir)
		}
	}
}

// checkProblems matches every reported problem to exactly one expected problem, in any order.
func checkProblems(t *testing.T, got []Problem, exp invalidFlow) {
	t.Helper()
	matches := func(w want, p Problem) bool { return p.Path == w.path && strings.Contains(p.Message, w.msg) }
	used := make([]bool, len(got))
	claim := func(w want) bool {
		for i, p := range got {
			if !used[i] && matches(w, p) {
				used[i] = true
				return true
			}
		}
		return false
	}
	for _, w := range exp.problems {
		if !claim(w) {
			t.Errorf("missing problem %s: …%s…", w.path, w.msg)
		}
	}
	for i, p := range got {
		if !used[i] {
			t.Errorf("unexpected problem %q", p)
		}
	}
	if t.Failed() {
		t.Logf("all problems reported:")
		for _, p := range got {
			t.Logf("  %q", p)
		}
	}
}

// TestValidateSeveralProblemsAtOnce checks that one Parse call lists the problems of every
// stage (decoding, ids, targets, params, successors, reachability) together.
func TestValidateSeveralProblemsAtOnce(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(invalidDir, "several-problems.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(data, NewRegistry(), DefaultExprLimits)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Parse: %v, want a *ValidationError", err)
	}
	if ve.FlowID != "refund flow" {
		t.Errorf("FlowID = %q, want %q", ve.FlowID, "refund flow")
	}
	if n := len(invalidFlows["several-problems.json"].problems); len(ve.Problems) < n {
		t.Errorf("%d problems reported, want at least %d", len(ve.Problems), n)
	}
	if !strings.HasPrefix(ve.Error(), "invalid flow refund flow (") {
		t.Errorf("Error() = %q", ve.Error())
	}
}

func TestValidateFixtureFlowsParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(flowsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("%d flows in %s, want at least 8", len(files), flowsDir)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(data, NewRegistry(), DefaultExprLimits)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if want := strings.TrimSuffix(filepath.Base(file), ".json"); f.ID != want {
				t.Errorf("flow id %q, want the file name %q", f.ID, want)
			}
			if f.Hash == "" || f.HashAlgo != FlowHashAlgo {
				t.Errorf("hash %q / %q not set", f.Hash, f.HashAlgo)
			}
			for _, n := range f.Nodes {
				if got, ok := f.Node(n.ID); !ok || got != n {
					t.Errorf("node %q not indexed", n.ID)
				}
			}
		})
	}
}
