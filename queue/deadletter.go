package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// DLQ entry fields.
const (
	dlqReason        = "reason"
	dlqDetail        = "detail"
	dlqSourceID      = "source_id"
	dlqQueue         = "queue"
	dlqConsumer      = "consumer"
	dlqDeliveryCount = "delivery_count"
	dlqSchema        = "schema_version"
	dlqTenant        = "tenant_id"
	dlqExecution     = "execution_id"
	dlqKind          = "kind"
	dlqAt            = "dead_lettered_at"
)

// letteredTTL is how long a source message is remembered as dead-lettered, so that a source
// whose ack failed after its DLQ write is acked on its next delivery instead of being
// dead-lettered a second time.
const letteredTTL = 7 * 24 * time.Hour

// ReplayMarkerTTL is how long a DLQ entry stays marked as replayed.
const ReplayMarkerTTL = 90 * 24 * time.Hour

// DeadLetterInfo describes one new dead letter (the alert webhook's "dead_letter" event).
type DeadLetterInfo struct {
	Queue         string    `json:"queue"`
	DLQKey        string    `json:"dlq_key"`
	DLQID         string    `json:"dlq_id"`
	MessageID     string    `json:"message_id"`
	Reason        string    `json:"reason"`
	Detail        string    `json:"detail,omitempty"`
	DeliveryCount int64     `json:"delivery_count"`
	SchemaVersion int       `json:"schema_version"`
	TenantID      string    `json:"tenant_id"`
	ExecutionID   string    `json:"execution_id,omitempty"`
	DLQLength     int64     `json:"dlq_length"`
	DLQMaxLen     int64     `json:"dlq_max_len"`
	TrimmedCount  int64     `json:"trimmed_count"`
	At            time.Time `json:"ts"`
}

func (q *Queue) letteredKey(sourceID string) string {
	return q.dlq + ":lettered:" + q.stream + ":" + sourceID
}

func (q *Queue) replayedKey(dlqID string) string { return q.dlq + ":replayed:" + dlqID }

// DeadLetter moves d to the dead-letter stream: XADD with the reason, the source id, the
// delivery count, the schema version and the original payload, XTRIM MAXLEN =
// PLAITA_DLQ_MAX_LEN (exact: the DLQ is small, and "0 keeps 1" must keep exactly one), then
// XACK + XDEL of the source. A source already dead-lettered (its ack failed last time) is only
// acked, so a message is dead-lettered once.
func (q *Queue) DeadLetter(ctx context.Context, d Delivery, reason string) error {
	c := q.c
	if reason == "" {
		reason = "unspecified"
	}
	marker := q.letteredKey(d.ID)
	prev, err := c.Do(ctx, c.B().Get().Key(marker).Build()).ToString()
	switch {
	case err == nil:
		q.log.Info().Str("event", "dead_letter.repeat").Str("message_id", d.ID).Str("dlq_id", prev).
			Msg("message was already dead-lettered; acking it")
		return q.Ack(ctx, d)
	case !rueidis.IsRedisNil(err):
		return fmt.Errorf("dead-letter %s: %w", d.ID, err)
	}

	now := q.now().UTC()
	info := DeadLetterInfo{
		Queue: q.stream, DLQKey: q.dlq, MessageID: d.ID, Reason: reason, DeliveryCount: d.Count,
		SchemaVersion: d.Envelope.SchemaVersion, TenantID: d.Envelope.Tenant(),
		ExecutionID: d.Envelope.ExecutionID, DLQMaxLen: int64(q.dlqMaxLen), At: now,
	}
	if d.Err != nil {
		info.Detail = d.Err.Error()
	}
	fv := c.B().Xadd().Key(q.dlq).Id("*").FieldValue().
		FieldValue(dlqReason, reason).
		FieldValue(dlqSourceID, d.ID).
		FieldValue(dlqQueue, q.stream).
		FieldValue(dlqConsumer, d.Consumer).
		FieldValue(dlqDeliveryCount, strconv.FormatInt(d.Count, 10)).
		FieldValue(dlqSchema, strconv.Itoa(d.Envelope.SchemaVersion)).
		FieldValue(dlqTenant, info.TenantID).
		FieldValue(dlqExecution, d.Envelope.ExecutionID).
		FieldValue(dlqKind, string(d.Envelope.Kind)).
		FieldValue(dlqAt, now.Format(time.RFC3339Nano))
	if info.Detail != "" {
		fv = fv.FieldValue(dlqDetail, info.Detail)
	}
	if d.HasPayload {
		fv = fv.FieldValue(PayloadField, d.Payload)
	}
	res := c.DoMulti(ctx, fv.Build(),
		c.B().Xtrim().Key(q.dlq).Maxlen().Exact().Threshold(strconv.Itoa(q.dlqMaxLen)).Build(),
		c.B().Xlen().Key(q.dlq).Build())
	if info.DLQID, err = res[0].ToString(); err != nil {
		return fmt.Errorf("dead-letter %s to %s: %w", d.ID, q.dlq, err)
	}
	info.TrimmedCount, _ = res[1].AsInt64()
	info.DLQLength, _ = res[2].AsInt64()

	if err := c.Do(ctx, c.B().Set().Key(marker).Value(info.DLQID).Ex(letteredTTL).Build()).Error(); err != nil {
		q.log.Warn().Err(err).Str("message_id", d.ID).Msg("dead-letter marker not written; a failed ack would dead-letter the message again")
	}
	q.m.deadLettered.Inc()
	q.log.Warn().Str("event", "dead_letter").Str("dlq_key", q.dlq).Str("dlq_id", info.DLQID).
		Str("message_id", d.ID).Str("reason", reason).Str("detail", info.Detail).
		Int64("delivery_count", d.Count).Int("schema_version", info.SchemaVersion).
		Str("tenant_id", info.TenantID).Str("execution_id", info.ExecutionID).
		Int64("dlq_length", info.DLQLength).Int64("trimmed_count", info.TrimmedCount).
		Msg("message dead-lettered")
	if q.OnDeadLetter != nil {
		q.OnDeadLetter(info)
	}
	if err := q.Ack(ctx, d); err != nil {
		return fmt.Errorf("dead-lettered %s as %s but the source stays pending: %w", d.ID, info.DLQID, err)
	}
	return nil
}

// DLQEntry is one dead letter.
type DLQEntry struct {
	ID             string    `json:"dlq_id"`
	Reason         string    `json:"reason"`
	Detail         string    `json:"detail,omitempty"`
	SourceID       string    `json:"source_id"`
	Queue          string    `json:"queue"`
	Consumer       string    `json:"consumer,omitempty"`
	DeliveryCount  int64     `json:"delivery_count"`
	SchemaVersion  int       `json:"schema_version"`
	TenantID       string    `json:"tenant_id"`
	ExecutionID    string    `json:"execution_id,omitempty"`
	Kind           string    `json:"kind,omitempty"`
	DeadLetteredAt time.Time `json:"dead_lettered_at,omitzero"`
	Payload        string    `json:"payload"`
	HasPayload     bool      `json:"has_payload"`
}

func dlqEntry(e rueidis.XRangeEntry) DLQEntry {
	f := e.FieldValues
	out := DLQEntry{
		ID: e.ID, Reason: f[dlqReason], Detail: f[dlqDetail], SourceID: f[dlqSourceID], Queue: f[dlqQueue],
		Consumer: f[dlqConsumer], TenantID: f[dlqTenant], ExecutionID: f[dlqExecution], Kind: f[dlqKind],
	}
	out.Payload, out.HasPayload = f[PayloadField]
	out.DeliveryCount, _ = strconv.ParseInt(f[dlqDeliveryCount], 10, 64)
	out.SchemaVersion, _ = strconv.Atoi(f[dlqSchema])
	out.DeadLetteredAt, _ = time.Parse(time.RFC3339Nano, f[dlqAt])
	return out
}

// ListDLQ returns up to count dead letters, newest first.
func (q *Queue) ListDLQ(ctx context.Context, count int) ([]DLQEntry, error) {
	c := q.c
	if count < 1 {
		count = 1
	}
	es, err := c.Do(ctx, c.B().Xrevrange().Key(q.dlq).End("+").Start("-").Count(int64(count)).Build()).AsXRange()
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", q.dlq, err)
	}
	out := make([]DLQEntry, 0, len(es))
	for _, e := range es {
		out = append(out, dlqEntry(e))
	}
	return out, nil
}

var (
	// ErrDLQEntryNotFound: no dead letter with that id (never written, or trimmed).
	ErrDLQEntryNotFound = errors.New("dead letter not found")
	// ErrReplayRefused: the dead letter cannot be replayed by this build (malformed payload,
	// or a schema_version newer than this build: replay it from an upgraded one).
	ErrReplayRefused = errors.New("dead letter cannot be replayed")
)

// ReplayStatus says what Replay did.
type ReplayStatus string

const (
	ReplayDone            ReplayStatus = "replayed"
	ReplayAlreadyReplayed ReplayStatus = "already_replayed"
)

// ReplayResult describes one replay.
type ReplayResult struct {
	Status          ReplayStatus `json:"status"`
	DLQID           string       `json:"dlq_id"`
	QueueID         string       `json:"queue_id,omitempty"` // the new task's stream id ("" if unknown)
	SourceMessageID string       `json:"source_message_id"`
	ExecutionID     string       `json:"execution_id"`
	// DerivedExecutionID: a legacy start without execution_id got DeterministicExecutionID of
	// its source message.
	DerivedExecutionID bool   `json:"derived_execution_id"`
	SchemaVersion      int    `json:"schema_version"`
	TenantID           string `json:"tenant_id"`
}

// Replay re-enqueues one dead letter, exactly once: a one-shot marker (<dlq>:replayed:<id>,
// SET NX, ReplayMarkerTTL) is claimed first, so a second replay returns ReplayAlreadyReplayed
// without enqueueing. The copy inherits the dead letter's schema_version and generation fields
// (a legacy message stays legacy), its source_message_id is the original message id, and an
// id-less legacy start gets DeterministicExecutionID of that message: the id its first
// delivery used. The DLQ entry stays (evidence); the caller writes the audit row.
func (q *Queue) Replay(ctx context.Context, dlqID string) (ReplayResult, error) {
	c := q.c
	res := ReplayResult{DLQID: dlqID}
	if _, ok := parseID(dlqID); !ok {
		return res, fmt.Errorf("%w: %q is not a stream id", ErrDLQEntryNotFound, dlqID)
	}
	es, err := c.Do(ctx, c.B().Xrange().Key(q.dlq).Start(dlqID).End(dlqID).Build()).AsXRange()
	if err != nil {
		return res, fmt.Errorf("replay %s: %w", dlqID, err)
	}
	if len(es) == 0 {
		return res, fmt.Errorf("%w: %s in %s", ErrDLQEntryNotFound, dlqID, q.dlq)
	}
	e := dlqEntry(es[0])
	source, stream := e.SourceID, e.Queue
	if source == "" { // not written by DeadLetter: the DLQ entry is its own source
		source, stream = dlqID, q.dlq
	}
	if stream == "" {
		stream = q.stream
	}
	res.SourceMessageID = source
	if !e.HasPayload {
		return res, fmt.Errorf("%w: %s has no payload", ErrReplayRefused, dlqID)
	}
	env, derived, err := Decode(stream, source, []byte(e.Payload))
	res.SchemaVersion, res.TenantID, res.ExecutionID, res.DerivedExecutionID = env.SchemaVersion, env.Tenant(), env.ExecutionID, derived
	if err != nil {
		return res, fmt.Errorf("%w: %s: %w", ErrReplayRefused, dlqID, err)
	}

	marker := q.replayedKey(dlqID)
	err = c.Do(ctx, c.B().Set().Key(marker).Value("pending").Nx().Ex(ReplayMarkerTTL).Build()).Error()
	if rueidis.IsRedisNil(err) {
		res.Status = ReplayAlreadyReplayed
		if prev, err := c.Do(ctx, c.B().Get().Key(marker).Build()).ToString(); err == nil && prev != "pending" {
			res.QueueID = prev
		}
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("replay %s: marker: %w", dlqID, err)
	}
	env.SourceMessageID = source // schema_version and generations are the dead letter's own
	id, err := Enqueue(ctx, c, q.stream, env)
	if err != nil {
		// Give the marker back so the replay can be retried; a failed DEL only delays that.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		c.Do(dctx, c.B().Del().Key(marker).Build())
		cancel()
		return res, fmt.Errorf("replay %s: %w", dlqID, err)
	}
	res.Status, res.QueueID = ReplayDone, id
	if err := c.Do(ctx, c.B().Set().Key(marker).Value(id).Xx().Keepttl().Build()).Error(); err != nil && !rueidis.IsRedisNil(err) {
		q.log.Warn().Err(err).Str("dlq_id", dlqID).Msg("replay marker keeps the value pending")
	}
	q.log.Info().Str("event", "dlq.replay").Str("dlq_id", dlqID).Str("queue_id", id).
		Str("source_message_id", source).Str("execution_id", env.ExecutionID).Bool("derived_execution_id", derived).
		Int("schema_version", env.SchemaVersion).Str("tenant_id", env.Tenant()).Msg("dead letter replayed")
	return res, nil
}
