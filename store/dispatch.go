package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// The dispatch ledger: every capacity-dispatch decision a producer made for a start (which
// workers it considered, with their capacity snapshots, and which one it chose, or none), one
// entry of a capped stream at PLAITA_DISPATCH_LEDGER_KEY. It is a record for operators
// (`redis-cli XREVRANGE <key> + - COUNT 10`), never read on the hot path; approximate trimming
// keeps it at about its bound whatever the start rate.
//
//	<ledger key>   STREAM  at, actor, tenant_id, execution_id, flow_id, flow_version, queue,
//	                       message_id, mode, target, reason, candidates (JSON array)

// DefaultDispatchLedgerLen bounds the ledger: the newest decisions are kept, about this many.
const DefaultDispatchLedgerLen = 10000

// Dispatch modes: what a decision did to its start.
const (
	// DispatchShadow: the decision was recorded only (PLAITA_CONSOLE_DISPATCH_SHADOW); the start
	// carries no target and any worker takes it.
	DispatchShadow = "shadow"
	// DispatchApplied: the start carries the chosen target_instance_id (none when no worker
	// qualified).
	DispatchApplied = "applied"
)

// DispatchCandidate is one worker a decision considered, as its registry record said.
type DispatchCandidate struct {
	InstanceID     string `json:"instance_id"`
	Status         string `json:"status"`
	ActiveTasks    int    `json:"active_tasks"`
	Capacity       int    `json:"capacity"`
	HeartbeatAgeMS int64  `json:"heartbeat_age_ms"`
	Eligible       bool   `json:"eligible"`
	// Why it qualified ("3 free of 4") or not ("stale capacity snapshot: 95s old").
	Why string `json:"why"`
}

// DispatchRecord is one decision. ID is the ledger entry's stream id (set when read).
type DispatchRecord struct {
	ID          string              `json:"id,omitempty"`
	At          time.Time           `json:"at"`
	Actor       string              `json:"actor"` // PLAITA_DISPATCHER_ID
	TenantID    string              `json:"tenant_id"`
	ExecutionID string              `json:"execution_id"`
	FlowID      string              `json:"flow_id"`
	FlowVersion string              `json:"flow_version"`
	Queue       string              `json:"queue"`
	MessageID   string              `json:"message_id,omitempty"` // the start's stream entry
	Mode        string              `json:"mode"`                 // DispatchShadow | DispatchApplied
	Target      string              `json:"target,omitempty"`     // the chosen instance ("" = none)
	Reason      string              `json:"reason"`
	Candidates  []DispatchCandidate `json:"candidates"`
}

// DispatchLedger writes and reads the ledger stream.
type DispatchLedger struct {
	c      rueidis.Client
	key    string
	maxLen int64
}

// NewDispatchLedger returns the ledger at key, kept to about maxLen entries (≤ 0:
// DefaultDispatchLedgerLen). A blank key is ErrInvalid.
func NewDispatchLedger(c rueidis.Client, key string, maxLen int64) (*DispatchLedger, error) {
	if strings.TrimSpace(key) == "" {
		return nil, fmt.Errorf("%w: an empty dispatch ledger key", ErrInvalid)
	}
	if maxLen <= 0 {
		maxLen = DefaultDispatchLedgerLen
	}
	return &DispatchLedger{c: c, key: key, maxLen: maxLen}, nil
}

// Key is the ledger's stream.
func (l *DispatchLedger) Key() string { return l.key }

// Record appends one decision and returns its entry id. A Redis failure is ErrRedis.
func (l *DispatchLedger) Record(ctx context.Context, rec DispatchRecord) (string, error) {
	cands := rec.Candidates
	if cands == nil {
		cands = []DispatchCandidate{}
	}
	cj, err := json.Marshal(cands)
	if err != nil {
		return "", fmt.Errorf("%w: dispatch candidates: %w", ErrInvalid, err)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := l.c
	cmd := c.B().Xadd().Key(l.key).Maxlen().Almost().Threshold(strconv.FormatInt(l.maxLen, 10)).Id("*").FieldValue().
		FieldValue("at", rec.At.UTC().Format(time.RFC3339Nano)).FieldValue("actor", rec.Actor).
		FieldValue("tenant_id", rec.TenantID).FieldValue("execution_id", rec.ExecutionID).
		FieldValue("flow_id", rec.FlowID).FieldValue("flow_version", rec.FlowVersion).FieldValue("queue", rec.Queue).
		FieldValue("message_id", rec.MessageID).FieldValue("mode", rec.Mode).FieldValue("target", rec.Target).
		FieldValue("reason", rec.Reason).FieldValue("candidates", string(cj)).Build()
	id, err := c.Do(ctx, cmd).ToString()
	if err != nil {
		return "", transient(ErrRedis, "record a dispatch decision in "+l.key, err)
	}
	return id, nil
}

// Recent reads up to count of the newest decisions, newest first. An entry whose candidates
// do not decode is returned without them.
func (l *DispatchLedger) Recent(ctx context.Context, count int) ([]DispatchRecord, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := l.c
	es, err := c.Do(ctx, c.B().Xrevrange().Key(l.key).End("+").Start("-").Count(int64(max(count, 1))).Build()).AsXRange()
	if err != nil {
		return nil, transient(ErrRedis, "read "+l.key, err)
	}
	out := make([]DispatchRecord, 0, len(es))
	for _, e := range es {
		f := e.FieldValues
		rec := DispatchRecord{ID: e.ID, Actor: f["actor"], TenantID: f["tenant_id"], ExecutionID: f["execution_id"], FlowID: f["flow_id"],
			FlowVersion: f["flow_version"], Queue: f["queue"], MessageID: f["message_id"], Mode: f["mode"], Target: f["target"], Reason: f["reason"]}
		rec.At, _ = time.Parse(time.RFC3339Nano, f["at"])
		_ = json.Unmarshal([]byte(f["candidates"]), &rec.Candidates)
		out = append(out, rec)
	}
	return out, nil
}
