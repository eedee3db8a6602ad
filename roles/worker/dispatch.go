package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
)

// Dead-letter reasons written by the dispatcher (beside the queue's own).
const (
	ReasonFlowNotFound      = "flow_not_found"
	ReasonInvalidFlow       = "invalid_flow"
	ReasonExecutionNotFound = "execution_not_found"
	ReasonInvalidTenant     = "invalid_tenant"
	ReasonStateCorrupt      = "state_corrupt"
	ReasonPermanent         = "permanent_error"
)

// Deps is what a Dispatcher needs. Gates, Registry, Disk, Alerter may be nil (skipped).
type Deps struct {
	Client rueidis.Client
	Config *config.Config
	Root   string // key root ("" = keys.DefaultRoot)
	Queue  *queue.Queue
	Store  *store.Redis
	// Flows parses published definitions; nil = a cache over Nodes (nil = control nodes only).
	Flows *engine.FlowCache
	Nodes *engine.Registry
	// Engine are the executor's settings (zero value: engine.DefaultSettings()).
	Engine engine.Settings

	// Registry answers liveness of lease holders and takes the active-task count; nil = every
	// other holder is treated as alive.
	Registry *Registry

	// Admission gates, in loop order; nil = skipped.
	DenyRepos    *RepoDeny
	Target       *Target
	TenantStatus *TenantStatus
	Affinity     *Affinity
	Quota        *Quota

	Disk     *DiskGuard // nil = always allow
	Alerter  *Alerter   // nil ok; set as Queue.OnDeadLetter when that is unset
	Observer *Observer  // nil = no step metrics and no live events

	Log         zerolog.Logger
	Metrics     *metrics.Set
	InstanceID  string // lease holder; "" = PLAITA_INSTANCE_ID
	Concurrency int    // consumer goroutines; < 1 = PLAITA_WORKER_CONCURRENCY (at least 1)
	Clock       engine.Clock

	// ReadBlock is the XREADGROUP block time (default 1s); ReclaimEvery makes every n-th round
	// (and every idle round) a reclaim pass (default 5).
	ReadBlock    time.Duration
	ReclaimEvery int
	// CancelPoll is how often a running execution's cancel flag is read (the in-step cancel
	// listener, off with PLAITA_DISABLE_CANCEL_INTERRUPT=1); default 1s.
	CancelPoll time.Duration
	// DeterministicFailureMax is DETERMINISTIC_FAILURE_MAX (default 12): the execution's
	// consecutive deterministic failures — runs ending in a node error or a deadline, and
	// crashed (panicked) runs — counted in its nofail counter and cleared when any node moves
	// forward. At the limit a retry wake-up is refused and a crashing run ends in error.
	DeterministicFailureMax int
}

// DefaultDeterministicFailureMax is DETERMINISTIC_FAILURE_MAX (SPEC §4): the runs of one
// execution that may crash (panic) before it is ended in error.
const DefaultDeterministicFailureMax = 12

// ErrTypeDeterministicFailure is the error type of an execution ended because its runs kept
// crashing.
const ErrTypeDeterministicFailure = "DeterministicFailure"

// ErrTypeAdmissionRefused is the error type of an existing execution whose redelivered start
// an admission gate refused (e.g. its tenant was disabled).
const ErrTypeAdmissionRefused = "AdmissionRefused"

// panicError is a run that panicked.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("the run panicked: %v", e.value) }

// errCancelInterrupt is the cause of a run interrupted by its cancel flag.
var errCancelInterrupt = errors.New("cancel flag set: run interrupted")

// Dispatcher is the worker's dispatch loop: it reads tasks, gates them, runs them under the
// execution lease and settles each delivery (ack, leave pending, dead-letter, requeue).
//
// Order per delivery: queue.Gate (non-run verdicts through Queue.Apply; used-up deliveries
// through exhausted) → DenyRepos → Target → TenantStatus → flow definition (missing:
// dead-letter flow_not_found; unparsable: invalid_flow; a cancel resume goes on without it) →
// Affinity → Quota → tombstone check (deleted: ack, no-op) → lease (held: see leaseConflict;
// a leftover lease of this instance for an execution it does not run is taken over) → run.
//
// A delivery that waits for another holder's lease is left pending with its delivery count
// restored: waiting spends no delivery. A delivery past PLAITA_MAX_DELIVERIES ends its
// running execution in error (DeliveriesExhausted, retryable) before it is dead-lettered.
//
// Outcomes of a run:
//
//	terminal                          ack
//	suspended                         RegisterWakeup, then ack (registration failed: transient)
//	ErrInvalidResume / ErrEventMismatch / *FlowHashError
//	                                  ack with a WARNING (refused resume; state untouched)
//	store.ErrLeaseLost (write or watchdog)
//	                                  stop, write nothing more, no ack
//	cancel flag set mid-step          Resume(cancel) from the checkpoint, ack
//	transient / context (drain)       no ack, IncFailed; the last allowed delivery is
//	                                  dead-lettered (max_deliveries=N) instead, its running
//	                                  execution ended in error first
//	panic                             nofail counter; at DeterministicFailureMax the execution
//	                                  ends in error (DeterministicFailure) and is acked, else
//	                                  as transient
//	ErrNotFound (resume) / ErrStateCorrupt / other permanent
//	                                  dead-letter (execution_not_found, state_corrupt,
//	                                  permanent_error)
type Dispatcher struct {
	d     Deps
	log   zerolog.Logger
	flows *engine.FlowCache
	root  string
	self  string
	n     int

	mu       sync.Mutex
	started  bool
	stopped  bool
	readStop context.CancelFunc // stops reading at once (drain)
	runStop  context.CancelFunc // cancels in-flight runs (drain timeout)
	done     chan struct{}      // closed when every consumer has returned
	stopping atomic.Bool
	active   atomic.Int64

	// runs are the executions a consumer of this process holds (or is taking) the lease of: a
	// lease of this instance for any other execution is a leftover of an earlier life.
	runsMu sync.Mutex
	runs   map[string]struct{}

	dispatched, acked, conflicts, noops, failed *metrics.Counter
}

// NewDispatcher builds the loop; Start runs it.
func NewDispatcher(d Deps) *Dispatcher {
	if d.Engine == (engine.Settings{}) {
		d.Engine = engine.DefaultSettings()
	}
	if d.Clock == nil {
		d.Clock = engine.SystemClock{}
	}
	if d.ReadBlock <= 0 {
		d.ReadBlock = time.Second
	}
	if d.ReclaimEvery < 1 {
		d.ReclaimEvery = 5
	}
	if d.DeterministicFailureMax < 1 {
		d.DeterministicFailureMax = DefaultDeterministicFailureMax
	}
	if d.CancelPoll <= 0 {
		d.CancelPoll = time.Second
	}
	n := d.Concurrency
	if n < 1 && d.Config != nil {
		n = config.WorkerConcurrency.In(d.Config)
	}
	self := d.InstanceID
	if self == "" && d.Config != nil {
		self = config.InstanceID.In(d.Config)
	}
	flows := d.Flows
	if flows == nil {
		reg := d.Nodes
		if reg == nil {
			reg = engine.NewRegistry()
		}
		flows = engine.NewFlowCache(reg, d.Engine.Expr, 256)
	}
	root := d.Root
	if root == "" {
		root = keys.DefaultRoot
	}
	if d.Queue != nil && d.Queue.OnDeadLetter == nil && d.Alerter != nil {
		a := d.Alerter
		d.Queue.OnDeadLetter = func(info queue.DeadLetterInfo) {
			a.Send("dead_letter", map[string]any{
				"queue": info.Queue, "dlq_key": info.DLQKey, "dlq_id": info.DLQID, "message_id": info.MessageID,
				"reason": info.Reason, "detail": info.Detail, "delivery_count": info.DeliveryCount,
				"tenant_id": info.TenantID, "execution_id": info.ExecutionID, "dlq_length": info.DLQLength,
			})
		}
	}
	set := setOrNew(d.Metrics)
	return &Dispatcher{
		d: d, log: d.Log.With().Str("component", "dispatch").Logger(), flows: flows, root: root, self: self, n: max(n, 1),
		runs:       map[string]struct{}{},
		dispatched: set.GetOrCreateCounter(`plaita_dispatch_runs_total`),
		acked:      set.GetOrCreateCounter(`plaita_dispatch_acked_total`),
		conflicts:  set.GetOrCreateCounter(`plaita_dispatch_lease_conflicts_total`),
		noops:      set.GetOrCreateCounter(`plaita_dispatch_noop_acks_total`),
		failed:     set.GetOrCreateCounter(`plaita_dispatch_failed_total`),
	}
}

// Active is the number of tasks being handled now.
func (p *Dispatcher) Active() int { return int(p.active.Load()) }

// Start launches the consumer goroutines. It returns at once; a second call is a no-op.
func (p *Dispatcher) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.stopped {
		return
	}
	p.started = true
	readCtx, readStop := context.WithCancel(ctx)
	runCtx, runStop := context.WithCancel(context.WithoutCancel(ctx))
	p.readStop, p.runStop = readStop, runStop
	p.done = make(chan struct{})
	var wg sync.WaitGroup
	for i := range p.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.consume(readCtx, runCtx, i)
		}()
	}
	go func() {
		wg.Wait()
		close(p.done)
	}()
}

// Stop drains: reading stops at once (what a pending read returns is neither run nor acked),
// in-flight tasks finish and are settled; when ctx ends first (the caller passes
// PLAITA_WORKER_DRAIN_TIMEOUT) the in-flight runs are cancelled (their deliveries stay pending
// and resume from the checkpoint elsewhere) and Stop returns. Safe to call twice or without
// Start.
func (p *Dispatcher) Stop(ctx context.Context) {
	p.mu.Lock()
	if p.stopped || !p.started {
		p.stopped = true
		p.mu.Unlock()
		return
	}
	p.stopped = true
	p.stopping.Store(true)
	p.readStop()
	done, runStop := p.done, p.runStop
	p.mu.Unlock()
	select {
	case <-done:
		runStop()
		return
	case <-ctx.Done():
	}
	p.log.Warn().Str("event", "worker.drain_timeout").Int("active", p.Active()).
		Msg("drain timeout (PLAITA_WORKER_DRAIN_TIMEOUT): cancelling in-flight runs; their messages stay pending")
	runStop()
	t := time.NewTimer(5 * time.Second) // best effort: let cancelled runs write their last step
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

func (p *Dispatcher) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (p *Dispatcher) consume(readCtx, runCtx context.Context, i int) {
	q := p.d.Queue
	consumer := q.Consumer()
	if i > 0 {
		consumer = fmt.Sprintf("%s#%d", consumer, i)
	}
	idle := false
	for round := 0; ; round++ {
		if readCtx.Err() != nil || p.stopping.Load() {
			return
		}
		if p.d.Disk != nil && !p.d.Disk.Allow() {
			p.sleep(readCtx, time.Second) // no XREADGROUP, no XCLAIM this round
			continue
		}
		var ds []queue.Delivery
		var err error
		if idle || round%p.d.ReclaimEvery == 0 {
			octx, cancel := context.WithTimeout(readCtx, 10*time.Second)
			ds, err = q.Reclaim(octx, consumer, 1)
			cancel()
			if err != nil && readCtx.Err() == nil {
				p.readFailed(readCtx, "reclaim", err)
			}
		}
		if len(ds) == 0 && readCtx.Err() == nil {
			octx, cancel := context.WithTimeout(readCtx, p.d.ReadBlock+10*time.Second)
			ds, err = q.Read(octx, consumer, 1, p.d.ReadBlock)
			cancel()
			if err != nil && readCtx.Err() == nil {
				p.readFailed(readCtx, "read", err)
				continue
			}
		}
		if p.stopping.Load() || readCtx.Err() != nil {
			return // read after the drain began: neither dispatched nor acked
		}
		idle = len(ds) == 0
		for _, dl := range ds {
			p.handle(runCtx, consumer, dl)
		}
	}
}

func (p *Dispatcher) readFailed(ctx context.Context, op string, err error) {
	if errors.Is(err, queue.ErrNoGroup) {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		gerr := p.d.Queue.EnsureGroup(octx)
		cancel()
		if gerr == nil {
			return
		}
	}
	p.log.Warn().Err(err).Str("event", "worker.read_failed").Str("op", op).Msg("queue read failed; retrying")
	p.sleep(ctx, 500*time.Millisecond)
}

// opCtx bounds one settling Redis call; it outlives the run's cancellation so a finished run
// is still acked during a drain.
func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

func (p *Dispatcher) setActive(delta int64) {
	n := p.active.Add(delta)
	if p.d.Registry != nil {
		p.d.Registry.SetActive(int(n))
	}
}

// task is one delivery being handled.
type task struct {
	dl    queue.Delivery
	env   queue.Envelope
	log   zerolog.Logger
	ts    *store.TenantStore
	lease *store.Lease // held while the task runs its execution
}

// keepClaimed refreshes the pending entry's idle time while its task runs (every third of
// PLAITA_CLAIM_MIN_IDLE_MS), so a sibling never reclaims a message whose long step is still
// running here and burns its deliveries. A crashed worker stops touching, and its messages
// become reclaimable after the idle time as before. The returned function stops it.
func (p *Dispatcher) keepClaimed(ctx context.Context, consumer, id string) func() {
	every := 20 * time.Second
	if cfg := p.d.Config; cfg != nil {
		every = time.Duration(config.ClaimMinIdleMS.In(cfg)) * time.Millisecond / 3
	}
	every = max(every, 50*time.Millisecond)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				octx, ocancel := opCtx(ctx)
				if err := p.d.Queue.Touch(octx, consumer, id); err != nil && ctx.Err() == nil {
					p.log.Debug().Err(err).Str("message_id", id).Msg("could not refresh the pending entry")
				}
				ocancel()
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (p *Dispatcher) handle(ctx context.Context, consumer string, dl queue.Delivery) {
	p.setActive(1)
	defer p.setActive(-1)
	defer p.keepClaimed(ctx, consumer, dl.ID)()
	q := p.d.Queue
	t := &task{dl: dl, env: dl.Envelope}
	t.log = p.log.With().Str("message_id", dl.ID).Str("execution_id", t.env.ExecutionID).
		Str("tenant_id", t.env.Tenant()).Str("kind", string(t.env.Kind)).Str("resume_type", string(t.env.ResumeType)).
		Int64("delivery_count", dl.Count).Logger()

	if v := q.Gate(dl); v == queue.VerdictDeadLetterMaxDeliveries {
		p.exhausted(ctx, t)
		return
	} else if v != queue.VerdictRun {
		octx, cancel := opCtx(ctx)
		defer cancel()
		if err := q.Apply(octx, dl, v); err != nil {
			t.log.Warn().Err(err).Str("event", "worker.gate_apply_failed").Str("verdict", string(v)).Msg("could not carry out the delivery verdict")
		}
		return
	}
	env := t.env
	if g := p.d.DenyRepos; g != nil {
		if dec := g.Check(env); !dec.Runs() {
			p.decide(ctx, t, dec, nil)
			return
		}
	}
	if g := p.d.Target; g != nil {
		var alive func(context.Context, string) (bool, error)
		if p.d.Registry != nil {
			alive = p.d.Registry.Alive
		}
		if dec := g.Check(ctx, env, p.self, alive); !dec.Runs() {
			p.decide(ctx, t, dec, nil)
			return
		}
	}
	if g := p.d.TenantStatus; g != nil {
		dec, err := g.Check(ctx, env.Tenant())
		if err != nil {
			p.transient(ctx, t, fmt.Errorf("tenant status: %w", err))
			return
		}
		if !dec.Runs() {
			p.decide(ctx, t, dec, nil)
			return
		}
	}
	ts, err := p.d.Store.Tenant(env.Tenant())
	if err != nil {
		p.deadLetter(ctx, t, ReasonInvalidTenant)
		return
	}
	t.ts = ts
	flowID, version := env.FlowID, env.FlowVersion
	if env.Kind == queue.KindResume && (flowID == "" || version == "") {
		st, err := ts.Load(ctx, env.ExecutionID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			p.deadLetter(ctx, t, ReasonExecutionNotFound)
			return
		case err != nil:
			p.settleErr(ctx, t, err)
			return
		}
		flowID, version = st.FlowID, st.FlowVersion
	}
	f, reason, err := p.loadFlow(ctx, env.Tenant(), flowID, version)
	if err != nil && reason != "" && env.Kind == queue.KindResume && env.ResumeType == engine.ResumeCancel {
		// Cancelling runs no node: it works whatever happened to the definition.
		t.log.Info().Err(err).Str("event", "worker.cancel_without_flow").Msg("flow unusable; cancelling the execution anyway")
		f, reason, err = nil, "", nil
	}
	if err != nil {
		if reason != "" {
			t.log.Warn().Err(err).Str("event", "worker.flow_unusable").Str("flow_id", flowID).Str("flow_version", version).Msg("flow cannot be run")
			p.deadLetter(ctx, t, reason)
		} else {
			p.transient(ctx, t, err)
		}
		return
	}
	if g := p.d.Affinity; g != nil && f != nil {
		dec, err := g.Check(ctx, env, f.Repo)
		if err != nil {
			p.transient(ctx, t, err)
			return
		}
		if !dec.Runs() {
			p.decide(ctx, t, dec, nil)
			return
		}
	}
	if g := p.d.Quota; g != nil {
		adm, err := g.Admit(ctx, env)
		if err != nil {
			p.transient(ctx, t, err)
			return
		}
		if !adm.Runs() {
			if adm.Verdict == VerdictDefer && adm.RetryAfter > 0 {
				// Spread the deferral budget over real time: re-enqueued at once, a deferred
				// start would circle the stream and spend PLAITA_TENANT_QUOTA_DEFER_MAX in
				// milliseconds, then run with quota_bypass while the tenant is still full.
				// This consumer waits meanwhile; a drain interrupts the wait and the message
				// stays pending.
				p.sleep(ctx, adm.RetryAfter)
				if ctx.Err() != nil {
					return
				}
			}
			p.decide(ctx, t, adm.Decision, adm.Mutate)
			return
		}
		if adm.Counted {
			defer func() {
				octx, cancel := opCtx(ctx)
				defer cancel()
				if err := g.Release(octx, env.Tenant(), env.ExecutionID); err != nil {
					t.log.Warn().Err(err).Str("event", "worker.quota_release_failed").Msg("tenant quota slot not released (it expires)")
				}
			}()
		}
	}
	p.run(ctx, t, ts, f)
}

// loadFlow reads the published definition; reason is a dead-letter reason for a permanent
// problem, "" for a transient one.
func (p *Dispatcher) loadFlow(ctx context.Context, tenant, flowID, version string) (*engine.Flow, string, error) {
	sp, err := keys.For(p.root, tenant)
	if err != nil {
		return nil, ReasonInvalidTenant, err
	}
	c := p.d.Client
	octx, cancel := opCtx(ctx)
	defer cancel()
	raw, err := c.Do(octx, c.B().Get().Key(sp.Flow(flowID, version)).Build()).AsBytes()
	switch {
	case rueidis.IsRedisNil(err):
		return nil, ReasonFlowNotFound, fmt.Errorf("flow %s version %q is not published (%s)", flowID, version, sp.Flow(flowID, version))
	case err != nil:
		return nil, "", fmt.Errorf("%w: read flow %s: %w", store.ErrRedis, flowID, err)
	}
	f, err := p.flows.Parse(raw)
	if err != nil {
		return nil, ReasonInvalidFlow, err
	}
	return f, "", nil
}

// decide carries out an admission gate's non-run decision.
func (p *Dispatcher) decide(ctx context.Context, t *task, dec Decision, mutate func(*queue.Envelope)) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	ev := t.log.Info().Str("event", "worker.gate").Str("verdict", dec.Verdict.String()).Str("rule", dec.Rule).Str("reason", dec.Reason)
	switch dec.Verdict {
	case VerdictRefuse:
		if t.env.Kind == queue.KindStart && p.d.Store != nil && p.refuseStart(ctx, t, dec) {
			return
		}
		ev.Msg("task refused by an admission gate: dead-lettering it")
		rt := *t
		rt.dl.Err = errors.New(dec.Reason) // becomes the dead letter's detail
		p.deadLetter(ctx, &rt, dec.Rule)
	case VerdictDefer, VerdictHandOver:
		id, err := p.d.Queue.Requeue(octx, t.dl, mutate)
		if err != nil {
			t.log.Warn().Err(err).Str("event", "worker.requeue_failed").Msg("requeue failed; the message stays pending")
			return
		}
		ev.Str("new_message_id", id).Msg("task re-enqueued by an admission gate")
	default: // Hold, LeaveForTarget: leave it pending
		ev.Msg("task left pending by an admission gate")
	}
}

func (p *Dispatcher) ack(ctx context.Context, t *task) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	if err := p.d.Queue.Ack(octx, t.dl); err != nil {
		t.log.Warn().Err(err).Str("event", "worker.ack_failed").Msg("ack failed; the message will be redelivered (harmless: the state is saved)")
		return
	}
	p.acked.Inc()
}

func (p *Dispatcher) deadLetter(ctx context.Context, t *task, reason string) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	if err := p.d.Queue.DeadLetter(octx, t.dl, reason); err != nil {
		t.log.Error().Err(err).Str("event", "worker.dead_letter_failed").Str("reason", reason).Msg("dead-letter failed; the message stays pending")
	}
}

// transient leaves the message pending for redelivery; the last allowed delivery goes to the
// DLQ instead.
func (p *Dispatcher) transient(ctx context.Context, t *task, err error) {
	p.failed.Inc()
	p.d.Queue.IncFailed()
	next := t.dl
	next.Count++
	if ctx.Err() == nil && p.d.Queue.ShouldDeadLetter(next) {
		t.log.Error().Err(err).Str("event", "worker.task_failed").Msg("transient failure on the last allowed delivery: dead-lettering")
		last := *t
		last.dl.Err = err // becomes the dead letter's detail and the execution's error
		p.exhausted(ctx, &last)
		return
	}
	t.log.Warn().Err(err).Str("event", "worker.task_failed").Msg("transient failure: not acked, the message is redelivered and resumes from the checkpoint")
}

// settleErr classifies an error of a run (or of the load before it).
func (p *Dispatcher) settleErr(ctx context.Context, t *task, err error) {
	var fh *engine.FlowHashError
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		p.failed.Inc()
		t.log.Warn().Err(err).Str("event", "worker.lease_lost").Msg("lease lost: stopped at once, nothing more written, not acked")
	case errors.Is(err, engine.ErrInvalidResume), errors.Is(err, engine.ErrEventMismatch), errors.As(err, &fh):
		t.log.Warn().Err(err).Str("event", "worker.resume_refused").Msg("resume refused (duplicate or stale carrier); state untouched, acked")
		p.noops.Inc()
		p.ack(ctx, t)
	case errors.Is(err, store.ErrNotFound):
		p.deadLetter(ctx, t, ReasonExecutionNotFound)
	case errors.Is(err, store.ErrStateCorrupt):
		p.deadLetter(ctx, t, ReasonStateCorrupt)
	case store.IsTransient(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		p.transient(ctx, t, err)
	default:
		t.log.Error().Err(err).Str("event", "worker.task_permanent").Msg("permanent failure: dead-lettering")
		p.deadLetter(ctx, t, ReasonPermanent)
	}
}

func (p *Dispatcher) run(ctx context.Context, t *task, ts *store.TenantStore, f *engine.Flow) {
	env := t.env
	cfg := p.d.Config
	// A deleted execution stays deleted: a late start or resume must not recreate it.
	tomb, err := ts.Tombstoned(ctx, env.ExecutionID)
	if err != nil {
		p.settleErr(ctx, t, err)
		return
	}
	if tomb {
		t.log.Warn().Str("event", "worker.execution_deleted").Msg("the execution was deleted (tombstone): task acked as a no-op")
		p.noops.Inc()
		p.ack(ctx, t)
		return
	}
	if !p.claimRun(env.ExecutionID) {
		// Another consumer of this process runs the execution: a live holder.
		p.leaseConflict(ctx, t, p.self)
		return
	}
	defer p.endRun(env.ExecutionID)
	lease, err := p.acquire(ctx, t, ts)
	if err != nil {
		var held *store.LeaseHeldError
		if errors.As(err, &held) {
			p.leaseConflict(ctx, t, held.Holder)
			return
		}
		p.settleErr(ctx, t, err)
		return
	}
	t.lease = lease
	defer func() {
		t.lease = nil
		octx, cancel := opCtx(ctx)
		defer cancel()
		if err := lease.Release(octx); err != nil && !errors.Is(err, store.ErrLeaseLost) {
			t.log.Warn().Err(err).Str("event", "worker.lease_release_failed").Msg("lease not released (it expires, or this instance takes it over on the next delivery)")
		}
	}()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if cfg == nil || !config.DisableLeaseWatchdog.In(cfg) {
		lost := lease.Watch(runCtx)
		go func() {
			for err := range lost {
				cancel(err)
			}
		}()
	}
	if cfg == nil || !config.DisableCancelInterrupt.In(cfg) {
		go p.cancelListener(runCtx, cancel, ts, env.ExecutionID)
	}
	// A run that moves any node forward clears the execution's deterministic-failure count.
	var progressed atomic.Bool
	hook := observe(p.d.Observer)
	ex := &engine.Executor{
		Store: lease.Storage(), Cancel: ts, Clock: p.d.Clock, Log: p.log,
		OnEvent: func(ev engine.Event) {
			if ev.Entry.Event == "step" {
				progressed.Store(true)
			}
			if hook != nil {
				hook(ev)
			}
		},
		Settings: func() engine.Settings { return p.d.Engine },
	}
	p.dispatched.Inc()
	var input, data any
	raw, dst := env.Input, &input
	if env.Kind != queue.KindStart {
		raw, dst = env.ResumeData, &data
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, dst); err != nil {
			p.deadLetter(ctx, t, queue.ReasonMalformed)
			return
		}
	}
	rt := env.ResumeType
	if env.Kind != queue.KindStart && rt == engine.ResumeRetry {
		var refused bool
		if rt, refused = p.retryBudget(ctx, t, ts); refused {
			return
		}
	}
	st, err := func() (st *state.Execution, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = &panicError{value: r, stack: debug.Stack()}
			}
		}()
		if env.Kind == queue.KindStart {
			return ex.Start(runCtx, f, engine.StartRequest{ExecutionID: env.ExecutionID, TenantID: ts.Tenant(),
				FlowVersion: env.FlowVersion, Input: input})
		}
		// The carrier's identity: a copy (requeue, replay) keeps its source's.
		key := cmp.Or(env.SourceMessageID, t.dl.ID)
		return ex.ResumeWith(runCtx, f, engine.ResumeRequest{ExecutionID: env.ExecutionID, Type: rt, Data: data, Key: key})
	}()
	var pe *panicError
	if errors.As(err, &pe) {
		p.deterministicFailure(ctx, t, ts, lease, pe)
		return
	}
	if cause := context.Cause(runCtx); err != nil && errors.Is(cause, store.ErrLeaseLost) {
		err = cause
	} else if err != nil && errors.Is(cause, errCancelInterrupt) && ctx.Err() == nil {
		// The cancel flag interrupted a step: settle the execution as cancelled from its last
		// checkpoint, still under our lease.
		t.log.Info().Str("event", "worker.cancel_interrupt").Msg("cancel flag set during a step: cancelling the execution")
		st, err = ex.Resume(ctx, f, env.ExecutionID, engine.ResumeCancel, nil)
		if errors.Is(err, engine.ErrInvalidResume) && st != nil && st.Status.Terminal() {
			err = nil // it ended meanwhile
		}
	}
	if err != nil {
		p.settleErr(ctx, t, err)
		return
	}
	p.countFailures(ctx, t, ts, st, progressed.Load())
	switch {
	case st == nil:
		p.transient(ctx, t, errors.New("the executor returned no state"))
	case st.Status.Terminal():
		t.log.Info().Str("event", "worker.task_done").Str("status", string(st.Status)).Msg("execution settled")
		p.ack(ctx, t)
	case st.Status == state.Suspended:
		octx, cancel := opCtx(ctx)
		defer cancel()
		if err := RegisterWakeup(octx, p.d.Client, cfg, p.root, st); err != nil {
			p.transient(ctx, t, fmt.Errorf("%w: %w", store.ErrRedis, err))
			return
		}
		t.log.Info().Str("event", "worker.task_suspended").Str("suspend", st.Suspend.Kind).Str("node", st.Suspend.Node).Msg("execution suspended; wake-up registered")
		p.ack(ctx, t)
	default:
		p.transient(ctx, t, fmt.Errorf("the run stopped with the execution %s", st.Status))
	}
}

// leaseConflict handles a delivery whose execution lease another holder has. Every delivery it
// leaves pending waits for the lease without spending a delivery (queue.LeavePending): while
// the lease lives, the budget is not the message's to lose.
func (p *Dispatcher) leaseConflict(ctx context.Context, t *task, holder string) {
	p.conflicts.Inc()
	p.d.Queue.IncLeaseConflicts()
	env := t.env
	ev := t.log.Info().Str("event", "worker.lease_conflict").Str("holder", holder)
	if p.d.Config != nil && config.DisableHolderLiveness.In(p.d.Config) {
		ev.Msg("lease held by another worker: acked (PLAITA_DISABLE_HOLDER_LIVENESS=1)")
		p.noops.Inc()
		p.ack(ctx, t)
		return
	}
	alive := true
	if p.d.Registry != nil && holder != "" {
		octx, cancel := opCtx(ctx)
		ok, err := p.d.Registry.Alive(octx, holder)
		cancel()
		if err == nil {
			alive = ok
		} else {
			ev = ev.AnErr("liveness_error", err) // unknown: treat as alive
		}
	}
	if !alive {
		ev.Msg("lease held by a dead worker: left pending until its lease expires and a redelivery takes over")
		p.leavePending(ctx, t)
		return
	}
	noop := env.Kind == queue.KindStart ||
		env.ResumeType == engine.ResumeContinue || env.ResumeType == engine.ResumeRetry
	// A redelivery (count > 1) may be the very message the holder was running, reclaimed
	// after the holder died (kill -9): its registry record stays fresh for up to
	// RegistryTTLFactor heartbeats, far longer than the lease. Acking it then would drop the
	// execution's only carrier and strand it in running. Leave it pending instead: a live
	// holder acks it when it finishes (XACK is per group), a dead one's lease expires and a
	// later reclaim takes over.
	if noop && (t.dl.Reclaimed || t.dl.Count > 1) {
		ev.Msg("lease held by a worker that looks alive, on a redelivery: left pending (the holder acks it, or its lease expires)")
		p.leavePending(ctx, t)
		return
	}
	if noop {
		ev.Msg("lease held by a live worker that is running the execution: acked as a no-op")
		p.noops.Inc()
		p.ack(ctx, t)
		return
	}
	ev.Msg("lease held by a live worker: left pending for redelivery (the resume carries data)")
	p.leavePending(ctx, t)
}

// leavePending leaves the delivery pending with its delivery counter restored.
func (p *Dispatcher) leavePending(ctx context.Context, t *task) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	if err := p.d.Queue.LeavePending(octx, t.dl); err != nil {
		t.log.Warn().Err(err).Str("event", "worker.leave_pending_failed").Msg("could not restore the delivery count; this delivery counts")
	}
}

// claimRun marks an execution as run by this process; false when a consumer already does.
func (p *Dispatcher) claimRun(id string) bool {
	p.runsMu.Lock()
	defer p.runsMu.Unlock()
	if _, ok := p.runs[id]; ok {
		return false
	}
	p.runs[id] = struct{}{}
	return true
}

func (p *Dispatcher) endRun(id string) {
	p.runsMu.Lock()
	delete(p.runs, id)
	p.runsMu.Unlock()
}

// acquire takes the execution lease for a task whose execution this process claimed
// (claimRun). A lease this instance holds is then a leftover — a release that failed while
// Redis was away, or an earlier process under the same PLAITA_INSTANCE_ID — and is taken over
// at once rather than waited out as if a live holder ran it.
func (p *Dispatcher) acquire(ctx context.Context, t *task, ts *store.TenantStore) (*store.Lease, error) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	lease, err := ts.AcquireOwn(octx, t.env.ExecutionID, p.self)
	if err == nil && lease.TookOver() {
		t.log.Warn().Str("event", "worker.stale_own_lease").Int64("generation", lease.Generation()).
			Msg("this instance held a leftover lease of an execution it does not run: taken over (the fence generation moved on)")
	}
	return lease, err
}

// ErrTypeDeliveriesExhausted is the error type of an execution whose task message used up
// PLAITA_MAX_DELIVERIES without settling: it is ended in error before the message is
// dead-lettered, so it never stays running with its only carrier in the dead-letter stream.
const ErrTypeDeliveriesExhausted = "DeliveriesExhausted"

// exhausted dead-letters a delivery that used up PLAITA_MAX_DELIVERIES. Its execution, when
// it exists and is not settled (running or pending), is first ended in error under its lease
// (a retry can take it up again once the cause is fixed). While another holder's lease on the
// execution lives, the message is not dead-lettered: it waits for the lease without spending a
// delivery. A suspended execution stays suspended (its wake-up is still recorded).
func (p *Dispatcher) exhausted(ctx context.Context, t *task) {
	reason := queue.ReasonMaxDeliveries(p.d.Queue.MaxDeliveries())
	env := t.env
	ts := t.ts
	if ts == nil && env.ExecutionID != "" && p.d.Store != nil {
		ts, _ = p.d.Store.Tenant(env.Tenant())
	}
	if ts == nil || env.ExecutionID == "" {
		p.deadLetter(ctx, t, reason)
		return
	}
	lease := t.lease
	if lease == nil {
		if !p.claimRun(env.ExecutionID) {
			t.log.Info().Str("event", "worker.exhausted_wait").Msg("deliveries used up, but this instance runs the execution: left pending")
			p.leavePending(ctx, t)
			return
		}
		defer p.endRun(env.ExecutionID)
		var err error
		if lease, err = p.acquire(ctx, t, ts); err != nil {
			var held *store.LeaseHeldError
			if errors.As(err, &held) {
				t.log.Info().Str("event", "worker.exhausted_wait").Str("holder", held.Holder).
					Msg("deliveries used up while another holder's lease lives: left pending until it ends")
				p.leavePending(ctx, t)
				return
			}
			t.log.Warn().Err(err).Str("event", "worker.dead_letter_failed").Msg("deliveries used up; the lease cannot be read: left pending")
			return
		}
		defer func() {
			octx, cancel := opCtx(ctx)
			defer cancel()
			_ = lease.Release(octx) // best effort: it expires otherwise
		}()
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	st, err := ts.Load(octx, env.ExecutionID)
	switch {
	case err == nil && (st.Status == state.Running || st.Status == state.Pending):
		msg := fmt.Sprintf("its task message was delivered %d times without settling (PLAITA_MAX_DELIVERIES=%d) and was dead-lettered; "+
			"after fixing the cause, resume it with --type retry", t.dl.Count, p.d.Queue.MaxDeliveries())
		if t.dl.Err != nil {
			msg += "; last error: " + t.dl.Err.Error()
		}
		if err := p.endInError(octx, lease, st, ErrTypeDeliveriesExhausted, msg, false); err != nil {
			t.log.Warn().Err(err).Str("event", "worker.dead_letter_failed").Msg("deliveries used up; the execution could not be ended in error: left pending")
			return
		}
		t.log.Error().Str("event", "worker.deliveries_exhausted").Msg("execution ended in error: its task used up its deliveries")
	case err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrStateCorrupt):
		t.log.Warn().Err(err).Str("event", "worker.dead_letter_failed").Msg("deliveries used up; the state cannot be read: left pending")
		return
	}
	p.deadLetter(ctx, t, reason)
}

// cancelListener polls the execution's cancel flag while it runs and interrupts the run (its
// context) when the flag is set.
func (p *Dispatcher) cancelListener(ctx context.Context, cancel context.CancelCauseFunc, ts *store.TenantStore, id string) {
	tick := time.NewTicker(p.d.CancelPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		octx, ocancel := context.WithTimeout(ctx, max(p.d.CancelPoll, time.Second))
		set, err := ts.Cancelled(octx, id)
		ocancel()
		if err == nil && set {
			cancel(errCancelInterrupt)
			return
		}
	}
}

// deterministicFailure handles a run that panicked. The crash is counted in the execution's
// nofail counter; below DeterministicFailureMax it is a transient failure (not acked: the
// redelivery resumes from the checkpoint, and the last allowed delivery is dead-lettered);
// at the bound the execution is ended in error under our lease and the task acked.
func (p *Dispatcher) deterministicFailure(ctx context.Context, t *task, ts *store.TenantStore, lease *store.Lease, pe *panicError) {
	id := t.env.ExecutionID
	t.log.Error().Str("event", "worker.run_panic").Str("panic", fmt.Sprint(pe.value)).Bytes("stack", pe.stack).Msg("the run panicked")
	octx, cancel := opCtx(ctx)
	defer cancel()
	n, err := ts.Incr(octx, keys.FamNoFail, id)
	if err != nil || n < int64(p.d.DeterministicFailureMax) {
		p.transient(ctx, t, pe)
		return
	}
	st, err := ts.Load(octx, id)
	if err != nil {
		p.transient(ctx, t, fmt.Errorf("%w; and loading the state to end it failed: %w", pe, err))
		return
	}
	if !st.Status.Terminal() {
		msg := fmt.Sprintf("%d runs of this execution crashed (limit %d); last: %v", n, p.d.DeterministicFailureMax, pe.value)
		if err := p.endInError(octx, lease, st, ErrTypeDeterministicFailure, msg, true); err != nil {
			p.settleErr(ctx, t, err)
			return
		}
	}
	t.log.Error().Str("event", "worker.deterministic_failure").Int64("crashes", n).Msg("execution ended in error: its runs keep crashing")
	p.ack(ctx, t)
}

// endInError ends a non-terminal execution in error (permanent) through the lease's fenced
// storage, for failures the executor did not see.
func (p *Dispatcher) endInError(ctx context.Context, lease *store.Lease, st *state.Execution, typ, msg string, permanent bool) error {
	now := p.d.Clock.Now().UTC()
	st.Status, st.Suspend, st.EndTime, st.LastUpdate = state.Error, nil, &now, now
	st.Error = &state.ErrorInfo{Type: typ, Node: st.CurrentNode, Permanent: permanent, Message: msg}
	st.Timeline = append(st.Timeline, state.TimelineEntry{Seq: st.TimelineDropped + len(st.Timeline) + 1,
		Time: state.Stamp(now), Event: string(state.Error), Node: st.CurrentNode, Detail: typ + ": " + msg})
	return lease.Storage().Save(ctx, st)
}

// refuseStart handles an admission refusal of a start whose execution state already exists
// (a redelivered start): the execution is ended in error and the task acked. It reports
// false when there is no such state (or it cannot be settled now): the caller dead-letters.
func (p *Dispatcher) refuseStart(ctx context.Context, t *task, dec Decision) bool {
	env := t.env
	ts, err := p.d.Store.Tenant(env.Tenant())
	if err != nil {
		return false
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	st, err := ts.Load(octx, env.ExecutionID)
	if err != nil {
		return false
	}
	if !st.Status.Terminal() {
		if !p.claimRun(env.ExecutionID) {
			return false
		}
		defer p.endRun(env.ExecutionID)
		t.ts = ts
		lease, err := p.acquire(ctx, t, ts)
		if err != nil {
			return false
		}
		defer func() { _ = lease.Release(octx) }() // best effort; it expires otherwise
		if st, err = ts.Load(octx, env.ExecutionID); err != nil {
			return false
		}
		if !st.Status.Terminal() {
			if err := p.endInError(octx, lease, st, ErrTypeAdmissionRefused, dec.Rule+": "+dec.Reason, true); err != nil {
				t.log.Warn().Err(err).Str("event", "worker.refuse_failed").Msg("could not end the refused execution in error")
				return false
			}
		}
	}
	t.log.Warn().Str("event", "worker.start_refused").Str("rule", dec.Rule).Str("reason", dec.Reason).
		Msg("start refused by an admission gate; its execution exists: ended in error (if it was not terminal) and acked")
	p.ack(ctx, t)
	return true
}

// observe is the engine hook of an optional observer.
func observe(o *Observer) func(engine.Event) {
	if o == nil {
		return nil
	}
	return o.Event
}

// G1MaxWakeups is G1_MAX_WAKEUPS: how often one execution in error may be woken by a retry
// (manual and automatic retries share it). A retry resets the node retry budget; without this
// cap "wake → spend the budget → error → wake" loops forever.
const G1MaxWakeups = 2

// retryBudget applies the runbook's two retry gates (only to an execution in error; a retry of
// a running execution is a continue from its checkpoint and always goes through). It returns
// the resume type to run, or refused = true when the task was acked with the state kept.
func (p *Dispatcher) retryBudget(ctx context.Context, t *task, ts *store.TenantStore) (engine.ResumeType, bool) {
	id := t.env.ExecutionID
	octx, cancel := opCtx(ctx)
	defer cancel()
	st, err := ts.Load(octx, id)
	if err != nil {
		return engine.ResumeRetry, false // the executor reports it
	}
	if st.Status == state.Running {
		return engine.ResumeContinue, false
	}
	if st.Status != state.Error {
		return engine.ResumeRetry, false
	}
	wakeups, err1 := ts.Counter(octx, keys.FamG1Wakeups, id)
	nofail, err2 := ts.Counter(octx, keys.FamNoFail, id)
	if err := errors.Join(err1, err2); err != nil {
		p.transient(ctx, t, err)
		return "", true
	}
	refuse := func(msg string) (engine.ResumeType, bool) {
		t.log.Warn().Str("event", "worker.retry_refused").Int64("g1wakeups", wakeups).Int64("nofail", nofail).Msg(msg)
		p.noops.Inc()
		p.ack(ctx, t)
		return "", true
	}
	switch {
	case wakeups >= G1MaxWakeups:
		return refuse(fmt.Sprintf("retry wake-ups of this execution reached the limit (%d/%d): the error state is kept; "+
			"after fixing the cause, delete its g1wakeups counter and retry", wakeups, G1MaxWakeups))
	case nofail >= int64(p.d.DeterministicFailureMax):
		return refuse(fmt.Sprintf("this execution failed deterministically %d times in a row (limit %d): the error state is kept; "+
			"after fixing the cause, delete its nofail counter and retry", nofail, p.d.DeterministicFailureMax))
	}
	if _, err := ts.Incr(octx, keys.FamG1Wakeups, id); err != nil {
		p.transient(ctx, t, err)
		return "", true
	}
	return engine.ResumeRetry, false
}

// countFailures keeps the deterministic-failure count: any node moving forward clears it, a run
// that ends in a node failure or a deadline adds one.
func (p *Dispatcher) countFailures(ctx context.Context, t *task, ts *store.TenantStore, st *state.Execution, progressed bool) {
	if st == nil {
		return
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	id := t.env.ExecutionID
	var err error
	if progressed {
		err = ts.ResetCounter(octx, keys.FamNoFail, id)
	}
	if st.Status == state.Error && st.Error != nil && (st.Error.Type == engine.ErrTypeNode || st.Error.Type == engine.ErrTypeDeadline) {
		_, ierr := ts.Incr(octx, keys.FamNoFail, id)
		err = errors.Join(err, ierr)
	}
	if err != nil {
		t.log.Warn().Err(err).Str("event", "worker.nofail_update_failed").Msg("could not update the deterministic-failure counter")
	}
}
