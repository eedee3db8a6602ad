package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"time"

	"plaita/store"
	"plaita/store/keys"
)

// Wakeups is store.WakeupDriver on the console's database (migration 0007): local mode's
// wake-up records and their sorted sets. A set expires as a whole, as a Redis key does: a
// registration keeps it alive at least its record's TTL, and an expired set reads as empty.
type Wakeups struct{ db *DB }

// Wakeups is the database's wake-up records driver.
func (db *DB) Wakeups() *Wakeups { return &Wakeups{db: db} }

var _ store.WakeupDriver = (*Wakeups)(nil)

// noTimeout is the score of a wait without a timeout (Redis's +inf).
const noTimeout = int64(1) << 62

func scoreOf(f float64) int64 {
	if math.IsInf(f, 1) || f >= float64(noTimeout) {
		return noTimeout
	}
	return int64(f)
}

// set names one sorted set.
type set struct {
	tenant, kind, eventType, path, value string
}

func indexSet(sp keys.Space, eventType string) set {
	return set{sp.Tenant(), "index", eventType, "", ""}
}
func pathsSet(sp keys.Space, eventType string) set {
	return set{sp.Tenant(), "paths", eventType, "", ""}
}
func bucketSet(sp keys.Space, eventType string, t store.BucketTerm) set {
	return set{sp.Tenant(), "bucket", eventType, t.Path, t.Value}
}
func approvalSet(sp keys.Space) set { return set{sp.Tenant(), "approvals", "", "", ""} }

func (s set) args() []any { return []any{s.tenant, s.kind, s.eventType, s.path, s.value} }

const setWhere = `tenant = ? AND kind = ? AND event_type = ? AND path = ? AND value = ?`

// open makes the set live for a write: an expired one is dropped first (it is gone, as an
// expired key is), a missing one created with no expiry; ttl > 0 keeps it alive at least that
// long from now.
func (s set) open(ctx context.Context, tx *sql.Tx, now int64, ttl time.Duration) error {
	var exp int64
	err := tx.QueryRowContext(ctx, `SELECT expires_at FROM wake_sets WHERE `+setWhere, s.args()...).Scan(&exp)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		exp = -1
	case err != nil:
		return failed("open a wake-up set", err)
	case exp != 0 && exp <= now:
		if _, err := tx.ExecContext(ctx, `DELETE FROM wake_sets WHERE `+setWhere, s.args()...); err != nil {
			return failed("drop an expired wake-up set", err)
		}
		exp = -1
	}
	// As the Redis script's PTTL/PEXPIRE: a TTL only ever lengthens the set's life, and a set
	// that had none (created by a plain add) gets one; a plain add creates one without.
	want := max(exp, 0)
	if ttl > 0 && (exp <= 0 || exp < now+ttl.Milliseconds()) {
		want = now + ttl.Milliseconds()
	}
	if exp == want {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO wake_sets (tenant, kind, event_type, path, value, expires_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, kind, event_type, path, value) DO UPDATE SET expires_at = excluded.expires_at`,
		append(s.args(), want)...); err != nil {
		return failed("open a wake-up set", err)
	}
	return nil
}

// add adds (or rescores) a member; gt keeps the higher of two scores.
func (s set) add(ctx context.Context, tx *sql.Tx, member string, score int64, gt bool) error {
	update := `score = excluded.score`
	if gt {
		update = `score = MAX(score, excluded.score)`
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO wake_members (tenant, kind, event_type, path, value, member, score)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, kind, event_type, path, value, member) DO UPDATE SET `+update,
		append(s.args(), member, score)...); err != nil {
		return failed("add a wake-up member", err)
	}
	return nil
}

// remove removes members and says how many were there (in a live set).
func (s set) remove(ctx context.Context, tx *sql.Tx, now int64, members ...string) (int64, error) {
	var n int64
	for _, m := range members {
		res, err := tx.ExecContext(ctx, `DELETE FROM wake_members WHERE `+setWhere+` AND member = ? AND EXISTS
			(SELECT 1 FROM wake_sets w WHERE w.tenant = wake_members.tenant AND w.kind = wake_members.kind
			AND w.event_type = wake_members.event_type AND w.path = wake_members.path AND w.value = wake_members.value
			AND (w.expires_at = 0 OR w.expires_at > ?))`, append(s.args(), m, now)...)
		if err != nil {
			return 0, failed("remove a wake-up member", err)
		}
		k, _ := res.RowsAffected()
		n += k
	}
	return n, nil
}

// live reads the members scored from min on, in score order (then member), skipping skip and
// at most limit (< 1: all).
func (s set) live(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, now, min int64, skip, limit int) ([]string, error) {
	if limit < 1 {
		limit = -1
	}
	rows, err := q.QueryContext(ctx, `SELECT m.member FROM wake_members m JOIN wake_sets w ON w.tenant = m.tenant
		AND w.kind = m.kind AND w.event_type = m.event_type AND w.path = m.path AND w.value = m.value
		WHERE m.tenant = ? AND m.kind = ? AND m.event_type = ? AND m.path = ? AND m.value = ?
		AND (w.expires_at = 0 OR w.expires_at > ?) AND m.score >= ? ORDER BY m.score, m.member LIMIT ? OFFSET ?`,
		append(s.args(), now, min, limit, skip)...)
	if err != nil {
		return nil, failed("read a wake-up set", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, failed("read a wake-up set", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, failed("read a wake-up set", err)
	}
	return out, nil
}

// count counts the members scored from min on.
func (s set) count(ctx context.Context, db *sql.DB, now, min int64) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM wake_members m JOIN wake_sets w ON w.tenant = m.tenant
		AND w.kind = m.kind AND w.event_type = m.event_type AND w.path = m.path AND w.value = m.value
		WHERE m.tenant = ? AND m.kind = ? AND m.event_type = ? AND m.path = ? AND m.value = ?
		AND (w.expires_at = 0 OR w.expires_at > ?) AND m.score >= ?`, append(s.args(), now, min)...).Scan(&n)
	if err != nil {
		return 0, failed("count a wake-up set", err)
	}
	return n, nil
}

// putRecord writes a record with its TTL.
func putRecord(ctx context.Context, tx *sql.Tx, tenant, kind, id string, record []byte, expires int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO wake_records (tenant, kind, execution_id, record, expires_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, kind, execution_id) DO UPDATE SET record = excluded.record, expires_at = excluded.expires_at`,
		tenant, kind, id, string(record), expires); err != nil {
		return failed("write the "+kind+" of "+id, err)
	}
	return nil
}

func deleteRecord(ctx context.Context, tx *sql.Tx, tenant, kind, id string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM wake_records WHERE tenant = ? AND kind = ? AND execution_id = ?`, tenant, kind, id); err != nil {
		return failed("delete the "+kind+" of "+id, err)
	}
	return nil
}

func (w *Wakeups) now() int64 { return w.db.now().UnixMilli() }

// PutSubscription writes the record and indexes the wait, dropping the members that timed out
// before w.Drop on the way — in one transaction.
func (w *Wakeups) PutSubscription(ctx context.Context, sp keys.Space, sw store.SubscriptionWrite) error {
	return w.db.write(ctx, "write the subscription of "+sw.ID, func(tx *sql.Tx) error {
		now := w.now()
		if err := putRecord(ctx, tx, sp.Tenant(), "subscription", sw.ID, sw.Record, now+sw.TTL.Milliseconds()); err != nil {
			return err
		}
		type add struct {
			s      set
			member string
			gt     bool
		}
		adds := []add{{indexSet(sp, sw.EventType), sw.ID, false}}
		if sw.Term != nil {
			adds = []add{{pathsSet(sp, sw.EventType), sw.Term.Path, true}, {bucketSet(sp, sw.EventType, *sw.Term), sw.Member, false}}
		}
		for _, a := range adds {
			if err := a.s.open(ctx, tx, now, sw.TTL); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM wake_members WHERE `+setWhere+` AND score < ?`, append(a.s.args(), sw.Drop)...); err != nil {
				return failed("drop timed out waits", err)
			}
			if err := a.s.add(ctx, tx, a.member, scoreOf(sw.Score), a.gt); err != nil {
				return err
			}
		}
		return nil
	})
}

// RemoveSubscription deletes the record and the index member.
func (w *Wakeups) RemoveSubscription(ctx context.Context, sp keys.Space, id, eventType string) error {
	return w.db.write(ctx, "remove the subscription of "+id, func(tx *sql.Tx) error {
		if err := deleteRecord(ctx, tx, sp.Tenant(), "subscription", id); err != nil {
			return err
		}
		_, err := indexSet(sp, eventType).remove(ctx, tx, w.now(), id)
		return err
	})
}

// PutApproval writes the record and the approval index member.
func (w *Wakeups) PutApproval(ctx context.Context, sp keys.Space, id string, record []byte, since time.Time, ttl time.Duration) error {
	return w.db.write(ctx, "write the approval of "+id, func(tx *sql.Tx) error {
		now := w.now()
		if err := putRecord(ctx, tx, sp.Tenant(), "approval", id, record, now+ttl.Milliseconds()); err != nil {
			return err
		}
		s := approvalSet(sp)
		if err := s.open(ctx, tx, now, 0); err != nil {
			return err
		}
		return s.add(ctx, tx, id, since.UnixMilli(), false)
	})
}

// RemoveApproval deletes the record and the index member.
func (w *Wakeups) RemoveApproval(ctx context.Context, sp keys.Space, id string) error {
	return w.db.write(ctx, "remove the approval of "+id, func(tx *sql.Tx) error {
		if err := deleteRecord(ctx, tx, sp.Tenant(), "approval", id); err != nil {
			return err
		}
		_, err := approvalSet(sp).remove(ctx, tx, w.now(), id)
		return err
	})
}

// Index reads a page of the type's index.
func (w *Wakeups) Index(ctx context.Context, sp keys.Space, eventType string, now time.Time, skip, limit int) ([]string, error) {
	return indexSet(sp, eventType).live(ctx, w.db.r, w.now(), now.UnixMilli(), skip, limit)
}

// PathsAndIndex reads the type's paths and the first page of its index.
func (w *Wakeups) PathsAndIndex(ctx context.Context, sp keys.Space, eventType string, now time.Time, limit int) ([]string, []string, error) {
	clock := w.now()
	paths, err := pathsSet(sp, eventType).live(ctx, w.db.r, clock, now.UnixMilli(), 0, 0)
	if err != nil {
		return nil, nil, err
	}
	first, err := indexSet(sp, eventType).live(ctx, w.db.r, clock, now.UnixMilli(), 0, limit)
	return paths, first, err
}

// Buckets reads every member of each bucket.
func (w *Wakeups) Buckets(ctx context.Context, sp keys.Space, eventType string, terms []store.BucketTerm, now time.Time) ([][]string, error) {
	out := make([][]string, len(terms))
	clock := w.now()
	for i, t := range terms {
		var err error
		if out[i], err = bucketSet(sp, eventType, t).live(ctx, w.db.r, clock, now.UnixMilli(), 0, 0); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CountPaths reads the paths and counts the index.
func (w *Wakeups) CountPaths(ctx context.Context, sp keys.Space, eventType string, now time.Time) ([]string, int64, error) {
	clock := w.now()
	paths, err := pathsSet(sp, eventType).live(ctx, w.db.r, clock, now.UnixMilli(), 0, 0)
	if err != nil {
		return nil, 0, err
	}
	n, err := indexSet(sp, eventType).count(ctx, w.db.r, clock, now.UnixMilli())
	return paths, n, err
}

// CountBuckets counts the members of the buckets.
func (w *Wakeups) CountBuckets(ctx context.Context, sp keys.Space, eventType string, terms []store.BucketTerm, now time.Time) (int64, error) {
	var n int64
	clock := w.now()
	for _, t := range terms {
		k, err := bucketSet(sp, eventType, t).count(ctx, w.db.r, clock, now.UnixMilli())
		if err != nil {
			return 0, err
		}
		n += k
	}
	return n, nil
}

// Subscriptions reads subscription records.
func (w *Wakeups) Subscriptions(ctx context.Context, sp keys.Space, ids []string) ([]store.Record, error) {
	out := make([]store.Record, len(ids))
	clock := w.now()
	for i, id := range ids {
		var v string
		err := w.db.r.QueryRowContext(ctx, `SELECT record FROM wake_records WHERE tenant = ? AND kind = 'subscription'
			AND execution_id = ? AND expires_at > ?`, sp.Tenant(), id, clock).Scan(&v)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, failed("read the subscriptions of "+sp.Tenant(), err)
		default:
			out[i] = store.Record{Value: v, Found: true}
		}
	}
	return out, nil
}

// Drop removes members from the index, the paths or a bucket.
func (w *Wakeups) Drop(ctx context.Context, sp keys.Space, eventType string, where store.DropFrom, members ...string) (int64, error) {
	s := indexSet(sp, eventType)
	switch {
	case where.Term != nil:
		s = bucketSet(sp, eventType, *where.Term)
	case where.Paths:
		s = pathsSet(sp, eventType)
	}
	var n int64
	err := w.db.write(ctx, "remove wake-up members", func(tx *sql.Tx) error {
		var err error
		n, err = s.remove(ctx, tx, w.now(), members...)
		return err
	})
	return n, err
}

// RemoveStale deletes the record while it holds raw, removes the index member and reads the
// record again.
func (w *Wakeups) RemoveStale(ctx context.Context, sp keys.Space, id, eventType, raw string) (bool, string, error) {
	removed, again := false, ""
	err := w.db.write(ctx, "remove the stale subscription of "+id, func(tx *sql.Tx) error {
		now := w.now()
		if raw != "" {
			res, err := tx.ExecContext(ctx, `DELETE FROM wake_records WHERE tenant = ? AND kind = 'subscription' AND execution_id = ?
				AND record = ? AND expires_at > ?`, sp.Tenant(), id, raw, now)
			if err != nil {
				return failed("remove the subscription of "+id, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return nil
			}
		}
		removed = true
		if _, err := indexSet(sp, eventType).remove(ctx, tx, now, id); err != nil {
			return err
		}
		err := tx.QueryRowContext(ctx, `SELECT record FROM wake_records WHERE tenant = ? AND kind = 'subscription'
			AND execution_id = ? AND expires_at > ?`, sp.Tenant(), id, now).Scan(&again)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return failed("read the subscription of "+id, err)
		}
		return nil
	})
	return removed, again, err
}

// Reindex puts an index member back.
func (w *Wakeups) Reindex(ctx context.Context, sp keys.Space, id, eventType string, score float64) error {
	return w.db.write(ctx, "restore the subscription of "+id, func(tx *sql.Tx) error {
		s := indexSet(sp, eventType)
		if err := s.open(ctx, tx, w.now(), 0); err != nil {
			return err
		}
		return s.add(ctx, tx, id, scoreOf(score), false)
	})
}

// StoreDrivers are the drivers of store.NewStore on this database: local mode's execution
// storage.
func (db *DB) StoreDrivers() store.Drivers {
	return store.Drivers{State: db.States(), Wakeups: db.Wakeups(), Tenants: db.Gates(), Lists: db.Lists()}
}
