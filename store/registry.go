package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"plaita/store/keys"
)

// The instance registry (store/keys): one key per instance, <root>:registry:instance:<id>, holding
// an InstanceRecord with a TTL that its heartbeat refreshes, and the set <root>:registry:instances
// naming every instance that registered. The set is an index, not the truth: a member whose
// key has expired is a dead instance, removed by the next Instances call.
//
// Round trips: Register 2 (SET, then SADD: the member never names a key that was not written),
// Refresh 2 (SET XX, then SADD; 1 when the key is gone), Deregister 1 (DEL and SREM
// pipelined), Get/Alive 1, Instances 2 (SMEMBERS, the GETs pipelined) + 1 SREM when it prunes.

// ErrBadRecord: a registry key holds something that is not an instance record (bad JSON, a
// value of another type). Permanent (it matches ErrInvalid): retrying cannot fix it; the key is
// left to expire.
var ErrBadRecord = ErrInvalid.Kind("", "malformed registry record")

// BadRecordError names the instance whose record is unreadable. It matches ErrBadRecord.
type BadRecordError struct {
	ID  string
	Err error
}

func (e *BadRecordError) Error() string {
	return fmt.Sprintf("%v for %q: %v", ErrBadRecord, e.ID, e.Err)
}

// Unwrap makes errors.Is(err, ErrBadRecord) hold and keeps the decoding cause.
func (e *BadRecordError) Unwrap() []error { return []error{ErrBadRecord, e.Err} }

// InstanceRecord is the JSON value of one registry key. Fields are only ever added; readers
// treat a missing field as its zero value.
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
	// TTLMillis is the key's TTL as the writer set it (a few heartbeat intervals): a heartbeat
	// older than this is stale.
	TTLMillis int64 `json:"ttl_ms"`
	// MetricsAddr is where the instance serves /metrics, /healthz and /readyz (host:port; ""
	// when it serves none).
	MetricsAddr string `json:"metrics_addr,omitempty"`
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

// DefaultRegistryTimeout bounds one registry call. A heartbeat that cannot reach Redis must
// fail within its interval rather than hang (rueidis retries a read for as long as the server
// is away), so the next beat and Stop are not held up by it.
const DefaultRegistryTimeout = 5 * time.Second

// Registry is the instance registry of one deployment (one client, one key root). It is safe
// for concurrent use; it keeps no state of its own.
type Registry struct {
	e       Ephemeral
	sp      keys.Space
	timeout time.Duration
}

// NewRegistry returns the registry over e under key root root ("" is keys.DefaultRoot). Every
// call is bounded by DefaultRegistryTimeout (see WithTimeout).
func NewRegistry(e Ephemeral, root string) *Registry {
	return &Registry{e: e, sp: keys.MustFor(root, ""), timeout: DefaultRegistryTimeout}
}

// WithTimeout returns the same registry with every call bounded by d instead (d ≤ 0 keeps the
// current bound). A caller's shorter deadline still wins.
func (r *Registry) WithTimeout(d time.Duration) *Registry {
	cp := *r
	if d > 0 {
		cp.timeout = d
	}
	return &cp
}

// Key is the registry key of instance id.
func (r *Registry) Key(id string) string { return r.sp.RegistryInstance(id) }

// SetKey is the key of the instances set.
func (r *Registry) SetKey() string { return r.sp.RegistryInstances() }

func (r *Registry) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.timeout)
}

// encodeRecord checks and serializes a record before anything is sent.
func encodeRecord(rec InstanceRecord, ttl time.Duration) (string, int64, error) {
	if rec.InstanceID == "" {
		return "", 0, fmt.Errorf("%w: registry record without instance id", ErrInvalid)
	}
	if ttl < time.Millisecond {
		return "", 0, fmt.Errorf("%w: registry TTL %s", ErrInvalid, ttl)
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return "", 0, fmt.Errorf("%w: registry record of %s: %w", ErrInvalid, rec.InstanceID, err)
	}
	return string(body), ttl.Milliseconds(), nil
}

// Register writes rec under its instance's key with TTL ttl (creating or replacing it) and adds
// the instance to the set. A Redis failure is ErrRedis (transient); an empty id or a TTL under
// a millisecond is ErrInvalid.
func (r *Registry) Register(ctx context.Context, rec InstanceRecord, ttl time.Duration) error {
	body, ms, err := encodeRecord(rec, ttl)
	if err != nil {
		return err
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	if _, err := r.e.SetRecord(ctx, r.Key(rec.InstanceID), body, time.Duration(ms)*time.Millisecond, false); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return r.addMember(ctx, rec.InstanceID)
}

// Refresh rewrites rec and its TTL only if the key still exists (SET XX), then re-adds the
// member (a pruner may have removed it). gone is true when the key had expired: nothing was
// written, and the caller decides whether to Register again. Refusing to create the key is
// what keeps a heartbeat already on the wire when the instance deregistered from bringing it
// back.
func (r *Registry) Refresh(ctx context.Context, rec InstanceRecord, ttl time.Duration) (gone bool, err error) {
	body, ms, err := encodeRecord(rec, ttl)
	if err != nil {
		return false, err
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	written, err := r.e.SetRecord(ctx, r.Key(rec.InstanceID), body, time.Duration(ms)*time.Millisecond, true)
	switch {
	case err != nil:
		return false, fmt.Errorf("registry: refresh: %w", err)
	case !written:
		return true, nil
	}
	return false, r.addMember(ctx, rec.InstanceID)
}

func (r *Registry) addMember(ctx context.Context, id string) error {
	if err := r.e.AddMember(ctx, r.SetKey(), id); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}

// Deregister deletes instance id's key and removes it from the set. Deregistering an instance
// that is not registered is not an error.
func (r *Registry) Deregister(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: deregister without instance id", ErrInvalid)
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	if err := r.e.DeleteRecord(ctx, r.Key(id), r.SetKey(), id); err != nil {
		return fmt.Errorf("registry: deregister %s: %w", id, err)
	}
	return nil
}

// Get reads instance id's record. A missing key is (zero, false, nil); a key that holds no
// record is a *BadRecordError (matches ErrBadRecord); a Redis failure is ErrRedis.
func (r *Registry) Get(ctx context.Context, id string) (InstanceRecord, bool, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	recs, err := r.e.Records(ctx, r.Key(id))
	if err != nil {
		return InstanceRecord{}, false, fmt.Errorf("registry: %w", err)
	}
	return decodeInstance(id, recs[0])
}

func decodeInstance(id string, got Record) (InstanceRecord, bool, error) {
	switch {
	case got.Err != nil:
		return InstanceRecord{}, false, &BadRecordError{ID: id, Err: got.Err}
	case !got.Found:
		return InstanceRecord{}, false, nil
	}
	var rec InstanceRecord
	if err := json.Unmarshal([]byte(got.Value), &rec); err != nil {
		return InstanceRecord{}, false, &BadRecordError{ID: id, Err: err}
	}
	if rec.InstanceID == "" {
		rec.InstanceID = id
	}
	return rec, true, nil
}

// Alive reports whether instance id is registered with a fresh heartbeat at now: its key
// exists and heartbeat_at is within the TTL the record declares (fallback when it declares
// none). A missing key is (false, nil); errors are Get's.
func (r *Registry) Alive(ctx context.Context, id string, now time.Time, fallback time.Duration) (bool, error) {
	rec, ok, err := r.Get(ctx, id)
	if !ok || err != nil {
		return false, err
	}
	return rec.Fresh(now, fallback), nil
}

// InstanceList is what one Instances call found.
type InstanceList struct {
	// Live are the instances whose key exists and whose heartbeat is fresh, sorted by id.
	Live []InstanceRecord
	// Pruned are the members whose key was gone (dead instances); they were removed from the
	// set unless PruneErr says otherwise.
	Pruned   []string
	PruneErr error
	// Unreadable are the members whose key holds no record; they stay members and their keys
	// are left to expire.
	Unreadable []*BadRecordError
}

// Instances lists the registered instances at now (fallback: the freshness window of records
// that declare no TTL). Members whose key is gone are removed from the set; a key with a stale
// heartbeat is skipped (it expires by itself). Only a failed read is an error: a failed prune
// is reported in the list, the next call prunes again.
func (r *Registry) Instances(ctx context.Context, now time.Time, fallback time.Duration) (InstanceList, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	ids, err := r.e.Members(ctx, r.SetKey())
	if err != nil {
		return InstanceList{}, fmt.Errorf("registry: %w", err)
	}
	var out InstanceList
	if len(ids) == 0 {
		return out, nil
	}
	slices.Sort(ids)
	ks := make([]string, len(ids))
	for i, id := range ids {
		ks[i] = r.Key(id)
	}
	recs, err := r.e.Records(ctx, ks...)
	if err != nil {
		return InstanceList{}, fmt.Errorf("registry: %w", err)
	}
	for i, got := range recs {
		rec, ok, err := decodeInstance(ids[i], got)
		var bad *BadRecordError
		switch {
		case errors.As(err, &bad):
			out.Unreadable = append(out.Unreadable, bad)
		case err != nil:
			return InstanceList{}, err
		case !ok:
			out.Pruned = append(out.Pruned, ids[i])
		case rec.Fresh(now, fallback):
			out.Live = append(out.Live, rec)
		}
	}
	if len(out.Pruned) > 0 {
		// A member whose key expired between the GET and this SREM and that registers again in
		// that window is re-added by its next heartbeat (every write re-adds the member).
		if err := r.e.RemoveMembers(ctx, r.SetKey(), out.Pruned...); err != nil {
			out.PruneErr = fmt.Errorf("registry: prune: %w", err)
		}
	}
	return out, nil
}
