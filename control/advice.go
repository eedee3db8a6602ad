package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

// What an operator can do next with an execution — the hints of `plaita execution show`, `plaita
// run`, `plaita start --wait` and the console's buttons — and the resume check. Every resume
// suggested is first put to engine.CheckResume (and, for a retry of an execution in Redis, to the
// worker's retry gates): a suggestion the worker would refuse is worse than none, because it
// answers "enqueued" and nothing moves. When no resume would be accepted, a note says what to do
// instead.

var (
	// ErrFlowUnavailable marks a definition the worker cannot run the execution on (it is not
	// published); the advice then offers a cancel only.
	ErrFlowUnavailable = errors.New("flow definition unavailable")
	// ErrCannotCheck marks a definition this process cannot judge: it does not parse here, or
	// the node types cannot be set up here (a worker may have other node executables or a
	// docker daemon). The advice then offers a cancel only, and says --force skips the check.
	ErrCannotCheck = errors.New("cannot check here")
)

// Advice is what the hints and the resume check are judged against.
type Advice struct {
	Flow    *engine.Flow // the definition the execution runs; nil when it cannot be had
	FlowErr error        // why Flow is nil
	Limits  engine.ExprLimits
	Now     time.Time
	Budget  *Budget // the worker's retry gates; nil where none apply (plaita run)
	Local   bool    // plaita run: nothing waits for a delay in this process
	// hashOverride checks every resume as if it carried allow_flow_hash_change (the hints
	// offered past a flow_hash_mismatch).
	hashOverride bool
}

// Budget is an execution's retry gates, with the keys an operator deletes to reset them.
type Budget struct {
	store.RetryBudget
	G1Key, NoFailKey string
}

// Hint is one thing to do next: a resume that is accepted now, or a note, or (Type "" with a
// Command) a command that is not a resume: the event publish that wakes an event wait in the
// cluster, the start of a new execution.
type Hint struct {
	Label string            `json:"label,omitempty"` // "approve with", …
	Type  engine.ResumeType `json:"type,omitempty"`  // "" for a note or a command that is not a resume
	Data  string            `json:"data,omitempty"`  // the resume data, as typed on a command line ("" for none)
	Note  []string          `json:"note,omitempty"`  // what to do instead, line by line
	// Command is the resume as a command line, when the execution is in Redis; on a hint of no
	// Type, the command the hint suggests (printed after its note).
	Command string `json:"command,omitempty"`
	// AllowFlowHashChange: the resume is accepted only with the flow_hash override
	// (ResumeRequest.AllowFlowHashChange): the definition's hash differs in algorithm and value,
	// as after an engine upgrade; only an operator who knows the definition is unchanged sends it.
	AllowFlowHashChange bool `json:"allow_flow_hash_change,omitempty"`

	// publish is, on an event resume, the event's data as `plaita event publish` takes it:
	// in Redis the hint is preceded by that publish (withCommands).
	publish string
	// startInput is, on a note that suggests a new start, the --input to give it (in Redis
	// withCommands makes it a `plaita start` command line).
	startInput string
}

// SuggestsStart reports whether the hint suggests a new start instead of a resume: the
// execution failed on a value its own input lacks, which no resume changes.
func (h Hint) SuggestsStart() bool { return h.startInput != "" }

// Check is engine.CheckResume against the advice's definition.
func (a *Advice) Check(st *state.Execution, rt engine.ResumeType, data any) error {
	if rt == engine.ResumeCancel {
		// The worker cancels without reading the definition; only a finished execution refuses.
		if st.Status.Terminal() {
			return fmt.Errorf("%w: execution is already %s", engine.ErrInvalidResume, st.Status)
		}
		return nil
	}
	if a.Flow == nil {
		return a.FlowErr
	}
	if a.hashOverride {
		var err error
		if data, err = withHashOverride(data); err != nil {
			return fmt.Errorf("%w: %w", engine.ErrInvalidResume, err)
		}
	}
	return engine.CheckResume(a.Flow, st, rt, data, a.Limits, a.Now)
}

// Hints lists what can be done next with st, every resume checked.
func (a *Advice) Hints(st *state.Execution) []Hint {
	if a == nil {
		return nil // nothing to check against: suggest nothing
	}
	var out []Hint
	try := func(label string, rt engine.ResumeType, data string) {
		var v any
		if data != "" {
			if err := json.Unmarshal([]byte(data), &v); err != nil {
				return
			}
		}
		if a.Check(st, rt, v) == nil {
			out = append(out, Hint{Label: label, Type: rt, Data: data})
		}
	}
	if st.Status.Terminal() && st.Status != state.Error {
		return nil
	}
	// A missing or changed definition refuses every resume but a cancel: say so once, and
	// offer the cancel. A hash that differs in algorithm too (an engine upgrade is suspected)
	// is refused unless the operator overrides it: offer the resumes the override lets pass.
	if err := a.flowProblem(st); errors.Is(err, engine.ErrFlowHashMismatch) && !a.hashOverride {
		return a.overrideHints(st, err)
	} else if err != nil {
		if st.Status == state.Error {
			return []Hint{{Note: []string{fmt.Sprintf("no retry: %v", err)}}}
		}
		note := "only a cancel is accepted: %v"
		if errors.Is(err, ErrCannotCheck) {
			note = "no resume but a cancel can be checked: %v"
		}
		return append(out, Hint{Note: []string{fmt.Sprintf(note, err)}}, Hint{Label: "cancel with", Type: engine.ResumeCancel})
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
			if ev, more, ok := engine.ExampleEvent(a.Flow, st, a.Limits, a.Now); ok {
				if data, err := eventJSON(ev); err == nil {
					try("deliver the event with (--data is the event, EVENT in the match)", engine.ResumeEvent, data)
					if n := len(out); n > 0 && out[n-1].Type == engine.ResumeEvent {
						out[n-1].publish = a.publishData(st, ev, data)
					}
				}
				if len(more) > 0 {
					out = append(out, Hint{Note: []string{fmt.Sprintf("the flow also reads %s: add what it expects to --data", strings.Join(more, ", "))}})
				}
			} else if s.Match != "" {
				out = append(out, Hint{Note: []string{
					fmt.Sprintf("no example event could be built: deliver an event of type %q (as --data) that must satisfy the match", s.EventType),
					"  " + s.Match}})
			}
		case state.SuspendDelay:
			label := "continue now with"
			if a.Local {
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
		if a.Local {
			try("continue with", engine.ResumeContinue, "")
		}
		try("cancel with", engine.ResumeCancel, "")
	case state.Pending:
		try("cancel with", engine.ResumeCancel, "")
	}
	return out
}

// overrideHints are the hints of st past a flow_hash_mismatch: a note that says what the
// override means, then every resume the worker takes with it, each marked as needing it.
func (a *Advice) overrideHints(st *state.Execution, mismatch error) []Hint {
	b := *a
	b.hashOverride = true
	out := []Hint{{Note: []string{
		fmt.Sprintf("only a cancel is accepted as it is: %v", mismatch),
		"if the definition is unchanged (an engine upgrade changed how its hash is computed), the resumes below pass with allow_flow_hash_change",
	}}}
	for _, h := range b.Hints(st) {
		if h.Type != "" && h.Type != engine.ResumeCancel {
			h.AllowFlowHashChange = true
		}
		out = append(out, h)
	}
	return out
}

// withHashOverride is resume data with "allow_flow_hash_change": true added, the key the
// engine reads (engine.CheckResume): nil data becomes an object of that key alone; data that
// is not an object cannot carry it.
func withHashOverride(data any) (any, error) {
	switch d := data.(type) {
	case nil:
		return map[string]any{engine.AllowFlowHashChangeKey: true}, nil
	case map[string]any:
		out := make(map[string]any, len(d)+1)
		for k, v := range d {
			out[k] = v
		}
		out[engine.AllowFlowHashChangeKey] = true
		return out, nil
	}
	return nil, fmt.Errorf("allow_flow_hash_change needs the resume data to be a JSON object (or none), not %T", data)
}

// flowProblem is why the definition refuses every resume (cancel aside): it cannot be had, or
// it is not the one the execution started with.
func (a *Advice) flowProblem(st *state.Execution) error {
	if a.Flow == nil {
		return a.FlowErr
	}
	_, err := engine.CheckFlowHash(st.FlowHashAlgo, st.FlowHash, a.Flow.HashAlgo, a.Flow.Hash, a.hashOverride)
	return err
}

// retryHint is the retry of an execution in error, or the note that says why there is none
// and what to do instead.
func (a *Advice) retryHint(st *state.Execution) Hint {
	if err := a.Check(st, engine.ResumeRetry, nil); err != nil {
		if st.Error != nil && st.Error.Type == engine.ErrTypeStepLimit {
			return Hint{Note: stepLimitNote()}
		}
		return Hint{Note: []string{fmt.Sprintf("no retry: %v", err)}}
	}
	if path := missingInput(st.Error); path != nil {
		return a.newStartHint(st, path)
	}
	if r := a.Budget.refusal(); r != nil {
		return Hint{Note: r.lines()}
	}
	return Hint{Label: "retry the failed node with", Type: engine.ResumeRetry}
}

func stepLimitNote() []string {
	return []string{
		"no retry: the execution used all its steps, so a retry would stop again at once;",
		"fix the flow (a loop without a guard? or raise max_steps) and start a new execution",
	}
}

// budgetRefusal is a retry the gates refuse, with the counters, limits and reset the
// console's 409 carries too.
type budgetRefusal struct {
	reason     string
	counter    string // the family that reached its limit
	counterKey string
	unblock    string // how to unblock it
	budget     *Budget
}

// refusal is nil when a retry passes both gates (or there are no gates).
func (b *Budget) refusal() *budgetRefusal {
	if b == nil {
		return nil
	}
	ex := b.Exceeded(store.DeterministicFailureMax)
	switch {
	case ex == nil:
		return nil
	case ex.Counter == keys.FamG1Wakeups:
		return &budgetRefusal{budget: b, counter: ex.Counter, counterKey: b.G1Key,
			reason: fmt.Sprintf("the retry wake-ups of this execution reached their limit (g1wakeups %d/%d): the worker keeps the error state",
				ex.Count, ex.Limit),
			unblock: "after fixing the cause, delete the counter and retry: redis-cli DEL " + shellQuote(b.G1Key)}
	}
	return &budgetRefusal{budget: b, counter: ex.Counter, counterKey: b.NoFailKey,
		reason: fmt.Sprintf("this execution failed deterministically %d times in a row (nofail %d/%d): the worker keeps the error state",
			ex.Count, ex.Count, ex.Limit),
		unblock: "after fixing the cause, delete the counter and retry: redis-cli DEL " + shellQuote(b.NoFailKey)}
}

func (r *budgetRefusal) lines() []string {
	return []string{
		"no retry: " + r.reason,
		fmt.Sprintf("counters:  g1wakeups %d (limit %d), nofail %d (limit %d)",
			r.budget.G1Wakeups, store.G1MaxWakeups, r.budget.NoFail, store.DeterministicFailureMax),
		"after fixing the cause, delete the counter, then retry:",
		"  redis-cli DEL " + shellQuote(r.counterKey),
	}
}

// fields is the refusal's structured detail (the console's 409 body).
func (r *budgetRefusal) fields() map[string]any {
	return map[string]any{
		"counters":    map[string]int64{"g1wakeups": r.budget.G1Wakeups, "nofail": r.budget.NoFail},
		"limits":      map[string]int64{"g1wakeups": store.G1MaxWakeups, "nofail": store.DeterministicFailureMax},
		"counter":     r.counter,
		"counter_key": r.counterKey,
		"hint":        r.unblock,
	}
}

// CheckResume applies the worker's checks to a resume of st; nil when it would be accepted, else
// a Conflict refusal with the reason and what is accepted instead.
func CheckResume(st *state.Execution, a *Advice, rt engine.ResumeType, data any) *Refusal {
	ref := &Refusal{Class: Conflict, Code: "resume_refused", Execution: st}
	switch {
	case st.Status == state.Running && rt != engine.ResumeContinue && rt != engine.ResumeCancel:
		ref.Message = "a running execution takes only --type continue (on from its last checkpoint) or --type cancel"
		if rt == engine.ResumeRetry {
			ref.Message += " (the worker runs a retry of a running execution as a continue)"
		}
	default:
		if err := a.Check(st, rt, data); err != nil {
			ref.Message, ref.Err = err.Error(), err
			if errors.Is(err, engine.ErrEventMismatch) && st.Suspend != nil && st.Suspend.Match != "" {
				ref.Detail = []string{"match:     " + st.Suspend.Match}
			}
			hashMismatch(ref, err)
		} else if rt == engine.ResumeRetry && st.Status == state.Error {
			if b := a.Budget.refusal(); b != nil {
				ref.Code, ref.Message, ref.Unblock, ref.Fields = "retry_budget", b.reason, b.unblock, b.fields()
				ref.Detail = b.lines()[1:]
			}
		}
	}
	if ref.Message == "" {
		return nil
	}
	ref.Accepted = a.Hints(st)
	return ref
}

// hashMismatch makes a refusal for a flow hash that differs in algorithm and value (an engine
// upgrade is suspected) a "flow_hash_mismatch" with the hashes and the override that unblocks
// it; a definition changed under the same algorithm stays a plain refusal (no override helps).
func hashMismatch(ref *Refusal, err error) {
	var he *engine.FlowHashError
	if !errors.As(err, &he) || !errors.Is(err, engine.ErrFlowHashMismatch) {
		return
	}
	ref.Code = "flow_hash_mismatch"
	ref.Unblock = "if the definition is unchanged (an engine upgrade changed how its hash is computed), resume again with the override: " +
		"--allow-flow-hash-change (API: \"allow_flow_hash_change\": true); the worker logs a WARNING and records the new hash in the timeline"
	ref.Fields = map[string]any{"stored_algo": he.StoredAlgo, "stored_hash": he.StoredHash, "current_algo": he.CurrentAlgo,
		"current_hash": he.CurrentHash, "upgrade_suspected": he.UpgradeSuspected, "hint": ref.Unblock}
}

// DescribeStatus is st's status with where it stands, for refusals.
func DescribeStatus(st *state.Execution) string {
	switch {
	case st.Status == state.Suspended && st.Suspend != nil:
		return fmt.Sprintf("suspended (%s at node %q)", DescribeSuspend(st.Suspend), st.Suspend.Node)
	case st.Status == state.Running && st.CurrentNode != "":
		return fmt.Sprintf("running (at node %q)", st.CurrentNode)
	case st.Status == state.Error && st.Error != nil:
		return fmt.Sprintf("in error (%s)", st.Error.Type)
	}
	return string(st.Status)
}

// DescribeEnd says where st stopped, as a clause after its id: "completed", "ended in error
// (TYPE: message)", "was cancelled", else "is " and DescribeStatus ("is suspended (approval at
// node …)").
func DescribeEnd(st *state.Execution) string {
	switch {
	case st.Status == state.Completed:
		return "completed"
	case st.Status == state.Error && st.Error != nil:
		return fmt.Sprintf("ended in error (%s: %s)", st.Error.Type, st.Error.Message)
	case st.Status == state.Error:
		return "ended in error"
	case st.Status == state.Cancelled:
		return "was cancelled"
	}
	return "is " + DescribeStatus(st)
}

// DescribeSuspend says what a suspended execution waits for.
func DescribeSuspend(s *state.Suspend) string {
	switch s.Kind {
	case state.SuspendEvent:
		return fmt.Sprintf("event %q", s.EventType)
	case state.SuspendApproval:
		return "approval"
	case state.SuspendDelay:
		return "delay"
	}
	return s.Kind
}

// ---- command lines ----

// CommandLine renders the resumes of an execution in Redis as `plaita execution …` command
// lines: what the hints, the wake-up report and the refusals print.
func (p *Plane) CommandLine(id, tenant string) func(engine.ResumeType, string) string {
	return func(rt engine.ResumeType, data string) string {
		parts := []string{"execution", "resume", shellQuote(id), "--type", string(rt)}
		if rt == engine.ResumeCancel {
			parts = []string{"execution", "cancel", shellQuote(id)}
		}
		if data != "" {
			parts = append(parts, "--data", shellQuote(data))
		}
		return p.Command(append(parts, tenantArgs(tenant)...)...)
	}
}

// ExecutionCommandLine is `plaita execution VERB ID [--tenant T]`.
func (p *Plane) ExecutionCommandLine(verb, id, tenant string) string {
	return p.Command(append([]string{"execution", verb, shellQuote(id)}, tenantArgs(tenant)...)...)
}

// Command is a plaita command line as the operator can run it: args (already quoted) after the
// program (Deps.Program: "plaita", or how this process was run).
func (p *Plane) Command(args ...string) string {
	return strings.Join(append([]string{p.d.Program}, args...), " ")
}

func tenantArgs(tenant string) []string {
	if tenant == keys.DefaultTenant || tenant == "" {
		return nil
	}
	return []string{"--tenant", shellQuote(tenant)}
}

// withCommands fills in the command line of every resume hint of st, and of a note that
// suggests a new start. An event resume is preceded by the event's publish: in the cluster that
// is how an event wait is woken (the filter role delivers it), the resume is the direct way.
func (p *Plane) withCommands(hints []Hint, st *state.Execution, tenant string) []Hint {
	cmd := p.CommandLine(st.ExecutionID, tenant)
	out := make([]Hint, 0, len(hints)+1)
	for _, h := range hints {
		switch {
		case h.Type != "":
			h.Command = cmd(h.Type, h.Data)
			if h.AllowFlowHashChange {
				h.Command += " --allow-flow-hash-change"
			}
		case h.startInput != "":
			h.Command = p.Command(append([]string{"start", shellQuote(st.FlowID), "--input", shellQuote(h.startInput)}, tenantArgs(tenant)...)...)
		}
		// A published event cannot carry the flow_hash override: past a mismatch only the
		// resume is offered.
		if h.Type == engine.ResumeEvent && h.publish != "" && !h.AllowFlowHashChange && st.Suspend != nil {
			out = append(out, Hint{Label: "publish the event with (the filter role delivers it: --data is what the execution sees as EVENT)",
				Command: p.publishCommand(st.Suspend.EventType, h.publish, tenant)})
			h.Label = "or resume it directly with (--data is the event, EVENT in the match)"
		}
		out = append(out, h)
	}
	return out
}

// publishCommand is `plaita event publish TYPE [--data JSON] [--tenant T]`.
func (p *Plane) publishCommand(eventType, data, tenant string) string {
	parts := []string{"event", "publish", shellQuote(eventType)}
	if data != "{}" {
		parts = append(parts, "--data", shellQuote(data))
	}
	return p.Command(append(parts, tenantArgs(tenant)...)...)
}

// publishData is the data of ev (accepted as resumeData, its "type" first) as a publish gives
// it: without "type" — the event's type is the publish's argument — when the wait takes the
// event so, else as the resume gives it (a match that reads EVENT.type).
func (a *Advice) publishData(st *state.Execution, ev map[string]any, resumeData string) string {
	data := make(map[string]any, len(ev))
	for k, v := range ev {
		if k != "type" {
			data[k] = v
		}
	}
	s, err := eventJSON(data)
	if err != nil || a.Check(st, engine.ResumeEvent, data) != nil {
		return resumeData
	}
	return s
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string { return shellQuote(s) }

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
	if _, ok := v.(missingValue); ok {
		buf.WriteString("…")
		return nil
	}
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
