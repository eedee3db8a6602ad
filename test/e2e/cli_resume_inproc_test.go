//go:build !e2e

package e2e

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store/keys"
)

// resumeFixture is a stack with published flows and execution states written directly, and
// no worker: what `plaita execution resume` enqueues stays in the stream, so a refusal is
// proven by the stream length once the command has exited.
type resumeFixture struct {
	*stack
	sp keys.Space
}

func newResumeFixture(t *testing.T) *resumeFixture {
	return &resumeFixture{stack: newStack(t, withEnv(cliEnv())), sp: keys.MustFor("", "")}
}

// publishVersion stores a definition the way `plaita start FILE` does and returns its hash.
func (fx *resumeFixture) publishVersion(flowID, version, def string) string {
	fx.t.Helper()
	if err := fx.c.Do(context.Background(), fx.c.B().Set().Key(fx.sp.Flow(flowID, version)).Value(def).Build()).Error(); err != nil {
		fx.t.Fatal(err)
	}
	h, err := engine.FlowHash([]byte(def))
	if err != nil {
		fx.t.Fatal(err)
	}
	return h
}

// seed saves an execution of flowID/version with the given hash, shaped by fn.
func (fx *resumeFixture) seed(id, flowID, version, hash string, fn func(*state.Execution)) {
	fx.t.Helper()
	now := time.Now().UTC()
	st := &state.Execution{ExecutionID: id, FlowID: flowID, FlowVersion: version, FlowHash: hash,
		FlowHashAlgo: engine.FlowHashAlgo, Engine: engine.Version, Context: map[string]any{},
		StartTime: now, LastUpdate: now}
	fn(st)
	if err := fx.ts.Save(context.Background(), st); err != nil {
		fx.t.Fatal(err)
	}
}

func (fx *resumeFixture) queued() int64 {
	fx.t.Helper()
	n, err := fx.c.Do(context.Background(), fx.c.B().Xlen().Key("plaita:flow:queue").Build()).AsInt64()
	if err != nil {
		fx.t.Fatal(err)
	}
	return n
}

func (fx *resumeFixture) setCounter(family, id string, n int) {
	fx.t.Helper()
	k, err := fx.sp.Mechanism(family, id)
	if err != nil {
		fx.t.Fatal(err)
	}
	if err := fx.c.Do(context.Background(), fx.c.B().Set().Key(k).Value(strconv.Itoa(n)).Build()).Error(); err != nil {
		fx.t.Fatal(err)
	}
}

func (fx *resumeFixture) delCounter(family, id string) {
	fx.t.Helper()
	k, _ := fx.sp.Mechanism(family, id)
	if err := fx.c.Do(context.Background(), fx.c.B().Del().Key(k).Build()).Error(); err != nil {
		fx.t.Fatal(err)
	}
}

// resume runs `plaita execution resume` and checks its exit status and what it enqueued.
func (fx *resumeFixture) resume(wantCode int, args ...string) result {
	fx.t.Helper()
	before := fx.queued()
	r := run(fx.t, fx.env, append([]string{"execution", "resume"}, append(args, "--quiet")...)...)
	if r.code != wantCode {
		fx.t.Fatalf("resume %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, r.code, wantCode, r.stdout, r.stderr)
	}
	want := int64(0)
	if wantCode == 0 {
		want = 1
	}
	if n := fx.queued() - before; n != want {
		fx.t.Fatalf("resume %v enqueued %d message(s), want %d\n%s", args, n, want, r.stderr)
	}
	return r
}

const failFlow = `{"id": "boom", "version": "1", "start": "f", "nodes": [
  {"id": "f", "type": "fail", "params": {"message": "no"}}]}`

func suspendedOrder(st *state.Execution) {
	due := time.Now().Add(time.Hour).UTC()
	st.Status, st.CurrentNode, st.Input = state.Suspended, "wait", map[string]any{"order_id": 7.0}
	st.Suspend = &state.Suspend{Kind: state.SuspendEvent, Node: "wait", Since: time.Now().UTC(), Due: &due,
		EventType: "order.paid", Match: "EVENT.order_id == INPUT.order_id"}
}

func failedAt(typ string) func(*state.Execution) {
	return func(st *state.Execution) {
		end := time.Now().UTC()
		st.Status, st.CurrentNode, st.EndTime = state.Error, "f", &end
		st.Error = &state.ErrorInfo{Type: typ, Message: "no", Node: "f", Permanent: true}
	}
}

// TestCLIResumeRefusesWhatTheWorkerWouldRefuse: `execution resume` reads the state and the
// published definition and refuses, before enqueuing, what the worker would refuse — saying why
// and what would be accepted. --force skips the advice.
func TestCLIResumeRefusesWhatTheWorkerWouldRefuse(t *testing.T) {
	t.Parallel()
	fx := newResumeFixture(t)
	orderHash := fx.publishVersion("order", "1", orderFlow)
	failHash := fx.publishVersion("boom", "1", failFlow)
	fx.seed("ex-wait", "order", "1", orderHash, suspendedOrder)

	// An event the match refuses.
	r := fx.resume(1, "ex-wait", "--type", "event", "--data", `{"order_id": 8}`)
	mustContain(t, "mismatching event", r.stderr, "does not match", "EVENT.order_id == INPUT.order_id",
		`plaita execution resume ex-wait --type event --data '{"type": "order.paid", "order_id": 7}'`,
		"plaita execution resume ex-wait --type timeout", "plaita execution cancel ex-wait", "--force")
	// A type the suspension does not take.
	r = fx.resume(1, "ex-wait", "--type", "approval", "--data", `{"approved": true}`)
	mustContain(t, "approval of an event wait", r.stderr, `does not take a resume of type "approval"`, "--type event --data")
	// --force enqueues it anyway: the worker decides.
	r = fx.resume(0, "ex-wait", "--type", "event", "--data", `{"order_id": 8}`, "--force")
	mustContain(t, "forced resume", r.stdout, "enqueued", "--force")
	// The matching event, with --json.
	r = fx.resume(0, "ex-wait", "--type", "event", "--data", `{"type": "order.paid", "order_id": 7}`, "--json")
	var enq struct {
		ExecutionID string `json:"execution_id"`
		ResumeType  string `json:"resume_type"`
		Enqueued    bool   `json:"enqueued"`
		Checked     bool   `json:"checked"`
		MessageID   string `json:"message_id"`
		Was         string `json:"was"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &enq); err != nil || !enq.Enqueued || !enq.Checked || enq.ResumeType != "event" ||
		enq.MessageID == "" || enq.Was != "suspended" || enq.ExecutionID != "ex-wait" {
		t.Fatalf("resume --json: %+v %v\n%s", enq, err, r.stdout)
	}

	// A definition that is not published (any more): the worker would dead-letter the resume.
	fx.seed("ex-lost", "order", "2", orderHash, suspendedOrder)
	r = fx.resume(1, "ex-lost", "--type", "timeout")
	mustContain(t, "unpublished flow", r.stderr, "order", `"2"`, "not published", "plaita execution cancel ex-lost")
	// A definition changed under the execution.
	fx.seed("ex-changed", "order", "1", "0000", suspendedOrder)
	r = fx.resume(1, "ex-changed", "--type", "timeout")
	mustContain(t, "changed flow", r.stderr, "changed")

	// A definition this process cannot parse (a node type only the workers have): not judged
	// here, so refused with the way around it.
	extHash := fx.publishVersion("ext", "1", strings.Replace(orderFlow, `{"id": "done", "type": "end"}`,
		`{"id": "done", "type": "frobnicate"}`, 1))
	fx.seed("ex-ext", "ext", "1", extHash, suspendedOrder)
	r = fx.resume(1, "ex-ext", "--type", "timeout")
	mustContain(t, "unparsable flow", r.stderr, "does not parse in this process", "--force", "plaita execution cancel ex-ext")
	fx.resume(0, "ex-ext", "--type", "timeout", "--force")

	// A failure a retry cannot get past (the flow's fail node): refused, with what to do instead.
	fx.seed("ex-declined", "boom", "1", failHash, failedAt(engine.ErrTypeFlowFailed))
	r = fx.resume(1, "ex-declined", "--type", "retry")
	mustContain(t, "retry of a fail node", r.stderr, "fail node", "ends the same way", "start a new execution")

	// Retry wake-up budgets, as the console's 409: the counters, the key, how to unblock. A node
	// error is what a retry can get past.
	fx.seed("ex-failed", "boom", "1", failHash, failedAt(engine.ErrTypeNode))
	g1Key, _ := fx.sp.Mechanism(keys.FamG1Wakeups, "ex-failed")
	noFailKey, _ := fx.sp.Mechanism(keys.FamNoFail, "ex-failed")
	fx.setCounter(keys.FamG1Wakeups, "ex-failed", 2)
	r = fx.resume(1, "ex-failed", "--type", "retry")
	mustContain(t, "g1wakeups refusal", r.stderr, "g1wakeups", "2/2", g1Key, "DEL", "after fixing the cause")
	r = fx.resume(1, "ex-failed", "--type", "retry", "--json")
	var refusal struct {
		Enqueued   bool             `json:"enqueued"`
		Reason     string           `json:"reason"`
		Counters   map[string]int64 `json:"counters"`
		CounterKey string           `json:"counter_key"`
		Hint       string           `json:"hint"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &refusal); err != nil || refusal.Enqueued || refusal.CounterKey != g1Key ||
		refusal.Counters["g1wakeups"] != 2 || refusal.Counters["nofail"] != 0 || refusal.Reason == "" || !strings.Contains(refusal.Hint, "DEL") {
		t.Fatalf("refusal --json: %+v %v\n%s", refusal, err, r.stdout)
	}
	fx.delCounter(keys.FamG1Wakeups, "ex-failed")
	fx.setCounter(keys.FamNoFail, "ex-failed", 12)
	r = fx.resume(1, "ex-failed", "--type", "retry")
	mustContain(t, "nofail refusal", r.stderr, "nofail", "12/12", noFailKey, "DEL")
	fx.delCounter(keys.FamNoFail, "ex-failed")
	fx.resume(0, "ex-failed", "--type", "retry")
	// An execution in error takes a retry only.
	r = fx.resume(1, "ex-failed", "--type", "continue")
	mustContain(t, "continue of an error", r.stderr, "plaita execution resume ex-failed --type retry")

	// An execution that used all its steps: a retry would stop again at once.
	fx.seed("ex-steps", "boom", "1", failHash, failedAt(engine.ErrTypeStepLimit))
	r = fx.resume(1, "ex-steps", "--type", "retry")
	mustContain(t, "step limit refusal", r.stderr, "used all its steps", "new execution")
	mustNotContain(t, "step limit refusal", r.stderr, "--type retry")

	// A running execution takes continue and cancel only.
	fx.seed("ex-running", "boom", "1", failHash, func(st *state.Execution) { st.Status, st.CurrentNode = state.Running, "f" })
	for _, typ := range []string{"event", "approval", "timeout", "retry"} {
		r = fx.resume(1, "ex-running", "--type", typ)
		mustContain(t, typ+" of a running execution", r.stderr, "running", "--type continue", "cancel")
	}
	fx.resume(0, "ex-running", "--type", "continue")
	fx.resume(0, "ex-running", "--type", "cancel")

	// Completed and cancelled stay refused, even with --force.
	fx.seed("ex-done", "boom", "1", failHash, func(st *state.Execution) { st.Status = state.Completed })
	r = fx.resume(1, "ex-done", "--type", "continue", "--force")
	mustContain(t, "resume of completed", r.stderr, "completed")
}

// TestCLIShowHintsAreAccepted: `execution show` prints only commands the resume check accepts,
// and says what to do instead when there is none.
func TestCLIShowHintsAreAccepted(t *testing.T) {
	t.Parallel()
	fx := newResumeFixture(t)
	orderHash := fx.publishVersion("order", "1", orderFlow)
	failHash := fx.publishVersion("boom", "1", failFlow)
	show := func(id string) string {
		t.Helper()
		r := run(t, fx.env, "execution", "show", id, "--quiet")
		if r.code != 0 {
			t.Fatalf("show %s: exit %d\n%s", id, r.code, r.stderr)
		}
		return r.stdout
	}

	fx.seed("ex-wait", "order", "1", orderHash, suspendedOrder)
	out := show("ex-wait")
	event := `plaita execution resume ex-wait --type event --data '{"type": "order.paid", "order_id": 7}'`
	mustContain(t, "show of an event wait", out, "match:     EVENT.order_id == INPUT.order_id", event,
		"plaita execution resume ex-wait --type timeout", "plaita execution cancel ex-wait")
	fx.resume(0, shellWords(t, event)[3:]...)

	// A match no example can be built for: the expression and what the event must satisfy, no
	// event command.
	bigHash := fx.publishVersion("big", "1", strings.Replace(strings.Replace(orderFlow, `"order"`, `"big"`, 1),
		"EVENT.order_id == INPUT.order_id", "EVENT.amount > 10", 1))
	fx.seed("ex-big", "big", "1", bigHash, func(st *state.Execution) {
		suspendedOrder(st)
		st.Suspend.Match = "EVENT.amount > 10"
	})
	out = show("ex-big")
	mustContain(t, "show of an unguessable match", out, "match:     EVENT.amount > 10", "must satisfy",
		"plaita execution resume ex-big --type timeout")
	mustNotContain(t, "show of an unguessable match", out, "--type event")

	// An execution that ended at a fail node is offered no retry (it would fail the same way).
	fx.seed("ex-declined", "boom", "1", failHash, failedAt(engine.ErrTypeFlowFailed))
	out = show("ex-declined")
	mustContain(t, "show of a fail node", out, "no retry", "fail node", "start a new execution")
	mustNotContain(t, "show of a fail node", out, "--type retry")

	// Retry of a node error: shown while the budgets allow it, replaced by the unblock hint when
	// they do not.
	fx.seed("ex-failed", "boom", "1", failHash, failedAt(engine.ErrTypeNode))
	mustContain(t, "show of an error", show("ex-failed"), "plaita execution resume ex-failed --type retry")
	fx.setCounter(keys.FamG1Wakeups, "ex-failed", 2)
	out = show("ex-failed")
	g1Key, _ := fx.sp.Mechanism(keys.FamG1Wakeups, "ex-failed")
	mustContain(t, "show with the wake-ups used up", out, "g1wakeups", "2/2", g1Key, "DEL")
	mustNotContain(t, "show with the wake-ups used up", out, "plaita execution resume ex-failed --type retry")

	fx.seed("ex-steps", "boom", "1", failHash, failedAt(engine.ErrTypeStepLimit))
	out = show("ex-steps")
	mustContain(t, "show of a step limit", out, "new execution")
	mustNotContain(t, "show of a step limit", out, "--type retry")
}
