package control

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"plaita/internal/presence"
	"plaita/queue"
	"plaita/store"
)

// Capacity dispatch: a start may name the worker that runs it (target_instance_id; the
// worker's Target gate leaves a message addressed to another live instance for it), chosen
// from the capacity snapshots the workers write into the registry with every heartbeat. The
// decision is made here, so that any front end's start can make it (the console does); each
// one is written to the dispatch ledger (store.DispatchLedger) with the candidates it
// considered. In shadow mode (PLAITA_CONSOLE_DISPATCH_SHADOW, the default) it is only
// recorded: the start carries no target, and any worker takes it.
//
// A decision never holds a start up: a registry that cannot be read, or a ledger that cannot
// be written, leaves the start without a target, and the answer says why.

// DispatchSettings are the capacity dispatcher's knobs; the zero value is off.
type DispatchSettings struct {
	// Ledger is where decisions are written: nil turns capacity dispatch off.
	Ledger *store.DispatchLedger
	// Stale is PLAITA_CAPACITY_STALE_SECONDS: a snapshot older than this is ignored (≤ 0: 90 s).
	Stale time.Duration
	// Shadow is PLAITA_CONSOLE_DISPATCH_SHADOW: record the decision, set no target.
	Shadow bool
	// Actor is PLAITA_DISPATCHER_ID, the ledger's name for who decided.
	Actor string
}

// DefaultCapacityStale is PLAITA_CAPACITY_STALE_SECONDS's default.
const DefaultCapacityStale = 90 * time.Second

// DispatchDecision is what a start's dispatch decided, as its answer says it: the ledger entry
// has the candidates themselves (a deployment's every worker: too much for each start's
// answer).
type DispatchDecision struct {
	Mode   string `json:"mode" enum:"shadow,applied" doc:"shadow: recorded only, the start carries no target"`
	Target string `json:"target,omitempty" doc:"the worker chosen (none: any worker takes it)"`
	Reason string `json:"reason"`
	// Considered and Eligible count the workers looked at and those that qualified.
	Considered int    `json:"considered"`
	Eligible   int    `json:"eligible"`
	LedgerID   string `json:"ledger_id,omitempty" doc:"the decision's entry in the dispatch ledger"`
	// Error says what kept the decision from being made or recorded (the start went on).
	Error string `json:"error,omitempty"`

	record store.DispatchRecord
	// live are the registry's live records the decision read (nil when it could not).
	live []store.InstanceRecord
}

// PlanDispatch picks the worker a start of queue should go to, from the registry's live
// records at now: among the running workers of that queue whose capacity snapshot is fresher
// than stale and that have a free slot, the one with the most free slots (then the least
// loaded, then the smallest id: one answer for one registry). Every worker record is a
// candidate, with why it qualifies or not; target is "" when none does. It is a pure function.
func PlanDispatch(now time.Time, live []store.InstanceRecord, queue string, stale time.Duration) (target, reason string, cands []store.DispatchCandidate) {
	if stale <= 0 {
		stale = DefaultCapacityStale
	}
	cands = []store.DispatchCandidate{}
	var best *store.DispatchCandidate
	for _, rec := range live {
		if rec.Role != roleWorker && rec.Role != roleDev {
			continue
		}
		age := max(now.Sub(rec.HeartbeatAt), 0)
		c := store.DispatchCandidate{InstanceID: rec.InstanceID, Status: rec.Status, ActiveTasks: rec.ActiveTasks, Capacity: rec.Capacity,
			HeartbeatAgeMS: age.Milliseconds()}
		switch free := rec.Capacity - rec.ActiveTasks; {
		case rec.Status != presence.StatusRunning:
			c.Why = rec.Status + ": takes no new work"
		case rec.Queue != queue:
			c.Why = fmt.Sprintf("reads %q, not %q", rec.Queue, queue)
		case rec.HeartbeatAt.IsZero() || age > stale:
			c.Why = fmt.Sprintf("stale capacity snapshot: %s old (PLAITA_CAPACITY_STALE_SECONDS %s)", RoundDuration(age), RoundDuration(stale))
		case rec.Capacity <= 0:
			c.Why = "reports no capacity"
		case free <= 0:
			c.Why = fmt.Sprintf("full: %d of %d busy", rec.ActiveTasks, rec.Capacity)
		default:
			c.Eligible, c.Why = true, fmt.Sprintf("%d free of %d", free, rec.Capacity)
		}
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b store.DispatchCandidate) int { return cmp.Compare(a.InstanceID, b.InstanceID) })
	for i := range cands {
		if c := &cands[i]; c.Eligible && (best == nil || better(*c, *best)) {
			best = c
		}
	}
	if best == nil {
		return "", fmt.Sprintf("no running worker of %s has a fresh snapshot with a free slot (%d considered): any worker takes it", queue, len(cands)), cands
	}
	return best.InstanceID, fmt.Sprintf("most free slots: %s (%s)", best.InstanceID, best.Why), cands
}

// better orders eligible candidates: more free slots, then a smaller share busy (ids are
// already in order: the first of equals stays).
func better(a, b store.DispatchCandidate) bool {
	fa, fb := a.Capacity-a.ActiveTasks, b.Capacity-b.ActiveTasks
	if fa != fb {
		return fa > fb
	}
	return a.ActiveTasks*b.Capacity < b.ActiveTasks*a.Capacity
}

// planStart makes a start's dispatch decision (nil when capacity dispatch is off) and, unless
// it is a shadow one, addresses env to the chosen worker.
func (p *Plane) planStart(ctx context.Context, tenant string, env *queue.Envelope) *DispatchDecision {
	d := p.d.Dispatch
	if d.Ledger == nil {
		return nil
	}
	now := p.now()
	dec := &DispatchDecision{Mode: store.DispatchApplied}
	if d.Shadow {
		dec.Mode = store.DispatchShadow
	}
	live, err := p.d.Registry.Instances(ctx, now, presence.TTLFactor*presence.DefaultHeartbeatInterval)
	var cands []store.DispatchCandidate
	if err != nil {
		dec.Reason, dec.Error = "the registry cannot be read: any worker takes it", err.Error()
	} else {
		dec.live = live.Live
		dec.Target, dec.Reason, cands = PlanDispatch(now, live.Live, p.QueueName(), d.Stale)
	}
	dec.Considered = len(cands)
	for _, c := range cands {
		if c.Eligible {
			dec.Eligible++
		}
	}
	if dec.Mode == store.DispatchApplied {
		env.TargetInstanceID = dec.Target
	}
	dec.record = store.DispatchRecord{At: now.UTC(), Actor: d.Actor, TenantID: tenant, ExecutionID: env.ExecutionID, FlowID: env.FlowID,
		FlowVersion: env.FlowVersion, Queue: p.QueueName(), Mode: dec.Mode, Target: dec.Target, Reason: dec.Reason, Candidates: cands}
	return dec
}

// recordDispatch writes a start's decision to the ledger, with the start's stream entry.
func (p *Plane) recordDispatch(ctx context.Context, dec *DispatchDecision, messageID string) {
	if dec == nil {
		return
	}
	dec.record.MessageID = messageID
	id, err := p.d.Dispatch.Ledger.Record(ctx, dec.record)
	if err != nil {
		if dec.Error != "" {
			dec.Error += "; "
		}
		dec.Error += "not recorded in the dispatch ledger: " + err.Error()
		return
	}
	dec.LedgerID = id
}
