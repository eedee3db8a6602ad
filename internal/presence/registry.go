package presence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/service"
	"plaita/store"
)

// Registry is this instance's presence in Redis: one key with a TTL holding its record,
// refreshed by a heartbeat, plus membership in the instances set. Status changes are written
// at once. Stop deregisters and closes a gate: no heartbeat or status write that comes after
// (or races) Stop can recreate the key.
//
// Set Interval and Now before Start.
type Registry struct {
	// Interval is the heartbeat period (DefaultHeartbeatInterval when zero); the key's TTL is
	// TTLFactor × Interval.
	Interval time.Duration
	// Now is the clock written into heartbeat_at and used by Alive and Instances.
	Now func() time.Time

	st    *store.Registry
	info  InstanceInfo
	event string // log event prefix: the role
	log   zerolog.Logger
	m     gauges

	// loop is the heartbeat. Its context ends only at Stop: a heartbeat tied to the context
	// Start was given (a role's start-up deadline) once stopped 30 s after start, and a
	// healthy instance looked dead to every liveness check one TTL later.
	loop service.Loop

	// gate serializes every write and Stop's deregistration (a channel so that waiting on it
	// honours a context); closed is set before Stop takes it.
	gate    chan struct{}
	closed  atomic.Bool
	failing atomic.Bool  // the last heartbeat failed (logged once per outage)
	writes  atomic.Int64 // writes that reached Redis: tests wait on it

	mu       sync.Mutex
	started  bool
	status   string
	nActive  atomic.Int64
	stopOnce sync.Once
}

type gauges struct {
	heartbeatTS, draining, active, registered *metrics.Gauge
	failures                                  *metrics.Counter
}

// New builds the registry presence of one instance on st and registers its metrics on set,
// named after the role: plaita_<role>_heartbeat_timestamp_seconds, _draining, _active_tasks,
// _registered and _heartbeat_failures_total.
func New(st *store.Registry, info InstanceInfo, log zerolog.Logger, set *metrics.Set) *Registry {
	p := "plaita_" + roleName(info.Role) + "_"
	return &Registry{
		Interval: DefaultHeartbeatInterval,
		Now:      time.Now,
		st:       st,
		info:     info,
		event:    roleName(info.Role),
		log:      log.With().Str("instance", info.InstanceID).Logger(),
		status:   StatusRunning,
		m: gauges{
			heartbeatTS: set.GetOrCreateGauge(p+"heartbeat_timestamp_seconds", nil),
			draining:    set.GetOrCreateGauge(p+"draining", nil),
			active:      set.GetOrCreateGauge(p+"active_tasks", nil),
			registered:  set.GetOrCreateGauge(p+"registered", nil),
			failures:    set.GetOrCreateCounter(p + "heartbeat_failures_total"),
		},
		gate: make(chan struct{}, 1),
	}
}

// Key is this instance's registry key.
func (r *Registry) Key() string { return r.st.Key(r.info.InstanceID) }

func (r *Registry) interval() time.Duration {
	if r.Interval > 0 {
		return r.Interval
	}
	return DefaultHeartbeatInterval
}

func (r *Registry) ttl() time.Duration { return TTLFactor * r.interval() }

// store bounds every Redis round trip by one interval, at least 1s, at most 5s: a heartbeat
// that hangs must not delay the next one, nor Stop, for long.
func (r *Registry) store() *store.Registry {
	return r.st.WithTimeout(min(max(r.interval(), time.Second), 5*time.Second))
}

// Start registers the instance at once (status running unless SetStatus moved it before) and
// then refreshes the key every Interval until Stop. ctx bounds only the first write. A failing
// first write is returned and no heartbeat runs; Stop is still safe (and deletes whatever the
// failed write may have left).
func (r *Registry) Start(ctx context.Context) error {
	r.mu.Lock()
	switch {
	case r.closed.Load():
		r.mu.Unlock()
		return ErrClosed
	case r.started:
		r.mu.Unlock()
		return errors.New("presence: registry already started")
	}
	r.started = true
	r.mu.Unlock()
	if err := r.write(ctx, true); err != nil {
		return fmt.Errorf("presence: register %s: %w", r.info.InstanceID, err)
	}
	r.log.Info().Str("event", r.event+".registered").Str("key", r.Key()).Str("status", r.Status()).
		Dur("heartbeat_interval", r.interval()).Msg("instance registered")
	r.loop.Interval = r.interval()
	r.loop.Once = func(ctx context.Context) { _ = r.runOnce(ctx) }
	if err := r.loop.Start(ctx); err != nil {
		// Stop came in between; it deregisters after the write above (the gate orders them).
		return ErrClosed
	}
	return nil
}

// runOnce is one heartbeat: it rewrites the record (fresh heartbeat_at, current status and
// active tasks) and refreshes the TTL and the set membership.
func (r *Registry) runOnce(ctx context.Context) error {
	err := r.write(ctx, false)
	switch {
	case err == nil:
		if r.failing.CompareAndSwap(true, false) {
			r.log.Info().Str("event", r.event+".heartbeat_recovered").Msg("registry heartbeat works again")
		}
	case errors.Is(err, ErrClosed) || ctx.Err() != nil:
	default:
		r.m.failures.Inc()
		if r.failing.CompareAndSwap(false, true) {
			r.log.Warn().Str("event", r.event+".heartbeat_failed").Err(err).Dur("ttl", r.ttl()).
				Msg("registry heartbeat failed; the instance looks dead to others once its key expires")
		}
	}
	return err
}

// Status is the status this instance last set.
func (r *Registry) Status() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// SetStatus moves the instance to status (running → draining → stopping, never back) and
// writes it at once, not at the next heartbeat: a draining instance must stop looking like a
// dispatch target now. Before Start it only records the status (Start writes it); after Stop
// it writes nothing and returns ErrClosed.
func (r *Registry) SetStatus(ctx context.Context, status string) error {
	rank := statusRank(status)
	if rank == 0 {
		return fmt.Errorf("%w %q", ErrBadStatus, status)
	}
	if r.closed.Load() {
		return ErrClosed
	}
	r.mu.Lock()
	prev, started := r.status, r.started
	if rank < statusRank(prev) {
		r.mu.Unlock()
		return fmt.Errorf("%w: %s → %s goes backwards", ErrBadStatus, prev, status)
	}
	r.status = status
	r.mu.Unlock()
	r.m.draining.Set(b2f(status != StatusRunning))
	if !started {
		return nil
	}
	if err := r.write(ctx, false); err != nil {
		return fmt.Errorf("presence: write status %s: %w", status, err)
	}
	if prev != status {
		r.log.Info().Str("event", r.event+".registry_status").Str("from", prev).Str("status", status).Msg("registry status written")
	}
	return nil
}

// SetActive records the number of tasks in flight; it reaches Redis with the next write.
func (r *Registry) SetActive(n int) {
	r.nActive.Store(int64(n))
	r.m.active.Set(float64(n))
}

// Snapshot is the record the next write would send.
func (r *Registry) Snapshot() store.InstanceRecord {
	r.mu.Lock()
	status := r.status
	r.mu.Unlock()
	i := r.info
	return store.InstanceRecord{
		InstanceID: i.InstanceID, Status: status, Host: i.Host, PID: i.PID, Role: i.Role,
		Queue: i.Queue, Consumer: i.ConsumerName, Group: i.ConsumerGroup, DLQKey: i.DLQKey,
		ConfigFamily: i.Generations.Family, ConfigGeneration: i.Generations.Config, BudgetGeneration: i.Generations.Budget,
		ActiveTasks: int(r.nActive.Load()), Capacity: i.Capacity,
		HeartbeatAt: r.Now().UTC(), StartedAt: i.StartedAt.UTC(), TTLMillis: r.ttl().Milliseconds(), MetricsAddr: i.MetricsAddr,
	}
}

func (r *Registry) acquire(ctx context.Context) error {
	select {
	case r.gate <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("presence: waiting for the registry write in flight: %w", ctx.Err())
	}
}

func (r *Registry) release() { <-r.gate }

// write sends the record under the gate. register=false refreshes an existing key only, so a
// write that was already on the wire when Stop deleted the key cannot bring it back; when the
// key has expired meanwhile (a Redis outage longer than the TTL) the instance registers again
// — unless the gate closed.
func (r *Registry) write(ctx context.Context, register bool) error {
	if err := r.acquire(ctx); err != nil {
		return err
	}
	defer r.release()
	if r.closed.Load() {
		return ErrClosed
	}
	st, rec, ttl := r.store(), r.Snapshot(), r.ttl()
	again := false
	if !register {
		gone, err := st.Refresh(ctx, rec, ttl)
		if err != nil {
			return err
		}
		if gone && r.closed.Load() {
			return ErrClosed
		}
		register, again = gone, gone
	}
	if register {
		if err := st.Register(ctx, rec, ttl); err != nil {
			return err
		}
	}
	if again {
		r.log.Warn().Str("event", r.event+".reregistered").Str("key", r.Key()).
			Msg("registry key had expired (heartbeats failed for longer than its TTL): registered again")
	}
	r.m.heartbeatTS.Set(float64(rec.HeartbeatAt.UnixNano()) / 1e9)
	r.m.registered.Set(1)
	r.writes.Add(1)
	return nil
}

// Stop ends the heartbeat, then deregisters the instance (DEL of its key, SREM from the set)
// and closes the gate: every later heartbeat or status write is refused, and a write in
// flight finishes before the key is deleted. Safe to call twice or without Start. When ctx
// ends before the deregistration went through, the key expires by itself within its TTL.
func (r *Registry) Stop(ctx context.Context) {
	r.stopOnce.Do(func() {
		r.mu.Lock()
		r.closed.Store(true)
		started := r.started
		r.mu.Unlock()
		r.loop.Stop(ctx)
		if started {
			r.deregister(ctx)
		}
	})
}

func (r *Registry) deregister(ctx context.Context) {
	if err := r.acquire(ctx); err != nil {
		r.log.Warn().Str("event", r.event+".deregister_failed").Err(err).
			Msg("a registry write did not finish before the stop deadline; the key expires within its TTL")
		return
	}
	defer r.release()
	if err := r.store().Deregister(ctx, r.info.InstanceID); err != nil {
		r.log.Warn().Str("event", r.event+".deregister_failed").Err(err).
			Msg("deregistration failed; the key expires within its TTL")
		return
	}
	r.m.registered.Set(0)
	r.log.Info().Str("event", r.event+".deregistered").Str("key", r.Key()).Msg("instance deregistered")
}

// Alive reports whether instance id is registered with a fresh heartbeat (within the TTL its
// record declares, else this registry's TTL). A missing key is (false, nil); a key that is not
// a record is (false, an error matching store.ErrBadRecord).
func (r *Registry) Alive(ctx context.Context, id string) (bool, error) {
	ok, err := r.store().Alive(ctx, id, r.Now(), r.ttl())
	if err != nil {
		return false, fmt.Errorf("presence: %w", err)
	}
	return ok, nil
}

// Instances lists the live instances (key present, heartbeat fresh), sorted by id. Members of
// the set whose key is gone are removed from it; a key with a stale heartbeat or an unreadable
// record is skipped (and left to expire).
func (r *Registry) Instances(ctx context.Context) ([]store.InstanceRecord, error) {
	list, err := r.store().Instances(ctx, r.Now(), r.ttl())
	if err != nil {
		return nil, fmt.Errorf("presence: %w", err)
	}
	for _, bad := range list.Unreadable {
		r.log.Warn().Str("event", "registry.bad_record").Str("member", bad.ID).Err(bad).Msg("skipping unreadable registry record")
	}
	switch {
	case len(list.Pruned) == 0:
	case list.PruneErr != nil:
		r.log.Warn().Str("event", "registry.prune_failed").Strs("members", list.Pruned).Err(list.PruneErr).
			Msg("could not prune dead registry members")
	default:
		r.log.Info().Str("event", "registry.pruned").Strs("members", list.Pruned).Msg("pruned dead registry members")
	}
	return list.Live, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
