package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine/state"
	"plaita/internal/callctx"
	"plaita/model"
)

// Delay queue (docs/wakeups.md, docs/delay.md): the ZSET <PLAITA_DELAY_QUEUE>:scheduled,
// shared by all tenants, of resumes due at a time — a delay node's continue, a wait_event or
// approval timeout. Score = due time in Unix milliseconds; member = the compact JSON of a
// DelayEntry. The worker schedules; the delay role's mover (MoveDue) takes the due members,
// enqueues their resumes on the task stream and removes them. Beside :scheduled:
//
//	<name>:attempts  HASH member → failed enqueues so far (cleared when the member leaves)
//	<name>:dead      HASH member → DelayDeadRecord JSON (why and when it was given up)
//
// A member that cannot be sent (not a DelayEntry, or an entry no worker could run) goes to
// :dead at once; one whose XADD fails is retried later (its score moves on, so it never holds
// up the members behind it) and goes to :dead after MaxAttempts failures.

// DelayEntry is one member of the delay queue. Its JSON (fields in this order) is the member
// itself, so scheduling the same entry twice leaves one member.
type DelayEntry struct {
	ExecutionID string           `json:"execution_id"`
	TenantID    string           `json:"tenant_id"` // "default" for the default tenant
	FlowID      string           `json:"flow_id"`
	FlowVersion string           `json:"flow_version"`
	ResumeType  state.ResumeType `json:"resume_type"` // continue (delay) | timeout (event, approval)
	Node        string           `json:"node"`
	// Due is the due time (the score as a time), written in UTC with nanoseconds.
	Due time.Time `json:"due"`
}

// DelayScheduledKey is the ZSET of the delay queue named name (PLAITA_DELAY_QUEUE).
func DelayScheduledKey(name string) string { return name + ":scheduled" }

// DelayAttemptsKey and DelayDeadKey are the delay queue's failure bookkeeping (see above).
func DelayAttemptsKey(name string) string { return name + ":attempts" }
func DelayDeadKey(name string) string     { return name + ":dead" }

// Delay is the delay queue of one deployment. It is safe for concurrent use.
type Delay struct {
	c    rueidis.Client
	name string
}

// NewDelay returns the delay queue named name (PLAITA_DELAY_QUEUE) over client c. An empty
// name is an error, never a key ":scheduled".
func NewDelay(c rueidis.Client, name string) (*Delay, error) {
	if c == nil {
		return nil, errors.New("queue.NewDelay: client is required")
	}
	if name == "" {
		return nil, errors.New("queue.NewDelay: empty delay queue name (PLAITA_DELAY_QUEUE)")
	}
	return &Delay{c: c, name: name}, nil
}

// Name is the queue's configured name; ScheduledKey, AttemptsKey and DeadKey its keys.
func (d *Delay) Name() string         { return d.name }
func (d *Delay) ScheduledKey() string { return DelayScheduledKey(d.name) }
func (d *Delay) AttemptsKey() string  { return DelayAttemptsKey(d.name) }
func (d *Delay) DeadKey() string      { return DelayDeadKey(d.name) }

// delayOpTimeout bounds one call whose context has no deadline (callctx.Bounded).
const delayOpTimeout = 10 * time.Second

// member is the entry's JSON as the queue stores it (due in UTC).
func (e DelayEntry) member() (string, error) {
	e.Due = e.Due.UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("encode delay entry of %s: %w", e.ExecutionID, err)
	}
	return string(b), nil
}

// Bounds of a due time the queue takes. The score is Unix milliseconds in a float64 and the
// member writes the due time as JSON: years 0 to 9999 encode, and a time before 1970 is what an
// unset or wrapped-around time looks like (0001-01-01 is the zero time, which ParseWakeup and
// ParseDelayEntry read as "no due time"), never a schedule. The engine bounds what a flow asks
// for far tighter (engine.MaxWaitSeconds, docs/flows.md); these are the queue's own.
const (
	MinDelayDueMillis = 0               // 1970-01-01T00:00:00Z
	MaxDelayDueMillis = 253402300799999 // 9999-12-31T23:59:59.999Z
)

// DueRangeError is a due time the delay queue cannot hold: Reason says which bound it is past,
// for a reader (the wake-up report shows it as it is). It is an ErrBadDelayEntry.
type DueRangeError struct{ Reason string }

func (e *DueRangeError) Error() string { return ErrBadDelayEntry.Error() + ": " + e.Reason }
func (e *DueRangeError) Unwrap() error { return ErrBadDelayEntry }

// CheckDelayDue says whether t can be a due time on the delay queue: nil, or a *DueRangeError
// naming the bound it is past.
func CheckDelayDue(t time.Time) error {
	lo, hi := time.UnixMilli(MinDelayDueMillis).UTC(), time.UnixMilli(MaxDelayDueMillis).UTC()
	switch {
	case t.IsZero():
		return &DueRangeError{Reason: fmt.Sprintf("due time %s is the zero time", t.UTC().Format(time.RFC3339))}
	case t.Before(lo):
		return &DueRangeError{Reason: fmt.Sprintf("due time %s is before %s", t.UTC().Format(time.RFC3339Nano), lo.Format(time.RFC3339))}
	case t.After(hi):
		return &DueRangeError{Reason: fmt.Sprintf("due time %s is after %s", t.UTC().Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))}
	}
	return nil
}

// check refuses an entry no worker could schedule or run: no execution id or resume type, or a
// due time outside the queue's bounds. The error is an ErrBadDelayEntry: scheduling the same
// entry again cannot succeed.
func (e DelayEntry) check() error {
	if e.ExecutionID == "" || e.ResumeType == "" {
		return fmt.Errorf("%w: it needs an execution id and a resume type: %+v", ErrBadDelayEntry, e)
	}
	if err := CheckDelayDue(e.Due); err != nil {
		return fmt.Errorf("%w (execution %s, node %q)", err, e.ExecutionID, e.Node)
	}
	return nil
}

// Schedule adds e at its due time. Idempotent: the member is a pure function of e. An entry
// check refuses (no execution id or resume type, a due time out of bounds) is an
// ErrBadDelayEntry and nothing is sent.
func (d *Delay) Schedule(ctx context.Context, e DelayEntry) error {
	if err := e.check(); err != nil {
		return fmt.Errorf("delay queue %s: schedule: %w", d.name, err)
	}
	return d.scheduleAt(ctx, e, e.Due)
}

// Reschedule puts e back at time at instead of its due time (the member stays the same: it
// still names the suspension it was scheduled for). The worker uses it for a wake-up that
// arrived while the execution's lease was held. Refusals are those of Schedule, and a time at
// out of bounds.
func (d *Delay) Reschedule(ctx context.Context, e DelayEntry, at time.Time) error {
	err := e.check()
	if err == nil {
		err = CheckDelayDue(at)
	}
	if err != nil {
		return fmt.Errorf("delay queue %s: reschedule: %w", d.name, err)
	}
	return d.scheduleAt(ctx, e, at)
}

func (d *Delay) scheduleAt(ctx context.Context, e DelayEntry, at time.Time) error {
	m, err := e.member()
	if err != nil {
		return fmt.Errorf("delay queue %s: %w", d.name, err)
	}
	ctx, cancel := callctx.Bounded(ctx, delayOpTimeout)
	defer cancel()
	key := d.ScheduledKey()
	if err := d.c.Do(ctx, d.c.B().Zadd().Key(key).ScoreMember().ScoreMember(float64(at.UnixMilli()), m).Build()).Error(); err != nil {
		return fmt.Errorf("%w: delay queue %s: schedule %s of %s: %w", ErrRedis, key, e.ResumeType, e.ExecutionID, err)
	}
	return nil
}

// ---- the resume a due entry sends ----

// WakeupSource is the "wakeup" field of the resume data of every resume the delay queue
// sends: it tells such a resume apart from one an operator or another producer sent.
const WakeupSource = "delay"

// Wakeup is the resume data of a resume the delay queue sent: the suspension it was scheduled
// for. A resume is a hint; the worker compares the mark with the execution's current
// suspension and drops a stale one (an entry of an earlier suspension, a duplicate).
type Wakeup struct {
	Source string    `json:"wakeup"` // WakeupSource
	Node   string    `json:"node"`
	Due    time.Time `json:"due"`
}

// ErrBadWakeup: a resume says it comes from the delay queue but its mark does not decode.
var ErrBadWakeup = model.New(model.Invalid, "", "malformed delay wake-up mark")

// ParseWakeup reads the delay-queue mark of a task. ok is false for anything else: a start, a
// resume of another type, resume data without the mark. A mark that is there but does not
// decode (no node, no due time) is ok with an ErrBadWakeup error.
func ParseWakeup(env Envelope) (w Wakeup, ok bool, err error) {
	if env.Kind != KindResume || (env.ResumeType != state.ResumeContinue && env.ResumeType != state.ResumeTimeout) ||
		len(env.ResumeData) == 0 {
		return Wakeup{}, false, nil
	}
	var probe struct {
		Source any `json:"wakeup"`
	}
	if json.Unmarshal(env.ResumeData, &probe) != nil || probe.Source != WakeupSource {
		return Wakeup{}, false, nil
	}
	if err := json.Unmarshal(env.ResumeData, &w); err != nil {
		return Wakeup{}, true, fmt.Errorf("%w: %w", ErrBadWakeup, err)
	}
	if w.Node == "" || w.Due.IsZero() {
		return Wakeup{}, true, fmt.Errorf("%w: it needs a node and a due time: %s", ErrBadWakeup, env.ResumeData)
	}
	return w, true, nil
}

// WakeupEntry is the delay-queue member a wake-up resume was sent for (the same JSON: the
// member is a pure function of these fields).
func WakeupEntry(env Envelope, w Wakeup) DelayEntry {
	return DelayEntry{ExecutionID: env.ExecutionID, TenantID: env.Tenant(), FlowID: env.FlowID, FlowVersion: env.FlowVersion,
		ResumeType: env.ResumeType, Node: w.Node, Due: w.Due.UTC()}
}

// CarrierID is the stable identity of the resume an entry sends (its source_message_id): the
// same for every copy of it, so the worker's redelivery logic treats copies as one carrier.
func (e DelayEntry) CarrierID() string {
	return "delay:" + e.ExecutionID + ":" + e.Node + ":" + strconv.FormatInt(e.Due.UnixMilli(), 10)
}

// ErrBadDelayEntry: a member that is not a DelayEntry the queue can send, or an entry Schedule
// refuses to write. Permanent: the same entry fails the same way again.
var ErrBadDelayEntry = model.New(model.Invalid, "", "bad delay queue entry")

// ParseDelayEntry decodes one member. Unknown fields are tolerated (a newer worker may add
// some); a member that is not a JSON object, lacks the execution id, node or due time, or names
// a resume type the queue does not send (continue, timeout) is ErrBadDelayEntry.
func ParseDelayEntry(member string) (DelayEntry, error) {
	var e DelayEntry
	if err := json.Unmarshal([]byte(member), &e); err != nil {
		return DelayEntry{}, fmt.Errorf("%w: not a delay entry: %w", ErrBadDelayEntry, err)
	}
	switch {
	case e.ExecutionID == "":
		return e, fmt.Errorf("%w: no execution_id", ErrBadDelayEntry)
	case e.ResumeType != state.ResumeContinue && e.ResumeType != state.ResumeTimeout:
		return e, fmt.Errorf("%w: resume_type %q (the delay queue sends continue or timeout)", ErrBadDelayEntry, e.ResumeType)
	case e.Node == "":
		return e, fmt.Errorf("%w: no node", ErrBadDelayEntry)
	case e.Due.IsZero():
		return e, fmt.Errorf("%w: no due time", ErrBadDelayEntry)
	}
	return e, nil
}

// Resume is the task e sends when it is due: a resume of its type whose resume data is the
// wake-up mark, with CarrierID as source_message_id. It is validated like every enqueued
// envelope (the execution id, the tenant); an entry that fails is ErrBadDelayEntry.
func (e DelayEntry) Resume() (Envelope, error) {
	data, err := json.Marshal(Wakeup{Source: WakeupSource, Node: e.Node, Due: e.Due.UTC()})
	if err != nil {
		return Envelope{}, fmt.Errorf("%w: %w", ErrBadDelayEntry, err)
	}
	env := Envelope{SchemaVersion: SchemaVersion, Kind: KindResume, TenantID: e.TenantID, FlowID: e.FlowID, FlowVersion: e.FlowVersion,
		ExecutionID: e.ExecutionID, ResumeType: e.ResumeType, ResumeData: data, SourceMessageID: e.CarrierID()}
	if err := env.Validate(); err != nil {
		return Envelope{}, fmt.Errorf("%w: %w", ErrBadDelayEntry, err)
	}
	return env, nil
}

// ---- the mover ----

// Reasons a member is given up (DelayDeadRecord.Reason).
const (
	DelayReasonMalformed     = "malformed"      // not a DelayEntry the queue can send
	DelayReasonEnqueueFailed = "enqueue_failed" // its XADD failed MaxAttempts times
)

// Defaults of MoveOptions.
const (
	DefaultMoveBatch   = 100
	DefaultMaxAttempts = 5
	DefaultRetryBase   = time.Second      // the first retry of a failed enqueue; doubled per attempt
	DefaultRetryMax    = 30 * time.Second // the longest wait between two attempts
	// ClusterClaimLease is how far a mover in a Redis Cluster pushes a member it is sending
	// (see MoveDue): should it die before removing it, the member comes due again that much
	// later and is sent again.
	ClusterClaimLease = 30 * time.Second
)

// MoveOptions say where due entries go and how failed enqueues are retried.
type MoveOptions struct {
	Stream      string      // the task stream (PLAITA_QUEUE_NAME)
	Generations Generations // the mover's config generations, stamped on every resume
	EffectiveAt time.Time   // its config_effective_at
	Batch       int         // members taken per pass (DefaultMoveBatch when < 1)
	MaxAttempts int         // failed enqueues before a member goes to :dead (DefaultMaxAttempts when < 1)
	RetryBase   time.Duration
	RetryMax    time.Duration
}

func (o MoveOptions) withDefaults() MoveOptions {
	if o.Batch < 1 {
		o.Batch = DefaultMoveBatch
	}
	if o.MaxAttempts < 1 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryBase <= 0 {
		o.RetryBase = DefaultRetryBase
	}
	if o.RetryMax < o.RetryBase {
		o.RetryMax = max(DefaultRetryMax, o.RetryBase)
	}
	return o
}

// Fired is an entry whose resume was enqueued.
type Fired struct {
	Entry     DelayEntry
	MessageID string        // the resume's stream id
	Late      time.Duration // how long after its due time it was sent
}

// Retried is a member whose enqueue failed; it was moved to its next attempt's time.
type Retried struct {
	Member   string
	Attempts int64
	Err      string
}

// DelayDeadRecord is the value of a member in :dead.
type DelayDeadRecord struct {
	Reason   string    `json:"reason"`
	Detail   string    `json:"detail,omitempty"`
	Attempts int64     `json:"attempts"`
	At       time.Time `json:"at"`
}

// DelayDead is one member of :dead.
type DelayDead struct {
	Member string
	Record DelayDeadRecord
}

// MoveReport is what one MoveDue pass did.
type MoveReport struct {
	Fired   []Fired
	Retried []Retried
	Dead    []DelayDead
	// Skipped counts members that were due when read but gone or no longer due when the move
	// ran: another mover took them, or they were rescheduled.
	Skipped int
	// Full: the pass took a whole batch, so more members may be due now.
	Full bool
}

// moveScript sends due members on a single server (in a Redis Cluster its keys would span
// slots: see MoveDue), each one atomically: its resume is added to the stream and the member removed in the
// same step, so a crash never sends it twice and two movers never both send it (the second
// finds it gone). A member whose XADD fails (OOM, a stream key of the wrong type …) has its
// failure counted in :attempts and its score pushed to its next attempt, or past MaxAttempts
// is moved to :dead; a member the caller found malformed goes to :dead at once.
// KEYS: 1 scheduled, 2 attempts, 3 dead, 4 task stream.
// ARGV: 1 now (ms), 2 max attempts, 3 retry base (ms), 4 retry max (ms), 5 now (RFC 3339),
// then per member: op ('m' send | 'd' dead), the member, the envelope JSON ('m') or the dead
// record JSON ('d').
// Returns per member: {0} gone or not due | {1, stream id} sent | {2, error, attempts}
// retried later | {3} dead (malformed) | {3, error, attempts} dead (enqueue failed) |
// {4, error} the failure could not even be counted (OOM): left as it is for the next pass.
var moveScript = rueidis.NewLuaScript(`
local out = {}
local now = tonumber(ARGV[1])
for i = 6, #ARGV, 3 do
  local op, member, arg = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local score = redis.call('ZSCORE', KEYS[1], member)
  if not score or tonumber(score) > now then
    out[#out + 1] = {0}
  elseif op == 'd' then
    redis.call('HSET', KEYS[3], member, arg)
    redis.call('ZREM', KEYS[1], member)
    redis.call('HDEL', KEYS[2], member)
    out[#out + 1] = {3}
  else
    local id = redis.pcall('XADD', KEYS[4], '*', 'payload', arg)
    if type(id) ~= 'table' then
      redis.call('ZREM', KEYS[1], member)
      redis.call('HDEL', KEYS[2], member)
      out[#out + 1] = {1, id}
    else
      local e = id.err or 'error'
      local n = redis.pcall('HINCRBY', KEYS[2], member, 1)
      if type(n) == 'table' then
        out[#out + 1] = {4, e}
      elseif n >= tonumber(ARGV[2]) then
        redis.call('HSET', KEYS[3], member, cjson.encode({reason = 'enqueue_failed', detail = e, attempts = n, at = ARGV[5]}))
        redis.call('ZREM', KEYS[1], member)
        redis.call('HDEL', KEYS[2], member)
        out[#out + 1] = {3, e, n}
      else
        local wait = math.min(tonumber(ARGV[3]) * 2 ^ (n - 1), tonumber(ARGV[4]))
        redis.call('ZADD', KEYS[1], 'XX', string.format('%d', now + wait), member)
        out[#out + 1] = {2, e, n}
      end
    end
  end
end
return out
`)

// claimScript is a Cluster mover's first step for one member (the ZSET alone: one slot): a
// member still due is pushed ClusterClaimLease into the future, so no other mover takes it
// while this one sends it. KEYS: 1 scheduled. ARGV: 1 member, 2 now (ms), 3 lease end (ms).
// Returns 1 when claimed, 0 when gone or not due.
var claimScript = rueidis.NewLuaScript(`
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', ARGV[3], ARGV[1])
return 1
`)

// moveItem is one due member and what the pass does with it.
type moveItem struct {
	member  string
	entry   DelayEntry
	payload string // 'm': the envelope JSON
	dead    *DelayDeadRecord
}

// MoveDue sends up to o.Batch members due at now: each one's resume (DelayEntry.Resume,
// stamped with the mover's generations) is added to o.Stream and the member removed.
//
// On a single server each member moves atomically (moveScript). In a Redis Cluster the ZSET
// and the stream live in different slots and no script may touch both, so a member moves in
// steps: claim it (claimScript: pushed ClusterClaimLease ahead), XADD, ZREM. A mover that dies
// after the claim loses nothing (the member comes due again after the lease); one that dies
// between XADD and ZREM sends the resume twice — the worker drops the second as a stale or
// duplicate wake-up. :attempts and :dead are separate commands there too.
//
// Only a failure to read the queue is an error; what happened to each member is in the report.
func (d *Delay) MoveDue(ctx context.Context, now time.Time, o MoveOptions) (MoveReport, error) {
	o = o.withDefaults()
	if o.Stream == "" {
		return MoveReport{}, fmt.Errorf("delay queue %s: move: %w: empty stream name", d.name, ErrInvalidEnvelope)
	}
	ctx, cancel := callctx.Bounded(ctx, delayOpTimeout)
	defer cancel()
	c, key, nowMs := d.c, d.ScheduledKey(), now.UnixMilli()
	due, err := c.Do(ctx, c.B().Zrange().Key(key).Min("-inf").Max(strconv.FormatInt(nowMs, 10)).Byscore().
		Limit(0, int64(o.Batch)).Withscores().Build()).AsZScores()
	if err != nil {
		return MoveReport{}, fmt.Errorf("%w: delay queue %s: read due members: %w", ErrRedis, key, err)
	}
	rep := MoveReport{Full: len(due) == o.Batch}
	if len(due) == 0 {
		return rep, nil
	}
	items := make([]moveItem, len(due))
	for i, z := range due {
		items[i] = d.prepare(z.Member, now, o)
	}
	if c.Mode() == rueidis.ClientModeCluster {
		d.moveStepwise(ctx, now, o, items, &rep)
		return rep, nil
	}
	return rep, d.moveAtomically(ctx, now, o, items, &rep)
}

// prepare decodes a member and builds its resume, or the dead record of a member that cannot
// be sent.
func (d *Delay) prepare(member string, now time.Time, o MoveOptions) moveItem {
	it := moveItem{member: member}
	bad := func(err error) moveItem {
		it.dead = &DelayDeadRecord{Reason: DelayReasonMalformed, Detail: err.Error(), At: now.UTC()}
		return it
	}
	e, err := ParseDelayEntry(member)
	if err != nil {
		return bad(err)
	}
	it.entry = e
	env, err := e.Resume()
	if err != nil {
		return bad(err)
	}
	env.Stamp(o.Generations, o.EffectiveAt)
	payload, err := env.encode(now)
	if err != nil {
		return bad(err)
	}
	it.payload = string(payload)
	return it
}

func (d *Delay) moveAtomically(ctx context.Context, now time.Time, o MoveOptions, items []moveItem, rep *MoveReport) error {
	args := []string{strconv.FormatInt(now.UnixMilli(), 10), strconv.Itoa(o.MaxAttempts),
		strconv.FormatInt(o.RetryBase.Milliseconds(), 10), strconv.FormatInt(o.RetryMax.Milliseconds(), 10),
		now.UTC().Format(time.RFC3339Nano)}
	for _, it := range items {
		if it.dead != nil {
			rec, err := json.Marshal(it.dead)
			if err != nil {
				return fmt.Errorf("delay queue %s: encode dead record: %w", d.name, err)
			}
			args = append(args, "d", it.member, string(rec))
		} else {
			args = append(args, "m", it.member, it.payload)
		}
	}
	res, err := moveScript.Exec(ctx, d.c, []string{d.ScheduledKey(), d.AttemptsKey(), d.DeadKey(), o.Stream}, args).ToArray()
	if err != nil {
		return fmt.Errorf("%w: delay queue %s: move due members: %w", ErrRedis, d.name, err)
	}
	if len(res) != len(items) {
		return fmt.Errorf("delay queue %s: move script answered %d results for %d members", d.name, len(res), len(items))
	}
	for i, r := range res {
		vals, err := r.ToArray()
		if err != nil || len(vals) == 0 {
			return fmt.Errorf("delay queue %s: move script result %d: %v", d.name, i, err)
		}
		code, _ := vals[0].AsInt64()
		str := func(j int) string {
			if j >= len(vals) {
				return ""
			}
			s, _ := vals[j].ToString()
			return s
		}
		num := func(j int) int64 {
			if j >= len(vals) {
				return 0
			}
			n, _ := vals[j].AsInt64()
			return n
		}
		it := items[i]
		switch code {
		case 0:
			rep.Skipped++
		case 1:
			rep.Fired = append(rep.Fired, Fired{Entry: it.entry, MessageID: str(1), Late: now.Sub(it.entry.Due)})
		case 2:
			rep.Retried = append(rep.Retried, Retried{Member: it.member, Attempts: num(2), Err: str(1)})
		case 3:
			rec := it.dead
			if rec == nil {
				rec = &DelayDeadRecord{Reason: DelayReasonEnqueueFailed, Detail: str(1), Attempts: num(2), At: now.UTC()}
			}
			rep.Dead = append(rep.Dead, DelayDead{Member: it.member, Record: *rec})
		default:
			rep.Retried = append(rep.Retried, Retried{Member: it.member, Err: str(1)})
		}
	}
	return nil
}

// moveStepwise is MoveDue in a Redis Cluster (see there); every failure is per member.
func (d *Delay) moveStepwise(ctx context.Context, now time.Time, o MoveOptions, items []moveItem, rep *MoveReport) {
	c, key, nowMs := d.c, d.ScheduledKey(), now.UnixMilli()
	lease := strconv.FormatInt(now.Add(ClusterClaimLease).UnixMilli(), 10)
	for _, it := range items {
		n, err := claimScript.Exec(ctx, c, []string{key}, []string{it.member, strconv.FormatInt(nowMs, 10), lease}).AsInt64()
		if err != nil {
			rep.Retried = append(rep.Retried, Retried{Member: it.member, Err: "claim: " + err.Error()})
			continue
		}
		if n == 0 {
			rep.Skipped++
			continue
		}
		if it.dead != nil {
			if err := d.bury(ctx, it.member, *it.dead); err != nil {
				rep.Retried = append(rep.Retried, Retried{Member: it.member, Err: err.Error()})
				continue
			}
			rep.Dead = append(rep.Dead, DelayDead{Member: it.member, Record: *it.dead})
			continue
		}
		id, xerr := c.Do(ctx, c.B().Xadd().Key(o.Stream).Id("*").FieldValue().FieldValue(PayloadField, it.payload).Build()).ToString()
		if xerr == nil {
			rep.Fired = append(rep.Fired, Fired{Entry: it.entry, MessageID: id, Late: now.Sub(it.entry.Due)})
			// A failure here leaves the claimed member to come due again: sent twice, which
			// the worker drops as a duplicate wake-up.
			for _, r := range c.DoMulti(ctx, c.B().Zrem().Key(key).Member(it.member).Build(),
				c.B().Hdel().Key(d.AttemptsKey()).Field(it.member).Build()) {
				_ = r.Error()
			}
			continue
		}
		n, err = c.Do(ctx, c.B().Hincrby().Key(d.AttemptsKey()).Field(it.member).Increment(1).Build()).AsInt64()
		switch {
		case err != nil: // not even counted: the claim lease brings it back
			rep.Retried = append(rep.Retried, Retried{Member: it.member, Err: xerr.Error()})
		case n >= int64(o.MaxAttempts):
			rec := DelayDeadRecord{Reason: DelayReasonEnqueueFailed, Detail: xerr.Error(), Attempts: n, At: now.UTC()}
			if err := d.bury(ctx, it.member, rec); err != nil {
				rep.Retried = append(rep.Retried, Retried{Member: it.member, Attempts: n, Err: xerr.Error()})
				continue
			}
			rep.Dead = append(rep.Dead, DelayDead{Member: it.member, Record: rec})
		default:
			wait := min(o.RetryBase*time.Duration(1<<min(n-1, 30)), o.RetryMax)
			_ = c.Do(ctx, c.B().Zadd().Key(key).Xx().ScoreMember().ScoreMember(float64(now.Add(wait).UnixMilli()), it.member).Build()).Error()
			rep.Retried = append(rep.Retried, Retried{Member: it.member, Attempts: n, Err: xerr.Error()})
		}
	}
}

// bury moves a claimed member to :dead in a cluster: the record first, so a crash in between
// leaves a member that is buried again, never one that is lost.
func (d *Delay) bury(ctx context.Context, member string, rec DelayDeadRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("delay queue %s: encode dead record: %w", d.name, err)
	}
	c := d.c
	if err := c.Do(ctx, c.B().Hset().Key(d.DeadKey()).FieldValue().FieldValue(member, string(b)).Build()).Error(); err != nil {
		return fmt.Errorf("%w: delay queue %s: bury: %w", ErrRedis, d.DeadKey(), err)
	}
	for _, r := range c.DoMulti(ctx, c.B().Zrem().Key(d.ScheduledKey()).Member(member).Build(),
		c.B().Hdel().Key(d.AttemptsKey()).Field(member).Build()) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("%w: delay queue %s: bury: %w", ErrRedis, d.name, err)
		}
	}
	return nil
}

// ---- reading ----

// DelayStats is the queue at a glance (the delay role's gauges).
type DelayStats struct {
	Scheduled int64     // members waiting
	Due       int64     // of which due now (the backlog)
	Dead      int64     // members given up
	OldestDue time.Time // the earliest score; zero when the queue is empty
}

// Stats reads the queue's size, backlog at now, dead count and earliest score in one round
// trip.
func (d *Delay) Stats(ctx context.Context, now time.Time) (DelayStats, error) {
	ctx, cancel := callctx.Bounded(ctx, delayOpTimeout)
	defer cancel()
	c, key := d.c, d.ScheduledKey()
	res := c.DoMulti(ctx, c.B().Zcard().Key(key).Build(),
		c.B().Zcount().Key(key).Min("-inf").Max(strconv.FormatInt(now.UnixMilli(), 10)).Build(),
		c.B().Hlen().Key(d.DeadKey()).Build(),
		c.B().Zrange().Key(key).Min("0").Max("0").Withscores().Build())
	var s DelayStats
	var errs []error
	var err error
	s.Scheduled, err = res[0].AsInt64()
	errs = append(errs, err)
	s.Due, err = res[1].AsInt64()
	errs = append(errs, err)
	s.Dead, err = res[2].AsInt64()
	errs = append(errs, err)
	first, err := res[3].AsZScores()
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return DelayStats{}, fmt.Errorf("%w: delay queue %s: stats: %w", ErrRedis, d.name, err)
	}
	if len(first) > 0 {
		s.OldestDue = time.UnixMilli(int64(first[0].Score)).UTC()
	}
	return s, nil
}

// DelayLookup is where one entry stands in the queue.
type DelayLookup struct {
	Scheduled bool      // the member waits in :scheduled
	At        time.Time // its score: when it is sent (its due time, or a retry's time)
	Attempts  int64     // failed enqueues so far
	Dead      *DelayDeadRecord
}

// Lookup finds entry e (the member is a pure function of it: execution show computes it from
// the state) in :scheduled, :attempts and :dead, in one round trip. A :dead value that does not
// decode is reported with reason "unreadable".
func (d *Delay) Lookup(ctx context.Context, e DelayEntry) (DelayLookup, error) {
	m, err := e.member()
	if err != nil {
		return DelayLookup{}, fmt.Errorf("delay queue %s: %w", d.name, err)
	}
	ctx, cancel := callctx.Bounded(ctx, delayOpTimeout)
	defer cancel()
	c := d.c
	res := c.DoMulti(ctx, c.B().Zscore().Key(d.ScheduledKey()).Member(m).Build(),
		c.B().Hget().Key(d.AttemptsKey()).Field(m).Build(),
		c.B().Hget().Key(d.DeadKey()).Field(m).Build())
	var l DelayLookup
	score, err := res[0].AsFloat64()
	switch {
	case err == nil:
		l.Scheduled, l.At = true, time.UnixMilli(int64(score)).UTC()
	case !rueidis.IsRedisNil(err):
		return DelayLookup{}, fmt.Errorf("%w: delay queue %s: lookup: %w", ErrRedis, d.name, err)
	}
	if n, err := res[1].AsInt64(); err == nil {
		l.Attempts = n
	} else if !rueidis.IsRedisNil(err) {
		return DelayLookup{}, fmt.Errorf("%w: delay queue %s: lookup attempts: %w", ErrRedis, d.name, err)
	}
	raw, err := res[2].ToString()
	switch {
	case err == nil:
		l.Dead = decodeDeadRecord(raw)
	case !rueidis.IsRedisNil(err):
		return DelayLookup{}, fmt.Errorf("%w: delay queue %s: lookup dead: %w", ErrRedis, d.name, err)
	}
	return l, nil
}

func decodeDeadRecord(raw string) *DelayDeadRecord {
	var rec DelayDeadRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil || rec.Reason == "" {
		return &DelayDeadRecord{Reason: "unreadable", Detail: raw}
	}
	return &rec
}

// ListDead returns the members of :dead, oldest first.
func (d *Delay) ListDead(ctx context.Context) ([]DelayDead, error) {
	ctx, cancel := callctx.Bounded(ctx, delayOpTimeout)
	defer cancel()
	m, err := d.c.Do(ctx, d.c.B().Hgetall().Key(d.DeadKey()).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("%w: delay queue %s: list dead: %w", ErrRedis, d.DeadKey(), err)
	}
	out := make([]DelayDead, 0, len(m))
	for member, raw := range m {
		out = append(out, DelayDead{Member: member, Record: *decodeDeadRecord(raw)})
	}
	slices.SortFunc(out, func(a, b DelayDead) int {
		if c := a.Record.At.Compare(b.Record.At); c != 0 {
			return c
		}
		return cmp.Compare(a.Member, b.Member)
	})
	return out, nil
}
