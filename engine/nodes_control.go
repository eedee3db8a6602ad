package engine

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine/state"
)

func registerControlNodes(r *Registry) {
	r.Register("set", setType{})
	r.Register("condition", conditionType{})
	r.Register("switch", switchType{})
	r.Register("log", logType{})
	r.Register("fail", failType{})
	r.Register("end", endType{})
	r.Register("delay", delayType{})
	r.Register("wait_event", waitEventType{})
	r.Register("approval", approvalType{})
}

// ---- set: {"vars": {"name": value-or-template}} ----

type setType struct{}

type setNode struct{ vars *Value }

func (setType) Prepare(n *Node, pc *PrepareContext) Runner {
	p := pc.Params("vars")
	raw := p.Raw("vars", true)
	m, ok := raw.(map[string]any)
	if raw != nil && (!ok || len(m) == 0) {
		pc.Problem(pc.ParamsPath("vars"), "must be a non-empty object of variable names to values")
		return nil
	}
	if m == nil {
		return nil
	}
	return &setNode{vars: pc.Value(pc.ParamsPath("vars"), m)}
}

func (s *setNode) Run(_ context.Context, c *Call) (Outcome, error) {
	v, err := s.vars.In(c)
	if err != nil {
		return Outcome{}, err
	}
	vars := v.(map[string]any)
	return Outcome{Output: vars, Vars: vars}, nil
}

// ---- condition: {"expr": "..."} with branches {"true": id, "false": id} ----

type conditionType struct{}

type conditionNode struct {
	expr     *Expr
	operands []operand // what the reason quotes (why.go)
}

func (conditionType) branching() {}

func (conditionType) Prepare(n *Node, pc *PrepareContext) Runner {
	p := pc.Params("expr")
	src := p.String("expr", true)
	for _, k := range sortedKeys(n.Branches) {
		if k != "true" && k != "false" {
			pc.Problem(n.path+".branches."+k, `a condition has only "true" and "false" branches`)
		}
	}
	if len(n.Branches) == 0 {
		pc.Problem(n.path+".branches", `is required: {"true": node, "false": node}`)
	}
	if n.Next != "" {
		pc.Problem(n.path+".next", "a condition goes on through branches, not next")
	}
	if src == "" {
		return nil
	}
	cn := &conditionNode{expr: pc.Expr(pc.ParamsPath("expr"), src)}
	if cn.expr != nil {
		cn.operands = operandsOf(src)
	}
	return cn
}

func (cn *conditionNode) Run(_ context.Context, c *Call) (Outcome, error) {
	env := c.Env()
	v, err := cn.expr.Eval(env, c.limits)
	if err != nil {
		return Outcome{}, err
	}
	b, ok := v.(bool)
	if !ok {
		return Outcome{}, errorf("condition %q is %T, not a boolean", cn.expr.src, v)
	}
	next := c.Node.Branches[strconv.FormatBool(b)]
	if next == "" {
		return Outcome{Output: map[string]any{"result": b}, Fail: &state.ErrorInfo{Type: ErrTypeNoBranch,
			Message: fmt.Sprintf("condition is %t and the node has no %q branch", b, strconv.FormatBool(b)), Permanent: true}}, nil
	}
	why := append(make([]byte, 0, 128), clip(cn.expr.src)...)
	why = strconv.AppendBool(append(why, " is "...), b)
	why = appendWhyValues(why, cn.operands, env, c.limits)
	return Outcome{Output: map[string]any{"result": b}, Next: next, Branch: strconv.FormatBool(b), Why: string(why)}, nil
}

// ---- switch: cases [{when, next}], default ----

type switchType struct{}

type switchNode struct {
	whens    []*Expr
	operands [][]operand // each case's, quoted when it matches (why.go)
	all      []operand   // every case's, quoted when none matches
}

func (switchType) branching() {}

func (switchType) Prepare(n *Node, pc *PrepareContext) Runner {
	pc.Params()
	if len(n.Cases) == 0 {
		pc.Problem(n.path+".cases", "a switch needs at least one case")
	}
	if n.Next != "" {
		pc.Problem(n.path+".next", "a switch goes on through cases and default, not next")
	}
	sw := &switchNode{}
	for i, c := range n.Cases {
		path := fmt.Sprintf("%s.cases[%d]", n.path, i)
		if c.Next == "" {
			pc.Problem(path+".next", "is required")
		}
		if c.When == "" {
			pc.Problem(path+".when", "is required")
			continue
		}
		e := pc.Expr(path+".when", c.When)
		var ops []operand
		if e != nil {
			ops = operandsOf(c.When)
		}
		sw.whens, sw.operands = append(sw.whens, e), append(sw.operands, ops)
	}
	sw.all = mergeOperands(sw.operands...)
	return sw
}

func (sw *switchNode) Run(_ context.Context, c *Call) (Outcome, error) {
	env := c.Env()
	for i, w := range sw.whens {
		v, err := w.Eval(env, c.limits)
		if err != nil {
			return Outcome{}, err
		}
		b, ok := v.(bool)
		if !ok {
			return Outcome{}, errorf("case %d %q is %T, not a boolean", i, w.src, v)
		}
		if b {
			return Outcome{Output: map[string]any{"case": i}, Next: c.Node.Cases[i].Next, Branch: caseLabel(i),
				Why: string(appendWhyValues(fmt.Appendf(nil, "case %d: %s is true", i, clip(w.src)), sw.operands[i], env, c.limits))}, nil
		}
	}
	if c.Node.Default != "" {
		return Outcome{Output: map[string]any{"case": "default"}, Next: c.Node.Default, Branch: BranchDefault,
			Why: string(appendWhyValues(fmt.Appendf(nil, "no case of %d matched: default", len(sw.whens)), sw.all, env, c.limits))}, nil
	}
	return Outcome{Output: map[string]any{"case": nil}, Fail: &state.ErrorInfo{Type: ErrTypeNoBranch,
		Message: "no case matched and the switch has no default", Permanent: true}}, nil
}

// ---- log: {"message": template, "level": "info"|"warn"|"error"} ----

type logType struct{}

type logNode struct {
	message *Value
	level   string
}

func (logType) Prepare(n *Node, pc *PrepareContext) Runner {
	p := pc.Params("message", "level")
	msg := p.Raw("message", true)
	level := p.String("level", false)
	switch level {
	case "":
		level = "info"
	case "debug", "info", "warn", "error":
	default:
		pc.Problem(pc.ParamsPath("level"), "%q: use debug, info, warn or error", level)
	}
	if msg == nil {
		return nil
	}
	return &logNode{message: pc.Value(pc.ParamsPath("message"), msg), level: level}
}

func (l *logNode) Run(_ context.Context, c *Call) (Outcome, error) {
	v, err := l.message.In(c)
	if err != nil {
		return Outcome{}, err
	}
	s, err := render(v)
	if err != nil {
		return Outcome{}, Permanent(err)
	}
	var ev *zerolog.Event
	switch log := c.Log(); l.level {
	case "debug":
		ev = log.Debug()
	case "warn":
		ev = log.Warn()
	case "error":
		ev = log.Error()
	default:
		ev = log.Info()
	}
	ex := c.Execution
	ev = ev.Str("event", "flow.log").Str("execution_id", ex.ExecutionID)
	if ex.TenantID != "" {
		ev = ev.Str("tenant_id", ex.TenantID)
	}
	ev.Str("flow_id", ex.FlowID).Str("node", c.Node.ID).Msg(s)
	return Outcome{Output: map[string]any{"message": s, "level": l.level}}, nil
}

// ---- fail: {"message": template, "type": "..."} ----

type failType struct{}

type failNode struct {
	message *Value
	typ     string
}

func (failType) Terminal() bool { return true }

func (failType) Prepare(n *Node, pc *PrepareContext) Runner {
	p := pc.Params("message", "type")
	msg := p.Raw("message", false)
	if msg == nil {
		msg = "flow failed at " + n.ID
	}
	typ := p.String("type", false)
	if typ == "" {
		typ = ErrTypeFlowFailed
	}
	return &failNode{message: pc.Value(pc.ParamsPath("message"), msg), typ: typ}
}

func (f *failNode) Run(_ context.Context, c *Call) (Outcome, error) {
	v, err := f.message.In(c)
	if err != nil {
		return Outcome{}, err
	}
	s, err := render(v)
	if err != nil {
		return Outcome{}, Permanent(err)
	}
	return Outcome{Output: map[string]any{"message": s}, Fail: &state.ErrorInfo{Type: f.typ, Message: s, Permanent: true}}, nil
}

// ---- end: {"output": value} ----

type endType struct{}

type endNode struct{ output *Value }

func (endType) Terminal() bool { return true }

func (endType) Prepare(n *Node, pc *PrepareContext) Runner {
	p := pc.Params("output")
	if !p.Has("output") {
		return &endNode{}
	}
	return &endNode{output: pc.Value(pc.ParamsPath("output"), p.Raw("output", false))}
}

func (e *endNode) Run(_ context.Context, c *Call) (Outcome, error) {
	if e.output == nil {
		return Outcome{End: true}, nil
	}
	v, err := e.output.In(c)
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{End: true, Output: v}, nil
}

// ---- delay: {"seconds": n} or {"until": "RFC 3339 time or template"} ----

// Bounds of a due time: a delay's, or a wait's or an approval's timeout (docs/flows.md,
// "Delays and timeouts"). A wait is at most MaxWaitSeconds, and a due time lies between the
// Unix epoch and MaxWaitSeconds from now. The bound sits far inside every representation a due
// time goes through: time.Duration (±292 years; past it a conversion wraps — 1e18 s lands in
// 1734, due at once), the state's and the delay-queue member's JSON time (years 0–9999), and the
// delay queue's score, Unix milliseconds in a float64 (exact below 2^53 ms, 285,000 years). What
// is longer than ten years is sooner a unit slip (milliseconds for seconds) than an intent.
// The lower bound catches an unset time (0001-01-01, the zero time, which no wake-up can
// carry) and anything else from before 1970, which no real schedule names.
const MaxWaitSeconds = 10 * 365 * 24 * 60 * 60 // 315,360,000 s = 3650 days

// MaxWait is MaxWaitSeconds as a duration.
const MaxWait = MaxWaitSeconds * time.Second

// minDue is the earliest due time: the Unix epoch.
func minDue() time.Time { return time.Unix(0, 0).UTC() }

// waitSeconds reads a delay's seconds or a timeout: a non-negative number, at most
// MaxWaitSeconds. Templates are not taken there (Params.Seconds): a delay computed at run time
// is an until.
func waitSeconds(p Params, name string) float64 {
	f := p.Seconds(name, false)
	if f > MaxWaitSeconds {
		p.pc.Problem(p.pc.ParamsPath(name), "must be at most %d seconds (3650 days): %s seconds is beyond any due time plaita schedules",
			MaxWaitSeconds, strconv.FormatFloat(f, 'g', -1, 64))
	}
	return f
}

// dueProblem says why t cannot be a due time at now ("" when it can): before minDue, or more
// than MaxWait after now. A due time in the past is fine: it is due at once.
func dueProblem(t, now time.Time) string {
	switch {
	case t.Before(minDue()):
		return fmt.Sprintf("%s is before %s", t.UTC().Format(time.RFC3339Nano), minDue().Format(time.RFC3339))
	case t.After(now.Add(MaxWait)):
		return fmt.Sprintf("%s is more than %d seconds (3650 days) after now (%s)", t.UTC().Format(time.RFC3339Nano),
			MaxWaitSeconds, now.UTC().Format(time.RFC3339))
	}
	return ""
}

// dueAfter is the due time secs seconds after now, or the failure of a node whose wait cannot
// be scheduled. Prepare already refused more than MaxWaitSeconds; this also holds for a clock
// that is off the scale itself.
func dueAfter(now time.Time, secs float64, what string) (time.Time, *state.ErrorInfo) {
	if secs > MaxWaitSeconds {
		return time.Time{}, dueOutOfRange(fmt.Sprintf("%s of %s seconds is more than %d", what, strconv.FormatFloat(secs, 'g', -1, 64), MaxWaitSeconds))
	}
	due := now.Add(seconds(secs))
	if why := dueProblem(due, now); why != "" {
		return time.Time{}, dueOutOfRange(what + " due " + why)
	}
	return due, nil
}

func dueOutOfRange(why string) *state.ErrorInfo {
	return &state.ErrorInfo{Type: ErrTypeDueOutOfRange, Permanent: true,
		Message: "the wait cannot be scheduled: " + why + " (a due time lies between 1970-01-01T00:00:00Z and 3650 days from now)"}
}

type delayType struct{}

type delayNode struct {
	seconds float64
	until   *Value
}

func (delayType) Prepare(n *Node, pc *PrepareContext) Runner {
	p := pc.Params("seconds", "until")
	d := &delayNode{seconds: waitSeconds(p, "seconds")}
	if p.Has("until") {
		s := p.String("until", true)
		d.until = pc.Value(pc.ParamsPath("until"), s)
		if d.until != nil && d.until.template == nil && s != "" {
			// A literal time is checked now; only a template waits for the run. Its upper
			// bound only moves away as time passes: a time valid now stays valid.
			if t, err := time.Parse(time.RFC3339, s); err != nil {
				pc.Problem(pc.ParamsPath("until"), "%q is not an RFC 3339 time (2026-11-29T13:00:00Z) nor a {{ template }}", s)
			} else if why := dueProblem(t, time.Now()); why != "" {
				pc.Problem(pc.ParamsPath("until"), "%s: a due time lies between %s and 3650 days from now", why, minDue().Format(time.RFC3339))
			}
		}
	}
	if p.Has("seconds") == p.Has("until") {
		pc.Problem(n.path+".params", `needs exactly one of "seconds" or "until"`)
	}
	return d
}

func (d *delayNode) Run(_ context.Context, c *Call) (Outcome, error) {
	if d.until == nil {
		due, fail := dueAfter(c.Now, d.seconds, "a delay")
		if fail != nil {
			return Outcome{Fail: fail}, nil
		}
		return Outcome{Suspend: &state.Suspend{Kind: state.SuspendDelay, Due: &due}}, nil
	}
	v, err := d.until.In(c)
	if err != nil {
		return Outcome{}, err
	}
	s, _ := v.(string)
	due, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return Outcome{}, errorf("until is %s, not an RFC 3339 time", render2json(v))
	}
	// An until in the past is due at once: the delay queue sends it on its next pass.
	if why := dueProblem(due, c.Now); why != "" {
		return Outcome{Fail: dueOutOfRange("until " + why)}, nil
	}
	return Outcome{Suspend: &state.Suspend{Kind: state.SuspendDelay, Due: &due}}, nil
}

func (d *delayNode) Accepts() []ResumeType { return []ResumeType{ResumeContinue, ResumeTimeout} }

func (d *delayNode) Resume(_ context.Context, c *Call, _ ResumeType, _ any) (Outcome, error) {
	out := map[string]any{"resumed_at": c.Now.UTC().Format(time.RFC3339Nano)}
	if s := c.Execution.Suspend; s != nil && s.Due != nil {
		out["due"] = s.Due.UTC().Format(time.RFC3339Nano)
	}
	return Outcome{Output: out}, nil
}

// ---- wait_event: {"event_type", "match", "timeout", "on_timeout"} ----

type waitEventType struct{}

type waitEventNode struct {
	eventType string
	match     *Expr
	terms     []correlationTerm // the match's correlation terms (correlation.go)
	timeout   float64
	onTimeout string
}

func (waitEventType) Prepare(n *Node, pc *PrepareContext) Runner {
	p := pc.Params("event_type", "match", "timeout", "on_timeout")
	w := &waitEventNode{
		eventType: p.String("event_type", true),
		timeout:   waitSeconds(p, "timeout"),
		onTimeout: p.String("on_timeout", false),
	}
	if w.eventType != "" && !nameRe.MatchString(w.eventType) {
		pc.Problem(pc.ParamsPath("event_type"), "%q: use letters, digits and _ . / - (at most 128; no ':', braces or spaces): the event type becomes part of a key", w.eventType)
	}
	if src := p.String("match", false); src != "" {
		w.match = pc.Expr(pc.ParamsPath("match"), src)
		if w.match != nil {
			if w.terms = correlationTerms(src); len(w.terms) == 0 {
				pc.Warn(pc.ParamsPath("match"), "%s", correlationWarning(w.eventType))
			}
		}
	}
	pc.Edge(pc.ParamsPath("on_timeout"), w.onTimeout)
	if w.onTimeout != "" && w.timeout == 0 {
		pc.Problem(pc.ParamsPath("on_timeout"), "has no effect without a timeout")
	}
	return w
}

func (w *waitEventNode) Run(_ context.Context, c *Call) (Outcome, error) {
	s := &state.Suspend{Kind: state.SuspendEvent, EventType: w.eventType}
	if w.match != nil {
		s.Match = w.match.src
	}
	if w.timeout > 0 {
		due, fail := dueAfter(c.Now, w.timeout, "a timeout")
		if fail != nil {
			return Outcome{Fail: fail}, nil
		}
		s.Due = &due
	}
	return Outcome{Suspend: s}, nil
}

func (w *waitEventNode) Accepts() []ResumeType { return []ResumeType{ResumeEvent, ResumeTimeout} }

// correlation is the values of the wait's correlation terms in env (see correlation.go).
func (w *waitEventNode) correlation(env map[string]any, lim ExprLimits) []state.Correlation {
	return correlate(w.terms, env, lim)
}

func (w *waitEventNode) Resume(_ context.Context, c *Call, rt ResumeType, data any) (Outcome, error) {
	if rt == ResumeTimeout {
		return timedOut(c, w.onTimeout, fmt.Sprintf("no %q event arrived in time", w.eventType))
	}
	// An event that says what type it is must be the awaited type.
	if m, ok := data.(map[string]any); ok {
		if t, ok := m["type"].(string); ok && t != w.eventType {
			return Outcome{}, fmt.Errorf("%w: event type %q, waiting for %q", ErrEventMismatch, t, w.eventType)
		}
	}
	if w.match != nil {
		// An event the expression cannot even evaluate (wrong shape, missing fields) does not
		// match: it is refused and the execution keeps waiting. Whoever can publish an event
		// must not be able to end someone else's execution.
		v, err := w.match.Eval(c.Env(), c.limits)
		if err != nil {
			return Outcome{}, fmt.Errorf("%w: %v", ErrEventMismatch, err)
		}
		if ok, _ := v.(bool); !ok {
			return Outcome{}, fmt.Errorf("%w: %q is %v", ErrEventMismatch, w.match.src, v)
		}
	}
	return Outcome{Output: map[string]any{"event": data}}, nil
}

// ---- approval: {"message", "timeout", "on_timeout", "on_reject"} ----

type approvalType struct{}

type approvalNode struct {
	message   *Value
	timeout   float64
	onTimeout string
	onReject  string
}

func (approvalType) Prepare(n *Node, pc *PrepareContext) Runner {
	p := pc.Params("message", "timeout", "on_timeout", "on_reject")
	a := &approvalNode{
		timeout:   waitSeconds(p, "timeout"),
		onTimeout: p.String("on_timeout", false),
		onReject:  p.String("on_reject", false),
	}
	if p.Has("message") {
		a.message = pc.Value(pc.ParamsPath("message"), p.Raw("message", false))
	}
	pc.Edge(pc.ParamsPath("on_timeout"), a.onTimeout)
	pc.Edge(pc.ParamsPath("on_reject"), a.onReject)
	if a.onTimeout != "" && a.timeout == 0 {
		pc.Problem(pc.ParamsPath("on_timeout"), "has no effect without a timeout")
	}
	return a
}

func (a *approvalNode) Run(_ context.Context, c *Call) (Outcome, error) {
	s := &state.Suspend{Kind: state.SuspendApproval}
	if a.message != nil {
		v, err := a.message.In(c)
		if err != nil {
			return Outcome{}, err
		}
		if s.Message, err = render(v); err != nil {
			return Outcome{}, Permanent(err)
		}
	}
	if a.timeout > 0 {
		due, fail := dueAfter(c.Now, a.timeout, "a timeout")
		if fail != nil {
			return Outcome{Fail: fail}, nil
		}
		s.Due = &due
	}
	return Outcome{Suspend: s}, nil
}

func (a *approvalNode) Accepts() []ResumeType { return []ResumeType{ResumeApproval, ResumeTimeout} }

func (a *approvalNode) Resume(_ context.Context, c *Call, rt ResumeType, data any) (Outcome, error) {
	if rt == ResumeTimeout {
		return timedOut(c, a.onTimeout, "the approval was not given in time")
	}
	d, ok := data.(map[string]any)
	approved, isBool := d["approved"].(bool)
	if !ok || !isBool {
		return Outcome{}, fmt.Errorf(`%w: an approval needs {"approved": true|false, "comment": "..."}`, ErrInvalidResume)
	}
	out := map[string]any{"approved": approved, "comment": d["comment"], "by": d["by"]}
	why := answerWhy(approved, d["by"], d["comment"])
	if approved {
		return Outcome{Output: out, Why: why, Branch: BranchApproved}, nil
	}
	if a.onReject != "" {
		return Outcome{Output: out, Next: a.onReject, Why: why, Branch: BranchRejected}, nil
	}
	msg := "the approval was rejected"
	if s, _ := d["comment"].(string); s != "" {
		msg += ": " + s
	}
	return Outcome{Output: out, Fail: &state.ErrorInfo{Type: ErrTypeRejected, Message: msg, Permanent: true}, Why: why, Branch: BranchRejected}, nil
}

// The labels of the decisions branching nodes take (Outcome.Branch), besides a condition's
// "true" and "false" and a switch's "case N" (caseLabel).
const (
	BranchDefault  = "default"  // a switch no case of which matched
	BranchApproved = "approved" // an approval answered yes (it goes on to next)
	BranchRejected = "rejected" // … answered no (on_reject, or the execution fails)
	BranchTimeout  = "timeout"  // a wait or an approval timed out (on_timeout, or it fails)
)

// caseLabel labels a switch's case i: "case 0", as Flow.Edges names its edge.
func caseLabel(i int) string { return "case " + strconv.Itoa(i) }

// maxWhy bounds the text a reason quotes (an expression, the values it read, a comment): a
// reason is written into every timeline entry of a branch, and a loop writes hundreds.
const maxWhy = 200

// clip is s cut to maxWhy bytes on a rune boundary, with an ellipsis when cut.
func clip(s string) string {
	if len(s) <= maxWhy {
		return s
	}
	return strings.ToValidUTF8(s[:maxWhy], "") + "…"
}

// answerWhy is the reason an approval went where it went: the decision, who gave it and the
// comment (bounded: the approver typed it, and it lands in every timeline entry's detail).
func answerWhy(approved bool, by, comment any) string {
	why := "rejected"
	if approved {
		why = "approved"
	}
	if s, _ := by.(string); s != "" {
		why += " by " + clip(s)
	}
	if s, _ := comment.(string); s != "" {
		why += ": " + clip(s)
	}
	return why
}

func timedOut(_ *Call, onTimeout, msg string) (Outcome, error) {
	out := map[string]any{"timed_out": true}
	if onTimeout != "" {
		return Outcome{Output: out, Next: onTimeout, Why: "timed out: on_timeout", Branch: BranchTimeout}, nil
	}
	return Outcome{Output: out, Fail: &state.ErrorInfo{Type: ErrTypeWaitTimeout, Message: msg, Permanent: true}, Why: "timed out", Branch: BranchTimeout}, nil
}

// seconds converts a number of seconds to a duration, saturating at the duration's range: a
// float64 beyond it converts to an arbitrary value (on amd64 the most negative one, which puts
// a 1e18 s delay in 1734).
func seconds(s float64) time.Duration {
	d := s * float64(time.Second)
	switch {
	case d != d: // NaN
		return 0
	case d >= math.MaxInt64:
		return math.MaxInt64
	case d <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(d)
}

func render2json(v any) string {
	s, err := render(v)
	if err != nil || s == "" {
		return fmt.Sprintf("%v", v)
	}
	if _, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// The control nodes only evaluate expressions: see Flow.StartsInstantly.
func (*setNode) instant()       {}
func (*conditionNode) instant() {}
func (*switchNode) instant()    {}
func (*logNode) instant()       {}
func (*failNode) instant()      {}
func (*endNode) instant()       {}
func (*delayNode) instant()     {}
func (*waitEventNode) instant() {}
func (*approvalNode) instant()  {}
