package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"

	"plaita/store"
	"plaita/store/keys"
)

// EventStore is store.EventsDriver on the console's database (migrations/*_local_events.up.sql):
// the event bus of local mode — records, each type's index and the tenant's feed, the prune
// throttles, the tenant list, the reconciler's cursors and the wake-up markers. store.Events
// keeps every rule; each write here is one transaction, the twin of one Redis command, pipeline
// or script, and reads order as a Redis ZSET: by score, ties by member in byte order
// (SQLite's BINARY collation). Records, sets, throttles and markers expire by their times, as
// Redis keys do: past its expiry a row reads as absent, and writes delete a bounded batch of
// expired rows so that they do not pile up where Redis would have dropped the keys. The
// notifications go through an in-process store.Ephemeral (the Hub of local mode): pub/sub
// keeps nothing, so there is no table for it. The database serves one key root: a space's root
// is not part of a row, its tenant is.
type EventStore struct {
	db     *DB
	notify store.Ephemeral
}

// EventStore is the database's event bus storage; notify carries its notifications (the
// process's Hub, shared with whatever else of local mode publishes in the process; nil: a hub
// of this EventStore's own, heard only by its own Listen).
func (db *DB) EventStore(notify store.Ephemeral) *EventStore {
	if notify == nil {
		notify = store.NewHub()
	}
	return &EventStore{db: db, notify: notify}
}

var _ store.EventsDriver = (*EventStore)(nil)

// sweepBatch bounds the expired rows one write deletes.
const sweepBatch = 32

func (s *EventStore) now() int64 { return s.db.now().UnixMilli() }

// evSet names one of a tenant's sorted sets.
type evSet struct{ tenant, kind, eventType string }

func evSetOf(sp keys.Space, set store.EventSet) evSet {
	if set.Kind == store.EventFeed {
		return evSet{sp.Tenant(), "feed", ""}
	}
	return evSet{sp.Tenant(), "index", set.Type}
}

func (v evSet) args() []any { return []any{v.tenant, v.kind, v.eventType} }

// liveMembers is the FROM and WHERE of a live set's members (three set arguments, then now).
const liveMembers = ` FROM event_members m JOIN event_sets e ON e.tenant = m.tenant AND e.kind = m.kind AND e.event_type = m.event_type
	WHERE m.tenant = ? AND m.kind = ? AND m.event_type = ? AND e.expires_at > ?`

// add adds (or rescores) a member, the set then living ttl from now — as ZADD and PEXPIRE: a
// set past its expiry is dropped first, as an expired key is gone.
func (v evSet) add(ctx context.Context, tx *sql.Tx, now int64, ttl time.Duration, member string, score int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM event_sets WHERE tenant = ? AND kind = ? AND event_type = ? AND expires_at <= ?`,
		append(v.args(), now)...); err != nil {
		return failed("drop an expired event set", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO event_sets (tenant, kind, event_type, expires_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant, kind, event_type) DO UPDATE SET expires_at = excluded.expires_at`,
		append(v.args(), now+ttl.Milliseconds())...); err != nil {
		return failed("write an event set", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO event_members (tenant, kind, event_type, member, score) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, kind, event_type, member) DO UPDATE SET score = excluded.score`,
		append(v.args(), member, score)...); err != nil {
		return failed("add an event set member", err)
	}
	return nil
}

// remove removes members (a member of an expired set is gone already).
func (v evSet) remove(ctx context.Context, tx *sql.Tx, members ...string) error {
	for _, m := range members {
		if _, err := tx.ExecContext(ctx, `DELETE FROM event_members WHERE tenant = ? AND kind = ? AND event_type = ? AND member = ?`,
			append(v.args(), m)...); err != nil {
			return failed("remove an event set member", err)
		}
	}
	return nil
}

// scored reads member and score rows.
func scored(rows *sql.Rows, err error) ([]store.ScoredMember, error) {
	if err != nil {
		return nil, failed("read an event set", err)
	}
	defer rows.Close()
	out := []store.ScoredMember{}
	for rows.Next() {
		var m string
		var score int64
		if err := rows.Scan(&m, &score); err != nil {
			return nil, failed("read an event set", err)
		}
		out = append(out, store.ScoredMember{Member: m, Score: float64(score)})
	}
	if err := rows.Err(); err != nil {
		return nil, failed("read an event set", err)
	}
	return out, nil
}

// sweep deletes up to sweepBatch rows of table expired at now.
func sweep(ctx context.Context, tx *sql.Tx, table, key string, now int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE (`+key+`) IN
		(SELECT `+key+` FROM `+table+` WHERE expires_at <= ? LIMIT ?)`, now, sweepBatch); err != nil {
		return failed("delete expired rows of "+table, err)
	}
	return nil
}

// placeholders is "?, ?, …" for n arguments.
func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// Put inserts the record, or replaces one that expired (as SET NX finds an expired key gone).
func (s *EventStore) Put(ctx context.Context, sp keys.Space, id string, record []byte, ttl time.Duration) (bool, error) {
	var created bool
	err := s.db.write(ctx, "write event "+id, func(tx *sql.Tx) error {
		now := s.now()
		if err := sweep(ctx, tx, "event_records", "tenant, event_id", now); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO event_records (tenant, event_id, record, expires_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (tenant, event_id) DO UPDATE SET record = excluded.record, expires_at = excluded.expires_at
			WHERE event_records.expires_at <= ?`, sp.Tenant(), id, string(record), now+ttl.Milliseconds(), now)
		if err != nil {
			return failed("write event "+id, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return failed("write event "+id, err)
		}
		created = n == 1
		return nil
	})
	return created, err
}

// live reads the live records of ids, by id.
func (s *EventStore) live(ctx context.Context, sp keys.Space, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := []any{sp.Tenant(), s.now()}
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := s.db.r.QueryContext(ctx, `SELECT event_id, record FROM event_records WHERE tenant = ? AND expires_at > ?
		AND event_id IN (`+placeholders(len(ids))+`)`, args...)
	if err != nil {
		return nil, failed("read events of "+sp.Tenant(), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, rec string
		if err := rows.Scan(&id, &rec); err != nil {
			return nil, failed("read events of "+sp.Tenant(), err)
		}
		out[id] = rec
	}
	if err := rows.Err(); err != nil {
		return nil, failed("read events of "+sp.Tenant(), err)
	}
	return out, nil
}

// Records reads the live records of ids in one query.
func (s *EventStore) Records(ctx context.Context, sp keys.Space, ids []string) ([]store.Record, error) {
	recs, err := s.live(ctx, sp, ids)
	if err != nil {
		return nil, err
	}
	out := make([]store.Record, len(ids))
	for i, id := range ids {
		if v, ok := recs[id]; ok {
			out[i] = store.Record{Value: v, Found: true}
		}
	}
	return out, nil
}

// Exist reports which of ids have a live record, in one query.
func (s *EventStore) Exist(ctx context.Context, sp keys.Space, ids []string) ([]bool, error) {
	recs, err := s.live(ctx, sp, ids)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(ids))
	for i, id := range ids {
		_, out[i] = recs[id]
	}
	return out, nil
}

// Index writes the index and feed members, the tenant's last publish and the throttle in one
// transaction, then sends the notification (after the commit: a listener finds what it
// announces).
func (s *EventStore) Index(ctx context.Context, sp keys.Space, w store.EventIndexWrite) (bool, error) {
	due := false
	err := s.db.write(ctx, "index event "+w.ID, func(tx *sql.Tx) error {
		now := s.now()
		if err := sweep(ctx, tx, "event_sets", "tenant, kind, event_type", now); err != nil {
			return err
		}
		if err := (evSet{sp.Tenant(), "index", w.Type}).add(ctx, tx, now, w.TTL, w.ID, w.Score); err != nil {
			return err
		}
		if err := (evSet{sp.Tenant(), "feed", ""}).add(ctx, tx, now, w.TTL, w.Feed, w.Score); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO event_tenants (tenant, last_at) VALUES (?, ?)
			ON CONFLICT (tenant) DO UPDATE SET last_at = excluded.last_at`, sp.Tenant(), w.TenantAt); err != nil {
			return failed("list tenant "+sp.Tenant(), err)
		}
		if w.Throttle <= 0 {
			return nil
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO event_prune_throttles (tenant, event_type, expires_at) VALUES (?, ?, ?)
			ON CONFLICT (tenant, event_type) DO UPDATE SET expires_at = excluded.expires_at
			WHERE event_prune_throttles.expires_at <= ?`, sp.Tenant(), w.Type, now+w.Throttle.Milliseconds(), now)
		if err != nil {
			return nil // as on Redis: the event is indexed, only its prune waits
		}
		n, err := res.RowsAffected()
		due = err == nil && n == 1
		return nil
	})
	if err != nil {
		return false, err
	}
	if _, err := s.notify.Publish(ctx, w.Channel, w.Note); err != nil {
		return false, err
	}
	return due, nil
}

// Unindex removes the members from the feed and the type's index in one transaction.
func (s *EventStore) Unindex(ctx context.Context, sp keys.Space, members []store.EventMember) error {
	if len(members) == 0 {
		return nil
	}
	return s.db.write(ctx, "remove expired events of "+sp.Tenant(), func(tx *sql.Tx) error {
		for _, m := range members {
			if err := (evSet{sp.Tenant(), "feed", ""}).remove(ctx, tx, m.Feed); err != nil {
				return err
			}
			if err := (evSet{sp.Tenant(), "index", m.Type}).remove(ctx, tx, m.ID); err != nil {
				return err
			}
		}
		return nil
	})
}

// Drop removes members from a set, or tenants from the tenant list, in one transaction.
func (s *EventStore) Drop(ctx context.Context, sp keys.Space, set store.EventSet, members ...string) error {
	if len(members) == 0 {
		return nil
	}
	return s.db.write(ctx, "remove event set members", func(tx *sql.Tx) error {
		if set.Kind != store.EventTenants {
			return evSetOf(sp, set).remove(ctx, tx, members...)
		}
		for _, t := range members {
			if _, err := tx.ExecContext(ctx, `DELETE FROM event_tenants WHERE tenant = ?`, t); err != nil {
				return failed("remove tenant "+t+" from the event tenants", err)
			}
		}
		return nil
	})
}

// Page reads newest first after the anchor: the member's current score while the set holds
// it (its rank, as the Redis script goes on from), else the cursor's.
func (s *EventStore) Page(ctx context.Context, sp keys.Space, set store.EventSet, after store.ScoredMember, limit int) ([]store.ScoredMember, error) {
	v, now := evSetOf(sp, set), s.now()
	if after.Member == "" {
		return scored(s.db.r.QueryContext(ctx, `SELECT m.member, m.score`+liveMembers+`
			ORDER BY m.score DESC, m.member DESC LIMIT ?`, append(v.args(), now, limit)...))
	}
	var score any = after.Score
	var cur int64
	err := s.db.r.QueryRowContext(ctx, `SELECT m.score`+liveMembers+` AND m.member = ?`, append(v.args(), now, after.Member)...).Scan(&cur)
	switch {
	case err == nil:
		score = cur
	case !errors.Is(err, sql.ErrNoRows):
		return nil, failed("read an event set", err)
	}
	return scored(s.db.r.QueryContext(ctx, `SELECT m.member, m.score`+liveMembers+` AND (m.score < ? OR (m.score = ? AND m.member < ?))
		ORDER BY m.score DESC, m.member DESC LIMIT ?`, append(v.args(), now, score, score, after.Member, limit)...))
}

// Ranks reads members by rank, oldest first.
func (s *EventStore) Ranks(ctx context.Context, sp keys.Space, set store.EventSet, start, stop int) ([]string, error) {
	if start < 0 || stop < start {
		return []string{}, nil
	}
	rows, err := scored(s.db.r.QueryContext(ctx, `SELECT m.member, m.score`+liveMembers+`
		ORDER BY m.score, m.member LIMIT ? OFFSET ?`, append(evSetOf(sp, set).args(), s.now(), stop-start+1, start)...))
	if err != nil {
		return nil, err
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Member
	}
	return out, nil
}

// FeedRange reads the feed between two scores, oldest first.
func (s *EventStore) FeedRange(ctx context.Context, sp keys.Space, from, to int64, skip, count int) ([]store.ScoredMember, error) {
	return scored(s.db.r.QueryContext(ctx, `SELECT m.member, m.score`+liveMembers+` AND m.score >= ? AND m.score <= ?
		ORDER BY m.score, m.member LIMIT ? OFFSET ?`, append(evSet{sp.Tenant(), "feed", ""}.args(), s.now(), from, to, count, max(skip, 0))...))
}

// Tenants reads the tenant list in score order.
func (s *EventStore) Tenants(ctx context.Context, _ keys.Space, since *int64) ([]string, error) {
	q, args := `SELECT tenant FROM event_tenants ORDER BY last_at, tenant`, []any{}
	if since != nil {
		q, args = `SELECT tenant FROM event_tenants WHERE last_at >= ? ORDER BY last_at, tenant`, []any{*since}
	}
	rows, err := s.db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, failed("read the event tenants", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, failed("read the event tenants", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, failed("read the event tenants", err)
	}
	return out, nil
}

// ForgetTenant deletes the tenant's row while its last publish is before before.
func (s *EventStore) ForgetTenant(ctx context.Context, sp keys.Space, before int64) (bool, error) {
	var gone bool
	err := s.db.write(ctx, "forget tenant "+sp.Tenant(), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM event_tenants WHERE tenant = ? AND last_at < ?`, sp.Tenant(), before)
		if err != nil {
			return failed("forget tenant "+sp.Tenant(), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return failed("forget tenant "+sp.Tenant(), err)
		}
		gone = n == 1
		return nil
	})
	return gone, err
}

// Cursor reads the tenant's cursor.
func (s *EventStore) Cursor(ctx context.Context, sp keys.Space) (string, bool, error) {
	var at int64
	err := s.db.r.QueryRowContext(ctx, `SELECT at FROM event_cursors WHERE tenant = ?`, sp.Tenant()).Scan(&at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, failed("read the event cursor of "+sp.Tenant(), err)
	}
	return strconv.FormatInt(at, 10), true, nil
}

// AdvanceCursor upserts the cursor unless it is at at or later.
func (s *EventStore) AdvanceCursor(ctx context.Context, sp keys.Space, at int64) error {
	return s.db.write(ctx, "write the event cursor of "+sp.Tenant(), func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO event_cursors (tenant, at) VALUES (?, ?)
			ON CONFLICT (tenant) DO UPDATE SET at = excluded.at WHERE event_cursors.at < excluded.at`, sp.Tenant(), at); err != nil {
			return failed("write the event cursor of "+sp.Tenant(), err)
		}
		return nil
	})
}

func wakeArgs(m store.WakeMarker) []any {
	return []any{m.Space.Tenant(), m.ExecutionID, m.Suspension, m.EventID}
}

const wakeWhere = `tenant = ? AND execution_id = ? AND suspension = ? AND event_id = ?`

// wake reads a live marker.
func wake(ctx context.Context, tx *sql.Tx, m store.WakeMarker, now int64) (string, bool, error) {
	var v string
	err := tx.QueryRowContext(ctx, `SELECT value FROM event_wakes WHERE `+wakeWhere+` AND expires_at > ?`, append(wakeArgs(m), now)...).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, failed("read a wake-up marker of "+m.ExecutionID, err)
	}
	return v, true, nil
}

// setWake upserts a marker's value for ttl.
func setWake(ctx context.Context, tx *sql.Tx, m store.WakeMarker, value string, expires int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO event_wakes (tenant, execution_id, suspension, event_id, value, expires_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, execution_id, suspension, event_id)
		DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`, append(wakeArgs(m), value, expires)...); err != nil {
		return failed("write a wake-up marker of "+m.ExecutionID, err)
	}
	return nil
}

// ClaimWake reads the marker and writes the caller's claim when store.DecideWake gives it the
// claim, in one transaction.
func (s *EventStore) ClaimWake(ctx context.Context, m store.WakeMarker, c store.WakeClaim) (store.WakeState, string, error) {
	var state store.WakeState
	var prev string
	err := s.db.write(ctx, "claim a wake-up of "+m.ExecutionID, func(tx *sql.Tx) error {
		now := s.now()
		if err := sweep(ctx, tx, "event_wakes", "tenant, execution_id, suspension, event_id", now); err != nil {
			return err
		}
		v, found, err := wake(ctx, tx, m, now)
		if err != nil {
			return err
		}
		st, write := store.DecideWake(v, found, c.Now, c.Grace)
		if write {
			if err := setWake(ctx, tx, m, c.Token, now+c.TTL.Milliseconds()); err != nil {
				return err
			}
		}
		state, prev = st, v
		return nil
	})
	return state, prev, err
}

// SetWake replaces (or deletes) the marker while it holds expect, in one transaction.
func (s *EventStore) SetWake(ctx context.Context, m store.WakeMarker, expect, value string, ttl time.Duration) (bool, error) {
	var done bool
	err := s.db.write(ctx, "write a wake-up marker of "+m.ExecutionID, func(tx *sql.Tx) error {
		now := s.now()
		v, found, err := wake(ctx, tx, m, now)
		if err != nil || !found || v != expect {
			return err
		}
		if value == "" {
			if _, err := tx.ExecContext(ctx, `DELETE FROM event_wakes WHERE `+wakeWhere, wakeArgs(m)...); err != nil {
				return failed("delete a wake-up marker of "+m.ExecutionID, err)
			}
		} else if err := setWake(ctx, tx, m, value, now+ttl.Milliseconds()); err != nil {
			return err
		}
		done = true
		return nil
	})
	return done, err
}

// Listen subscribes on the notifier and hands each payload to fn. A listener that fell behind
// loses notifications (the hub drops rather than block its publishers): onSubscribed runs
// again when that is found, as after a resubscription on Redis.
func (s *EventStore) Listen(ctx context.Context, channel string, onSubscribed func(), fn func(payload string)) error {
	sub, err := s.notify.Subscribe(ctx, channel)
	if err != nil {
		return err
	}
	defer sub.Close()
	if onSubscribed != nil {
		onSubscribed()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case msg, ok := <-sub.C:
			if !ok {
				if err := sub.Err(); err != nil && ctx.Err() == nil {
					return err
				}
				if ctx.Err() == nil {
					return failed("listen on "+channel, errors.New("the subscription ended"))
				}
				return nil
			}
			if sub.Lost() && onSubscribed != nil {
				onSubscribed()
			}
			fn(string(msg.Payload))
		}
	}
}
