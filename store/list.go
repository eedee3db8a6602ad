package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine/state"
	"plaita/store/keys"
)

// Listing reads the tenant's execution index (a ZSET of execution ids scored by start time in
// ms), newest first, and never SCANs the key space. Every index member is checked before its
// state key is read: a member that is not a valid id, whose key would be a mechanism key, whose
// state is missing, not JSON or another execution's is skipped and counted, never an error and
// never returned. A Redis failure is an error (ErrRedis, transient).

// List limits.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
	// listScanFactor bounds the index members one List call examines (limit × factor), so a
	// page over an index full of garbage returns in bounded time, with a cursor to go on.
	listScanFactor = 10
)

// ListRequest asks for one page of the tenant's executions, newest first.
type ListRequest struct {
	Cursor string // "" for the first page, else the previous Page.NextCursor
	Limit  int    // items per page: 0 = DefaultListLimit, at most MaxListLimit
	States bool   // also return each full state in Summary.State
	// StartedAfter and StartedBefore bound the start time, StartedAfter ≤ start <
	// StartedBefore (zero: no bound). The page starts and ends on the index's score (the start
	// time in ms), so the members out of range are never read.
	StartedAfter, StartedBefore time.Time
	// Index keeps only the executions indexed under every term (docs/flows.md, "Indexed
	// fields"). The page is read from a term's IndexBy key instead of the tenant's index (the
	// smallest key when there are several: one ZCARD each, pipelined), and every state is
	// checked for every term.
	Index []IndexTerm
	// Match, when set, keeps only the executions it accepts (a status, a flow): the others are
	// passed over, not counted as skipped. A page examines at most limit × 10 members, so a
	// rare match comes back over several pages, each with its cursor.
	Match func(*state.Execution) bool
}

// IndexTerm is one indexed field and a value: its canonical form (engine/state.CorrelationValue),
// as the execution's state keeps it (state.Execution.Index).
type IndexTerm struct {
	Field string `json:"field"`
	Value string `json:"value"`
}

// Summary describes one execution in a list.
type Summary struct {
	ExecutionID string           `json:"execution_id"`
	TenantID    string           `json:"tenant_id"`
	FlowID      string           `json:"flow_id"`
	FlowVersion string           `json:"flow_version"`
	Status      state.Status     `json:"status"`
	CurrentNode string           `json:"current_node"`
	StepCount   int              `json:"step_count"`
	StartTime   time.Time        `json:"start_time"`
	LastUpdate  time.Time        `json:"last_update_time"`
	EndTime     *time.Time       `json:"end_time,omitempty"`
	Suspend     *state.Suspend   `json:"suspend,omitempty"`
	Error       *state.ErrorInfo `json:"error,omitempty"`
	// Index: the values it is listed by (state.Execution.Index).
	Index map[string]string `json:"index,omitempty"`
	// A running or pending one whose current node failed and waits out its retry back-off:
	// the failed attempts (RetryAttempt, 0 for none) and when the last one failed
	// (RetryFailedAt; zero when its timeline no longer says). The next attempt's time needs
	// the node's retry policy, which the control plane reads (control.Plane.List).
	RetryAttempt  int              `json:"-"`
	RetryFailedAt time.Time        `json:"-"`
	RetryNext     *time.Time       `json:"retry_next,omitempty"`
	State         *state.Execution `json:"-"` // only with ListRequest.States
}

// Page is one page of a listing.
type Page struct {
	Items      []Summary
	NextCursor string // "" when the listing is complete
	Skipped    int    // index members skipped (invalid, missing, corrupt)
	Degraded   bool   // Skipped > 0: the index holds members that are not valid executions
	// Bounded: the page comes from a sort of the newest matching executions only (a listing
	// in another order than the index's reads a bounded number of them: control's wake sort).
	Bounded bool
}

// cursor is the last index member a page examined. Opaque to callers (base64 JSON).
type cursor struct {
	Score  float64 `json:"s"`
	Member string  `json:"m"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ListCursorAfter is the cursor of the page that starts right after s, an item of a page of
// this listing: a caller that returns only part of a page (one that merges it with another
// source) goes on from the last item it returned.
func ListCursorAfter(s Summary) string {
	score := 0.0
	if !s.StartTime.IsZero() {
		score = float64(s.StartTime.UnixMilli()) // the index's score (indexScore)
	}
	return cursor{Score: score, Member: s.ExecutionID}.encode()
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	if s == "" {
		return c, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err == nil && c.Member == "" {
		err = fmt.Errorf("no member")
	}
	if err != nil {
		return cursor{}, fmt.Errorf("%w: list cursor %q: %v", ErrInvalid, s, err)
	}
	return c, nil
}

// List returns one page of the tenant's executions, newest first (see the section comment for
// what is skipped). A malformed cursor or index term is ErrInvalid; a Redis failure ErrRedis
// (transient).
func (ts *TenantStore) List(ctx context.Context, req ListRequest) (Page, error) {
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	cur, err := decodeCursor(req.Cursor)
	if err != nil {
		return Page{}, err
	}
	for _, t := range req.Index {
		if _, err := ts.sp.IndexBy(t.Field, t.Value); err != nil {
			return Page{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	src, err := ts.r.l.Source(ctx, ts.sp, req.Index)
	if src.Empty || err != nil {
		return Page{}, err // an indexed value's list that is empty: nothing to list
	}
	above, below := scoreBounds(req)
	keep := listFilter(req)
	var page Page
	scanned, exhausted := 0, false
	for len(page.Items) < limit && scanned < limit*listScanFactor && !exhausted {
		want := limit - len(page.Items)
		rows, err := ts.r.l.Rows(ctx, ts.sp, src, ListRow{Member: cur.Member, Score: cur.Score}, want, above)
		if err != nil {
			return Page{}, fmt.Errorf("list executions: %w", err)
		}
		exhausted = len(rows) < want
		var cands []string
		for _, row := range rows {
			if row.Score < below {
				exhausted = true // older than the range: so is every member after it
				break
			}
			cur = cursor{Score: row.Score, Member: row.Member}
			scanned++
			key, err := ts.sp.Execution(row.Member)
			if err != nil || keys.IsMechanismKey(ts.r.root, key) || ts.sp.ExecutionID(key) != row.Member {
				page.Skipped++
				continue
			}
			cands = append(cands, row.Member)
		}
		states, err := ts.r.l.States(ctx, ts.sp, cands)
		if err != nil {
			return Page{}, err
		}
		for i, b := range states {
			if b == nil {
				page.Skipped++
				continue
			}
			st, err := decodeFor(cands[i], b)
			if err != nil {
				page.Skipped++
				continue
			}
			if keep(st) {
				page.Items = append(page.Items, summarize(st, req.States))
			}
		}
	}
	if !exhausted {
		page.NextCursor = cur.encode()
	}
	page.Degraded = page.Skipped > 0
	return page, nil
}

// scoreBounds are the index scores of a request's start-time range: above, the first score
// left out at the top ("" for none), and below, the lowest score in range (-Inf for none).
// Scores are start times in whole ms; the states read are checked to the nanosecond
// (listFilter).
func scoreBounds(req ListRequest) (above string, below float64) {
	below = math.Inf(-1)
	if t := req.StartedBefore; !t.IsZero() {
		ms := t.UnixMilli()
		if t.After(time.UnixMilli(ms)) {
			ms++ // a start within that ms, before t, is in range
		}
		above = strconv.FormatInt(ms, 10)
	}
	if t := req.StartedAfter; !t.IsZero() {
		below = float64(t.UnixMilli())
	}
	return above, below
}

// listFilter accepts the states a request lists: in its start-time range, indexed under every
// term, and accepted by its Match.
func listFilter(req ListRequest) func(*state.Execution) bool {
	return func(st *state.Execution) bool {
		if (!req.StartedAfter.IsZero() && st.StartTime.Before(req.StartedAfter)) ||
			(!req.StartedBefore.IsZero() && !st.StartTime.Before(req.StartedBefore)) {
			return false
		}
		for _, t := range req.Index {
			if v, ok := st.Index[t.Field]; !ok || v != t.Value {
				return false
			}
		}
		return req.Match == nil || req.Match(st)
	}
}

func summarize(st *state.Execution, full bool) Summary {
	s := Summary{
		ExecutionID: st.ExecutionID, TenantID: st.TenantID, FlowID: st.FlowID, FlowVersion: st.FlowVersion,
		Status: st.Status, CurrentNode: st.CurrentNode, StepCount: st.StepCount, StartTime: st.StartTime,
		LastUpdate: st.LastUpdate, EndTime: st.EndTime, Suspend: st.Suspend, Error: st.Error, Index: st.Index,
	}
	if n := st.NodeAttempts[st.CurrentNode]; n > 0 && (st.Status == state.Running || st.Status == state.Pending) {
		s.RetryAttempt = n
		if e, ok := LastRetry(st); ok {
			s.RetryFailedAt = e.Time.Time()
		}
	}
	if full {
		s.State = st
	}
	return s
}

// LastRetry is the record of the last failed attempt of st's current node (its timeline's last
// "retry" entry of that node: when, and its error and back-off); false when the timeline no
// longer holds one.
func LastRetry(st *state.Execution) (state.TimelineEntry, bool) {
	for i := len(st.Timeline) - 1; i >= 0; i-- {
		if e := st.Timeline[i]; e.Event == "retry" && e.Node == st.CurrentNode {
			return e, true
		}
	}
	return state.TimelineEntry{}, false
}

// IndexReady reports whether a backfill of the tenant's index has completed.
func (ts *TenantStore) IndexReady(ctx context.Context) (bool, error) {
	c, err := ts.r.redis("the index's ready marker")
	if err != nil {
		return false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	n, err := c.Do(ctx, c.B().Exists().Key(ts.sp.IndexReady()).Build()).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "read index ready marker", err)
	}
	return n > 0, nil
}

// backfillCursor is the persisted position of an interrupted backfill: which node (by sorted
// address) and that node's SCAN cursor. A changed node list restarts the backfill.
type backfillCursor struct {
	Nodes  []string `json:"nodes"`
	Node   int      `json:"node"`
	Cursor uint64   `json:"cursor"`
}

// backfillBatch is the SCAN COUNT of one backfill step.
const backfillBatch = 500

// Backfill adds every state key of the tenant to the index (ZADD NX with the state's start
// time; a state with indexed values to their IndexBy keys too), by SCAN of the tenant's execution keys on every node: the one place this package
// scans, for operators (plaita reindex) and never on a request path. budget bounds the keys
// examined in this call (SCAN COUNT total; ≤0 means one batch); the position is kept in the
// index's backfill cursor key (24h TTL) so the next call goes on. Mechanism keys and states
// that do not decode are left out. When the scan completes, the index's ready marker is set,
// the cursor deleted and Done is true.
func (ts *TenantStore) Backfill(ctx context.Context, budget int) (BackfillStep, error) {
	if budget <= 0 {
		budget = backfillBatch
	}
	c, err := ts.r.redis("the index backfill (the embedded index is its state table)")
	if err != nil {
		return BackfillStep{}, err
	}
	nodes := c.Nodes()
	addrs := make([]string, 0, len(nodes))
	for a := range nodes {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)

	ctx, cancel := opCtx(ctx)
	defer cancel()
	var step BackfillStep
	pos := backfillCursor{Nodes: addrs}
	raw, err := c.Do(ctx, c.B().Get().Key(ts.sp.IndexCursor()).Build()).AsBytes()
	switch {
	case err == nil:
		var saved backfillCursor
		if json.Unmarshal(raw, &saved) == nil && slices.Equal(saved.Nodes, addrs) && saved.Node < len(addrs) {
			pos = saved
		}
	case !rueidis.IsRedisNil(err):
		return step, transient(ErrRedis, "backfill: read cursor", err)
	}

	for budget > 0 && pos.Node < len(addrs) {
		count := min(budget, backfillBatch)
		budget -= count
		node := nodes[addrs[pos.Node]]
		e, err := node.Do(ctx, node.B().Scan().Cursor(pos.Cursor).Match(ts.sp.ExecutionPattern()).Count(int64(count)).Build()).AsScanEntry()
		if err != nil {
			return step, transient(ErrRedis, "backfill: scan "+addrs[pos.Node], err)
		}
		added, err := ts.indexKeys(ctx, e.Elements)
		if err != nil {
			return step, err
		}
		step.Scanned += len(e.Elements)
		step.Added += added
		pos.Cursor = e.Cursor
		if pos.Cursor == 0 {
			pos.Node++
		}
	}
	if pos.Node >= len(addrs) {
		res := c.DoMulti(ctx, c.B().Set().Key(ts.sp.IndexReady()).Value("1").Build(), c.B().Del().Key(ts.sp.IndexCursor()).Build())
		for _, r := range res {
			if err := r.Error(); err != nil {
				return step, transient(ErrRedis, "backfill: mark ready", err)
			}
		}
		step.Done = true
		return step, nil
	}
	b, _ := json.Marshal(pos)
	if err := c.Do(ctx, c.B().Set().Key(ts.sp.IndexCursor()).Value(string(b)).ExSeconds(int64(BackfillCursorTTL/time.Second)).Build()).Error(); err != nil {
		return step, transient(ErrRedis, "backfill: save cursor", err)
	}
	return step, nil
}

// BackfillStep is what one Backfill call did.
type BackfillStep struct {
	Done    bool // the scan completed: the index is ready
	Scanned int  // keys the scan returned (states and mechanism keys)
	Added   int  // states whose index member was written (ZADD NX: already there counts too)
}

// indexKeys adds the state keys among scanned keys to the index and returns how many.
func (ts *TenantStore) indexKeys(ctx context.Context, scanned []string) (int, error) {
	c := ts.r.c
	var ids []string
	var cmds rueidis.Commands
	for _, k := range scanned {
		id := ts.sp.ExecutionID(k)
		if id == "" || keys.IsMechanismKey(ts.r.root, k) {
			continue
		}
		ids = append(ids, id)
		cmds = append(cmds, c.B().Get().Key(k).Build())
	}
	if len(cmds) == 0 {
		return 0, nil
	}
	zadd := c.B().Zadd().Key(ts.sp.Index()).Nx().ScoreMember()
	var by rueidis.Commands // the IndexBy members of states with indexed values
	added := 0
	for i, res := range c.DoMulti(ctx, cmds...) {
		b, err := res.AsBytes()
		switch {
		case rueidis.IsRedisNil(err) || isWrongType(err):
			continue // expired since the scan, or not a string
		case err != nil:
			return 0, transient(ErrRedis, "backfill: read "+ids[i], err)
		}
		st, err := decodeFor(ids[i], b)
		if err != nil {
			continue
		}
		zadd = zadd.ScoreMember(indexScore(st), ids[i])
		if len(st.Index) > 0 {
			by = append(by, redisState{c: c}.indexNXCmds(ts.sp, ids[i], indexScore(st), st.Index)[1:]...)
		}
		added++
	}
	if added == 0 {
		return 0, nil
	}
	for _, r := range c.DoMulti(ctx, append(rueidis.Commands{zadd.Build()}, by...)...) {
		if err := r.Error(); err != nil {
			return 0, transient(ErrRedis, "backfill: index", err)
		}
	}
	return added, nil
}
