package store

import (
	"cmp"
	"context"
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

	"github.com/redis/rueidis"

	"plaita/engine/state"
	"plaita/store/keys"
)

// Cron schedules (docs/schedules.md). Every key carries the hash tag {sched}, whatever the
// tenant, so that a schedule's record, its tenant's index and the due index are one Cluster
// slot and every write is one script:
//
//	<prefix>schedule:{sched}:<id>   HASH  def (JSON Schedule), rev, last_tick, next_ms,
//	                                      pending:<tick_ms> (JSON PendingFire), last_fire (JSON),
//	                                      last_fire_tick, last_skip (JSON)
//	<prefix>schedules:{sched}       ZSET  id → created_at (Unix ms)
//	<root>:schedule_due:{sched}     ZSET  <tenant>:<id> → when the schedule role looks next
//	                                      (Unix ms): min(next_ms, every pending's claimed_ms +
//	                                      grace); +inf when there is nothing to do
//
// last_tick is the newest tick handled (fired or skipped), or the baseline: the creation time,
// and for a schedule enabled again the time it was enabled (ticks before it are never fired).
// next_ms is the first tick after last_tick ("+inf" while the schedule is disabled).
//
// Every write of the definition bumps rev; the schedule role's claim and skip are
// compare-and-set on (rev, last_tick), so an edit between its read and its write, or another
// schedule process that claimed first, makes the write fail instead of firing twice.
//
// One slot for every schedule is deliberate: a few thousand schedules of a few hundred bytes fit
// one slot easily, and it keeps the due index exact (an index in another slot could lose a
// member between two writes and leave a schedule that never fires again).

var (
	// ErrScheduleNotFound: no schedule with that id in the tenant. Permanent (it matches
	// ErrNotFound).
	ErrScheduleNotFound = ErrNotFound.Kind("", "schedule not found")
	// ErrScheduleExists: Create found the id taken. Permanent (it matches ErrInvalid).
	ErrScheduleExists = ErrInvalid.Kind("", "schedule already exists")
	// ErrBadSchedule: a definition that is refused (bad cron spec, unknown time zone, input that
	// is not JSON …), or a record in Redis that does not decode. Permanent (it matches
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

// PendingFire is a claimed tick whose start is not confirmed enqueued yet. The claim script
// adds ClaimedMS and FirstClaimedMS from the Redis clock (the clock of the stream ids, so a
// takeover can look for the start in the stream by time).
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

// DecodeSchedule reads the fields of a schedule HASH (HGETALL) stored under tenant and id. Any
// field that is missing or malformed is an ErrBadSchedule naming it; unknown fields are ignored
// (a newer writer may add some).
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

// Schedules is the schedule store of every tenant under one key root.
type Schedules struct {
	c    rueidis.Client
	root string
	// Grace is how long a claimed tick stays pending before a takeover may complete it
	// (DefaultClaimGrace when zero); every writer of one deployment uses the same value.
	Grace time.Duration
}

// NewSchedules returns the schedule store over c under root ("" = keys.DefaultRoot).
func NewSchedules(c rueidis.Client, root string) *Schedules {
	if root == "" {
		root = keys.DefaultRoot
	}
	return &Schedules{c: c, root: root, Grace: DefaultClaimGrace}
}

func (s *Schedules) grace() string {
	g := s.Grace
	if g <= 0 {
		g = DefaultClaimGrace
	}
	return strconv.FormatInt(g.Milliseconds(), 10)
}

// schedKeys are one schedule's keys and its member in the due index.
type schedKeys struct {
	sp          keys.Space
	rec, idx    string
	due, member string
}

func (s *Schedules) keysOf(tenant, id string) (schedKeys, error) {
	sp, err := keys.For(s.root, tenant)
	if err != nil {
		return schedKeys{}, err
	}
	if err := keys.ValidName("schedule id", id); err != nil {
		return schedKeys{}, schedErr(ErrBadSchedule, "%v", err)
	}
	rec, err := sp.Schedule(id)
	if err != nil {
		return schedKeys{}, schedErr(ErrBadSchedule, "%v", err)
	}
	return schedKeys{sp: sp, rec: rec, idx: sp.Schedules(), due: sp.ScheduleDue(), member: sp.Tenant() + ":" + id}, nil
}

// msArg is a time as the scripts' Unix-millisecond argument; the zero time is +inf.
func msArg(t time.Time) string {
	if t.IsZero() {
		return infScore
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// schedLuaDue is the shared part of every script that changes what the schedule role waits for:
// set_due recomputes the member's score from next_ms and the pending claims.
const schedLuaDue = `
local function set_due(rec, due, member, grace)
  local best = math.huge
  local nx = redis.call('HGET', rec, 'next_ms')
  if nx and nx ~= '+inf' then best = tonumber(nx) or math.huge end
  local all = redis.call('HGETALL', rec)
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 8) == 'pending:' then
      local ok, p = pcall(cjson.decode, all[i + 1])
      local at = 0
      if ok and type(p) == 'table' and tonumber(p['claimed_ms']) then at = tonumber(p['claimed_ms']) end
      if at + grace < best then best = at + grace end
    end
  end
  if best == math.huge then
    redis.call('ZADD', due, '+inf', member)
  else
    redis.call('ZADD', due, string.format('%.0f', best), member)
  end
end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// schedLuaEffects lets a script write after TIME on Redis before 7 (effects replication; a no-op
// from Redis 7 on, where it is the only mode).
const schedLuaEffects = `if redis.replicate_commands then pcall(redis.replicate_commands) end
`

// schedCreateScript: KEYS rec, idx, due. ARGV def, last_tick, next_ms, created_ms, id, member, grace.
var schedCreateScript = rueidis.NewLuaScript(schedLuaDue + `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'def', ARGV[1], 'rev', '1', 'last_tick', ARGV[2], 'next_ms', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
set_due(KEYS[1], KEYS[3], ARGV[6], tonumber(ARGV[7]))
return 1
`)

// schedUpdateScript: KEYS rec, due. ARGV rev, def, last_tick (empty: kept), next_ms, member, grace.
// Returns -1 when the record is gone, 0 when rev moved, 1 when written.
var schedUpdateScript = rueidis.NewLuaScript(schedLuaDue + `
local rev = redis.call('HGET', KEYS[1], 'rev')
if not rev then return -1 end
if rev ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'def', ARGV[2], 'rev', tostring(tonumber(rev) + 1), 'next_ms', ARGV[4])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'last_tick', ARGV[3]) end
set_due(KEYS[1], KEYS[2], ARGV[5], tonumber(ARGV[6]))
return 1
`)

// schedDeleteScript: KEYS rec, idx, due. ARGV id, member.
var schedDeleteScript = rueidis.NewLuaScript(`
local n = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[2])
return n
`)

// schedClaimScript: KEYS rec, due. ARGV rev, last_tick, tick_ms, pending (JSON without the claim
// times), next_ms, member, grace. Returns {1, stored pending} or {0} when rev or last_tick
// moved (an edit, or another process claimed first).
var schedClaimScript = rueidis.NewLuaScript(schedLuaEffects + schedLuaDue + `
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then return {0} end
if redis.call('HGET', KEYS[1], 'last_tick') ~= ARGV[2] then return {0} end
local ms = string.format('%.0f', now_ms())
local p = string.sub(ARGV[4], 1, -2) .. ',"claimed_ms":' .. ms .. ',"first_claimed_ms":' .. ms .. '}'
redis.call('HSET', KEYS[1], 'last_tick', ARGV[3], 'next_ms', ARGV[5], 'pending:' .. ARGV[3], p)
set_due(KEYS[1], KEYS[2], ARGV[6], tonumber(ARGV[7]))
return {1, p}
`)

// schedSkipScript: KEYS rec, due. ARGV rev, last_tick, tick_ms, skip (JSON), next_ms, member, grace.
// Returns 1, or 0 when rev or last_tick moved.
var schedSkipScript = rueidis.NewLuaScript(schedLuaDue + `
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'last_tick') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'last_tick', ARGV[3], 'next_ms', ARGV[5], 'last_skip', ARGV[4])
set_due(KEYS[1], KEYS[2], ARGV[6], tonumber(ARGV[7]))
return 1
`)

// schedCompleteScript: KEYS rec, due. ARGV field, pending (exact), outcome (JSON), tick_ms, 'fire' or
// 'skip', member, grace. Returns 0 when the pending claim is no longer there as given (deleted
// with the schedule, or taken over).
var schedCompleteScript = rueidis.NewLuaScript(schedLuaDue + `
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
if ARGV[5] == 'fire' then
  local lf = tonumber(redis.call('HGET', KEYS[1], 'last_fire_tick') or '-1') or -1
  if tonumber(ARGV[4]) >= lf then redis.call('HSET', KEYS[1], 'last_fire', ARGV[3], 'last_fire_tick', ARGV[4]) end
else
  redis.call('HSET', KEYS[1], 'last_skip', ARGV[3])
end
set_due(KEYS[1], KEYS[2], ARGV[6], tonumber(ARGV[7]))
return 1
`)

// schedTakeoverScript: KEYS rec, due. ARGV field, pending (exact), by, member, grace. Returns {1,
// new pending}, {0} when the claim is no longer there as given, {2} when it is younger than
// the grace (by the Redis clock), {-1} when it does not decode.
var schedTakeoverScript = rueidis.NewLuaScript(schedLuaEffects + schedLuaDue + `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur ~= ARGV[2] then return {0} end
local ok, p = pcall(cjson.decode, cur)
if not ok or type(p) ~= 'table' or not tonumber(p['claimed_ms']) then return {-1} end
local now = now_ms()
if now < tonumber(p['claimed_ms']) + tonumber(ARGV[5]) then return {2} end
p['claimed_ms'] = now
p['by'] = ARGV[3]
if not tonumber(p['first_claimed_ms']) then p['first_claimed_ms'] = now end
local enc = cjson.encode(p)
redis.call('HSET', KEYS[1], ARGV[1], enc)
set_due(KEYS[1], KEYS[2], ARGV[4], tonumber(ARGV[5]))
return {1, enc}
`)

// schedRescheduleScript: KEYS rec, due. ARGV rev, next_ms, member, grace. Returns 0 when rev moved.
var schedRescheduleScript = rueidis.NewLuaScript(schedLuaDue + `
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'next_ms', ARGV[2])
set_due(KEYS[1], KEYS[2], ARGV[3], tonumber(ARGV[4]))
return 1
`)

// schedForgetScript: KEYS rec, due. ARGV member. Drops a due member whose record is gone.
var schedForgetScript = rueidis.NewLuaScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`)

// schedParkScript: KEYS rec, due. ARGV member. Puts an unreadable record out of the due index's
// way (+inf) until someone fixes or deletes it.
var schedParkScript = rueidis.NewLuaScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], '+inf', ARGV[1])
return 1
`)

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
	k, err := s.keysOf(sc.TenantID, sc.ID)
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
	n, err := schedCreateScript.Exec(ctx, s.c, []string{k.rec, k.idx, k.due}, []string{
		string(def), msArg(now), msArg(next), msArg(sc.CreatedAt), sc.ID, k.member, s.grace(),
	}).AsInt64()
	if err != nil {
		return ScheduleRecord{}, transient(ErrRedis, "create schedule "+k.rec, err)
	}
	if n == 0 {
		return ScheduleRecord{}, schedErr(ErrScheduleExists, "schedule %s in tenant %s", sc.ID, sc.TenantID)
	}
	return ScheduleRecord{Schedule: sc, Rev: 1, LastTick: now, Next: next}, nil
}

// Get reads one schedule: ErrScheduleNotFound when there is none, ErrBadSchedule when its
// record does not decode, ErrRedis when Redis does not answer.
func (s *Schedules) Get(ctx context.Context, tenant, id string) (ScheduleRecord, error) {
	k, err := s.keysOf(tenant, id)
	if err != nil {
		return ScheduleRecord{}, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	fields, err := s.c.Do(ctx, s.c.B().Hgetall().Key(k.rec).Build()).AsStrMap()
	if err != nil {
		if isWrongType(err) {
			return ScheduleRecord{}, schedErr(ErrBadSchedule, "%s is not a HASH", k.rec)
		}
		return ScheduleRecord{}, transient(ErrRedis, "read schedule "+k.rec, err)
	}
	if len(fields) == 0 {
		return ScheduleRecord{}, schedErr(ErrScheduleNotFound, "schedule %s in tenant %s", id, k.sp.Tenant())
	}
	return DecodeSchedule(k.sp.Tenant(), id, fields)
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
	ids, err := s.c.Do(ctx, s.c.B().Zrange().Key(sp.Schedules()).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		return nil, nil, transient(ErrRedis, "list schedules "+sp.Schedules(), err)
	}
	cmds := make(rueidis.Commands, 0, len(ids))
	var listed []string
	for _, id := range ids {
		rec, err := sp.Schedule(id)
		if err != nil || keys.ValidName("schedule id", id) != nil {
			bad = append(bad, BadSchedule{ID: id, Err: schedErr(ErrBadSchedule, "index %s holds %q, not a schedule id", sp.Schedules(), id)})
			continue
		}
		listed = append(listed, id)
		cmds = append(cmds, s.c.B().Hgetall().Key(rec).Build())
	}
	if len(cmds) == 0 {
		return nil, bad, nil
	}
	for i, res := range s.c.DoMulti(ctx, cmds...) {
		fields, err := res.AsStrMap()
		switch {
		case err != nil && isWrongType(err):
			bad = append(bad, BadSchedule{ID: listed[i], Err: schedErr(ErrBadSchedule, "schedule %s is not a HASH", listed[i])})
			continue
		case err != nil:
			return nil, nil, transient(ErrRedis, "read schedules of "+sp.Tenant(), err)
		case len(fields) == 0:
			continue // deleted between the two reads
		}
		r, err := DecodeSchedule(sp.Tenant(), listed[i], fields)
		if err != nil {
			bad = append(bad, BadSchedule{ID: listed[i], Err: err})
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
		last := ""
		calendar := rec.Cron != before.Cron || rec.TimeZone != before.TimeZone
		if rec.Enabled && (!before.Enabled || calendar) && now.After(rec.LastTick) {
			rec.LastTick = now
			last = msArg(now)
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
// last_tick ("" keeps it).
func (s *Schedules) update(ctx context.Context, rec ScheduleRecord, last string) (bool, error) {
	if err := rec.Validate(); err != nil {
		return false, err
	}
	k, err := s.keysOf(rec.TenantID, rec.ID)
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
	n, err := schedUpdateScript.Exec(ctx, s.c, []string{k.rec, k.due}, []string{
		strconv.FormatInt(rec.Rev, 10), string(def), last, msArg(next), k.member, s.grace(),
	}).AsInt64()
	switch {
	case err != nil:
		return false, transient(ErrRedis, "update schedule "+k.rec, err)
	case n < 0:
		return false, schedErr(ErrScheduleNotFound, "schedule %s in tenant %s", rec.ID, k.sp.Tenant())
	}
	return n == 1, nil
}

// Delete removes a schedule and its index entries; false when there was none. A start already
// claimed is not recalled.
func (s *Schedules) Delete(ctx context.Context, tenant, id string) (bool, error) {
	k, err := s.keysOf(tenant, id)
	if err != nil {
		return false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	n, err := schedDeleteScript.Exec(ctx, s.c, []string{k.rec, k.idx, k.due}, []string{id, k.member}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "delete schedule "+k.rec, err)
	}
	return n == 1, nil
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
	due := keys.MustFor(s.root, "").ScheduleDue()
	ctx, cancel := opCtx(ctx)
	defer cancel()
	zs, err := s.c.Do(ctx, s.c.B().Zrangebyscore().Key(due).Min("-inf").Max(msArg(now)).Withscores().
		Limit(0, int64(max(limit, 1))).Build()).AsZScores()
	if err != nil {
		return nil, transient(ErrRedis, "read "+due, err)
	}
	out := make([]DueRef, 0, len(zs))
	for _, z := range zs {
		tenant, id, ok := strings.Cut(z.Member, ":")
		if !ok || keys.ValidTenant(tenant) != nil || keys.ValidName("schedule id", id) != nil {
			continue
		}
		at := time.Time{}
		if !math.IsInf(z.Score, 0) {
			at = time.UnixMilli(int64(z.Score)).UTC()
		}
		out = append(out, DueRef{Tenant: tenant, ID: id, At: at})
	}
	return out, nil
}

// DueScore is the schedule's score in the due index (ok false: not a member; the zero time:
// +inf). For status output and tests.
func (s *Schedules) DueScore(ctx context.Context, tenant, id string) (at time.Time, ok bool, err error) {
	k, err := s.keysOf(tenant, id)
	if err != nil {
		return time.Time{}, false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	f, err := s.c.Do(ctx, s.c.B().Zscore().Key(k.due).Member(k.member).Build()).AsFloat64()
	switch {
	case rueidis.IsRedisNil(err):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, transient(ErrRedis, "read "+k.due, err)
	case math.IsInf(f, 0):
		return time.Time{}, true, nil
	}
	return time.UnixMilli(int64(f)).UTC(), true, nil
}

// Claim claims tick for rec (as read): it succeeds only when rec's rev and last_tick are still
// the stored ones, and then moves last_tick to tick, next_ms to next, and records p as pending.
// The returned PendingFire is the stored claim (with the Redis clock's claim times): give it to
// Complete once the start is enqueued. ok is false when the schedule changed or another process
// claimed first.
func (s *Schedules) Claim(ctx context.Context, rec ScheduleRecord, p PendingFire, next time.Time) (PendingFire, bool, error) {
	k, err := s.keysOf(rec.TenantID, rec.ID)
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
	tick := strconv.FormatInt(p.TickMS, 10)
	arr, err := schedClaimScript.Exec(ctx, s.c, []string{k.rec, k.due}, []string{
		strconv.FormatInt(rec.Rev, 10), msArg(rec.LastTick), tick, string(body), msArg(next), k.member, s.grace(),
	}).ToArray()
	if err != nil {
		return PendingFire{}, false, transient(ErrRedis, "claim schedule "+k.rec, err)
	}
	if len(arr) == 0 {
		return PendingFire{}, false, fmt.Errorf("%w: claim of %s: empty reply", ErrRedis, k.rec)
	}
	if n, _ := arr[0].AsInt64(); n != 1 || len(arr) < 2 {
		return PendingFire{}, false, nil
	}
	raw, err := arr[1].ToString()
	if err != nil {
		return PendingFire{}, false, fmt.Errorf("%w: claim of %s: unexpected reply: %w", ErrRedis, k.rec, err)
	}
	stored, err := decodePending(tick, raw)
	if err != nil {
		return PendingFire{}, false, fmt.Errorf("%w: claim of %s: %w", ErrRedis, k.rec, err)
	}
	return stored, true, nil
}

// Skip records that tick was not fired (reason) and moves last_tick past it, with the same
// compare-and-set as Claim: a skipped tick is never fired later.
func (s *Schedules) Skip(ctx context.Context, rec ScheduleRecord, tick time.Time, reason string, next time.Time, at time.Time) (bool, error) {
	k, err := s.keysOf(rec.TenantID, rec.ID)
	if err != nil {
		return false, err
	}
	body, err := json.Marshal(ScheduleSkip{Tick: tick.UTC(), Reason: reason, At: at.UTC()})
	if err != nil {
		return false, fmt.Errorf("%w: skip of schedule %s: %w", ErrInvalid, rec.ID, err)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	n, err := schedSkipScript.Exec(ctx, s.c, []string{k.rec, k.due}, []string{
		strconv.FormatInt(rec.Rev, 10), msArg(rec.LastTick), msArg(tick), string(body), msArg(next), k.member, s.grace(),
	}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "skip tick of schedule "+k.rec, err)
	}
	return n == 1, nil
}

// Complete settles a pending claim: as fired (fire set) or, when its start cannot be enqueued
// at all, as skipped (skip set). false when the claim is no longer stored as p (the schedule
// was deleted, or a takeover holds it now).
func (s *Schedules) Complete(ctx context.Context, tenant, id string, p PendingFire, fire *ScheduleFire, skip *ScheduleSkip) (bool, error) {
	k, err := s.keysOf(tenant, id)
	if err != nil {
		return false, err
	}
	kind, outcome := "fire", any(fire)
	if fire == nil {
		kind, outcome = "skip", skip
	}
	body, err := json.Marshal(outcome)
	if err != nil || (fire == nil && skip == nil) {
		return false, fmt.Errorf("%w: completion of schedule %s without an outcome (%v)", ErrInvalid, id, err)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	tick := strconv.FormatInt(p.TickMS, 10)
	n, err := schedCompleteScript.Exec(ctx, s.c, []string{k.rec, k.due}, []string{
		fPending + tick, p.raw, string(body), tick, kind, k.member, s.grace(),
	}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "complete claim of schedule "+k.rec, err)
	}
	return n == 1, nil
}

// TakeOver makes a pending claim this process's (by) once it is older than the grace by the
// Redis clock. ok false: it is gone, changed, or still young (young true).
func (s *Schedules) TakeOver(ctx context.Context, tenant, id string, p PendingFire, by string) (taken PendingFire, ok, young bool, err error) {
	k, err := s.keysOf(tenant, id)
	if err != nil {
		return PendingFire{}, false, false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	tick := strconv.FormatInt(p.TickMS, 10)
	arr, err := schedTakeoverScript.Exec(ctx, s.c, []string{k.rec, k.due}, []string{fPending + tick, p.raw, by, k.member, s.grace()}).ToArray()
	if err != nil {
		return PendingFire{}, false, false, transient(ErrRedis, "take over claim of schedule "+k.rec, err)
	}
	if len(arr) == 0 {
		return PendingFire{}, false, false, fmt.Errorf("%w: takeover of %s: empty reply", ErrRedis, k.rec)
	}
	switch n, _ := arr[0].AsInt64(); {
	case n == 2:
		return PendingFire{}, false, true, nil
	case n == -1:
		return PendingFire{}, false, false, schedErr(ErrBadSchedule, "pending claim %s of schedule %s does not decode", tick, id)
	case n != 1 || len(arr) < 2:
		return PendingFire{}, false, false, nil
	}
	raw, err := arr[1].ToString()
	if err != nil {
		return PendingFire{}, false, false, fmt.Errorf("%w: takeover of %s: unexpected reply: %w", ErrRedis, k.rec, err)
	}
	taken, err = decodePending(tick, raw)
	if err != nil {
		return PendingFire{}, false, false, fmt.Errorf("%w: takeover of %s: %w", ErrRedis, k.rec, err)
	}
	return taken, true, false, nil
}

// Reschedule sets next_ms (the zero time: +inf) if rec's rev is still the stored one, and
// recomputes the due score: for a score that was left early (an edit, a clock step).
func (s *Schedules) Reschedule(ctx context.Context, rec ScheduleRecord, next time.Time) (bool, error) {
	k, err := s.keysOf(rec.TenantID, rec.ID)
	if err != nil {
		return false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	n, err := schedRescheduleScript.Exec(ctx, s.c, []string{k.rec, k.due}, []string{
		strconv.FormatInt(rec.Rev, 10), msArg(next), k.member, s.grace(),
	}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "reschedule "+k.rec, err)
	}
	return n == 1, nil
}

// Forget removes a due member whose record no longer exists.
func (s *Schedules) Forget(ctx context.Context, tenant, id string) error {
	return s.dueOnly(ctx, schedForgetScript, tenant, id, "forget")
}

// Park moves an unreadable record's due member to +inf, so it is not read every pass; writing
// the record again (or deleting it) is the operator's fix.
func (s *Schedules) Park(ctx context.Context, tenant, id string) error {
	return s.dueOnly(ctx, schedParkScript, tenant, id, "park")
}

func (s *Schedules) dueOnly(ctx context.Context, script *rueidis.Lua, tenant, id, what string) error {
	k, err := s.keysOf(tenant, id)
	if err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	if err := script.Exec(ctx, s.c, []string{k.rec, k.due}, []string{k.member}).Error(); err != nil {
		return transient(ErrRedis, what+" due member of "+k.rec, err)
	}
	return nil
}

// StreamEntry is one stream entry as FindInStream hands it to its matcher.
type StreamEntry struct {
	ID     string
	Fields map[string]string
}

// FindInStream pages through stream from the entry id <fromMS>-0 to its end, at most limit
// entries, and reports whether match accepted one. complete is false when it stopped at limit
// first. It is how a takeover tells whether a claimed start is already enqueued: the task
// stream's ids are Redis-clock milliseconds, like the claim's times.
func (s *Schedules) FindInStream(ctx context.Context, stream string, fromMS int64, limit int, match func(StreamEntry) bool) (found, complete bool, err error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	const page = 500
	start := strconv.FormatInt(max(fromMS, 0), 10) + "-0"
	for seen := 0; seen < limit; {
		entries, err := s.c.Do(ctx, s.c.B().Xrange().Key(stream).Start(start).End("+").Count(page).Build()).AsXRange()
		if err != nil {
			return false, false, transient(ErrRedis, "scan "+stream, err)
		}
		for _, e := range entries {
			if match(StreamEntry{ID: e.ID, Fields: e.FieldValues}) {
				return true, true, nil
			}
		}
		seen += len(entries)
		if len(entries) < page {
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
