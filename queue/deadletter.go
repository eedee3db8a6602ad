package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"plaita/internal/callctx"
	"plaita/model"
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
	// An oversized payload is kept as a prefix with these three fields.
	dlqPayloadSize      = "payload_size"
	dlqPayloadSHA256    = "payload_sha256"
	dlqPayloadTruncated = "payload_truncated"
)

// Bounds of what a dead letter keeps of its payload. Whatever was XADDed to the task stream is
// copied into the dead-letter stream, up to PLAITA_DLQ_MAX_LEN entries: without a bound, a
// stream of 64 MB garbage entries would fill Redis a second time. A payload that decodes as an
// envelope is kept whole up to MaxDLQPayload (above the largest start input an enqueue
// accepts, so a legitimate dead letter stays replayable); one that does not decode, or is
// larger, keeps its first DLQPayloadPrefix bytes, its size and its sha256, and cannot be
// replayed.
const (
	MaxDLQPayload    = 32 << 20
	DLQPayloadPrefix = 64 << 10
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

// letteredKey is the one-shot marker of a dead-lettered source. It lives in the DLQ stream's
// Cluster slot (sameSlot), so the dead-letter script writes the entry and the marker together.
func (q *Queue) letteredKey(sourceID string) string {
	return sameSlot(q.dlq) + ":lettered:" + q.stream + ":" + sourceID
}

// payloadFlow is the flow a dead letter's task names ("" when its payload does not say).
func payloadFlow(payload string) string {
	var env struct {
		FlowID string `json:"flow_id"`
	}
	if json.Unmarshal([]byte(payload), &env) != nil {
		return ""
	}
	return env.FlowID
}

func (q *Queue) replayedKey(dlqID string) string { return q.dlq + ":replayed:" + dlqID }

// sameSlot returns a key prefix that hashes to key's Redis Cluster slot: key itself when it
// carries a hash tag (its first {…} is then the prefix's too), else key wrapped in braces. A
// name with a '}' but no tag cannot be wrapped; it is returned as is (on one server the slot
// does not matter; in a cluster give such a DLQ name a hash tag).
func sameSlot(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key
		}
	}
	if strings.IndexByte(key, '}') >= 0 {
		return key
	}
	return "{" + key + "}"
}

// DeadLetter moves d to the dead-letter stream: in one script, the entry (reason, source id,
// delivery count, schema version, the original payload), XTRIM MAXLEN = PLAITA_DLQ_MAX_LEN
// (exact: the DLQ is small, and "0 keeps 1" must keep exactly one) and the source's one-shot
// marker; then XACK + XDEL of the source. A source already dead-lettered (its worker died or
// its ack failed after the script) is only acked, so a message is dead-lettered once.
func (q *Queue) DeadLetter(ctx context.Context, d Delivery, reason string) error {
	if reason == "" {
		reason = "unspecified"
	}
	info, repeat, err := q.letter(ctx, d, reason)
	if err != nil {
		return err
	}
	if repeat {
		q.log.Info().Str("event", "dead_letter.repeat").Str("message_id", d.ID).Str("dlq_id", info.DLQID).
			Msg("message was already dead-lettered; acking it")
		return q.Ack(ctx, d)
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
		return fmt.Errorf("%w: dead-lettered %s as %s but the source stays pending: %w", ErrRedis, d.ID, info.DLQID, err)
	}
	return nil
}

// letter writes the dead letter and its marker (the script); repeat reports a source that was
// dead-lettered before (info.DLQID is that entry).
func (q *Queue) letter(ctx context.Context, d Delivery, reason string) (info DeadLetterInfo, repeat bool, err error) {
	now := q.Now().UTC()
	info = DeadLetterInfo{
		Queue: q.stream, DLQKey: q.dlq, MessageID: d.ID, Reason: reason, DeliveryCount: d.Count,
		SchemaVersion: d.Envelope.SchemaVersion, TenantID: d.Envelope.Tenant(),
		ExecutionID: d.Envelope.ExecutionID, DLQMaxLen: int64(q.dlqMaxLen), At: now,
	}
	if d.Err != nil {
		info.Detail = d.Err.Error()
	}
	args := []string{dlqReason, reason,
		dlqSourceID, d.ID,
		dlqQueue, q.stream,
		dlqConsumer, d.Consumer,
		dlqDeliveryCount, strconv.FormatInt(d.Count, 10),
		dlqSchema, strconv.Itoa(d.Envelope.SchemaVersion),
		dlqTenant, info.TenantID,
		dlqExecution, d.Envelope.ExecutionID,
		dlqKind, string(d.Envelope.Kind),
		dlqAt, now.Format(time.RFC3339Nano)}
	if info.Detail != "" {
		args = append(args, dlqDetail, info.Detail)
	}
	if d.HasPayload {
		payload := d.Payload
		if len(payload) > MaxDLQPayload || (d.Err != nil && len(payload) > DLQPayloadPrefix) {
			sum := sha256.Sum256([]byte(payload))
			args = append(args, dlqPayloadSize, strconv.Itoa(len(payload)), dlqPayloadSHA256, hex.EncodeToString(sum[:]),
				dlqPayloadTruncated, "1")
			payload = payload[:DLQPayloadPrefix]
		}
		args = append(args, PayloadField, payload)
	}
	res, err := q.d.DeadLetter(ctx, q.dlq, q.letteredKey(d.ID), q.dlqMaxLen, letteredTTL, args...)
	if err != nil {
		return info, false, fmt.Errorf("dead-letter %s: %w", d.ID, err)
	}
	info.DLQID = res.ID
	if !res.Wrote {
		return info, true, nil
	}
	info.TrimmedCount, info.DLQLength = res.Trimmed, res.Length
	return info, false, nil
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
	// Truncated: the payload was oversized; Payload is its first DLQPayloadPrefix bytes,
	// PayloadSize and PayloadSHA256 describe the whole.
	Truncated     bool   `json:"payload_truncated,omitempty"`
	PayloadSize   int    `json:"payload_size,omitempty"`
	PayloadSHA256 string `json:"payload_sha256,omitempty"`
	// FlowID is the flow its task names (from the payload; "" when it does not say), and
	// Replayed says it was replayed (its marker is set, ReplayMarkerTTL), ReplayedAs as which
	// task entry ("" while the replay is under way). A listing fills them (ReplayMarks).
	FlowID     string `json:"flow_id,omitempty"`
	Replayed   bool   `json:"replayed"`
	ReplayedAs string `json:"replayed_as,omitempty"`
}

func dlqEntry(e Entry) DLQEntry {
	f := e.Fields
	out := DLQEntry{
		ID: e.ID, Reason: f[dlqReason], Detail: f[dlqDetail], SourceID: f[dlqSourceID], Queue: f[dlqQueue],
		Consumer: f[dlqConsumer], TenantID: f[dlqTenant], ExecutionID: f[dlqExecution], Kind: f[dlqKind],
	}
	out.Payload, out.HasPayload = f[PayloadField]
	out.Truncated = f[dlqPayloadTruncated] == "1"
	out.PayloadSize, _ = strconv.Atoi(f[dlqPayloadSize])
	out.PayloadSHA256 = f[dlqPayloadSHA256]
	out.DeliveryCount, _ = strconv.ParseInt(f[dlqDeliveryCount], 10, 64)
	out.SchemaVersion, _ = strconv.Atoi(f[dlqSchema])
	out.DeadLetteredAt, _ = time.Parse(time.RFC3339Nano, f[dlqAt])
	if out.HasPayload && !out.Truncated {
		out.FlowID = payloadFlow(out.Payload)
	}
	return out
}

// ReplayMarks fills Replayed and ReplayedAs of the entries from their replay markers: what a
// listing shows beside each dead letter, so a replayed one is not replayed again by hand.
// The markers are read a few at a time (one round trip each, never the whole DLQ).
func (q *Queue) ReplayMarks(ctx context.Context, es []DLQEntry) error {
	errs := make([]error, len(es))
	slots := make(chan struct{}, replayMarkReads)
	var wg sync.WaitGroup
	for i := range es {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			v, ok, err := q.d.Get(ctx, q.replayedKey(es[i].ID))
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("read the replay marker of %s: %w", es[i].ID, err)
			case ok:
				es[i].Replayed = true
				if v != "pending" {
					es[i].ReplayedAs = v
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// replayMarkReads bounds the marker reads of one listing in flight at once.
const replayMarkReads = 16

// ListDLQ returns up to count dead letters, newest first.
func (q *Queue) ListDLQ(ctx context.Context, count int) ([]DLQEntry, error) {
	return q.ListDLQBefore(ctx, "", count)
}

// ListDLQBefore returns up to count dead letters older than the entry id before ("" = from
// the newest), newest first: the pages of a listing, each going on after the last entry of
// the one before. An id that is not a stream id is ErrBadDLQCursor.
func (q *Queue) ListDLQBefore(ctx context.Context, before string, count int) ([]DLQEntry, error) {
	if count < 1 {
		count = 1
	}
	end := "+"
	if before != "" {
		if _, ok := parseID(before); !ok {
			return nil, fmt.Errorf("%w: %q is not a stream id", ErrBadDLQCursor, before)
		}
		end = "(" + before
	}
	found, err := q.d.Range(ctx, q.dlq, Span{Start: "-", End: end, Count: count, Rev: true})
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	out := make([]DLQEntry, 0, len(found[0]))
	for _, e := range found[0] {
		out = append(out, dlqEntry(e))
	}
	return out, nil
}

// DeadLetterByID reads one dead letter by its DLQ stream id (ErrDLQEntryNotFound when there is none).
func (q *Queue) DeadLetterByID(ctx context.Context, dlqID string) (DLQEntry, error) {
	if _, ok := parseID(dlqID); !ok {
		return DLQEntry{}, fmt.Errorf("%w: %q is not a stream id", ErrDLQEntryNotFound, dlqID)
	}
	found, err := q.d.Range(ctx, q.dlq, Span{Start: dlqID, End: dlqID})
	if err != nil {
		return DLQEntry{}, fmt.Errorf("read dead letter %s: %w", dlqID, err)
	}
	es := found[0]
	if len(es) == 0 {
		return DLQEntry{}, fmt.Errorf("%w: %s in %s", ErrDLQEntryNotFound, dlqID, q.dlq)
	}
	return dlqEntry(es[0]), nil
}

var (
	// ErrDLQEntryNotFound: no dead letter with that id (never written, or trimmed).
	ErrDLQEntryNotFound = model.New(model.NotFound, "", "dead letter not found")
	// ErrBadDLQCursor: a listing's position that is not a dead letter's stream id.
	ErrBadDLQCursor = model.New(model.Invalid, "", "invalid dead-letter cursor")
	// ErrReplayRefused: the dead letter cannot be replayed by this build (malformed payload,
	// or a schema_version newer than this build: replay it from an upgraded one).
	ErrReplayRefused = model.New(model.Conflict, "", "dead letter cannot be replayed")
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
	res := ReplayResult{DLQID: dlqID}
	if _, ok := parseID(dlqID); !ok {
		return res, fmt.Errorf("%w: %q is not a stream id", ErrDLQEntryNotFound, dlqID)
	}
	found, err := q.d.Range(ctx, q.dlq, Span{Start: dlqID, End: dlqID})
	if err != nil {
		return res, fmt.Errorf("replay %s: %w", dlqID, err)
	}
	es := found[0]
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
	if e.Truncated {
		return res, fmt.Errorf("%w: %s kept only the first %d of its %d payload bytes (sha256 %s)", ErrReplayRefused, dlqID, len(e.Payload), e.PayloadSize, e.PayloadSHA256)
	}
	env, derived, err := Decode(stream, source, []byte(e.Payload))
	res.SchemaVersion, res.TenantID, res.ExecutionID, res.DerivedExecutionID = env.SchemaVersion, env.Tenant(), env.ExecutionID, derived
	if err != nil {
		return res, fmt.Errorf("%w: %s: %w", ErrReplayRefused, dlqID, err)
	}

	marker := q.replayedKey(dlqID)
	claimed, err := q.d.SetOnce(ctx, marker, "pending", ReplayMarkerTTL)
	if err != nil {
		return res, fmt.Errorf("replay %s: marker: %w", dlqID, err)
	}
	if !claimed {
		res.Status = ReplayAlreadyReplayed
		if prev, ok, err := q.d.Get(ctx, marker); err == nil && ok && prev != "pending" {
			res.QueueID = prev
		}
		return res, nil
	}
	env.SourceMessageID = source // schema_version and generations are the dead letter's own
	id, err := Enqueue(ctx, q.d, q.stream, env)
	if err != nil {
		// Give the marker back so the replay can be retried; a failed DEL only delays that.
		dctx, cancel := callctx.Detached(ctx, callctx.Cleanup)
		_ = q.d.Unset(dctx, marker)
		cancel()
		return res, fmt.Errorf("replay %s: %w", dlqID, err)
	}
	res.Status, res.QueueID = ReplayDone, id
	if err := q.d.Replace(ctx, marker, id); err != nil {
		q.log.Warn().Err(err).Str("dlq_id", dlqID).Msg("replay marker keeps the value pending")
	}
	q.log.Info().Str("event", "dlq.replay").Str("dlq_id", dlqID).Str("queue_id", id).
		Str("source_message_id", source).Str("execution_id", env.ExecutionID).Bool("derived_execution_id", derived).
		Int("schema_version", env.SchemaVersion).Str("tenant_id", env.Tenant()).Msg("dead letter replayed")
	return res, nil
}
