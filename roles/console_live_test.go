package roles

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/control"
	"plaita/engine/state"
	"plaita/internal/service"
	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/redistest"
	"plaita/test/testutil"
	"plaita/web"
	"plaita/web/api"
)

// The console's live streams against a real worker: an in-process worker (NewInProcessWorker)
// and the console's API (built as runConsole builds it) on a private redis-server — the
// console's keys are the default root's. What a client reading the stream over HTTP must see:
// the snapshot, every timeline entry once and in order with its seq as the event id, a resume
// after Last-Event-ID without a gap or a duplicate, the terminal status however late it
// subscribed, heartbeats, the stream bound and the end at drain.

const liveKey = "live-admin-key"

// liveStack is a private Redis, a worker and a console API over it.
type liveStack struct {
	t    *testing.T
	c    rueidis.Client
	api  *web.Server
	base string
}

func newLiveStack(t *testing.T, live api.LiveSettings) *liveStack {
	t.Helper()
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	ctx := context.Background()
	env := map[string]string{"PLAITA_REDIS_URL": srv.URL(), "PLAITA_CONSOLE_REDIS_URL": srv.URL(), "PLAITA_NODES_WORKSPACE_ROOT": t.TempDir(),
		"PLAITA_WORKER_CONCURRENCY": "2", "PLAITA_WORKER_DRAIN_TIMEOUT": "5"}
	wcfg, err := config.Load(config.RoleWorker, true, config.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewInProcessWorker(wcfg, c, metrics.NewSet(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	var workers service.Group
	if err := workers.Start(ctx, w.Services...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { workers.Stop(context.Background()) })
	ccfg, err := config.Load(config.RoleConsole, true, config.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(ctx, "sqlite:///"+filepath.Join(t.TempDir(), "console.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	plane, rs, err := consoleRedis(ccfg, c, db, metrics.NewSet(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	jobs := control.NewBulk(plane, db, control.BulkSettings{Runner: "console-live"})
	console := web.New(api.Deps{Accounts: control.NewAccounts(db, rs, plane, control.AccountsSettings{Log: zerolog.Nop()}),
		Catalog: control.NewCatalog(db, plane), Plane: plane, Jobs: jobs, Log: zerolog.Nop()}, api.Settings{AdminAPIKey: liveKey, Live: live})
	var consoles service.Group
	if err := consoles.Start(ctx, service.Named{Name: "jobs", Service: jobs}, service.Named{Name: "http", Service: console.Service("127.0.0.1:0")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		consoles.Stop(sctx)
	})
	return &liveStack{t: t, c: c, api: console, base: "http://" + console.Addr()}
}

// call sends one request with the admin key; the answer's body decodes into out when given.
func (s *liveStack) call(method, path string, body any, out any) int {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-API-Key", liveKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
		}
	}
	return res.StatusCode
}

// start publishes def and starts it over the API.
func (s *liveStack) start(def string) string {
	s.t.Helper()
	if code := s.call(http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)}, nil); code != http.StatusCreated && code != http.StatusOK {
		s.t.Fatalf("publish: %d", code)
	}
	var flow struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(def), &flow)
	var started control.Started
	if code := s.call(http.MethodPost, "/api/executions", map[string]any{"flow_id": flow.ID}, &started); code != http.StatusCreated {
		s.t.Fatalf("start: %d %+v", code, started)
	}
	return started.ExecutionID
}

func (s *liveStack) stream(path string, header ...string) (*testutil.SSEStream, int, []byte) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(s.t.Context(), http.MethodGet, s.base+path, nil)
	req.Header.Set("X-Admin-API-Key", liveKey)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return testutil.OpenSSE(s.t, req)
}

// waitStatus polls the execution until it has status.
func (s *liveStack) waitStatus(id string, want state.Status) {
	s.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var v api.ExecutionView
		if s.call(http.MethodGet, "/api/executions/"+id, nil, &v) == http.StatusOK && v.Execution != nil && v.Execution.Status == want {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s never became %s", id, want)
		}
	}
}

// reader follows one execution stream and checks its order: each timeline entry's id is its
// seq, one more than the entry before.
type reader struct {
	t      *testing.T
	s      *testutil.SSEStream
	last   int // the id of the last timeline entry read
	events []string
	beats  int
}

func newReader(t *testing.T, s *testutil.SSEStream, after int) *reader {
	return &reader{t: t, s: s, last: after}
}

// snapshot reads the first event, which must be the snapshot.
func (r *reader) snapshot() control.ExecutionSnapshot {
	r.t.Helper()
	ev := r.s.Next(r.t, 30*time.Second)
	var snap control.ExecutionSnapshot
	if ev.Event != "snapshot" || ev.ID != "" {
		r.t.Fatalf("first event %+v, want the snapshot", ev)
	}
	ev.Decode(r.t, &snap)
	return snap
}

// until reads events until a timeline entry of event (or the end, which it returns).
func (r *reader) until(event string) *control.FollowEnd {
	r.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		var ev testutil.SSEEvent
		select {
		case e, ok := <-r.s.Events:
			if !ok {
				r.t.Fatalf("the stream ended before %s (%v); read %v", event, r.s.Err(), r.events)
			}
			ev = e
		case <-deadline:
			r.t.Fatalf("no %s within 30 s; read %v", event, r.events)
		}
		switch ev.Event {
		case "":
			r.beats++
		case "timeline":
			var le store.LiveEvent
			ev.Decode(r.t, &le)
			if ev.ID != strconv.Itoa(le.Seq) || le.Seq != r.last+1 {
				r.t.Fatalf("entry id %s seq %d after %d: a gap or a duplicate; read %v", ev.ID, le.Seq, r.last, r.events)
			}
			r.last = le.Seq
			r.events = append(r.events, le.Event)
			if le.Event == event {
				return nil
			}
		case "end":
			var end control.FollowEnd
			ev.Decode(r.t, &end)
			if event != "end" {
				r.t.Fatalf("the end (%+v) before %s; read %v", end, event, r.events)
			}
			return &end
		case "node":
		default:
			r.t.Fatalf("unexpected event %+v", ev)
		}
	}
}

const walkFlow = `{"id":"walk","version":"1","start":"a","nodes":[
	{"id":"a","type":"log","params":{"message":"one"},"next":"b"},
	{"id":"b","type":"log","params":{"message":"two"},"next":"ask"},
	{"id":"ask","type":"approval","params":{"message":"ok?"},"next":"c"},
	{"id":"c","type":"log","params":{"message":"three"},"next":"done"},
	{"id":"done","type":"end"}]}`

func TestConsoleStreamFollowsAWorker(t *testing.T) {
	s := newLiveStack(t, api.LiveSettings{Heartbeat: 200 * time.Millisecond, Poll: time.Second})
	id := s.start(walkFlow)
	st, code, body := s.stream("/api/executions/" + id + "/events")
	if st == nil {
		t.Fatalf("open: %d %s", code, body)
	}
	r := newReader(t, st, 0)
	if snap := r.snapshot(); snap.ExecutionID != id {
		t.Fatalf("snapshot %+v", snap)
	}
	r.until("suspended")
	for r.beats == 0 { // idle at the approval: heartbeats
		select {
		case ev := <-st.Events:
			if ev.Comment != "heartbeat" {
				t.Fatalf("while suspended: %+v", ev)
			}
			r.beats++
		case <-time.After(10 * time.Second):
			t.Fatal("no heartbeat")
		}
	}
	if code := s.call(http.MethodPost, "/api/executions/"+id+"/resume", map[string]any{"type": "approval", "data": map[string]any{"approved": true}}, nil); code != http.StatusOK {
		t.Fatalf("approve: %d", code)
	}
	r.until("completed")
	end := r.until("end")
	if end.Reason != "terminal" || end.Status != state.Completed || end.LastSeq != r.last {
		t.Fatalf("end %+v after %d", end, r.last)
	}
	st.Ended(t, 10*time.Second)
	if r.events[0] != "started" {
		t.Fatalf("entries %v", r.events)
	}

	// A reconnect after entry 3: 4 … the last, each once, then the end.
	st2, _, _ := s.stream("/api/executions/"+id+"/events", "Last-Event-ID", "3")
	r2 := newReader(t, st2, 3)
	if snap := r2.snapshot(); snap.Status != state.Completed || snap.LastSeq != r.last || snap.After != 3 {
		t.Fatalf("snapshot on reconnect %+v", snap)
	}
	r2.until("completed")
	if r2.last != r.last || len(r2.events) != len(r.events)-3 {
		t.Fatalf("resumed %v, first read %v", r2.events, r.events)
	}
	if end := r2.until("end"); end.Reason != "terminal" {
		t.Fatalf("end %+v", end)
	}
}

// The terminal status arrives however late the stream subscribed: after the execution ended,
// and when it ends right after the subscription, before the worker has seen the subscriber
// (it re-reads them every second; the stream's poll finds what it did not publish).
func TestConsoleStreamGetsTheTerminalStatusLate(t *testing.T) {
	s := newLiveStack(t, api.LiveSettings{Poll: 300 * time.Millisecond})
	done := s.start(`{"id":"quick","version":"1","start":"a","nodes":[{"id":"a","type":"log","params":{"message":"hi"},"next":"done"},{"id":"done","type":"end"}]}`)
	s.waitStatus(done, state.Completed)
	st, _, _ := s.stream("/api/executions/" + done + "/events")
	r := newReader(t, st, 0)
	if snap := r.snapshot(); snap.Status != state.Completed {
		t.Fatalf("snapshot %+v", snap)
	}
	r.until("completed")
	if end := r.until("end"); end.Status != state.Completed {
		t.Fatalf("end %+v", end)
	}

	id := s.start(walkFlow)
	s.waitStatus(id, state.Suspended)
	st, _, _ = s.stream("/api/executions/" + id + "/events")
	r = newReader(t, st, 0)
	r.snapshot()
	r.until("suspended")
	if code := s.call(http.MethodPost, "/api/executions/"+id+"/resume", map[string]any{"type": "approval", "data": map[string]any{"approved": true}}, nil); code != http.StatusOK {
		t.Fatalf("approve: %d", code)
	}
	r.until("completed")
	if end := r.until("end"); end.Status != state.Completed {
		t.Fatalf("end %+v", end)
	}
}

// statusChanges reads the list stream until the completed change of id, or timeout; it returns
// the changes of id heard.
func statusChanges(t *testing.T, list *testutil.SSEStream, id string, timeout time.Duration) []string {
	t.Helper()
	var got []string
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-list.Events:
			if !ok {
				t.Fatalf("the list stream ended: %v", list.Err())
			}
			if ev.Event != "status" {
				continue
			}
			var le store.LiveEvent
			ev.Decode(t, &le)
			if le.ExecutionID == id {
				got = append(got, le.Event)
			}
			if le.ExecutionID == id && le.Event == "completed" {
				return got
			}
		case <-deadline:
			return got
		}
	}
}

// The stream bound (503 beyond it) and the drain, which ends every stream with an end event;
// the list stream relays the worker's status changes.
func TestConsoleStreamLimitDrainAndList(t *testing.T) {
	s := newLiveStack(t, api.LiveSettings{MaxStreams: 3, Heartbeat: time.Minute})
	id := s.start(walkFlow)
	s.waitStatus(id, state.Suspended)
	list, code, body := s.stream("/api/executions/stream")
	if list == nil {
		t.Fatalf("list stream: %d %s", code, body)
	}
	if ev := list.Next(t, 10*time.Second); ev.Event != "ready" {
		t.Fatalf("list stream's first event %+v", ev)
	}
	// The worker publishes to the status channel once it has seen the subscriber (it re-reads
	// them every second): a start whose change arrives proves it has; the next one's changes
	// then arrive, in order.
	quick := `{"id":"quick","version":"1","start":"a","nodes":[{"id":"a","type":"log","params":{"message":"hi"},"next":"done"},{"id":"done","type":"end"}]}`
	for deadline := time.Now().Add(30 * time.Second); len(statusChanges(t, list, s.start(quick), 2*time.Second)) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the worker never published to the list stream")
		}
	}
	next := s.start(quick)
	if got := statusChanges(t, list, next, 30*time.Second); fmt.Sprint(got) != "[started completed]" {
		t.Fatalf("status changes of %s: %v", next, got)
	}

	a, _, _ := s.stream("/api/executions/" + id + "/events")
	b, _, _ := s.stream("/api/executions/" + id + "/events")
	for _, st := range []*testutil.SSEStream{a, b} {
		r := newReader(t, st, 0)
		r.snapshot()
		r.until("suspended")
	}
	if _, code, body := s.stream("/api/executions/" + id + "/events"); code != http.StatusServiceUnavailable || !bytes.Contains(body, []byte("too_many_streams")) {
		t.Fatalf("a stream beyond the bound: %d %s", code, body)
	}
	s.api.Drain()
	for _, st := range []*testutil.SSEStream{a, b, list} {
		var end control.FollowEnd
		for ev := st.Next(t, 10*time.Second); ; ev = st.Next(t, 10*time.Second) {
			if ev.Event == "end" {
				ev.Decode(t, &end)
				break
			}
		}
		if end.Reason != "draining" {
			t.Fatalf("end at drain %+v", end)
		}
		st.Ended(t, 10*time.Second)
	}
}

// A console stopped (SIGTERM: the drain) in the middle of a bulk job hands it over: the next
// console, on the same database, resumes it where it stopped and applies every item once.
func TestConsoleJobResumesAfterARestart(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	ctx := context.Background()
	ts, err := store.NewRedis(c, store.DefaultSettings(), "").Tenant("")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1500
	now := time.Now().UTC().Add(-time.Hour)
	for i := range n {
		at := now.Add(time.Duration(i) * time.Millisecond)
		if err := ts.Save(ctx, &state.Execution{ExecutionID: fmt.Sprintf("ex_bulk%04d", i), TenantID: "default", FlowID: "f", FlowVersion: "1",
			Status: state.Running, CurrentNode: "a", Context: map[string]any{}, StartTime: at, LastUpdate: at}); err != nil {
			t.Fatal(err)
		}
	}
	db := "sqlite:///" + filepath.Join(t.TempDir(), "console.db")
	env := func(instance string) map[string]string {
		return map[string]string{"PLAITA_CONSOLE_REDIS_URL": srv.URL(), "PLAITA_CONSOLE_DB_URL": db, "PLAITA_CONSOLE_ADMIN_API_KEY": liveKey,
			"PLAITA_INSTANCE_ID": instance}
	}
	admin := map[string]string{"X-Admin-API-Key": liveKey, "Content-Type": "application/json"}
	base, logs, stop := startConsole(t, env("console-a"))
	req, _ := http.NewRequest(http.MethodPost, base+"/api/jobs", bytes.NewReader([]byte(`{"action":"cancel","filter":{"status":"running"}}`)))
	for k, v := range admin {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("create the job: %v %v", res, err)
	}
	var created api.JobCreated
	if err := json.NewDecoder(res.Body).Decode(&created); err != nil || created.Job == nil || created.Job.Total != n {
		t.Fatalf("created %+v %v", created, err)
	}
	res.Body.Close()
	id := created.Job.ID
	job := func(base string) api.Job {
		var v api.JobView
		if code := getJSON(t, base+"/api/jobs/"+id, admin, &v); code != http.StatusOK {
			t.Fatalf("read the job: %d", code)
		}
		return v.Job
	}
	for deadline := time.Now().Add(20 * time.Second); job(base).Succeeded == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not start\n%s", logs)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	d, err := sqlite.Open(ctx, db, sqlite.MustExist())
	if err != nil {
		t.Fatal(err)
	}
	mid, err := d.Job(ctx, "default", id)
	if err != nil || mid.Status != sqlite.JobRunning || mid.Succeeded == 0 || mid.Succeeded+mid.Failed >= n {
		t.Fatalf("the job after the stop: %+v %v (a job done before the stop proves nothing: raise n)", mid, err)
	}
	if refs, err := d.RunnableJobs(ctx, "console-b", 10); err != nil || len(refs) != 1 {
		t.Fatalf("the stopped console kept its lease: %v %v", refs, err)
	}
	d.Close()

	base, logs, _ = startConsole(t, env("console-b"))
	var done api.Job
	for deadline := time.Now().Add(30 * time.Second); !sqlite.JobStatus(done.Status).Finished(); time.Sleep(20 * time.Millisecond) {
		if done = job(base); time.Now().After(deadline) {
			t.Fatalf("the next console did not finish the job: %+v\n%s", done, logs)
		}
	}
	if done.Status != string(sqlite.JobCompleted) || done.Succeeded != n || done.Failed != 0 {
		t.Fatalf("after the restart: %+v (stopped at %d)", done, mid.Succeeded)
	}
	results := map[string]int{}
	for cursor := ""; ; {
		var page control.BulkItemPage
		getJSON(t, base+"/api/jobs/"+id+"/items?limit=500&cursor="+cursor, admin, &page)
		for _, it := range page.Items {
			results[it.Result]++
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if results["cancel_requested"] != n {
		t.Fatalf("results %v", results)
	}
	// Each cancel enqueues one cancel resume: an item applied twice would show as one more.
	if queued, err := c.Do(ctx, c.B().Xlen().Key("plaita:flow:queue").Build()).AsInt64(); err != nil || queued != n {
		t.Fatalf("%d cancel resumes enqueued for %d items: %v", queued, n, err)
	}
}
