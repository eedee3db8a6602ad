package engine

import (
	"context"
	"errors"
	"plaita/engine/state"
	"plaita/store"
	"slices"
	"sync"
	"testing"
	"time"
)

type callOutType struct{}

func (callOutType) Prepare(*Node, *PrepareContext) Runner { return callOutNode{} }

type callOutNode struct{}

func (callOutNode) Run(context.Context, *Call) (Outcome, error) { return Outcome{}, nil }

// A flow whose first step is a control node starts instantly; one that first calls out
// (any other node type) does not, and gets its state written before that step.
func TestStartsInstantly(t *testing.T) {
	reg := NewRegistry()
	reg.Register("call_out", callOutType{})
	for first, want := range map[string]bool{
		`{"id":"a","type":"set","params":{"vars":{"x":1}},"next":"z"}`:                               true,
		`{"id":"a","type":"condition","params":{"expr":"true"},"branches":{"true":"z","false":"z"}}`: true,
		`{"id":"a","type":"log","params":{"message":"hi"},"next":"z"}`:                               true,
		`{"id":"a","type":"delay","params":{"seconds":5},"next":"z"}`:                                true,
		`{"id":"a","type":"wait_event","params":{"event_type":"e"},"next":"z"}`:                      true,
		`{"id":"a","type":"approval","params":{"message":"ok?"},"next":"z"}`:                         true,
		`{"id":"a","type":"call_out","next":"z"}`:                                                    false,
	} {
		def := `{"id":"f","version":"1","start":"a","nodes":[` + first + `,{"id":"z","type":"end","params":{"output":1}}]}`
		f, err := Parse([]byte(def), reg, DefaultExprLimits)
		if err != nil {
			t.Fatalf("%s: %v", first, err)
		}
		if got := f.StartsInstantly(); got != want {
			t.Errorf("%s: StartsInstantly = %v, want %v", first, got, want)
		}
	}
}

// savesSeen records each saved state's current node and status.
type savesSeen struct {
	*store.Memory
	mu   sync.Mutex
	seen []string
}

func (s *savesSeen) Save(ctx context.Context, st *state.Execution) error {
	s.mu.Lock()
	s.seen = append(s.seen, st.CurrentNode+":"+string(st.Status))
	s.mu.Unlock()
	return s.Memory.Save(ctx, st)
}

// checkpointProbe is a node that calls out: it records the stored state's current node when it
// runs, i.e. what a crash during the call would replay from.
type checkpointProbe struct {
	mem  *store.Memory
	runs *[]string
}

func (p checkpointProbe) Prepare(*Node, *PrepareContext) Runner { return p }

func (p checkpointProbe) Run(ctx context.Context, c *Call) (Outcome, error) {
	st, err := p.mem.Load(ctx, c.Execution.ExecutionID)
	if err != nil {
		return Outcome{}, err
	}
	*p.runs = append(*p.runs, st.CurrentNode)
	return Outcome{Output: "called"}, nil
}

// Control steps in a row are saved together with the step that ends the row: a run of control
// nodes costs one save, a node that calls out always runs with the steps before it saved (and
// is saved after), and a save that fails before the call means the call never ran; the
// redelivery runs everything once more from the last checkpoint.
func TestControlStepsAreSavedTogether(t *testing.T) {
	h := newHarness(t)
	seen := &savesSeen{Memory: h.mem}
	var runs []string
	h.reg.Register("call_out", checkpointProbe{mem: h.mem, runs: &runs})
	h.ex.Store = seen
	f := h.flow(`{"id":"cp","start":"a","nodes":[
		{"id":"a","type":"set","params":{"vars":{"x":1}},"next":"b"},
		{"id":"b","type":"condition","params":{"expr":"VARS.x == 1"},"branches":{"true":"c","false":"e"}},
		{"id":"c","type":"call_out","next":"d"},
		{"id":"d","type":"set","params":{"vars":{"y":2}},"next":"e"},
		{"id":"e","type":"end","params":{"output":"{{ VARS.y }}"}}]}`)
	st := h.start(f, nil)
	wantStatus(t, st, state.Completed)
	if want := []string{"c:running", "d:running", "e:completed"}; !slices.Equal(seen.seen, want) {
		t.Fatalf("saves %v, want %v", seen.seen, want)
	}
	if !slices.Equal(runs, []string{"c"}) {
		t.Fatalf("the call ran with the stored state at %v, want [c]", runs)
	}
	stored := h.stored(st.ExecutionID)
	if stored.NodeTimings["a"].Runs != 1 || stored.NodeTimings["b"].Runs != 1 || stored.Branches["b"]["true"] != 1 {
		t.Fatalf("timings %+v branches %v", stored.NodeTimings, stored.Branches)
	}

	// The save before the call fails: the call does not run; the redelivery replays a and b.
	runs = nil
	fs := &failSave{Memory: h.mem, n: 1, err: errors.New("redis: connection reset")}
	h.ex.Store = fs
	id := NewExecutionID()
	if _, err := h.ex.Start(context.Background(), f, StartRequest{ExecutionID: id}); err == nil {
		t.Fatal("the failed save must surface")
	}
	if len(runs) != 0 {
		t.Fatalf("the call ran before its checkpoint was saved: %v", runs)
	}
	st, err := h.ex.Start(context.Background(), f, StartRequest{ExecutionID: id})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, st, state.Completed)
	stored = h.stored(id)
	if !slices.Equal(runs, []string{"c"}) || stored.NodeTimings["a"].Runs != 1 || stored.Branches["b"]["true"] != 1 {
		t.Fatalf("after the redelivery: calls %v, timings %+v, branches %v", runs, stored.NodeTimings, stored.Branches)
	}
}

// A resume followed by control nodes is saved with them: one save from the wake-up to the end.
// When that save fails, the redelivered resume meets the suspension again and applies the same
// resume once.
func TestResumeAndControlStepsAreSavedTogether(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"rc","start":"w","nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"paid"},"next":"s"},
		{"id":"s","type":"set","params":{"vars":{"paid":"{{ EVENT.amount }}"}},"next":"e"},
		{"id":"e","type":"end","params":{"output":"{{ VARS.paid }}"}}]}`)
	st := h.start(f, nil)
	wantStatus(t, st, state.Suspended)
	id := st.ExecutionID

	fs := &failSave{Memory: h.mem, n: 1, err: errors.New("redis: connection reset")}
	h.ex.Store = fs
	if _, err := h.ex.ResumeWith(context.Background(), f, ResumeRequest{ExecutionID: id, Type: ResumeEvent, Data: map[string]any{"amount": 5}, Key: "1-1"}); err == nil {
		t.Fatal("the failed save must surface")
	}
	if got := h.stored(id); got.Status != state.Suspended || got.LastResume != nil {
		t.Fatalf("after the failed save: %s, last resume %+v", got.Status, got.LastResume)
	}
	seen := &savesSeen{Memory: h.mem}
	h.ex.Store = seen
	st, err := h.ex.ResumeWith(context.Background(), f, ResumeRequest{ExecutionID: id, Type: ResumeEvent, Data: map[string]any{"amount": 5}, Key: "1-1"})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, st, state.Completed)
	if want := []string{"e:completed"}; !slices.Equal(seen.seen, want) {
		t.Fatalf("saves %v, want %v", seen.seen, want)
	}
	stored := h.stored(id)
	if stored.Output != float64(5) || stored.NodeTimings["s"].Runs != 1 || stored.LastResume == nil || stored.LastResume.Key != "1-1" {
		t.Fatalf("output %v, timings %+v, last resume %+v", stored.Output, stored.NodeTimings, stored.LastResume)
	}
}

// A loop of control nodes is not saved after every step, but it is never left unsaved for
// long: when the run stops (a drain, Ctrl-C) the steps since the last save are saved before it
// returns — they end at a step boundary — and a row still running after a second is saved then.
func TestUnsavedControlStepsAreBounded(t *testing.T) {
	loop := `{"id":"loop","start":"inc","max_steps":1000000,"nodes":[
		{"id":"inc","type":"set","params":{"vars":{"i":"{{ (VARS.i ?? 0) + 1 }}"}},"next":"check"},
		{"id":"check","type":"condition","params":{"expr":"VARS.i < 1000000"},"branches":{"true":"inc","false":"done"}},
		{"id":"done","type":"end"}]}`

	// run starts the loop, advancing the clock by perStep at each step, and stops it (a drain,
	// Ctrl-C) after stopAt steps; it returns the saves and the stored state.
	run := func(t *testing.T, perStep time.Duration, stopAt int) ([]string, *state.Execution) {
		h := newHarness(t)
		seen := &savesSeen{Memory: h.mem}
		h.ex.Store = seen
		f := h.flow(loop)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		steps := 0
		h.ex.OnEvent = func(ev Event) {
			if ev.Entry.Event == "step" {
				h.clock.Advance(perStep)
				if steps++; steps == stopAt {
					stop()
				}
			}
		}
		id := NewExecutionID()
		if _, err := h.ex.Start(ctx, f, StartRequest{ExecutionID: id}); !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped run: %v", err)
		}
		return seen.seen, h.stored(id)
	}

	t.Run("stop", func(t *testing.T) {
		saves, stored := run(t, 0, 7)
		if stored.Status != state.Running || stored.StepCount != 7 || len(saves) != 1 {
			t.Fatalf("after the stop: %s at %d steps, saves %v; want the 7 steps saved once", stored.Status, stored.StepCount, saves)
		}
	})

	t.Run("second", func(t *testing.T) {
		saves, _ := run(t, 300*time.Millisecond, 20)
		// 300 ms a step: a step that ends a second or more after the first unsaved one is saved
		// (with those before it): every fifth step, 4 times in 20 steps.
		if len(saves) != 4 {
			t.Fatalf("saves %v, want 4", saves)
		}
	})
}
