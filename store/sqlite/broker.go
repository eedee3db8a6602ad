package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"plaita/queue"
)

// Broker is queue.Driver on the console's database: the embedded task streams of local mode
// (migration 0005). It keeps Redis Streams' semantics — ids "<ms>-<seq>" that only grow, a
// group's last-delivered id, a pending list with delivery counters and idle times — so the
// queue's own code (the gate, reclaim, dead letters, replay) runs on it unchanged; queuetest
// holds it to the contract Redis passes. Every write is one transaction on the database's one
// writer. A blocked ReadGroup wakes when an entry is added in this process: the database
// belongs to one console process.
type Broker struct {
	db *DB

	mu    sync.Mutex
	added chan struct{} // closed and replaced by every Add
}

// Broker is the database's embedded broker (one per DB: its readers wait on its writes).
func (db *DB) Broker() *Broker {
	db.brokerOnce.Do(func() { db.broker = &Broker{db: db, added: make(chan struct{})} })
	return db.broker
}

var _ queue.Driver = (*Broker)(nil)

// streamID is an entry id.
type streamID struct{ ms, seq int64 }

func (s streamID) String() string {
	return strconv.FormatInt(s.ms, 10) + "-" + strconv.FormatInt(s.seq, 10)
}

// parseStreamID reads "<ms>-<seq>" or "<ms>" (seq is then dflt).
func parseStreamID(s string, dflt int64) (streamID, bool) {
	msPart, seqPart, hasSeq := strings.Cut(s, "-")
	ms, err := strconv.ParseInt(msPart, 10, 64)
	if err != nil || ms < 0 {
		return streamID{}, false
	}
	if !hasSeq {
		return streamID{ms, dflt}, true
	}
	seq, err := strconv.ParseInt(seqPart, 10, 64)
	if err != nil || seq < 0 {
		return streamID{}, false
	}
	return streamID{ms, seq}, true
}

// bound is one end of a range as SQL: the comparison and the id.
type bound struct {
	op string // ">=", ">", "<=", "<"
	id streamID
}

// parseBound reads an XRANGE bound: "-", "+", "(id" (exclusive) or an id.
func parseBound(s string, start bool) (bound, error) {
	switch {
	case s == "-":
		return bound{">=", streamID{0, 0}}, nil
	case s == "+":
		return bound{"<=", streamID{math.MaxInt64, math.MaxInt64}}, nil
	}
	excl := strings.HasPrefix(s, "(")
	dflt := int64(0)
	if !start {
		dflt = math.MaxInt64
	}
	id, ok := parseStreamID(strings.TrimPrefix(s, "("), dflt)
	if !ok {
		return bound{}, invalid("%q is not a stream id", s)
	}
	switch {
	case start && excl:
		return bound{">", id}, nil
	case start:
		return bound{">=", id}, nil
	case excl:
		return bound{"<", id}, nil
	}
	return bound{"<=", id}, nil
}

// where is the range start..end (XRANGE bounds) as a condition on (ms, seq), and its
// arguments.
func where(start, end string) (string, []any, error) {
	lo, err := parseBound(start, true)
	if err != nil {
		return "", nil, err
	}
	hi, err := parseBound(end, false)
	if err != nil {
		return "", nil, err
	}
	return "(ms, seq) " + lo.op + " (?, ?) AND (ms, seq) " + hi.op + " (?, ?)", []any{lo.id.ms, lo.id.seq, hi.id.ms, hi.id.seq}, nil
}

// ids parses entry ids; one that does not parse matches nothing (as Redis refuses it, the
// callers only pass ids they read).
func ids(in []string) ([]streamID, error) {
	out := make([]streamID, 0, len(in))
	for _, s := range in {
		id, ok := parseStreamID(s, 0)
		if !ok {
			return nil, invalid("%q is not a stream id", s)
		}
		out = append(out, id)
	}
	return out, nil
}

func encodeFields(fields []string) (string, error) {
	if len(fields)%2 != 0 {
		return "", invalid("odd number of field/value arguments (%d)", len(fields))
	}
	m := make(map[string]string, len(fields)/2)
	for i := 0; i < len(fields); i += 2 {
		m[fields[i]] = fields[i+1]
	}
	b, err := json.Marshal(m)
	return string(b), err
}

func decodeFields(raw string) map[string]string {
	var m map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return map[string]string{}
	}
	return m
}

// addTx appends an entry: the next id after the stream's last (now's millisecond, or the
// same millisecond with the next sequence number).
func addTx(ctx context.Context, tx *sql.Tx, stream string, now time.Time, fields []string) (streamID, error) {
	enc, err := encodeFields(fields)
	if err != nil {
		return streamID{}, err
	}
	var last streamID
	err = tx.QueryRowContext(ctx, `SELECT last_ms, last_seq FROM streams WHERE name = ?`, stream).Scan(&last.ms, &last.seq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return streamID{}, failed("add to "+stream, err)
	}
	id := streamID{now.UnixMilli(), 0}
	if id.ms <= last.ms {
		id = streamID{last.ms, last.seq + 1}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO streams (name, last_ms, last_seq) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET last_ms = excluded.last_ms, last_seq = excluded.last_seq`, stream, id.ms, id.seq); err != nil {
		return streamID{}, failed("add to "+stream, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO stream_entries (stream, ms, seq, fields) VALUES (?, ?, ?, ?)`,
		stream, id.ms, id.seq, enc); err != nil {
		return streamID{}, failed("add to "+stream, err)
	}
	return id, nil
}

// notify wakes every blocked ReadGroup.
func (b *Broker) notify() {
	b.mu.Lock()
	close(b.added)
	b.added = make(chan struct{})
	b.mu.Unlock()
}

func (b *Broker) waitAdded() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.added
}

// Add appends an entry.
func (b *Broker) Add(ctx context.Context, stream string, fields ...string) (string, error) {
	var id streamID
	err := b.db.write(ctx, "add to "+stream, func(tx *sql.Tx) error {
		var err error
		id, err = addTx(ctx, tx, stream, b.db.now(), fields)
		return err
	})
	if err != nil {
		return "", err
	}
	b.notify()
	return id.String(), nil
}

// KeyType is "stream" for a stream, "string" for a marker, else "none".
func (b *Broker) KeyType(ctx context.Context, key string) (string, error) {
	var n int
	err := b.db.r.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM streams WHERE name = ?) * 2
		+ (SELECT COUNT(*) FROM markers WHERE key = ? AND expires_at > ?)`, key, key, b.db.now().UnixMilli()).Scan(&n)
	switch {
	case err != nil:
		return "", failed("type of "+key, err)
	case n >= 2:
		return "stream", nil
	case n == 1:
		return "string", nil
	}
	return "none", nil
}

// CreateGroup creates the group (and the stream) after start ("$": the stream's last id).
func (b *Broker) CreateGroup(ctx context.Context, stream, group, start string) (bool, error) {
	created := false
	err := b.db.write(ctx, "create group "+group+" on "+stream, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO streams (name) VALUES (?) ON CONFLICT (name) DO NOTHING`, stream); err != nil {
			return failed("create "+stream, err)
		}
		var at streamID
		if start == "$" {
			if err := tx.QueryRowContext(ctx, `SELECT last_ms, last_seq FROM streams WHERE name = ?`, stream).Scan(&at.ms, &at.seq); err != nil {
				return failed("read "+stream, err)
			}
		} else {
			var ok bool
			if at, ok = parseStreamID(start, 0); !ok {
				return invalid("group start %q is not a stream id or $", start)
			}
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO stream_groups (stream, name, last_ms, last_seq) VALUES (?, ?, ?, ?)
			ON CONFLICT (stream, name) DO NOTHING`, stream, group, at.ms, at.seq)
		if err != nil {
			return failed("create group "+group, err)
		}
		n, _ := res.RowsAffected()
		created = n == 1
		return nil
	})
	return created, err
}

// Len counts the stream's entries.
func (b *Broker) Len(ctx context.Context, stream string) (int64, error) {
	var n int64
	if err := b.db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM stream_entries WHERE stream = ?`, stream).Scan(&n); err != nil {
		return 0, failed("length of "+stream, err)
	}
	return n, nil
}

// ReadGroup hands consumer the entries after the group's last-delivered id.
func (b *Broker) ReadGroup(ctx context.Context, stream, group, consumer string, count int, block time.Duration) ([]queue.Entry, error) {
	var deadline <-chan time.Time
	if block > 0 {
		t := time.NewTimer(block)
		defer t.Stop()
		deadline = t.C
	}
	for {
		added := b.waitAdded() // before the read: an Add after it wakes this wait
		out, err := b.readNew(ctx, stream, group, consumer, max(count, 1))
		if err != nil || len(out) > 0 || deadline == nil {
			return out, err
		}
		select {
		case <-added:
		case <-deadline:
			return nil, nil
		case <-ctx.Done():
			return nil, failed("read "+stream, ctx.Err())
		}
	}
}

func (b *Broker) readNew(ctx context.Context, stream, group, consumer string, count int) ([]queue.Entry, error) {
	var out []queue.Entry
	err := b.db.write(ctx, "read "+stream, func(tx *sql.Tx) error {
		var last streamID
		err := tx.QueryRowContext(ctx, `SELECT last_ms, last_seq FROM stream_groups WHERE stream = ? AND name = ?`, stream, group).
			Scan(&last.ms, &last.seq)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read %s: %w", stream, queue.ErrNoGroup)
		}
		if err != nil {
			return failed("read "+stream, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO stream_consumers (stream, grp, name) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			stream, group, consumer); err != nil {
			return failed("read "+stream, err)
		}
		rows, err := tx.QueryContext(ctx, `SELECT ms, seq, fields FROM stream_entries WHERE stream = ? AND (ms, seq) > (?, ?)
			ORDER BY ms, seq LIMIT ?`, stream, last.ms, last.seq, count)
		if err != nil {
			return failed("read "+stream, err)
		}
		var got []streamID
		out, got, err = scanEntries(rows)
		if err != nil || len(got) == 0 {
			return err
		}
		now := b.db.now().UnixMilli()
		for _, id := range got {
			if _, err := tx.ExecContext(ctx, `INSERT INTO stream_pending (stream, grp, ms, seq, consumer, delivered_at, deliveries)
				VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO UPDATE SET consumer = excluded.consumer,
				delivered_at = excluded.delivered_at, deliveries = 1`, stream, group, id.ms, id.seq, consumer, now); err != nil {
				return failed("read "+stream, err)
			}
		}
		newest := got[len(got)-1]
		if _, err := tx.ExecContext(ctx, `UPDATE stream_groups SET last_ms = ?, last_seq = ? WHERE stream = ? AND name = ?`,
			newest.ms, newest.seq, stream, group); err != nil {
			return failed("read "+stream, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func scanEntries(rows *sql.Rows) ([]queue.Entry, []streamID, error) {
	defer rows.Close()
	var out []queue.Entry
	var got []streamID
	for rows.Next() {
		var id streamID
		var raw string
		if err := rows.Scan(&id.ms, &id.seq, &raw); err != nil {
			return nil, nil, failed("read entries", err)
		}
		out = append(out, queue.Entry{ID: id.String(), Fields: decodeFields(raw)})
		got = append(got, id)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, failed("read entries", err)
	}
	return out, got, nil
}

// Range reads each span.
func (b *Broker) Range(ctx context.Context, stream string, spans ...queue.Span) ([][]queue.Entry, error) {
	out := make([][]queue.Entry, len(spans))
	for i, s := range spans {
		cond, args, err := where(s.Start, s.End)
		if err != nil {
			return nil, err
		}
		order := "ASC"
		if s.Rev {
			order = "DESC"
		}
		limit := int64(-1)
		if s.Count > 0 {
			limit = int64(s.Count)
		}
		rows, err := b.db.r.QueryContext(ctx, `SELECT ms, seq, fields FROM stream_entries WHERE stream = ? AND `+cond+
			` ORDER BY ms `+order+`, seq `+order+` LIMIT ?`, append(append([]any{stream}, args...), limit)...)
		if err != nil {
			return nil, failed("range of "+stream, err)
		}
		if out[i], _, err = scanEntries(rows); err != nil {
			return nil, err
		}
		if out[i] == nil {
			out[i] = []queue.Entry{}
		}
	}
	return out, nil
}

// groupExists is ErrNoGroup when the stream has no such group.
func (b *Broker) groupExists(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, stream, group string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM stream_groups WHERE stream = ? AND name = ?`, stream, group).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("group %s of %s: %w", group, stream, queue.ErrNoGroup)
	}
	if err != nil {
		return failed("group "+group+" of "+stream, err)
	}
	return nil
}

// Pending reads each span of a group's pending list.
func (b *Broker) Pending(ctx context.Context, stream string, spans ...queue.PendingSpan) ([][]queue.PendingEntry, error) {
	out := make([][]queue.PendingEntry, len(spans))
	now := b.db.now().UnixMilli()
	for i, s := range spans {
		if err := b.groupExists(ctx, b.db.r, stream, s.Group); err != nil {
			return nil, err
		}
		cond, args, err := where(s.Start, s.End)
		if err != nil {
			return nil, err
		}
		rows, err := b.db.r.QueryContext(ctx, `SELECT ms, seq, consumer, delivered_at, deliveries FROM stream_pending
			WHERE stream = ? AND grp = ? AND `+cond+` AND ? - delivered_at >= ? ORDER BY ms, seq LIMIT ?`,
			append(append([]any{stream, s.Group}, args...), now, s.MinIdle.Milliseconds(), max(s.Count, 1))...)
		if err != nil {
			return nil, failed("pending of "+stream, err)
		}
		out[i] = []queue.PendingEntry{}
		for rows.Next() {
			var id streamID
			var p queue.PendingEntry
			var at int64
			if err := rows.Scan(&id.ms, &id.seq, &p.Consumer, &at, &p.Deliveries); err != nil {
				rows.Close()
				return nil, failed("pending of "+stream, err)
			}
			p.ID, p.Idle = id.String(), time.Duration(max(now-at, 0))*time.Millisecond
			out[i] = append(out[i], p)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, failed("pending of "+stream, err)
		}
	}
	return out, nil
}

// Claim takes over the pending entries among ids idle for at least minIdle; a pending entry
// whose stream entry is gone leaves the pending list (as XCLAIM does on Redis 7).
func (b *Broker) Claim(ctx context.Context, stream, group, consumer string, minIdle time.Duration, in []string) ([]queue.Entry, error) {
	want, err := ids(in)
	if err != nil {
		return nil, err
	}
	var out []queue.Entry
	err = b.db.write(ctx, "claim in "+stream, func(tx *sql.Tx) error {
		if err := b.groupExists(ctx, tx, stream, group); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO stream_consumers (stream, grp, name) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			stream, group, consumer); err != nil {
			return failed("claim in "+stream, err)
		}
		now := b.db.now().UnixMilli()
		for _, id := range want {
			res, err := tx.ExecContext(ctx, `UPDATE stream_pending SET consumer = ?, delivered_at = ?, deliveries = deliveries + 1
				WHERE stream = ? AND grp = ? AND ms = ? AND seq = ? AND ? - delivered_at >= ?`,
				consumer, now, stream, group, id.ms, id.seq, now, minIdle.Milliseconds())
			if err != nil {
				return failed("claim in "+stream, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue
			}
			var raw string
			err = tx.QueryRowContext(ctx, `SELECT fields FROM stream_entries WHERE stream = ? AND ms = ? AND seq = ?`, stream, id.ms, id.seq).Scan(&raw)
			if errors.Is(err, sql.ErrNoRows) {
				if _, err := tx.ExecContext(ctx, `DELETE FROM stream_pending WHERE stream = ? AND grp = ? AND ms = ? AND seq = ?`,
					stream, group, id.ms, id.seq); err != nil {
					return failed("claim in "+stream, err)
				}
				continue
			}
			if err != nil {
				return failed("claim in "+stream, err)
			}
			out = append(out, queue.Entry{ID: id.String(), Fields: decodeFields(raw)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Hold moves pending entries to consumer and restarts their idle time at idle (deliveries >= 0:
// sets their counters).
func (b *Broker) Hold(ctx context.Context, stream, group, consumer string, deliveries int64, idle time.Duration, in ...string) error {
	want, err := ids(in)
	if err != nil {
		return err
	}
	return b.db.write(ctx, "hold in "+stream, func(tx *sql.Tx) error {
		if err := b.groupExists(ctx, tx, stream, group); err != nil {
			return err
		}
		now := b.db.now().Add(-idle).UnixMilli()
		for _, id := range want {
			if _, err := tx.ExecContext(ctx, `UPDATE stream_pending SET consumer = ?, delivered_at = ?,
				deliveries = CASE WHEN ? >= 0 THEN ? ELSE deliveries END
				WHERE stream = ? AND grp = ? AND ms = ? AND seq = ?`,
				consumer, now, deliveries, deliveries, stream, group, id.ms, id.seq); err != nil {
				return failed("hold in "+stream, err)
			}
		}
		return nil
	})
}

// Ack removes ids from the group's pending list.
func (b *Broker) Ack(ctx context.Context, stream, group string, in ...string) error {
	want, err := ids(in)
	if err != nil {
		return err
	}
	return b.db.write(ctx, "ack in "+stream, func(tx *sql.Tx) error { return ackTx(ctx, tx, stream, group, want) })
}

func ackTx(ctx context.Context, tx *sql.Tx, stream, group string, want []streamID) error {
	for _, id := range want {
		if _, err := tx.ExecContext(ctx, `DELETE FROM stream_pending WHERE stream = ? AND grp = ? AND ms = ? AND seq = ?`,
			stream, group, id.ms, id.seq); err != nil {
			return failed("ack in "+stream, err)
		}
	}
	return nil
}

func deleteTx(ctx context.Context, tx *sql.Tx, stream string, want []streamID) (int64, error) {
	var n int64
	for _, id := range want {
		res, err := tx.ExecContext(ctx, `DELETE FROM stream_entries WHERE stream = ? AND ms = ? AND seq = ?`, stream, id.ms, id.seq)
		if err != nil {
			return 0, failed("delete from "+stream, err)
		}
		k, _ := res.RowsAffected()
		n += k
	}
	return n, nil
}

// AckDelete acknowledges and deletes ids in one transaction: it leaves no residue.
func (b *Broker) AckDelete(ctx context.Context, stream, group string, in ...string) (delErr, err error) {
	want, err := ids(in)
	if err != nil {
		return nil, err
	}
	return nil, b.db.write(ctx, "ack in "+stream, func(tx *sql.Tx) error {
		if err := ackTx(ctx, tx, stream, group, want); err != nil {
			return err
		}
		_, err := deleteTx(ctx, tx, stream, want)
		return err
	})
}

// Delete deletes entries.
func (b *Broker) Delete(ctx context.Context, stream string, in ...string) (int64, error) {
	want, err := ids(in)
	if err != nil {
		return 0, err
	}
	var n int64
	err = b.db.write(ctx, "delete from "+stream, func(tx *sql.Tx) error {
		n, err = deleteTx(ctx, tx, stream, want)
		return err
	})
	return n, err
}

// Info reads the lengths and the groups; lag is exact here.
func (b *Broker) Info(ctx context.Context, stream, dlq string) (queue.StreamInfo, error) {
	var in queue.StreamInfo
	tx, err := b.db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return in, failed("info of "+stream, err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM stream_entries WHERE stream = ?),
		(SELECT COUNT(*) FROM stream_entries WHERE stream = ?)`, stream, dlq).Scan(&in.Length, &in.DLQLength); err != nil {
		return in, failed("info of "+stream, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT g.name, g.last_ms, g.last_seq,
		(SELECT COUNT(*) FROM stream_pending p WHERE p.stream = g.stream AND p.grp = g.name),
		(SELECT COUNT(*) FROM stream_consumers c WHERE c.stream = g.stream AND c.grp = g.name),
		(SELECT COUNT(*) FROM stream_entries e WHERE e.stream = g.stream AND (e.ms, e.seq) > (g.last_ms, g.last_seq))
		FROM stream_groups g WHERE g.stream = ? ORDER BY g.name`, stream)
	if err != nil {
		return in, failed("groups of "+stream, err)
	}
	defer rows.Close()
	for rows.Next() {
		var g queue.GroupInfo
		var last streamID
		if err := rows.Scan(&g.Name, &last.ms, &last.seq, &g.Pending, &g.Consumers, &g.Lag); err != nil {
			return in, failed("groups of "+stream, err)
		}
		g.LastDelivered, g.LagKnown = last.String(), true
		in.Groups = append(in.Groups, g)
	}
	if err := rows.Err(); err != nil {
		return in, failed("groups of "+stream, err)
	}
	return in, nil
}

// markerTx reads a live marker.
func markerTx(ctx context.Context, tx *sql.Tx, key string, now int64) (string, bool, error) {
	var v string
	err := tx.QueryRowContext(ctx, `SELECT value FROM markers WHERE key = ? AND expires_at > ?`, key, now).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, failed("read marker", err)
	}
	return v, true, nil
}

// setMarkerTx sets a marker, and drops the expired ones (they are never read again).
func setMarkerTx(ctx context.Context, tx *sql.Tx, key, value string, now int64, ttl time.Duration) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM markers WHERE expires_at <= ?`, now); err != nil {
		return failed("set marker", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO markers (key, value, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`,
		key, value, now+ttl.Milliseconds()); err != nil {
		return failed("set marker", err)
	}
	return nil
}

// DeadLetter writes the dead letter, trims the dead-letter stream and sets the marker, in one
// transaction, unless the marker is set.
func (b *Broker) DeadLetter(ctx context.Context, dlq, marker string, maxLen int, ttl time.Duration, fields ...string) (queue.DeadLettered, error) {
	var out queue.DeadLettered
	err := b.db.write(ctx, "dead-letter to "+dlq, func(tx *sql.Tx) error {
		now := b.db.now()
		prev, ok, err := markerTx(ctx, tx, marker, now.UnixMilli())
		if err != nil || ok {
			out.ID = prev
			return err
		}
		id, err := addTx(ctx, tx, dlq, now, fields)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM stream_entries WHERE stream = ? AND (ms, seq) IN
			(SELECT ms, seq FROM stream_entries WHERE stream = ? ORDER BY ms DESC, seq DESC LIMIT -1 OFFSET ?)`, dlq, dlq, max(maxLen, 0))
		if err != nil {
			return failed("trim "+dlq, err)
		}
		out.Trimmed, _ = res.RowsAffected()
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM stream_entries WHERE stream = ?`, dlq).Scan(&out.Length); err != nil {
			return failed("length of "+dlq, err)
		}
		out.Wrote, out.ID = true, id.String()
		return setMarkerTx(ctx, tx, marker, out.ID, now.UnixMilli(), ttl)
	})
	if err != nil {
		return queue.DeadLettered{}, err
	}
	return out, nil
}

// SetOnce sets a marker unless it is set.
func (b *Broker) SetOnce(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	set := false
	err := b.db.write(ctx, "set marker", func(tx *sql.Tx) error {
		now := b.db.now().UnixMilli()
		_, ok, err := markerTx(ctx, tx, key, now)
		if err != nil || ok {
			return err
		}
		set = true
		return setMarkerTx(ctx, tx, key, value, now, ttl)
	})
	return set, err
}

// Get reads a live marker.
func (b *Broker) Get(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := b.db.r.QueryRowContext(ctx, `SELECT value FROM markers WHERE key = ? AND expires_at > ?`, key, b.db.now().UnixMilli()).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, failed("read marker", err)
	}
	return v, true, nil
}

// Replace sets a live marker's value, keeping its expiry.
func (b *Broker) Replace(ctx context.Context, key, value string) error {
	return b.db.write(ctx, "replace marker", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE markers SET value = ? WHERE key = ? AND expires_at > ?`, value, key, b.db.now().UnixMilli()); err != nil {
			return failed("replace marker", err)
		}
		return nil
	})
}

// Unset removes a marker.
func (b *Broker) Unset(ctx context.Context, key string) error {
	return b.db.write(ctx, "remove marker", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM markers WHERE key = ?`, key); err != nil {
			return failed("remove marker", err)
		}
		return nil
	})
}
