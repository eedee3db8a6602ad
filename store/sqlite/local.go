package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"plaita/engine/state"
	"plaita/store"
)

// Reads the console's local mode needs beside Executions' storage contract: the suspended
// executions (the local runner arms their timers, delivers events to their waits, lists their
// approvals) and the published flows (flow_versions is where local mode keeps them).

// SuspendedQuery pages suspended local executions by execution id.
type SuspendedQuery struct {
	Tenant     string // "" the default tenant
	AllTenants bool   // every tenant's (the runner's start-up pass)
	After      string // the last execution id of the page before ("" from the first)
	Limit      int    // 0: DefaultLimit; at most MaxLimit
	Unreadable *int   // counts the rows whose state does not decode (skipped); nil: not counted
}

// Suspended is one page of suspended executions, decoded; next is the After of the next page
// ("" when this one is the last). A row whose state no longer decodes is skipped (and counted
// in q.Unreadable): it is shown by the execution's own read, never hidden by a failed listing.
func (x *Executions) Suspended(ctx context.Context, q SuspendedQuery) ([]*state.Execution, string, error) {
	limit, err := pageLimit(q.Limit, DefaultLimit, MaxLimit)
	if err != nil {
		return nil, "", err
	}
	query, args := "SELECT execution_id, state FROM local_executions WHERE status = ? AND execution_id > ?", []any{string(state.Suspended), q.After}
	if !q.AllTenants {
		tenant, err := NormalizeTenant(q.Tenant)
		if err != nil {
			return nil, "", err
		}
		query, args = query+" AND tenant = ?", append(args, tenant)
	}
	type row struct{ id, raw string }
	rows, err := queryAll(ctx, x.db.r, "list suspended executions", query+" ORDER BY execution_id LIMIT ?", append(args, limit+1),
		func(s scanner) (row, error) {
			var r row
			err := s.Scan(&r.id, &r.raw)
			return r, err
		})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(rows) > limit {
		rows, next = rows[:limit], rows[limit-1].id
	}
	out := make([]*state.Execution, 0, len(rows))
	for _, r := range rows {
		st, err := store.Decode([]byte(r.raw))
		if err != nil {
			if q.Unreadable != nil {
				*q.Unreadable++
			}
			continue
		}
		out = append(out, st)
	}
	return out, next, nil
}

// PublishedFlow is one flow of a tenant with its latest version.
type PublishedFlow struct {
	FlowID   string      `json:"flow_id"`
	Versions int64       `json:"versions"`
	Latest   FlowVersion `json:"latest"`
}

// PublishedFlows lists a tenant's published flows, the most recently published first, each
// with its latest version (without its definition); at most limit (1 to MaxLimit).
func (db *DB) PublishedFlows(ctx context.Context, tenant string, limit int) ([]PublishedFlow, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxLimit {
		return nil, invalid("limit %d: use 1 to %d", limit, MaxLimit)
	}
	return queryAll(ctx, db.r, "list flows",
		"SELECT v.tenant, v.flow_id, v.version, v.seq, '', v.hash, v.hash_algo, v.published_by, v.published_at, n.versions "+
			"FROM flow_versions v JOIN (SELECT flow_id, MAX(seq) AS seq, COUNT(*) AS versions FROM flow_versions WHERE tenant = ? GROUP BY flow_id) n "+
			"ON v.flow_id = n.flow_id AND v.seq = n.seq WHERE v.tenant = ? ORDER BY v.published_at DESC, v.flow_id LIMIT ?",
		[]any{tenant, tenant, limit},
		func(s scanner) (PublishedFlow, error) {
			var f PublishedFlow
			var def string
			var at int64
			if err := s.Scan(&f.Latest.Tenant, &f.Latest.FlowID, &f.Latest.Version, &f.Latest.Seq, &def, &f.Latest.Hash, &f.Latest.HashAlgo,
				&f.Latest.PublishedBy, &at, &f.Versions); err != nil {
				return PublishedFlow{}, err
			}
			f.FlowID, f.Latest.PublishedAt = f.Latest.FlowID, fromMS(at)
			return f, nil
		})
}

// LatestVersion reads a flow's most recently published version, with its definition;
// ErrVersionNotFound when the flow has none.
func (db *DB) LatestVersion(ctx context.Context, tenant, flowID string) (FlowVersion, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return FlowVersion{}, err
	}
	v, err := scanVersion(db.r.QueryRowContext(ctx, "SELECT "+versionCols+" FROM flow_versions WHERE tenant = ? AND flow_id = ? ORDER BY seq DESC LIMIT 1",
		tenant, flowID))
	if errors.Is(err, sql.ErrNoRows) {
		return FlowVersion{}, fmt.Errorf("%w: no version of flow %s in tenant %s", ErrVersionNotFound, flowID, tenant)
	}
	if err != nil {
		return FlowVersion{}, failed("read the latest version of "+flowID, err)
	}
	return v, nil
}

// Tenants are the tenants that have local executions, by slug.
func (x *Executions) Tenants(ctx context.Context) ([]string, error) {
	return queryAll(ctx, x.db.r, "list the tenants of local executions", "SELECT DISTINCT tenant FROM local_executions ORDER BY tenant", nil,
		func(s scanner) (string, error) {
			var t string
			err := s.Scan(&t)
			return t, err
		})
}
