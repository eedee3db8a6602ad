package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	// The zone database is compiled in: a container image without /usr/share/zoneinfo must
	// still accept "Europe/Paris", and a zone the CLI accepted must load in the schedule role.
	_ "time/tzdata"

	"plaita/engine/state"
	"plaita/queue"
	"plaita/store/keys"
)

// Cron schedules (docs/schedules.md). A schedule is a record — its definition, a revision
// (rev), last_tick, the next tick, its pending claims, its last fire and its last skip —
// listed in its tenant's index and in one due index shared by every tenant, whose entry says
// when the schedule role looks at it next: min(next tick, every pending claim's claimed_ms +
// grace), none when there is nothing to do. Schedules holds the rules; a SchedulesDriver stores (schedules_driver.go): on
// Redis, the cluster's authority (RedisSchedules, schedules_redis.go), or in the console's
// database for local mode (store/sqlite).
//
// last_tick is the newest tick handled (fired or skipped), or the baseline: the creation time,
// and for a schedule enabled again the time it was enabled (ticks before it are never fired).
// The next tick is the first tick after last_tick (none while the schedule is disabled).
//
// Every write of the definition bumps rev; the schedule role's claim and skip are
// compare-and-set on (rev, last_tick), so an edit between its read and its write, or another
// schedule process that claimed first, makes the write fail instead of firing twice.

var (
	// ErrScheduleNotFound: no schedule with that id in the tenant. Permanent (it matches
	// ErrNotFound).
	ErrScheduleNotFound = ErrNotFound.Kind("", "schedule not found")
	// ErrScheduleExists: Create found the id taken. Permanent (it matches ErrInvalid).
	ErrScheduleExists = ErrInvalid.Kind("", "schedule already exists")
	// ErrBadSchedule: a definition that is refused (bad cron spec, unknown time zone, input that
	// is not JSON …), or a stored record that does not decode. Permanent (it matches
	// ErrInvalid).
	ErrBadSchedule = ErrInvalid.Kind("", "invalid schedule")
	// ErrScheduleChanged: the schedule kept changing under a read-modify-write. Transient (it
	// matches ErrConflict).
	ErrScheduleChanged = ErrConflict.Kind("", "schedule changed concurrently")
)

// schedErr is an error of one of the schedule sentinels (kind) with the details.
func schedErr(kind error, format string, a ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, a...))
}

// LatestVersion as a schedule's flow version is resolved when it fires: the most recently
// published version of the flow.
const LatestVersion = "latest"

// DefaultClaimGrace is how long a claimed tick may stay pending (claimed, its start not yet
// confirmed) before another schedule process takes it over: well above one enqueue's bound, so
// a live claimer is never raced.
const DefaultClaimGrace = 15 * time.Second

// Schedule is a schedule's definition, as the console and `plaita schedule add` write it.
// Fields are only ever added; readers ignore fields they do not know.
type Schedule struct {
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	// Cron is 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or
	// a descriptor (@yearly, @monthly, @weekly, @daily, @hourly).
	Cron string `json:"cron"`
	// TimeZone is an IANA zone name the spec is read in ("UTC" when empty).
	TimeZone    string          `json:"time_zone"`
	Enabled     bool            `json:"enabled"`
	FlowID      string          `json:"flow_id"`
	FlowVersion string          `json:"flow_version"` // a published version, or LatestVersion
	Input       json.RawMessage `json:"input"`        // the execution's INPUT
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// Validate checks a definition as Create and every update do; it normalizes nothing. The error
// matches ErrBadSchedule and names the field.
func (s Schedule) Validate() error {
	if err := keys.ValidName("schedule id", s.ID); err != nil {
		return schedErr(ErrBadSchedule, "%v", err)
	}
	if err := keys.ValidTenant(s.TenantID); err != nil {
		return schedErr(ErrBadSchedule, "schedule %s: %v", s.ID, err)
	}
	if _, err := ParseCron(s.Cron, s.TimeZone); err != nil {
		return schedErr(ErrBadSchedule, "schedule %s: %v", s.ID, err)
	}
	if err := keys.ValidName("flow id", s.FlowID); err != nil {
		return schedErr(ErrBadSchedule, "schedule %s: %v", s.ID, err)
	}
	if s.FlowVersion != LatestVersion {
		if err := keys.ValidName("flow version", s.FlowVersion); err != nil {
			return schedErr(ErrBadSchedule, "schedule %s: %v (or %q)", s.ID, err, LatestVersion)
		}
	}
	if len(s.Input) == 0 || !json.Valid(s.Input) {
		return schedErr(ErrBadSchedule, "schedule %s: input is not a JSON value", s.ID)
	}
	if err := state.CheckDocument(s.Input); err != nil {
		return schedErr(ErrBadSchedule, "schedule %s: input: %v", s.ID, err)
	}
	if s.CreatedAt.IsZero() || s.UpdatedAt.IsZero() {
		return schedErr(ErrBadSchedule, "schedule %s: created_at and updated_at are required", s.ID)
	}
	return nil
}

// ---- records -----------------------------------------------------------------------------

// PendingFire is a claimed tick whose start is not confirmed enqueued yet. The driver's claim
// adds ClaimedMS and FirstClaimedMS from its clock (the Redis clock, or the console database's:
// the clock of its task streams' ids, so a takeover can look for the start in the stream by
// time).
type PendingFire struct {
	TickMS         int64  `json:"tick_ms"`
	ExecutionID    string `json:"execution_id"`
	FlowID         string `json:"flow_id"`
	FlowVersion    string `json:"flow_version"`
	By             string `json:"by"`
	ClaimedMS      int64  `json:"claimed_ms"`
	FirstClaimedMS int64  `json:"first_claimed_ms"`

	raw string // the stored value, byte for byte: the compare-and-set token
}

// Tick is the claimed tick.
func (p PendingFire) Tick() time.Time { return time.UnixMilli(p.TickMS).UTC() }

// Raw is the stored value (the token Complete and TakeOver compare).
func (p PendingFire) Raw() string { return p.raw }

// ScheduleFire is the last tick a schedule fired.
type ScheduleFire struct {
	Tick        time.Time `json:"tick"`
	ExecutionID string    `json:"execution_id"`
	FlowVersion string    `json:"flow_version"`
	MessageID   string    `json:"message_id,omitempty"` // "" when a takeover found the start already enqueued
	At          time.Time `json:"at"`
	By          string    `json:"by"`
	Recovered   bool      `json:"recovered,omitempty"` // completed by a takeover
}

// ScheduleSkip is the last tick a schedule did not fire, and why.
type ScheduleSkip struct {
	Tick   time.Time `json:"tick"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// ScheduleRecord is a schedule as stored: its definition and its firing state.
type ScheduleRecord struct {
	Schedule
	Rev      int64         `json:"rev"`
	LastTick time.Time     `json:"last_tick"`          // newest tick handled, or the baseline
	Next     time.Time     `json:"next_tick,omitzero"` // zero while disabled
	Pending  []PendingFire `json:"pending,omitempty"`
	LastFire *ScheduleFire `json:"last_fire,omitempty"`
	LastSkip *ScheduleSkip `json:"last_skip,omitempty"`
}

// Hash fields of a schedule record.
const (
	fDef          = "def"
	fRev          = "rev"
	fLastTick     = "last_tick"
	fNext         = "next_ms"
	fPending      = "pending:"
	fLastFire     = "last_fire"
	fLastFireTick = "last_fire_tick"
	fLastSkip     = "last_skip"
	infScore      = "+inf"
)

// DecodeSchedule reads the fields of a schedule record stored under tenant and id, as every
// driver reads them (SchedulesDriver.Read: the Redis HASH's HGETALL, or the same fields from
// the console's database). Any field that is missing or malformed is an ErrBadSchedule naming
// it; unknown fields are ignored (a newer writer may add some).
func DecodeSchedule(tenant, id string, fields map[string]string) (ScheduleRecord, error) {
	bad := func(format string, a ...any) (ScheduleRecord, error) {
		return ScheduleRecord{}, schedErr(ErrBadSchedule, "record of schedule %s in tenant %s: %s", id, tenant, fmt.Sprintf(format, a...))
	}
	var r ScheduleRecord
	def, ok := fields[fDef]
	if !ok {
		return bad("no %q field", fDef)
	}
	if err := json.Unmarshal([]byte(def), &r.Schedule); err != nil {
		return bad("%q is not a schedule definition: %v", fDef, err)
	}
	if err := r.Validate(); err != nil {
		return bad("%v", err)
	}
	if r.ID != id || tenantName(r.TenantID) != tenantName(tenant) {
		return bad("the definition is of schedule %s in tenant %s", r.ID, tenantName(r.TenantID))
	}
	var err error
	if r.Rev, err = strconv.ParseInt(fields[fRev], 10, 64); err != nil || r.Rev < 1 {
		return bad("%q is %q, not a positive integer", fRev, fields[fRev])
	}
	last, err := strconv.ParseInt(fields[fLastTick], 10, 64)
	if err != nil || last < 0 {
		return bad("%q is %q, not Unix milliseconds", fLastTick, fields[fLastTick])
	}
	r.LastTick = time.UnixMilli(last).UTC()
	switch next := fields[fNext]; next {
	case infScore:
	default:
		n, err := strconv.ParseInt(next, 10, 64)
		if err != nil || n < 0 {
			return bad("%q is %q, neither Unix milliseconds nor %s", fNext, next, infScore)
		}
		r.Next = time.UnixMilli(n).UTC()
	}
	for name, v := range fields {
		tick, ok := strings.CutPrefix(name, fPending)
		if !ok {
			continue
		}
		p, err := decodePending(tick, v)
		if err != nil {
			return bad("%v", err)
		}
		r.Pending = append(r.Pending, p)
	}
	slices.SortFunc(r.Pending, func(a, b PendingFire) int { return cmp.Compare(a.TickMS, b.TickMS) })
	if v, ok := fields[fLastFire]; ok {
		r.LastFire = new(ScheduleFire)
		if err := json.Unmarshal([]byte(v), r.LastFire); err != nil {
			return bad("%q: %v", fLastFire, err)
		}
	}
	if v, ok := fields[fLastSkip]; ok {
		r.LastSkip = new(ScheduleSkip)
		if err := json.Unmarshal([]byte(v), r.LastSkip); err != nil {
			return bad("%q: %v", fLastSkip, err)
		}
	}
	return r, nil
}

func decodePending(tick, v string) (PendingFire, error) {
	var p PendingFire
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return p, fmt.Errorf("%q: %v", fPending+tick, err)
	}
	if strconv.FormatInt(p.TickMS, 10) != tick || p.TickMS < 0 {
		return p, fmt.Errorf("%q holds tick %d", fPending+tick, p.TickMS)
	}
	if p.ExecutionID == "" || p.FlowID == "" || p.FlowVersion == "" || p.ClaimedMS <= 0 {
		return p, fmt.Errorf("%q lacks execution_id, flow_id, flow_version or claimed_ms", fPending+tick)
	}
	p.raw = v
	return p, nil
}

func tenantName(t string) string {
	if t == "" {
		return keys.DefaultTenant
	}
	return t
}

// ---- the store ---------------------------------------------------------------------------

// Schedules is the schedule store of every tenant under one key root, over a driver.
type Schedules struct {
	d    SchedulesDriver
	root string
	// Grace is how long a claimed tick stays pending before a takeover may complete it
	// (DefaultClaimGrace when zero); every writer of one deployment uses the same value.
	Grace time.Duration
}

// NewSchedules returns the schedule store over driver d under root ("" = keys.DefaultRoot).
func NewSchedules(d SchedulesDriver, root string) *Schedules {
	if root == "" {
		root = keys.DefaultRoot
	}
	return &Schedules{d: d, root: root, Grace: DefaultClaimGrace}
}

func (s *Schedules) grace() time.Duration {
	if s.Grace <= 0 {
		return DefaultClaimGrace
	}
	return s.Grace
}

// refOf names a schedule to the driver once its tenant and id are valid names.
func (s *Schedules) refOf(tenant, id string) (ScheduleRef, error) {
	sp, err := keys.For(s.root, tenant)
	if err != nil {
		return ScheduleRef{}, err
	}
	if err := keys.ValidName("schedule id", id); err != nil {
		return ScheduleRef{}, schedErr(ErrBadSchedule, "%v", err)
	}
	if _, err := sp.Schedule(id); err != nil {
		return ScheduleRef{}, schedErr(ErrBadSchedule, "%v", err)
	}
	return ScheduleRef{Root: s.root, Tenant: sp.Tenant(), ID: id}, nil
}

// nextAfter is the first tick of s after t, or the zero time (+inf) when s is disabled or has
// none.
func nextAfter(s Schedule, t time.Time) (time.Time, error) {
	if !s.Enabled {
		return time.Time{}, nil
	}
	c, err := ParseCron(s.Cron, s.TimeZone)
	if err != nil {
		return time.Time{}, schedErr(ErrBadSchedule, "schedule %s: %v", s.ID, err)
	}
	return c.Next(t), nil
}

// Create stores a new schedule (TenantID says where) with now as its baseline: only ticks after
// now fire. CreatedAt and UpdatedAt default to now. The id taken is ErrScheduleExists; a
// definition Validate refuses is ErrBadSchedule; nothing is written then.
func (s *Schedules) Create(ctx context.Context, sc Schedule, now time.Time) (ScheduleRecord, error) {
	now = now.UTC().Truncate(time.Millisecond)
	if sc.CreatedAt.IsZero() {
		sc.CreatedAt = now
	}
	if sc.UpdatedAt.IsZero() {
		sc.UpdatedAt = sc.CreatedAt
	}
	sc.TenantID = tenantName(sc.TenantID)
	if sc.TimeZone == "" {
		sc.TimeZone = "UTC"
	}
	if err := sc.Validate(); err != nil {
		return ScheduleRecord{}, err
	}
	ref, err := s.refOf(sc.TenantID, sc.ID)
	if err != nil {
		return ScheduleRecord{}, err
	}
	next, err := nextAfter(sc, now)
	if err != nil {
		return ScheduleRecord{}, err
	}
	def, err := json.Marshal(sc)
	if err != nil {
		return ScheduleRecord{}, schedErr(ErrBadSchedule, "schedule %s: %v", sc.ID, err)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	created, err := s.d.Create(ctx, ref, string(def), now, next, sc.CreatedAt, s.grace())
	if err != nil {
		return ScheduleRecord{}, err
	}
	if !created {
		return ScheduleRecord{}, schedErr(ErrScheduleExists, "schedule %s in tenant %s", sc.ID, sc.TenantID)
	}
	return ScheduleRecord{Schedule: sc, Rev: 1, LastTick: now, Next: next}, nil
}

// Get reads one schedule: ErrScheduleNotFound when there is none, ErrBadSchedule when its
// record does not decode, a transient error when the store does not answer.
func (s *Schedules) Get(ctx context.Context, tenant, id string) (ScheduleRecord, error) {
	ref, err := s.refOf(tenant, id)
	if err != nil {
		return ScheduleRecord{}, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	got, err := s.d.Read(ctx, ref)
	switch {
	case err != nil:
		return ScheduleRecord{}, err
	case len(got) != 1:
		return ScheduleRecord{}, fmt.Errorf("%w: read schedule %s in tenant %s: %d records for one", ErrRedis, id, ref.Tenant, len(got))
	case got[0].Err != nil:
		return ScheduleRecord{}, got[0].Err
	case len(got[0].Fields) == 0:
		return ScheduleRecord{}, schedErr(ErrScheduleNotFound, "schedule %s in tenant %s", id, ref.Tenant)
	}
	return DecodeSchedule(ref.Tenant, id, got[0].Fields)
}

// BadSchedule is a listed schedule whose record does not decode.
type BadSchedule struct {
	ID  string `json:"id"`
	Err error  `json:"-"`
}

// List reads every schedule of the tenant, oldest first; records that do not decode come back
// in bad (the rest are still listed).
func (s *Schedules) List(ctx context.Context, tenant string) (recs []ScheduleRecord, bad []BadSchedule, err error) {
	sp, err := keys.For(s.root, tenant)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	ids, err := s.d.IDs(ctx, s.root, sp.Tenant())
	if err != nil {
		return nil, nil, err
	}
	var refs []ScheduleRef
	for _, id := range ids {
		ref, err := s.refOf(sp.Tenant(), id)
		if err != nil {
			bad = append(bad, BadSchedule{ID: id, Err: schedErr(ErrBadSchedule, "the index of tenant %s holds %q, not a schedule id", sp.Tenant(), id)})
			continue
		}
		refs = append(refs, ref)
	}
	if len(refs) == 0 {
		return nil, bad, nil
	}
	got, err := s.d.Read(ctx, refs...)
	if err != nil {
		return nil, nil, err
	}
	if len(got) != len(refs) {
		return nil, nil, fmt.Errorf("%w: read schedules of %s: %d records for %d", ErrRedis, sp.Tenant(), len(got), len(refs))
	}
	for i, st := range got {
		id := refs[i].ID
		switch {
		case st.Err != nil:
			bad = append(bad, BadSchedule{ID: id, Err: st.Err})
			continue
		case len(st.Fields) == 0:
			continue // deleted between the two reads
		}
		r, err := DecodeSchedule(sp.Tenant(), id, st.Fields)
		if err != nil {
			bad = append(bad, BadSchedule{ID: id, Err: err})
			continue
		}
		recs = append(recs, r)
	}
	return recs, bad, nil
}

// updateAttempts bounds a read-modify-write that keeps losing its compare-and-set.
const updateAttempts = 5

// SetEnabled enables or disables a schedule; changed is false when it already was. Enabling
// moves the baseline to now: ticks that passed while it was disabled are never fired. A claim
// in flight when it is disabled still completes (its tick was claimed while enabled).
func (s *Schedules) SetEnabled(ctx context.Context, tenant, id string, enabled bool, now time.Time) (rec ScheduleRecord, changed bool, err error) {
	return s.Update(ctx, tenant, id, now, func(sc *Schedule) error {
		sc.Enabled = enabled
		return nil
	})
}

// Update changes a schedule's definition with edit, a read-modify-write that is a
// compare-and-set on rev (edit may run more than once; it must only change its argument).
// changed is false when edit left the definition as it was: nothing is written. The id and
// tenant cannot change. Enabling it, or changing its calendar (cron or time zone), moves the
// baseline to now: ticks that passed while it was disabled, or that the old calendar had, are
// never fired. A claim in flight still completes. An edit's error is returned as it is; a
// definition Validate refuses is ErrBadSchedule and nothing is written.
func (s *Schedules) Update(ctx context.Context, tenant, id string, now time.Time, edit func(*Schedule) error) (rec ScheduleRecord, changed bool, err error) {
	now = now.UTC().Truncate(time.Millisecond)
	for range updateAttempts {
		rec, err := s.Get(ctx, tenant, id)
		if err != nil {
			return ScheduleRecord{}, false, err
		}
		before := rec.Schedule
		if err := edit(&rec.Schedule); err != nil {
			return ScheduleRecord{}, false, err
		}
		rec.ID, rec.TenantID, rec.CreatedAt = before.ID, before.TenantID, before.CreatedAt
		if rec.TimeZone == "" {
			rec.TimeZone = "UTC"
		}
		if same, err := sameDefinition(before, rec.Schedule); err != nil || same {
			return rec, false, err
		}
		rec.UpdatedAt = now
		var last time.Time
		calendar := rec.Cron != before.Cron || rec.TimeZone != before.TimeZone
		if rec.Enabled && (!before.Enabled || calendar) && now.After(rec.LastTick) {
			rec.LastTick = now
			last = now
		}
		ok, err := s.update(ctx, rec, last)
		if err != nil {
			return ScheduleRecord{}, false, err
		}
		if ok {
			rec.Rev++
			rec.Next, _ = nextAfter(rec.Schedule, rec.LastTick)
			return rec, true, nil
		}
	}
	return ScheduleRecord{}, false, fmt.Errorf("%w: schedule %s in tenant %s: %d attempts", ErrScheduleChanged, id, tenant, updateAttempts)
}

// sameDefinition reports whether two definitions are the same but for their update time (as
// stored: the input compared as compact JSON).
func sameDefinition(a, b Schedule) (bool, error) {
	a.UpdatedAt, b.UpdatedAt = time.Time{}, time.Time{}
	x, err := json.Marshal(a)
	if err != nil {
		return false, schedErr(ErrBadSchedule, "schedule %s: %v", a.ID, err)
	}
	y, err := json.Marshal(b)
	if err != nil {
		return false, schedErr(ErrBadSchedule, "schedule %s: %v", b.ID, err)
	}
	return string(x) == string(y), nil
}

// update writes rec's definition if its rev is still the stored one; last is the new
// last_tick (the zero time keeps it).
func (s *Schedules) update(ctx context.Context, rec ScheduleRecord, last time.Time) (bool, error) {
	if err := rec.Validate(); err != nil {
		return false, err
	}
	ref, err := s.refOf(rec.TenantID, rec.ID)
	if err != nil {
		return false, err
	}
	next, err := nextAfter(rec.Schedule, rec.LastTick)
	if err != nil {
		return false, err
	}
	def, err := json.Marshal(rec.Schedule)
	if err != nil {
		return false, schedErr(ErrBadSchedule, "schedule %s: %v", rec.ID, err)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	found, written, err := s.d.Update(ctx, ref, rec.Rev, string(def), last, next, s.grace())
	switch {
	case err != nil:
		return false, err
	case !found:
		return false, schedErr(ErrScheduleNotFound, "schedule %s in tenant %s", rec.ID, ref.Tenant)
	}
	return written, nil
}

// Delete removes a schedule and its index entries; false when there was none. A start already
// claimed is not recalled.
func (s *Schedules) Delete(ctx context.Context, tenant, id string) (bool, error) {
	ref, err := s.refOf(tenant, id)
	if err != nil {
		return false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return s.d.Delete(ctx, ref)
}

// ---- the schedule role's side ----------------------------------------------------------------

// DueRef is one member of the due index.
type DueRef struct {
	Tenant string
	ID     string
	At     time.Time // its score
}

// Due lists up to limit schedules whose score is ≤ now, earliest first, across all tenants.
// Members that do not name a schedule are skipped.
func (s *Schedules) Due(ctx context.Context, now time.Time, limit int) ([]DueRef, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	members, err := s.d.Due(ctx, s.root, now, max(limit, 1))
	if err != nil {
		return nil, err
	}
	out := make([]DueRef, 0, len(members))
	for _, m := range members {
		tenant, id, ok := strings.Cut(m.Member, ":")
		if !ok || keys.ValidTenant(tenant) != nil || keys.ValidName("schedule id", id) != nil {
			continue
		}
		out = append(out, DueRef{Tenant: tenant, ID: id, At: m.At})
	}
	return out, nil
}

// DueScore is the schedule's score in the due index (ok false: not a member; the zero time:
// +inf). For status output and tests.
func (s *Schedules) DueScore(ctx context.Context, tenant, id string) (at time.Time, ok bool, err error) {
	ref, err := s.refOf(tenant, id)
	if err != nil {
		return time.Time{}, false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return s.d.DueScore(ctx, ref)
}

// Claim claims tick for rec (as read): it succeeds only when rec's rev and last_tick are still
// the stored ones, and then moves last_tick to tick, next_ms to next, and records p as pending.
// The returned PendingFire is the stored claim (with the store clock's claim times): give it to
// Complete once the start is enqueued. ok is false when the schedule changed or another process
// claimed first.
func (s *Schedules) Claim(ctx context.Context, rec ScheduleRecord, p PendingFire, next time.Time) (PendingFire, bool, error) {
	ref, err := s.refOf(rec.TenantID, rec.ID)
	if err != nil {
		return PendingFire{}, false, err
	}
	if p.ExecutionID == "" || p.FlowID == "" || p.FlowVersion == "" {
		return PendingFire{}, false, fmt.Errorf("%w: claim of schedule %s without execution id, flow or version", ErrInvalid, rec.ID)
	}
	p.ClaimedMS, p.FirstClaimedMS = 0, 0
	body, err := json.Marshal(struct {
		TickMS      int64  `json:"tick_ms"`
		ExecutionID string `json:"execution_id"`
		FlowID      string `json:"flow_id"`
		FlowVersion string `json:"flow_version"`
		By          string `json:"by"`
	}{p.TickMS, p.ExecutionID, p.FlowID, p.FlowVersion, p.By})
	if err != nil {
		return PendingFire{}, false, fmt.Errorf("%w: claim of schedule %s: %w", ErrInvalid, rec.ID, err)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	raw, ok, err := s.d.Claim(ctx, ref, TickWrite{Rev: rec.Rev, Last: rec.LastTick, Tick: time.UnixMilli(p.TickMS), Body: string(body), Next: next}, s.grace())
	if err != nil || !ok {
		return PendingFire{}, false, err
	}
	stored, err := decodePending(strconv.FormatInt(p.TickMS, 10), raw)
	if err != nil {
		// The driver answered a claim other than the one it was given: a store that
		// misbehaves, transient as an unexpected Redis reply always was.
		return PendingFire{}, false, fmt.Errorf("%w: claim of schedule %s in tenant %s: %w", ErrRedis, rec.ID, ref.Tenant, err)
	}
	return stored, true, nil
}

// Skip records that tick was not fired (reason) and moves last_tick past it, with the same
// compare-and-set as Claim: a skipped tick is never fired later.
func (s *Schedules) Skip(ctx context.Context, rec ScheduleRecord, tick time.Time, reason string, next time.Time, at time.Time) (bool, error) {
	ref, err := s.refOf(rec.TenantID, rec.ID)
	if err != nil {
		return false, err
	}
	body, err := json.Marshal(ScheduleSkip{Tick: tick.UTC(), Reason: reason, At: at.UTC()})
	if err != nil {
		return false, fmt.Errorf("%w: skip of schedule %s: %w", ErrInvalid, rec.ID, err)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return s.d.Skip(ctx, ref, TickWrite{Rev: rec.Rev, Last: rec.LastTick, Tick: tick, Body: string(body), Next: next}, s.grace())
}

// Complete settles a pending claim: as fired (fire set) or, when its start cannot be enqueued
// at all, as skipped (skip set). false when the claim is no longer stored as p (the schedule
// was deleted, or a takeover holds it now).
func (s *Schedules) Complete(ctx context.Context, tenant, id string, p PendingFire, fire *ScheduleFire, skip *ScheduleSkip) (bool, error) {
	ref, err := s.refOf(tenant, id)
	if err != nil {
		return false, err
	}
	outcome := any(fire)
	if fire == nil {
		outcome = skip
	}
	body, err := json.Marshal(outcome)
	if err != nil || (fire == nil && skip == nil) {
		return false, fmt.Errorf("%w: completion of schedule %s without an outcome (%v)", ErrInvalid, id, err)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return s.d.Complete(ctx, ref, p.TickMS, p.raw, string(body), fire != nil, s.grace())
}

// TakeOver makes a pending claim this process's (by) once it is older than the grace by the
// store's clock. ok false: it is gone, changed, or still young (young true).
func (s *Schedules) TakeOver(ctx context.Context, tenant, id string, p PendingFire, by string) (taken PendingFire, ok, young bool, err error) {
	ref, err := s.refOf(tenant, id)
	if err != nil {
		return PendingFire{}, false, false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	tick := strconv.FormatInt(p.TickMS, 10)
	what, raw, err := s.d.TakeOver(ctx, ref, p.TickMS, p.raw, by, s.grace())
	switch {
	case err != nil:
		return PendingFire{}, false, false, err
	case what == TakeoverYoung:
		return PendingFire{}, false, true, nil
	case what == TakeoverUnreadable:
		return PendingFire{}, false, false, schedErr(ErrBadSchedule, "pending claim %s of schedule %s does not decode", tick, id)
	case what != TakeoverTaken:
		return PendingFire{}, false, false, nil
	}
	if taken, err = decodePending(tick, raw); err != nil {
		// The store answered a claim that does not decode.
		return PendingFire{}, false, false, fmt.Errorf("%w: takeover of schedule %s in tenant %s: %w", ErrRedis, id, ref.Tenant, err)
	}
	return taken, true, false, nil
}

// Reschedule sets next_ms (the zero time: +inf) if rec's rev is still the stored one, and
// recomputes the due score: for a score that was left early (an edit, a clock step).
func (s *Schedules) Reschedule(ctx context.Context, rec ScheduleRecord, next time.Time) (bool, error) {
	ref, err := s.refOf(rec.TenantID, rec.ID)
	if err != nil {
		return false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return s.d.Reschedule(ctx, ref, rec.Rev, next, s.grace())
}

// Forget removes a due member whose record no longer exists.
func (s *Schedules) Forget(ctx context.Context, tenant, id string) error {
	ref, err := s.refOf(tenant, id)
	if err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return s.d.Forget(ctx, ref)
}

// Park moves an unreadable record's due member to +inf, so it is not read every pass; writing
// the record again (or deleting it) is the operator's fix.
func (s *Schedules) Park(ctx context.Context, tenant, id string) error {
	ref, err := s.refOf(tenant, id)
	if err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return s.d.Park(ctx, ref)
}

// StreamEntry is one stream entry as FindInStream hands it to its matcher.
type StreamEntry struct {
	ID     string
	Fields map[string]string
}

// findPage is how many entries one read of FindInStream asks for.
const findPage = 500

// FindInStream pages through stream from the entry id <fromMS>-0 to its end, at most limit
// entries, and reports whether match accepted one. complete is false when it stopped at limit
// first. It is how a takeover tells whether a claimed start is already enqueued: the task
// stream's ids are milliseconds of the store's clock, like the claim's times. It reads through
// the driver's task streams (queue.Driver's Range: XRANGE on Redis).
func (s *Schedules) FindInStream(ctx context.Context, stream string, fromMS int64, limit int, match func(StreamEntry) bool) (found, complete bool, err error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	streams := s.d.Streams()
	start := strconv.FormatInt(max(fromMS, 0), 10) + "-0"
	for seen := 0; seen < limit; {
		pages, err := streams.Range(ctx, stream, queue.Span{Start: start, End: "+", Count: findPage})
		if err != nil {
			return false, false, fmt.Errorf("scan %s: %w", stream, err)
		}
		entries := pages[0]
		for _, e := range entries {
			if match(StreamEntry{ID: e.ID, Fields: e.Fields}) {
				return true, true, nil
			}
		}
		seen += len(entries)
		if len(entries) < findPage {
			return false, true, nil
		}
		if start, err = nextStreamID(entries[len(entries)-1].ID); err != nil {
			return false, false, err
		}
	}
	return false, false, nil
}

// nextStreamID is the smallest id after id (XRANGE's exclusive start before Redis 6.2).
func nextStreamID(id string) (string, error) {
	ms, seq, ok := strings.Cut(id, "-")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil {
		return "", fmt.Errorf("%w: stream id %q", ErrRedis, id)
	}
	if n == math.MaxUint64 {
		m, err := strconv.ParseUint(ms, 10, 64)
		if err != nil {
			return "", fmt.Errorf("%w: stream id %q", ErrRedis, id)
		}
		return strconv.FormatUint(m+1, 10) + "-0", nil
	}
	return ms + "-" + strconv.FormatUint(n+1, 10), nil
}

// ScheduleExecutionID is the execution id of a schedule's start for one tick: the same in every
// schedule process and for every retry or takeover of that tick, so a start enqueued twice is
// still one execution (the worker resumes the state the first delivery created). The
// schedule's creation time is part of it: a schedule deleted and created again under the same
// id never reuses an execution id of the old one.
func ScheduleExecutionID(tenant, scheduleID string, created, tick time.Time) string {
	if tenant == "" {
		tenant = keys.DefaultTenant
	}
	sum := sha256.Sum256([]byte("schedule\x00" + tenant + "\x00" + scheduleID + "\x00" +
		strconv.FormatInt(created.UnixMilli(), 10) + "\x00" + strconv.FormatInt(tick.UnixMilli(), 10)))
	return "ex_" + hex.EncodeToString(sum[:])[:24]
}
