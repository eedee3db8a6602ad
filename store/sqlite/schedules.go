package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"plaita/queue"
	"plaita/store"
)

// Schedules is store.SchedulesDriver on the console's database (migration 0010): the cron
// schedules of local mode. Each write is one transaction on the database's one writer, the twin
// of one Lua script of store.RedisScheduleDriver with the same results; a read reads one
// snapshot. Two things differ in form, not in what store.Schedules sees:
//   - the due index is a column of the record (due_at), so a due entry cannot outlive its
//     record: Forget has nothing to do;
//   - a takeover writes the claim back as encoding/json encodes it (keys sorted), where Redis
//     writes cjson's order; either is the token the next completion compares.
//
// Claim times are the database's clock, which also stamps the ids of the embedded task streams
// (Broker), as the Redis clock stamps the stream's ids in the cluster.
type Schedules struct{ db *DB }

// Schedules is the database's schedules driver.
func (db *DB) Schedules() *Schedules { return &Schedules{db: db} }

var _ store.SchedulesDriver = (*Schedules)(nil)

// infField is what the record's next_ms field reads as when there is no next tick (Redis's
// "+inf", which store.DecodeSchedule takes).
const infField = "+inf"

// keyArgs are a schedule's key columns as query arguments.
func keyArgs(ref store.ScheduleRef, more ...any) []any {
	return append([]any{ref.Root, ref.Tenant, ref.ID}, more...)
}

const whereSchedule = `root = ? AND tenant = ? AND id = ?`

// nullMS is a time for a nullable column: NULL for the zero time (none, +inf).
func nullMS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// msText is a time as the compare-and-set columns are compared: text, as Redis compares its
// fields (a column that holds something else never matches).
func msText(t time.Time) string {
	if t.IsZero() {
		return infField
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// number reads a value as Lua's tonumber reads the scripts' fields: a JSON number, or a string
// holding a decimal number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		return f, err == nil
	}
	return 0, false
}

// decodeClaim decodes a stored claim as the scripts do (numbers kept as written); ok false when
// it is not JSON.
func decodeClaim(raw string) (any, bool) {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// setDueTx recomputes the schedule's due time (set_due of the scripts): the earliest of its
// next tick and each pending claim's claimed_ms + grace (0 + grace for a claim that does not
// decode), none when there is neither.
func setDueTx(ctx context.Context, tx *sql.Tx, ref store.ScheduleRef, grace time.Duration) error {
	best := math.Inf(1)
	var next sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT next_ms FROM schedules WHERE `+whereSchedule, keyArgs(ref)...).Scan(&next)
	if err != nil {
		return failed("due time of schedule "+ref.ID, err)
	}
	if next.Valid {
		if f, ok := number(next.String); ok {
			best = f
		}
	}
	rows, err := tx.QueryContext(ctx, `SELECT claim FROM schedule_pending WHERE `+whereSchedule, keyArgs(ref)...)
	if err != nil {
		return failed("due time of schedule "+ref.ID, err)
	}
	defer rows.Close()
	g := float64(grace.Milliseconds())
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			return failed("due time of schedule "+ref.ID, err)
		}
		at := 0.0
		if v, ok := decodeClaim(raw); ok {
			if m, ok := v.(map[string]any); ok {
				if f, ok := number(m["claimed_ms"]); ok {
					at = f
				}
			}
		}
		best = min(best, at+g)
	}
	if err := rows.Err(); err != nil {
		return failed("due time of schedule "+ref.ID, err)
	}
	var due any
	if !math.IsInf(best, 1) {
		due = int64(math.RoundToEven(best))
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schedules SET due_at = ? WHERE `+whereSchedule, append([]any{due}, keyArgs(ref)...)...); err != nil {
		return failed("due time of schedule "+ref.ID, err)
	}
	return nil
}

// Create inserts the record unless one exists.
func (s *Schedules) Create(ctx context.Context, ref store.ScheduleRef, def string, last, next, created time.Time, grace time.Duration) (bool, error) {
	what := "create schedule " + ref.ID
	done := false
	err := s.db.write(ctx, what, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM schedules WHERE `+whereSchedule, keyArgs(ref)...).Scan(&one)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return failed(what, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schedules (root, tenant, id, def, rev, last_tick, next_ms, created_ms)
			VALUES (?, ?, ?, ?, 1, ?, ?, ?)`, keyArgs(ref, def, last.UnixMilli(), nullMS(next), created.UnixMilli())...); err != nil {
			return failed(what, err)
		}
		done = true
		return setDueTx(ctx, tx, ref, grace)
	})
	return done, err
}

// Read reads each record with its pending claims, in one read transaction.
func (s *Schedules) Read(ctx context.Context, refs ...store.ScheduleRef) ([]store.StoredSchedule, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	tx, err := s.db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, failed("read schedules", err)
	}
	defer func() { _ = tx.Rollback() }()
	out := make([]store.StoredSchedule, len(refs))
	for i, ref := range refs {
		if out[i].Fields, err = readTx(ctx, tx, ref); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readTx reads one record as its fields (nil: none). Every column is read as text, as Redis
// holds it: a value that is not what it should be is store.DecodeSchedule's to refuse.
func readTx(ctx context.Context, tx *sql.Tx, ref store.ScheduleRef) (map[string]string, error) {
	what := "read schedule " + ref.ID
	rows, err := tx.QueryContext(ctx, `SELECT s.def, s.rev, s.last_tick, s.next_ms, s.last_fire, s.last_fire_tick, s.last_skip, p.tick_ms, p.claim
		FROM schedules s LEFT JOIN schedule_pending p ON p.root = s.root AND p.tenant = s.tenant AND p.id = s.id
		WHERE s.root = ? AND s.tenant = ? AND s.id = ?`, keyArgs(ref)...)
	if err != nil {
		return nil, failed(what, err)
	}
	defer rows.Close()
	var fields map[string]string
	for rows.Next() {
		var def, rev, last, next, fire, fireTick, skip, tick, claim sql.NullString
		if err := rows.Scan(&def, &rev, &last, &next, &fire, &fireTick, &skip, &tick, &claim); err != nil {
			return nil, failed(what, err)
		}
		if fields == nil {
			fields = map[string]string{"def": def.String, "rev": rev.String, "last_tick": last.String, "next_ms": infField}
			if next.Valid {
				fields["next_ms"] = next.String
			}
			for name, v := range map[string]sql.NullString{"last_fire": fire, "last_fire_tick": fireTick, "last_skip": skip} {
				if v.Valid {
					fields[name] = v.String
				}
			}
		}
		if tick.Valid {
			fields["pending:"+tick.String] = claim.String
		}
	}
	if err := rows.Err(); err != nil {
		return nil, failed(what, err)
	}
	return fields, nil
}

// IDs lists the tenant's schedules by creation time, then id (a ZSET's order).
func (s *Schedules) IDs(ctx context.Context, root, tenant string) ([]string, error) {
	what := "list schedules of " + tenant
	rows, err := s.db.r.QueryContext(ctx, `SELECT id FROM schedules WHERE root = ? AND tenant = ? ORDER BY created_ms, id`, root, tenant)
	if err != nil {
		return nil, failed(what, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, failed(what, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, failed(what, err)
	}
	return ids, nil
}

// revTx reads the record's rev as text (ok false: no record).
func revTx(ctx context.Context, tx *sql.Tx, ref store.ScheduleRef, what string) (rev string, ok bool, err error) {
	var v sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT rev FROM schedules WHERE `+whereSchedule, keyArgs(ref)...).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, failed(what, err)
	}
	return v.String, true, nil
}

// casTx reports whether the record's rev and last_tick are still rev and last (the claim's and
// the skip's compare-and-set; no record never matches).
func casTx(ctx context.Context, tx *sql.Tx, ref store.ScheduleRef, rev int64, last time.Time, what string) (bool, error) {
	var r, l sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT rev, last_tick FROM schedules WHERE `+whereSchedule, keyArgs(ref)...).Scan(&r, &l)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, failed(what, err)
	}
	return r.String == strconv.FormatInt(rev, 10) && l.String == msText(last), nil
}

// Update writes the definition if rev is still the stored one.
func (s *Schedules) Update(ctx context.Context, ref store.ScheduleRef, rev int64, def string, last, next time.Time, grace time.Duration) (found, written bool, err error) {
	what := "update schedule " + ref.ID
	err = s.db.write(ctx, what, func(tx *sql.Tx) error {
		cur, ok, err := revTx(ctx, tx, ref, what)
		if err != nil || !ok {
			return err
		}
		found = true
		if cur != strconv.FormatInt(rev, 10) {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE schedules SET def = ?, rev = ?, next_ms = ?, last_tick = COALESCE(?, last_tick) WHERE `+whereSchedule,
			append([]any{def, rev + 1, nullMS(next), nullMS(last)}, keyArgs(ref)...)...); err != nil {
			return failed(what, err)
		}
		written = true
		return setDueTx(ctx, tx, ref, grace)
	})
	return found, written, err
}

// Delete removes the record with its pending claims.
func (s *Schedules) Delete(ctx context.Context, ref store.ScheduleRef) (bool, error) {
	what := "delete schedule " + ref.ID
	deleted := false
	err := s.db.write(ctx, what, func(tx *sql.Tx) error {
		// The claims first: the foreign key cascades too, but a delete must not depend on the
		// connection's pragma.
		if _, err := tx.ExecContext(ctx, `DELETE FROM schedule_pending WHERE `+whereSchedule, keyArgs(ref)...); err != nil {
			return failed(what, err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM schedules WHERE `+whereSchedule, keyArgs(ref)...)
		if err != nil {
			return failed(what, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return failed(what, err)
		}
		deleted = n == 1
		return nil
	})
	return deleted, err
}

// Due lists the due records of root, earliest first, then by "<tenant>:<id>" as a ZSET orders
// its members; a zero now (+inf) lists the ones with nothing to do too, last.
func (s *Schedules) Due(ctx context.Context, root string, now time.Time, limit int) ([]store.DueMember, error) {
	cond, args := `due_at IS NOT NULL AND due_at <= ?`, []any{root, now.UnixMilli(), max(limit, 1)}
	if now.IsZero() {
		cond, args = `TRUE`, []any{root, max(limit, 1)}
	}
	rows, err := s.db.r.QueryContext(ctx, `SELECT tenant || ':' || id, due_at FROM schedules
		WHERE root = ? AND `+cond+` ORDER BY due_at IS NULL, due_at, tenant || ':' || id LIMIT ?`, args...)
	if err != nil {
		return nil, failed("due schedules", err)
	}
	defer rows.Close()
	var out []store.DueMember
	for rows.Next() {
		var m store.DueMember
		var at sql.NullInt64
		if err := rows.Scan(&m.Member, &at); err != nil {
			return nil, failed("due schedules", err)
		}
		if at.Valid {
			m.At = time.UnixMilli(at.Int64).UTC()
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, failed("due schedules", err)
	}
	return out, nil
}

// DueScore reads the record's due time.
func (s *Schedules) DueScore(ctx context.Context, ref store.ScheduleRef) (time.Time, bool, error) {
	var at sql.NullInt64
	err := s.db.r.QueryRowContext(ctx, `SELECT due_at FROM schedules WHERE `+whereSchedule, keyArgs(ref)...).Scan(&at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, failed("due time of schedule "+ref.ID, err)
	case !at.Valid:
		return time.Time{}, true, nil
	}
	return time.UnixMilli(at.Int64).UTC(), true, nil
}

// Claim records the claim with the database clock's times if rev and last_tick are the read
// ones.
func (s *Schedules) Claim(ctx context.Context, ref store.ScheduleRef, w store.TickWrite, grace time.Duration) (string, bool, error) {
	what := "claim schedule " + ref.ID
	var stored string
	err := s.db.write(ctx, what, func(tx *sql.Tx) error {
		ok, err := casTx(ctx, tx, ref, w.Rev, w.Last, what)
		if err != nil || !ok {
			return err
		}
		// The claim times go inside the caller's JSON object in place of its closing brace, as
		// the script appends them.
		ms := strconv.FormatInt(s.db.now().UnixMilli(), 10)
		claim := w.Body[:max(len(w.Body)-1, 0)] + `,"claimed_ms":` + ms + `,"first_claimed_ms":` + ms + `}`
		if _, err := tx.ExecContext(ctx, `UPDATE schedules SET last_tick = ?, next_ms = ? WHERE `+whereSchedule,
			append([]any{w.Tick.UnixMilli(), nullMS(w.Next)}, keyArgs(ref)...)...); err != nil {
			return failed(what, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schedule_pending (root, tenant, id, tick_ms, claim) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (root, tenant, id, tick_ms) DO UPDATE SET claim = excluded.claim`, keyArgs(ref, w.Tick.UnixMilli(), claim)...); err != nil {
			return failed(what, err)
		}
		stored = claim
		return setDueTx(ctx, tx, ref, grace)
	})
	return stored, stored != "", err
}

// Skip records the skip if rev and last_tick are the read ones.
func (s *Schedules) Skip(ctx context.Context, ref store.ScheduleRef, w store.TickWrite, grace time.Duration) (bool, error) {
	what := "skip tick of schedule " + ref.ID
	done := false
	err := s.db.write(ctx, what, func(tx *sql.Tx) error {
		ok, err := casTx(ctx, tx, ref, w.Rev, w.Last, what)
		if err != nil || !ok {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE schedules SET last_tick = ?, next_ms = ?, last_skip = ? WHERE `+whereSchedule,
			append([]any{w.Tick.UnixMilli(), nullMS(w.Next), w.Body}, keyArgs(ref)...)...); err != nil {
			return failed(what, err)
		}
		done = true
		return setDueTx(ctx, tx, ref, grace)
	})
	return done, err
}

// claimTx reads the pending claim of tick (ok false: none).
func claimTx(ctx context.Context, tx *sql.Tx, ref store.ScheduleRef, tickMS int64, what string) (string, bool, error) {
	var cur string
	err := tx.QueryRowContext(ctx, `SELECT claim FROM schedule_pending WHERE `+whereSchedule+` AND tick_ms = ?`, keyArgs(ref, tickMS)...).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, failed(what, err)
	}
	return cur, true, nil
}

// Complete settles the claim if it is stored as pending.
func (s *Schedules) Complete(ctx context.Context, ref store.ScheduleRef, tickMS int64, pending, outcome string, fired bool, grace time.Duration) (bool, error) {
	what := "complete claim of schedule " + ref.ID
	done := false
	err := s.db.write(ctx, what, func(tx *sql.Tx) error {
		cur, ok, err := claimTx(ctx, tx, ref, tickMS, what)
		if err != nil || !ok || cur != pending {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM schedule_pending WHERE `+whereSchedule+` AND tick_ms = ?`, keyArgs(ref, tickMS)...); err != nil {
			return failed(what, err)
		}
		if fired {
			var lf sql.NullString
			if err := tx.QueryRowContext(ctx, `SELECT last_fire_tick FROM schedules WHERE `+whereSchedule, keyArgs(ref)...).Scan(&lf); err != nil {
				return failed(what, err)
			}
			newest, ok := -1.0, false
			if lf.Valid {
				newest, ok = number(lf.String)
			}
			if !ok {
				newest = -1
			}
			if float64(tickMS) >= newest {
				if _, err := tx.ExecContext(ctx, `UPDATE schedules SET last_fire = ?, last_fire_tick = ? WHERE `+whereSchedule,
					append([]any{outcome, tickMS}, keyArgs(ref)...)...); err != nil {
					return failed(what, err)
				}
			}
		} else if _, err := tx.ExecContext(ctx, `UPDATE schedules SET last_skip = ? WHERE `+whereSchedule, append([]any{outcome}, keyArgs(ref)...)...); err != nil {
			return failed(what, err)
		}
		done = true
		return setDueTx(ctx, tx, ref, grace)
	})
	return done, err
}

// TakeOver moves the claim to by once it is older than the grace by the database's clock.
func (s *Schedules) TakeOver(ctx context.Context, ref store.ScheduleRef, tickMS int64, pending, by string, grace time.Duration) (store.Takeover, string, error) {
	what := "take over claim of schedule " + ref.ID
	result, stored := store.TakeoverGone, ""
	err := s.db.write(ctx, what, func(tx *sql.Tx) error {
		cur, ok, err := claimTx(ctx, tx, ref, tickMS, what)
		if err != nil || !ok || cur != pending {
			return err
		}
		v, ok := decodeClaim(cur)
		p, isObject := v.(map[string]any)
		claimed, hasClaimed := number(p["claimed_ms"])
		if !ok || !isObject || !hasClaimed {
			result = store.TakeoverUnreadable
			return nil
		}
		now := s.db.now().UnixMilli()
		if float64(now) < claimed+float64(grace.Milliseconds()) {
			result = store.TakeoverYoung
			return nil
		}
		p["claimed_ms"], p["by"] = now, by
		if _, ok := number(p["first_claimed_ms"]); !ok {
			p["first_claimed_ms"] = now
		}
		var enc bytes.Buffer
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false)
		if err := e.Encode(p); err != nil {
			return invalid("%s: %v", what, err)
		}
		claim := strings.TrimSuffix(enc.String(), "\n")
		if _, err := tx.ExecContext(ctx, `UPDATE schedule_pending SET claim = ? WHERE `+whereSchedule+` AND tick_ms = ?`,
			append([]any{claim}, keyArgs(ref, tickMS)...)...); err != nil {
			return failed(what, err)
		}
		result, stored = store.TakeoverTaken, claim
		return setDueTx(ctx, tx, ref, grace)
	})
	if err != nil {
		return store.TakeoverGone, "", err
	}
	return result, stored, nil
}

// Reschedule sets the next tick if rev is still the stored one.
func (s *Schedules) Reschedule(ctx context.Context, ref store.ScheduleRef, rev int64, next time.Time, grace time.Duration) (bool, error) {
	what := "reschedule " + ref.ID
	done := false
	err := s.db.write(ctx, what, func(tx *sql.Tx) error {
		cur, ok, err := revTx(ctx, tx, ref, what)
		if err != nil || !ok || cur != strconv.FormatInt(rev, 10) {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE schedules SET next_ms = ? WHERE `+whereSchedule, append([]any{nullMS(next)}, keyArgs(ref)...)...); err != nil {
			return failed(what, err)
		}
		done = true
		return setDueTx(ctx, tx, ref, grace)
	})
	return done, err
}

// Forget has nothing to do: a due time is a column of its record and goes with it.
func (s *Schedules) Forget(context.Context, store.ScheduleRef) error { return nil }

// Park sets the record's due time to none.
func (s *Schedules) Park(ctx context.Context, ref store.ScheduleRef) error {
	what := "park schedule " + ref.ID
	return s.db.write(ctx, what, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE schedules SET due_at = NULL WHERE `+whereSchedule, keyArgs(ref)...); err != nil {
			return failed(what, err)
		}
		return nil
	})
}

// Streams are the database's embedded task streams.
func (s *Schedules) Streams() queue.Driver { return s.db.Broker() }
