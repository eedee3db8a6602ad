package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
)

// fixtureClock is a manual clock: time moves only when the test (or a retry's Sleep) moves it.
type fixtureClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFixtureClock() *fixtureClock {
	return &fixtureClock{now: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)}
}

func (c *fixtureClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fixtureClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

func (c *fixtureClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixtureResume is one resume of a suspended execution.
type fixtureResume struct {
	advance time.Duration // moved on the clock before resuming
	rt      ResumeType
	data    any
	errIs   error // the resume is refused with this error and leaves the state as it was
	// what the execution looks like after this resume (for a refused one: unchanged)
	expect fixtureExpect
}

// fixtureExpect is what an execution looks like after a Start or a Resume.
type fixtureExpect struct {
	status    state.Status
	output    string // JSON; "" = no output
	errType   string
	errMsg    string // substring of the error message
	errNode   string
	suspend   string // suspension kind
	suspNode  string
	due       time.Duration // suspension due, relative to the clock at that step; 0 = none
	dueAt     string        // suspension due as an RFC 3339 time
	eventType string
	message   string // approval message
	vars      string // JSON subset of VARS that must match
	steps     int    // step count; 0 = not checked
}

type fixtureRun struct {
	name     string
	input    any
	settings func(*Settings)
	expect   fixtureExpect
	resumes  []fixtureResume
	check    func(t *testing.T, st *state.Execution)
}

// fixtureRuns has the runs of every flow in examples; a flow without an entry fails
// TestFlowsFixtures.
var fixtureRuns = map[string][]fixtureRun{
	"hello.json": {
		{name: "empty input", input: map[string]any{}, expect: fixtureExpect{status: state.Completed, steps: 3,
			output: `{"greeting": "Hello, world!", "logged": "hello says: Hello, world!", "steps": 2}`}},
		{name: "named", input: map[string]any{"name": "Ada"}, expect: fixtureExpect{status: state.Completed,
			output: `{"greeting": "Hello, Ada!", "logged": "hello says: Hello, Ada!", "steps": 2}`}},
		{name: "nil input", input: nil, expect: fixtureExpect{status: state.Completed,
			output: `{"greeting": "Hello, world!", "logged": "hello says: Hello, world!", "steps": 2}`}},
	},
	"discount-check.json": {
		{name: "empty input", input: map[string]any{}, expect: fixtureExpect{status: state.Completed, steps: 4,
			output: `{"customer": "guest", "total": 80, "discount": 0, "pay": 80, "note": "guest pays 80 (big order: false)"}`}},
		{name: "big order", input: map[string]any{"total": 250, "customer": "kim"}, expect: fixtureExpect{status: state.Completed,
			output: `{"customer": "kim", "total": 250, "discount": 25, "pay": 225, "note": "kim pays 225 (big order: true)"}`}},
		{name: "exactly 100", input: map[string]any{"total": 100}, expect: fixtureExpect{status: state.Completed,
			output: `{"customer": "guest", "total": 100, "discount": 10, "pay": 90, "note": "guest pays 90 (big order: true)"}`}},
	},
	"order-routing.json": {
		{name: "empty input goes to review", input: map[string]any{}, expect: fixtureExpect{status: state.Completed, steps: 3,
			output: `{"order_id": "unknown", "warehouse": null, "review": true}`},
			check: func(t *testing.T, st *state.Execution) {
				assertJSON(t, "NODE.route", st.Nodes()["route"], `{"case": "default"}`)
				assertJSON(t, "NODE.manual_review", st.Nodes()["manual_review"],
					`{"message": "order unknown from country '' needs manual routing", "level": "warn"}`)
			}},
		{name: "US", input: map[string]any{"country": "US", "order_id": "o-1"}, expect: fixtureExpect{status: state.Completed,
			output: `{"order_id": "o-1", "warehouse": "reno", "carrier": "ups", "case": 0}`}},
		{name: "DE", input: map[string]any{"country": "DE", "order_id": "o-2"}, expect: fixtureExpect{status: state.Completed,
			output: `{"order_id": "o-2", "warehouse": "rotterdam", "carrier": "dhl", "case": 1}`}},
		{name: "unknown country", input: map[string]any{"country": "JP"}, expect: fixtureExpect{status: state.Completed,
			output: `{"order_id": "unknown", "warehouse": null, "review": true}`}},
	},
	"count-to-10000.json": {
		{name: "empty input", input: map[string]any{}, settings: func(s *Settings) { s.TimelineMax = 20 },
			expect: fixtureExpect{status: state.Completed, output: `10000`, vars: `{"i": 10000}`,
				steps: 10001 + 10000 + 1}, // guard runs, increments, end
			check: func(t *testing.T, st *state.Execution) {
				if len(st.Timeline) > 20 || st.TimelineDropped == 0 {
					t.Errorf("timeline: %d entries, %d dropped; want at most 20 kept", len(st.Timeline), st.TimelineDropped)
				}
				if last := st.Timeline[len(st.Timeline)-1]; last.Event != "completed" || last.Seq != st.TimelineDropped+len(st.Timeline) {
					t.Errorf("last timeline entry %+v", last)
				}
				if r := st.NodeTimings["check"].Runs; r != 10001 {
					t.Errorf("check ran %d times, want 10001", r)
				}
			}},
	},
	"runaway-loop.json": {
		{name: "empty input", input: map[string]any{}, expect: fixtureExpect{status: state.Error, errType: ErrTypeStepLimit,
			errMsg: "the execution ran 1000 steps", errNode: "bump", steps: 1000, vars: `{"polls": 499}`}},
	},
	"payment-wait.json": {
		{name: "paid", input: map[string]any{},
			expect: fixtureExpect{status: state.Suspended, suspend: state.SuspendEvent, suspNode: "wait_payment", eventType: "payment",
				due: 900 * time.Second, vars: `{"order_id": "ord-1", "amount": 42.5}`},
			resumes: []fixtureResume{
				{rt: ResumeEvent, data: map[string]any{"order_id": "ord-2", "status": "paid"}, errIs: ErrEventMismatch},
				{rt: ResumeApproval, data: map[string]any{"approved": true}, errIs: ErrInvalidResume},
				{rt: ResumeContinue, errIs: ErrInvalidResume},
				{advance: time.Minute, rt: ResumeEvent, data: map[string]any{"order_id": "ord-1", "status": "paid", "payment_id": "pay_9"},
					expect: fixtureExpect{status: state.Completed,
						output: `{"order_id": "ord-1", "status": "paid", "amount": 42.5, "payment_id": "pay_9"}`}},
				{rt: ResumeEvent, data: map[string]any{"order_id": "ord-1"}, errIs: ErrInvalidResume},
			},
			check: func(t *testing.T, st *state.Execution) {
				assertJSON(t, "NODE.wait_payment", st.Nodes()["wait_payment"],
					`{"event": {"order_id": "ord-1", "status": "paid", "payment_id": "pay_9"}}`)
			}},
		{name: "declined", input: map[string]any{"order_id": "ord-7", "amount": 10},
			expect: fixtureExpect{status: state.Suspended, suspend: state.SuspendEvent, suspNode: "wait_payment", eventType: "payment", due: 900 * time.Second},
			resumes: []fixtureResume{
				{rt: ResumeEvent, data: map[string]any{"order_id": "ord-7", "status": "declined"},
					expect: fixtureExpect{status: state.Error, errType: "PaymentDeclined", errNode: "declined",
						errMsg: "payment for order ord-7 was declined"}},
			}},
		{name: "timeout", input: map[string]any{},
			expect: fixtureExpect{status: state.Suspended, suspend: state.SuspendEvent, suspNode: "wait_payment", due: 900 * time.Second},
			resumes: []fixtureResume{
				{advance: 901 * time.Second, rt: ResumeTimeout,
					expect: fixtureExpect{status: state.Completed, output: `{"order_id": "ord-1", "status": "expired"}`}},
			},
			check: func(t *testing.T, st *state.Execution) {
				assertJSON(t, "NODE.wait_payment", st.Nodes()["wait_payment"], `{"timed_out": true}`)
				assertJSON(t, "NODE.expire", st.Nodes()["expire"], `{"message": "order ord-1: no payment within 15 minutes", "level": "warn"}`)
			}},
	},
	"expense-approval.json": {
		{name: "approved", input: map[string]any{},
			expect: fixtureExpect{status: state.Suspended, suspend: state.SuspendApproval, suspNode: "manager_approval",
				due: 24 * time.Hour, message: "Approve 120 EUR for alex (travel)?"},
			resumes: []fixtureResume{
				{rt: ResumeApproval, data: map[string]any{"approved": "yes"}, errIs: ErrInvalidResume},
				{rt: ResumeEvent, data: map[string]any{}, errIs: ErrInvalidResume},
				{advance: time.Hour, rt: ResumeApproval, data: map[string]any{"approved": true, "by": "maria", "comment": "fine"},
					expect: fixtureExpect{status: state.Completed, output: `{"approved": true, "by": "maria", "comment": "fine"}`}},
			}},
		{name: "rejected", input: map[string]any{"amount": 900, "currency": "USD", "employee": "sam", "reason": "laptop"},
			expect: fixtureExpect{status: state.Suspended, suspend: state.SuspendApproval, suspNode: "manager_approval",
				message: "Approve 900 USD for sam (laptop)?", due: 24 * time.Hour},
			resumes: []fixtureResume{
				{rt: ResumeApproval, data: map[string]any{"approved": false, "by": "maria", "comment": "no receipt"},
					expect: fixtureExpect{status: state.Completed, output: `{"approved": false, "by": "maria", "reason": "no receipt"}`}},
			},
			check: func(t *testing.T, st *state.Execution) {
				assertJSON(t, "NODE.notify_rejected", st.Nodes()["notify_rejected"],
					`{"message": "expense of sam rejected by maria: no receipt", "level": "warn"}`)
			}},
		{name: "timeout escalates", input: map[string]any{},
			expect: fixtureExpect{status: state.Suspended, suspend: state.SuspendApproval, suspNode: "manager_approval", due: 24 * time.Hour},
			resumes: []fixtureResume{
				{advance: 25 * time.Hour, rt: ResumeTimeout,
					expect: fixtureExpect{status: state.Error, errType: "ApprovalEscalated", errNode: "escalate",
						errMsg: "expense of 120 EUR for alex was not answered within a day"}},
			}},
		{name: "small expense", input: map[string]any{"amount": 40},
			expect: fixtureExpect{status: state.Completed, output: `{"approved": true, "by": "policy"}`, steps: 2}},
	},
	"reminder-delay.json": {
		{name: "empty input", input: map[string]any{},
			expect: fixtureExpect{status: state.Suspended, suspend: state.SuspendDelay, suspNode: "wait_an_hour", due: time.Hour,
				vars: `{"text": "Reminder for alex: stand-up in 5 minutes"}`},
			resumes: []fixtureResume{
				{rt: ResumeEvent, data: map[string]any{}, errIs: ErrInvalidResume},
				{advance: time.Hour, rt: ResumeContinue,
					expect: fixtureExpect{status: state.Completed, steps: 4, output: `{
						"sent": "Reminder for alex: stand-up in 5 minutes",
						"due": "2026-03-02T09:00:00Z",
						"resumed_at": "2026-03-02T09:00:00Z"}`}},
			}},
	},
	"scheduled-report.json": {
		{name: "empty input", input: map[string]any{},
			expect: fixtureExpect{status: state.Suspended, suspend: state.SuspendDelay, suspNode: "wait_until", dueAt: "2030-01-01T09:00:00Z"},
			resumes: []fixtureResume{
				{rt: ResumeContinue, expect: fixtureExpect{status: state.Completed,
					output: `{"report": "daily-sales", "scheduled_for": "2030-01-01T09:00:00Z"}`}},
			}},
		{name: "explicit time", input: map[string]any{"run_at": "2026-03-02T18:30:00+01:00", "report": "weekly"},
			expect: fixtureExpect{status: state.Suspended, suspend: state.SuspendDelay, dueAt: "2026-03-02T17:30:00Z"},
			resumes: []fixtureResume{
				{rt: ResumeTimeout, expect: fixtureExpect{status: state.Completed,
					output: `{"report": "weekly", "scheduled_for": "2026-03-02T17:30:00Z"}`}},
			}},
		{name: "not a time", input: map[string]any{"run_at": "tomorrow"},
			expect: fixtureExpect{status: state.Error, errType: ErrTypeNode, errNode: "wait_until",
				errMsg: `until is "tomorrow", not an RFC 3339 time`}},
	},
	"refund-failure.json": {
		{name: "empty input fails", input: map[string]any{},
			expect: fixtureExpect{status: state.Error, errType: "RefundLimitExceeded", errNode: "refuse", steps: 4,
				errMsg: "refund of 250 for order ord-1 exceeds the refundable 100"},
			check: func(t *testing.T, st *state.Execution) {
				if st.Error.Message != "refund of 250 for order ord-1 exceeds the refundable 100" || !st.Error.Permanent {
					t.Errorf("error %+v", st.Error)
				}
				if st.Output != nil {
					t.Errorf("output %v, want none", st.Output)
				}
			}},
		{name: "within limit", input: map[string]any{"amount": 60, "order_id": "ord-3"},
			expect: fixtureExpect{status: state.Completed, output: `{"order_id": "ord-3", "refunded": 60}`}},
		{name: "a retry of the fail node is refused", input: map[string]any{"amount": 101},
			expect: fixtureExpect{status: state.Error, errType: "RefundLimitExceeded", errMsg: "refund of 101 "},
			resumes: []fixtureResume{
				// The fail node raises its own type: a retry would raise it again on the same data.
				{rt: ResumeRetry, errIs: ErrInvalidResume, expect: fixtureExpect{status: state.Error, errType: "RefundLimitExceeded", errNode: "refuse", steps: 4}},
			}},
	},
}

func loadFixtureFlow(t *testing.T, name string) *Flow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(flowsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data, NewRegistry(), DefaultExprLimits)
	if err != nil {
		t.Fatalf("Parse %s: %v", name, err)
	}
	return f
}

func TestFlowsFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(flowsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, file := range files {
		name := filepath.Base(file)
		seen[name] = true
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			runs, ok := fixtureRuns[name]
			if !ok {
				t.Fatalf("no expectation for %s: add it to fixtureRuns", name)
			}
			f := loadFixtureFlow(t, name)
			hasEmpty := false
			for _, run := range runs {
				if m, ok := run.input.(map[string]any); ok && len(m) == 0 {
					hasEmpty = true
				}
				t.Run(run.name, func(t *testing.T) { runFixture(t, f, run) })
			}
			if !hasEmpty {
				t.Errorf("no run with the empty input {}")
			}
		})
	}
	for name := range fixtureRuns {
		if !seen[name] {
			t.Errorf("expectation for %s, but there is no such flow in %s", name, flowsDir)
		}
	}
}

func runFixture(t *testing.T, f *Flow, run fixtureRun) {
	ctx := context.Background()
	mem := store.NewMemory()
	clock := newFixtureClock()
	ex := NewExecutor(mem)
	ex.Clock = clock
	set := DefaultSettings()
	if run.settings != nil {
		run.settings(&set)
	}
	ex.Settings = func() Settings { return set }

	id := "ex_" + strings.ReplaceAll(run.name, " ", "_")
	st, err := ex.Start(ctx, f, StartRequest{ExecutionID: id, TenantID: "acme", Input: run.input})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if st.FlowID != f.ID || st.FlowHash != f.Hash || st.TenantID != "acme" {
		t.Errorf("identity: flow %q hash %q tenant %q", st.FlowID, st.FlowHash, st.TenantID)
	}
	checkFixture(t, "start", st, run.expect, clock.Now())
	checkStored(t, mem, st)

	for i, r := range run.resumes {
		clock.Advance(r.advance)
		before, _ := mem.Raw(id)
		st, err = ex.Resume(ctx, f, id, r.rt, r.data)
		step := "resume " + string(r.rt)
		if r.errIs != nil {
			if !errors.Is(err, r.errIs) {
				t.Fatalf("resume %d (%s): error %v, want %v", i, r.rt, err, r.errIs)
			}
			if after, _ := mem.Raw(id); string(after) != string(before) {
				t.Errorf("resume %d (%s) was refused but changed the stored state", i, r.rt)
			}
			continue
		}
		if err != nil {
			t.Fatalf("resume %d (%s): %v", i, r.rt, err)
		}
		checkFixture(t, step, st, r.expect, clock.Now())
		checkStored(t, mem, st)
	}
	if run.check != nil {
		run.check(t, st)
	}
}

func checkFixture(t *testing.T, step string, st *state.Execution, exp fixtureExpect, now time.Time) {
	t.Helper()
	if st.Status != exp.status {
		t.Fatalf("%s: status %s, want %s (error %+v)", step, st.Status, exp.status, st.Error)
	}
	if exp.output != "" {
		assertJSON(t, step+": output", st.Output, exp.output)
	} else if st.Output != nil {
		t.Errorf("%s: output %v, want none", step, st.Output)
	}
	if exp.status.Terminal() != (st.EndTime != nil) {
		t.Errorf("%s: end time %v with status %s", step, st.EndTime, st.Status)
	}
	if exp.status == state.Error {
		if st.Error == nil {
			t.Fatalf("%s: no error info", step)
		}
		if st.Error.Type != exp.errType {
			t.Errorf("%s: error type %q, want %q (%s)", step, st.Error.Type, exp.errType, st.Error.Message)
		}
		if !strings.Contains(st.Error.Message, exp.errMsg) {
			t.Errorf("%s: error message %q, want it to contain %q", step, st.Error.Message, exp.errMsg)
		}
		if exp.errNode != "" && st.Error.Node != exp.errNode {
			t.Errorf("%s: error at node %q, want %q", step, st.Error.Node, exp.errNode)
		}
	} else if st.Error != nil {
		t.Errorf("%s: unexpected error %+v", step, st.Error)
	}
	if exp.status == state.Suspended {
		s := st.Suspend
		if s == nil {
			t.Fatalf("%s: suspended without a suspension", step)
		}
		if s.Kind != exp.suspend {
			t.Errorf("%s: suspension kind %q, want %q", step, s.Kind, exp.suspend)
		}
		if exp.suspNode != "" && (s.Node != exp.suspNode || st.CurrentNode != exp.suspNode) {
			t.Errorf("%s: suspended at %q (current %q), want %q", step, s.Node, st.CurrentNode, exp.suspNode)
		}
		if exp.eventType != "" && s.EventType != exp.eventType {
			t.Errorf("%s: event type %q, want %q", step, s.EventType, exp.eventType)
		}
		if exp.message != "" && s.Message != exp.message {
			t.Errorf("%s: approval message %q, want %q", step, s.Message, exp.message)
		}
		switch {
		case exp.due != 0:
			if s.Due == nil || !s.Due.Equal(now.Add(exp.due)) {
				t.Errorf("%s: due %v, want %v", step, s.Due, now.Add(exp.due))
			}
		case exp.dueAt != "":
			want, err := time.Parse(time.RFC3339, exp.dueAt)
			if err != nil {
				t.Fatal(err)
			}
			if s.Due == nil || !s.Due.Equal(want) {
				t.Errorf("%s: due %v, want %v", step, s.Due, want)
			}
		default:
			if s.Due != nil {
				t.Errorf("%s: due %v, want none", step, s.Due)
			}
		}
	} else if st.Suspend != nil {
		t.Errorf("%s: suspension %+v left on a %s execution", step, st.Suspend, st.Status)
	}
	if exp.vars != "" {
		var want map[string]any
		if err := json.Unmarshal([]byte(exp.vars), &want); err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if got := st.Vars()[k]; !reflect.DeepEqual(got, v) {
				t.Errorf("%s: VARS.%s = %#v, want %#v", step, k, got, v)
			}
		}
	}
	if exp.steps != 0 && st.StepCount != exp.steps {
		t.Errorf("%s: %d steps, want %d", step, st.StepCount, exp.steps)
	}
}

// checkStored asserts the store holds what the executor returned.
func checkStored(t *testing.T, mem *store.Memory, st *state.Execution) {
	t.Helper()
	stored, err := mem.Load(context.Background(), st.ExecutionID)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	want, err := store.Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := store.Encode(stored)
	if string(got) != string(want) {
		t.Errorf("stored state differs from the returned one:\nstored   %s\nreturned %s", got, want)
	}
}

// assertJSON compares a value with a JSON document, after the JSON round trip every stored value
// takes.
func assertJSON(t *testing.T, what string, got any, wantJSON string) {
	t.Helper()
	var want any
	if err := json.Unmarshal([]byte(wantJSON), &want); err != nil {
		t.Fatalf("%s: bad expectation %s: %v", what, wantJSON, err)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var norm any
	if err := json.Unmarshal(b, &norm); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(norm, want) {
		t.Errorf("%s = %s, want %s", what, b, wantJSON)
	}
}

// TestFlowsCountToTenThousandOutput pins the loop's result type: a number, not a string.
func TestFlowsCountToTenThousandOutput(t *testing.T) {
	f := loadFixtureFlow(t, "count-to-10000.json")
	ex := NewExecutor(store.NewMemory())
	ex.Clock = newFixtureClock()
	ex.Settings = func() Settings { s := DefaultSettings(); s.TimelineMax = 20; return s }
	st, err := ex.Start(context.Background(), f, StartRequest{Input: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != state.Completed || st.Output != float64(10000) {
		t.Fatalf("status %s output %#v, want completed with 10000", st.Status, st.Output)
	}
}

// TestFlowsRunawayLoopStepLimit checks the step limit ends the runaway loop and that the
// execution cannot be continued past it, only retried (which hits the limit again at once).
func TestFlowsRunawayLoopStepLimit(t *testing.T) {
	ctx := context.Background()
	f := loadFixtureFlow(t, "runaway-loop.json")
	if f.MaxSteps != 1000 {
		t.Fatalf("max_steps %d", f.MaxSteps)
	}
	ex := NewExecutor(store.NewMemory())
	ex.Clock = newFixtureClock()
	st, err := ex.Start(ctx, f, StartRequest{ExecutionID: "ex_runaway", Input: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != state.Error || st.Error == nil || st.Error.Type != ErrTypeStepLimit || !st.Error.Permanent {
		t.Fatalf("status %s error %+v, want a permanent %s", st.Status, st.Error, ErrTypeStepLimit)
	}
	if _, err := ex.Resume(ctx, f, "ex_runaway", ResumeContinue, nil); !errors.Is(err, ErrInvalidResume) {
		t.Errorf("continue after the step limit: %v, want ErrInvalidResume", err)
	}
	// Its step budget is spent: a retry is refused instead of stopping again at once.
	if _, err := ex.Resume(ctx, f, "ex_runaway", ResumeRetry, nil); !errors.Is(err, ErrInvalidResume) {
		t.Errorf("retry after the step limit: %v, want ErrInvalidResume", err)
	}
}

// TestFlowsStartIsIdempotent: a redelivered start of a suspended execution returns the stored
// state instead of running the flow again.
func TestFlowsStartIsIdempotent(t *testing.T) {
	ctx := context.Background()
	f := loadFixtureFlow(t, "payment-wait.json")
	mem := store.NewMemory()
	ex := NewExecutor(mem)
	clock := newFixtureClock()
	ex.Clock = clock
	req := StartRequest{ExecutionID: "ex_again", Input: map[string]any{"order_id": "ord-5"}}
	first, err := ex.Start(ctx, f, req)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	again, err := ex.Start(ctx, f, StartRequest{ExecutionID: "ex_again", Input: map[string]any{"order_id": "other"}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := store.Encode(first)
	b, _ := store.Encode(again)
	if string(a) != string(b) {
		t.Errorf("redelivered start changed the execution:\n%s\n%s", a, b)
	}
}

// TestFlowsResumeWithChangedFlow: a suspended execution refuses to resume under an edited
// definition.
func TestFlowsResumeWithChangedFlow(t *testing.T) {
	ctx := context.Background()
	f := loadFixtureFlow(t, "expense-approval.json")
	ex := NewExecutor(store.NewMemory())
	ex.Clock = newFixtureClock()
	if _, err := ex.Start(ctx, f, StartRequest{ExecutionID: "ex_changed", Input: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(flowsDir, "expense-approval.json"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `"timeout": 86400`, `"timeout": 3600`, 1)
	g, err := Parse([]byte(edited), NewRegistry(), DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ex.Resume(ctx, g, "ex_changed", ResumeApproval, map[string]any{"approved": true, "allow_flow_hash_change": true})
	if !errors.Is(err, ErrFlowChanged) {
		t.Errorf("resume under an edited flow: %v, want ErrFlowChanged", err)
	}
}
