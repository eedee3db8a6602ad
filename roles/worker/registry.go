package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/store/keys"
)

// Registry statuses. An instance only moves forward: running → draining → stopping, then it
// deregisters.
const (
	StatusRunning  = "running"
	StatusDraining = "draining"
	StatusStopping = "stopping"
)

// DefaultHeartbeatInterval is how often a registered instance refreshes its key; the key lives
// RegistryTTLFactor intervals.
const (
	DefaultHeartbeatInterval = 10 * time.Second
	RegistryTTLFactor        = 3
)

// Registry errors.
var (
	// ErrRegistryClosed: the registry was stopped; nothing is written any more.
	ErrRegistryClosed = errors.New("registry is closed")
	// ErrBadStatus: an unknown status or a move backwards (draining → running).
	ErrBadStatus = errors.New("invalid registry status")
	// ErrBadRecord: a registry key holds something that is not an instance record.
	ErrBadRecord = errors.New("malformed registry record")
)

// InstanceInfo is what an instance says about itself when it registers; it does not change
// while the process runs.
type InstanceInfo struct {
	InstanceID    string // PLAITA_INSTANCE_ID: the registry key and the lease holder name
	Role          string // "worker"
	Host          string
	PID           int
	Queue         string // PLAITA_QUEUE_NAME
	ConsumerGroup string // PLAITA_CONSUMER_GROUP
	ConsumerName  string // PLAITA_CONSUMER_NAME
	DLQKey        string // the effective dead-letter stream
	Generations   config.Generations
	Capacity      int // PLAITA_WORKER_CONCURRENCY
	StartedAt     time.Time
}

// InstanceInfoFromConfig fills InstanceInfo from the effective configuration of this process
// (flags already applied), the host name and the pid; StartedAt is now.
func InstanceInfoFromConfig(cfg *config.Config) InstanceInfo {
	host, _ := os.Hostname()
	return InstanceInfo{
		InstanceID:    config.InstanceID.In(cfg),
		Role:          string(cfg.Role()),
		Host:          host,
		PID:           os.Getpid(),
		Queue:         config.QueueName.In(cfg),
		ConsumerGroup: config.ConsumerGroup.In(cfg),
		ConsumerName:  config.ConsumerName.In(cfg),
		DLQKey:        config.DLQKey.In(cfg),
		Generations:   cfg.Generations(),
		Capacity:      config.WorkerConcurrency.In(cfg),
		StartedAt:     time.Now().UTC(),
	}
}

// InstanceRecord is the JSON value of one registry key (<root>:registry:instance:<id>). Fields
// are only ever added; readers treat a missing field as its zero value.
type InstanceRecord struct {
	InstanceID       string    `json:"instance_id"`
	Status           string    `json:"status"` // running | draining | stopping
	Host             string    `json:"host"`
	PID              int       `json:"pid"`
	Role             string    `json:"role"`
	Queue            string    `json:"queue"`
	Consumer         string    `json:"consumer"`
	Group            string    `json:"group"`
	DLQKey           string    `json:"dlq_key"`
	ConfigFamily     string    `json:"config_family"`
	ConfigGeneration string    `json:"config_generation"`
	BudgetGeneration string    `json:"budget_generation"`
	ActiveTasks      int       `json:"active_tasks"`
	Capacity         int       `json:"capacity"`
	HeartbeatAt      time.Time `json:"heartbeat_at"` // RFC 3339, UTC, writer's clock
	StartedAt        time.Time `json:"started_at"`
	// TTLMillis is the key's TTL as the writer set it (RegistryTTLFactor × its heartbeat
	// interval): a heartbeat older than this is stale.
	TTLMillis int64 `json:"ttl_ms"`
}

// Fresh reports whether the record's heartbeat is within its TTL at now (fallback when the
// record carries none). A heartbeat in the future (clock skew) counts as fresh.
func (r InstanceRecord) Fresh(now time.Time, fallback time.Duration) bool {
	window := fallback
	if r.TTLMillis > 0 {
		window = time.Duration(r.TTLMillis) * time.Millisecond
	}
	return !r.HeartbeatAt.IsZero() && now.Sub(r.HeartbeatAt) <= window
}

// Registry is this instance's presence in Redis: one key with a TTL holding an InstanceRecord,
// refreshed by a heartbeat, plus membership in the instances set. Status changes are written
// at once. Stop deregisters and closes a gate: no heartbeat or status write that comes after
// (or races) Stop can recreate the key.
//
// Set Interval and Now before Start.
type Registry struct {
	// Interval is the heartbeat period (DefaultHeartbeatInterval when zero); the key's TTL is
	// RegistryTTLFactor × Interval.
	Interval time.Duration
	// Now is the clock written into heartbeat_at and used by Alive and Instances.
	Now func() time.Time

	c        rueidis.Client
	key      string
	setKey   string
	instKeys func(id string) string
	info     InstanceInfo
	log      zerolog.Logger

	heartbeatTS, draining, active, registered *metrics.Gauge
	heartbeatFailures                         *metrics.Counter

	// gate serializes every write and Stop's deregistration (a channel so that waiting on it
	// honours a context); closed is set before Stop takes it.
	gate    chan struct{}
	closed  atomic.Bool
	started atomic.Bool
	failing atomic.Bool // the last heartbeat failed (logged once per outage)

	mu      sync.Mutex
	status  string
	nActive atomic.Int64

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// NewRegistry builds the registry of one instance under key root root ("" = "plaita") and
// registers its gauges on set.
func NewRegistry(c rueidis.Client, root string, info InstanceInfo, log zerolog.Logger, set *metrics.Set) *Registry {
	space := keys.MustFor(root, "")
	return &Registry{
		Interval: DefaultHeartbeatInterval,
		Now:      time.Now,
		c:        c,
		key:      space.RegistryInstance(info.InstanceID),
		setKey:   space.RegistryInstances(),
		instKeys: space.RegistryInstance,
		info:     info,
		log:      log.With().Str("instance", info.InstanceID).Logger(),
		status:   StatusRunning,

		heartbeatTS:       set.GetOrCreateGauge(`plaita_worker_heartbeat_timestamp_seconds`, nil),
		draining:          set.GetOrCreateGauge(`plaita_worker_draining`, nil),
		active:            set.GetOrCreateGauge(`plaita_worker_active_tasks`, nil),
		registered:        set.GetOrCreateGauge(`plaita_worker_registered`, nil),
		heartbeatFailures: set.GetOrCreateCounter(`plaita_worker_heartbeat_failures_total`),

		gate: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
}

// Key is this instance's registry key.
func (r *Registry) Key() string { return r.key }

func (r *Registry) interval() time.Duration {
	if r.Interval > 0 {
		return r.Interval
	}
	return DefaultHeartbeatInterval
}

func (r *Registry) ttl() time.Duration { return RegistryTTLFactor * r.interval() }

func (r *Registry) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// opTimeout bounds every Redis round trip of the registry (rueidis would otherwise retry a
// read for as long as the server is away): one interval, at least 1s, at most 5s.
func (r *Registry) opTimeout() time.Duration {
	return min(max(r.interval(), time.Second), 5*time.Second)
}

// Start registers the instance at once (status running unless SetStatus moved it before) and
// then refreshes the key every Interval until Stop. ctx bounds only the first write: the
// heartbeat lives as long as the instance, through a drain, whatever the caller's start-up
// deadline (a heartbeat tied to it stopped 30 s after start, and a healthy worker looked
// dead to every liveness check one TTL later). A failing first write is returned and no
// heartbeat runs; Stop is still safe.
func (r *Registry) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.closed.Load() {
		r.mu.Unlock()
		return ErrRegistryClosed
	}
	if r.cancel != nil {
		r.mu.Unlock()
		return errors.New("registry: already started")
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	r.started.Store(true)
	r.mu.Unlock()
	if err := r.write(ctx, true); err != nil {
		cancel()
		close(r.done)
		return fmt.Errorf("registry: register %s: %w", r.info.InstanceID, err)
	}
	r.log.Info().Str("event", "worker.registered").Str("key", r.key).Str("status", r.Status()).
		Dur("heartbeat_interval", r.interval()).Msg("instance registered")
	go r.loop(loopCtx)
	return nil
}

func (r *Registry) loop(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(r.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = r.runOnce(ctx)
		}
	}
}

// runOnce is one heartbeat: it rewrites the record (fresh heartbeat_at, current status and
// active tasks) and refreshes the TTL and the set membership.
func (r *Registry) runOnce(ctx context.Context) error {
	err := r.write(ctx, false)
	switch {
	case err == nil:
		if r.failing.CompareAndSwap(true, false) {
			r.log.Info().Str("event", "worker.heartbeat_recovered").Msg("registry heartbeat works again")
		}
	case errors.Is(err, ErrRegistryClosed) || ctx.Err() != nil:
	default:
		r.heartbeatFailures.Inc()
		if r.failing.CompareAndSwap(false, true) {
			r.log.Warn().Str("event", "worker.heartbeat_failed").Err(err).
				Dur("ttl", r.ttl()).Msg("registry heartbeat failed; the instance looks dead to others once its key expires")
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

func statusRank(s string) int {
	switch s {
	case StatusRunning:
		return 1
	case StatusDraining:
		return 2
	case StatusStopping:
		return 3
	}
	return 0
}

// SetStatus moves the instance to status (running → draining → stopping, never back) and
// writes it at once, not at the next heartbeat. Before Start it only records the status (Start
// writes it); after Stop it writes nothing and returns ErrRegistryClosed.
func (r *Registry) SetStatus(ctx context.Context, status string) error {
	rank := statusRank(status)
	if rank == 0 {
		return fmt.Errorf("%w %q", ErrBadStatus, status)
	}
	if r.closed.Load() {
		return ErrRegistryClosed
	}
	r.mu.Lock()
	prev := r.status
	if rank < statusRank(prev) {
		r.mu.Unlock()
		return fmt.Errorf("%w: %s → %s goes backwards", ErrBadStatus, prev, status)
	}
	r.status = status
	r.mu.Unlock()
	r.draining.Set(b2f(status != StatusRunning))
	if !r.started.Load() {
		return nil
	}
	if err := r.write(ctx, false); err != nil {
		return fmt.Errorf("registry: write status %s: %w", status, err)
	}
	if prev != status {
		r.log.Info().Str("event", "worker.registry_status").Str("from", prev).Str("status", status).Msg("registry status written")
	}
	return nil
}

// SetActive records the number of tasks in flight; it reaches Redis with the next write.
func (r *Registry) SetActive(n int) {
	r.nActive.Store(int64(n))
	r.active.Set(float64(n))
}

// Snapshot is the record the next write would send.
func (r *Registry) Snapshot() InstanceRecord {
	r.mu.Lock()
	status := r.status
	r.mu.Unlock()
	i := r.info
	return InstanceRecord{
		InstanceID: i.InstanceID, Status: status, Host: i.Host, PID: i.PID, Role: i.Role,
		Queue: i.Queue, Consumer: i.ConsumerName, Group: i.ConsumerGroup, DLQKey: i.DLQKey,
		ConfigFamily: i.Generations.Family, ConfigGeneration: i.Generations.Config, BudgetGeneration: i.Generations.Budget,
		ActiveTasks: int(r.nActive.Load()), Capacity: i.Capacity,
		HeartbeatAt: r.now().UTC(), StartedAt: i.StartedAt.UTC(), TTLMillis: r.ttl().Milliseconds(),
	}
}

func (r *Registry) acquire(ctx context.Context) error {
	select {
	case r.gate <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Registry) release() { <-r.gate }

// write sends the record under the gate. register=false refreshes an existing key only (SET
// XX), so a write that was already on the wire when Stop deleted the key cannot bring it back;
// when the key has expired meanwhile (a Redis outage longer than the TTL) the instance
// registers again — unless the gate closed.
func (r *Registry) write(ctx context.Context, register bool) error {
	if err := r.acquire(ctx); err != nil {
		return err
	}
	defer r.release()
	if r.closed.Load() {
		return ErrRegistryClosed
	}
	ctx, cancel := context.WithTimeout(ctx, r.opTimeout())
	defer cancel()
	rec := r.Snapshot()
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	ttl := r.ttl().Milliseconds()
	c := r.c
	if !register {
		err := c.Do(ctx, c.B().Set().Key(r.key).Value(string(body)).Xx().PxMilliseconds(ttl).Build()).Error()
		switch {
		case rueidis.IsRedisNil(err):
			if r.closed.Load() {
				return ErrRegistryClosed
			}
			r.log.Warn().Str("event", "worker.reregistered").Str("key", r.key).
				Msg("registry key had expired (heartbeats failed for longer than its TTL): registering again")
			register = true
		case err != nil:
			return fmt.Errorf("set %s: %w", r.key, err)
		}
	}
	if register {
		if err := c.Do(ctx, c.B().Set().Key(r.key).Value(string(body)).PxMilliseconds(ttl).Build()).Error(); err != nil {
			return fmt.Errorf("set %s: %w", r.key, err)
		}
	}
	if err := c.Do(ctx, c.B().Sadd().Key(r.setKey).Member(r.info.InstanceID).Build()).Error(); err != nil {
		return fmt.Errorf("sadd %s: %w", r.setKey, err)
	}
	r.heartbeatTS.Set(float64(rec.HeartbeatAt.UnixNano()) / 1e9)
	r.registered.Set(1)
	return nil
}

// Stop deregisters the instance (DEL of its key, SREM from the set) and closes the gate: every
// later heartbeat or status write is refused, and a write in flight finishes before the key
// is deleted. Safe to call twice or without Start. When ctx ends before the deregistration
// went through, the key expires by itself within its TTL.
func (r *Registry) Stop(ctx context.Context) {
	r.stopOnce.Do(func() {
		r.mu.Lock()
		r.closed.Store(true)
		cancel := r.cancel
		r.mu.Unlock()
		if cancel != nil {
			cancel()
			select {
			case <-r.done:
			case <-ctx.Done():
			}
		}
		if !r.started.Load() {
			return
		}
		if err := r.acquire(ctx); err != nil {
			r.log.Warn().Str("event", "worker.deregister_failed").Err(err).
				Msg("a registry write did not finish before the stop deadline; the key expires within its TTL")
			return
		}
		defer r.release()
		dctx, dcancel := context.WithTimeout(ctx, r.opTimeout())
		defer dcancel()
		c := r.c
		res := c.DoMulti(dctx,
			c.B().Del().Key(r.key).Build(),
			c.B().Srem().Key(r.setKey).Member(r.info.InstanceID).Build())
		for _, rr := range res {
			if err := rr.Error(); err != nil {
				r.log.Warn().Str("event", "worker.deregister_failed").Err(err).
					Msg("deregistration failed; the key expires within its TTL")
				return
			}
		}
		r.registered.Set(0)
		r.log.Info().Str("event", "worker.deregistered").Str("key", r.key).Msg("instance deregistered")
	})
}

// Alive reports whether instance id is registered with a fresh heartbeat (within the TTL its
// record declares, else this registry's TTL): its key exists and heartbeat_at is recent.
// A missing key is (false, nil); a key that is not a record is (false, ErrBadRecord).
func (r *Registry) Alive(ctx context.Context, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opTimeout())
	defer cancel()
	raw, err := r.c.Do(ctx, r.c.B().Get().Key(r.instKeys(id)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("registry: get %s: %w", r.instKeys(id), err)
	}
	rec, err := decodeRecord(id, raw)
	if err != nil {
		return false, err
	}
	return rec.Fresh(r.now(), r.ttl()), nil
}

func decodeRecord(id, raw string) (InstanceRecord, error) {
	var rec InstanceRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return rec, fmt.Errorf("%w for %q: %v", ErrBadRecord, id, err)
	}
	if rec.InstanceID == "" {
		rec.InstanceID = id
	}
	return rec, nil
}

// Instances lists the live instances (key present, heartbeat fresh), sorted by id. Members of
// the set whose key is gone are removed from it; a key with a stale heartbeat or an unreadable
// record is skipped (and left to expire).
func (r *Registry) Instances(ctx context.Context) ([]InstanceRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opTimeout())
	defer cancel()
	c := r.c
	ids, err := c.Do(ctx, c.B().Smembers().Key(r.setKey).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("registry: smembers %s: %w", r.setKey, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	cmds := make(rueidis.Commands, len(ids))
	for i, id := range ids {
		cmds[i] = c.B().Get().Key(r.instKeys(id)).Build()
	}
	var out []InstanceRecord
	var dead []string
	now := r.now()
	for i, res := range c.DoMulti(ctx, cmds...) {
		raw, err := res.ToString()
		switch {
		case rueidis.IsRedisNil(err):
			dead = append(dead, ids[i])
			continue
		case err != nil:
			return nil, fmt.Errorf("registry: get %s: %w", r.instKeys(ids[i]), err)
		}
		rec, err := decodeRecord(ids[i], raw)
		if err != nil {
			r.log.Warn().Str("event", "registry.bad_record").Str("member", ids[i]).Err(err).Msg("skipping unreadable registry record")
			continue
		}
		if rec.Fresh(now, r.ttl()) {
			out = append(out, rec)
		}
	}
	if len(dead) > 0 {
		// A member whose key expired between our GET and this SREM and that registers again in
		// that window is re-added by its next heartbeat (every write SADDs).
		if err := c.Do(ctx, c.B().Srem().Key(r.setKey).Member(dead...).Build()).Error(); err != nil {
			r.log.Warn().Str("event", "registry.prune_failed").Strs("members", dead).Err(err).Msg("could not prune dead registry members")
		} else {
			r.log.Info().Str("event", "registry.pruned").Strs("members", dead).Msg("pruned dead registry members")
		}
	}
	return out, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
