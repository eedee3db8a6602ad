package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
)

// Stale wake-ups. A resume the delay queue sent (a delay's continue, a wait's or an approval's
// timeout) names the suspension it was scheduled for in its mark (queue.Wakeup: node and due
// time). The engine alone cannot tell an old entry from a current one: a delay takes any
// continue, a wait any timeout. So an entry left over from an earlier suspension — the
// timeout of a wait its event already ended, the first round of a loop, a duplicate a Cluster
// mover sent — would wake the execution early wherever it waits now. The dispatcher therefore
// runs a delay-queue resume only when its mark fits the stored state:
//
//	suspended at the mark's node, with the mark's due time (to the millisecond, the queue's
//	score), of the kind the resume type wakes (continue → delay, timeout → wait or approval)
//	                                              run it
//	running, and its last applied resume is this one (same type, carrier and node): its first
//	delivery applied it and the worker died before settling
//	                                              run it (on from the checkpoint)
//	anything else, or a mark that does not decode, or no state at all
//	                                              ack as a no-op: event=worker.stale_wakeup
//
// The same judgement decides a wake-up whose flow cannot be run (staleWithoutFlow): a stale one
// is acked, one that fits is dead-lettered like any task of that flow.
//
// A wake-up that meets a held lease is not acked away (a continue "carries nothing" for the
// lease-conflict rules, but this one is the execution's only way out of its suspension — the
// worker that suspended it may simply not have let go yet): if the execution is still
// suspended as the mark says, the wake-up goes back on the delay queue for WakeupRetryDelay;
// if it runs on this very resume, the usual lease-conflict rules apply (its holder settles it,
// or a dead holder's lease runs out and the redelivery goes on); else it is dropped as stale.

// WakeupRetryDelay is how long a delay-queue wake-up that met a held lease waits on the delay
// queue before it is sent again.
const WakeupRetryDelay = time.Second

// judgeWakeup decides whether the delay-queue resume w (of type rt, carrier key) fits st; why
// says what does not.
func judgeWakeup(st *state.Execution, w queue.Wakeup, rt engine.ResumeType, key string) (fits bool, why string) {
	if st == nil {
		return false, "the execution has no state"
	}
	switch st.Status {
	case state.Suspended:
		s := st.Suspend
		switch {
		case s == nil:
			return false, "suspended without a suspension record"
		case s.Node != w.Node:
			return false, fmt.Sprintf("scheduled for node %q, the execution waits at %q", w.Node, s.Node)
		case s.Due == nil:
			return false, fmt.Sprintf("the suspension at %q has no due time", s.Node)
		case s.Due.UnixMilli() != w.Due.UnixMilli():
			return false, fmt.Sprintf("scheduled for the suspension due %s, the current one is due %s",
				w.Due.UTC().Format(time.RFC3339Nano), s.Due.UTC().Format(time.RFC3339Nano))
		case !queue.EndsSuspension(rt, s.Kind):
			return false, fmt.Sprintf("a resume of type %s does not end a suspension of kind %s", rt, s.Kind)
		}
		return true, ""
	case state.Running:
		if m := st.LastResume; m != nil && m.Type == string(rt) && m.Key == key && m.Node == w.Node {
			return true, ""
		}
		return false, "the execution is running, and not on this resume"
	}
	return false, "the execution is " + string(st.Status)
}

// carrierKey is the carrier identity the executor records with an applied resume (run.go).
func carrierKey(t *task) string { return cmp.Or(t.env.SourceMessageID, t.dl.ID) }

// staleWakeup is the no-op outcome of a delay-queue resume that does not fit st (the state the
// lease-taking read found); ok is false for any other task and for a wake-up that fits.
func (p *Dispatcher) staleWakeup(t *task, st *state.Execution) (Outcome, bool) {
	w, ok, err := queue.ParseWakeup(t.env)
	switch {
	case !ok:
		return Outcome{}, false
	case err != nil:
		return p.stale(t, err.Error()), true
	}
	if fits, why := judgeWakeup(st, w, t.env.ResumeType, carrierKey(t)); !fits {
		return p.stale(t, why), true
	}
	return Outcome{}, false
}

// wakeupConflict decides a delay-queue resume whose execution lease is held: rescheduled when
// the execution is still suspended as its mark says, dropped when it does not fit. ok is false
// for any other task, and for the resume a running execution is on (the usual rules apply).
func (p *Dispatcher) wakeupConflict(ctx context.Context, t *task) (Outcome, bool) {
	w, ok, err := queue.ParseWakeup(t.env)
	switch {
	case !ok || t.ts == nil || p.d.Wakeups == nil || p.d.Wakeups.delay == nil:
		return Outcome{}, false
	case err != nil:
		return p.stale(t, err.Error()), true
	}
	octx, cancel := settleCtx(ctx)
	defer cancel()
	st, err := t.ts.Load(octx, t.env.ExecutionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		st = nil
	case err != nil:
		return retry(fmt.Errorf("read the state for a wake-up that met a held lease: %w", err)), true
	}
	if fits, why := judgeWakeup(st, w, t.env.ResumeType, carrierKey(t)); !fits {
		return p.stale(t, why), true
	}
	if st.Status != state.Suspended {
		// Running on this very resume: its holder runs it, or its lease outlives a dead
		// holder. The usual conflict rules settle that without losing it.
		return Outcome{}, false
	}
	if err := p.d.Wakeups.delay.Reschedule(octx, queue.WakeupEntry(t.env, w), p.d.Clock.Now().Add(WakeupRetryDelay)); err != nil {
		return retry(fmt.Errorf("put a wake-up that met a held lease back on the delay queue: %w", err)), true
	}
	p.counter("plaita_worker_wakeups_deferred_total").Inc()
	return noop("worker.wakeup_deferred", fmt.Sprintf("the execution's lease is held: the wake-up goes back on the delay queue for %s", WakeupRetryDelay)), true
}

// staleWithoutFlow judges a delay-queue resume whose flow cannot be run (not published any
// more, or not valid) before it is dead-lettered. One that fits its execution's suspension is
// that execution's way out: it is dead-lettered (ok false), to be replayed once the flow is
// back (docs/delay.md). One that does not fit is acked as stale, as it would be with the flow
// there: nothing waits for it, and a dead letter would ask an operator to act for nothing. A
// state that cannot be read leaves the dead letter to keep it.
func (p *Dispatcher) staleWithoutFlow(ctx context.Context, t *task) (Outcome, bool) {
	w, ok, err := queue.ParseWakeup(t.env)
	switch {
	case !ok || t.ts == nil:
		return Outcome{}, false
	case err != nil:
		return p.stale(t, err.Error()), true
	}
	octx, cancel := settleCtx(ctx)
	defer cancel()
	st, err := t.ts.Load(octx, t.env.ExecutionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		st = nil
	case err != nil:
		return Outcome{}, false
	}
	if fits, why := judgeWakeup(st, w, t.env.ResumeType, carrierKey(t)); !fits {
		return p.stale(t, why), true
	}
	return Outcome{}, false
}

// stale is the outcome of a stale wake-up: acked, nothing run.
func (p *Dispatcher) stale(t *task, why string) Outcome {
	p.counter("plaita_worker_stale_wakeups_total").Inc()
	o := noop("worker.stale_wakeup", "delay-queue wake-up that does not fit the execution's suspension: acked as a no-op")
	o.Err = errors.New(why)
	return o
}

// counter is one of the dispatcher's counters, created on first use (a wake-up is rare next to
// a delivery; there is no point in a field per counter).
func (p *Dispatcher) counter(name string) interface{ Inc() } {
	if p.d.Metrics == nil {
		return nopCounter{}
	}
	return p.d.Metrics.GetOrCreateCounter(name)
}

type nopCounter struct{}

func (nopCounter) Inc() {}
