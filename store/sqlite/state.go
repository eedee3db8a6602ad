package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"plaita/store"
	"plaita/store/keys"
)

// States is store.StateDriver on the console's database (migration 0008): local mode's
// execution states, leases and fence generations, flags and counters. Each method is one
// transaction on the database's one writer, so each does atomically what its Redis script
// does; the lease, the flags and the counters expire by their times as Redis keys do.
type States struct{ db *DB }

// States is the database's execution storage driver.
func (db *DB) States() *States { return &States{db: db} }

var _ store.StateDriver = (*States)(nil)

// Ping checks the database.
func (s *States) Ping(ctx context.Context) error { return s.db.Ping(ctx) }

func (s *States) now() int64 { return s.db.now().UnixMilli() }

// expiry is the expires_at of a TTL from now (0: none).
func expiry(now int64, ttl time.Duration) int64 {
	if ttl <= 0 {
		return 0
	}
	return now + ttl.Milliseconds()
}

// stateAD binds a sealed state to its row.
func stateAD(tenant, id string) string { return "exec_states\x00" + tenant + "\x00" + id }

// writeState upserts a state and its indexed values; with a field cipher the state is sealed.
func writeState(ctx context.Context, db *DB, tx *sql.Tx, tenant string, w store.StateWrite, now int64) error {
	payload := w.Payload
	if c := db.opts.fields; c != nil {
		var err error
		if payload, err = c.Seal(stateAD(tenant, w.ID), w.Payload); err != nil {
			return fmt.Errorf("seal execution %s: %w", w.ID, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO exec_states (tenant, execution_id, state, started_at, expires_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, execution_id) DO UPDATE SET state = excluded.state,
		started_at = excluded.started_at, expires_at = excluded.expires_at`,
		tenant, w.ID, payload, int64(w.Score), expiry(now, w.TTL)); err != nil {
		return failed("save execution "+w.ID, err)
	}
	return indexState(ctx, tx, tenant, w.ID, int64(w.Score), w.Index, false)
}

// indexState puts an execution under its indexed values; onlyMissing keeps what is there.
func indexState(ctx context.Context, tx *sql.Tx, tenant, id string, score int64, index map[string]string, onlyMissing bool) error {
	conflict := `DO UPDATE SET started_at = excluded.started_at`
	if onlyMissing {
		conflict = `DO NOTHING`
	}
	for _, field := range slices.Sorted(maps.Keys(index)) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO exec_index_by (tenant, field, value, execution_id, started_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, field, value, execution_id) `+conflict,
			tenant, field, index[field], id, score); err != nil {
			return failed("index execution "+id, err)
		}
	}
	return nil
}

// readState reads a live state (nil: none), opened when it is sealed.
func readState(ctx context.Context, db *DB, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, tenant, id string, now int64) ([]byte, error) {
	var b []byte
	err := q.QueryRowContext(ctx, `SELECT state FROM exec_states WHERE tenant = ? AND execution_id = ?
		AND (expires_at = 0 OR expires_at > ?)`, tenant, id, now).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, failed("load execution "+id, err)
	}
	if c := db.opts.fields; c != nil {
		if b, err = c.Open(stateAD(tenant, id), b); err != nil {
			return nil, fmt.Errorf("open execution %s: %w", id, err)
		}
	}
	return b, nil
}

// Save writes a state unfenced.
func (s *States) Save(ctx context.Context, sp keys.Space, w store.StateWrite) error {
	return s.db.write(ctx, "save execution "+w.ID, func(tx *sql.Tx) error {
		return writeState(ctx, s.db, tx, sp.Tenant(), w, s.now())
	})
}

// Load reads a state; the state's row is its place in the tenant's list, so it is indexed.
func (s *States) Load(ctx context.Context, sp keys.Space, id string) ([]byte, bool, error) {
	b, err := s.Get(ctx, sp, id)
	return b, err == nil, err
}

// Get reads a state.
func (s *States) Get(ctx context.Context, sp keys.Space, id string) ([]byte, error) {
	b, err := readState(ctx, s.db, s.db.r, sp.Tenant(), id, s.now())
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	return b, nil
}

// Reindex puts back missing indexed values.
func (s *States) Reindex(ctx context.Context, sp keys.Space, id string, score float64, index map[string]string) error {
	if len(index) == 0 {
		return nil
	}
	return s.db.write(ctx, "index execution "+id, func(tx *sql.Tx) error {
		return indexState(ctx, tx, sp.Tenant(), id, int64(score), index, true)
	})
}

// fence is an execution's exec_fences row as a step reads it, with what is live at now.
type fence struct {
	exists   bool
	gen      int64
	lease    string // "" when none is live
	cancel   bool
	tombstne bool
}

func readFence(ctx context.Context, tx *sql.Tx, tenant, id string, now int64) (fence, error) {
	var f fence
	var lease string
	var leaseExp, cancelExp, tombExp int64
	err := tx.QueryRowContext(ctx, `SELECT fencegen, lease, lease_expires_at, cancel_expires_at, tomb_expires_at
		FROM exec_fences WHERE tenant = ? AND execution_id = ?`, tenant, id).Scan(&f.gen, &lease, &leaseExp, &cancelExp, &tombExp)
	if errors.Is(err, sql.ErrNoRows) {
		return f, nil
	}
	if err != nil {
		return f, failed("read the fence of "+id, err)
	}
	f.exists = true
	if lease != "" && leaseExp > now {
		f.lease = lease
	}
	f.cancel, f.tombstne = cancelExp > now, tombExp > now
	return f, nil
}

// genString is the fence generation as a refused write reports it ("" when there is none).
func (f fence) genString() string {
	if !f.exists || f.gen == 0 {
		return ""
	}
	return strconv.FormatInt(f.gen, 10)
}

// setLease writes the lease (value "" drops it) and, when bump, moves the fence generation on;
// it returns the generation.
func setLease(ctx context.Context, tx *sql.Tx, tenant, id, value string, expires int64, bump bool) (int64, error) {
	inc := 0
	if bump {
		inc = 1
	}
	var gen int64
	err := tx.QueryRowContext(ctx, `INSERT INTO exec_fences (tenant, execution_id, fencegen, lease, lease_expires_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, execution_id) DO UPDATE SET fencegen = fencegen + ?,
		lease = excluded.lease, lease_expires_at = excluded.lease_expires_at RETURNING fencegen`,
		tenant, id, inc, value, expires, inc).Scan(&gen)
	if err != nil {
		return 0, failed("take the lease of "+id, err)
	}
	return gen, nil
}

// takeLease is takeLeaseLua: the lease for value unless a live lease is another's; a live
// lease of takeover (its holder) is taken over.
func takeLease(f fence, takeover string) (ok, took bool) {
	if f.lease == "" {
		return true, false
	}
	if takeover != "" && strings.HasPrefix(f.lease, takeover+"|") {
		return true, true
	}
	return false, false
}

func counterValue(ctx context.Context, tx *sql.Tx, tenant, id, family, node string, now int64) (int64, error) {
	var n int64
	err := tx.QueryRowContext(ctx, `SELECT value FROM exec_counters WHERE tenant = ? AND execution_id = ? AND family = ?
		AND node = ? AND expires_at > ?`, tenant, id, family, node, now).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, failed("read a counter of "+id, err)
	}
	return n, nil
}

// Begin takes the lease, moves the fence on and reads (or creates) what the run needs.
func (s *States) Begin(ctx context.Context, sp keys.Space, c store.BeginCall) (store.BeginReply, error) {
	var rep store.BeginReply
	tenant := sp.Tenant()
	err := s.db.write(ctx, "begin a run of "+c.ID, func(tx *sql.Tx) error {
		now := s.now()
		f, err := readFence(ctx, tx, tenant, c.ID, now)
		if err != nil {
			return err
		}
		ok, took := takeLease(f, c.Takeover)
		if !ok {
			rep.Held = f.lease
			return nil
		}
		if rep.Generation, err = setLease(ctx, tx, tenant, c.ID, c.Lease.Value, now+c.Lease.TTL.Milliseconds(), true); err != nil {
			return err
		}
		rep.Taken, rep.TookOver, rep.Tombstoned, rep.Cancelled = true, took, f.tombstne, f.cancel
		if rep.State, err = readState(ctx, s.db, tx, tenant, c.ID, now); err != nil {
			return err
		}
		if rep.NoFail, err = counterValue(ctx, tx, tenant, c.ID, keys.FamNoFail, "", now); err != nil {
			return err
		}
		if rep.State == nil && !rep.Tombstoned && c.Fresh != nil {
			if err := writeState(ctx, s.db, tx, tenant, *c.Fresh, now); err != nil {
				return err
			}
			rep.Created, rep.Indexed = true, true
		}
		return nil
	})
	if err != nil {
		return store.BeginReply{}, err
	}
	return rep, nil
}

// FencedSave writes the state while the fence generation is ours.
func (s *States) FencedSave(ctx context.Context, sp keys.Space, c store.FencedSave) (store.FencedReply, error) {
	var rep store.FencedReply
	tenant := sp.Tenant()
	err := s.db.write(ctx, "save execution "+c.W.ID, func(tx *sql.Tx) error {
		now := s.now()
		f, err := readFence(ctx, tx, tenant, c.W.ID, now)
		if err != nil {
			return err
		}
		if !f.exists || f.gen != c.Gen {
			rep = store.FencedReply{Lost: true, FenceGen: f.genString()}
			return nil
		}
		w := c.W
		if !c.Index {
			w.Index = nil
		}
		if err := writeState(ctx, s.db, tx, tenant, w, now); err != nil {
			return err
		}
		if c.Release {
			if _, err := setLease(ctx, tx, tenant, c.W.ID, "", 0, false); err != nil {
				return err
			}
		}
		rep.Cancelled, rep.Indexed = f.cancel, c.Index
		return nil
	})
	if err != nil {
		return store.FencedReply{}, err
	}
	return rep, nil
}

// BeginSave takes the lease and writes a state that must not exist.
func (s *States) BeginSave(ctx context.Context, sp keys.Space, c store.BeginSaveCall) (store.BeginReply, error) {
	var rep store.BeginReply
	tenant := sp.Tenant()
	err := s.db.write(ctx, "first save of "+c.W.ID, func(tx *sql.Tx) error {
		now := s.now()
		f, err := readFence(ctx, tx, tenant, c.W.ID, now)
		if err != nil {
			return err
		}
		ok, took := takeLease(f, c.Holder)
		if !ok {
			rep.Held = f.lease
			return nil
		}
		st, err := readState(ctx, s.db, tx, tenant, c.W.ID, now)
		if err != nil {
			return err
		}
		nofail, err := counterValue(ctx, tx, tenant, c.W.ID, keys.FamNoFail, "", now)
		if err != nil {
			return err
		}
		if st != nil || f.tombstne || f.cancel || nofail > 0 {
			if f.exists && f.lease != "" { // the leftover it would have taken over goes, as the script's DEL
				if _, err := setLease(ctx, tx, tenant, c.W.ID, "", 0, false); err != nil {
					return err
				}
			}
			rep.NotFresh = true
			return nil
		}
		lease, expires := c.Lease.Value, now+c.Lease.TTL.Milliseconds()
		if c.Release {
			lease, expires = "", 0
		}
		if rep.Generation, err = setLease(ctx, tx, tenant, c.W.ID, lease, expires, true); err != nil {
			return err
		}
		if err := writeState(ctx, s.db, tx, tenant, c.W, now); err != nil {
			return err
		}
		rep.Taken, rep.TookOver, rep.Created, rep.Indexed = true, took, true, true
		return nil
	})
	if err != nil {
		return store.BeginReply{}, err
	}
	return rep, nil
}

// Renew extends the lease while it is value's.
func (s *States) Renew(ctx context.Context, sp keys.Space, id, value string, ttl time.Duration) (bool, error) {
	return s.leaseUpdate(ctx, sp, id, value, "renew the lease of "+id, func(now int64) (string, []any) {
		return `lease_expires_at = ?`, []any{now + ttl.Milliseconds()}
	})
}

// Release drops the lease while it is value's.
func (s *States) Release(ctx context.Context, sp keys.Space, id, value string) (bool, error) {
	return s.leaseUpdate(ctx, sp, id, value, "release the lease of "+id, func(int64) (string, []any) {
		return `lease = '', lease_expires_at = 0`, nil
	})
}

// leaseUpdate sets what set says on id's fence row while its live lease is value.
func (s *States) leaseUpdate(ctx context.Context, sp keys.Space, id, value, what string, set func(now int64) (string, []any)) (bool, error) {
	ours := false
	err := s.db.write(ctx, what, func(tx *sql.Tx) error {
		now := s.now()
		clause, args := set(now)
		res, err := tx.ExecContext(ctx, `UPDATE exec_fences SET `+clause+` WHERE tenant = ? AND execution_id = ?
			AND lease = ? AND lease_expires_at > ?`, append(args, sp.Tenant(), id, value, now)...)
		if err != nil {
			return failed(what, err)
		}
		n, _ := res.RowsAffected()
		ours = n == 1
		return nil
	})
	return ours, err
}

// Delete removes the execution and writes its tombstone, fenced when asked.
func (s *States) Delete(ctx context.Context, sp keys.Space, id string, fenced bool, gen int64, tomb []byte, tombTTL time.Duration) (store.FencedReply, error) {
	var rep store.FencedReply
	tenant := sp.Tenant()
	err := s.db.write(ctx, "delete execution "+id, func(tx *sql.Tx) error {
		now := s.now()
		f, err := readFence(ctx, tx, tenant, id, now)
		if err != nil {
			return err
		}
		if fenced && (!f.exists || f.gen != gen) {
			rep = store.FencedReply{Lost: true, FenceGen: f.genString()}
			return nil
		}
		for _, q := range []string{
			`DELETE FROM exec_states WHERE tenant = ? AND execution_id = ?`,
			`DELETE FROM exec_index_by WHERE tenant = ? AND execution_id = ?`,
			`DELETE FROM exec_counters WHERE tenant = ? AND execution_id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, tenant, id); err != nil {
				return failed("delete execution "+id, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO exec_fences (tenant, execution_id, fencegen, tombstone, tomb_expires_at)
			VALUES (?, ?, 1, ?, ?) ON CONFLICT (tenant, execution_id) DO UPDATE SET fencegen = fencegen + 1, lease = '',
			lease_expires_at = 0, cancel_expires_at = 0, tombstone = excluded.tombstone, tomb_expires_at = excluded.tomb_expires_at`,
			tenant, id, string(tomb), expiry(now, tombTTL)); err != nil {
			return failed("delete execution "+id, err)
		}
		return nil
	})
	if err != nil {
		return store.FencedReply{}, err
	}
	return rep, nil
}

// SetCancel raises or lowers the cancel flag.
func (s *States) SetCancel(ctx context.Context, sp keys.Space, id string, on bool) error {
	return s.db.write(ctx, "cancel flag of "+id, func(tx *sql.Tx) error {
		exp := int64(0)
		if on {
			exp = expiry(s.now(), store.MechanismTTL)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO exec_fences (tenant, execution_id, cancel_expires_at) VALUES (?, ?, ?)
			ON CONFLICT (tenant, execution_id) DO UPDATE SET cancel_expires_at = excluded.cancel_expires_at`, sp.Tenant(), id, exp); err != nil {
			return failed("cancel flag of "+id, err)
		}
		return nil
	})
}

// Has reads the cancel flag or the tombstone.
func (s *States) Has(ctx context.Context, sp keys.Space, id string, f store.Flag) (bool, error) {
	col := "cancel_expires_at"
	if f == store.FlagTombstone {
		col = "tomb_expires_at"
	}
	var n int
	err := s.db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM exec_fences WHERE tenant = ? AND execution_id = ? AND `+col+` > ?`,
		sp.Tenant(), id, s.now()).Scan(&n)
	if err != nil {
		return false, failed("flags of "+id, err)
	}
	return n > 0, nil
}

// Incr increments a counter; an expired one starts again from 0.
func (s *States) Incr(ctx context.Context, sp keys.Space, family, id, node string) (int64, error) {
	var n int64
	err := s.db.write(ctx, "increment a counter of "+id, func(tx *sql.Tx) error {
		now := s.now()
		err := tx.QueryRowContext(ctx, `INSERT INTO exec_counters
			(tenant, execution_id, family, node, value, expires_at) VALUES (?, ?, ?, ?, 1, ?)
			ON CONFLICT (tenant, execution_id, family, node) DO UPDATE SET
			value = CASE WHEN expires_at > ? THEN value + 1 ELSE 1 END, expires_at = excluded.expires_at RETURNING value`,
			sp.Tenant(), id, family, node, expiry(now, store.MechanismTTL), now).Scan(&n)
		if err != nil {
			return failed("increment a counter of "+id, err)
		}
		return nil
	})
	return n, err
}

// Counter reads a live counter.
func (s *States) Counter(ctx context.Context, sp keys.Space, family, id, node string) (int64, error) {
	var n int64
	err := s.db.r.QueryRowContext(ctx, `SELECT value FROM exec_counters WHERE tenant = ? AND execution_id = ? AND family = ?
		AND node = ? AND expires_at > ?`, sp.Tenant(), id, family, node, s.now()).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, failed("read a counter of "+id, err)
	}
	return n, nil
}

// NodeRetries reads the live per-node retry counters.
func (s *States) NodeRetries(ctx context.Context, sp keys.Space, id string) (map[string]int64, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT node, value FROM exec_counters WHERE tenant = ? AND execution_id = ?
		AND family = ? AND node != '' AND expires_at > ?`, sp.Tenant(), id, keys.FamNodeRetry, s.now())
	if err != nil {
		return nil, failed("read the node retry counters of "+id, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var node string
		var n int64
		if err := rows.Scan(&node, &n); err != nil {
			return nil, failed("read the node retry counters of "+id, err)
		}
		out[node] = n
	}
	if err := rows.Err(); err != nil {
		return nil, failed("read the node retry counters of "+id, err)
	}
	return out, nil
}

// ResetCounter deletes a counter.
func (s *States) ResetCounter(ctx context.Context, sp keys.Space, family, id, node string) error {
	return s.db.write(ctx, "reset a counter of "+id, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM exec_counters WHERE tenant = ? AND execution_id = ? AND family = ? AND node = ?`,
			sp.Tenant(), id, family, node); err != nil {
			return failed("reset a counter of "+id, err)
		}
		return nil
	})
}

// Snapshot reads a state and whether its lease is held.
func (s *States) Snapshot(ctx context.Context, sp keys.Space, id string) ([]byte, bool, error) {
	var b []byte
	leased := false
	err := s.db.write(ctx, "snapshot of "+id, func(tx *sql.Tx) error {
		now := s.now()
		var err error
		if b, err = readState(ctx, s.db, tx, sp.Tenant(), id, now); err != nil {
			return err
		}
		f, err := readFence(ctx, tx, sp.Tenant(), id, now)
		leased = f.lease != ""
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if b == nil {
		return nil, false, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	return b, leased, nil
}

// Replace writes w in place of the bytes read, while the state holds them.
func (s *States) Replace(ctx context.Context, sp keys.Space, read []byte, w store.StateWrite, how store.ReplaceHow) (store.Replaced, error) {
	out := store.ReplacedChanged
	tenant := sp.Tenant()
	err := s.db.write(ctx, "replace the state of "+w.ID, func(tx *sql.Tx) error {
		now := s.now()
		cur, err := readState(ctx, s.db, tx, tenant, w.ID, now)
		if err != nil || cur == nil || !bytes.Equal(cur, read) {
			return err
		}
		f, err := readFence(ctx, tx, tenant, w.ID, now)
		if err != nil {
			return err
		}
		if how == store.ReplaceUnleased && f.lease != "" {
			out = store.ReplacedLeased
			return nil
		}
		if err := writeState(ctx, s.db, tx, tenant, w, now); err != nil {
			return err
		}
		// Either way no lease is left (ReplaceUnleased found none live; ReplaceFencing drops
		// it), and the generation moves on: a lease taken before cannot write after this.
		if _, err := setLease(ctx, tx, tenant, w.ID, "", 0, true); err != nil {
			return err
		}
		out = store.ReplacedWritten
		return nil
	})
	return out, err
}
