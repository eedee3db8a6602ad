package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"plaita/model"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"
)

// ErrRedis: a Redis call of the queue failed (the connection, a timeout, a server error).
// Every Redis failure the package returns matches it. Transient: the same call later can
// succeed, and nothing may be assumed about a write it was making.
var ErrRedis = model.New(model.Unavailable, "redis_unavailable", "redis call failed (transient)")

// ErrNoGroup is returned by Read and Reclaim when the consumer group (or the stream) does not
// exist; EnsureGroup creates it.
var ErrNoGroup = model.New(model.NotFound, "", "consumer group does not exist")

// Generations are the config generations a producer stamps into an envelope and a worker
// gates on (docs/configuration.md): config_family, config_generation, budget_generation.
type Generations struct {
	Family string
	Config string
	Budget string
}

// Settings are a queue's names and budgets, read once at start (roles build them from the
// configuration).
type Settings struct {
	Stream   string // PLAITA_QUEUE_NAME
	Group    string // PLAITA_CONSUMER_GROUP
	StartID  string // PLAITA_CONSUMER_GROUP_START_ID ("" = "0")
	Consumer string // PLAITA_CONSUMER_NAME
	DLQ      string // PLAITA_DLQ_KEY
	// ClaimMinIdle is PLAITA_CLAIM_MIN_IDLE_MS: how long an entry stays pending before a
	// sibling may reclaim it.
	ClaimMinIdle  time.Duration
	MaxDeliveries int // PLAITA_MAX_DELIVERIES
	DLQMaxLen     int // PLAITA_DLQ_MAX_LEN
	// TaskMaxAge is PLAITA_TASK_MAX_AGE_SECONDS; 0 turns the age gate off.
	TaskMaxAge  time.Duration
	Generations Generations
}

// Queue is one worker's view of the task stream: its consumer group, dead-letter stream and
// delivery budgets. It is safe for concurrent use; set OnDeadLetter and Now before first use.
type Queue struct {
	// OnDeadLetter, when set, is called after every new dead letter (the alert webhook). It runs
	// on the consumer's goroutine: hand the info to a bounded buffer, never block or panic.
	OnDeadLetter func(DeadLetterInfo)
	// Now is the clock of the age gate and of dead-letter records (New sets time.Now; tests
	// replace it before first use).
	Now func() time.Time

	c             rueidis.Client
	log           zerolog.Logger
	stream        string
	group         string
	startID       string
	consumer      string
	dlq           string
	minIdle       time.Duration
	maxDeliveries int
	dlqMaxLen     int
	maxAge        time.Duration
	gens          Generations
	m             counters

	mu            sync.Mutex
	reclaimCursor string              // XPENDING start of the next Reclaim ("-" = from the head)
	sweepCursor   string              // XRANGE start of the next residue sweep
	noted         map[string]struct{} // entries already warned about and counted as gated
}

// maxNoted bounds the memory of gated entries; past it the set starts over (an entry is then
// counted again, which only overstates a counter).
const maxNoted = 10000

// New builds the queue of s and registers its counters on set (never the global set).
func New(c rueidis.Client, s Settings, set *metrics.Set, log zerolog.Logger) (*Queue, error) {
	if c == nil || set == nil {
		return nil, errors.New("queue.New: client and metrics set are required")
	}
	q := &Queue{
		Now:           time.Now,
		c:             c,
		stream:        s.Stream,
		group:         s.Group,
		startID:       s.StartID,
		consumer:      s.Consumer,
		dlq:           s.DLQ,
		minIdle:       s.ClaimMinIdle,
		maxDeliveries: s.MaxDeliveries,
		dlqMaxLen:     s.DLQMaxLen,
		maxAge:        max(s.TaskMaxAge, 0),
		gens:          s.Generations,
		reclaimCursor: "-",
		sweepCursor:   "-",
		noted:         map[string]struct{}{},
	}
	switch {
	case q.stream == "" || q.group == "" || q.dlq == "" || q.consumer == "":
		return nil, fmt.Errorf("queue.New: empty queue (%q), group (%q), DLQ key (%q) or consumer name (%q)", q.stream, q.group, q.dlq, q.consumer)
	case q.stream == q.dlq:
		return nil, fmt.Errorf("queue.New: the DLQ key is the queue itself (%q)", q.dlq)
	case q.maxDeliveries < 1 || q.dlqMaxLen < 1 || q.minIdle < 0:
		return nil, fmt.Errorf("queue.New: max deliveries %d, DLQ max len %d and claim min idle %s must be positive",
			q.maxDeliveries, q.dlqMaxLen, q.minIdle)
	}
	if q.startID == "" {
		q.startID = "0"
	}
	q.log = log.With().Str("queue", q.stream).Str("group", q.group).Logger()
	q.m = newCounters(set, q.stream)
	return q, nil
}

// Stream, Group, Consumer, DLQKey and Generations are the effective names and hashes.
func (q *Queue) Stream() string           { return q.stream }
func (q *Queue) Group() string            { return q.group }
func (q *Queue) Consumer() string         { return q.consumer }
func (q *Queue) DLQKey() string           { return q.dlq }
func (q *Queue) Generations() Generations { return q.gens }

// MaxDeliveries is PLAITA_MAX_DELIVERIES: a message runs at most this many times.
func (q *Queue) MaxDeliveries() int { return q.maxDeliveries }

// Delivery is one stream entry handed to this consumer.
type Delivery struct {
	ID       string // stream entry id
	Consumer string
	// Count is the entry's delivery counter in the group's pending list right after this
	// delivery, this one included: 1 for a first read (XREADGROUP >), the XPENDING count + 1
	// for a reclaimed entry (XCLAIM increments it).
	Count     int64
	Reclaimed bool
	// Payload is the raw "payload" field; HasPayload is false when the entry has none.
	Payload    string
	HasPayload bool
	// Envelope is the decoded task; on a decode error it holds what could be read.
	Envelope Envelope
	// Err is nil, or wraps ErrMalformed or ErrNewerSchema.
	Err error
	// DerivedExecutionID: a legacy start without execution_id got DeterministicExecutionID.
	DerivedExecutionID bool
}

func (q *Queue) delivery(id string, fields map[string]string, consumer string, count int64, reclaimed bool) Delivery {
	d := Delivery{ID: id, Consumer: consumer, Count: count, Reclaimed: reclaimed}
	d.Payload, d.HasPayload = fields[PayloadField]
	if !d.HasPayload {
		d.Err = fmt.Errorf("%w: entry has no %q field", ErrMalformed, PayloadField)
		return d
	}
	d.Envelope, d.DerivedExecutionID, d.Err = Decode(q.stream, id, []byte(d.Payload))
	return d
}

// handOut counts what is handed to the caller.
func (q *Queue) handOut(d Delivery) Delivery {
	if d.Err == nil && d.Envelope.ConfigFamily == "" {
		q.m.legacy.Inc()
	}
	return d
}

// EnsureGroup creates the consumer group at PLAITA_CONSUMER_GROUP_START_ID (and the stream if
// needed). An existing group (BUSYGROUP) is fine. A new group created from 0 on a non-empty
// stream replays every entry in it: that is logged as a WARNING with the count.
func (q *Queue) EnsureGroup(ctx context.Context) error {
	if err := q.CheckKeys(ctx); err != nil {
		return err
	}
	c := q.c
	err := c.Do(ctx, c.B().XgroupCreate().Key(q.stream).Group(q.group).Id(q.startID).Mkstream().Build()).Error()
	if rueidis.IsRedisBusyGroup(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: create consumer group %s on %s: %w", ErrRedis, q.group, q.stream, err)
	}
	ev := q.log.Info()
	if q.startID == "0" || q.startID == "0-0" {
		n, err := c.Do(ctx, c.B().Xlen().Key(q.stream).Build()).AsInt64()
		if err == nil && n > 0 {
			ev = q.log.Warn().Int64("replay_entries", n)
		}
	}
	ev.Str("event", "queue.group_created").Str("start_id", q.startID).
		Msg("consumer group created; a new group on an existing stream replays it from the start id (set PLAITA_CONSUMER_GROUP_START_ID=$ to skip history)")
	return nil
}

// ErrNotAStream: the task stream's or the dead-letter stream's key holds another type — another
// family's key that a queue name reaches (a flow definition under <root>:flow:…, see
// store.Flows.Reserve) — and every XADD to it would fail with WRONGTYPE.
var ErrNotAStream = model.New(model.Conflict, "", "queue key is not a stream")

// CheckKeys checks that the task stream and the dead-letter stream are streams or absent. A
// worker that cannot dead-letter would leave every poisoned message pending for good, so it
// refuses to start instead.
func (q *Queue) CheckKeys(ctx context.Context) error {
	return CheckStreamKeys(ctx, q.c, q.stream, q.dlq)
}

// CheckStreamKeys is CheckKeys for the configured names (what `plaita doctor --redis` runs).
func CheckStreamKeys(ctx context.Context, c rueidis.Client, stream, dlq string) error {
	for _, k := range []struct{ key, name string }{{stream, "PLAITA_QUEUE_NAME"}, {dlq, "PLAITA_DLQ_KEY"}} {
		typ, err := c.Do(ctx, c.B().Type().Key(k.key).Build()).ToString()
		if err != nil {
			return fmt.Errorf("%w: check the type of %s: %w", ErrRedis, k.key, err)
		}
		if typ != "none" && typ != "stream" {
			return fmt.Errorf("%w: %s %q holds a %s, not a stream (another key has that name, such as a flow version "+
				"published under <root>:flow:); choose a %s no other key uses, or move that key away", ErrNotAStream, k.name, k.key, typ, k.name)
		}
	}
	return nil
}

// Read hands up to count new entries to consumer (XREADGROUP >), blocking up to block when
// there are none (block <= 0: do not block). Nothing within block is an empty result, not an
// error. Keep block shorter than ctx's deadline.
func (q *Queue) Read(ctx context.Context, consumer string, count int, block time.Duration) ([]Delivery, error) {
	c := q.c
	if count < 1 {
		count = 1
	}
	xr := c.B().Xreadgroup().Group(q.group, consumer).Count(int64(count))
	var cmd rueidis.Completed
	if block > 0 {
		cmd = xr.Block(max(block.Milliseconds(), 1)).Streams().Key(q.stream).Id(">").Build().UnblockOnCancel()
	} else {
		cmd = xr.Streams().Key(q.stream).Id(">").Build()
	}
	res, err := c.Do(ctx, cmd).AsXRead()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, q.wrapGroupErr("read", err)
	}
	entries := res[q.stream]
	out := make([]Delivery, 0, len(entries))
	for _, e := range entries {
		out = append(out, q.handOut(q.delivery(e.ID, e.FieldValues, consumer, 1, false)))
	}
	return out, nil
}

func (q *Queue) wrapGroupErr(op string, err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "NOGROUP") {
		return fmt.Errorf("%s %s: %w (%v)", op, q.stream, ErrNoGroup, err)
	}
	return fmt.Errorf("%w: %s %s: %w", ErrRedis, op, q.stream, err)
}

// pendingEntry is one row of XPENDING's extended form.
type pendingEntry struct {
	id       string
	consumer string
	idle     time.Duration
	count    int64
}

func (q *Queue) pending(ctx context.Context, start string, count int) ([]pendingEntry, error) {
	c := q.c
	rows, err := c.Do(ctx, c.B().Xpending().Key(q.stream).Group(q.group).Idle(q.minIdle.Milliseconds()).
		Start(start).End("+").Count(int64(count)).Build()).ToArray()
	if err != nil {
		return nil, q.wrapGroupErr("xpending", err)
	}
	out := make([]pendingEntry, 0, len(rows))
	for _, r := range rows {
		p, err := q.pendingRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// pendingRow reads one row of the extended XPENDING reply: id, consumer, idle ms, deliveries.
func (q *Queue) pendingRow(r rueidis.RedisMessage) (pendingEntry, error) {
	f, err := r.ToArray()
	if err != nil || len(f) < 4 {
		return pendingEntry{}, fmt.Errorf("xpending %s: unexpected row: %v", q.stream, err)
	}
	var p pendingEntry
	var idle int64
	p.id, _ = f[0].ToString()
	p.consumer, _ = f[1].ToString()
	idle, _ = f[2].AsInt64()
	p.count, _ = f[3].AsInt64()
	p.idle = time.Duration(idle) * time.Millisecond
	return p, nil
}

// Reclaim takes over up to count entries that other consumers (or this one) left pending for
// at least PLAITA_CLAIM_MIN_IDLE_MS: a consumer that died mid-task.
//
// It does not use XAUTOCLAIM, which claims whatever it scans. It lists idle entries with
// XPENDING (from a cursor kept across calls, like XAUTOCLAIM's), reads their payloads with
// XRANGE, leaves pending (unclaimed, delivery counter untouched) every entry of another
// config_family or budget_generation, and XCLAIMs only the rest. Pending entries whose stream
// entry was deleted are acknowledged away, as XAUTOCLAIM does with its deleted ids.
func (q *Queue) Reclaim(ctx context.Context, consumer string, count int) ([]Delivery, error) {
	c := q.c
	if count < 1 {
		count = 1
	}
	q.mu.Lock()
	start := q.reclaimCursor
	q.mu.Unlock()
	pend, err := q.pending(ctx, start, count)
	if err != nil {
		return nil, err
	}
	next := "-"
	if len(pend) == count {
		next = "(" + pend[len(pend)-1].id
	}
	q.mu.Lock()
	q.reclaimCursor = next
	q.mu.Unlock()
	if len(pend) == 0 {
		return nil, nil
	}

	cmds := make(rueidis.Commands, 0, len(pend))
	for _, p := range pend {
		cmds = append(cmds, c.B().Xrange().Key(q.stream).Start(p.id).End(p.id).Build())
	}
	var accept, deleted []string
	scanned := map[string]Delivery{}
	for i, r := range c.DoMulti(ctx, cmds...) {
		p := pend[i]
		es, err := r.AsXRange()
		if err != nil {
			return nil, fmt.Errorf("%w: xrange %s %s: %w", ErrRedis, q.stream, p.id, err)
		}
		if len(es) == 0 {
			deleted = append(deleted, p.id)
			continue
		}
		d := q.delivery(p.id, es[0].FieldValues, consumer, p.count+1, true)
		if v := q.generationVerdict(d.Envelope, true); v != VerdictRun {
			q.noteGated(d, v)
			continue
		}
		accept = append(accept, p.id)
		scanned[p.id] = d
	}
	if len(deleted) > 0 {
		if err := c.Do(ctx, c.B().Xack().Key(q.stream).Group(q.group).Id(deleted...).Build()).Error(); err != nil {
			q.log.Warn().Err(err).Str("event", "queue.reclaim_deleted").Strs("ids", deleted).Msg("could not drop pending entries whose stream entry is gone")
		} else {
			q.log.Info().Str("event", "queue.reclaim_deleted").Strs("ids", deleted).Msg("dropped pending entries whose stream entry is gone")
		}
	}
	if len(accept) == 0 {
		return nil, nil
	}
	res, err := c.Do(ctx, c.B().Xclaim().Key(q.stream).Group(q.group).Consumer(consumer).
		MinIdleTime(fmt.Sprint(q.minIdle.Milliseconds())).Id(accept...).Build()).ToArray()
	if err != nil {
		return nil, q.wrapGroupErr("xclaim", err)
	}
	out := make([]Delivery, 0, len(res))
	for _, m := range res {
		if m.IsNil() { // Redis < 7 answers nil for an entry deleted meanwhile
			continue
		}
		e, err := m.AsXRangeEntry()
		if err != nil {
			return out, fmt.Errorf("%w: xclaim %s: %w", ErrRedis, q.stream, err)
		}
		d, ok := scanned[e.ID]
		if !ok || e.FieldValues == nil {
			continue
		}
		out = append(out, q.handOut(d))
		q.m.reclaimed.Inc()
	}
	return out, nil
}

// Ack removes a handled entry: XACK and XDEL in one pipeline. A failed XDEL leaves a residue
// entry (acknowledged, still in the stream) for SweepResidue; it is logged, not returned.
func (q *Queue) Ack(ctx context.Context, d Delivery) error {
	c := q.c
	res := c.DoMulti(ctx,
		c.B().Xack().Key(q.stream).Group(q.group).Id(d.ID).Build(),
		c.B().Xdel().Key(q.stream).Id(d.ID).Build())
	if err := res[0].Error(); err != nil {
		return fmt.Errorf("%w: ack %s %s: %w", ErrRedis, q.stream, d.ID, err)
	}
	q.m.acked.Inc()
	if err := res[1].Error(); err != nil {
		q.log.Warn().Err(err).Str("event", "queue.residue").Str("message_id", d.ID).Msg("acknowledged but not deleted; the residue sweeper will remove it")
	}
	return nil
}

// Touch resets the idle time of entries a consumer is still working on, so siblings do not
// reclaim a message whose task runs longer than PLAITA_CLAIM_MIN_IDLE_MS. XCLAIM … JUSTID by
// the owner does not count as a delivery.
func (q *Queue) Touch(ctx context.Context, consumer string, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	c := q.c
	if err := c.Do(ctx, c.B().Xclaim().Key(q.stream).Group(q.group).Consumer(consumer).MinIdleTime("0").
		Id(ids...).Justid().Build()).Error(); err != nil {
		return fmt.Errorf("%w: touch %s %v: %w", ErrRedis, q.stream, ids, err)
	}
	return nil
}

// Requeue writes a copy of d through Enqueue (a redelivery, handover or quota deferral) and
// then acknowledges d. The copy keeps d's schema_version and generation fields whatever
// mutate does, and its source_message_id is d's id. A crash between the two leaves both: the
// execution id makes the duplicate harmless.
func (q *Queue) Requeue(ctx context.Context, d Delivery, mutate func(*Envelope)) (string, error) {
	if d.Err != nil {
		return "", fmt.Errorf("requeue %s: the source does not decode: %w", d.ID, d.Err)
	}
	env := d.Envelope.Clone()
	if mutate != nil {
		mutate(&env)
	}
	env.inheritFrom(d.Envelope)
	env.SourceMessageID = d.ID
	id, err := Enqueue(ctx, q.c, q.stream, env)
	if err != nil {
		return "", fmt.Errorf("%w: requeue %s: %w", ErrRedis, d.ID, err)
	}
	if err := q.Ack(ctx, d); err != nil {
		return id, fmt.Errorf("%w: requeued %s as %s but the source stays pending: %w", ErrRedis, d.ID, id, err)
	}
	return id, nil
}

// Depth is what the status command and /metrics show for the queue.
type Depth struct {
	StreamLength int64 `json:"stream_length"`
	Pending      int64 `json:"pending"`
	DLQLength    int64 `json:"dlq_length"`
}

// Depth reads the stream length, the group's pending count and the DLQ length. A stream length
// above the pending count and the group's lag is residue, not backlog.
func (q *Queue) Depth(ctx context.Context) (Depth, error) {
	c := q.c
	res := c.DoMulti(ctx,
		c.B().Xlen().Key(q.stream).Build(),
		c.B().Xpending().Key(q.stream).Group(q.group).Build(),
		c.B().Xlen().Key(q.dlq).Build())
	var d Depth
	var err error
	if d.StreamLength, err = res[0].AsInt64(); err != nil {
		return d, fmt.Errorf("%w: xlen %s: %w", ErrRedis, q.stream, err)
	}
	if sum, err := res[1].ToArray(); err == nil && len(sum) > 0 {
		d.Pending, _ = sum[0].AsInt64()
	} else if err != nil {
		return d, q.wrapGroupErr("xpending", err)
	}
	if d.DLQLength, err = res[2].AsInt64(); err != nil {
		return d, fmt.Errorf("%w: xlen %s: %w", ErrRedis, q.dlq, err)
	}
	return d, nil
}

// AckMany removes handled entries in one round trip: XACK and XDEL of every id. A failed XDEL
// leaves residue for SweepResidue (logged, not returned).
func (q *Queue) AckMany(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	c := q.c
	res := c.DoMulti(ctx,
		c.B().Xack().Key(q.stream).Group(q.group).Id(ids...).Build(),
		c.B().Xdel().Key(q.stream).Id(ids...).Build())
	if err := res[0].Error(); err != nil {
		return fmt.Errorf("%w: ack %s (%d entries): %w", ErrRedis, q.stream, len(ids), err)
	}
	q.m.acked.Add(len(ids))
	if err := res[1].Error(); err != nil {
		q.log.Warn().Err(err).Str("event", "queue.residue").Int("entries", len(ids)).Msg("acknowledged but not deleted; the residue sweeper will remove them")
	}
	return nil
}
