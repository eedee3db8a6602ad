package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"plaita/model"

	"github.com/VictoriaMetrics/metrics"
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

	d             Driver
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

// New builds the queue of s over driver d and registers its counters on set (never the global
// set).
func New(d Driver, s Settings, set *metrics.Set, log zerolog.Logger) (*Queue, error) {
	if d == nil || set == nil {
		return nil, errors.New("queue.New: driver and metrics set are required")
	}
	q := &Queue{
		Now:           time.Now,
		d:             d,
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
	created, err := q.d.CreateGroup(ctx, q.stream, q.group, q.startID)
	if err != nil || !created {
		return err
	}
	ev := q.log.Info()
	if q.startID == "0" || q.startID == "0-0" {
		if n, err := q.d.Len(ctx, q.stream); err == nil && n > 0 {
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
	return CheckStreamKeys(ctx, q.d, q.stream, q.dlq)
}

// CheckStreamKeys is CheckKeys for the configured names (what `plaita doctor --redis` runs).
func CheckStreamKeys(ctx context.Context, d Driver, stream, dlq string) error {
	for _, k := range []struct{ key, name string }{{stream, "PLAITA_QUEUE_NAME"}, {dlq, "PLAITA_DLQ_KEY"}} {
		typ, err := d.KeyType(ctx, k.key)
		if err != nil {
			return fmt.Errorf("check the type of %s: %w", k.key, err)
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
	es, err := q.d.ReadGroup(ctx, q.stream, q.group, consumer, max(count, 1), block)
	if err != nil {
		return nil, err
	}
	out := make([]Delivery, 0, len(es))
	for _, e := range es {
		out = append(out, q.handOut(q.delivery(e.ID, e.Fields, consumer, 1, false)))
	}
	return out, nil
}

// pending lists the group's entries idle for PLAITA_CLAIM_MIN_IDLE_MS, from start on.
func (q *Queue) pending(ctx context.Context, start string, count int) ([]PendingEntry, error) {
	rows, err := q.d.Pending(ctx, q.stream, PendingSpan{Group: q.group, Start: start, End: "+", MinIdle: q.minIdle, Count: count})
	if err != nil {
		return nil, err
	}
	return rows[0], nil
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
		next = "(" + pend[len(pend)-1].ID
	}
	q.mu.Lock()
	q.reclaimCursor = next
	q.mu.Unlock()
	if len(pend) == 0 {
		return nil, nil
	}

	spans := make([]Span, 0, len(pend))
	for _, p := range pend {
		spans = append(spans, Span{Start: p.ID, End: p.ID})
	}
	found, err := q.d.Range(ctx, q.stream, spans...)
	if err != nil {
		return nil, err
	}
	var accept, deleted []string
	scanned := map[string]Delivery{}
	for i, es := range found {
		p := pend[i]
		if len(es) == 0 {
			deleted = append(deleted, p.ID)
			continue
		}
		d := q.delivery(p.ID, es[0].Fields, consumer, p.Deliveries+1, true)
		if v := q.generationVerdict(d.Envelope, true); v != VerdictRun {
			q.noteGated(d, v)
			continue
		}
		accept = append(accept, p.ID)
		scanned[p.ID] = d
	}
	if len(deleted) > 0 {
		if err := q.d.Ack(ctx, q.stream, q.group, deleted...); err != nil {
			q.log.Warn().Err(err).Str("event", "queue.reclaim_deleted").Strs("ids", deleted).Msg("could not drop pending entries whose stream entry is gone")
		} else {
			q.log.Info().Str("event", "queue.reclaim_deleted").Strs("ids", deleted).Msg("dropped pending entries whose stream entry is gone")
		}
	}
	if len(accept) == 0 {
		return nil, nil
	}
	claimed, err := q.d.Claim(ctx, q.stream, q.group, consumer, q.minIdle, accept)
	out := make([]Delivery, 0, len(claimed))
	for _, e := range claimed {
		d, ok := scanned[e.ID]
		if !ok {
			continue
		}
		out = append(out, q.handOut(d))
		q.m.reclaimed.Inc()
	}
	return out, err
}

// Ack removes a handled entry: XACK and XDEL in one pipeline. A failed XDEL leaves a residue
// entry (acknowledged, still in the stream) for SweepResidue; it is logged, not returned.
func (q *Queue) Ack(ctx context.Context, d Delivery) error {
	delErr, err := q.d.AckDelete(ctx, q.stream, q.group, d.ID)
	if err != nil {
		return fmt.Errorf("ack %s: %w", d.ID, err)
	}
	q.m.acked.Inc()
	if delErr != nil {
		q.log.Warn().Err(delErr).Str("event", "queue.residue").Str("message_id", d.ID).Msg("acknowledged but not deleted; the residue sweeper will remove it")
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
	if err := q.d.Hold(ctx, q.stream, q.group, consumer, -1, 0, ids...); err != nil {
		return fmt.Errorf("touch %v: %w", ids, err)
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
	id, err := Enqueue(ctx, q.d, q.stream, env)
	if err != nil {
		return "", fmt.Errorf("requeue %s: %w", d.ID, err)
	}
	if err := q.Ack(ctx, d); err != nil {
		return id, fmt.Errorf("requeued %s as %s but the source stays pending: %w", d.ID, id, err)
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
// above the pending count and the group's lag is residue, not backlog. A group that does not
// exist yet is ErrNoGroup.
func (q *Queue) Depth(ctx context.Context) (Depth, error) {
	in, err := q.d.Info(ctx, q.stream, q.dlq)
	if err != nil {
		return Depth{}, err
	}
	d := Depth{StreamLength: in.Length, DLQLength: in.DLQLength}
	g, ok := q.ownGroup(in)
	if !ok {
		return d, fmt.Errorf("pending of %s: %w", q.stream, ErrNoGroup)
	}
	d.Pending = g.Pending
	return d, nil
}

// ownGroup is the queue's group among in's.
func (q *Queue) ownGroup(in StreamInfo) (GroupInfo, bool) {
	for _, g := range in.Groups {
		if g.Name == q.group {
			return g, true
		}
	}
	return GroupInfo{}, false
}

// AckMany removes handled entries in one round trip: XACK and XDEL of every id. A failed XDEL
// leaves residue for SweepResidue (logged, not returned).
func (q *Queue) AckMany(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	delErr, err := q.d.AckDelete(ctx, q.stream, q.group, ids...)
	if err != nil {
		return fmt.Errorf("ack %d entries: %w", len(ids), err)
	}
	q.m.acked.Add(len(ids))
	if delErr != nil {
		q.log.Warn().Err(delErr).Str("event", "queue.residue").Int("entries", len(ids)).Msg("acknowledged but not deleted; the residue sweeper will remove them")
	}
	return nil
}
