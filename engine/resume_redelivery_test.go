package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"plaita/engine/state"
)

// gateType blocks until its context ends while armed is set (the worker is "killed" in the
// step after the resume), and passes once it is cleared.
type gateType struct{ armed *atomic.Bool }

func (g gateType) Prepare(*Node, *PrepareContext) Runner { return g }
func (g gateType) Run(ctx context.Context, _ *Call) (Outcome, error) {
	if g.armed.Load() {
		<-ctx.Done()
		return Outcome{}, ctx.Err()
	}
	return Outcome{}, nil
}

// A resume whose first delivery was applied (state saved running) and whose worker died in the
// next step is redelivered: it must continue from the checkpoint, for every resume kind, and a
// resume that does not fit (another type, another carrier) is still refused.
func TestRedeliveredResumeContinuesFromTheCheckpoint(t *testing.T) {
	cases := []struct {
		name, suspend string
		rt            ResumeType
		data          any
		other         ResumeType // a resume that does not fit the running execution
	}{
		{"event", `{"id":"w","type":"wait_event","params":{"event_type":"paid","match":"EVENT.order == 'A1'"},"next":"g"}`, ResumeEvent, map[string]any{"order": "A1"}, ResumeApproval},
		{"approval", `{"id":"w","type":"approval","next":"g"}`, ResumeApproval, map[string]any{"approved": true}, ResumeEvent},
		{"timeout", `{"id":"w","type":"wait_event","params":{"event_type":"paid","timeout":60,"on_timeout":"g"},"next":"e"}`, ResumeTimeout, nil, ResumeEvent},
		{"delay", `{"id":"w","type":"delay","params":{"seconds":60},"next":"g"}`, ResumeContinue, nil, ResumeApproval},
		{"retry", `{"id":"w","type":"condition","params":{"expr":"false"},"branches":{"true":"g"}}`, ResumeRetry, nil, ResumeEvent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			var armed atomic.Bool
			h.reg.Register("gate", gateType{&armed})
			src := `{"id":"r","start":"w","nodes":[` + tc.suspend + `,{"id":"g","type":"gate","next":"e"},{"id":"e","type":"end"}]}`
			f := h.flow(src)
			st := h.start(f, nil)
			if tc.rt == ResumeRetry {
				wantStatus(t, st, state.Error)
				// The retried node is the failing one; make the retry land on the gate, failed
				// as a node fails (a branch no case matches is deterministic: never retried).
				st.CurrentNode, st.Error.Node, st.Error.Type = "g", "g", ErrTypeNode
				if err := h.mem.Save(context.Background(), st); err != nil {
					t.Fatal(err)
				}
			} else {
				wantStatus(t, st, state.Suspended)
			}
			id := st.ExecutionID

			// First delivery: applied, then the worker dies inside the gate step.
			armed.Store(true)
			ctx, kill := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := h.ex.ResumeWith(ctx, f, ResumeRequest{ExecutionID: id, Type: tc.rt, Data: tc.data, Key: "1-1"})
				done <- err
			}()
			waitFor(t, func() bool { return h.stored(id).Status == state.Running && h.stored(id).CurrentNode == "g" })
			kill()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("killed run: %v", err)
			}
			mid := h.stored(id)
			if mid.Status != state.Running || mid.LastResume == nil || mid.LastResume.Type != string(tc.rt) || mid.LastResume.Key != "1-1" {
				t.Fatalf("checkpoint after the kill: status %s, last resume %+v", mid.Status, mid.LastResume)
			}

			// A resume that does not match the state is refused and changes nothing.
			if _, err := h.ex.ResumeWith(context.Background(), f, ResumeRequest{ExecutionID: id, Type: tc.other, Data: map[string]any{"approved": true}, Key: "2-1"}); !errors.Is(err, ErrInvalidResume) {
				t.Fatalf("%s on a running execution: %v", tc.other, err)
			}
			// The same type from another carrier is not this resume's redelivery either.
			if tc.rt != ResumeContinue {
				if _, err := h.ex.ResumeWith(context.Background(), f, ResumeRequest{ExecutionID: id, Type: tc.rt, Data: tc.data, Key: "3-1"}); !errors.Is(err, ErrInvalidResume) {
					t.Fatalf("%s from another carrier: %v", tc.rt, err)
				}
			}
			if got := h.stored(id); got.StepCount != mid.StepCount || got.Status != state.Running {
				t.Fatalf("a refused resume changed the state: %+v", got)
			}

			// The redelivery continues from the checkpoint and completes.
			armed.Store(false)
			st, err := h.ex.ResumeWith(context.Background(), f, ResumeRequest{ExecutionID: id, Type: tc.rt, Data: tc.data, Key: "1-1"})
			if err != nil {
				t.Fatalf("redelivered %s: %v", tc.rt, err)
			}
			wantStatus(t, st, state.Completed)
			// CheckResume gives the same answers.
			if err := CheckResume(f, mid, tc.rt, tc.data, h.set.Expr, h.clock.Now()); err != nil {
				t.Errorf("CheckResume of the redelivery: %v", err)
			}
			if err := CheckResume(f, mid, tc.other, map[string]any{"approved": true}, h.set.Expr, h.clock.Now()); !errors.Is(err, ErrInvalidResume) {
				t.Errorf("CheckResume of %s: %v", tc.other, err)
			}
		})
	}
}

func TestCheckResumeMatchesResume(t *testing.T) {
	h := newHarness(t)
	f := h.flow(`{"id":"pay","start":"wait","nodes":[
		{"id":"wait","type":"wait_event","params":{"event_type":"payment","match":"EVENT.order == INPUT.order"},"next":"ok"},
		{"id":"ok","type":"end"}]}`)
	st := h.start(f, map[string]any{"order": "A1"})
	now := h.clock.Now()
	if err := CheckResume(f, st, ResumeEvent, map[string]any{"order": "B2"}, h.set.Expr, now); !errors.Is(err, ErrEventMismatch) {
		t.Errorf("non-matching event: %v", err)
	}
	if err := CheckResume(f, st, ResumeEvent, map[string]any{"type": "refund", "order": "A1"}, h.set.Expr, now); !errors.Is(err, ErrEventMismatch) {
		t.Errorf("event of another type: %v", err)
	}
	if err := CheckResume(f, st, ResumeApproval, nil, h.set.Expr, now); !errors.Is(err, ErrInvalidResume) {
		t.Errorf("approval on an event wait: %v", err)
	}
	if err := CheckResume(f, st, ResumeRetry, nil, h.set.Expr, now); !errors.Is(err, ErrInvalidResume) {
		t.Errorf("retry of a suspended execution: %v", err)
	}
	if err := CheckResume(f, st, ResumeEvent, map[string]any{"order": "A1"}, h.set.Expr, now); err != nil {
		t.Errorf("matching event: %v", err)
	}
	if got := h.stored(st.ExecutionID); got.Status != state.Suspended || got.Context[contextEvent] != nil {
		t.Errorf("CheckResume changed the state: %+v", got)
	}
}

// waitFor polls cond (a store read) until it holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
