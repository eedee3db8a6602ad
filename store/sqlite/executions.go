package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"plaita/engine/state"
	"plaita/model"
	"plaita/store"
	"plaita/store/keys"
)

// Local mode: when Redis is unreachable at start, the console runs executions in process on
// this table. Executions is a store.Storage (and an engine.Storage and engine.CancelChecker)
// that passes the storage contract every backend passes (store/storetest): states are
// encoded with store.EncodeBounded, the bytes Redis would hold, so a state that would fail to
// save or load in Redis fails here the same way. One process runs a local execution; the
// generation column, moved on by every write, lets the orphan reconcile change a row only if
// nothing wrote it since it was read.

// Executions is the local-mode execution storage of a DB.
type Executions struct{ db *DB }

// Executions returns the local-mode execution storage.
func (db *DB) Executions() *Executions { return &Executions{db: db} }

var _ store.Storage = (*Executions)(nil)

// Save stores a state (insert or replace). A state JSON cannot carry is
// store.ErrStateSerialization and one above the bound store.ErrStateTooLarge, both before
// anything is written; a database failure is ErrDB (transient).
func (x *Executions) Save(ctx context.Context, st *state.Execution) error {
	if st == nil {
		return invalid("save a nil execution state")
	}
	b, err := store.EncodeBounded(st, x.db.opts.maxStateBytes)
	if err != nil {
		return err
	}
	if err := keys.ValidID(st.ExecutionID); err != nil {
		return invalid("%v", err)
	}
	tenant := st.TenantID
	if tenant == "" {
		tenant = keys.DefaultTenant
	}
	_, err = x.db.w.ExecContext(ctx,
		"INSERT INTO local_executions (execution_id, tenant, flow_id, flow_version, status, state, generation, cancel_requested, started_at, updated_at) "+
			"VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?) "+
			"ON CONFLICT (execution_id) DO UPDATE SET tenant = excluded.tenant, flow_id = excluded.flow_id, flow_version = excluded.flow_version, "+
			"status = excluded.status, state = excluded.state, generation = local_executions.generation + 1, updated_at = excluded.updated_at",
		st.ExecutionID, tenant, st.FlowID, st.FlowVersion, string(st.Status), string(b), false, ms(st.StartTime), ms(x.db.now()))
	if err != nil {
		return failed("save execution "+st.ExecutionID, err)
	}
	return nil
}

// Load reads a state: store.ErrNotFound when there is none, store.ErrStateCorrupt when the
// stored bytes do not decode.
func (x *Executions) Load(ctx context.Context, id string) (*state.Execution, error) {
	st, _, err := x.LoadGeneration(ctx, id)
	return st, err
}

// LoadGeneration is Load with the row's generation, for SaveIf.
func (x *Executions) LoadGeneration(ctx context.Context, id string) (*state.Execution, int64, error) {
	var raw string
	var gen int64
	err := x.db.r.QueryRowContext(ctx, "SELECT state, generation FROM local_executions WHERE execution_id = ?", id).Scan(&raw, &gen)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, fmt.Errorf("%w: execution %s", store.ErrNotFound, id)
	}
	if err != nil {
		return nil, 0, failed("load execution "+id, err)
	}
	st, err := store.Decode([]byte(raw))
	if err != nil {
		return nil, 0, err
	}
	return st, gen, nil
}

// SaveIf stores a state only when the row is still at generation (what LoadGeneration
// returned): ErrExecutionChanged when something wrote it since, store.ErrNotFound when it is
// gone. It returns the new generation.
func (x *Executions) SaveIf(ctx context.Context, st *state.Execution, generation int64) (int64, error) {
	if st == nil {
		return 0, invalid("save a nil execution state")
	}
	b, err := store.EncodeBounded(st, x.db.opts.maxStateBytes)
	if err != nil {
		return 0, err
	}
	return x.swap(ctx, st, b, generation, "")
}

// swap is the compare-and-swap of a row at generation (and, with status, in that status).
func (x *Executions) swap(ctx context.Context, st *state.Execution, b []byte, generation int64, status state.Status) (int64, error) {
	q := "UPDATE local_executions SET status = ?, state = ?, flow_id = ?, flow_version = ?, generation = generation + 1, updated_at = ? " +
		"WHERE execution_id = ? AND generation = ?"
	args := []any{string(st.Status), string(b), st.FlowID, st.FlowVersion, ms(x.db.now()), st.ExecutionID, generation}
	if status != "" {
		q, args = q+" AND status = ?", append(args, string(status))
	}
	var gen int64
	err := x.db.w.QueryRowContext(ctx, q+" RETURNING generation", args...).Scan(&gen)
	if err == nil {
		return gen, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, failed("save execution "+st.ExecutionID, err)
	}
	// Nothing matched: tell a row that is gone from one that moved on.
	var now int64
	var was string
	err = x.db.w.QueryRowContext(ctx, "SELECT generation, status FROM local_executions WHERE execution_id = ?", st.ExecutionID).Scan(&now, &was)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, fmt.Errorf("%w: execution %s", store.ErrNotFound, st.ExecutionID)
	case err != nil:
		return 0, failed("read execution "+st.ExecutionID, err)
	}
	return 0, fmt.Errorf("%w: execution %s is %s at generation %d (expected generation %d)", ErrExecutionChanged, st.ExecutionID, was, now, generation)
}

// Delete deletes an execution; store.ErrNotFound when there is none.
func (x *Executions) Delete(ctx context.Context, id string) error {
	res, err := x.db.w.ExecContext(ctx, "DELETE FROM local_executions WHERE execution_id = ?", id)
	if err != nil {
		return failed("delete execution "+id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: execution %s", store.ErrNotFound, id)
	}
	return nil
}

// RequestCancel raises an execution's cancel flag (the executor reads it through Cancelled
// between steps); store.ErrNotFound when there is none.
func (x *Executions) RequestCancel(ctx context.Context, id string) error {
	res, err := x.db.w.ExecContext(ctx, "UPDATE local_executions SET cancel_requested = ? WHERE execution_id = ?", true, id)
	if err != nil {
		return failed("cancel execution "+id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: execution %s", store.ErrNotFound, id)
	}
	return nil
}

// Cancelled reads an execution's cancel flag (false for an unknown execution), as
// engine.CancelChecker asks.
func (x *Executions) Cancelled(ctx context.Context, id string) (bool, error) {
	var c bool
	err := x.db.r.QueryRowContext(ctx, "SELECT cancel_requested FROM local_executions WHERE execution_id = ?", id).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, failed("read the cancel flag of "+id, err)
	}
	return c, nil
}

// ExecutionSummary is a listed local execution.
type ExecutionSummary struct {
	ExecutionID string       `json:"execution_id"`
	Tenant      string       `json:"tenant"`
	FlowID      string       `json:"flow_id"`
	FlowVersion string       `json:"flow_version"`
	Status      state.Status `json:"status"`
	StartedAt   time.Time    `json:"started_at"`
	UpdatedAt   time.Time    `json:"updated_at"`
}

// ExecutionQuery selects local executions of one tenant.
type ExecutionQuery struct {
	Tenant string
	Status state.Status // "" any
	FlowID string       // "" any
	// StartedAfter ≤ start < StartedBefore, to the millisecond the row keeps (zero: no bound);
	// a caller that needs more precision checks the states it reads.
	StartedAfter, StartedBefore time.Time
	ListOptions
}

// ExecutionCursorAfter is the cursor of the List page that starts right after the row
// (startedAt, id): a caller that returns only part of a page (one that merges it with another
// source) goes on from the last row it returned.
func ExecutionCursorAfter(startedAt time.Time, id string) string {
	return encodeCursor("executions", strconv.FormatInt(ms(startedAt), 10), id)
}

// List pages a tenant's local executions, newest start first.
func (x *Executions) List(ctx context.Context, q ExecutionQuery) (Page[ExecutionSummary], error) {
	tenant, err := NormalizeTenant(q.Tenant)
	if err != nil {
		return Page[ExecutionSummary]{}, err
	}
	limit, err := pageLimit(q.Limit, DefaultLimit, MaxLimit)
	if err != nil {
		return Page[ExecutionSummary]{}, err
	}
	after, err := decodeCursor("executions", q.Cursor, 2)
	if err != nil {
		return Page[ExecutionSummary]{}, err
	}
	query := "SELECT execution_id, tenant, flow_id, flow_version, status, started_at, updated_at FROM local_executions WHERE tenant = ?"
	args := []any{tenant}
	if q.Status != "" {
		query, args = query+" AND status = ?", append(args, string(q.Status))
	}
	if q.FlowID != "" {
		query, args = query+" AND flow_id = ?", append(args, q.FlowID)
	}
	if !q.StartedAfter.IsZero() {
		query, args = query+" AND started_at >= ?", append(args, q.StartedAfter.UnixMilli())
	}
	if !q.StartedBefore.IsZero() {
		// The row keeps milliseconds: a start in the bound's millisecond but before it is kept,
		// and the caller's exact check drops it.
		query, args = query+" AND started_at <= ?", append(args, q.StartedBefore.UnixMilli())
	}
	if after != nil {
		at, err := strconv.ParseInt(after[0], 10, 64)
		if err != nil {
			return Page[ExecutionSummary]{}, fmt.Errorf("%w: bad time", ErrBadCursor)
		}
		query, args = query+" AND (started_at, execution_id) < (?, ?)", append(args, at, after[1])
	}
	rows, err := queryAll(ctx, x.db.r, "list executions", query+" ORDER BY started_at DESC, execution_id DESC LIMIT ?", append(args, limit+1),
		func(s scanner) (ExecutionSummary, error) {
			var e ExecutionSummary
			var status string
			var started, updated int64
			if err := s.Scan(&e.ExecutionID, &e.Tenant, &e.FlowID, &e.FlowVersion, &status, &started, &updated); err != nil {
				return ExecutionSummary{}, err
			}
			e.Status, e.StartedAt, e.UpdatedAt = state.Status(status), fromMS(started), fromMS(updated)
			return e, nil
		})
	if err != nil {
		return Page[ExecutionSummary]{}, err
	}
	return page(rows, limit, "executions", func(e ExecutionSummary) []string {
		return []string{strconv.FormatInt(ms(e.StartedAt), 10), e.ExecutionID}
	}), nil // the key ExecutionCursorAfter writes
}

// OrphanMode is what ReconcileOrphans does with an execution left running by a console that
// stopped (PLAITA_CONSOLE_RECONCILE_ORPHANS).
type OrphanMode string

const (
	// OrphanSuspend sets it suspended (kind SuspendOrphan) at its last checkpoint: an operator
	// resumes it by hand. It is never continued on its own: local mode has no at-least-once
	// delivery, and continuing would replay the side effects of the step that was running
	// without anyone deciding to.
	OrphanSuspend OrphanMode = "suspend"
	// OrphanFail ends it in error (ErrTypeOrphaned, permanent) with an end time.
	OrphanFail OrphanMode = "fail"
	// OrphanOff leaves it alone (troubleshooting only).
	OrphanOff OrphanMode = "off"
)

// SuspendOrphan is the suspension kind of an execution the reconcile suspended: nothing wakes
// it; once taken up by the current runtime (roles: the hand-over, LocalMode.AdoptEarlier) an
// operator's continue runs its step again from its checkpoint.
const SuspendOrphan = "orphan"

// ErrTypeOrphaned is the error type of an execution the reconcile failed.
const ErrTypeOrphaned = "OrphanedExecution"

// OrphanChange is one execution the reconcile changed.
type OrphanChange struct {
	ExecutionID string       `json:"execution_id"`
	Tenant      string       `json:"tenant"`
	Node        string       `json:"node"` // the node it was at
	To          state.Status `json:"to"`
}

// OrphanFailure is one running execution the reconcile could not change.
type OrphanFailure struct {
	ExecutionID string `json:"execution_id"`
	Error       string `json:"error"`
}

// ReconcileResult is what ReconcileOrphans did (the console reports it on /health).
type ReconcileResult struct {
	Mode    OrphanMode     `json:"mode"`
	Running int            `json:"running"` // running executions found
	Changed []OrphanChange `json:"changed"`
	// Skipped are executions written between the read and the compare-and-swap (the
	// executor settled them): left as they are.
	Skipped []string        `json:"skipped"`
	Failed  []OrphanFailure `json:"failed"` // undecodable state, or too large with the note
}

// reconcileBatch is how many running rows one read takes.
const reconcileBatch = 200

// ReconcileOrphans settles every execution left running, at console start (before the local
// runner starts anything): suspend or fail (OrphanOff: nothing). Each one is changed by a
// compare-and-swap on its generation and its running status, so a row written since it was
// read — by an executor that is alive after all — is not touched (Skipped). now is the time
// written into the states.
func (x *Executions) ReconcileOrphans(ctx context.Context, mode OrphanMode, now time.Time) (ReconcileResult, error) {
	res := ReconcileResult{Mode: mode, Changed: []OrphanChange{}, Skipped: []string{}, Failed: []OrphanFailure{}}
	switch mode {
	case OrphanOff:
		return res, nil
	case OrphanSuspend, OrphanFail:
	default:
		return res, invalid("orphan reconcile mode %q: use suspend, fail or off", mode)
	}
	now = now.UTC()
	after := ""
	for {
		type row struct {
			id  string
			raw string
			gen int64
		}
		rows, err := queryAll(ctx, x.db.r, "read running executions",
			"SELECT execution_id, state, generation FROM local_executions WHERE status = ? AND execution_id > ? ORDER BY execution_id LIMIT ?",
			[]any{string(state.Running), after, reconcileBatch},
			func(s scanner) (row, error) {
				var r row
				err := s.Scan(&r.id, &r.raw, &r.gen)
				return r, err
			})
		if err != nil {
			return res, err
		}
		for _, r := range rows {
			after = r.id
			res.Running++
			change, err := x.settleOrphan(ctx, mode, r.id, []byte(r.raw), r.gen, now)
			switch {
			case errors.Is(err, ErrExecutionChanged) || errors.Is(err, store.ErrNotFound):
				res.Skipped = append(res.Skipped, r.id)
			case model.IsTransient(err):
				return res, err
			case err != nil:
				res.Failed = append(res.Failed, OrphanFailure{ExecutionID: r.id, Error: err.Error()})
			default:
				res.Changed = append(res.Changed, change)
			}
		}
		if len(rows) < reconcileBatch {
			return res, nil
		}
	}
}

// settleOrphan changes one running execution as mode says, by compare-and-swap.
func (x *Executions) settleOrphan(ctx context.Context, mode OrphanMode, id string, raw []byte, gen int64, now time.Time) (OrphanChange, error) {
	st, err := store.Decode(raw)
	if err != nil {
		return OrphanChange{}, err
	}
	node := st.CurrentNode
	entry := state.TimelineEntry{Seq: st.TimelineDropped + len(st.Timeline) + 1, Time: state.Stamp(now), Node: node}
	switch mode {
	case OrphanSuspend:
		st.Status = state.Suspended
		st.Suspend = &state.Suspend{Kind: SuspendOrphan, Node: node, Since: now,
			Message: "the console stopped while this execution was running; it is kept at its last checkpoint: resume it to run the step again"}
		entry.Event, entry.Detail = "suspended", "orphan reconcile: the console restarted while it was running"
	case OrphanFail:
		st.Status = state.Error
		st.Error = &state.ErrorInfo{Type: ErrTypeOrphaned, Node: node, Permanent: true,
			Message: "the console stopped while this execution was running (PLAITA_CONSOLE_RECONCILE_ORPHANS=fail)"}
		end := now
		st.EndTime = &end
		entry.Event, entry.Detail = "error", "orphan reconcile: the console restarted while it was running"
	}
	st.Timeline = append(st.Timeline, entry)
	st.LastUpdate = now
	b, err := store.EncodeBounded(st, x.db.opts.maxStateBytes)
	if err != nil {
		return OrphanChange{}, err
	}
	if x.db.beforeOrphanUpdate != nil {
		x.db.beforeOrphanUpdate(id)
	}
	if _, err := x.swap(ctx, st, b, gen, state.Running); err != nil {
		return OrphanChange{}, err
	}
	return OrphanChange{ExecutionID: id, Tenant: st.TenantID, Node: node, To: st.Status}, nil
}
