package api_test

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
	"plaita/test/webtest"
	"plaita/web/api"
)

// The live streams' protocol over real HTTP against a real Redis, with the test in the
// worker's place (it saves states and publishes live events; roles/console_live_test.go and
// test/e2e's in-process scenarios follow a real worker): event ids, Last-Event-ID, heartbeats,
// the stream bound, the drain, access and tenant isolation, and the polling fallback.

const eventWait = 10 * time.Second

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
	f := webtest.New(t, webtest.WithSettings(func(s *api.Settings) { s.Live = api.LiveSettings{Heartbeat: 100 * time.Millisecond, Poll: time.Minute} }))
	f.Save(t, webtest.LiveState("default", "ex_s1", 2, state.Suspended))
	viewer := f.Key(f.APIKey(t, "default", sqlite.RoleViewer))
	s, r := viewer.Stream(t, "/api/executions/ex_s1/events")
	if s == nil {
		t.Fatalf("open: %d %s", r.Status, r.Raw)
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
	f.PublishLive(t, "default", "ex_s1", 3, "resumed", state.Running)
	wantTimeline(t, s, 3)
	f.Save(t, webtest.LiveState("default", "ex_s1", 4, state.Completed))
	f.PublishLive(t, "default", "ex_s1", 4, "completed", state.Completed)
	wantTimeline(t, s, 4)
	if end := wantEnd(t, s, "terminal"); end.Status != state.Completed || end.LastSeq != 4 {
		t.Fatalf("end %+v", end)
	}

	// A reconnect resumes after its Last-Event-ID: no entry twice, none missed.
	s, _ = viewer.Stream(t, "/api/executions/ex_s1/events", "Last-Event-ID", "2")
	s.Next(t, eventWait) // the snapshot
	wantTimeline(t, s, 3, 4)
	wantEnd(t, s, "terminal")
	s, _ = viewer.Stream(t, "/api/executions/ex_s1/events?after=3")
	s.Next(t, eventWait)
	wantTimeline(t, s, 4)
	wantEnd(t, s, "terminal")

	if _, r := viewer.Stream(t, "/api/executions/ex_s1/events", "Last-Event-ID", "x"); r.Status != http.StatusBadRequest || r.Body["code"] != "invalid_last_event_id" {
		t.Fatalf("a bad Last-Event-ID: %d %s", r.Status, r.Raw)
	}
	if _, r := viewer.Stream(t, "/api/executions/ex_nope/events"); r.Status != http.StatusNotFound || r.Body["code"] != "execution_not_found" {
		t.Fatalf("no such execution: %d %s", r.Status, r.Raw)
	}
	// Another tenant's execution is not found; no credential is 401.
	f.Tenant(t, "acme")
	other := f.Key(f.APIKey(t, "acme", sqlite.RoleViewer))
	if _, r := other.Stream(t, "/api/executions/ex_s1/events"); r.Status != http.StatusNotFound {
		t.Fatalf("another tenant's execution: %d %s", r.Status, r.Raw)
	}
	if _, r := f.Client(nil).Stream(t, "/api/executions/ex_s1/events"); r.Status != http.StatusUnauthorized {
		t.Fatalf("no credential: %d %s", r.Status, r.Raw)
	}
}

// The bound: one stream beyond it is a 503 with Retry-After, and a slot comes back when its
// stream ends. The drain ends every stream with an end event and refuses new ones.
func TestStreamLimitAndDrain(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithSettings(func(s *api.Settings) { s.Live = api.LiveSettings{MaxStreams: 2, Heartbeat: time.Minute} }))
	f.Save(t, webtest.LiveState("default", "ex_s2", 1, state.Suspended))
	admin := f.Admin("")
	a, _ := admin.Stream(t, "/api/executions/ex_s2/events")
	a.Next(t, eventWait)
	wantTimeline(t, a, 1)
	list, r := admin.Stream(t, "/api/executions/stream")
	if list == nil {
		t.Fatalf("list stream: %d %s", r.Status, r.Raw)
	}
	if ev := list.Next(t, eventWait); ev.Event != "ready" {
		t.Fatalf("list stream's first event %+v", ev)
	}
	_, r = admin.Stream(t, "/api/executions/ex_s2/events")
	if r.Status != http.StatusServiceUnavailable || r.Body["code"] != "too_many_streams" || r.Body["retry_after"] == nil {
		t.Fatalf("a stream beyond the bound: %d %s", r.Status, r.Raw)
	}
	a.Close()
	var b *testutil.SSEStream
	for deadline := time.Now().Add(eventWait); b == nil; time.Sleep(20 * time.Millisecond) {
		if b, r = admin.Stream(t, "/api/executions/ex_s2/events"); b == nil && (r.Status != http.StatusServiceUnavailable || time.Now().After(deadline)) {
			t.Fatalf("the slot of a closed stream did not come back: %d %s", r.Status, r.Raw)
		}
	}
	b.Next(t, eventWait)
	wantTimeline(t, b, 1)

	f.Srv.Drain()
	wantEnd(t, b, "draining")
	wantEnd(t, list, "draining")
	if _, r := admin.Stream(t, "/api/executions/ex_s2/events"); r.Status != http.StatusServiceUnavailable || r.Body["code"] != "draining" {
		t.Fatalf("a stream while draining: %d %s", r.Status, r.Raw)
	}
}

func TestExecutionStatusStream(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	acme := f.Key(f.APIKey(t, "acme", sqlite.RoleViewer))
	s, r := acme.Stream(t, "/api/executions/stream?flow_id=ask")
	if s == nil {
		t.Fatalf("open: %d %s", r.Status, r.Raw)
	}
	var note api.StreamNote
	if ev := s.Next(t, eventWait); ev.Event != "ready" {
		t.Fatalf("first %+v", ev)
	} else if ev.Decode(t, &note); note.TenantID != "acme" {
		t.Fatalf("ready %+v", note)
	}
	live := store.NewLiveEvents(store.OnRedis(f.C), f.Root)
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
	if _, r := acme.Stream(t, "/api/executions/stream?status=nope"); r.Status != http.StatusBadRequest {
		t.Fatalf("a bad status: %d %s", r.Status, r.Raw)
	}
}

func TestTimelineEndpoint(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Save(t, webtest.LiveState("default", "ex_s3", 5, state.Completed))
	admin := f.Admin("")
	var page api.Timeline
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_s3/timeline?limit=2", nil).Decode(t, &page)
	if len(page.Items) != 2 || page.Items[0].Seq != 1 || page.NextCursor != "2" || page.LastSeq != 5 || page.Status != state.Completed {
		t.Fatalf("first page %+v", page)
	}
	page = api.Timeline{}
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_s3/timeline?cursor="+"2", nil).Decode(t, &page)
	if len(page.Items) != 3 || page.Items[0].Seq != 3 || page.NextCursor != "" {
		t.Fatalf("last page %+v", page)
	}
	// By seq, as a stream's Last-Event-ID: the same page.
	page = api.Timeline{}
	admin.Want(t, http.StatusOK, http.MethodGet, "/api/executions/ex_s3/timeline?after=2", nil).Decode(t, &page)
	if len(page.Items) != 3 || page.Items[0].Seq != 3 {
		t.Fatalf("page after 2 %+v", page)
	}
	for _, q := range []string{"?limit=0", "?cursor=0", "?cursor=x", "?cursor=2&after=1"} {
		admin.Want(t, http.StatusBadRequest, http.MethodGet, "/api/executions/ex_s3/timeline"+q, nil)
	}
	admin.Want(t, http.StatusNotFound, http.MethodGet, "/api/executions/ex_nope/timeline", nil)
}
