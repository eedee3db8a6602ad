package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
)

// fakeClock advances only when told to (or when the executor sleeps).
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

type harness struct {
	t     *testing.T
	reg   *Registry
	mem   *store.Memory
	clock *fakeClock
	set   Settings
	ex    *Executor
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, reg: NewRegistry(), mem: store.NewMemory(), clock: newFakeClock(), set: DefaultSettings()}
	h.ex = &Executor{Store: h.mem, Cancel: h.mem, Clock: h.clock, Settings: func() Settings { return h.set }}
	return h
}

func (h *harness) flow(src string) *Flow {
	h.t.Helper()
	f, err := Parse([]byte(src), h.reg, h.set.Expr)
	if err != nil {
		h.t.Fatalf("parse: %v", err)
	}
	return f
}

func (h *harness) start(f *Flow, input any) *state.Execution {
	h.t.Helper()
	st, err := h.ex.Start(context.Background(), f, StartRequest{Input: input})
	if err != nil {
		h.t.Fatalf("start: %v", err)
	}
	return st
}

// stored reloads the state from the store: what a worker on another machine would see.
func (h *harness) stored(id string) *state.Execution {
	h.t.Helper()
	st, err := h.mem.Load(context.Background(), id)
	if err != nil {
		h.t.Fatalf("load %s: %v", id, err)
	}
	return st
}

func wantStatus(t *testing.T, st *state.Execution, want state.Status) {
	t.Helper()
	if st.Status != want {
		t.Fatalf("status %s, want %s (error: %+v, node %s)", st.Status, want, st.Error, st.CurrentNode)
	}
}

func wantError(t *testing.T, st *state.Execution, typ, node string) {
	t.Helper()
	wantStatus(t, st, state.Error)
	if st.Error == nil || st.Error.Type != typ || st.Error.Node != node {
		t.Fatalf("error %+v, want type %s at node %q", st.Error, typ, node)
	}
}

func TestLinearFlowWithTemplates(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"greet","start":"a","vars":{"greeting":"hello"},"nodes":[
		{"id":"a","type":"set","params":{"vars":{"who":"{{ INPUT.name ?? 'world' }}","n":"{{ len(INPUT.items ?? []) }}"}},"next":"b"},
		{"id":"b","type":"log","params":{"message":"{{ VARS.greeting }}, {{ VARS.who }} ({{ VARS.n }} items)"},"next":"c"},
		{"id":"c","type":"end","params":{"output":{"text":"{{ NODE.b.message }}","n":"{{ VARS.n * 2 }}","static":[1,"two"]}}}]}`)
	st := h.start(f, map[string]any{"name": "Ada", "items": []any{1, 2, 3}})
	wantStatus(t, st, state.Completed)
	out := fmt.Sprint(st.Output)
	if out != "map[n:6 static:[1 two] text:hello, Ada (3 items)]" {
		t.Errorf("output %s", out)
	}
	if st.StepCount != 3 || st.EndTime == nil {
		t.Errorf("steps %d, end %v", st.StepCount, st.EndTime)
	}
	// What is stored is what was returned.
	if got := fmt.Sprint(h.stored(st.ExecutionID).Output); got != out {
		t.Errorf("stored output %s, returned %s", got, out)
	}
	if st.NodeTimings["b"] == nil || st.NodeTimings["b"].Runs != 1 {
		t.Errorf("node timings %+v", st.NodeTimings)
	}
}

func TestConditionAndSwitch(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"route","start":"kind","nodes":[
		{"id":"kind","type":"switch","cases":[{"when":"INPUT.kind == 'a'","next":"is_a"},{"when":"INPUT.kind == 'b'","next":"big"}],"default":"other"},
		{"id":"big","type":"condition","params":{"expr":"INPUT.n > 10"},"branches":{"true":"is_big"}},
		{"id":"is_a","type":"end","params":{"output":"a"}},
		{"id":"is_big","type":"end","params":{"output":"big b"}},
		{"id":"other","type":"end","params":{"output":"other"}}]}`)
	for _, tc := range []struct {
		input map[string]any
		want  string
	}{
		{map[string]any{"kind": "a"}, "a"},
		{map[string]any{"kind": "b", "n": 11}, "big b"},
		{map[string]any{"kind": "z"}, "other"},
	} {
		st := h.start(f, tc.input)
		wantStatus(t, st, state.Completed)
		if st.Output != tc.want {
			t.Errorf("%v: output %v, want %s", tc.input, st.Output, tc.want)
		}
	}
	// A condition whose branch is missing ends in error, never stuck running.
	st := h.start(f, map[string]any{"kind": "b", "n": 1})
	wantError(t, st, ErrTypeNoBranch, "big")
	if wantStatus(t, h.stored(st.ExecutionID), state.Error); !st.Error.Permanent {
		t.Error("a missing branch is permanent")
	}
	// A switch with no match and no default too.
	g := h.flow(`{"id":"sw","start":"s","nodes":[
		{"id":"s","type":"switch","cases":[{"when":"false","next":"e"}]},
		{"id":"e","type":"end"}]}`)
	wantError(t, h.start(g, nil), ErrTypeNoBranch, "s")
	// A non-boolean condition is an error naming the node.
	k := h.flow(`{"id":"nb","start":"c","nodes":[
		{"id":"c","type":"condition","params":{"expr":"INPUT"},"branches":{"true":"e","false":"e"}},
		{"id":"e","type":"end"}]}`)
	st = h.start(k, "text")
	wantError(t, st, ErrTypeNode, "c")
	if !strings.Contains(st.Error.Message, "not a boolean") {
		t.Errorf("message %q", st.Error.Message)
	}
}

const countFlow = `{"id":"count","start":"check","vars":{"i":0},"nodes":[
	{"id":"check","type":"condition","params":{"expr":"VARS.i < INPUT.to"},"branches":{"true":"inc","false":"done"}},
	{"id":"inc","type":"set","params":{"vars":{"i":"{{ VARS.i + 1 }}"}},"next":"check"},
	{"id":"done","type":"end","params":{"output":"{{ VARS.i }}"}}]}`

func TestLoopWithGuardRuns10000Iterations(t *testing.T) {
	h := newHarness(t)
	h.set.TimelineMax = 10
	st := h.start(h.flow(countFlow), map[string]any{"to": 10000})
	wantStatus(t, st, state.Completed)
	if st.Output != float64(10000) {
		t.Fatalf("output %v", st.Output)
	}
	if st.StepCount != 20002 {
		t.Errorf("steps %d, want 20002", st.StepCount)
	}
	if len(st.Timeline) != 10 || st.TimelineDropped != st.Timeline[0].Seq-1 {
		t.Errorf("timeline %d entries, %d dropped, first seq %d", len(st.Timeline), st.TimelineDropped, st.Timeline[0].Seq)
	}
}

func TestLoopWithoutGuardStopsAtTheStepLimit(t *testing.T) {
	h := newHarness(t)
	h.set.TimelineMax = 5
	f := h.flow(`{"id":"spin","start":"a","nodes":[
		{"id":"a","type":"set","params":{"vars":{"x":1}},"next":"b"},
		{"id":"b","type":"log","params":{"message":"again"},"next":"a"}]}`)
	st := h.start(f, nil)
	wantStatus(t, st, state.Error)
	if st.Error.Type != ErrTypeStepLimit || st.StepCount != DefaultMaxSteps || !strings.Contains(st.Error.Message, "max_steps") {
		t.Fatalf("error %+v after %d steps", st.Error, st.StepCount)
	}
	g := h.flow(`{"id":"spin2","max_steps":7,"start":"a","nodes":[{"id":"a","type":"log","params":{"message":"x"},"next":"a"}]}`)
	if st := h.start(g, nil); st.Error == nil || st.Error.Type != ErrTypeStepLimit || st.StepCount != 7 {
		t.Fatalf("max_steps 7: %+v after %d steps", st.Error, st.StepCount)
	}
}

// flaky fails its first `failures` runs with a retryable error.
type flakyType struct {
	mu       sync.Mutex
	runs     int
	failures int
	err      error
}

func (ft *flakyType) Prepare(n *Node, pc *PrepareContext) Runner { pc.Params(); return ft }

func (ft *flakyType) Run(context.Context, *Call) (Outcome, error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.runs++
	if ft.runs <= ft.failures {
		if ft.err != nil {
			return Outcome{}, ft.err
		}
		return Outcome{}, fmt.Errorf("upstream 503 (run %d)", ft.runs)
	}
	return Outcome{Output: map[string]any{"runs": ft.runs}}, nil
}

const retryFlow = `{"id":"retry","start":"f","nodes":[
	{"id":"f","type":"flaky","retry":{"max_attempts":3,"backoff_seconds":2,"backoff_multiplier":2},"next":"e"},
	{"id":"e","type":"end","params":{"output":"{{ NODE.f.runs }}"}}]}`

func TestNodeRetry(t *testing.T) {
	t.Run("succeeds on the third attempt with exponential backoff", func(t *testing.T) {
		h := newHarness(t)
		fl := &flakyType{failures: 2}
		h.reg.Register("flaky", fl)
		st := h.start(h.flow(retryFlow), nil)
		wantStatus(t, st, state.Completed)
		if st.Output != float64(3) || fmt.Sprint(h.clock.sleeps) != "[2s 4s]" {
			t.Fatalf("output %v, sleeps %v", st.Output, h.clock.sleeps)
		}
		if len(st.NodeAttempts) != 0 {
			t.Errorf("attempts not cleared after success: %v", st.NodeAttempts)
		}
	})
	t.Run("gives up after max_attempts", func(t *testing.T) {
		h := newHarness(t)
		h.reg.Register("flaky", &flakyType{failures: 5})
		st := h.start(h.flow(retryFlow), nil)
		wantError(t, st, ErrTypeNode, "f")
		if st.Error.Permanent || !strings.Contains(st.Error.Message, "after 3 attempts") {
			t.Errorf("error %+v", st.Error)
		}
	})
	t.Run("permanent errors are not retried", func(t *testing.T) {
		h := newHarness(t)
		fl := &flakyType{failures: 5, err: Permanent(errors.New("bad request"))}
		h.reg.Register("flaky", fl)
		st := h.start(h.flow(retryFlow), nil)
		wantError(t, st, ErrTypeNode, "f")
		if fl.runs != 1 || !st.Error.Permanent {
			t.Errorf("runs %d, error %+v", fl.runs, st.Error)
		}
	})
	t.Run("PLAITA_DISABLE_NODE_RETRY makes any failure terminal", func(t *testing.T) {
		h := newHarness(t)
		h.set.DisableNodeRetry = true
		fl := &flakyType{failures: 1}
		h.reg.Register("flaky", fl)
		wantError(t, h.start(h.flow(retryFlow), nil), ErrTypeNode, "f")
		if fl.runs != 1 {
			t.Errorf("runs %d", fl.runs)
		}
	})
	t.Run("resume retry re-runs the failed node", func(t *testing.T) {
		h := newHarness(t)
		fl := &flakyType{failures: 3}
		h.reg.Register("flaky", fl)
		f := h.flow(retryFlow)
		st := h.start(f, nil)
		wantError(t, st, ErrTypeNode, "f")
		st, err := h.ex.Resume(context.Background(), f, st.ExecutionID, ResumeRetry, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, st, state.Completed)
		if _, err := h.ex.Resume(context.Background(), f, st.ExecutionID, ResumeRetry, nil); !errors.Is(err, ErrInvalidResume) {
			t.Errorf("retrying a completed execution: %v", err)
		}
		loop := h.flow(`{"id":"l","max_steps":3,"start":"a","nodes":[{"id":"a","type":"log","params":{"message":"x"},"next":"a"}]}`)
		st = h.start(loop, nil)
		if _, err := h.ex.Resume(context.Background(), loop, st.ExecutionID, ResumeRetry, nil); !errors.Is(err, ErrInvalidResume) || !strings.Contains(err.Error(), "used all its steps") {
			t.Errorf("retrying a step-limit error: %v", err)
		}
	})
}

// slowType advances the fake clock by d each run.
type slowType struct {
	clock *fakeClock
	d     time.Duration
}

func (s slowType) Prepare(*Node, *PrepareContext) Runner { return s }
func (s slowType) Run(context.Context, *Call) (Outcome, error) {
	s.clock.Advance(s.d)
	return Outcome{}, nil
}

func TestExecutionDeadline(t *testing.T) {
	h := newHarness(t)
	h.reg.Register("slow", slowType{h.clock, 4 * time.Second})
	f := h.flow(`{"id":"slow","timeout":10,"start":"a","nodes":[
		{"id":"a","type":"slow","next":"b"},{"id":"b","type":"slow","next":"c"},
		{"id":"c","type":"slow","next":"d"},{"id":"d","type":"end"}]}`)
	st := h.start(f, nil)
	wantError(t, st, ErrTypeDeadline, "d")
	if !st.Error.Permanent {
		t.Error("a deadline is not retried")
	}
	// Without a flow timeout the configured deadline applies.
	h.set.Deadline = 5 * time.Second
	g := h.flow(`{"id":"slow2","start":"a","nodes":[{"id":"a","type":"slow","next":"b"},{"id":"b","type":"slow","next":"c"},{"id":"c","type":"end"}]}`)
	wantError(t, h.start(g, nil), ErrTypeDeadline, "c")
}

// blockType waits for its context: the deadline must interrupt a running node.
type blockType struct{}

func (blockType) Prepare(*Node, *PrepareContext) Runner { return blockType{} }
func (blockType) Run(ctx context.Context, _ *Call) (Outcome, error) {
	<-ctx.Done()
	return Outcome{}, ctx.Err()
}

func TestDeadlineCancelsTheRunningNode(t *testing.T) {
	h := newHarness(t)
	h.reg.Register("block", blockType{})
	f := h.flow(`{"id":"b","timeout":0.05,"start":"a","nodes":[{"id":"a","type":"block","next":"e"},{"id":"e","type":"end"}]}`)
	wantError(t, h.start(f, nil), ErrTypeDeadline, "a")
	// Control steps first: the running node's context is made when it starts, with the same
	// deadline, counted from the run's start.
	g := h.flow(`{"id":"c","timeout":0.05,"start":"s","nodes":[{"id":"s","type":"set","params":{"vars":{"x":1}},"next":"l"},
		{"id":"l","type":"log","params":{"message":"m"},"next":"a"},{"id":"a","type":"block","next":"e"},{"id":"e","type":"end"}]}`)
	wantError(t, h.start(g, nil), ErrTypeDeadline, "a")
}

func TestCancelFlag(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"w","start":"a","nodes":[{"id":"a","type":"approval","next":"b"},{"id":"b","type":"log","params":{"message":"x"},"next":"c"},{"id":"c","type":"end"}]}`)
	st := h.start(f, nil)
	wantStatus(t, st, state.Suspended)
	h.mem.Cancel(st.ExecutionID)
	st, err := h.ex.Resume(context.Background(), f, st.ExecutionID, ResumeApproval, map[string]any{"approved": true})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, st, state.Cancelled)
	if st.CurrentNode != "b" || st.StepCount != 1 {
		t.Errorf("cancel must stop at the next step boundary: node %s, steps %d", st.CurrentNode, st.StepCount)
	}
	// The checkpoint can be switched off.
	h2 := newHarness(t)
	h2.set.DisableCancelCheckpoint = true
	g := h2.flow(`{"id":"g","start":"a","nodes":[{"id":"a","type":"end"}]}`)
	id := NewExecutionID()
	h2.mem.Cancel(id)
	st, err = h2.ex.Start(context.Background(), g, StartRequest{ExecutionID: id})
	if err != nil || st.Status != state.Completed {
		t.Fatalf("with the checkpoint off: %v %v", st.Status, err)
	}
	// Resume cancel of a suspended execution.
	h3 := newHarness(t)
	k := h3.flow(`{"id":"k","start":"a","nodes":[{"id":"a","type":"delay","params":{"seconds":60},"next":"b"},{"id":"b","type":"end"}]}`)
	st = h3.start(k, nil)
	st, err = h3.ex.Resume(context.Background(), k, st.ExecutionID, ResumeCancel, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h3.stored(st.ExecutionID), state.Cancelled)
	if _, err := h3.ex.Resume(context.Background(), k, st.ExecutionID, ResumeCancel, nil); !errors.Is(err, ErrInvalidResume) {
		t.Errorf("cancelling twice: %v", err)
	}
}

func TestWaitEvent(t *testing.T) {
	src := `{"id":"pay","start":"wait","nodes":[
		{"id":"wait","type":"wait_event","params":{"event_type":"payment.settled","match":"EVENT.order == INPUT.order","timeout":3600,"on_timeout":"late"},"next":"ok"},
		{"id":"ok","type":"end","params":{"output":"paid {{ EVENT.amount }} / {{ NODE.wait.event.amount }}"}},
		{"id":"late","type":"end","params":{"output":"late"}}]}`
	h := newHarness(t)
	f := h.flow(src)
	st := h.start(f, map[string]any{"order": "A1"})
	wantStatus(t, st, state.Suspended)
	s := st.Suspend
	if s.Kind != state.SuspendEvent || s.Node != "wait" || s.EventType != "payment.settled" || s.Due == nil || !s.Due.Equal(h.clock.Now().Add(time.Hour)) {
		t.Fatalf("suspend %+v", s)
	}
	ctx := context.Background()
	// A non-matching event is refused and changes nothing.
	before := h.stored(st.ExecutionID)
	if _, err := h.ex.Resume(ctx, f, st.ExecutionID, ResumeEvent, map[string]any{"order": "B2"}); !errors.Is(err, ErrEventMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	// So is an event the match cannot even evaluate: whoever publishes a malformed event must
	// not be able to end the execution.
	for _, bad := range []any{nil, "garbage", []any{1}, map[string]any{"type": "payment.failed", "order": "A1"}} {
		if _, err := h.ex.Resume(ctx, f, st.ExecutionID, ResumeEvent, bad); !errors.Is(err, ErrEventMismatch) {
			t.Fatalf("malformed event %v: %v", bad, err)
		}
	}
	after := h.stored(st.ExecutionID)
	if after.Status != state.Suspended || after.StepCount != before.StepCount || after.Context[contextEvent] != nil {
		t.Fatalf("a refused event changed the state: %+v", after)
	}
	// The wrong resume type is refused too.
	if _, err := h.ex.Resume(ctx, f, st.ExecutionID, ResumeApproval, map[string]any{"approved": true}); !errors.Is(err, ErrInvalidResume) {
		t.Fatalf("approval on an event wait: %v", err)
	}
	st, err := h.ex.Resume(ctx, f, st.ExecutionID, ResumeEvent, map[string]any{"order": "A1", "amount": 12.5})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, st, state.Completed)
	if st.Output != "paid 12.5 / 12.5" {
		t.Errorf("output %v", st.Output)
	}
	// A second delivery of the same event finds nothing to resume.
	if _, err := h.ex.Resume(ctx, f, st.ExecutionID, ResumeEvent, map[string]any{"order": "A1"}); !errors.Is(err, ErrInvalidResume) {
		t.Errorf("duplicate event: %v", err)
	}
	// Timeout goes to on_timeout.
	st = h.start(f, map[string]any{"order": "A2"})
	st, err = h.ex.Resume(ctx, f, st.ExecutionID, ResumeTimeout, nil)
	if err != nil || st.Output != "late" {
		t.Fatalf("timeout: %v %v", st.Output, err)
	}
	// Without on_timeout, a timeout is an error.
	g := h.flow(`{"id":"p2","start":"w","nodes":[{"id":"w","type":"wait_event","params":{"event_type":"x"},"next":"e"},{"id":"e","type":"end"}]}`)
	st = h.start(g, nil)
	st, err = h.ex.Resume(ctx, g, st.ExecutionID, ResumeTimeout, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, st, ErrTypeWaitTimeout, "w")
}

func TestApproval(t *testing.T) {
	src := `{"id":"exp","start":"ask","nodes":[
		{"id":"ask","type":"approval","params":{"message":"approve {{ INPUT.amount }}?","on_reject":"no"},"next":"yes"},
		{"id":"yes","type":"end","params":{"output":"approved by {{ NODE.ask.by }}: {{ NODE.ask.comment }}"}},
		{"id":"no","type":"end","params":{"output":"rejected"}}]}`
	h := newHarness(t)
	f := h.flow(src)
	ctx := context.Background()
	st := h.start(f, map[string]any{"amount": 40})
	if st.Suspend == nil || st.Suspend.Kind != state.SuspendApproval || st.Suspend.Message != "approve 40?" {
		t.Fatalf("suspend %+v", st.Suspend)
	}
	if _, err := h.ex.Resume(ctx, f, st.ExecutionID, ResumeApproval, map[string]any{"comment": "?"}); !errors.Is(err, ErrInvalidResume) {
		t.Fatalf("approval without approved: %v", err)
	}
	st, err := h.ex.Resume(ctx, f, st.ExecutionID, ResumeApproval, map[string]any{"approved": true, "comment": "fine", "by": "lee"})
	if err != nil || st.Output != "approved by lee: fine" {
		t.Fatalf("approve: %v %v", st.Output, err)
	}
	st = h.start(f, nil)
	st, err = h.ex.Resume(ctx, f, st.ExecutionID, ResumeApproval, map[string]any{"approved": false})
	if err != nil || st.Output != "rejected" {
		t.Fatalf("reject: %v %v", st.Output, err)
	}
	g := h.flow(`{"id":"exp2","start":"ask","nodes":[{"id":"ask","type":"approval","next":"e"},{"id":"e","type":"end"}]}`)
	st = h.start(g, nil)
	st, _ = h.ex.Resume(ctx, g, st.ExecutionID, ResumeApproval, map[string]any{"approved": false, "comment": "too much"})
	wantError(t, st, ErrTypeRejected, "ask")
	if !strings.Contains(st.Error.Message, "too much") {
		t.Errorf("message %q", st.Error.Message)
	}
}

func TestDelay(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"d","start":"a","nodes":[{"id":"a","type":"delay","params":{"seconds":90},"next":"b"},{"id":"b","type":"end","params":{"output":"{{ NODE.a.due }}"}}]}`)
	st := h.start(f, nil)
	due := h.clock.Now().Add(90 * time.Second)
	if st.Suspend == nil || st.Suspend.Kind != state.SuspendDelay || !st.Suspend.Due.Equal(due) {
		t.Fatalf("suspend %+v", st.Suspend)
	}
	st, err := h.ex.Resume(context.Background(), f, st.ExecutionID, ResumeContinue, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, st, state.Completed)
	if st.Output != due.Format(time.RFC3339Nano) {
		t.Errorf("output %v", st.Output)
	}
	g := h.flow(`{"id":"d2","start":"a","nodes":[{"id":"a","type":"delay","params":{"until":"{{ INPUT.at }}"},"next":"b"},{"id":"b","type":"end"}]}`)
	st = h.start(g, map[string]any{"at": "2030-05-06T07:08:09Z"})
	if st.Suspend == nil || st.Suspend.Due.Format(time.RFC3339) != "2030-05-06T07:08:09Z" {
		t.Fatalf("until: %+v", st.Suspend)
	}
	wantError(t, h.start(g, map[string]any{"at": "tomorrow"}), ErrTypeNode, "a")
}

// countingType counts its runs, to prove a redelivered start does not run steps again.
type countingType struct{ runs *int }

func (c countingType) Prepare(*Node, *PrepareContext) Runner { return c }
func (c countingType) Run(context.Context, *Call) (Outcome, error) {
	*c.runs++
	return Outcome{Output: *c.runs}, nil
}

func TestRedeliveredStartDoesNotRunTwice(t *testing.T) {
	h := newHarness(t)
	runs := 0
	h.reg.Register("count", countingType{&runs})
	f := h.flow(`{"id":"once","start":"a","nodes":[{"id":"a","type":"count","next":"b"},{"id":"b","type":"end"}]}`)
	id := NewExecutionID()
	for range 3 {
		st, err := h.ex.Start(context.Background(), f, StartRequest{ExecutionID: id})
		if err != nil || st.Status != state.Completed {
			t.Fatalf("%v %v", st, err)
		}
	}
	if runs != 1 {
		t.Fatalf("a redelivered start ran the node %d times", runs)
	}
}

// failSave makes the nth save fail with err.
type failSave struct {
	*store.Memory
	mu    sync.Mutex
	n     int
	saves int
	err   error
}

func (f *failSave) Save(ctx context.Context, st *state.Execution) error {
	f.mu.Lock()
	f.saves++
	hit := f.saves == f.n
	f.mu.Unlock()
	if hit {
		return f.err
	}
	return f.Memory.Save(ctx, st)
}

func TestTransientSaveFailureResumesFromTheCheckpoint(t *testing.T) {
	h := newHarness(t)
	runs := 0
	h.reg.Register("count", countingType{&runs})
	fs := &failSave{Memory: h.mem, n: 2, err: errors.New("redis: connection reset")} // b's save (a start saves first at a's boundary)
	h.ex.Store = fs
	f := h.flow(`{"id":"cp","start":"a","nodes":[{"id":"a","type":"count","next":"b"},{"id":"b","type":"count","next":"c"},{"id":"c","type":"end"}]}`)
	id := NewExecutionID()
	_, err := h.ex.Start(context.Background(), f, StartRequest{ExecutionID: id})
	if err == nil || errors.Is(err, store.ErrStateSerialization) {
		t.Fatalf("a transient save failure must surface as an error to the caller: %v", err)
	}
	// The stored checkpoint is after node a; the redelivered start re-runs b only.
	if got := h.stored(id); got.Status != state.Running || got.CurrentNode != "b" {
		t.Fatalf("checkpoint %s at %s", got.Status, got.CurrentNode)
	}
	st, err := h.ex.Start(context.Background(), f, StartRequest{ExecutionID: id})
	if err != nil || st.Status != state.Completed {
		t.Fatalf("redelivery: %v %v", st.Status, err)
	}
	if runs != 3 {
		t.Errorf("runs %d: the step whose save failed runs again, nothing else does", runs)
	}
}

// nanType returns a value JSON cannot carry.
type nanType struct{ v any }

func (n nanType) Prepare(*Node, *PrepareContext) Runner { return n }
func (n nanType) Run(context.Context, *Call) (Outcome, error) {
	return Outcome{Output: map[string]any{"score": n.v}}, nil
}

func TestUnserializableValueEndsInErrorNamingTheNode(t *testing.T) {
	ch := make(chan int)
	cyc := map[string]any{}
	cyc["self"] = cyc
	for name, v := range map[string]any{"NaN": math.NaN(), "+Inf": math.Inf(1), "channel": ch, "cycle": cyc} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.reg.Register("bad", nanType{v})
			f := h.flow(`{"id":"nan","start":"ok","nodes":[{"id":"ok","type":"log","params":{"message":"fine"},"next":"score"},{"id":"score","type":"bad","next":"e"},{"id":"e","type":"end"}]}`)
			st := h.start(f, nil)
			wantError(t, st, ErrTypeSerialization, "score")
			if !st.Error.Permanent || !strings.Contains(st.Error.Message, `node "score"`) {
				t.Errorf("error %+v", st.Error)
			}
			stored := h.stored(st.ExecutionID)
			wantError(t, stored, ErrTypeSerialization, "score")
			if stored.Nodes()["ok"] == nil {
				t.Error("earlier results must survive")
			}
		})
	}
	// An expression producing NaN is caught the same way.
	h := newHarness(t)
	f := h.flow(`{"id":"nan2","start":"s","nodes":[{"id":"s","type":"set","params":{"vars":{"x":"{{ 0.0 / 0.0 }}"}},"next":"e"},{"id":"e","type":"end"}]}`)
	wantError(t, h.start(f, nil), ErrTypeSerialization, "s")
}

func TestStoreSerializationFailureIsTerminalNotRetried(t *testing.T) {
	// The backstop: the store itself refuses the state (here on the first save, at b's end: the
	// control step a is saved with it).
	h := newHarness(t)
	fs := &failSave{Memory: h.mem, n: 1, err: fmt.Errorf("%w: json: unsupported value: NaN", store.ErrStateSerialization)}
	h.ex.Store = fs
	f := h.flow(`{"id":"s","start":"a","nodes":[{"id":"a","type":"log","params":{"message":"x"},"next":"b"},{"id":"b","type":"end"}]}`)
	st, err := h.ex.Start(context.Background(), f, StartRequest{})
	if err != nil {
		t.Fatalf("a serialization failure must not surface as a transient error: %v", err)
	}
	wantError(t, st, ErrTypeSerialization, "b")
	wantError(t, h.stored(st.ExecutionID), ErrTypeSerialization, "b")
	// Input that cannot be stored ends the execution at once.
	st, err = h.ex.Start(context.Background(), f, StartRequest{Input: map[string]any{"x": math.Inf(-1)}})
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, st, ErrTypeSerialization, "")
}

func TestFlowHashGateOnResume(t *testing.T) {
	h := newHarness(t)
	src := `{"id":"h","start":"a","nodes":[{"id":"a","type":"approval","next":"b"},{"id":"b","type":"end","params":{"output":"v1"}}]}`
	f := h.flow(src)
	ctx := context.Background()
	approve := map[string]any{"approved": true}

	st := h.start(f, nil)
	changed := h.flow(strings.Replace(src, "v1", "v2", 1))
	if _, err := h.ex.Resume(ctx, changed, st.ExecutionID, ResumeApproval, approve); !errors.Is(err, ErrFlowChanged) {
		t.Fatalf("changed flow, same algorithm: %v", err)
	}
	allowed := map[string]any{"approved": true, "allow_flow_hash_change": true}
	if _, err := h.ex.Resume(ctx, changed, st.ExecutionID, ResumeApproval, allowed); !errors.Is(err, ErrFlowChanged) {
		t.Fatalf("allow must not override a same-algorithm change: %v", err)
	}
	// Cancelling runs no node: it works even against a changed definition.
	other := h.start(f, nil)
	if st, err := h.ex.Resume(ctx, changed, other.ExecutionID, ResumeCancel, nil); err != nil || st.Status != state.Cancelled {
		t.Fatalf("cancel with a changed flow: %v %v", st.Status, err)
	}
	// Same definition under another algorithm tag: resume and refresh the tag.
	old := h.stored(st.ExecutionID)
	old.FlowHashAlgo = "legacy-algo"
	if err := h.mem.Save(ctx, old); err != nil {
		t.Fatal(err)
	}
	st, err := h.ex.Resume(ctx, f, st.ExecutionID, ResumeApproval, approve)
	if err != nil || st.Status != state.Completed || st.FlowHashAlgo != FlowHashAlgo {
		t.Fatalf("tag refresh: %v %v %s", st.Status, err, st.FlowHashAlgo)
	}
	// Other algorithm and other hash: upgrade suspected, allowed only explicitly.
	st = h.start(f, nil)
	old = h.stored(st.ExecutionID)
	old.FlowHashAlgo, old.FlowHash = "legacy-algo", "0123"
	if err := h.mem.Save(ctx, old); err != nil {
		t.Fatal(err)
	}
	_, err = h.ex.Resume(ctx, f, st.ExecutionID, ResumeApproval, approve)
	var he *FlowHashError
	if !errors.As(err, &he) || !he.UpgradeSuspected || !errors.Is(err, ErrFlowHashMismatch) {
		t.Fatalf("upgrade suspected: %v", err)
	}
	st, err = h.ex.Resume(ctx, f, st.ExecutionID, ResumeApproval, allowed)
	if err != nil || st.Status != state.Completed || st.FlowHash != f.Hash {
		t.Fatalf("allowed change: %v %v", st.Status, err)
	}
}

func TestCheckFlowHashTable(t *testing.T) {
	cases := []struct {
		storedAlgo, storedHash, algo, hash string
		allow                              bool
		want                               error
		check                              HashCheck
	}{
		{"a", "h", "a", "h", false, nil, HashCheck{}},
		{"a", "h", "a", "x", false, ErrFlowChanged, HashCheck{}},
		{"a", "h", "a", "x", true, ErrFlowChanged, HashCheck{}},
		{"old", "h", "a", "h", false, nil, HashCheck{RefreshTag: true}},
		{"old", "h", "a", "x", false, ErrFlowHashMismatch, HashCheck{}},
		{"old", "h", "a", "x", true, nil, HashCheck{WriteNewHash: true}},
		{"", "h", "a", "h", false, nil, HashCheck{}},
		{"", "h", "a", "x", true, ErrFlowChanged, HashCheck{}},
	}
	for _, c := range cases {
		got, err := CheckFlowHash(c.storedAlgo, c.storedHash, c.algo, c.hash, c.allow)
		if !errors.Is(err, c.want) || (err == nil) != (c.want == nil) || got != c.check {
			t.Errorf("%+v: got %+v, %v", c, got, err)
		}
	}
}

func TestFlowHashIsCanonical(t *testing.T) {
	a, _ := FlowHash([]byte(`{"id":"x","nodes":[{"id":"a","type":"end"}],"start":"a"}`))
	b, _ := FlowHash([]byte("{\n  \"start\": \"a\",\n  \"nodes\": [ {\"type\": \"end\", \"id\": \"a\"} ],\n  \"id\": \"x\"\n}"))
	c, _ := FlowHash([]byte(`{"id":"y","nodes":[{"id":"a","type":"end"}],"start":"a"}`))
	if a != b || a == c || len(a) != 64 {
		t.Fatalf("a=%s b=%s c=%s", a, b, c)
	}
}

func TestResumeContinueFromCheckpoint(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"c","start":"a","nodes":[{"id":"a","type":"log","params":{"message":"x"},"next":"b"},{"id":"b","type":"end"}]}`)
	// A state left running (a worker died mid-flow) continues from its current node.
	st := &state.Execution{ExecutionID: "ex_cp", FlowID: "c", FlowHash: f.Hash, FlowHashAlgo: f.HashAlgo,
		Status: state.Running, CurrentNode: "b", Context: map[string]any{}, StartTime: h.clock.Now()}
	if err := h.mem.Save(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	st, err := h.ex.Resume(context.Background(), f, "ex_cp", ResumeContinue, nil)
	if err != nil || st.Status != state.Completed || st.StepCount != 1 {
		t.Fatalf("%v %v steps %d", st.Status, err, st.StepCount)
	}
	if _, err := h.ex.Resume(context.Background(), f, "ex_missing", ResumeContinue, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing execution: %v", err)
	}
	if _, err := ParseResumeType("wake"); !errors.Is(err, ErrInvalidResume) {
		t.Errorf("ParseResumeType: %v", err)
	}
}

func TestTimelineIsBounded(t *testing.T) {
	h := newHarness(t)
	h.set.TimelineMax = 4
	st := h.start(h.flow(countFlow), map[string]any{"to": 5})
	if len(st.Timeline) != 4 || st.TimelineDropped != st.Timeline[3].Seq-4 || st.Timeline[3].Event != "completed" {
		t.Fatalf("timeline %+v dropped %d", st.Timeline, st.TimelineDropped)
	}
	for i := 1; i < len(st.Timeline); i++ {
		if st.Timeline[i].Seq != st.Timeline[i-1].Seq+1 {
			t.Fatalf("sequence gap: %+v", st.Timeline)
		}
	}
}

func TestExpressionLimitsNameTheNode(t *testing.T) {
	h := newHarness(t)
	h.set.Expr = ExprLimits{MaxResultSize: 1000, GrowthFactor: 4, MaxResultHard: 100000}
	f := h.flow(`{"id":"big","start":"s","nodes":[{"id":"s","type":"set","params":{"vars":{"x":"{{ repeat('ab', INPUT.n) }}"}},"next":"e"},{"id":"e","type":"end"}]}`)
	st := h.start(f, map[string]any{"n": 400}) // 800 bytes: under the base limit
	wantStatus(t, st, state.Completed)
	st = h.start(f, map[string]any{"n": 5000}) // 10 kB from a tiny input
	wantError(t, st, ErrTypeNode, "s")
	if !strings.Contains(st.Error.Message, "PLAITA_EXPR_MAX_RESULT_SIZE") {
		t.Errorf("message %q", st.Error.Message)
	}
	// Growth relative to a large input is allowed up to the factor…
	g := h.flow(`{"id":"grow","start":"s","nodes":[{"id":"s","type":"set","params":{"vars":{"x":"{{ INPUT.s + INPUT.s }}"}},"next":"e"},{"id":"e","type":"end"}]}`)
	wantStatus(t, h.start(g, map[string]any{"s": strings.Repeat("x", 5000)}), state.Completed)
	// …and never past the hard limit.
	st = h.start(f, map[string]any{"n": 1e9})
	wantError(t, st, ErrTypeNode, "s")
}

func TestOnEventHearsEveryStep(t *testing.T) {
	h := newHarness(t)
	var events []Event
	h.ex.OnEvent = func(ev Event) { events = append(events, ev) }
	st := h.start(h.flow(countFlow), map[string]any{"to": 2})
	var started, steps int
	for _, ev := range events {
		if ev.ExecutionID != st.ExecutionID || ev.FlowID != "count" {
			t.Fatalf("event %+v", ev)
		}
		switch ev.Entry.Event {
		case "node_started":
			started++
		case "step":
			steps++
		}
	}
	if started != st.StepCount || steps != st.StepCount {
		t.Errorf("%d node_started, %d step events for %d steps", started, steps, st.StepCount)
	}
	last := events[len(events)-1]
	if last.Entry.Event != "completed" || last.Status != state.Completed {
		t.Errorf("last event %+v", last)
	}
}
