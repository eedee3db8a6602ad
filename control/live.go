package control

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"plaita/engine/state"
	"plaita/store"
)

// Following an execution live (the console's GET /api/executions/{id}/events; a CLI could
// follow the same way). The worker publishes each timeline entry on the execution's channel
// — best effort: only to channels it saw a subscriber on (it re-reads them every second), and
// a PUBLISH can be lost — so the state is the record and pub/sub only makes it prompt. Follow
// subscribes first and reads the state after, sends what the state has that the follower
// lacks, then relays live events in seq order; it re-reads the state whenever a seq gap shows
// (an entry was missed), when the subscription ends or lags, and whenever a poll interval
// passes without a live event (a lost last event leaves no gap to see). So a follower never
// misses an entry the state still keeps, never gets one twice, and always gets the terminal
// status.

// Defaults of a follow.
const (
	DefaultFollowPoll      = 3 * time.Second
	DefaultFollowHeartbeat = 15 * time.Second
	// maxPending bounds the live events held beyond a gap while the state catches up.
	maxPending = 1024
)

// LiveKind is what a LiveItem carries.
type LiveKind string

const (
	// LiveSnapshot: the execution as it is when the follow starts (always first).
	LiveSnapshot LiveKind = "snapshot"
	// LiveEntry: one timeline entry, in seq order, each once.
	LiveEntry LiveKind = "entry"
	// LiveNode: a node started (not a timeline entry: it has no seq and is never replayed).
	LiveNode LiveKind = "node"
	// LiveTruncated: entries the follower lacks that the state no longer keeps.
	LiveTruncated LiveKind = "truncated"
	// LiveHeartbeat: nothing happened for a heartbeat interval.
	LiveHeartbeat LiveKind = "heartbeat"
	// LiveEnd: the follow is over (always last, unless the follow was cancelled).
	LiveEnd LiveKind = "end"
	// LiveReady, LiveStatus and LiveResync are FollowStatus's: subscribed; a status change;
	// changes may have been missed.
	LiveReady  LiveKind = "ready"
	LiveStatus LiveKind = "status"
	LiveResync LiveKind = "resync"
)

// LiveItem is one thing a follow emits: Kind says which field is set.
type LiveItem struct {
	Kind      LiveKind
	Snapshot  *ExecutionSnapshot
	Event     *store.LiveEvent // entry, node; FollowStatus: a status change
	Truncated *TimelineGap
	End       *FollowEnd
}

// ExecutionSnapshot is an execution as a follow starts with it.
type ExecutionSnapshot struct {
	ExecutionID string           `json:"execution_id"`
	TenantID    string           `json:"tenant_id"`
	FlowID      string           `json:"flow_id,omitempty"`
	FlowVersion string           `json:"flow_version,omitempty"`
	Status      state.Status     `json:"status" doc:"the execution's status, or queued while its start waits for a worker"`
	CurrentNode string           `json:"current_node,omitempty"`
	StepCount   int              `json:"step_count"`
	LastSeq     int              `json:"last_seq" doc:"the newest timeline entry's seq"`
	After       int              `json:"after" doc:"the follow sends the entries after this seq (the Last-Event-ID)"`
	Dropped     int              `json:"timeline_dropped" doc:"entries 1…timeline_dropped are no longer kept"`
	Suspend     *state.Suspend   `json:"suspend,omitempty"`
	Error       *state.ErrorInfo `json:"error,omitempty"`
	StartTime   *time.Time       `json:"start_time,omitempty"`
	EndTime     *time.Time       `json:"end_time,omitempty"`
}

// TimelineGap is a run of entries a follower lacks and the state no longer keeps (its timeline
// holds the newest PLAITA_EXECUTION_TIMELINE_MAX).
type TimelineGap struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// FollowEnd says why a follow ended.
type FollowEnd struct {
	Reason string       `json:"reason" enum:"terminal,deleted,corrupt,draining" doc:"terminal: the execution reached a terminal status; deleted: it was deleted; corrupt: its state can no longer be read; draining: the console is shutting down (reconnect)"`
	Status state.Status `json:"status,omitempty"`
	// LastSeq is the seq of the last entry sent.
	LastSeq int `json:"last_seq"`
}

// FollowRequest asks to follow one execution.
type FollowRequest struct {
	Tenant string
	ID     string
	// After is the seq of the last entry the follower has (a reconnect's Last-Event-ID): the
	// entries after it are sent, none before.
	After int
	// Poll: the state is re-read after this long without a live event (0: DefaultFollowPoll).
	Poll time.Duration
	// Heartbeat: a LiveHeartbeat after this long without an item (0: DefaultFollowHeartbeat).
	Heartbeat time.Duration
}

// Follow emits the execution's snapshot, then its timeline entries after req.After in seq
// order, each once, then LiveEnd once it is terminal (or deleted). It returns nil after
// LiveEnd, the error of emit when emit fails, ctx's error when ctx ends, and — before anything
// was emitted — the refusal of an execution that does not exist or cannot be read.
func (p *Plane) Follow(ctx context.Context, req FollowRequest, emit func(LiveItem) error) error {
	return followExecution(ctx, p, req, emit)
}

// liveSource is what a follow reads: the state as a live view sees it (Plane.current), the
// state alone, and the execution's live events when the backend publishes them.
type liveSource interface {
	current(ctx context.Context, tenant, id string) (string, *state.Execution, bool, error)
	// reload reads the state again: store.ErrNotFound when it is gone, an error matching
	// store.ErrStateCorrupt when it no longer decodes.
	reload(ctx context.Context, tenant, id string) (*state.Execution, error)
	// subscribe subscribes to the execution's live events; nil without error when the
	// backend publishes none (the follow polls).
	subscribe(ctx context.Context, tenant, id string) (*store.LiveSubscription, error)
}

func (p *Plane) reload(ctx context.Context, tenant, id string) (*state.Execution, error) {
	ts, err := p.tenantStore(tenant)
	if err != nil {
		return nil, err
	}
	return ts.Load(ctx, id)
}

func (p *Plane) subscribe(ctx context.Context, tenant, id string) (*store.LiveSubscription, error) {
	if p.d.Live == nil {
		return nil, nil
	}
	return p.d.Live.SubscribeExecution(ctx, tenant, id)
}

// followExecution is Follow over src.
func followExecution(ctx context.Context, src liveSource, req FollowRequest, emit func(LiveItem) error) error {
	if req.After < 0 {
		return refuse(Invalid, "invalid_after", nil, "Last-Event-ID %d: use a timeline seq", req.After)
	}
	f := &follow{src: src, req: req, emit: emit, sent: req.After, pending: map[int]store.LiveEvent{}}
	f.req.Poll = cmpDuration(req.Poll, DefaultFollowPoll)
	f.req.Heartbeat = cmpDuration(req.Heartbeat, DefaultFollowHeartbeat)
	defer f.unsubscribe()
	f.subscribe(ctx) // before the first read: nothing published between the two is missed
	tenant, st, queued, err := src.current(ctx, req.Tenant, req.ID)
	if err != nil {
		return err
	}
	f.tenant, f.seen = tenant, st != nil
	if err := f.out(LiveItem{Kind: LiveSnapshot, Snapshot: snapshotOf(tenant, req.ID, st, queued, req.After)}); err != nil {
		return err
	}
	if st != nil {
		if done, err := f.apply(st); done || err != nil {
			return err
		}
	}
	return f.loop(ctx)
}

// follow is one Follow's progress.
type follow struct {
	src    liveSource
	req    FollowRequest
	emit   func(LiveItem) error
	tenant string
	sub    *store.LiveSubscription
	// sent is the seq of the last entry emitted; pending are live entries beyond a gap,
	// emitted once the state (or the live events) fill it.
	sent    int
	pending map[int]store.LiveEvent
	seen    bool         // a state was read: a missing one now means it was deleted
	heard   bool         // a live event came since the last poll
	final   state.Status // the terminal status of a terminal entry sent
	beat    *time.Timer
}

func (f *follow) out(it LiveItem) error {
	if f.beat != nil {
		f.beat.Reset(f.req.Heartbeat)
	}
	return f.emit(it)
}

func (f *follow) loop(ctx context.Context) error {
	poll := time.NewTicker(f.req.Poll)
	defer poll.Stop()
	f.beat = time.NewTimer(f.req.Heartbeat)
	defer f.beat.Stop()
	for {
		var msgs <-chan store.LiveMessage
		var ended <-chan struct{}
		if f.sub != nil {
			msgs, ended = f.sub.C, f.sub.Done()
		}
		var done bool
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-msgs:
			if !ok { // the subscription ended (Redis went away): poll until it is back
				f.unsubscribe()
				done, err = f.resync(ctx)
				break
			}
			f.heard = true
			done, err = f.live(ctx, m)
		case <-ended:
			f.unsubscribe()
			done, err = f.resync(ctx)
		case <-poll.C:
			if f.sub == nil {
				f.subscribe(ctx)
			}
			if f.sub == nil || !f.heard || len(f.pending) > 0 || f.sub.Lost() {
				done, err = f.resync(ctx)
			}
			f.heard = false
		case <-f.beat.C:
			err = f.out(LiveItem{Kind: LiveHeartbeat})
		}
		if done || err != nil {
			return err
		}
	}
}

// subscribe subscribes to the execution's channel; on failure the follow polls until the next
// attempt (at the next poll).
func (f *follow) subscribe(ctx context.Context) {
	if sub, err := f.src.subscribe(ctx, f.req.Tenant, f.req.ID); err == nil && sub != nil {
		f.sub = sub
	}
}

func (f *follow) unsubscribe() {
	if f.sub != nil {
		f.sub.Close()
		f.sub = nil
	}
}

// live takes one live event: the next entry is emitted, an old one dropped, one beyond a gap
// held while the state is re-read.
func (f *follow) live(ctx context.Context, m store.LiveMessage) (bool, error) {
	var ev store.LiveEvent
	if json.Unmarshal(m.Payload, &ev) != nil || ev.ExecutionID != f.req.ID {
		return false, nil
	}
	switch {
	case ev.Seq == 0:
		return false, f.out(LiveItem{Kind: LiveNode, Event: &ev})
	case ev.Seq <= f.sent:
		return false, nil
	case ev.Seq > f.sent+1:
		// A new gap: re-read the state now. While one is open, the entries behind it wait for
		// the next poll (a worker publishes an entry before it saves the state: re-reading at
		// every event would read a large state again and again for nothing).
		fresh := len(f.pending) == 0
		if len(f.pending) < maxPending {
			f.pending[ev.Seq] = ev
		}
		if !fresh {
			return false, nil
		}
		return f.resync(ctx)
	}
	if err := f.entry(ev); err != nil {
		return false, err
	}
	if err := f.flush(); err != nil {
		return false, err
	}
	return f.finish("")
}

// entry emits the next entry, and notes a terminal one (a live event carries the status it
// was recorded with: completed, error or cancelled with the entry of that name).
func (f *follow) entry(ev store.LiveEvent) error {
	f.sent = ev.Seq
	delete(f.pending, ev.Seq)
	if ev.Status.Terminal() && ev.Event == string(ev.Status) {
		f.final = ev.Status
	}
	return f.out(LiveItem{Kind: LiveEntry, Event: &ev})
}

// flush emits the held entries that now follow on, in order, and forgets those sent already.
func (f *follow) flush() error {
	for {
		ev, ok := f.pending[f.sent+1]
		if !ok {
			break
		}
		if err := f.entry(ev); err != nil {
			return err
		}
	}
	for seq := range f.pending {
		if seq <= f.sent {
			delete(f.pending, seq)
		}
	}
	return nil
}

// finish ends the follow once a terminal entry was sent (or the state read is terminal and
// every entry of it was sent: status).
func (f *follow) finish(status state.Status) (bool, error) {
	if f.final != "" {
		status = f.final
	}
	if status == "" {
		return false, nil
	}
	return true, f.out(LiveItem{Kind: LiveEnd, End: &FollowEnd{Reason: "terminal", Status: status, LastSeq: f.sent}})
}

// resync re-reads the state and emits what it has that the follower lacks.
func (f *follow) resync(ctx context.Context) (bool, error) {
	st, err := f.src.reload(ctx, f.tenant, f.req.ID)
	switch {
	case errors.Is(err, store.ErrNotFound) && f.seen:
		return true, f.out(LiveItem{Kind: LiveEnd, End: &FollowEnd{Reason: "deleted", LastSeq: f.sent}})
	case errors.Is(err, store.ErrStateCorrupt):
		return true, f.out(LiveItem{Kind: LiveEnd, End: &FollowEnd{Reason: "corrupt", LastSeq: f.sent}})
	case err != nil:
		return false, nil // not there yet (queued), or Redis is away: the next poll tries again
	}
	f.seen = true
	return f.apply(st)
}

// apply emits st's entries after the last one sent — first a gap for those it no longer
// keeps — then the held live entries that follow on; it ends the follow when st is terminal
// and every entry of it was sent.
func (f *follow) apply(st *state.Execution) (bool, error) {
	if len(st.Timeline) > 0 && st.Timeline[0].Seq > f.sent+1 {
		gap := &TimelineGap{From: f.sent + 1, To: st.Timeline[0].Seq - 1}
		f.sent = gap.To
		if err := f.out(LiveItem{Kind: LiveTruncated, Truncated: gap}); err != nil {
			return false, err
		}
	}
	last := lastSeq(st)
	for _, e := range st.Timeline {
		if e.Seq != f.sent+1 {
			continue
		}
		status := entryStatus(e, st, last)
		if err := f.entry(store.LiveEvent{ExecutionID: st.ExecutionID, TenantID: st.TenantID, FlowID: st.FlowID, Status: status,
			Seq: e.Seq, Time: string(e.Time), Node: e.Node, Event: e.Event, Millis: e.Millis, Detail: e.Detail}); err != nil {
			return false, err
		}
	}
	if err := f.flush(); err != nil {
		return false, err
	}
	if st.Status.Terminal() && f.sent >= last {
		return f.finish(st.Status)
	}
	return f.finish("")
}

// entryStatus is the status an entry read from the state reports: the state's for its newest
// entry, else what the entry itself says (a live event carries the status it was recorded
// with; the state keeps only the current one).
func entryStatus(e state.TimelineEntry, st *state.Execution, last int) state.Status {
	if e.Seq == last {
		return st.Status
	}
	switch s := state.Status(e.Event); s {
	case state.Suspended, state.Completed, state.Error, state.Cancelled:
		return s
	}
	return state.Running
}

func snapshotOf(tenant, id string, st *state.Execution, queued bool, after int) *ExecutionSnapshot {
	s := &ExecutionSnapshot{ExecutionID: id, TenantID: tenant, After: after}
	if queued || st == nil {
		s.Status = statusQueued
		return s
	}
	start := st.StartTime
	s.FlowID, s.FlowVersion, s.Status, s.CurrentNode, s.StepCount = st.FlowID, st.FlowVersion, st.Status, st.CurrentNode, st.StepCount
	s.LastSeq, s.Dropped, s.Suspend, s.Error, s.StartTime, s.EndTime = lastSeq(st), st.TimelineDropped, st.Suspend, st.Error, &start, st.EndTime
	return s
}

func cmpDuration(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

// StatusFilter keeps the status changes of one flow, or to one status ("" = any).
type StatusFilter struct {
	FlowID string
	Status state.Status
}

func (f StatusFilter) keeps(ev store.LiveEvent) bool {
	return (f.FlowID == "" || ev.FlowID == f.FlowID) && (f.Status == "" || ev.Status == f.Status)
}

// FollowStatus relays the status changes of tenant's executions (the live executions list):
// LiveReady once subscribed, then each change the workers publish (an execution started,
// suspended, resumed or ended), heartbeats, and LiveResync when changes may have been missed
// (the subscription lagged, or ended and was made again): the list endpoint is the record, a
// follower re-reads it then. Best effort by design — pub/sub drops what it cannot deliver —
// so it returns only when ctx ends (nil) or emit fails.
func (p *Plane) FollowStatus(ctx context.Context, tenant string, filter StatusFilter, poll, heartbeat time.Duration,
	emit func(LiveItem) error) error {
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return err
	}
	if p.d.Live == nil {
		return refuse(Conflict, "no_live_events", nil, "live events are not available here")
	}
	sub, err := p.d.Live.SubscribeStatus(ctx, tenant)
	if err != nil {
		return err
	}
	defer func() { sub.Close() }()
	beat := time.NewTimer(cmpDuration(heartbeat, DefaultFollowHeartbeat))
	defer beat.Stop()
	retry := time.NewTicker(cmpDuration(poll, DefaultFollowPoll))
	defer retry.Stop()
	out := func(it LiveItem) error {
		beat.Reset(cmpDuration(heartbeat, DefaultFollowHeartbeat))
		return emit(it)
	}
	if err := out(LiveItem{Kind: LiveReady}); err != nil {
		return err
	}
	for {
		var msgs <-chan store.LiveMessage
		if sub != nil {
			msgs = sub.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-beat.C:
			err = out(LiveItem{Kind: LiveHeartbeat})
		case m, ok := <-msgs:
			if !ok {
				sub.Close()
				sub = nil // subscribed again at the next tick
				break
			}
			if sub.Lost() {
				err = out(LiveItem{Kind: LiveResync})
			}
			var ev store.LiveEvent
			if err == nil && json.Unmarshal(m.Payload, &ev) == nil && filter.keeps(ev) {
				err = out(LiveItem{Kind: LiveStatus, Event: &ev})
			}
		case <-retry.C:
			if sub == nil {
				if sub, _ = p.d.Live.SubscribeStatus(ctx, tenant); sub != nil {
					err = out(LiveItem{Kind: LiveResync})
				}
			}
		}
		if err != nil {
			return err
		}
	}
}
