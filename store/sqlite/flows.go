package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"plaita/store/keys"
)

// Flow drafts (what the console's editor saves, valid or not) and flow versions (the console's
// own record of every version it published to Redis, byte for byte: what the engine sync
// writes back when Redis lost it). A definition is stored exactly as given.

// MaxDefinitionBytes bounds a definition: engine.MaxFlowBytes, the bound of every reader of
// flows.
const MaxDefinitionBytes = 4 << 20

// Draft is a tenant's working copy of a flow.
type Draft struct {
	Tenant string `json:"tenant"`
	FlowID string `json:"flow_id"`
	// Definition is nil in ListDrafts pages.
	Definition json.RawMessage `json:"definition,omitempty"`
	// Revision counts the draft's saves (1 at creation): SaveDraft's IfRevision.
	Revision  int64     `json:"revision"`
	UpdatedBy string    `json:"updated_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// DraftSave is what SaveDraft takes.
type DraftSave struct {
	Tenant     string
	FlowID     string          // a store/keys name (it becomes a key when published)
	Definition json.RawMessage // JSON, at most MaxDefinitionBytes (it need not be a valid flow)
	By         string          // who saves it
	// IfRevision, when above 0, is the revision the editor started from: the save is refused
	// with ErrDraftChanged when the draft is at another one (someone saved in between) or does
	// not exist. 0 saves whatever is there.
	IfRevision int64
	// Create makes a new draft only: ErrDraftExists when the flow has one already.
	Create bool
}

// checkDefinition refuses a definition that is empty, too large or not JSON.
func checkDefinition(def json.RawMessage) error {
	if len(def) > MaxDefinitionBytes {
		return invalid("the definition is %d bytes, above the %d-byte bound", len(def), MaxDefinitionBytes)
	}
	if len(bytes.TrimSpace(def)) == 0 || !json.Valid(def) {
		return invalid("the definition is not JSON")
	}
	return nil
}

func checkFlowID(id string) error {
	if err := keys.ValidName("flow id", id); err != nil {
		return invalid("%v", err)
	}
	return nil
}

const draftCols = "tenant, flow_id, definition, revision, updated_by, created_at, updated_at"

func scanDraft(s scanner) (Draft, error) {
	var d Draft
	var def string
	var created, updated int64
	if err := s.Scan(&d.Tenant, &d.FlowID, &def, &d.Revision, &d.UpdatedBy, &created, &updated); err != nil {
		return Draft{}, err
	}
	if def != "" {
		d.Definition = json.RawMessage(def)
	}
	d.CreatedAt, d.UpdatedAt = fromMS(created), fromMS(updated)
	return d, nil
}

// SaveDraft creates or replaces a draft and moves its revision on. An unknown tenant is
// ErrTenantNotFound.
func (db *DB) SaveDraft(ctx context.Context, s DraftSave) (Draft, error) {
	tenant, err := NormalizeTenant(s.Tenant)
	if err != nil {
		return Draft{}, err
	}
	if err := checkFlowID(s.FlowID); err != nil {
		return Draft{}, err
	}
	if err := checkDefinition(s.Definition); err != nil {
		return Draft{}, err
	}
	if s.IfRevision < 0 {
		return Draft{}, invalid("if-revision %d is negative", s.IfRevision)
	}
	var d Draft
	err = db.write(ctx, "save draft "+s.FlowID, func(tx *sql.Tx) error {
		if err := exists(ctx, tx, "tenants", "slug", tenant, ErrTenantNotFound); err != nil {
			return err
		}
		var rev int64
		err := tx.QueryRowContext(ctx, "SELECT revision FROM flows WHERE tenant = ? AND flow_id = ?", tenant, s.FlowID).Scan(&rev)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return failed("read draft "+s.FlowID, err)
		}
		if s.Create && err == nil {
			return fmt.Errorf("%w: %s is at revision %d", ErrDraftExists, s.FlowID, rev)
		}
		if s.IfRevision > 0 && rev != s.IfRevision {
			return fmt.Errorf("%w: %s is at revision %d, not %d", ErrDraftChanged, s.FlowID, rev, s.IfRevision)
		}
		now := ms(db.now())
		d, err = scanDraft(tx.QueryRowContext(ctx,
			"INSERT INTO flows ("+draftCols+") VALUES (?, ?, ?, 1, ?, ?, ?) "+
				"ON CONFLICT (tenant, flow_id) DO UPDATE SET definition = excluded.definition, revision = flows.revision + 1, "+
				"updated_by = excluded.updated_by, updated_at = excluded.updated_at RETURNING "+draftCols,
			tenant, s.FlowID, string(s.Definition), cut(s.By, 254), now, now))
		if err != nil {
			return failed("save draft "+s.FlowID, err)
		}
		return nil
	})
	return d, err
}

// Draft reads a draft; ErrDraftNotFound when there is none.
func (db *DB) Draft(ctx context.Context, tenant, flowID string) (Draft, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Draft{}, err
	}
	d, err := scanDraft(db.r.QueryRowContext(ctx, "SELECT "+draftCols+" FROM flows WHERE tenant = ? AND flow_id = ?", tenant, flowID))
	if errors.Is(err, sql.ErrNoRows) {
		return Draft{}, fmt.Errorf("%w: %s in tenant %s", ErrDraftNotFound, flowID, tenant)
	}
	if err != nil {
		return Draft{}, failed("read draft "+flowID, err)
	}
	return d, nil
}

// ListDrafts pages a tenant's drafts by flow id, without their definitions.
func (db *DB) ListDrafts(ctx context.Context, tenant string, o ListOptions) (Page[Draft], error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Page[Draft]{}, err
	}
	limit, err := pageLimit(o.Limit, DefaultLimit, MaxLimit)
	if err != nil {
		return Page[Draft]{}, err
	}
	after, err := decodeCursor("drafts", o.Cursor, 1)
	if err != nil {
		return Page[Draft]{}, err
	}
	q, args := "SELECT tenant, flow_id, '', revision, updated_by, created_at, updated_at FROM flows WHERE tenant = ?", []any{tenant}
	if after != nil {
		q, args = q+" AND flow_id > ?", append(args, after[0])
	}
	rows, err := queryAll(ctx, db.r, "list drafts", q+" ORDER BY flow_id LIMIT ?", append(args, limit+1), scanDraft)
	if err != nil {
		return Page[Draft]{}, err
	}
	return page(rows, limit, "drafts", func(d Draft) []string { return []string{d.FlowID} }), nil
}

// DeleteDraft deletes a draft (its published versions stay); ErrDraftNotFound when there is
// none.
func (db *DB) DeleteDraft(ctx context.Context, tenant, flowID string) error {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return err
	}
	res, err := db.w.ExecContext(ctx, "DELETE FROM flows WHERE tenant = ? AND flow_id = ?", tenant, flowID)
	if err != nil {
		return failed("delete draft "+flowID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: %s in tenant %s", ErrDraftNotFound, flowID, tenant)
	}
	return nil
}

// FlowVersion is one published version of a flow.
type FlowVersion struct {
	Tenant  string `json:"tenant"`
	FlowID  string `json:"flow_id"`
	Version string `json:"version"`
	// Seq orders a flow's versions by publication (1 for the first).
	Seq int64 `json:"seq"`
	// Definition is nil in ListVersions pages.
	Definition  json.RawMessage `json:"definition,omitempty"`
	Hash        string          `json:"hash"`
	HashAlgo    string          `json:"hash_algo"`
	PublishedBy string          `json:"published_by"`
	PublishedAt time.Time       `json:"published_at"`
}

const versionCols = "tenant, flow_id, version, seq, definition, hash, hash_algo, published_by, published_at"

func scanVersion(s scanner) (FlowVersion, error) {
	var v FlowVersion
	var def string
	var at int64
	if err := s.Scan(&v.Tenant, &v.FlowID, &v.Version, &v.Seq, &def, &v.Hash, &v.HashAlgo, &v.PublishedBy, &at); err != nil {
		return FlowVersion{}, err
	}
	if def != "" {
		v.Definition = json.RawMessage(def)
	}
	v.PublishedAt = fromMS(at)
	return v, nil
}

// RecordVersion records a version the console published (Seq and PublishedAt are the
// store's; a zero PublishedAt is the clock's now). Versions are immutable: recording a version
// again with the same hash and definition changes nothing (duplicate true, the stored record
// returned); with another one it is ErrVersionExists.
func (db *DB) RecordVersion(ctx context.Context, v FlowVersion) (FlowVersion, bool, error) {
	tenant, err := NormalizeTenant(v.Tenant)
	if err != nil {
		return FlowVersion{}, false, err
	}
	if err := checkFlowID(v.FlowID); err != nil {
		return FlowVersion{}, false, err
	}
	if err := keys.ValidName("flow version", v.Version); err != nil {
		return FlowVersion{}, false, invalid("%v", err)
	}
	if err := checkDefinition(v.Definition); err != nil {
		return FlowVersion{}, false, err
	}
	if v.Hash == "" || len(v.Hash) > 256 || strings.TrimSpace(v.HashAlgo) == "" || len(v.HashAlgo) > 64 {
		return FlowVersion{}, false, invalid("a version needs its flow hash and hash algorithm")
	}
	at := v.PublishedAt
	if at.IsZero() {
		at = db.now()
	}
	var out FlowVersion
	var duplicate bool
	err = db.write(ctx, "record version "+v.FlowID+" "+v.Version, func(tx *sql.Tx) error {
		if err := exists(ctx, tx, "tenants", "slug", tenant, ErrTenantNotFound); err != nil {
			return err
		}
		prev, err := scanVersion(tx.QueryRowContext(ctx, "SELECT "+versionCols+" FROM flow_versions WHERE tenant = ? AND flow_id = ? AND version = ?",
			tenant, v.FlowID, v.Version))
		switch {
		case err == nil:
			if prev.Hash != v.Hash || prev.HashAlgo != v.HashAlgo || !bytes.Equal(prev.Definition, v.Definition) {
				return fmt.Errorf("%w: %s version %s (hash %s)", ErrVersionExists, v.FlowID, v.Version, prev.Hash)
			}
			out, duplicate = prev, true
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return failed("read version "+v.Version, err)
		}
		out, err = scanVersion(tx.QueryRowContext(ctx,
			"INSERT INTO flow_versions ("+versionCols+") "+
				"SELECT ?, ?, ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ? FROM flow_versions WHERE tenant = ? AND flow_id = ? RETURNING "+versionCols,
			tenant, v.FlowID, v.Version, string(v.Definition), v.Hash, v.HashAlgo, cut(v.PublishedBy, 254), ms(at.UTC()), tenant, v.FlowID))
		if err != nil {
			return failed("record version "+v.Version, err)
		}
		return nil
	})
	return out, duplicate, err
}

// FlowVersion reads one recorded version; ErrVersionNotFound when there is none.
func (db *DB) FlowVersion(ctx context.Context, tenant, flowID, version string) (FlowVersion, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return FlowVersion{}, err
	}
	v, err := scanVersion(db.r.QueryRowContext(ctx, "SELECT "+versionCols+" FROM flow_versions WHERE tenant = ? AND flow_id = ? AND version = ?",
		tenant, flowID, version))
	if errors.Is(err, sql.ErrNoRows) {
		return FlowVersion{}, fmt.Errorf("%w: %s version %s in tenant %s", ErrVersionNotFound, flowID, version, tenant)
	}
	if err != nil {
		return FlowVersion{}, failed("read version "+version, err)
	}
	return v, nil
}

// ListVersions pages a flow's recorded versions, newest first, without their definitions.
func (db *DB) ListVersions(ctx context.Context, tenant, flowID string, o ListOptions) (Page[FlowVersion], error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Page[FlowVersion]{}, err
	}
	limit, err := pageLimit(o.Limit, DefaultLimit, MaxLimit)
	if err != nil {
		return Page[FlowVersion]{}, err
	}
	after, err := decodeCursor("versions", o.Cursor, 1)
	if err != nil {
		return Page[FlowVersion]{}, err
	}
	q := "SELECT tenant, flow_id, version, seq, '', hash, hash_algo, published_by, published_at FROM flow_versions WHERE tenant = ? AND flow_id = ?"
	args := []any{tenant, flowID}
	if after != nil {
		seq, err := strconv.ParseInt(after[0], 10, 64)
		if err != nil {
			return Page[FlowVersion]{}, fmt.Errorf("%w: bad sequence", ErrBadCursor)
		}
		q, args = q+" AND seq < ?", append(args, seq)
	}
	rows, err := queryAll(ctx, db.r, "list versions", q+" ORDER BY seq DESC LIMIT ?", append(args, limit+1), scanVersion)
	if err != nil {
		return Page[FlowVersion]{}, err
	}
	return page(rows, limit, "versions", func(v FlowVersion) []string { return []string{strconv.FormatInt(v.Seq, 10)} }), nil
}

// AllVersions pages every recorded version of every tenant, with definitions, by (tenant, flow
// id, seq): the console's engine sync writes them back to Redis at start, a page per pipeline.
func (db *DB) AllVersions(ctx context.Context, o ListOptions) (Page[FlowVersion], error) {
	limit, err := pageLimit(o.Limit, DefaultLimit, MaxLimit)
	if err != nil {
		return Page[FlowVersion]{}, err
	}
	after, err := decodeCursor("all_versions", o.Cursor, 3)
	if err != nil {
		return Page[FlowVersion]{}, err
	}
	q, args := "SELECT "+versionCols+" FROM flow_versions", []any{}
	if after != nil {
		seq, err := strconv.ParseInt(after[2], 10, 64)
		if err != nil {
			return Page[FlowVersion]{}, fmt.Errorf("%w: bad sequence", ErrBadCursor)
		}
		q, args = q+" WHERE (tenant, flow_id, seq) > (?, ?, ?)", append(args, after[0], after[1], seq)
	}
	rows, err := queryAll(ctx, db.r, "list versions", q+" ORDER BY tenant, flow_id, seq LIMIT ?", append(args, limit+1), scanVersion)
	if err != nil {
		return Page[FlowVersion]{}, err
	}
	return page(rows, limit, "all_versions", func(v FlowVersion) []string {
		return []string{v.Tenant, v.FlowID, strconv.FormatInt(v.Seq, 10)}
	}), nil
}
