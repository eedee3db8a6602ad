package roles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"plaita/engine"
	"plaita/engine/nodes"
	"plaita/engine/state"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// `plaita execution resume` reads the execution and refuses, before enqueuing, what the worker
// would refuse — saying why and what would be accepted instead — rather than answer "enqueued"
// for a message the worker then drops. The checks are the worker's own: engine.CheckResume
// against the published definition, the flow_not_found/invalid_flow dead letters, and the two
// retry wake-up gates of the dispatcher (g1wakeups, nofail). It is advice: the state can move
// between the check and the delivery, the worker decides again, and --force skips it.

// flowRegistry is the node registry a command parses flows with: the worker's node types, so
// a definition parses here exactly when it parses on a worker.
func (k *conn) flowRegistry() (*engine.Registry, error) {
	reg := engine.NewRegistry()
	if err := nodes.Register(reg, nodeOptions(k.cfg), nodeSetupLog(k.log)); err != nil {
		return nil, err
	}
	return reg, nil
}

var (
	// errFlowUnavailable marks a definition the worker cannot run the execution on (it is not
	// published); the advice then offers a cancel only.
	errFlowUnavailable = errors.New("flow definition unavailable")
	// errCannotCheck marks a definition this process cannot judge: it does not parse here, or
	// the node types cannot be set up here (a worker may have other node executables or a
	// docker daemon). The advice then offers a cancel only, and says --force skips the check.
	errCannotCheck = errors.New("cannot check here")
)

// publishedFlow reads and parses the definition st runs, as the worker does for a resume.
func (k *conn) publishedFlow(ctx context.Context, st *state.Execution) (*engine.Flow, error) {
	def, err := k.flows.Get(ctx, k.sp.Tenant(), st.FlowID, st.FlowVersion)
	switch {
	case errors.Is(err, store.ErrFlowNotFound):
		return nil, fmt.Errorf("%w: %v: the worker would dead-letter a resume (flow_not_found)", errFlowUnavailable, err)
	case err != nil:
		return nil, fmt.Errorf("read flow %s version %q: %w", st.FlowID, st.FlowVersion, err)
	}
	reg, err := k.flowRegistry()
	if err != nil {
		return nil, fmt.Errorf("%w: the node types cannot be set up in this process (%w); --force enqueues without the check", errCannotCheck, err)
	}
	f, err := engine.Parse(def, reg, settings.Engine(k.cfg).Expr)
	if err != nil {
		return nil, fmt.Errorf("%w: the published flow %s version %q does not parse in this process (a worker that cannot parse it either dead-letters "+
			"the resume as invalid_flow; --force enqueues without the check): %w", errCannotCheck, st.FlowID, st.FlowVersion, err)
	}
	return f, nil
}

// readRetryBudget reads the dispatcher's retry gates of one execution.
func (k *conn) readRetryBudget(ctx context.Context, id string) (*retryBudget, error) {
	b := &retryBudget{}
	var err error
	if b.G1Key, err = k.sp.Mechanism(keys.FamG1Wakeups, id); err != nil {
		return nil, err
	}
	if b.NoFailKey, err = k.sp.Mechanism(keys.FamNoFail, id); err != nil {
		return nil, err
	}
	if b.G1Wakeups, err = k.ts.Counter(ctx, keys.FamG1Wakeups, id); err != nil {
		return nil, fmt.Errorf("read the retry wake-up counter: %w", err)
	}
	if b.NoFail, err = k.ts.Counter(ctx, keys.FamNoFail, id); err != nil {
		return nil, fmt.Errorf("read the deterministic-failure counter: %w", err)
	}
	return b, nil
}

// adviceFor is what the hints and the resume check of st are judged against: its published
// definition (f when the caller has it already), and for an execution in error the retry gates.
func (k *conn) adviceFor(ctx context.Context, st *state.Execution, f *engine.Flow) (*advice, error) {
	a := &advice{flow: f, limits: settings.Engine(k.cfg).Expr, now: time.Now()}
	if a.flow == nil && st.Status != state.Completed && st.Status != state.Cancelled {
		var err error
		if a.flow, err = k.publishedFlow(ctx, st); err != nil {
			if !errors.Is(err, errFlowUnavailable) && !errors.Is(err, errCannotCheck) {
				return nil, err
			}
			a.flowErr = err
		}
	}
	if st.Status == state.Error {
		var err error
		if a.budget, err = k.readRetryBudget(ctx, st.ExecutionID); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// cliCommand renders the commands of the hints for an execution in Redis.
func cliCommand(id, tenant string) func(engine.ResumeType, string) string {
	return func(rt engine.ResumeType, data string) string {
		parts := []string{"plaita", "execution", "resume", shellQuote(id), "--type", string(rt)}
		if rt == engine.ResumeCancel {
			parts = []string{"plaita", "execution", "cancel", shellQuote(id)}
		}
		if data != "" {
			parts = append(parts, "--data", shellQuote(data))
		}
		if tenant != keys.DefaultTenant && tenant != "" {
			parts = append(parts, "--tenant", shellQuote(tenant))
		}
		return strings.Join(parts, " ")
	}
}

// resumeRefusal is a resume the check turned down.
type resumeRefusal struct {
	rt     engine.ResumeType
	reason string
	detail []string       // lines that explain the reason (the match, the counters)
	budget *budgetRefusal // a retry the wake-up gates refuse
	hints  []hint         // what is accepted instead
}

// checkResume applies the worker's checks to a resume of st; nil when it would be accepted.
func checkResume(st *state.Execution, a *advice, rt engine.ResumeType, data any) *resumeRefusal {
	ref := &resumeRefusal{rt: rt}
	switch {
	case st.Status == state.Running && rt != engine.ResumeContinue && rt != engine.ResumeCancel:
		ref.reason = "a running execution takes only --type continue (on from its last checkpoint) or --type cancel"
		if rt == engine.ResumeRetry {
			ref.reason += " (the worker runs a retry of a running execution as a continue)"
		}
	default:
		if err := a.check(st, rt, data); err != nil {
			ref.reason = err.Error()
			if errors.Is(err, engine.ErrEventMismatch) && st.Suspend != nil && st.Suspend.Match != "" {
				ref.detail = []string{"match:     " + st.Suspend.Match}
			}
		} else if rt == engine.ResumeRetry && st.Status == state.Error {
			if b := a.budget.refusal(); b != nil {
				ref.reason, ref.budget = b.reason, b
				ref.detail = b.lines()[1:]
			}
		}
	}
	if ref.reason == "" {
		return nil
	}
	ref.hints = a.hints(st)
	return ref
}

// write prints the refusal to stderr: the reason, then what is accepted now.
func (ref *resumeRefusal) write(w io.Writer, st *state.Execution, tenant string) {
	fmt.Fprintf(w, "plaita: resume: execution %s is %s; this %s resume is refused: %s\n", st.ExecutionID, describeStatus(st), ref.rt, ref.reason)
	for _, l := range ref.detail {
		fmt.Fprintf(w, "  %s\n", l)
	}
	var cmds, notes []hint
	for _, h := range ref.hints {
		if h.rt != "" {
			cmds = append(cmds, h)
		} else {
			notes = append(notes, h)
		}
	}
	cmd := cliCommand(st.ExecutionID, tenant)
	switch {
	case len(cmds) > 0:
		// The notes beside commands restate the reason (a changed definition, the match).
		fmt.Fprintln(w, "accepted now:")
		writeHints(w, cmds, cmd)
	case ref.budget != nil: // its lines are in the detail already
		fmt.Fprintln(w, "no resume is accepted now.")
	default:
		fmt.Fprintln(w, "no resume is accepted now.")
		writeHints(w, notes, cmd)
	}
	fmt.Fprintln(w, "(--force enqueues it anyway: the worker checks again and refuses what does not fit)")
}

// json is the refusal as printed by --json.
func (ref *resumeRefusal) json(st *state.Execution, tenant string) map[string]any {
	cmd := cliCommand(st.ExecutionID, tenant)
	accepted := []map[string]any{}
	for _, h := range ref.hints {
		if h.rt != "" {
			a := map[string]any{"type": h.rt, "command": cmd(h.rt, h.data)}
			if h.data != "" {
				a["data"] = json.RawMessage(h.data)
			}
			accepted = append(accepted, a)
		}
	}
	out := map[string]any{"execution_id": st.ExecutionID, "tenant_id": tenant, "action": "resume", "resume_type": ref.rt,
		"result": "refused", "enqueued": false, "was": st.Status, "reason": ref.reason, "accepted": accepted}
	if ref.budget != nil {
		for k, v := range ref.budget.json() {
			out[k] = v
		}
	}
	return out
}
