package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"plaita/control"
	"plaita/engine/state"
)

// Live updates (docs/console.md, "Live updates"): Server-Sent Events of one execution
// (control.Follow: the snapshot, then its timeline entries in seq order, each with its seq as
// the event id, so a reconnect with Last-Event-ID resumes without a gap or a duplicate; the
// stream ends after the terminal status), of the tenant's executions list (control.
// FollowStatus: a best-effort feed of status changes; the list endpoint is the record), and
// the paged timeline, the polling fallback. Streams are bounded per console (each holds a
// Redis connection of its own) and end when the console drains.

// LiveSettings bound and pace the live streams.
type LiveSettings struct {
	// MaxStreams is how many streams one console serves at once (PLAITA_CONSOLE_MAX_STREAMS;
	// 0: DefaultMaxStreams); beyond it a stream is refused with 503 too_many_streams.
	MaxStreams int
	// MaxPerTenant is how many of them the callers of one tenant hold at once
	// (PLAITA_CONSOLE_MAX_STREAMS_PER_TENANT; 0: DefaultMaxStreamsPerTenant, never above
	// MaxStreams): one tenant's viewers cannot take the streams of every other tenant.
	MaxPerTenant int
	// Heartbeat is the interval of the heartbeat comments of an idle stream (0: 15 s), Poll how
	// long an execution stream waits for a live event before it re-reads the state (0: 3 s).
	Heartbeat time.Duration
	Poll      time.Duration
}

// DefaultMaxStreams is the default bound of a console's live streams, and
// DefaultMaxStreamsPerTenant of one tenant's.
const (
	DefaultMaxStreams          = 256
	DefaultMaxStreamsPerTenant = 64
)

// streamWriteTimeout bounds one write to a client: a client that reads nothing for that long
// loses its stream (and its slot).
const streamWriteTimeout = 10 * time.Second

// streamRetry is the reconnection delay the streams advise (the SSE retry field).
const streamRetry = 3 * time.Second

// streams is the console's live streams: a slot each, counted per tenant too, and a context
// that ends at drain.
type streams struct {
	max, perTenant int
	ctx            context.Context
	end            context.CancelFunc
	once           sync.Once

	mu       sync.Mutex
	open     int
	byTenant map[string]int
}

func newStreams(s LiveSettings) *streams {
	n := s.MaxStreams
	if n <= 0 {
		n = DefaultMaxStreams
	}
	per := s.MaxPerTenant
	if per <= 0 {
		per = DefaultMaxStreamsPerTenant
	}
	ctx, end := context.WithCancel(context.Background())
	return &streams{max: n, perTenant: min(per, n), ctx: ctx, end: end, byTenant: map[string]int{}}
}

// take takes a slot of the console's and of the tenant's: "" when it did, else which bound is
// reached ("console" or "tenant").
func (s *streams) take(tenant string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.byTenant[tenant] >= s.perTenant:
		return "tenant"
	case s.open >= s.max:
		return "console"
	}
	s.open++
	s.byTenant[tenant]++
	return ""
}

func (s *streams) release(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if s.byTenant[tenant]--; s.byTenant[tenant] <= 0 {
		delete(s.byTenant, tenant)
	}
}

// EndStreams ends every live stream (drain, stop); new ones are refused from then on.
func (a *API) EndStreams() {
	if a.streams != nil {
		a.streams.once.Do(a.streams.end)
	}
}

// open takes a stream's slot for a caller of tenant and returns its context, which ends with the
// request or at drain, and the release of the slot; a Problem when the console is draining, or
// full, or the tenant's callers hold their share of the streams.
func (a *API) open(ctx context.Context, tenant string) (context.Context, func(), *Problem) {
	if a.streams.ctx.Err() != nil {
		return nil, nil, NewProblem(http.StatusServiceUnavailable, "draining", "the console is shutting down; reconnect to another instance").WithRetryAfter(5 * time.Second)
	}
	switch a.streams.take(tenant) {
	case "tenant":
		return nil, nil, NewProblem(http.StatusServiceUnavailable, "too_many_streams",
			"this tenant's callers hold %d live streams of this console already (PLAITA_CONSOLE_MAX_STREAMS_PER_TENANT); close one, retry later, "+
				"or poll GET /api/executions/{id}/timeline", a.streams.perTenant).WithRetryAfter(streamRetry)
	case "console":
		return nil, nil, NewProblem(http.StatusServiceUnavailable, "too_many_streams",
			"this console serves %d live streams already (PLAITA_CONSOLE_MAX_STREAMS); retry later, or poll GET /api/executions/{id}/timeline", a.streams.max).
			WithRetryAfter(streamRetry)
	}
	sctx, cancel := context.WithCancel(ctx)
	stopAfter := context.AfterFunc(a.streams.ctx, cancel)
	return sctx, func() {
		stopAfter()
		cancel()
		a.streams.release(tenant)
	}, nil
}

// streamsEnded reports whether the live streams were ended (the console drains).
func (a *API) streamsEnded() bool { return a.streams.ctx.Err() != nil }

// sse writes one Server-Sent Events response. Nothing is written before the first event, so a
// refusal before it is still a Problem with its status.
type sse struct {
	a       *API
	hc      huma.Context
	rc      *http.ResponseController
	started bool
}

func newSSE(a *API, hc huma.Context) *sse {
	s := &sse{a: a, hc: hc}
	if rw, ok := hc.BodyWriter().(http.ResponseWriter); ok { // echo's Response: deadlines and flushes reach the connection
		s.rc = http.NewResponseController(rw)
	}
	return s
}

func (s *sse) start() error {
	if s.started {
		return nil
	}
	s.started = true
	if s.rc == nil {
		return fmt.Errorf("stream: the response cannot be flushed")
	}
	// The server's read timeout would end a long stream (net/http cancels the request once
	// the connection's read deadline passes): a stream has none, and a deadline per write.
	_ = s.rc.SetReadDeadline(time.Time{})
	s.hc.SetHeader("Content-Type", "text/event-stream")
	s.hc.SetHeader("Cache-Control", "no-cache")
	s.hc.SetHeader("X-Accel-Buffering", "no") // a proxy must not hold events back
	s.hc.SetStatus(http.StatusOK)
	return s.write(fmt.Appendf(nil, "retry: %d\n\n", streamRetry.Milliseconds()))
}

// event writes one event; id 0 writes none (the client's last event id stays).
func (s *sse) event(id int, name string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("event %s: %w", name, err)
	}
	var out []byte
	if id > 0 {
		out = strconv.AppendInt(append(out, "id: "...), int64(id), 10)
		out = append(out, '\n')
	}
	out = append(append(append(out, "event: "...), name...), '\n')
	out = append(append(append(out, "data: "...), b...), "\n\n"...)
	return s.write(out)
}

func (s *sse) write(b []byte) error {
	if err := s.start(); err != nil {
		return err
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := s.hc.BodyWriter().Write(b); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	if err := s.rc.Flush(); err != nil {
		return fmt.Errorf("flush event: %w", err)
	}
	return nil
}

// finish ends a stream whose follow returned err (ctx is the request's): a refusal before
// the first event is its Problem; the drain is an end event that says so; a client that went
// away hears nothing.
func (s *sse) finish(ctx context.Context, err error) {
	switch {
	case err == nil:
	case !s.started && !errors.Is(err, context.Canceled):
		p := problemFor(err)
		if p.Status >= http.StatusInternalServerError {
			s.a.d.Log.Error().Str("event", "console.stream_failed").Str("request_id", RequestID(ctx)).Err(err).Msg("live stream failed")
		}
		s.a.writeProblem(s.hc, p)
	case s.a.streamsEnded() && ctx.Err() == nil:
		_ = s.event(0, "end", control.FollowEnd{Reason: "draining"})
	}
}

// ---- GET /api/executions/{id}/events ----

type executionEventsIn struct {
	ID          string `path:"id" minLength:"1" maxLength:"200"`
	LastEventID string `header:"Last-Event-ID" maxLength:"20" doc:"the id of the last event received (a timeline seq): the stream resumes after it"`
	After       int    `query:"after" minimum:"0" doc:"resume after this timeline seq on a first connection (Last-Event-ID wins)"`
}

func (a *API) executionEvents(ctx context.Context, c *Call, in *executionEventsIn) (*huma.StreamResponse, error) {
	after := in.After
	if in.LastEventID != "" {
		n, err := strconv.Atoi(in.LastEventID)
		if err != nil || n < 0 {
			return nil, NewProblem(http.StatusBadRequest, "invalid_last_event_id", "Last-Event-ID %q: use the id of an event of this stream (a timeline seq)", in.LastEventID)
		}
		after = n
	}
	req := control.FollowRequest{Tenant: c.Tenant, ID: in.ID, After: after, Poll: a.s.Live.Poll, Heartbeat: a.s.Live.Heartbeat}
	return &huma.StreamResponse{Body: func(hc huma.Context) {
		sctx, release, p := a.open(ctx, c.Tenant)
		if p != nil {
			a.writeProblem(hc, p)
			return
		}
		defer release()
		out := newSSE(a, hc)
		err := a.d.Plane.Follow(sctx, req, func(it control.LiveItem) error { return writeFollowItem(out, it) })
		out.finish(ctx, err)
	}}, nil
}

func writeFollowItem(out *sse, it control.LiveItem) error {
	switch it.Kind {
	case control.LiveSnapshot:
		return out.event(0, "snapshot", it.Snapshot)
	case control.LiveEntry:
		e := liveEventOf(it)
		return out.event(e.Seq, "timeline", e)
	case control.LiveNode:
		return out.event(0, "node", liveEventOf(it))
	case control.LiveTruncated:
		return out.event(it.Truncated.To, "truncated", it.Truncated)
	case control.LiveEnd:
		return out.event(0, "end", it.End)
	case control.LiveHeartbeat:
		return out.write([]byte(": heartbeat\n\n"))
	}
	return nil
}

// ---- GET /api/executions/stream ----

type executionStreamIn struct {
	Status string `query:"status" enum:"pending,running,suspended,completed,error,cancelled" doc:"only changes to this status"`
	FlowID string `query:"flow_id" maxLength:"200" doc:"only changes of this flow's executions"`
}

// StreamNote is the data of a list stream's ready and resync events.
type StreamNote struct {
	TenantID string `json:"tenant_id"`
	Note     string `json:"note"`
}

func (a *API) executionStream(ctx context.Context, c *Call, in *executionStreamIn) (*huma.StreamResponse, error) {
	filter := control.StatusFilter{FlowID: in.FlowID, Status: state.Status(in.Status)}
	tenant := c.Tenant
	return &huma.StreamResponse{Body: func(hc huma.Context) {
		sctx, release, p := a.open(ctx, c.Tenant)
		if p != nil {
			a.writeProblem(hc, p)
			return
		}
		defer release()
		out := newSSE(a, hc)
		err := a.d.Plane.FollowStatus(sctx, tenant, filter, a.s.Live.Poll, a.s.Live.Heartbeat, func(it control.LiveItem) error {
			switch it.Kind {
			case control.LiveReady:
				return out.event(0, "ready", StreamNote{TenantID: tenant, Note: "subscribed: read the list now; changes from here on follow"})
			case control.LiveResync:
				return out.event(0, "resync", StreamNote{TenantID: tenant, Note: "changes may have been missed: read the list again"})
			case control.LiveStatus:
				return out.event(0, "status", liveEventOf(it))
			case control.LiveHeartbeat:
				return out.write([]byte(": heartbeat\n\n"))
			}
			return nil
		})
		if err == nil && a.streamsEnded() && ctx.Err() == nil {
			_ = out.event(0, "end", control.FollowEnd{Reason: "draining"})
			return
		}
		out.finish(ctx, err)
	}}, nil
}

// ---- GET /api/executions/{id}/timeline ----

type timelineIn struct {
	ID     string `path:"id" minLength:"1" maxLength:"200"`
	Cursor string `query:"cursor" maxLength:"20" doc:"the next_cursor of the page before"`
	After  int    `query:"after" minimum:"0" doc:"or: the entries after this seq (0: from the oldest kept), as an events stream's Last-Event-ID"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"` // control.MaxTimelineLimit, control.DefaultTimelineLimit
}

// Timeline is a page of an execution's timeline, oldest first, in the one page shape (items,
// next_cursor). Its entries are numbered without gaps (seq, the events stream's ids), so a
// page may also be asked for by seq (after), and next_cursor is the seq it ends at.
type Timeline struct {
	ExecutionID string                `json:"execution_id"`
	TenantID    string                `json:"tenant_id"`
	Status      state.Status          `json:"status" doc:"the execution's status, or queued when its start waits for a worker"`
	CurrentNode string                `json:"current_node,omitempty"`
	Items       []state.TimelineEntry `json:"items"`
	Dropped     int                   `json:"dropped" doc:"entries 1…dropped were recorded and are no longer kept (the timeline keeps the newest PLAITA_EXECUTION_TIMELINE_MAX)"`
	LastSeq     int                   `json:"last_seq" doc:"the newest entry's seq"`
	NextCursor  string                `json:"next_cursor,omitempty" doc:"pass as cursor for the next page (absent on the page with the newest entry)"`
}

type timelineOut struct{ Body Timeline }

func (a *API) timeline(ctx context.Context, c *Call, in *timelineIn) (*timelineOut, error) {
	after := in.After
	if in.Cursor != "" {
		n, err := strconv.Atoi(in.Cursor)
		switch {
		case in.After != 0:
			return nil, NewProblem(http.StatusBadRequest, "invalid_request", "give cursor or after, not both")
		case err != nil || n < 1:
			return nil, NewProblem(http.StatusBadRequest, "invalid_cursor", "cursor %q: pass the next_cursor of the page before", in.Cursor)
		}
		after = n
	}
	p, err := a.d.Plane.Timeline(ctx, c.Tenant, in.ID, after, in.Limit)
	if err != nil {
		return nil, err
	}
	out := Timeline{ExecutionID: p.ExecutionID, TenantID: p.TenantID, Status: p.Status, CurrentNode: p.CurrentNode,
		Items: p.Entries, Dropped: p.Dropped, LastSeq: p.LastSeq}
	if p.Next > 0 {
		out.NextCursor = strconv.Itoa(p.Next)
	}
	return &timelineOut{Body: out}, nil
}

// ---- routes ----

// registerLiveRoutes adds the live routes (routes.go calls it).
func registerLiveRoutes(a *API) {
	a.streams = newStreams(a.s.Live)
	executions := []string{"executions"}
	registerOp(a, Route{ID: "execution-events", Method: http.MethodGet, Path: "/api/executions/{id}/events",
		Summary: "Follow an execution: Server-Sent Events of its snapshot, timeline entries (id: the seq) and end",
		Tags:    executions, Access: TenantViewer, Redis: true},
		streamResponse(a, "The snapshot first (no id), then each timeline entry once in seq order (id: its seq; reconnect with Last-Event-ID), "+
			"node starts (no id), truncated for entries the timeline no longer keeps (id: the last seq it covers), heartbeat comments, "+
			"and end (terminal, deleted, corrupt, draining) last.",
			map[string]any{"snapshot": control.ExecutionSnapshot{}, "timeline": LiveEvent{}, "node": LiveEvent{},
				"truncated": control.TimelineGap{}, "end": control.FollowEnd{}}),
		a.executionEvents)
	registerOp(a, Route{ID: "execution-stream", Method: http.MethodGet, Path: "/api/executions/stream",
		Summary: "A best-effort feed of the tenant's execution status changes (Server-Sent Events); the list is the record",
		Tags:    executions, Access: TenantViewer, Redis: true},
		streamResponse(a, "ready once subscribed (read the list then), status for each change a worker publishes (started, suspended, resumed, "+
			"completed, error, cancelled), resync when changes may have been missed (read the list again), heartbeat comments, end (draining).",
			map[string]any{"ready": StreamNote{}, "status": LiveEvent{}, "resync": StreamNote{}, "end": control.FollowEnd{}}),
		a.executionStream)
	register(a, Route{ID: "execution-timeline", Method: http.MethodGet, Path: "/api/executions/{id}/timeline",
		Summary: "A page of an execution's timeline, oldest first (the polling fallback of the events stream)",
		Tags:    executions, Access: TenantViewer, Redis: true}, a.timeline)
}

// streamResponse documents a text/event-stream response: one schema per event name, as huma's
// sse package does (an array of oneOf event objects), and the 503 of a full or draining console.
func streamResponse(a *API, about string, events map[string]any) func(*huma.Operation) {
	return func(op *huma.Operation) {
		registry := a.huma.OpenAPI().Components.Schemas
		names := make([]string, 0, len(events))
		for name := range events {
			names = append(names, name)
		}
		slices.Sort(names)
		var one []*huma.Schema
		for _, name := range names {
			one = append(one, &huma.Schema{Title: "Event " + name, Type: huma.TypeObject, Required: []string{"event", "data"},
				Properties: map[string]*huma.Schema{
					"id":    {Type: huma.TypeInteger, Description: "The event id: a timeline seq (absent when the event has none)."},
					"event": {Type: huma.TypeString, Extensions: map[string]any{"const": name}},
					"data":  registry.Schema(reflect.TypeOf(events[name]), true, name),
				}})
		}
		op.Description += " " + about
		op.Responses["200"] = &huma.Response{Description: "A stream of Server-Sent Events", Content: map[string]*huma.MediaType{
			"text/event-stream": {Schema: &huma.Schema{Title: "Server-Sent Events", Type: huma.TypeArray,
				Items: &huma.Schema{Extensions: map[string]any{"oneOf": one}}}}}}
	}
}
