package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"strings"
)

// Moving a console's data to another database (`plaita migrate copy`, docs/console.md): a
// laptop's SQLite console grows up to PostgreSQL. The console's own tables are copied in the
// order their foreign keys need, each by its key in batches — one write transaction each, an
// upsert, so a copy cut short is run again and goes on, converging on the source — and then
// verified: the same number of rows and the same checksum of their values, table by table, on
// both sides. Local mode's tables are not copied (a database server runs no local mode).

// consoleTable is a console table as the copy walks it: its key, and the columns that hold a
// boolean (SQLite gives them as 0 and 1).
type consoleTable struct {
	name  string
	key   []string
	bools []string
}

// consoleTables are the console's own tables, parents before children.
var consoleTables = []consoleTable{
	{name: "tenants", key: []string{"slug"}},
	{name: "users", key: []string{"id"}, bools: []string{"platform_admin"}},
	{name: "memberships", key: []string{"user_id", "tenant"}},
	{name: "sessions", key: []string{"token_hash"}},
	{name: "api_keys", key: []string{"id"}},
	{name: "audit", key: []string{"id"}},
	{name: "flows", key: []string{"tenant", "flow_id"}},
	{name: "flow_versions", key: []string{"tenant", "flow_id", "version"}},
	{name: "jobs", key: []string{"id"}, bools: []string{"dry_run", "truncated"}},
	{name: "job_items", key: []string{"job_id", "seq"}},
	{name: "console_served", key: []string{"mode"}},
	{name: "contract_keys", key: []string{"tenant", "key_id"}},
	{name: "console_leases", key: []string{"name"}},
	{name: "login_failures", key: []string{"login", "network"}},
}

// localTables are local mode's embedded backend: SQLite's only.
var localTables = []string{
	"local_executions", "streams", "stream_entries", "stream_groups", "stream_consumers", "stream_pending", "markers",
	"delay_members", "delay_dead", "exec_states", "exec_index_by", "exec_fences", "exec_counters",
	"wake_records", "wake_sets", "wake_members", "published_flows", "published_flow_versions",
	"gate_status", "gate_settings", "gate_quota", "gate_running", "schedules", "schedule_pending",
	"event_records", "event_sets", "event_members", "event_prune_throttles", "event_tenants", "event_cursors", "event_wakes",
	"credentials",
}

// ConsoleTables lists the console's own tables, the ones every database holds.
func ConsoleTables() []string {
	out := make([]string, len(consoleTables))
	for i, t := range consoleTables {
		out[i] = t.name
	}
	return out
}

// LocalTables lists local mode's tables, the ones only a SQLite database holds.
func LocalTables() []string { return slices.Clone(localTables) }

// localState are the local tables whose rows are executions, tasks and what they wait for: a
// copy that left them behind would lose them.
var localState = []string{"local_executions", "exec_states", "stream_entries", "delay_members", "wake_records", "schedules", "credentials", "published_flows"}

// CopyOptions change a copy.
type CopyOptions struct {
	// Batch is how many rows one transaction writes (0: 500).
	Batch int
	// LeaveLocal copies the console's tables even when the source holds local mode's state,
	// which stays behind.
	LeaveLocal bool
	// Progress hears each table's progress: rows copied so far of total.
	Progress func(table string, copied, total int64)
}

// TableCopy is what a copy did to one table and what the verification found.
type TableCopy struct {
	Table          string `json:"table"`
	Rows           int64  `json:"rows" doc:"the source's rows"`
	Copied         int64  `json:"copied" doc:"rows written to the target (a run again writes them again)"`
	TargetRows     int64  `json:"target_rows"`
	SourceChecksum string `json:"source_checksum"`
	TargetChecksum string `json:"target_checksum"`
	Verified       bool   `json:"verified" doc:"the same rows and the same checksum on both sides"`
}

// CopyReport is what a copy did.
type CopyReport struct {
	Tables   []TableCopy `json:"tables"`
	Verified bool        `json:"verified"`
	// LeftBehind counts the rows of local mode's tables not copied (LeaveLocal).
	LeftBehind map[string]int64 `json:"left_behind,omitempty"`
}

// ErrCopyUnverified: the copy ended and the target's rows differ from the source's. Permanent.
var ErrCopyUnverified = ErrPrecondition.Kind("copy_unverified", "the copied tables differ from the source")

// ErrLocalState: the source holds local mode's state, which a copy would leave behind. Permanent.
var ErrLocalState = ErrPrecondition.Kind("local_state_in_source",
	"the source holds local mode's executions or tasks: start a console on it with Redis first (it hands them over to Redis), or leave them behind")

// Copy copies the console's tables of from into to, then verifies them. Both must be at this
// binary's latest migration; the source is only read. Rows of the target with a key the
// source has are overwritten; rows the source lacks stay, and the verification names their
// tables. A copy cut short is run again: it goes on where it stopped.
func Copy(ctx context.Context, from, to *DB, o CopyOptions) (CopyReport, error) {
	if o.Batch <= 0 {
		o.Batch = 500
	}
	for _, db := range []*DB{from, to} {
		if err := db.CheckSchema(ctx); err != nil {
			return CopyReport{}, fmt.Errorf("%s: %w", db.name(), err)
		}
	}
	var rep CopyReport
	if from.Embedded() {
		left := map[string]int64{}
		for _, t := range localState {
			n, err := from.CountRows(ctx, t)
			if err != nil {
				return rep, err
			}
			if n > 0 {
				left[t] = n
			}
		}
		if len(left) > 0 && !o.LeaveLocal {
			return rep, fmt.Errorf("%w: %v", ErrLocalState, left)
		}
		if len(left) > 0 {
			rep.LeftBehind = left
		}
	}
	for _, t := range consoleTables {
		tc, err := copyTable(ctx, from, to, t, o)
		if err != nil {
			return rep, err
		}
		if err := to.syncIdentity(ctx, t); err != nil {
			return rep, err
		}
		rep.Tables = append(rep.Tables, tc)
	}
	verified := true
	for i, t := range consoleTables {
		tc := &rep.Tables[i]
		var err error
		if tc.SourceChecksum, err = from.checksum(ctx, t); err != nil {
			return rep, err
		}
		if tc.TargetChecksum, err = to.checksum(ctx, t); err != nil {
			return rep, err
		}
		if tc.TargetRows, err = to.CountRows(ctx, t.name); err != nil {
			return rep, err
		}
		tc.Verified = tc.Rows == tc.TargetRows && tc.SourceChecksum == tc.TargetChecksum
		verified = verified && tc.Verified
	}
	rep.Verified = verified
	if !verified {
		var bad []string
		for _, tc := range rep.Tables {
			if !tc.Verified {
				bad = append(bad, fmt.Sprintf("%s (%d rows, the target %d)", tc.Table, tc.Rows, tc.TargetRows))
			}
		}
		return rep, fmt.Errorf("%w: %s", ErrCopyUnverified, strings.Join(bad, ", "))
	}
	return rep, nil
}

// copyTable copies one table in batches by its key.
func copyTable(ctx context.Context, from, to *DB, t consoleTable, o CopyOptions) (TableCopy, error) {
	tc := TableCopy{Table: t.name}
	total, err := from.CountRows(ctx, t.name)
	if err != nil {
		return tc, err
	}
	tc.Rows = total
	err = from.walk(ctx, t, o.Batch, func(cols []string, rows [][]any) error {
		if err := to.upsert(ctx, t, cols, rows); err != nil {
			return err
		}
		tc.Copied += int64(len(rows))
		if o.Progress != nil {
			o.Progress(t.name, tc.Copied, total)
		}
		return nil
	})
	if err != nil {
		return tc, err
	}
	return tc, nil
}

// walk hands fn t's rows in key order, n at a time (the copy writes them, the checksum sums
// them).
func (db *DB) walk(ctx context.Context, t consoleTable, n int, fn func(cols []string, rows [][]any) error) error {
	var after []any
	for {
		cols, rows, err := db.page(ctx, t, after, n)
		if err != nil || len(rows) == 0 {
			return err
		}
		if err := fn(cols, rows); err != nil {
			return err
		}
		last := rows[len(rows)-1]
		after = after[:0]
		for _, k := range t.key {
			after = append(after, last[slices.Index(cols, k)])
		}
	}
}

// page reads up to n rows of t after the key values after (nil: from the first), in key order,
// with the table's column names. Booleans come as bools from either database.
func (db *DB) page(ctx context.Context, t consoleTable, after []any, n int) ([]string, [][]any, error) {
	keys := strings.Join(t.key, ", ")
	q, args := "SELECT * FROM "+t.name, []any{}
	if len(after) > 0 {
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(after)), ", ")
		q += " WHERE (" + keys + ") > (" + marks + ")"
		args = append(args, after...)
	}
	q += " ORDER BY " + keys + " LIMIT ?"
	args = append(args, n)
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, failed("read "+t.name, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, nil, failed("read "+t.name, err)
	}
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, nil, failed("read "+t.name, err)
		}
		for i, c := range cols {
			vals[i] = normalize(vals[i], slices.Contains(t.bools, c))
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, failed("read "+t.name, err)
	}
	return cols, out, nil
}

// normalize is a column value as both databases take it: text as a string, a boolean as a
// bool, an integer as an int64.
func normalize(v any, boolean bool) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case int64:
		if boolean {
			return x != 0
		}
	case int32:
		return int64(x)
	}
	return v
}

// upsert writes rows of t in one transaction: a key the table has is overwritten.
func (db *DB) upsert(ctx context.Context, t consoleTable, cols []string, rows [][]any) error {
	var set []string
	for _, c := range cols {
		if !slices.Contains(t.key, c) {
			set = append(set, c+" = excluded."+c)
		}
	}
	q := "INSERT INTO " + t.name + " (" + strings.Join(cols, ", ") + ") VALUES (" +
		strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ") ON CONFLICT (" + strings.Join(t.key, ", ") + ") DO UPDATE SET " +
		strings.Join(set, ", ")
	return db.write(ctx, "copy into "+t.name, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, q)
		if err != nil {
			return failed("copy into "+t.name, err)
		}
		defer stmt.Close()
		for _, r := range rows {
			if _, err := stmt.ExecContext(ctx, r...); err != nil {
				return failed("copy into "+t.name, err)
			}
		}
		return nil
	})
}

// syncIdentity moves a server's identity sequence past the ids a copy wrote (the audit's):
// SQLite's AUTOINCREMENT follows explicit ids by itself.
func (db *DB) syncIdentity(ctx context.Context, t consoleTable) error {
	if db.srv == nil || t.name != "audit" {
		return nil
	}
	if err := db.srv.SyncIdentity(ctx, t.name, "id"); err != nil {
		return failed("move the audit's id sequence on", err)
	}
	return nil
}

// checksum is the sha256 of t's rows in key order, each value as text (NULL apart, booleans as
// 0 and 1): the same rows give the same sum on SQLite and on a server.
func (db *DB) checksum(ctx context.Context, t consoleTable) (string, error) {
	h := sha256.New()
	err := db.walk(ctx, t, 1000, func(cols []string, rows [][]any) error {
		for _, r := range rows {
			writeRow(h, cols, r)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func writeRow(h hash.Hash, cols []string, r []any) {
	for i, v := range r {
		var s string
		switch x := v.(type) {
		case nil:
			s = "\x00"
		case bool:
			s = "0"
			if x {
				s = "1"
			}
		case int64:
			s = strconv.FormatInt(x, 10)
		case string:
			s = x
		default:
			s = fmt.Sprint(x)
		}
		h.Write([]byte(cols[i]))
		h.Write([]byte{0x1f})
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{0x1f})
		h.Write([]byte(s))
	}
	h.Write([]byte{0x1e})
}
