package roles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/roles/worker"
)

// The summaries of `plaita run`, `plaita start --wait` and `plaita execution show` end with
// what the operator can do next. Every command printed there is first put to engine.CheckResume
// (and, for a retry of an execution in Redis, to the worker's wake-up budgets): a suggestion
// the worker would refuse is worse than none, because it answers "enqueued" and nothing moves.
// When no command would be accepted, the summary says what to do instead.

// advice is what the hints are checked against.
type advice struct {
	flow    *engine.Flow // the definition the execution runs; nil when it cannot be had
	flowErr error        // why flow is nil
	limits  engine.ExprLimits
	now     time.Time
	budget  *retryBudget // the worker's retry gates; nil where none apply (plaita run)
	local   bool         // plaita run: nothing waits for a delay in this process
}

// hint is one thing to do next: a resume command that is accepted now, or a note.
type hint struct {
	label string            // "approve with", …
	rt    engine.ResumeType // "" for a note
	data  string            // --data, "" for none
	note  []string          // what to do instead, line by line
}

// check is engine.CheckResume against the advice's definition.
func (a *advice) check(st *state.Execution, rt engine.ResumeType, data any) error {
	if rt == engine.ResumeCancel {
		// The worker cancels without reading the definition; only a finished execution refuses.
		if st.Status.Terminal() {
			return fmt.Errorf("%w: execution is already %s", engine.ErrInvalidResume, st.Status)
		}
		return nil
	}
	if a.flow == nil {
		return a.flowErr
	}
	return engine.CheckResume(a.flow, st, rt, data, a.limits, a.now)
}

// hints lists what can be done next with st, every command checked.
func (a *advice) hints(st *state.Execution) []hint {
	if a == nil {
		return nil // nothing to check against: suggest nothing
	}
	var out []hint
	try := func(label string, rt engine.ResumeType, data string) {
		var v any
		if data != "" {
			if err := json.Unmarshal([]byte(data), &v); err != nil {
				return
			}
		}
		if a.check(st, rt, v) == nil {
			out = append(out, hint{label: label, rt: rt, data: data})
		}
	}
	if st.Status.Terminal() && st.Status != state.Error {
		return nil
	}
	// A missing or changed definition refuses every resume but a cancel: say so once, and
	// offer the cancel.
	if err := a.flowProblem(st); err != nil {
		if st.Status == state.Error {
			return []hint{{note: []string{fmt.Sprintf("no retry: %v", err)}}}
		}
		note := "only a cancel is accepted: %v"
		if errors.Is(err, errCannotCheck) {
			note = "no resume but a cancel can be checked: %v"
		}
		return append(out, hint{note: []string{fmt.Sprintf(note, err)}}, hint{label: "cancel with", rt: engine.ResumeCancel})
	}
	switch st.Status {
	case state.Suspended:
		s := st.Suspend
		if s == nil {
			break
		}
		switch s.Kind {
		case state.SuspendApproval:
			try("approve with", engine.ResumeApproval, `{"approved": true, "comment": "ok"}`)
			try("reject with", engine.ResumeApproval, `{"approved": false, "comment": "why not"}`)
		case state.SuspendEvent:
			if data, ok := a.exampleEvent(st); ok {
				try("deliver the event with (--data is the event, EVENT in the match)", engine.ResumeEvent, data)
			} else if s.Match != "" {
				out = append(out, hint{note: []string{
					fmt.Sprintf("no example event could be built: deliver an event of type %q (as --data) that must satisfy the match", s.EventType),
					"  " + s.Match}})
			}
		case state.SuspendDelay:
			label := "continue now with"
			if a.local {
				label = "continue with (the delay is not awaited in this process)"
			}
			try(label, engine.ResumeContinue, "")
		default:
			try("resume with", engine.ResumeContinue, "")
		}
		if s.Due != nil && s.Kind != state.SuspendDelay {
			try("time it out with", engine.ResumeTimeout, "")
		}
		try("cancel with", engine.ResumeCancel, "")
	case state.Error:
		out = append(out, a.retryHint(st))
	case state.Running:
		if a.local {
			try("continue with", engine.ResumeContinue, "")
		}
		try("cancel with", engine.ResumeCancel, "")
	case state.Pending:
		try("cancel with", engine.ResumeCancel, "")
	}
	return out
}

// flowProblem is why the definition refuses every resume (cancel aside): it cannot be had, or
// it is not the one the execution started with.
func (a *advice) flowProblem(st *state.Execution) error {
	if a.flow == nil {
		return a.flowErr
	}
	_, err := engine.CheckFlowHash(st.FlowHashAlgo, st.FlowHash, a.flow.HashAlgo, a.flow.Hash, false)
	return err
}

// retryHint is the retry command of an execution in error, or the note that says why there
// is none and what to do instead.
func (a *advice) retryHint(st *state.Execution) hint {
	if err := a.check(st, engine.ResumeRetry, nil); err != nil {
		if st.Error != nil && st.Error.Type == engine.ErrTypeStepLimit {
			return hint{note: stepLimitNote()}
		}
		return hint{note: []string{fmt.Sprintf("no retry: %v", err)}}
	}
	if r := a.budget.refusal(); r != nil {
		return hint{note: r.lines()}
	}
	return hint{label: "retry the failed node with", rt: engine.ResumeRetry}
}

func stepLimitNote() []string {
	return []string{
		"no retry: the execution used all its steps, so a retry would stop again at once;",
		"fix the flow (a loop without a guard? or raise max_steps) and start a new execution",
	}
}

// writeHints prints the hints; cmd renders the command of a resume.
func writeHints(w io.Writer, hints []hint, cmd func(rt engine.ResumeType, data string) string) {
	for _, h := range hints {
		if h.rt == "" {
			for _, l := range h.note {
				fmt.Fprintf(w, "  %s\n", l)
			}
			continue
		}
		fmt.Fprintf(w, "  %s:\n    %s\n", h.label, cmd(h.rt, h.data))
	}
}

// retryBudget is the state of the worker's two retry gates for one execution (the runbook's
// "唤醒预算"): retry wake-ups (g1wakeups, limit worker.G1MaxWakeups) and consecutive
// deterministic failures (nofail, limit worker.DefaultDeterministicFailureMax).
type retryBudget struct {
	G1Wakeups, NoFail int64
	G1Key, NoFailKey  string
}

// budgetRefusal is a retry the gates refuse, with what the runbook's 409 carries.
type budgetRefusal struct {
	reason     string
	counter    string // the family that reached its limit
	counterKey string
	unblock    string // how to unblock it
	budget     *retryBudget
}

// refusal is nil when a retry passes both gates (or there are no gates).
func (b *retryBudget) refusal() *budgetRefusal {
	switch {
	case b == nil:
		return nil
	case b.G1Wakeups >= worker.G1MaxWakeups:
		return &budgetRefusal{budget: b, counter: "g1wakeups", counterKey: b.G1Key,
			reason: fmt.Sprintf("the retry wake-ups of this execution reached their limit (g1wakeups %d/%d): the worker keeps the error state",
				b.G1Wakeups, worker.G1MaxWakeups),
			unblock: "after fixing the cause, delete the counter and retry: redis-cli DEL " + shellQuote(b.G1Key)}
	case b.NoFail >= worker.DefaultDeterministicFailureMax:
		return &budgetRefusal{budget: b, counter: "nofail", counterKey: b.NoFailKey,
			reason: fmt.Sprintf("this execution failed deterministically %d times in a row (nofail %d/%d): the worker keeps the error state",
				b.NoFail, b.NoFail, worker.DefaultDeterministicFailureMax),
			unblock: "after fixing the cause, delete the counter and retry: redis-cli DEL " + shellQuote(b.NoFailKey)}
	}
	return nil
}

func (r *budgetRefusal) lines() []string {
	return []string{
		"no retry: " + r.reason,
		fmt.Sprintf("counters:  g1wakeups %d (limit %d), nofail %d (limit %d)",
			r.budget.G1Wakeups, worker.G1MaxWakeups, r.budget.NoFail, worker.DefaultDeterministicFailureMax),
		"after fixing the cause, delete the counter, then retry:",
		"  redis-cli DEL " + shellQuote(r.counterKey),
	}
}

// json is the refusal as the runbook's 409 detail.
func (r *budgetRefusal) json() map[string]any {
	return map[string]any{
		"counters":    map[string]int64{"g1wakeups": r.budget.G1Wakeups, "nofail": r.budget.NoFail},
		"limits":      map[string]int64{"g1wakeups": worker.G1MaxWakeups, "nofail": worker.DefaultDeterministicFailureMax},
		"counter":     r.counter,
		"counter_key": r.counterKey,
		"hint":        r.unblock,
	}
}

// ---- example events ----

// maxExampleEvents bounds the candidates tried for one match (each || doubles them).
const maxExampleEvents = 8

// exampleEvent builds event data for the wait st is suspended at that its match accepts:
// {"type": <event_type>} plus, for every `EVENT.<path> == <expr>` (or `<expr> == EVENT.<path>`)
// comparison of the match, <path> set to <expr> evaluated against the execution. Each
// candidate is checked with engine.CheckResume; ok is false when none is accepted (a match
// such as EVENT.amount > 10 says what an event must be, not what one is).
func (a *advice) exampleEvent(st *state.Execution) (string, bool) {
	s := st.Suspend
	if a.flow == nil || s == nil {
		return "", false
	}
	var candidates []map[string]any
	if s.Match != "" {
		if tree, err := parser.Parse(s.Match); err == nil {
			env := exprEnv(st, a.flow, s.Node)
			for _, alt := range alternatives(tree.Node) {
				ev := map[string]any{"type": s.EventType}
				if fillEvent(ev, alt, env, a.limits) {
					candidates = append(candidates, ev)
				}
			}
		}
	}
	candidates = append(candidates, map[string]any{"type": s.EventType})
	for _, ev := range candidates {
		data, err := eventJSON(ev)
		if err != nil {
			continue
		}
		var v any
		if json.Unmarshal([]byte(data), &v) != nil {
			continue
		}
		if a.check(st, engine.ResumeEvent, v) == nil {
			return data, true
		}
	}
	return "", false
}

// assignment is one `EVENT.<path> == <value>` of a match.
type assignment struct {
	path  []string
	value ast.Node
}

// alternatives are the sets of assignments that each make the match true as far as its
// comparisons go: && joins them, || offers either side, anything else adds nothing.
func alternatives(n ast.Node) [][]assignment {
	b, ok := n.(*ast.BinaryNode)
	if !ok {
		return [][]assignment{nil}
	}
	switch b.Operator {
	case "&&", "and":
		var out [][]assignment
		for _, l := range alternatives(b.Left) {
			for _, r := range alternatives(b.Right) {
				if len(out) < maxExampleEvents {
					out = append(out, append(append([]assignment{}, l...), r...))
				}
			}
		}
		return out
	case "||", "or":
		out := append(alternatives(b.Left), alternatives(b.Right)...)
		return out[:min(len(out), maxExampleEvents)]
	case "==":
		if p, ok := eventPath(b.Left); ok && !usesEvent(b.Right) {
			return [][]assignment{{{path: p, value: b.Right}}}
		}
		if p, ok := eventPath(b.Right); ok && !usesEvent(b.Left) {
			return [][]assignment{{{path: p, value: b.Left}}}
		}
	}
	return [][]assignment{nil}
}

// eventPath reads EVENT.a.b, EVENT?.a and EVENT["a"] as the path [a b].
func eventPath(n ast.Node) ([]string, bool) {
	switch n := n.(type) {
	case *ast.ChainNode:
		return eventPath(n.Node)
	case *ast.MemberNode:
		prop, ok := n.Property.(*ast.StringNode)
		if !ok || n.Method {
			return nil, false
		}
		if id, ok := n.Node.(*ast.IdentifierNode); ok {
			return []string{prop.Value}, id.Value == "EVENT"
		}
		p, ok := eventPath(n.Node)
		return append(p, prop.Value), ok
	}
	return nil, false
}

func usesEvent(n ast.Node) bool {
	found := false
	ast.Find(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.IdentifierNode); ok && id.Value == "EVENT" {
			found = true
		}
		return found
	})
	return found
}

// fillEvent evaluates each assignment's value and sets it in ev; false when one cannot be
// evaluated or two disagree about the shape.
func fillEvent(ev map[string]any, alt []assignment, env map[string]any, lim engine.ExprLimits) bool {
	for _, as := range alt {
		v, err := evalExpr(as.value.String(), env, lim)
		if err != nil {
			return false
		}
		m := ev
		for _, k := range as.path[:len(as.path)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				if _, taken := m[k]; taken {
					return false
				}
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[as.path[len(as.path)-1]] = v
	}
	return true
}

// exprEnv is what an expression of the node sees, as the engine builds it, with no event yet.
func exprEnv(st *state.Execution, f *engine.Flow, node string) map[string]any {
	nodes := map[string]any{}
	vars := map[string]any{}
	if m, ok := st.Context[state.ContextNodes].(map[string]any); ok {
		nodes = m
	}
	if m, ok := st.Context[state.ContextVars].(map[string]any); ok {
		vars = m
	}
	return map[string]any{
		"INPUT": st.Input, "NODE": nodes, "$NODE": nodes, "VARS": vars, "EVENT": nil,
		"EXECUTION": map[string]any{
			"id": st.ExecutionID, "tenant_id": st.TenantID, "flow_id": f.ID, "flow_version": st.FlowVersion,
			"step_count": st.StepCount, "start_time": st.StartTime.Format(time.RFC3339Nano), "node": node,
			"attempt": st.NodeAttempts[node] + 1,
		},
	}
}

// evalExpr evaluates one side of a comparison. It is the flow's own expression over the
// execution's own data, bounded like the engine's (node count, VM memory); whatever it gives is
// only a candidate that engine.CheckResume then judges.
func evalExpr(src string, env map[string]any, lim engine.ExprLimits) (any, error) {
	types := map[string]any{}
	for k := range env {
		types[k] = map[string]any{}
	}
	p, err := expr.Compile(src, expr.Env(types), expr.MaxNodes(2000))
	if err != nil {
		return nil, fmt.Errorf("compile %q: %w", src, err)
	}
	budget := uint(min(max(float64(lim.MaxResultSize)*lim.GrowthFactor, 1e6), 1e7))
	machine := vm.VM{MemoryBudget: budget}
	out, err := machine.Run(p, env)
	if err != nil {
		return nil, fmt.Errorf("evaluate %q: %w", src, err)
	}
	return out, nil
}

// eventJSON writes event data for a command line: "type" first, then the other fields sorted,
// with the spacing people type.
func eventJSON(ev map[string]any) (string, error) {
	var buf bytes.Buffer
	if err := writeHumanJSON(&buf, ev, true); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func writeHumanJSON(buf *bytes.Buffer, v any, top bool) error {
	if list, ok := v.([]any); ok {
		buf.WriteByte('[')
		for i, e := range list {
			if i > 0 {
				buf.WriteString(", ")
			}
			if err := writeHumanJSON(buf, e, false); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return err
		}
		buf.Write(bytes.TrimRight(b.Bytes(), "\n"))
		return nil
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if top && (ks[i] == "type") != (ks[j] == "type") {
			return ks[i] == "type"
		}
		return ks[i] < ks[j]
	})
	buf.WriteByte('{')
	for i, k := range ks {
		if i > 0 {
			buf.WriteString(", ")
		}
		if err := writeHumanJSON(buf, k, false); err != nil {
			return err
		}
		buf.WriteString(": ")
		if err := writeHumanJSON(buf, m[k], false); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

// describeStatus is st's status with where it stands, for refusals.
func describeStatus(st *state.Execution) string {
	switch {
	case st.Status == state.Suspended && st.Suspend != nil:
		return fmt.Sprintf("suspended (%s at node %q)", describeSuspend(st.Suspend), st.Suspend.Node)
	case st.Status == state.Running && st.CurrentNode != "":
		return fmt.Sprintf("running (at node %q)", st.CurrentNode)
	case st.Status == state.Error && st.Error != nil:
		return fmt.Sprintf("in error (%s)", st.Error.Type)
	}
	return string(st.Status)
}
