package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/internal/alert"
	"plaita/internal/callctx"
	"plaita/internal/presence"
	"plaita/internal/tick"
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
	Root  string // key root ("" = keys.DefaultRoot)
	Queue *queue.Queue
	Store *store.Redis
	// Definitions are the published flow definitions (required); Flows parses them (nil = a
	// cache over Nodes; nil Nodes = control nodes only).
	Definitions *store.Flows
	// Wakeups records what wakes a suspended execution (required when flows suspend).
	Wakeups *Wakeups
	Flows   *engine.FlowCache
	Nodes   *engine.Registry
	// Engine are the executor's settings (zero value: engine.DefaultSettings()).
	Engine engine.Settings
	// Credentials opens the tenants' credentials for the nodes that send them (nil: a node that
	// asks for one fails, naming why).
	Credentials engine.CredentialResolver

	// Registry answers liveness of lease holders and takes the active-task count; nil = every
	// other holder is treated as alive.
	Registry *presence.Registry

	// Admission gates, in loop order; nil = skipped.
	DenyRepos    *RepoDeny
	Target       *Target
	TenantStatus *TenantStatus
	Affinity     *Affinity
	Quota        *Quota

	Disk     *DiskGuard     // nil = always allow
	Alerter  *alert.Alerter // nil ok; set as Queue.OnDeadLetter when that is unset
	Observer *Observer      // nil = no step metrics and no live events

	Log     zerolog.Logger
	Metrics *metrics.Set
	Clock   engine.Clock
	// Settings are the dispatcher's knobs (InstanceID is required: the lease holder).
	Settings Settings

	// ReadBlock is the XREADGROUP block time (default 1s). The reader makes a round a reclaim
	// pass when the last read was empty, or ReclaimInterval (default 1s) after the last pass:
	// under load a reclaim per few reads would put an XPENDING round trip in front of every
	// few batches, for entries that turn reclaimable only after PLAITA_CLAIM_MIN_IDLE_MS.
	ReadBlock       time.Duration
	ReclaimInterval time.Duration
	// CancelPoll is how often a running execution's cancel flag is read (the in-step cancel
	// listener, off with PLAITA_DISABLE_CANCEL_INTERRUPT=1); default 1s.
	CancelPoll time.Duration
	// DeterministicFailureMax is DETERMINISTIC_FAILURE_MAX (default 12): the execution's
	// consecutive deterministic failures — runs ending in a node error or a deadline, and
	// crashed (panicked) runs — counted in its nofail counter and cleared when any node moves
	// forward. At the limit a retry wake-up is refused and a crashing run ends in error.
	DeterministicFailureMax int
}

// DefaultDeterministicFailureMax is DETERMINISTIC_FAILURE_MAX (store.DeterministicFailureMax):
// the runs of one execution that may crash (panic) or fail in a row.
const DefaultDeterministicFailureMax = store.DeterministicFailureMax

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
// dead-letter flow_not_found; unparsable: invalid_flow; a cancel resume goes on without it; a
// stale delay-queue wake-up is acked instead, stale.go) →
// Affinity → Quota → tombstone check (deleted: ack, no-op) → lease (held: see leaseConflict;
// a leftover lease of this instance for an execution it does not run is taken over) → run.
//
// A delivery that waits for another holder's lease is left pending with its delivery count
// restored: waiting spends no delivery. A delivery past PLAITA_MAX_DELIVERIES ends its
// running execution in error (DeliveriesExhausted, retryable) before it is dead-lettered.
//
// Each delivery is decided (deliver.go: gates, flow, quota; run.go: lease and engine) into one
// Outcome (outcome.go, pure and table-tested) and carried out in one place (settle.go):
//
//	terminal                          ack
//	suspended                         wake-up recorded, then ack (recording failed: retry; no
//	                                  record can hold it: the execution ends in error
//	                                  (WakeupNotRegistered), ack — wakeup.go)
//	ErrInvalidResume / ErrEventMismatch / *FlowHashError
//	                                  ack as a no-op with a WARNING (state untouched)
//	store.ErrLeaseLost (write or watchdog)
//	                                  stop, write nothing more, leave pending (not acked)
//	cancel flag set mid-step          Resume(cancel) from the checkpoint, ack
//	transient / context (drain)       retry: not acked; the last allowed delivery is exhausted
//	                                  instead: its running execution ends in error, then the
//	                                  message is dead-lettered (max_deliveries=N)
//	panic                             nofail counter; at DeterministicFailureMax the execution
//	                                  ends in error (DeterministicFailure) and is acked, else
//	                                  retry
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

	// The reader's bookkeeping: deliveries read and not yet finished, a signal per finished
	// one, and the moving average of run times (ns) that decides read-ahead.
	taken    atomic.Int64
	finished chan struct{}
	runEWMA  atomic.Int64

	// runs are the executions a consumer of this process holds (or is taking) the lease of: a
	// lease of this instance for any other execution is a leftover of an earlier life.
	runsMu sync.Mutex
	runs   map[string]struct{}

	defs ttlCache[flowKey, *engine.Flow] // parsed published definitions (immutable per version)
	acks *acker                          // batched XACK + XDEL of settled deliveries

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
	if d.ReclaimInterval <= 0 {
		d.ReclaimInterval = time.Second
	}
	if d.DeterministicFailureMax < 1 {
		d.DeterministicFailureMax = DefaultDeterministicFailureMax
	}
	if d.CancelPoll <= 0 {
		d.CancelPoll = time.Second
	}
	n, self := d.Settings.Concurrency, d.Settings.InstanceID
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
	p := &Dispatcher{
		d: d, log: d.Log.With().Str("component", "dispatch").Logger(), flows: flows, root: root, self: self, n: max(n, 1),
		runs:       map[string]struct{}{},
		finished:   make(chan struct{}, 1),
		dispatched: set.GetOrCreateCounter(`plaita_dispatch_runs_total`),
		acked:      set.GetOrCreateCounter(`plaita_dispatch_acked_total`),
		conflicts:  set.GetOrCreateCounter(`plaita_dispatch_lease_conflicts_total`),
		noops:      set.GetOrCreateCounter(`plaita_dispatch_noop_acks_total`),
		failed:     set.GetOrCreateCounter(`plaita_dispatch_failed_total`),
	}
	p.runEWMA.Store(int64(2 * ReadAheadMaxRun)) // no read-ahead until runs are seen to be short
	return p
}

// Active is the number of tasks being handled now.
func (p *Dispatcher) Active() int { return int(p.active.Load()) }

// Acked is the number of deliveries this dispatcher has acknowledged (its
// plaita_dispatch_acked_total counter): what a benchmark waits on without asking Redis.
func (p *Dispatcher) Acked() uint64 { return p.acked.Get() }

// Start launches the consumer goroutines and returns at once (a service: see
// internal/service). A second call is a no-op; a call after Stop does nothing.
func (p *Dispatcher) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.stopped {
		return nil
	}
	p.started = true
	// Only Stop ends the reader: ctx is the role's bounded start-up context.
	readCtx, readStop := context.WithCancel(context.WithoutCancel(ctx))
	runCtx, runStop := context.WithCancel(context.WithoutCancel(ctx))
	p.readStop, p.runStop = readStop, runStop
	p.done = make(chan struct{})
	// One reader takes as many deliveries as there are free runners (and, while runs are
	// short, as many again to read ahead) in one XREADGROUP (a read per execution would be a
	// Redis call per execution); the runners handle them.
	work := make(chan queue.Delivery)
	consumer := p.d.Queue.Consumer()
	p.acks = newAcker(p.d.Queue, p.log, func(n int) { p.acked.Add(n) })
	go p.acks.run()
	var wg sync.WaitGroup
	for range p.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for dl := range work {
				began := time.Now()
				p.handle(runCtx, consumer, dl)
				p.ran(time.Since(began))
			}
		}()
	}
	go func() {
		defer close(work)
		p.read(readCtx, consumer, work)
	}()
	go func() {
		wg.Wait()
		p.acks.close() // the runners' last acks go out before Stop returns
		close(p.done)
	}()
	return nil
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

// read is the reader. It keeps up to n deliveries taken (read and not yet finished) — 2n
// while runs are short, see readAhead — reading what is missing in one XREADGROUP (or
// reclaim pass) and handing the deliveries to the runners. Reading ahead takes the read's
// round trip off the path between one execution and the next: a runner that finishes finds
// the next delivery waiting. When reading stops (a drain) the deliveries already taken are
// still handed out and run; what a read in flight then returns is neither run nor acked
// (it stays pending and is reclaimed).
func (p *Dispatcher) read(ctx context.Context, consumer string, work chan<- queue.Delivery) {
	idle, reclaimed := false, time.Time{}
	for {
		limit := p.n
		if p.readAhead() {
			limit *= 2
		}
		k := limit - int(p.taken.Load())
		if k <= 0 {
			select {
			case <-ctx.Done():
				return
			case <-p.finished:
			}
			continue
		}
		reclaim := idle || time.Since(reclaimed) >= p.d.ReclaimInterval
		if reclaim {
			reclaimed = time.Now()
		}
		ds, ok := p.next(ctx, consumer, k, reclaim)
		if !ok || p.stopping.Load() || ctx.Err() != nil {
			return
		}
		idle = len(ds) == 0
		p.taken.Add(int64(len(ds)))
		for i := range ds {
			p.handOut(consumer, work, ds[i:]) // during a drain too: a taken delivery is run
		}
	}
}

// handOut gives held[0] to a runner. While it waits (every runner busy) it refreshes the
// pending entries of everything it holds every third of PLAITA_CLAIM_MIN_IDLE_MS, as a
// runner does for its own: a delivery read ahead is never reclaimed by a sibling for having
// waited here.
func (p *Dispatcher) handOut(consumer string, work chan<- queue.Delivery, held []queue.Delivery) {
	select {
	case work <- held[0]:
		return
	default:
	}
	t := time.NewTicker(p.touchEvery())
	defer t.Stop()
	for {
		select {
		case work <- held[0]:
			return
		case <-t.C:
			ids := make([]string, len(held))
			for i, dl := range held {
				ids[i] = dl.ID
			}
			ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
			if err := p.d.Queue.Touch(ctx, consumer, ids...); err != nil {
				p.log.Debug().Err(err).Int("held", len(ids)).Msg("could not refresh the pending entries read ahead")
			}
			cancel()
		}
	}
}

// ran records a finished delivery: it frees its place for the reader and feeds the average
// run time readAhead looks at.
func (p *Dispatcher) ran(d time.Duration) {
	p.taken.Add(-1)
	for {
		old := p.runEWMA.Load()
		next := old + (int64(d)-old)/8
		if p.runEWMA.CompareAndSwap(old, next) {
			break
		}
	}
	select {
	case p.finished <- struct{}{}:
	default:
	}
}

// ReadAheadMaxRun is the average run time under which the reader reads ahead. A delivery
// read ahead waits for a runner, and its pending entry is not refreshed until a runner takes
// it: with runs this short it waits milliseconds, far from PLAITA_CLAIM_MIN_IDLE_MS. Longer
// runs gain nothing from it (the read is a small part of them) and are read only for free
// runners.
const ReadAheadMaxRun = 50 * time.Millisecond

func (p *Dispatcher) readAhead() bool { return time.Duration(p.runEWMA.Load()) < ReadAheadMaxRun }

// next reclaims (when reclaim) or reads up to k deliveries; ok is false when reading stops.
func (p *Dispatcher) next(ctx context.Context, consumer string, k int, reclaim bool) ([]queue.Delivery, bool) {
	q := p.d.Queue
	if ctx.Err() != nil || p.stopping.Load() {
		return nil, false
	}
	if p.d.Disk != nil && !p.d.Disk.Allow() {
		p.sleep(ctx, time.Second) // no XREADGROUP, no XCLAIM this round
		return nil, true
	}
	var ds []queue.Delivery
	var err error
	if reclaim {
		octx, cancel := callctx.Within(ctx, callctx.RedisOp)
		ds, err = q.Reclaim(octx, consumer, k)
		cancel()
		if err != nil && ctx.Err() == nil {
			p.readFailed(ctx, "reclaim", err)
		}
	}
	if len(ds) == 0 && ctx.Err() == nil {
		octx, cancel := callctx.Within(ctx, p.d.ReadBlock+callctx.BlockingSlack)
		ds, err = q.Read(octx, consumer, k, p.d.ReadBlock)
		cancel()
		if err != nil && ctx.Err() == nil {
			p.readFailed(ctx, "read", err)
			return nil, true
		}
	}
	return ds, true
}

func (p *Dispatcher) readFailed(ctx context.Context, op string, err error) {
	if errors.Is(err, queue.ErrNoGroup) {
		octx, cancel := callctx.Within(ctx, callctx.RedisOp)
		gerr := p.d.Queue.EnsureGroup(octx)
		cancel()
		if gerr == nil {
			return
		}
	}
	p.log.Warn().Err(err).Str("event", "worker.read_failed").Str("op", op).Msg("queue read failed; retrying")
	p.sleep(ctx, 500*time.Millisecond)
}

// settleCtx bounds one settling Redis call (the ack, the end of a run, the reads a gate's
// outcome needs) by settleTimeout; it outlives the run's cancellation so a finished run is
// still settled during a drain (callctx.Detached).
func settleCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return callctx.Detached(ctx, settleTimeout)
}

// settleTimeout bounds one settling Redis call.
const settleTimeout = 10 * time.Second

func (p *Dispatcher) setActive(delta int64) {
	n := p.active.Add(delta)
	if p.d.Registry != nil {
		p.d.Registry.SetActive(int(n))
	}
}

// task is one delivery being handled.
type task struct {
	dl     queue.Delivery
	env    queue.Envelope
	log    zerolog.Logger
	ts     *store.TenantStore
	lease  *store.Lease // held while the task runs its execution
	nofail int64        // the execution's deterministic-failure count when the run began
}

// touchEvery is how often a held pending entry is refreshed: a third of
// PLAITA_CLAIM_MIN_IDLE_MS.
func (p *Dispatcher) touchEvery() time.Duration {
	every := p.d.Settings.ClaimMinIdle / 3
	if every <= 0 {
		every = 20 * time.Second // the 60 s default's third
	}
	return max(every, 50*time.Millisecond)
}

// keepClaimed refreshes the pending entry's idle time while its task runs (every third of
// PLAITA_CLAIM_MIN_IDLE_MS), so a sibling never reclaims a message whose long step is still
// running here and burns its deliveries. A crashed worker stops touching, and its messages
// become reclaimable after the idle time as before. The returned function stops it.
func (p *Dispatcher) keepClaimed(ctx context.Context, consumer, id string) func() {
	l := tick.Every(ctx, p.touchEvery(), func(ctx context.Context) bool {
		octx, cancel := settleCtx(ctx)
		defer cancel()
		if err := p.d.Queue.Touch(octx, consumer, id); err != nil && ctx.Err() == nil {
			p.log.Debug().Err(err).Str("message_id", id).Msg("could not refresh the pending entry")
		}
		return true
	})
	return l.Close
}
