// Package external resolves node types that are not built in to executables
// `plaita-node-<type>` found in the directories of PLAITA_NODE_PATH, and runs them with a
// JSON protocol over stdin and stdout.
//
// Protocol (see testdata/external/README.md for a worked example):
//
//	stdin  (one JSON object): {"node": {"id", "type", "params"}, "input": <params with templates rendered>,
//	                           "execution": {"id", "tenant_id", "flow_id", "step"}}
//	stdout (one JSON object): {"output": <any JSON>, "error": "optional message", "retryable": optional bool}
//
// "params" is the node's params as written in the flow (templates unrendered); "input" is the
// same object with every {{ template }} evaluated. "step" is the 1-based number of this step in
// the execution. A non-empty "error" fails the node: permanently unless "retryable" is true (a
// retryable error is retried by the node's retry policy). A non-zero exit status is a retryable
// error carrying the end of stderr; stdout that is not exactly one JSON object is a permanent
// protocol error. Anything written to stderr is only used for error messages.
//
// The executable runs like the code node's subprocess backend (package sandbox): its own
// process group, killed as a whole on the timeout (param "timeout", seconds, default 60), on
// cancellation and after it exits; an environment reduced to PATH, HOME (a fresh temporary
// working directory, removed afterwards), LANG, LC_ALL and TZ; stdout bounded to 1 MiB; no
// access to the worker's environment, memory or open files (a root worker that cannot give it a
// user namespace fails the node permanently instead of running it). The param "timeout" is read
// by the engine and also passed on in params and input.
//
// External executables are installed by the operator and trusted like the worker itself: they
// run for every tenant. Type names are restricted to [a-z0-9_-] (at most 64), so a name can never
// leave the configured directories.
package external

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"plaita/engine"
	"plaita/engine/nodes/sandbox"
)

// Prefix of external node executables.
const Prefix = "plaita-node-"

// Timeouts of external nodes.
const (
	DefaultTimeout = 60 * time.Second
	MaxTimeout     = time.Hour
)

var nameRe = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// ValidName reports whether name may name an external node type.
func ValidName(name string) bool { return nameRe.MatchString(name) }

// Options are the operator's settings of external nodes, fixed when Resolver runs.
type Options struct {
	// Paths are the directories searched for plaita-node-<type> executables, in order
	// (PLAITA_NODE_PATH); empty entries are skipped, none = no external node types.
	Paths []string
	// DefaultTimeout bounds a node without a "timeout" param; 0 or negative = DefaultTimeout.
	DefaultTimeout time.Duration
}

type resolver struct {
	dirs    []string
	log     zerolog.Logger
	timeout time.Duration
	sandbox sandbox.Options
}

// Resolver returns a lookup for engine.Registry.SetFallback: name → the executable
// plaita-node-<name> in the first of o.Paths that has one, run with the host environment of sb.
// Names outside [a-z0-9_-] are never resolved. Relative directories are made absolute now; the
// directories are searched on every lookup, so a newly installed executable is found by the
// next flow that is parsed.
func Resolver(o Options, sb sandbox.Options, log zerolog.Logger) func(name string) (engine.NodeType, bool) {
	r := &resolver{log: log, timeout: o.DefaultTimeout, sandbox: sb}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	for _, p := range o.Paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			log.Warn().Str("event", "external_node.bad_path").Str("dir", p).Err(err).Msg("PLAITA_NODE_PATH entry ignored")
			continue
		}
		r.dirs = append(r.dirs, abs)
	}
	return r.lookup
}

// Find returns the executable of an external node type in dirs.
func Find(dirs []string, name string) (string, bool) {
	if !ValidName(name) {
		return "", false
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, Prefix+name)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			continue
		}
		if unix.Access(p, unix.X_OK) != nil {
			continue
		}
		return p, true
	}
	return "", false
}

func (r *resolver) lookup(name string) (engine.NodeType, bool) {
	path, ok := Find(r.dirs, name)
	if !ok {
		return nil, false
	}
	r.log.Debug().Str("event", "external_node.resolved").Str("type", name).Str("path", path).Msg("external node type resolved")
	return &Type{Name: name, Path: path, log: r.log, timeout: r.timeout, sandbox: r.sandbox}, true
}

// Type is one external node type.
type Type struct {
	Name    string // the node type
	Path    string // its executable
	log     zerolog.Logger
	timeout time.Duration
	sandbox sandbox.Options
}

type runner struct {
	t       *Type
	params  json.RawMessage
	input   *engine.Value
	timeout time.Duration
}

// Prepare checks that params is an object, reads the timeout and compiles the templates.
func (t *Type) Prepare(n *engine.Node, pc *engine.PrepareContext) engine.Runner {
	path := n.Path() + ".params"
	obj := map[string]any{}
	if len(n.Params) > 0 && string(n.Params) != "null" {
		if err := json.Unmarshal(n.Params, &obj); err != nil || obj == nil {
			pc.Problem(path, "must be an object")
			return nil
		}
	}
	r := &runner{t: t, params: json.RawMessage("{}"), timeout: t.timeout}
	if len(n.Params) > 0 && string(n.Params) != "null" {
		r.params = n.Params
	}
	if v, ok := obj["timeout"]; ok && v != nil {
		secs, isNum := v.(float64)
		d := time.Duration(secs * float64(time.Second))
		if !isNum || secs <= 0 || d > MaxTimeout {
			pc.Problem(pc.ParamsPath("timeout"), "must be a number of seconds, more than 0 and at most %d", int(MaxTimeout/time.Second))
			return nil
		}
		r.timeout = d
	}
	r.input = pc.Value(path, obj)
	if r.input == nil {
		return nil
	}
	return r
}

type request struct {
	Node      nodeInfo      `json:"node"`
	Input     any           `json:"input"`
	Execution executionInfo `json:"execution"`
}

type nodeInfo struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	Params json.RawMessage `json:"params"`
}

type executionInfo struct {
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	FlowID   string `json:"flow_id"`
	Step     int    `json:"step"`
}

type response struct {
	Output    json.RawMessage `json:"output"`
	Error     string          `json:"error"`
	Retryable bool            `json:"retryable"`
}

// Run renders the params, runs the executable and decodes its answer.
func (r *runner) Run(ctx context.Context, call *engine.Call) (engine.Outcome, error) {
	input, err := r.input.Eval(call.Env(), call.Limits())
	if err != nil {
		return engine.Outcome{}, err
	}
	req := request{Node: nodeInfo{ID: call.Node.ID, Type: call.Node.Type, Params: r.params}, Input: input}
	if ex := call.Execution; ex != nil {
		req.Execution = executionInfo{ID: ex.ExecutionID, TenantID: ex.TenantID, FlowID: ex.FlowID, Step: ex.StepCount + 1}
	}
	stdin, err := json.Marshal(req)
	if err != nil {
		return engine.Outcome{}, engine.Permanent(fmt.Errorf("external node %s: request cannot be encoded as JSON: %w", r.t.Name, err))
	}
	res, err := r.t.sandbox.Run(ctx, sandbox.Command{Path: r.t.Path, Stdin: stdin, Timeout: r.timeout})
	if err != nil {
		err = fmt.Errorf("external node %s: cannot start %s: %w", r.t.Name, r.t.Path, err)
		if errors.Is(err, sandbox.ErrIsolationUnavailable) {
			// A retry fails the same way until the operator changes how plaita runs.
			err = engine.Permanent(err)
		}
		return engine.Outcome{}, err
	}
	if err := res.Err(); err != nil {
		return engine.Outcome{}, fmt.Errorf("external node %s (%s): %w", r.t.Name, r.t.Path, err)
	}
	resp, err := decode(res.Stdout)
	if err != nil {
		return engine.Outcome{}, engine.Permanent(fmt.Errorf("external node %s (%s) broke the protocol: %v%s", r.t.Name, r.t.Path, err, res.StderrSuffix()))
	}
	if resp.Error != "" {
		err := fmt.Errorf("external node %s: %s", r.t.Name, resp.Error)
		if !resp.Retryable {
			err = engine.Permanent(err)
		}
		return engine.Outcome{}, err
	}
	var out any
	if len(resp.Output) > 0 {
		if err := json.Unmarshal(resp.Output, &out); err != nil {
			return engine.Outcome{}, engine.Permanent(fmt.Errorf("external node %s: output: %w", r.t.Name, err))
		}
	}
	return engine.Outcome{Output: out}, nil
}

// decode reads stdout as exactly one JSON object.
func decode(stdout []byte) (*response, error) {
	if len(bytes.TrimSpace(stdout)) == 0 {
		return nil, errors.New(`stdout is empty: write one JSON object {"output": …}`)
	}
	dec := json.NewDecoder(bytes.NewReader(stdout))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("stdout is not JSON (%v): %q", err, sandbox.Truncate(string(stdout), 200))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("stdout has more after its JSON object: %q", sandbox.Truncate(string(stdout), 200))
	}
	var resp response
	if err := json.Unmarshal(raw, &resp); err != nil || bytes.TrimSpace(raw)[0] != '{' {
		return nil, fmt.Errorf(`stdout is not a JSON object {"output": …}: %q`, sandbox.Truncate(string(raw), 200))
	}
	return &resp, nil
}
