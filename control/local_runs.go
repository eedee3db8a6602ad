package control

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
)

// The executions a console ran in local mode stay visible. A console that ran local mode (Redis
// unreachable at its start, docs/console.md) keeps its executions in the console database
// (local_executions); once a console runs on Redis again, those executions are in no key of
// Redis — and without this they were in no list either: they vanished from the API and the UI.
// The cluster's plane reads them beside Redis's (Deps.LocalRuns): List merges both sources
// newest first, Show, the timeline and a live view read one that Redis does not have, each
// marked runtime "local". They are not handed to the cluster: no worker can run a state that
// is not in Redis, so every write (resume, cancel, delete, an approval's answer) is refused by
// name (ran_in_local_mode) until a later change hands them over.

// RuntimeLocal is the runtime of an execution a console ran in local mode.
const RuntimeLocal = "local"

// codeRanLocally is the refusal of a write on an execution that ran in local mode.
const codeRanLocally = "ran_in_local_mode"

// localReadOnly says why the cluster's plane changes no local execution.
const localReadOnly = "it ran in the console's local mode (Redis was unreachable when the console started): its state is in the " +
	"console database, not in Redis, so no worker runs it and nothing in cluster mode wakes it; it is shown, and not changed"

// ranLocally is the refusal of a write on st, an execution that ran in local mode.
func ranLocally(st *state.Execution) *Refusal {
	return &Refusal{Class: Conflict, Code: codeRanLocally, Execution: st,
		Message: fmt.Sprintf("execution %s %s", st.ExecutionID, localReadOnly),
		Unblock: "a console in local mode changes it (PLAITA_CONSOLE_LOCAL_FALLBACK=1 with Redis unreachable); on Redis it stays as it is"}
}

// localRun reads an execution of tenant that ran in local mode: nil when there is none (no
// reader, no such row, another tenant's).
func (p *Plane) localRun(ctx context.Context, tenant, id string) (*state.Execution, error) {
	if p.d.LocalRuns == nil {
		return nil, nil
	}
	st, err := p.d.LocalRuns.Load(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("execution %s in the console database: %w", id, err)
	case tenantSlug(st.TenantID) != tenantSlug(tenant):
		return nil, nil
	}
	return st, nil
}

// shownLocal is Show's answer for an execution that ran in local mode, read by the cluster's
// plane: its state, read-only, and a wake-up report that says nothing here wakes it.
func shownLocal(st *state.Execution) Shown {
	out := Shown{Execution: st, Runtime: RuntimeLocal, ReadOnly: localReadOnly}
	if s := st.Suspend; st.Status == state.Suspended && s != nil {
		out.WakeUp = &WakeUp{Kind: s.Kind, Roles: map[string]WakeRole{}, Text: "nothing: " + localReadOnly,
			Problems: []string{"it ran in the console's local mode: nothing in cluster mode wakes it"}}
	}
	return out
}

// DetailShown is Detail for what Show returned: for an execution the front end cannot change
// (Shown.ReadOnly) no next operation is offered, and HintsNote says why.
func DetailShown(ctx context.Context, p *Plane, tenant string, sh Shown) Detail {
	d := p.Detail(ctx, tenant, sh.Execution)
	if sh.ReadOnly != "" {
		d.Hints, d.HintsNote = nil, "no operation: "+sh.ReadOnly
	}
	return d
}

// ---- listing ----

// listKey is where an execution stands in a listing, newest first: its start time in ms (the
// Redis index's score, the console database's started_at) and its id, which orders equal
// times (byte order, descending, in both).
type listKey struct {
	ms int64
	id string
}

func keyOf(s store.Summary) listKey {
	k := listKey{id: s.ExecutionID}
	if !s.StartTime.IsZero() {
		k.ms = s.StartTime.UnixMilli()
	}
	return k
}

// before reports whether a comes before b, newest first.
func (a listKey) before(b listKey) bool { return a.ms > b.ms || a.ms == b.ms && a.id > b.id }

// localRunsPage is a page of local executions: the items, newest first, with their keys; next
// is the cursor after the last row examined ("" when no row is left), last that row's key.
type localRunsPage struct {
	items   []store.Summary
	keys    []listKey
	next    string
	last    listKey
	skipped int
}

// listLocalRuns pages the tenant's local executions from cursor, at most limit of them,
// filtered as req says (status, flow and the start-time range in the database; the start time
// to the nanosecond, the indexed fields and the due time on each state), each marked runtime
// local. The rows a page examines are bounded, as a Redis listing's are: a selective filter
// gives a short page with the cursor of what is left.
func listLocalRuns(ctx context.Context, x *sqlite.Executions, tenant string, req ListRequest, terms []store.IndexTerm, cursor string,
	limit, examine int) (localRunsPage, error) {
	q := sqlite.ExecutionQuery{Tenant: tenant, Status: req.Status, FlowID: req.FlowID, StartedAfter: req.StartedAfter,
		StartedBefore: req.StartedBefore, ListOptions: sqlite.ListOptions{Cursor: cursor}}
	var out localRunsPage
	for examined := 0; len(out.items) < limit && examined < examine; {
		q.Limit = min(limit-len(out.items), sqlite.MaxLimit)
		page, err := x.List(ctx, q)
		switch {
		case errors.Is(err, sqlite.ErrBadCursor):
			return out, refuse(Invalid, "invalid_cursor", err, "cursor: %v", err)
		case errors.Is(err, store.ErrInvalid):
			return out, refuse(Invalid, "invalid_limit", err, "%v", err)
		case err != nil:
			return out, err
		}
		for _, e := range page.Items {
			examined++
			out.last = listKey{ms: e.StartedAt.UnixMilli(), id: e.ExecutionID}
			if e.StartedAt.IsZero() {
				out.last.ms = 0
			}
			st, err := x.Load(ctx, e.ExecutionID)
			if err != nil {
				out.skipped++ // deleted since, or unreadable: the execution's own read says which
				continue
			}
			if localListed(st, req, terms) {
				s := store.SummaryOf(st)
				s.Runtime = RuntimeLocal
				out.items, out.keys = append(out.items, s), append(out.keys, out.last)
			}
		}
		out.next, q.Cursor = page.Next, page.Next
		if page.Next == "" {
			break
		}
	}
	return out, nil
}

// localListed is whether st passes the filters the database cannot apply exactly: the start
// time to the nanosecond and the indexed fields; then the list's own test (status, flow, due
// time), as the cluster's list applies it.
func localListed(st *state.Execution, req ListRequest, terms []store.IndexTerm) bool {
	if !req.StartedAfter.IsZero() && st.StartTime.Before(req.StartedAfter) || !req.StartedBefore.IsZero() && !st.StartTime.Before(req.StartedBefore) {
		return false
	}
	for _, t := range terms {
		if st.Index[t.Field] != t.Value {
			return false
		}
	}
	return req.matches(st)
}

// bothCursor is where a listing of both sources stands: each source's own cursor, exactly
// after the last of its items a page returned, or done. Opaque to callers: "m1." and base64url
// JSON.
type bothCursor struct {
	Redis     string `json:"r,omitempty"`
	RedisDone bool   `json:"rd,omitempty"`
	Local     string `json:"l,omitempty"`
	LocalDone bool   `json:"ld,omitempty"`
}

const bothCursorPrefix = "m1."

func (c bothCursor) encode() string {
	b, _ := json.Marshal(c)
	return bothCursorPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// decodeBothCursor reads a cursor of listBoth. A cursor of a Redis listing alone (a page
// served before the console read its local executions) goes on over Redis alone, as it began.
func decodeBothCursor(s string) (bothCursor, error) {
	if s == "" {
		return bothCursor{}, nil
	}
	rest, ok := strings.CutPrefix(s, bothCursorPrefix)
	if !ok {
		return bothCursor{Redis: s, LocalDone: true}, nil
	}
	var c bothCursor
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return c, refuse(Invalid, "invalid_cursor", err, "cursor %q: not a cursor of this listing", s)
	}
	return c, nil
}

// listBoth is a page of the tenant's executions from Redis and from the console database's
// local executions, newest first. Each source is read from its own cursor; the page takes the
// newer head of the two until it is full, and stops early rather than take an item that an
// unread item of the other source could come before (a Redis page may end short with more to
// read; its unread items are older than its last one, not necessarily than a local head).
// Each source's cursor is then put right after the last of its items the page returned, so
// no item is skipped or repeated across pages.
func (p *Plane) listBoth(ctx context.Context, ts *store.TenantStore, req ListRequest, sr store.ListRequest, terms []store.IndexTerm) (store.Page, error) {
	cur, err := decodeBothCursor(req.Cursor)
	if err != nil {
		return store.Page{}, err
	}
	limit := req.Limit
	if limit <= 0 {
		limit = store.DefaultListLimit
	}
	limit = min(limit, store.MaxListLimit)
	var rp store.Page
	if !cur.RedisDone {
		sr.Cursor, sr.Limit = cur.Redis, limit
		if rp, err = ts.List(ctx, sr); errors.Is(err, store.ErrInvalid) {
			return store.Page{}, refuse(Invalid, "invalid_cursor", err, "cursor: %v", err)
		} else if err != nil {
			return store.Page{}, err
		}
	}
	var lp localRunsPage
	if !cur.LocalDone {
		if lp, err = listLocalRuns(ctx, p.d.LocalRuns, ts.Tenant(), req, terms, cur.Local, limit, limit*10); err != nil {
			return store.Page{}, err
		}
	}
	redisMore, localMore := !cur.RedisDone && rp.NextCursor != "", !cur.LocalDone && lp.next != ""
	out := store.Page{Items: make([]store.Summary, 0, limit), Skipped: rp.Skipped + lp.skipped}
	i, j := 0, 0
merge:
	for len(out.Items) < limit {
		hasR, hasL := i < len(rp.Items), j < len(lp.items)
		switch {
		case hasR && hasL && keyOf(rp.Items[i]).before(lp.keys[j]), hasR && !hasL && (!localMore || keyOf(rp.Items[i]).before(lp.last)):
			out.Items, i = append(out.Items, rp.Items[i]), i+1
		case hasL && (hasR || !redisMore):
			out.Items, j = append(out.Items, lp.items[j]), j+1
		default:
			break merge
		}
	}
	next := cur
	if !cur.RedisDone {
		switch {
		case i == len(rp.Items):
			next.Redis, next.RedisDone = rp.NextCursor, !redisMore
		case i > 0:
			next.Redis = store.ListCursorAfter(rp.Items[i-1])
		}
	}
	if !cur.LocalDone {
		switch {
		case j == len(lp.items):
			next.Local, next.LocalDone = lp.next, !localMore
		case j > 0:
			k := lp.keys[j-1]
			next.Local = sqlite.ExecutionCursorAfter(time.UnixMilli(k.ms), k.id)
		}
	}
	if !next.RedisDone || !next.LocalDone {
		out.NextCursor = next.encode()
	}
	out.Degraded = out.Skipped > 0
	return out, nil
}

// tenantSlug is tenant as the console database names it (the default tenant "default").
func tenantSlug(t string) string {
	if t == "" {
		return keys.DefaultTenant
	}
	return t
}

// ReconcileResult is what an orphan reconcile of local mode did.
type ReconcileResult = sqlite.ReconcileResult

// OrphanReport is what local mode's start did with the executions an earlier version's local
// mode left running in the console database (they have no task in the embedded stream, so
// nothing would take them up): PLAITA_CONSOLE_RECONCILE_ORPHANS suspends them for an operator,
// fails them, or leaves them.
type OrphanReport struct {
	Result ReconcileResult
	Error  string
}

// ReconcileLocalOrphans settles the executions an earlier version's local mode left running in
// db (sqlite.Executions.ReconcileOrphans with mode).
func ReconcileLocalOrphans(ctx context.Context, x *sqlite.Executions, mode sqlite.OrphanMode, now time.Time) (*OrphanReport, error) {
	res, err := x.ReconcileOrphans(ctx, mode, now)
	out := &OrphanReport{Result: res}
	if err != nil {
		out.Error = err.Error()
		return out, fmt.Errorf("local mode: orphan reconcile: %w", err)
	}
	return out, nil
}
