package control

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/presence"
	"plaita/store"
)

// What an execution that is neither suspended nor terminal waits on (the wake-up report,
// wakeup.go, is the suspended one's): a running execution runs a node on a worker, or sleeps
// through its node's retry back-off (the engine sleeps between attempts, engine/executor.go
// nodeFailed); a queued one — its start in the task stream, no state yet — waits for a worker,
// for a running slot of its tenant (the worker defers a start while the tenant is at its
// limit, roles/worker Quota), or for a worker of its config family (a worker of another family
// leaves the task pending, queue/gate.go). The console's "why is this waiting?" panel names the
// one cause from these; none of it is an error of the read: what cannot be read is a problem
// said in the report.

// Progress is the report of a running or pending execution.
type Progress struct {
	Workers WakeRole   `json:"workers"`
	Retry   *RetryWait `json:"retry,omitempty" doc:"its node failed and waits out its retry back-off before the next attempt"`
	Text    string     `json:"text"`
	// Problems are what could not be read (the registry, the flow version).
	Problems []string `json:"problems,omitempty"`
}

// RetryWait is a node between two attempts: how many failed, of how many, and when the next
// one starts (the engine's back-off, engine.RetryPolicy.Backoff, from the failed attempt's
// timeline entry).
type RetryWait struct {
	Node        string    `json:"node"`
	Attempt     int       `json:"attempt" doc:"the attempts that failed"`
	MaxAttempts int       `json:"max_attempts"`
	FailedAt    time.Time `json:"failed_at"`
	// Next is when the next attempt starts (zero when the flow version cannot be read);
	// NextInMillis is negative once it has passed (the attempt runs).
	Next         time.Time `json:"next,omitzero"`
	NextInMillis int64     `json:"next_in_ms"`
	Detail       string    `json:"detail" doc:"the failed attempt's timeline entry: its error and back-off"`
	Text         string    `json:"text"`
}

// QueuedWait is why a queued start has not run yet, when something other than a busy worker
// holds it: its tenant's running quota, or a config family no live worker has.
type QueuedWait struct {
	// Quota is the tenant's running slots when they are full, or when a worker deferred the
	// start already (DeferCount > 0).
	Quota      *QuotaState `json:"quota,omitempty"`
	DeferCount int         `json:"quota_defer_count,omitempty" doc:"how often a worker deferred the start for the quota"`
	// Family is set when the live workers all run another config family than the task's.
	Family *FamilyMismatch `json:"family_mismatch,omitempty"`
	Text   string          `json:"text,omitempty"`
}

// FamilyMismatch is a task stamped with a config family no live worker runs: every worker
// leaves it pending (docs/configuration.md, config generations).
type FamilyMismatch struct {
	Task    string   `json:"task_family"`
	Workers []string `json:"worker_families" doc:"the families of the live workers"`
	Text    string   `json:"text"`
}

// Timer is a time at which something will happen to an execution by itself: a delay's end, a
// wait's or an approval's timeout, the next attempt of a node in its back-off, a delay-queue
// entry's next enqueue try.
type Timer struct {
	Kind  string    `json:"kind" enum:"delay,timeout,retry_backoff,wakeup_retry"`
	Node  string    `json:"node,omitempty"`
	Due   time.Time `json:"due"`
	InMs  int64     `json:"due_in_ms" doc:"negative once it has passed"`
	What  string    `json:"what"`
	Entry string    `json:"entry,omitempty" doc:"delay and timeout: its delay-queue entry (scheduled, retrying, dead, missing, unknown)"`
}

// Progress builds the report of a running or pending st (nil for any other status).
func (p *Plane) Progress(ctx context.Context, tenant string, st *state.Execution) *Progress {
	if st.Status != state.Running && st.Status != state.Pending {
		return nil
	}
	out := &Progress{}
	live, err := p.live(ctx)
	if err != nil {
		out.Problems = append(out.Problems, fmt.Sprintf("the registry cannot be read: %v", err))
	}
	out.Workers = live.count(roleWorker, p.d.Built(roleWorker))
	if n := st.NodeAttempts[st.CurrentNode]; n > 0 {
		out.Retry = p.retryWait(ctx, tenant, st, n, out)
	}
	switch {
	case out.Retry != nil:
		out.Text = out.Retry.Text
	case out.Workers.Alive == 0 && err == nil:
		out.Text = fmt.Sprintf("%s at node %s — %s", st.Status, st.CurrentNode,
			roleText(roleWorker, out.Workers, "nothing runs it until one starts (`"+p.Command("worker")+"`)"))
	default:
		out.Text = fmt.Sprintf("%s at node %s — %s; it moves on when the node returns", st.Status, st.CurrentNode, roleText(roleWorker, out.Workers, ""))
	}
	return out
}

// retryWait is the back-off of st's current node after n failed attempts.
func (p *Plane) retryWait(ctx context.Context, tenant string, st *state.Execution, n int, out *Progress) *RetryWait {
	node := st.CurrentNode
	r := &RetryWait{Node: node, Attempt: n}
	if e, ok := store.LastRetry(st); ok {
		r.FailedAt, r.Detail = e.Time.Time(), e.Detail
	}
	f, _, err := p.PublishedFlow(ctx, tenant, st.FlowID, st.FlowVersion)
	if err != nil {
		out.Problems = append(out.Problems, fmt.Sprintf("flow %s version %s cannot be read: %v", st.FlowID, st.FlowVersion, err))
	}
	now := p.now()
	what := fmt.Sprintf("node %s failed %d time(s)", node, n)
	next, policy := nextAttempt(f, node, n, r.FailedAt)
	if policy == nil {
		r.Text = what + "; it is retried after its back-off"
		return r
	}
	r.MaxAttempts = policy.MaxAttempts
	r.Next = next
	r.NextInMillis = r.Next.Sub(now).Milliseconds()
	what = fmt.Sprintf("retry back-off: attempt %d of %d of node %s failed", n, r.MaxAttempts, node)
	if r.Next.After(now) {
		r.Text = fmt.Sprintf("%s; the next attempt starts %s (%s)", what, Relative(r.Next.Sub(now)), r.Next.UTC().Format(time.RFC3339))
	} else {
		r.Text = fmt.Sprintf("%s; the next attempt was due %s ago and runs now", what, RoundDuration(now.Sub(r.Next)))
	}
	return r
}

// nextAttempt is when node of flow f (nil: unknown) runs again after its n-th failed attempt
// at failedAt, by its retry policy; a nil policy when that cannot be told (no flow, no
// policy, no time of the failure). The execution page's back-off and the list's next wake
// both read it.
func nextAttempt(f *engine.Flow, node string, n int, failedAt time.Time) (time.Time, *engine.RetryPolicy) {
	if f == nil || failedAt.IsZero() {
		return time.Time{}, nil
	}
	nd, ok := f.Node(node)
	if !ok || nd.Retry == nil {
		return time.Time{}, nil
	}
	return failedAt.Add(nd.Retry.Backoff(n)), nd.Retry
}

// queuedWait says what holds a queued start besides a busy worker: the tenant's running quota
// and the task's config family. Nil when neither does.
func (p *Plane) queuedWait(ctx context.Context, tenant string, v *QueuedView) *QueuedWait {
	w := &QueuedWait{DeferCount: v.Task.QuotaDeferCount}
	var texts []string
	if q, err := p.Quota(ctx, tenant); err == nil && (q.Full || w.DeferCount > 0) {
		w.Quota = &q
		t := fmt.Sprintf("tenant %s runs %d execution(s), its limit (%s)", tenant, q.Running, q.Source)
		if !q.Full {
			t = fmt.Sprintf("tenant %s was at its running limit (%s; %d running now)", tenant, q.Source, q.Running)
		}
		if w.DeferCount > 0 {
			t += fmt.Sprintf("; a worker deferred this start %d time(s)", w.DeferCount)
		}
		texts = append(texts, t+": it starts when one of them ends or suspends")
	}
	if fam := v.Task.ConfigFamily; fam != "" {
		if live, err := p.live(ctx); err == nil {
			if m := familyMismatch(live, fam); m != nil {
				w.Family = m
				texts = append(texts, m.Text)
			}
		}
	}
	if len(texts) == 0 {
		return nil
	}
	w.Text = strings.Join(texts, "; ")
	return w
}

// familyMismatch is the mismatch of a task's family with the live workers', nil when a live
// worker runs it (or none is alive, or a worker is legacy: it runs every family).
func familyMismatch(live liveInstances, family string) *FamilyMismatch {
	var fams []string
	for _, rec := range live.recs {
		if (rec.Role != roleWorker && rec.Role != roleDev) || rec.Status != presence.StatusRunning {
			continue
		}
		if rec.ConfigFamily == "" || rec.ConfigFamily == family {
			return nil
		}
		if !slices.Contains(fams, rec.ConfigFamily) {
			fams = append(fams, rec.ConfigFamily)
		}
	}
	if len(fams) == 0 {
		return nil
	}
	slices.Sort(fams)
	return &FamilyMismatch{Task: family, Workers: fams,
		Text: fmt.Sprintf("its task carries config family %s and the live workers run %s: a worker of another family leaves it pending "+
			"until a worker of its family runs (same queue, group, dead-letter key, schema version and namespace as the producer)",
			family, strings.Join(fams, ", "))}
}

// Timers are the times at which something happens to st by itself, soonest first.
func (p *Plane) Timers(st *state.Execution, w *WakeUp, pr *Progress) []Timer {
	now := p.now()
	var out []Timer
	add := func(t Timer) {
		t.InMs = t.Due.Sub(now).Milliseconds()
		out = append(out, t)
	}
	if w != nil && w.Due != nil {
		kind, what := "timeout", "the wait times out"
		if w.Kind == state.SuspendApproval {
			what = "the approval times out"
		}
		if w.Kind == state.SuspendDelay {
			kind, what = "delay", "the delay ends: the execution continues"
		}
		node := ""
		if st.Suspend != nil {
			node = st.Suspend.Node
		}
		add(Timer{Kind: kind, Node: node, Due: w.Due.Due, What: what, Entry: w.Due.Entry})
		if w.Due.Entry == "retrying" && w.Due.EntryAt != nil {
			add(Timer{Kind: "wakeup_retry", Node: node, Due: *w.Due.EntryAt,
				What: fmt.Sprintf("the delay queue tries its enqueue again (%d failed)", w.Due.Attempts)})
		}
	}
	if pr != nil && pr.Retry != nil && !pr.Retry.Next.IsZero() {
		add(Timer{Kind: "retry_backoff", Node: pr.Retry.Node, Due: pr.Retry.Next,
			What: fmt.Sprintf("attempt %d of %d of the node starts", pr.Retry.Attempt+1, pr.Retry.MaxAttempts)})
	}
	slices.SortStableFunc(out, func(a, b Timer) int { return a.Due.Compare(b.Due) })
	return out
}
