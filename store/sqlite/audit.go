package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"plaita/store/keys"
)

// The audit trail: every write and every denial of the console (docs/console.md, "Audit").
// Denials are coalesced so that traffic nobody is allowed to send cannot grow the table by
// its request count: a denial of the same (action, actor, ip, tenant, reason) as a denial
// recorded less than the window ago (WithAuditWindow, 60 s by default) adds one to that row's
// suppressed count instead of writing a row. The window is fixed from the row's first denial:
// a steady flood writes one row per key per window. Allowed actions are never coalesced.

// Bounds of an audit row. Text fields above their bound are cut, not refused: an audit write
// must not fail on a long user agent or reason.
const (
	MaxAuditDetails = 16 << 10
	maxAuditAction  = 128
)

// AuditAppend says what AppendAudit wrote.
type AuditAppend struct {
	ID         int64 `json:"id"`         // the row written, or the one the denial was coalesced into
	Coalesced  bool  `json:"coalesced"`  // counted into an existing row
	Suppressed int   `json:"suppressed"` // that row's count now
}

// AppendAudit records one entry (ID, LastAt and Suppressed are the store's), coalescing a
// denial into the row of the same key within the window. An action that is empty or holds
// spaces, an unknown outcome or actor kind, a bad tenant slug or details that are not a JSON
// object are store.ErrInvalid: those are the caller's bugs.
func (db *DB) AppendAudit(ctx context.Context, e AuditEntry) (AuditAppend, error) {
	if e.Action == "" || len(e.Action) > maxAuditAction || strings.IndexFunc(e.Action, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return AuditAppend{}, invalid("audit action %q: use 1 to %d characters without spaces", e.Action, maxAuditAction)
	}
	if e.Outcome != OutcomeAllow && e.Outcome != OutcomeDeny {
		return AuditAppend{}, invalid("audit outcome %q: use allow or deny", e.Outcome)
	}
	switch e.ActorKind {
	case ActorUser, ActorAPIKey, ActorAdminKey, ActorSystem, ActorAnonymous:
	default:
		return AuditAppend{}, invalid("audit actor kind %q: use user, api_key, admin_key, system or anonymous", e.ActorKind)
	}
	if e.Tenant != "" {
		if err := keys.ValidTenant(e.Tenant); err != nil {
			return AuditAppend{}, invalid("audit tenant: %v", err)
		}
	}
	details, err := auditDetails(e.Details)
	if err != nil {
		return AuditAppend{}, err
	}
	at := e.At
	if at.IsZero() {
		at = db.now()
	}
	at = at.UTC().Truncate(time.Millisecond)
	actor, target, reason := cut(e.Actor, 254), cut(e.Target, 512), cut(e.Reason, 256)
	ip, reqID := cut(e.IP, 64), cut(e.RequestID, 128)
	var out AuditAppend
	err = db.write(ctx, "append an audit row", func(tx *sql.Tx) error {
		if e.Outcome == OutcomeDeny {
			var id int64
			var suppressed int
			err := tx.QueryRowContext(ctx,
				"SELECT id, suppressed FROM audit WHERE outcome = 'deny' AND action = ? AND actor = ? AND ip = ? AND tenant = ? AND reason = ? AND at > ? "+
					"ORDER BY id DESC LIMIT 1",
				e.Action, actor, ip, e.Tenant, reason, ms(at.Add(-db.opts.auditWindow))).Scan(&id, &suppressed)
			switch {
			case err == nil:
				// last_at keeps the newest denial (CASE, not max(): PostgreSQL's max is an aggregate).
				if _, err := tx.ExecContext(ctx, "UPDATE audit SET suppressed = suppressed + 1, last_at = CASE WHEN last_at < ? THEN ? ELSE last_at END WHERE id = ?",
					ms(at), ms(at), id); err != nil {
					return failed("coalesce an audit row", err)
				}
				out = AuditAppend{ID: id, Coalesced: true, Suppressed: suppressed + 1}
				return nil
			case !errors.Is(err, sql.ErrNoRows):
				return failed("read the audit", err)
			}
		}
		err := tx.QueryRowContext(ctx,
			"INSERT INTO audit (at, last_at, actor, actor_kind, tenant, action, target, outcome, reason, ip, request_id, details, suppressed) "+
				"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0) RETURNING id",
			ms(at), ms(at), actor, string(e.ActorKind), e.Tenant, e.Action, target, string(e.Outcome), reason, ip, reqID, details).Scan(&out.ID)
		if err != nil {
			return failed("append an audit row", err)
		}
		return nil
	})
	return out, err
}

// auditDetails is the stored form of an entry's details: compact JSON of an object.
func auditDetails(d json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(d)) == 0 {
		return "{}", nil
	}
	if len(d) > MaxAuditDetails {
		return fmt.Sprintf(`{"details_dropped_bytes":%d}`, len(d)), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, d); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return "", invalid("audit details are not a JSON object")
	}
	return buf.String(), nil
}

// Audit page limits: default 200, at most 1000 (docs/console.md, "Audit").
const (
	DefaultAuditLimit = 200
	MaxAuditLimit     = 1000
)

// AuditQuery selects audit rows, newest first.
type AuditQuery struct {
	// Tenant keeps the rows of one tenant ("" the platform rows) unless AllTenants is set.
	Tenant     string
	AllTenants bool
	// BeforeID keeps the rows older than that id (0: from the newest): the NextBeforeID of the
	// page before. Negative is store.ErrInvalid.
	BeforeID int64
	// Limit: 0 is DefaultAuditLimit, above MaxAuditLimit is MaxAuditLimit, negative is
	// store.ErrInvalid.
	Limit int
	// The filters, each "" or zero for none: Actor and Target exactly; Action that action or
	// its family ("flow" keeps flow.save, flow.publish.denied …); Outcome allow or deny; Since
	// and Until bound the row's first time (Since included, Until not).
	Actor, Action, Target string
	Outcome               Outcome
	Since, Until          time.Time
}

// MaxAuditFilter bounds a filter's text.
const MaxAuditFilter = 256

// AuditPage is one page of the audit trail.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	// NextBeforeID is the BeforeID of the next page (0 on the last one).
	NextBeforeID int64 `json:"next_before_id,omitempty"`
	Limit        int   `json:"limit"`
}

// ListAudit reads a page of the audit trail, newest first. The console audits the read itself
// (audit.read, with the query and the row count).
func (db *DB) ListAudit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	limit, err := pageLimit(q.Limit, DefaultAuditLimit, MaxAuditLimit)
	if err != nil {
		return AuditPage{}, err
	}
	if q.BeforeID < 0 {
		return AuditPage{}, invalid("before_id %d: use a positive id (0: from the newest)", q.BeforeID)
	}
	if !q.AllTenants && q.Tenant != "" {
		if err := keys.ValidTenant(q.Tenant); err != nil {
			return AuditPage{}, invalid("audit tenant: %v", err)
		}
	}
	var where []string
	var args []any
	if !q.AllTenants {
		where, args = append(where, "tenant = ?"), append(args, q.Tenant)
	}
	if q.BeforeID > 0 {
		where, args = append(where, "id < ?"), append(args, q.BeforeID)
	}
	for name, v := range map[string]string{"actor": q.Actor, "action": q.Action, "target": q.Target} {
		if len(v) > MaxAuditFilter {
			return AuditPage{}, invalid("audit %s filter: at most %d bytes", name, MaxAuditFilter)
		}
	}
	if q.Actor != "" {
		where, args = append(where, "actor = ?"), append(args, q.Actor)
	}
	if q.Target != "" {
		where, args = append(where, "target = ?"), append(args, q.Target)
	}
	if a := strings.ToLower(strings.TrimSuffix(q.Action, ".")); a != "" {
		// Actions are lower case, so LIKE means the same on both databases (SQLite's ignores
		// ASCII case, PostgreSQL's does not); the filter's own % and _ are matched as they are.
		esc := strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(a)
		where, args = append(where, `(action = ? OR action LIKE ? ESCAPE '\')`), append(args, a, esc+".%")
	}
	switch q.Outcome {
	case "":
	case OutcomeAllow, OutcomeDeny:
		where, args = append(where, "outcome = ?"), append(args, string(q.Outcome))
	default:
		return AuditPage{}, invalid("audit outcome %q: allow or deny", q.Outcome)
	}
	if !q.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, ms(q.Since))
	}
	if !q.Until.IsZero() {
		where, args = append(where, "at < ?"), append(args, ms(q.Until))
	}
	query := "SELECT id, at, last_at, actor, actor_kind, tenant, action, target, outcome, reason, ip, request_id, details, suppressed FROM audit"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := queryAll(ctx, db.r, "list the audit", query+" ORDER BY id DESC LIMIT ?", append(args, limit+1), scanAudit)
	if err != nil {
		return AuditPage{}, err
	}
	p := AuditPage{Entries: rows, Limit: limit}
	if p.Entries == nil {
		p.Entries = []AuditEntry{}
	}
	if len(rows) > limit {
		p.Entries = rows[:limit]
		p.NextBeforeID = rows[limit-1].ID
	}
	return p, nil
}

func scanAudit(s scanner) (AuditEntry, error) {
	var e AuditEntry
	var at, last int64
	var kind, outcome, details string
	if err := s.Scan(&e.ID, &at, &last, &e.Actor, &kind, &e.Tenant, &e.Action, &e.Target, &outcome, &e.Reason, &e.IP, &e.RequestID, &details, &e.Suppressed); err != nil {
		return AuditEntry{}, err
	}
	e.At, e.LastAt, e.ActorKind, e.Outcome, e.Details = fromMS(at), fromMS(last), ActorKind(kind), Outcome(outcome), json.RawMessage(details)
	return e, nil
}
