package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"plaita/store"
	"plaita/store/keys"
)

// FlowStore is store.FlowsDriver on the console's database (migration 0008): the published
// flows of local mode, in published_flow_versions (a version's definition and publication
// time: Redis's flow:<id>:<version> and flow_versions:<id>) and published_flows (a tenant's
// flows by their last publication: flow_list). store.Flows keeps every rule; each write here
// is the one transaction twin of one Redis command or pipeline, and reads order as a Redis
// ZSET read in reverse: newest first, ties by the greater name in byte order (SQLite's BINARY
// collation). These rows are the runtime's, not the console's record of what it published
// (flow_versions, flows.go): the migration says why. The database serves one key root: a
// space's root is not part of a row, its tenant is.
type FlowStore struct{ db *DB }

// FlowStore is the database's published flows.
func (db *DB) FlowStore() *FlowStore { return &FlowStore{db: db} }

var _ store.FlowsDriver = (*FlowStore)(nil)

// Definition reads a stored version, registered or not (as GET reads the key).
func (s *FlowStore) Definition(ctx context.Context, sp keys.Space, flowID, version string) ([]byte, bool, error) {
	var def []byte
	err := s.db.r.QueryRowContext(ctx, `SELECT definition FROM published_flow_versions WHERE tenant = ? AND flow_id = ? AND version = ?`,
		sp.Tenant(), flowID, version).Scan(&def)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, failed("read flow "+flowID, err)
	}
	return def, true, nil
}

// Put inserts the version unregistered (published_at NULL) unless it is stored.
func (s *FlowStore) Put(ctx context.Context, sp keys.Space, flowID, version string, def []byte) (bool, error) {
	var created bool
	err := s.db.write(ctx, "publish flow "+flowID, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO published_flow_versions (tenant, flow_id, version, definition, published_at)
			VALUES (?, ?, ?, ?, NULL) ON CONFLICT (tenant, flow_id, version) DO NOTHING`, sp.Tenant(), flowID, version, string(def))
		if err != nil {
			return failed("publish flow "+flowID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return failed("publish flow "+flowID, err)
		}
		created = n == 1
		return nil
	})
	return created, err
}

// Register sets the version's time (onlyMissing: only when it has none) and upserts the flow
// in the list (onlyMissing: only when it is absent), in one transaction. A version that is not
// stored cannot be registered here (Redis's ZSET would take it): store.Flows registers only
// what it stored or read, and nothing deletes a version, so that is store.ErrFlowNotFound.
func (s *FlowStore) Register(ctx context.Context, sp keys.Space, flowID, version string, at time.Time, onlyMissing bool) error {
	what := fmt.Sprintf("record flow %s version %s", flowID, version)
	setTime, upsert := "?", "DO UPDATE SET published_at = excluded.published_at"
	if onlyMissing {
		setTime, upsert = "CASE WHEN published_at IS NULL THEN ? ELSE published_at END", "DO NOTHING"
	}
	return s.db.write(ctx, what, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE published_flow_versions SET published_at = `+setTime+`
			WHERE tenant = ? AND flow_id = ? AND version = ?`, at.UnixMilli(), sp.Tenant(), flowID, version)
		if err != nil {
			return failed(what, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return failed(what, err)
		} else if n == 0 {
			return fmt.Errorf("%w: flow %s version %q in tenant %s is not stored: nothing to register", store.ErrFlowNotFound, flowID, version, sp.Tenant())
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO published_flows (tenant, flow_id, published_at) VALUES (?, ?, ?)
			ON CONFLICT (tenant, flow_id) `+upsert, sp.Tenant(), flowID, at.UnixMilli()); err != nil {
			return failed(what, err)
		}
		return nil
	})
}

// newestFirst orders a flow's registered versions as ZREVRANGE does.
const newestFirst = ` ORDER BY published_at DESC, version DESC`

// Latest reads the newest registered version.
func (s *FlowStore) Latest(ctx context.Context, sp keys.Space, flowID string) (string, bool, error) {
	var v string
	err := s.db.r.QueryRowContext(ctx, `SELECT version FROM published_flow_versions
		WHERE tenant = ? AND flow_id = ? AND published_at IS NOT NULL`+newestFirst+` LIMIT 1`, sp.Tenant(), flowID).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, failed("read versions of flow "+flowID, err)
	}
	return v, true, nil
}

// Versions reads up to n registered versions, newest first.
func (s *FlowStore) Versions(ctx context.Context, sp keys.Space, flowID string, n int) ([]store.FlowEntry, error) {
	return s.entries(ctx, "read versions of flow "+flowID, `SELECT version, published_at FROM published_flow_versions
		WHERE tenant = ? AND flow_id = ? AND published_at IS NOT NULL`+newestFirst+` LIMIT ?`, sp.Tenant(), flowID, max(n, 0))
}

// FlowList reads up to n of the tenant's flows, most recently published first.
func (s *FlowStore) FlowList(ctx context.Context, sp keys.Space, atMost *float64, n int) ([]store.FlowEntry, error) {
	q, args := `SELECT flow_id, published_at FROM published_flows WHERE tenant = ?`, []any{sp.Tenant()}
	if atMost != nil {
		q, args = q+` AND published_at <= ?`, append(args, *atMost)
	}
	return s.entries(ctx, "list flows", q+` ORDER BY published_at DESC, flow_id DESC LIMIT ?`, append(args, max(n, 0))...)
}

func (s *FlowStore) entries(ctx context.Context, what, q string, args ...any) ([]store.FlowEntry, error) {
	return queryAll(ctx, s.db.r, what, q, args, func(sc scanner) (store.FlowEntry, error) {
		var e store.FlowEntry
		var at int64
		err := sc.Scan(&e.Name, &at)
		e.Score = float64(at)
		return e, err
	})
}

// Heads reads every flow's newest registered version and count in one query.
func (s *FlowStore) Heads(ctx context.Context, sp keys.Space, flowIDs []string) ([]store.FlowHead, error) {
	out := make([]store.FlowHead, len(flowIDs))
	if len(flowIDs) == 0 {
		return out, nil
	}
	args := make([]any, 0, 1+len(flowIDs))
	args = append(args, sp.Tenant())
	for _, id := range flowIDs {
		args = append(args, id)
	}
	type head struct {
		flowID string
		store.FlowHead
	}
	rows, err := queryAll(ctx, s.db.r, "read versions of flows", `SELECT flow_id, version, n FROM (
		SELECT flow_id, version, COUNT(*) OVER (PARTITION BY flow_id) AS n,
			ROW_NUMBER() OVER (PARTITION BY flow_id`+newestFirst+`) AS pos
		FROM published_flow_versions
		WHERE tenant = ? AND published_at IS NOT NULL AND flow_id IN (?`+strings.Repeat(", ?", len(flowIDs)-1)+`)
	) AS heads WHERE pos = 1`, args, func(sc scanner) (head, error) {
		var h head
		err := sc.Scan(&h.flowID, &h.Latest, &h.Versions)
		return h, err
	})
	if err != nil {
		return nil, err
	}
	byID := make(map[string]store.FlowHead, len(rows))
	for _, h := range rows {
		byID[h.flowID] = h.FlowHead
	}
	for i, id := range flowIDs {
		out[i] = byID[id]
	}
	return out, nil
}

// Restore writes every item in one transaction: the version unless it is stored (then only
// its missing time), and the flow in the list unless it is there with a later time. A failed
// transaction fails every item (ErrDB, transient): nothing of it was written.
func (s *FlowStore) Restore(ctx context.Context, items []store.FlowWrite) []store.RestoreOutcome {
	out := make([]store.RestoreOutcome, len(items))
	if len(items) == 0 {
		return out
	}
	err := s.db.write(ctx, "restore flows", func(tx *sql.Tx) error {
		for i, it := range items {
			tenant, at := it.Space.Tenant(), it.PublishedAt.UnixMilli()
			res, err := tx.ExecContext(ctx, `INSERT INTO published_flow_versions (tenant, flow_id, version, definition, published_at)
				VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, flow_id, version) DO NOTHING`, tenant, it.FlowID, it.Version, string(it.Definition), at)
			if err != nil {
				return failed("restore flow "+it.FlowID, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return failed("restore flow "+it.FlowID, err)
			}
			out[i].Written = n == 1
			if !out[i].Written {
				if _, err := tx.ExecContext(ctx, `UPDATE published_flow_versions SET published_at = ?
					WHERE tenant = ? AND flow_id = ? AND version = ? AND published_at IS NULL`, at, tenant, it.FlowID, it.Version); err != nil {
					return failed("register flow "+it.FlowID, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO published_flows (tenant, flow_id, published_at) VALUES (?, ?, ?)
				ON CONFLICT (tenant, flow_id) DO UPDATE SET published_at = excluded.published_at
				WHERE excluded.published_at > published_flows.published_at`, tenant, it.FlowID, at); err != nil {
				return failed("register flow "+it.FlowID, err)
			}
		}
		return nil
	})
	if err != nil {
		for i := range out {
			out[i] = store.RestoreOutcome{Err: err}
		}
	}
	return out
}
