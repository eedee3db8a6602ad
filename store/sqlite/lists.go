package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	"plaita/store"
	"plaita/store/keys"
)

// Lists is store.ListDriver on the console's database: local mode's listings read the state
// rows themselves (exec_states, ordered by start time), the lists of indexed values
// (exec_index_by) and the approval index (wake_members), newest first with ties by id, as
// Redis orders a ZSET read in reverse.
type Lists struct{ db *DB }

// Lists is the database's listings driver.
func (db *DB) Lists() *Lists { return &Lists{db: db} }

var _ store.ListDriver = (*Lists)(nil)

// Source picks the term with the fewest rows.
func (l *Lists) Source(ctx context.Context, sp keys.Space, terms []store.IndexTerm) (store.ListSource, error) {
	if len(terms) == 0 {
		return store.ListSource{}, nil
	}
	if len(terms) == 1 {
		return store.ListSource{Term: &terms[0]}, nil
	}
	best, fewest := 0, int64(-1)
	for i, t := range terms {
		var n int64
		if err := l.db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM exec_index_by WHERE tenant = ? AND field = ? AND value = ?`,
			sp.Tenant(), t.Field, t.Value).Scan(&n); err != nil {
			return store.ListSource{}, failed("count the executions indexed by "+t.Field, err)
		}
		if fewest < 0 || n < fewest {
			best, fewest = i, n
		}
	}
	return store.ListSource{Term: &terms[best], Empty: fewest == 0}, nil
}

// Rows reads a page of a source after the cursor.
func (l *Lists) Rows(ctx context.Context, sp keys.Space, src store.ListSource, after store.ListRow, n int, above string) ([]store.ListRow, error) {
	var q string
	var args []any
	now := l.db.now().UnixMilli()
	switch {
	case src.Approvals:
		q = `SELECT member, score FROM wake_members WHERE tenant = ? AND kind = 'approvals' AND event_type = '' AND path = '' AND value = ''`
		args = []any{sp.Tenant()}
	case src.Term != nil:
		q = `SELECT execution_id, started_at FROM exec_index_by WHERE tenant = ? AND field = ? AND value = ?`
		args = []any{sp.Tenant(), src.Term.Field, src.Term.Value}
	default:
		q = `SELECT execution_id, started_at FROM exec_states WHERE tenant = ? AND (expires_at = 0 OR expires_at > ?)`
		args = []any{sp.Tenant(), now}
	}
	score, member := "started_at", "execution_id"
	if src.Approvals {
		score, member = "score", "member"
	}
	if after.Member != "" {
		q += ` AND (` + score + `, ` + member + `) < (?, ?)`
		args = append(args, int64(after.Score), after.Member)
	}
	if above != "" {
		a, err := strconv.ParseInt(above, 10, 64)
		if err != nil {
			return nil, invalid("list bound %q is not a time", above)
		}
		q += ` AND ` + score + ` < ?`
		args = append(args, a)
	}
	q += ` ORDER BY ` + score + ` DESC, ` + member + ` DESC LIMIT ?`
	rows, err := l.db.r.QueryContext(ctx, q, append(args, max(n, 1))...)
	if err != nil {
		return nil, failed("list executions", err)
	}
	defer rows.Close()
	var out []store.ListRow
	for rows.Next() {
		var row store.ListRow
		var s int64
		if err := rows.Scan(&row.Member, &s); err != nil {
			return nil, failed("list executions", err)
		}
		row.Score = float64(s)
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, failed("list executions", err)
	}
	return out, nil
}

// States reads live states.
func (l *Lists) States(ctx context.Context, sp keys.Space, ids []string) ([][]byte, error) {
	out := make([][]byte, len(ids))
	now := l.db.now().UnixMilli()
	for i, id := range ids {
		b, err := readState(ctx, l.db, l.db.r, sp.Tenant(), id, now)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// ApprovalReads reads each approval record and state.
func (l *Lists) ApprovalReads(ctx context.Context, sp keys.Space, ids []string) ([]store.ApprovalRead, error) {
	out := make([]store.ApprovalRead, len(ids))
	now := l.db.now().UnixMilli()
	for i, id := range ids {
		var rec string
		err := l.db.r.QueryRowContext(ctx, `SELECT record FROM wake_records WHERE tenant = ? AND kind = 'approval'
			AND execution_id = ? AND expires_at > ?`, sp.Tenant(), id, now).Scan(&rec)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, failed("list approvals: read "+id, err)
		default:
			out[i].Record = []byte(rec)
		}
		if out[i].State, err = readState(ctx, l.db, l.db.r, sp.Tenant(), id, now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// PruneApprovals removes the members whose score is still the one given.
func (l *Lists) PruneApprovals(ctx context.Context, sp keys.Space, rows []store.ListRow) (int64, error) {
	var n int64
	err := l.db.write(ctx, "prune the approval index", func(tx *sql.Tx) error {
		for _, row := range rows {
			res, err := tx.ExecContext(ctx, `DELETE FROM wake_members WHERE tenant = ? AND kind = 'approvals' AND event_type = ''
				AND path = '' AND value = '' AND member = ? AND score = ?`, sp.Tenant(), row.Member, int64(row.Score))
			if err != nil {
				return failed("prune the approval index", err)
			}
			k, _ := res.RowsAffected()
			n += k
		}
		return nil
	})
	return n, err
}
