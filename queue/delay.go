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

	"plaita/engine/state"
	"plaita/internal/callctx"
	"plaita/internal/tracing"
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
	// TraceParent and TraceState are the execution's trace (state.Execution's), which the
	// resume it sends continues. Like every field they are a pure function of the suspended
	// state; absent for an execution that has no trace, so its member is what it always was.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// Trace is the execution's trace context the entry carries.
func (e DelayEntry) Trace() tracing.Parent {
	return tracing.Parent{TraceParent: e.TraceParent, TraceState: e.TraceState}
}

// DelayScheduledKey is the ZSET of the delay queue named name (PLAITA_DELAY_QUEUE).
func DelayScheduledKey(name string) string { return name + ":scheduled" }

// DelayAttemptsKey and DelayDeadKey are the delay queue's failure bookkeeping (see above).
func DelayAttemptsKey(name string) string { return name + ":attempts" }
func DelayDeadKey(name string) string     { return name + ":dead" }

// Delay is the delay queue of one deployment. It is safe for concurrent use.
type Delay struct {
	d    DelayDriver
	name string
}

// NewDelay returns the delay queue named name (PLAITA_DELAY_QUEUE) over driver d. An empty
// name is an error, never a key ":scheduled".
func NewDelay(d DelayDriver, name string) (*Delay, error) {
	if d == nil {
		return nil, errors.New("queue.NewDelay: driver is required")
	}
	if name == "" {
		return nil, errors.New("queue.NewDelay: empty delay queue name (PLAITA_DELAY_QUEUE)")
	}
	return &Delay{d: d, name: name}, nil
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
	if err := d.d.Schedule(ctx, d.name, m, at); err != nil {
		return fmt.Errorf("delay queue %s: schedule %s of %s: %w", d.name, e.ResumeType, e.ExecutionID, err)
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
		ResumeType: env.ResumeType, Node: w.Node, Due: w.Due.UTC(), TraceParent: env.TraceParent, TraceState: env.TraceState}
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
		ExecutionID: e.ExecutionID, ResumeType: e.ResumeType, ResumeData: data, SourceMessageID: e.CarrierID(),
		TraceParent: e.TraceParent, TraceState: e.TraceState}
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

// moveItem is one due member and what the pass does with it.
type moveItem struct {
	MoveItem
	entry DelayEntry
	dead  *DelayDeadRecord
}

// MoveDue sends up to o.Batch members due at now: each one's resume (DelayEntry.Resume,
// stamped with the mover's generations) is added to o.Stream and the member removed, at most
// once across movers (DelayDriver.Move). A member that cannot be sent goes to :dead at once.
//
// Only a failure to read the queue is an error; what happened to each member is in the report.
func (d *Delay) MoveDue(ctx context.Context, now time.Time, o MoveOptions) (MoveReport, error) {
	o = o.withDefaults()
	if o.Stream == "" {
		return MoveReport{}, fmt.Errorf("delay queue %s: move: %w: empty stream name", d.name, ErrInvalidEnvelope)
	}
	ctx, cancel := callctx.Bounded(ctx, delayOpTimeout)
	defer cancel()
	due, err := d.d.Due(ctx, d.name, now, o.Batch)
	if err != nil {
		return MoveReport{}, fmt.Errorf("delay queue %s: read due members: %w", d.name, err)
	}
	rep := MoveReport{Full: len(due) == o.Batch}
	if len(due) == 0 {
		return rep, nil
	}
	items := make([]moveItem, len(due))
	plain := make([]MoveItem, len(due))
	for i, member := range due {
		if items[i], err = d.prepare(member, now, o); err != nil {
			return rep, err
		}
		plain[i] = items[i].MoveItem
	}
	res, err := d.d.Move(ctx, d.name, o.Stream, now, o, plain)
	if err != nil {
		return rep, fmt.Errorf("delay queue %s: move due members: %w", d.name, err)
	}
	if len(res) != len(items) {
		return rep, fmt.Errorf("delay queue %s: move answered %d results for %d members", d.name, len(res), len(items))
	}
	for i, r := range res {
		it := items[i]
		switch r.Code {
		case MoveSkipped:
			rep.Skipped++
		case MoveSent:
			rep.Fired = append(rep.Fired, Fired{Entry: it.entry, MessageID: r.ID, Late: now.Sub(it.entry.Due)})
		case MoveRetried:
			rep.Retried = append(rep.Retried, Retried{Member: it.Member, Attempts: r.Attempts, Err: r.Err})
		case MoveBuried:
			rec := it.dead
			if rec == nil {
				rec = &DelayDeadRecord{Reason: DelayReasonEnqueueFailed, Detail: r.Err, Attempts: r.Attempts, At: now.UTC()}
			}
			rep.Dead = append(rep.Dead, DelayDead{Member: it.Member, Record: *rec})
		default:
			rep.Retried = append(rep.Retried, Retried{Member: it.Member, Err: r.Err})
		}
	}
	return rep, nil
}

// prepare decodes a member and builds its resume, or the dead record of a member that cannot
// be sent.
func (d *Delay) prepare(member string, now time.Time, o MoveOptions) (moveItem, error) {
	it := moveItem{MoveItem: MoveItem{Member: member}}
	bad := func(err error) (moveItem, error) {
		it.dead = &DelayDeadRecord{Reason: DelayReasonMalformed, Detail: err.Error(), At: now.UTC()}
		rec, err := json.Marshal(it.dead)
		if err != nil {
			return it, fmt.Errorf("delay queue %s: encode dead record: %w", d.name, err)
		}
		it.Dead = string(rec)
		return it, nil
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
	it.Payload = string(payload)
	return it, nil
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
	st, err := d.d.Stats(ctx, d.name, now)
	if err != nil {
		return DelayStats{}, fmt.Errorf("delay queue %s: stats: %w", d.name, err)
	}
	return st, nil
}

// Soonest reads up to limit members of the queue, the soonest first (due or not), and decodes
// them. A member that does not decode is read (counted in read) but left out of entries: the
// mover gives it up when it is due.
func (d *Delay) Soonest(ctx context.Context, limit int) (entries []DelayEntry, read int, err error) {
	ctx, cancel := callctx.Bounded(ctx, delayOpTimeout)
	defer cancel()
	// No score is past MaxDelayDueMillis (Schedule and Reschedule refuse a later time), so the
	// members due then are all of them, in score order.
	members, err := d.d.Due(ctx, d.name, time.UnixMilli(MaxDelayDueMillis), max(limit, 1))
	if err != nil {
		return nil, 0, fmt.Errorf("delay queue %s: read members: %w", d.name, err)
	}
	for _, m := range members {
		if e, err := ParseDelayEntry(m); err == nil {
			entries = append(entries, e)
		}
	}
	return entries, len(members), nil
}

// Wakes reports whether e is the wake-up of st's current suspension: st is suspended at e's
// node, with e's due time (to the millisecond, the score's precision), in a kind e's resume
// type ends (continue: a delay; timeout: a wait for an event or an approval). An entry that
// does not is stale — the timeout of a wait or an approval already answered, the entry of an
// execution cancelled or deleted since: the delay role still sends it when due and the worker
// acknowledges it as a no-op (roles/worker/stale.go, whose rule for a suspended state this is).
// A nil st (no state) is woken by nothing.
func (e DelayEntry) Wakes(st *state.Execution) bool {
	if st == nil || st.Status != state.Suspended || st.Suspend == nil {
		return false
	}
	s := st.Suspend
	if s.Node != e.Node || s.Due == nil || s.Due.UnixMilli() != e.Due.UnixMilli() {
		return false
	}
	return EndsSuspension(e.ResumeType, s.Kind)
}

// EndsSuspension reports whether a delay-queue resume of type rt ends a suspension of kind: a
// continue ends a delay, a timeout a wait or an approval. The worker's check of a wake-up it
// received (roles/worker) and status's count of stale entries read the one rule.
func EndsSuspension(rt state.ResumeType, kind string) bool {
	switch rt {
	case state.ResumeContinue:
		return kind == state.SuspendDelay
	case state.ResumeTimeout:
		return kind == state.SuspendEvent || kind == state.SuspendApproval
	}
	return false
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
	at, scheduled, attempts, dead, err := d.d.Lookup(ctx, d.name, m)
	if err != nil {
		return DelayLookup{}, fmt.Errorf("delay queue %s: lookup: %w", d.name, err)
	}
	l := DelayLookup{Scheduled: scheduled, At: at, Attempts: attempts}
	if dead != "" {
		l.Dead = decodeDeadRecord(dead)
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
	m, err := d.d.Dead(ctx, d.name)
	if err != nil {
		return nil, fmt.Errorf("delay queue %s: list dead: %w", d.name, err)
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
