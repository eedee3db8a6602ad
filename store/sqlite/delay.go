package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"plaita/queue"
)

// Delays is queue.DelayDriver on the console's database (migration 0005): the delay queues of
// local mode, whose due members move onto the embedded task streams in the same transaction —
// a member is sent once or not at all, so a failed send is a failed pass, never a retry count.
type Delays struct{ db *DB }

// Delays is the database's delay queues.
func (db *DB) Delays() *Delays { return &Delays{db: db} }

var _ queue.DelayDriver = (*Delays)(nil)

// Schedule sets member's time (adding it when absent, keeping its failed sends).
func (d *Delays) Schedule(ctx context.Context, name, member string, at time.Time) error {
	return d.db.write(ctx, "schedule in "+name, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO delay_members (queue, member, due_at) VALUES (?, ?, ?)
			ON CONFLICT (queue, member) DO UPDATE SET due_at = excluded.due_at`, name, member, at.UnixMilli()); err != nil {
			return failed("schedule in "+name, err)
		}
		return nil
	})
}

// Due lists members due at now, earliest first (then by member, as a ZSET orders them).
func (d *Delays) Due(ctx context.Context, name string, now time.Time, limit int) ([]string, error) {
	rows, err := d.db.r.QueryContext(ctx, `SELECT member FROM delay_members WHERE queue = ? AND due_at <= ?
		ORDER BY due_at, member LIMIT ?`, name, now.UnixMilli(), max(limit, 1))
	if err != nil {
		return nil, failed("due members of "+name, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, failed("due members of "+name, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, failed("due members of "+name, err)
	}
	return out, nil
}

// Move carries out a pass in one transaction: every due item is sent (its resume added to
// stream) or buried, and leaves the queue.
func (d *Delays) Move(ctx context.Context, name, stream string, now time.Time, _ queue.MoveOptions, items []queue.MoveItem) ([]queue.MoveResult, error) {
	out := make([]queue.MoveResult, len(items))
	sent := false
	err := d.db.write(ctx, "move due members of "+name, func(tx *sql.Tx) error {
		for i, it := range items {
			var at int64
			err := tx.QueryRowContext(ctx, `SELECT due_at FROM delay_members WHERE queue = ? AND member = ?`, name, it.Member).Scan(&at)
			if errors.Is(err, sql.ErrNoRows) || err == nil && at > now.UnixMilli() {
				out[i] = queue.MoveResult{Code: queue.MoveSkipped}
				continue
			}
			if err != nil {
				return failed("move in "+name, err)
			}
			if it.Dead != "" {
				if _, err := tx.ExecContext(ctx, `INSERT INTO delay_dead (queue, member, record) VALUES (?, ?, ?)
					ON CONFLICT (queue, member) DO UPDATE SET record = excluded.record`, name, it.Member, it.Dead); err != nil {
					return failed("bury in "+name, err)
				}
				out[i] = queue.MoveResult{Code: queue.MoveBuried}
			} else {
				id, err := addTx(ctx, tx, stream, d.db.now(), []string{queue.PayloadField, it.Payload})
				if err != nil {
					return err
				}
				out[i], sent = queue.MoveResult{Code: queue.MoveSent, ID: id.String()}, true
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM delay_members WHERE queue = ? AND member = ?`, name, it.Member); err != nil {
				return failed("move in "+name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if sent {
		d.db.Broker().notify()
	}
	return out, nil
}

// Stats reads the queue at now.
func (d *Delays) Stats(ctx context.Context, name string, now time.Time) (queue.DelayStats, error) {
	var s queue.DelayStats
	var oldest sql.NullInt64
	err := d.db.r.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(due_at <= ?), 0), MIN(due_at),
		(SELECT COUNT(*) FROM delay_dead WHERE queue = ?) FROM delay_members WHERE queue = ?`,
		now.UnixMilli(), name, name).Scan(&s.Scheduled, &s.Due, &oldest, &s.Dead)
	if err != nil {
		return s, failed("stats of "+name, err)
	}
	if oldest.Valid {
		s.OldestDue = time.UnixMilli(oldest.Int64).UTC()
	}
	return s, nil
}

// Lookup reads one member.
func (d *Delays) Lookup(ctx context.Context, name, member string) (at time.Time, scheduled bool, attempts int64, dead string, err error) {
	var due int64
	err = d.db.r.QueryRowContext(ctx, `SELECT due_at, attempts FROM delay_members WHERE queue = ? AND member = ?`, name, member).Scan(&due, &attempts)
	switch {
	case err == nil:
		at, scheduled = time.UnixMilli(due).UTC(), true
	case !errors.Is(err, sql.ErrNoRows):
		return at, false, 0, "", failed("look up in "+name, err)
	}
	err = d.db.r.QueryRowContext(ctx, `SELECT record FROM delay_dead WHERE queue = ? AND member = ?`, name, member).Scan(&dead)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return at, false, 0, "", failed("look up in "+name, err)
	}
	return at, scheduled, attempts, dead, nil
}

// Dead reads every given-up member's record.
func (d *Delays) Dead(ctx context.Context, name string) (map[string]string, error) {
	rows, err := d.db.r.QueryContext(ctx, `SELECT member, record FROM delay_dead WHERE queue = ?`, name)
	if err != nil {
		return nil, failed("dead members of "+name, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var m, rec string
		if err := rows.Scan(&m, &rec); err != nil {
			return nil, failed("dead members of "+name, err)
		}
		out[m] = rec
	}
	if err := rows.Err(); err != nil {
		return nil, failed("dead members of "+name, err)
	}
	return out, nil
}
