package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine/state"
)

// NodeType is one kind of node (set, condition, http …). Prepare runs once per flow version:
// it validates the node's params, compiles its expressions and returns the Runner the executor
// calls on every visit.
type NodeType interface {
	Prepare(n *Node, pc *PrepareContext) Runner
}

// Runner runs one prepared node.
type Runner interface {
	Run(ctx context.Context, call *Call) (Outcome, error)
}

// Resumer is implemented by nodes that suspend (delay, wait_event, approval): the executor hands
// the resume to the node that suspended, which decides where the flow goes.
type Resumer interface {
	// Resume kinds it accepts, e.g. {ResumeEvent, ResumeTimeout}.
	Accepts() []ResumeType
	Resume(ctx context.Context, call *Call, rt ResumeType, data any) (Outcome, error)
}

// Terminal marks node types that end a flow (end, fail): they may have no successors.
type Terminal interface{ Terminal() bool }

// Outcome is what a node run produced.
type Outcome struct {
	Output  any            // recorded as NODE.<id>
	Vars    map[string]any // merged into VARS
	Next    string         // the next node; "" = the node's own next
	Suspend *state.Suspend // set: the execution suspends at this node
	End     bool           // the execution completes; Output becomes its output
	Fail    *state.ErrorInfo
	// Why says why a branching node went where it went (a condition's value, the switch case
	// that matched, an approval's answer and who gave it, a timeout): it is recorded in the
	// timeline entry of the step, so a reader sees the reason of every branch taken, loops
	// included, not only the last result in NODE.<id>.
	Why string
	// Branch labels the decision Why explains, counted per node in the state
	// (state.Execution.Branches): "true" or "false", "case N" or "default" — a condition's and a
	// switch's labels as Flow.Edges names them — "approved" or "rejected", "timeout". Set
	// exactly when Why is.
	Branch string
}

// Call is what a node sees when it runs.
type Call struct {
	Node      *Node
	Execution *state.Execution // read-only for nodes
	Now       time.Time
	Event     any // the event that resumed the execution, when there is one
	env       map[string]any
	mkEnv     func() map[string]any // builds env on first use: most nodes evaluate nothing
	limits    ExprLimits
	log       zerolog.Logger
	creds     CredentialResolver
}

// CredentialResolver opens a tenant's credential (docs/credentials.md): the worker's, over the
// sealed credentials and the master key.
type CredentialResolver interface {
	Resolve(ctx context.Context, tenant, name string) ([]byte, error)
}

// ErrNoCredentials: a node asked for a credential where none can be opened (no resolver: no
// credentials key is configured for this process).
var ErrNoCredentials = errors.New("credentials are not available here: set PLAITA_CREDENTIALS_KEY or PLAITA_CREDENTIALS_KEY_FILE")

// Credential is the value of the credential name of the execution's tenant, opened at the
// moment a node sends it. The value must go only where the node sends it (a request header, a
// child's environment): never into an output, a log line or an error.
func (c *Call) Credential(ctx context.Context, name string) ([]byte, error) {
	if c.creds == nil {
		return nil, Permanent(fmt.Errorf("credential %s: %w", name, ErrNoCredentials))
	}
	tenant := ""
	if c.Execution != nil {
		tenant = c.Execution.TenantID
	}
	return c.creds.Resolve(ctx, tenant, name)
}

// Log is the executor's logger. Its lines name the execution and the node themselves (see
// the log node): the executor's logger carries no per-execution fields.
func (c *Call) Log() *zerolog.Logger { return &c.log }

// Env is the expression environment of this call, built on first use (a Call belongs to
// the goroutine running its node).
func (c *Call) Env() map[string]any {
	if c.env == nil && c.mkEnv != nil {
		c.env, c.mkEnv = c.mkEnv(), nil
	}
	return c.env
}

// Limits are the expression limits in force.
func (c *Call) Limits() ExprLimits { return c.limits }

// Registry maps node type names to their implementations.
type Registry struct {
	types    map[string]NodeType
	fallback func(name string) (NodeType, bool)
}

// SetFallback resolves node types that are not registered (external node executables).
func (r *Registry) SetFallback(f func(name string) (NodeType, bool)) { r.fallback = f }

// NewRegistry returns a registry holding the control nodes.
func NewRegistry() *Registry {
	r := &Registry{types: map[string]NodeType{}}
	registerControlNodes(r)
	return r
}

// Register adds or replaces a node type.
func (r *Registry) Register(name string, t NodeType) { r.types[name] = t }

// Remove takes a node type out (PLAITA_DISABLE_CODE_NODE and the like).
func (r *Registry) Remove(name string) { delete(r.types, name) }

// Types lists the registered type names, sorted.
func (r *Registry) Types() []string {
	out := make([]string, 0, len(r.types))
	for k := range r.types {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (r *Registry) lookup(name string) (NodeType, bool) {
	if t, ok := r.types[name]; ok {
		return t, true
	}
	if r.fallback != nil && name != "" {
		return r.fallback(name)
	}
	return nil, false
}

// PrepareContext is what a node type's Prepare uses to read params and compile expressions;
// every problem it reports carries the JSON path.
type PrepareContext struct {
	node    *Node
	ps      *problems
	warns   *problems // what is valid but worth saying (Flow.Warnings)
	edges   []edge
	limits  ExprLimits
	sources *[]string // the flow's expressions, collected as they compile
}

type edge struct{ path, target string }

// Problem reports a problem at path (relative paths are joined to the node's params path).
func (pc *PrepareContext) Problem(path, format string, args ...any) {
	pc.ps.add(path, format, args...)
}

// Warn reports something valid but worth telling the author, at path (Flow.Warnings).
func (pc *PrepareContext) Warn(path, format string, args ...any) {
	if pc.warns != nil {
		pc.warns.add(path, format, args...)
	}
}

// Edge declares a successor held in params (on_timeout, on_reject …): it must exist and it
// counts for reachability.
func (pc *PrepareContext) Edge(path, target string) {
	if target != "" {
		pc.edges = append(pc.edges, edge{path, target})
	}
}

// ParamsPath is the JSON path of a param.
func (pc *PrepareContext) ParamsPath(name string) string { return pc.node.path + ".params." + name }

// Params decodes the node's params object, reporting unknown fields.
func (pc *PrepareContext) Params(known ...string) Params {
	obj := map[string]json.RawMessage{}
	if len(pc.node.Params) > 0 {
		if err := json.Unmarshal(pc.node.Params, &obj); err != nil {
			pc.ps.add(pc.node.path+".params", "must be an object")
		}
	}
	unknownFields(pc.ps, pc.node.path+".params", obj, known)
	return Params{pc: pc, obj: obj}
}

// Params reads typed params with path-named errors.
type Params struct {
	pc  *PrepareContext
	obj map[string]json.RawMessage
}

// Has reports whether a param is present and not null.
func (p Params) Has(name string) bool {
	raw, ok := p.obj[name]
	return ok && string(raw) != "null"
}

// String reads a string param.
func (p Params) String(name string, required bool) string {
	var s string
	p.read(name, required, &s, "a string")
	if required && p.Has(name) && s == "" {
		p.pc.Problem(p.pc.ParamsPath(name), "must not be empty")
	}
	return s
}

// Seconds reads a non-negative, finite number of seconds.
func (p Params) Seconds(name string, required bool) float64 {
	var f float64
	if p.read(name, required, &f, "a number of seconds") && (f < 0 || math.IsInf(f, 0) || math.IsNaN(f)) {
		p.pc.Problem(p.pc.ParamsPath(name), "must be a non-negative number of seconds")
	}
	return f
}

// Int reads an integer param.
func (p Params) Int(name string, required bool) int {
	var n int
	p.read(name, required, &n, "an integer")
	return n
}

// Bool reads a boolean param.
func (p Params) Bool(name string) bool {
	var b bool
	p.read(name, false, &b, "true or false")
	return b
}

// Strings reads an array of strings.
func (p Params) Strings(name string, required bool) []string {
	var ss []string
	p.read(name, required, &ss, "an array of strings")
	return ss
}

// Raw returns a param's JSON value decoded into Go values.
func (p Params) Raw(name string, required bool) any {
	var v any
	p.read(name, required, &v, "a JSON value")
	return v
}

func (p Params) read(name string, required bool, into any, want string) bool {
	if !p.Has(name) {
		if required {
			p.pc.Problem(p.pc.ParamsPath(name), "is required")
		}
		return false
	}
	if err := json.Unmarshal(p.obj[name], into); err != nil {
		p.pc.Problem(p.pc.ParamsPath(name), "must be %s", want)
		return false
	}
	return true
}

// Expr compiles an expression param.
func (pc *PrepareContext) Expr(path, src string) *Expr {
	e, err := compileExpr(src, pc.limits)
	if err != nil {
		pc.Problem(path, "%v", err)
		return nil
	}
	pc.source(e)
	return e
}

func (pc *PrepareContext) source(e *Expr) {
	if pc.sources != nil && e != nil {
		*pc.sources = append(*pc.sources, e.src)
	}
}

// Value compiles a JSON value whose strings may hold {{ … }} templates.
func (pc *PrepareContext) Value(path string, v any) *Value {
	val, err := compileValue(v, pc.limits)
	if err != nil {
		var ve *valueError
		if errors.As(err, &ve) {
			sub, inner := ve.split()
			path, err = path+sub, inner
		}
		pc.Problem(path, "%v", err)
		return nil
	}
	val.walk(pc.source)
	return val
}

// errorf builds a permanent node error.
func errorf(format string, args ...any) error {
	return Permanent(fmt.Errorf(format, args...))
}
