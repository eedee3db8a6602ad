package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"plaita/control"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/testutil"
)

// The live streams' protocol over real HTTP against a real Redis, with the test in the
// worker's place (it saves states and publishes live events; roles/console_live_test.go and
// test/e2e's in-process scenarios follow a real worker): event ids, Last-Event-ID, heartbeats,
// the stream bound, the drain, access and tenant isolation, and the polling fallback.

const eventWait = 10 * time.Second

// stream opens a live stream as the client.
func (c *client) stream(t *testing.T, path string, extra ...string) (*testutil.SSEStream, resp) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.f.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	s, status, body := testutil.OpenSSE(t, req)
	r := resp{status: status, raw: body}
	_ = json.Unmarshal(body, &r.body)
	return s, r
}

// liveState is a state with the timeline entries 1…last.
func liveState(tenant, id string, last int, status state.Status) *state.Execution {
	now := time.Now().UTC()
	st := &state.Execution{ExecutionID: id, TenantID: tenant, FlowID: "ask", FlowVersion: "1", Status: status, CurrentNode: "ask",
		StartTime: now, LastUpdate: now}
	for seq := 1; seq <= last; seq++ {
		ev := "step"
		if seq == last && status.Terminal() {
			ev = string(status)
		}
		st.Timeline = append(st.Timeline, state.TimelineEntry{Seq: seq, Time: state.Stamp(now), Node: "ask", Event: ev})
	}
	return st
}

func (f *fixture) publishLive(t *testing.T, tenant, id string, seq int, ev string, status state.Status) {
	t.Helper()
	b, _ := json.Marshal(store.LiveEvent{ExecutionID: id, TenantID: tenant, FlowID: "ask", Status: status, Seq: seq, Event: ev})
	if err := store.NewLiveEvents(f.c, f.root).Publish(context.Background(), tenant, id, b); err != nil {
		t.Fatal(err)
	}
}

// wantTimeline wants the next events to be the timeline entries of seqs, each with its seq as id.
func wantTimeline(t *testing.T, s *testutil.SSEStream, seqs ...int) {
	t.Helper()
	for _, seq := range seqs {
		ev := s.Next(t, eventWait)
		var le store.LiveEvent
		if ev.Event == "timeline" {
			ev.Decode(t, &le)
		}
		if ev.Event != "timeline" || ev.ID != strconv.Itoa(seq) || le.Seq != seq {
			t.Fatalf("want timeline %d, got %+v", seq, ev)
		}
	}
}

func wantEnd(t *testing.T, s *testutil.SSEStream, reason string) control.FollowEnd {
	t.Helper()
	ev := s.Next(t, eventWait)
	var end control.FollowEnd
	if ev.Event == "end" {
		ev.Decode(t, &end)
	}
	if ev.Event != "end" || end.Reason != reason || ev.ID != "" {
		t.Fatalf("want the end (%s), got %+v", reason, ev)
	}
	s.Ended(t, eventWait)
	return end
}

func TestExecutionEventsStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withSettings(func(s *Settings) { s.Live = LiveSettings{Heartbeat: 100 * time.Millisecond, Poll: time.Minute} }))
	f.save(t, liveState("default", "ex_s1", 2, state.Suspended))
	viewer := f.key(f.apiKey(t, "default", sqlite.RoleViewer))
	s, r := viewer.stream(t, "/api/executions/ex_s1/events")
	if s == nil {
		t.Fatalf("open: %d %s", r.status, r.raw)
	}
	if ct := s.Response.Header.Get("Cache-Control"); ct != "no-cache" {
		t.Fatalf("Cache-Control %q", ct)
	}
	ev := s.Next(t, eventWait)
	var snap control.ExecutionSnapshot
	ev.Decode(t, &snap)
	if ev.Event != "snapshot" || ev.ID != "" || snap.Status != state.Suspended || snap.LastSeq != 2 || snap.CurrentNode != "ask" {
		t.Fatalf("first event %+v", ev)
	}
	wantTimeline(t, s, 1, 2)
	// Idle: heartbeat comments.
	for heartbeat := false; !heartbeat; {
		select {
		case ev := <-s.Events:
			heartbeat = ev.Comment == "heartbeat"
			if !heartbeat {
				t.Fatalf("an event while idle: %+v", ev)
			}
		case <-time.After(eventWait):
			t.Fatal("no heartbeat")
		}
	}
	f.publishLive(t, "default", "ex_s1", 3, "resumed", state.Running)
	wantTimeline(t, s, 3)
	f.save(t, liveState("default", "ex_s1", 4, state.Completed))
	f.publishLive(t, "default", "ex_s1", 4, "completed", state.Completed)
	wantTimeline(t, s, 4)
	if end := wantEnd(t, s, "terminal"); end.Status != state.Completed || end.LastSeq != 4 {
		t.Fatalf("end %+v", end)
	}

	// A reconnect resumes after its Last-Event-ID: no entry twice, none missed.
	s, _ = viewer.stream(t, "/api/executions/ex_s1/events", "Last-Event-ID", "2")
	s.Next(t, eventWait) // the snapshot
	wantTimeline(t, s, 3, 4)
	wantEnd(t, s, "terminal")
	s, _ = viewer.stream(t, "/api/executions/ex_s1/events?after=3")
	s.Next(t, eventWait)
	wantTimeline(t, s, 4)
	wantEnd(t, s, "terminal")

	if _, r := viewer.stream(t, "/api/executions/ex_s1/events", "Last-Event-ID", "x"); r.status != http.StatusBadRequest || r.body["code"] != "invalid_last_event_id" {
		t.Fatalf("a bad Last-Event-ID: %d %s", r.status, r.raw)
	}
	if _, r := viewer.stream(t, "/api/executions/ex_nope/events"); r.status != http.StatusNotFound || r.body["code"] != "execution_not_found" {
		t.Fatalf("no such execution: %d %s", r.status, r.raw)
	}
	// Another tenant's execution is not found; no credential is 401.
	f.tenant(t, "acme")
	other := f.key(f.apiKey(t, "acme", sqlite.RoleViewer))
	if _, r := other.stream(t, "/api/executions/ex_s1/events"); r.status != http.StatusNotFound {
		t.Fatalf("another tenant's execution: %d %s", r.status, r.raw)
	}
	if _, r := f.client(nil).stream(t, "/api/executions/ex_s1/events"); r.status != http.StatusUnauthorized {
		t.Fatalf("no credential: %d %s", r.status, r.raw)
	}
}

// The bound: one stream beyond it is a 503 with Retry-After, and a slot comes back when its
// stream ends. The drain ends every stream with an end event and refuses new ones.
func TestStreamLimitAndDrain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withSettings(func(s *Settings) { s.Live = LiveSettings{MaxStreams: 2, Heartbeat: time.Minute} }))
	f.save(t, liveState("default", "ex_s2", 1, state.Suspended))
	admin := f.admin("")
	a, _ := admin.stream(t, "/api/executions/ex_s2/events")
	a.Next(t, eventWait)
	wantTimeline(t, a, 1)
	list, r := admin.stream(t, "/api/executions/stream")
	if list == nil {
		t.Fatalf("list stream: %d %s", r.status, r.raw)
	}
	if ev := list.Next(t, eventWait); ev.Event != "ready" {
		t.Fatalf("list stream's first event %+v", ev)
	}
	_, r = admin.stream(t, "/api/executions/ex_s2/events")
	if r.status != http.StatusServiceUnavailable || r.body["code"] != "too_many_streams" || r.body["retry_after"] == nil {
		t.Fatalf("a stream beyond the bound: %d %s", r.status, r.raw)
	}
	a.Close()
	var b *testutil.SSEStream
	for deadline := time.Now().Add(eventWait); b == nil; time.Sleep(20 * time.Millisecond) {
		if b, r = admin.stream(t, "/api/executions/ex_s2/events"); b == nil && (r.status != http.StatusServiceUnavailable || time.Now().After(deadline)) {
			t.Fatalf("the slot of a closed stream did not come back: %d %s", r.status, r.raw)
		}
	}
	b.Next(t, eventWait)
	wantTimeline(t, b, 1)

	f.srv.Drain()
	wantEnd(t, b, "draining")
	wantEnd(t, list, "draining")
	if _, r := admin.stream(t, "/api/executions/ex_s2/events"); r.status != http.StatusServiceUnavailable || r.body["code"] != "draining" {
		t.Fatalf("a stream while draining: %d %s", r.status, r.raw)
	}
}

func TestExecutionStatusStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.tenant(t, "acme")
	acme := f.key(f.apiKey(t, "acme", sqlite.RoleViewer))
	s, r := acme.stream(t, "/api/executions/stream?flow_id=ask")
	if s == nil {
		t.Fatalf("open: %d %s", r.status, r.raw)
	}
	var note StreamNote
	if ev := s.Next(t, eventWait); ev.Event != "ready" {
		t.Fatalf("first %+v", ev)
	} else if ev.Decode(t, &note); note.TenantID != "acme" {
		t.Fatalf("ready %+v", note)
	}
	live := store.NewLiveEvents(f.c, f.root)
	for _, c := range []struct{ tenant, flow string }{{"default", "ask"}, {"acme", "other"}, {"acme", "ask"}} {
		b, _ := json.Marshal(store.LiveEvent{ExecutionID: "ex_" + c.tenant + "_" + c.flow, TenantID: c.tenant, FlowID: c.flow, Status: state.Completed, Event: "completed"})
		if err := live.PublishStatus(context.Background(), c.tenant, "ex_x", b); err != nil {
			t.Fatal(err)
		}
	}
	ev := s.Next(t, eventWait)
	var le store.LiveEvent
	ev.Decode(t, &le)
	if ev.Event != "status" || le.ExecutionID != "ex_acme_ask" {
		t.Fatalf("want acme's change of flow ask only, got %+v", ev)
	}
	if _, r := acme.stream(t, "/api/executions/stream?status=nope"); r.status != http.StatusBadRequest {
		t.Fatalf("a bad status: %d %s", r.status, r.raw)
	}
}

func TestTimelineEndpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.save(t, liveState("default", "ex_s3", 5, state.Completed))
	admin := f.admin("")
	var page Timeline
	admin.want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_s3/timeline?limit=2", nil).decode(t, &page)
	if len(page.Items) != 2 || page.Items[0].Seq != 1 || page.NextCursor != "2" || page.LastSeq != 5 || page.Status != state.Completed {
		t.Fatalf("first page %+v", page)
	}
	page = Timeline{}
	admin.want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_s3/timeline?cursor="+"2", nil).decode(t, &page)
	if len(page.Items) != 3 || page.Items[0].Seq != 3 || page.NextCursor != "" {
		t.Fatalf("last page %+v", page)
	}
	// By seq, as a stream's Last-Event-ID: the same page.
	page = Timeline{}
	admin.want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_s3/timeline?after=2", nil).decode(t, &page)
	if len(page.Items) != 3 || page.Items[0].Seq != 3 {
		t.Fatalf("page after 2 %+v", page)
	}
	for _, q := range []string{"?limit=0", "?cursor=0", "?cursor=x", "?cursor=2&after=1"} {
		admin.want(t, http.StatusBadRequest, http.MethodGet, "/api/executions/ex_s3/timeline"+q, nil)
	}
	admin.want(t, http.StatusNotFound, http.MethodGet, "/api/executions/ex_nope/timeline", nil)
}
