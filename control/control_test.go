package control

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

// The operations' contract against a real Redis: what each returns, and each refusal's class
// and code — what the CLI maps to exit statuses and the console to HTTP statuses.

type fixture struct {
	t     *testing.T
	c     rueidis.Client
	root  string
	p     *Plane
	q     *queue.Queue
	store *store.Redis
}

func newFixture(t *testing.T, opts ...func(*Deps)) *fixture {
	t.Helper()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	stream := root + ":flow:queue"
	q, err := queue.New(queue.Redis(c), queue.Settings{Stream: stream, Group: "g", StartID: "0", Consumer: "c", DLQ: stream + ":dlq",
		ClaimMinIdle: time.Minute, MaxDeliveries: 5, DLQMaxLen: 100, TaskMaxAge: time.Hour}, metrics.NewSet(), zerolog.Nop())

	if err != nil {
		t.Fatal(err)
	}
	if err := q.EnsureGroup(context.Background()); err != nil {
		t.Fatal(err)
	}
	delay, err := queue.NewDelay(queue.RedisDelays(c), root+":delay:queue")
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewRedis(c, store.DefaultSettings(), root)
	d := Deps{Root: root, Store: st, Flows: store.NewFlows(store.RedisFlows(c), root).Reserve(stream, stream+":dlq"),
		Events: store.NewEvents(store.RedisEvents(c), store.EventSettings{TTL: time.Hour}, root), Schedules: store.NewSchedules(store.RedisSchedules(c), root),
		Registry: store.NewRegistry(store.OnRedis(c), root), Control: store.NewControl(store.OnRedis(c), root), Delay: delay, Queue: q,
		Producer: queue.NewProducer(queue.Redis(c), stream, queue.Generations{}, 1<<20, nil), Expr: engine.DefaultExprLimits, StateMaxBytes: 1 << 20}
	for _, o := range opts {
		o(&d)
	}
	p := New(d)
	return &fixture{t: t, c: c, root: root, p: p, q: q, store: st}
}

// refusal wants err to be a refusal of class and code.
func refusal(t *testing.T, what string, err error, class Class, code string) *Refusal {
	t.Helper()
	r := AsRefusal(err)
	if r == nil || r.Class != class || r.Code != code {
		t.Fatalf("%s: %v (%+v), want a refusal %d %q", what, err, r, class, code)
	}
	return r
}

func (f *fixture) save(st *state.Execution) {
	f.t.Helper()
	ts, err := f.store.Tenant(st.TenantID)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := ts.Save(context.Background(), st); err != nil {
		f.t.Fatal(err)
	}
}

const askFlow = `{"id":"ask","version":"1","start":"ask","nodes":[
	{"id":"ask","type":"approval","params":{"message":"ok?"},"next":"done"},
	{"id":"done","type":"end"}]}`

func TestFlowsAndStarts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r := refusal(t, "invalid flow", func() error { _, err := f.p.PublishFlow(ctx, "", []byte(`{"id":"x"}`), ""); return err }(), Invalid, "invalid_flow")
	var ve *engine.ValidationError
	if !errors.As(r, &ve) {
		t.Fatalf("the refusal does not carry the validation error: %v", r.Err)
	}
	pub, err := f.p.PublishFlow(ctx, "acme", []byte(askFlow), "")
	if err != nil || pub.Result != store.Published || pub.Version != "1" {
		t.Fatalf("publish: %+v %v", pub, err)
	}
	if pub, err = f.p.PublishFlow(ctx, "acme", []byte(askFlow), ""); err != nil || pub.Result != store.AlreadyPublished {
		t.Fatalf("publish again: %+v %v", pub, err)
	}
	_, err = f.p.PublishFlow(ctx, "acme", []byte(strings.Replace(askFlow, "ok?", "sure?", 1)), "")
	if r := refusal(t, "changed definition", err, Conflict, "flow_version_conflict"); !strings.Contains(r.Unblock, "new version") {
		t.Fatalf("unblock %q", r.Unblock)
	}
	_, err = f.p.PublishFlow(ctx, "acme", []byte(askFlow), "2")
	refusal(t, "file version and asked version differ", err, Invalid, "invalid_version")
	_, err = f.p.PublishFlow(ctx, "Bad!", []byte(askFlow), "")
	refusal(t, "bad tenant", err, Invalid, "invalid_tenant")

	_, err = f.p.Start(ctx, StartRequest{Tenant: "acme", FlowID: "nope"})
	refusal(t, "unpublished flow", err, NotFound, "flow_not_found")
	_, err = f.p.Start(ctx, StartRequest{Tenant: "acme", FlowID: "ask", Input: json.RawMessage(`{"n":9007199254740993}`)})
	refusal(t, "inexact input", err, Invalid, "invalid_input")
	s, err := f.p.Start(ctx, StartRequest{Tenant: "acme", FlowID: "ask", Input: json.RawMessage(`{"who":"sam"}`)})
	if err != nil || s.ExecutionID == "" || s.FlowVersion != "1" || s.Queue != f.p.QueueName() || s.MessageID == "" {
		t.Fatalf("start: %+v %v", s, err)
	}
	_, err = f.p.Start(ctx, StartRequest{Tenant: "acme", FlowID: "ask", ExecutionID: "not an id"})
	refusal(t, "a chosen id that is no id", err, Invalid, "invalid_id")
	chosen, err := f.p.Start(ctx, StartRequest{Tenant: "acme", FlowID: "ask", ExecutionID: "ex_chosen1"})
	if err != nil || chosen.ExecutionID != "ex_chosen1" {
		t.Fatalf("start with a chosen id: %+v %v", chosen, err)
	}
	ds, err := f.q.Read(ctx, "c", 10, 0)
	if err != nil || len(ds) != 2 || ds[0].Envelope.ExecutionID != s.ExecutionID || ds[0].Envelope.TenantID != "acme" || ds[1].Envelope.ExecutionID != "ex_chosen1" {
		t.Fatalf("enqueued: %+v %v", ds, err)
	}
}

func TestExecutionOperations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pub, err := f.p.PublishFlow(ctx, "", []byte(askFlow), "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	base := func(id string, status state.Status) *state.Execution {
		return &state.Execution{ExecutionID: id, TenantID: "default", FlowID: "ask", FlowVersion: "1", FlowHash: pub.Flow.Hash,
			FlowHashAlgo: pub.Flow.HashAlgo, Status: status, CurrentNode: "ask", Context: map[string]any{}, StartTime: now, LastUpdate: now}
	}
	waiting := base("ex_wait", state.Suspended)
	waiting.Suspend = &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: now}
	f.save(waiting)
	f.save(base("ex_done", state.Completed))
	f.save(base("ex_run", state.Running))
	failed := base("ex_fail", state.Error)
	failed.Error = &state.ErrorInfo{Type: engine.ErrTypeNode, Node: "ask", Message: "boom"}
	f.save(failed)

	_, err = f.p.Show(ctx, "", "ex_none")
	refusal(t, "unknown execution", err, NotFound, "execution_not_found")
	_, err = f.p.Show(ctx, "", "bad:id")
	refusal(t, "bad id", err, Invalid, "invalid_id")
	shown, err := f.p.Show(ctx, "", "ex_wait")
	if err != nil || shown.Execution == nil || shown.WakeUp == nil || shown.WakeUp.By != "console" {
		t.Fatalf("show: %+v %v", shown, err)
	}

	// A resume the worker would refuse: not enqueued; what is accepted instead, with commands.
	_, err = f.p.Resume(ctx, ResumeRequest{ID: "ex_wait", Type: engine.ResumeContinue})
	r := refusal(t, "continue of an approval", err, Conflict, "resume_refused")
	var types []engine.ResumeType
	for _, h := range r.Accepted {
		if h.Type != "" {
			types = append(types, h.Type)
			if !strings.HasPrefix(h.Command, "plaita execution ") {
				t.Errorf("hint without a command: %+v", h)
			}
		}
	}
	if len(types) != 3 || types[0] != engine.ResumeApproval || types[2] != engine.ResumeCancel || r.Execution == nil {
		t.Fatalf("accepted %v (%+v)", types, r.Accepted)
	}
	done, err := f.p.Resume(ctx, ResumeRequest{ID: "ex_wait", Type: engine.ResumeApproval, Data: json.RawMessage(`{"approved":true}`)})
	if err != nil || !done.Enqueued || done.MessageID == "" || done.Checked == nil || !*done.Checked {
		t.Fatalf("approval: %+v %v", done, err)
	}
	_, err = f.p.Resume(ctx, ResumeRequest{ID: "ex_done", Type: engine.ResumeRetry})
	refusal(t, "resume of a completed execution", err, Conflict, "terminal")

	// The retry gates: at the limit, a Conflict that says which counter and how to reset it.
	ts, _ := f.store.Tenant("")
	for range store.G1MaxWakeups {
		if _, err := ts.Incr(ctx, keys.FamG1Wakeups, "ex_fail"); err != nil {
			t.Fatal(err)
		}
	}
	_, err = f.p.Resume(ctx, ResumeRequest{ID: "ex_fail", Type: engine.ResumeRetry})
	r = refusal(t, "retry past the budget", err, Conflict, "retry_budget")
	if r.Fields["counter"] != keys.FamG1Wakeups || !strings.Contains(r.Unblock, "DEL") {
		t.Fatalf("budget refusal: %+v", r)
	}

	_, err = f.p.Cancel(ctx, "", "ex_done")
	refusal(t, "cancel of a completed execution", err, Conflict, "terminal")
	if done, err = f.p.Cancel(ctx, "", "ex_wait"); err != nil || done.Result != "cancel_requested" || !done.Enqueued {
		t.Fatalf("cancel: %+v %v", done, err)
	}
	f.save(base("ex_cancelled", state.Cancelled))
	if done, err = f.p.Cancel(ctx, "", "ex_cancelled"); err != nil || done.Result != "already_cancelled" || done.Enqueued {
		t.Fatalf("cancel again: %+v %v", done, err)
	}
	_, err = f.p.Delete(ctx, "", "ex_run", false)
	refusal(t, "delete of a running execution", err, Conflict, "running")
	if done, err = f.p.Delete(ctx, "", "ex_run", true); err != nil || !done.Deleted || done.Was != state.Running {
		t.Fatalf("delete --force: %+v %v", done, err)
	}
}

func TestEventsSchedulesAndDeadLetters(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.p.PublishEvent(ctx, store.Event{Type: "t", ID: "bad\xffid"})
	refusal(t, "bad event id", err, Invalid, "invalid_event")
	_, err = f.p.PublishEvent(ctx, store.Event{Type: "a:b"})
	refusal(t, "bad event type", err, Invalid, "invalid_event")
	_, err = f.p.PublishEvent(ctx, store.Event{Type: "t", Data: json.RawMessage(`{"n":1e400}`)})
	refusal(t, "bad event data", err, Invalid, "invalid_event")
	ev, err := f.p.PublishEvent(ctx, store.Event{Type: "t", ID: "e1", Data: json.RawMessage(`{"a":1}`)})
	if err != nil || ev.Duplicate || ev.TenantID != "default" {
		t.Fatalf("publish: %+v %v", ev, err)
	}
	_, err = f.p.PublishEvent(ctx, store.Event{Type: "t", ID: "e1", Data: json.RawMessage(`{"a":2}`)})
	refusal(t, "event id taken", err, Conflict, "event_conflict")

	_, err = f.p.AddSchedule(ctx, store.Schedule{ID: "s1", Cron: "not a cron", FlowID: "f"})
	refusal(t, "bad cron", err, Invalid, "invalid_cron")
	added, err := f.p.AddSchedule(ctx, store.Schedule{ID: "s1", Cron: "0 * * * *", FlowID: "f", Enabled: true})
	if err != nil || len(added.Warnings) != 1 || added.FlowVersion != store.LatestVersion {
		t.Fatalf("add: %+v %v", added, err)
	}
	_, err = f.p.AddSchedule(ctx, store.Schedule{ID: "s1", Cron: "0 * * * *", FlowID: "f"})
	refusal(t, "schedule id taken", err, Conflict, "schedule_exists")
	refusal(t, "unknown schedule", f.p.DeleteSchedule(ctx, "", "s2"), NotFound, "schedule_not_found")
	// Disabling a tenant disables its enabled schedules, and only its own.
	for _, s := range []store.Schedule{{ID: "s2", TenantID: "acme", Cron: "0 * * * *", FlowID: "f", Enabled: true},
		{ID: "s3", TenantID: "acme", Cron: "0 * * * *", FlowID: "f"}} {
		if _, err := f.p.AddSchedule(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if ids, err := f.p.DisableSchedules(ctx, "acme"); err != nil || len(ids) != 1 || ids[0] != "s2" {
		t.Fatalf("disable acme's schedules: %v %v", ids, err)
	}
	if ids, err := f.p.DisableSchedules(ctx, "acme"); err != nil || len(ids) != 0 {
		t.Fatalf("disable acme's schedules again: %v %v", ids, err)
	}
	if rec, err := f.p.Schedule(ctx, "", "s1"); err != nil || !rec.Enabled {
		t.Fatalf("the default tenant's schedule: %+v %v", rec, err)
	}
	if err := f.p.DeleteSchedule(ctx, "", "s1"); err != nil {
		t.Fatal(err)
	}

	// Dead letters are one stream for every tenant: each tenant sees, and replays, its own.
	for _, tenant := range []string{"acme", "globex"} {
		if _, err := f.p.enqueue(ctx, tenant, queue.Envelope{Kind: queue.KindStart, FlowID: "f", FlowVersion: "1",
			ExecutionID: engine.NewExecutionID(), Input: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := f.q.Read(ctx, "c", 10, 0)
	if err != nil || len(ds) != 2 {
		t.Fatalf("read: %d %v", len(ds), err)
	}
	for _, d := range ds {
		if err := f.q.DeadLetter(ctx, d, "test"); err != nil {
			t.Fatal(err)
		}
	}
	acme, err := f.p.DeadLetters(ctx, "acme", false, 10)
	if err != nil || len(acme) != 1 || acme[0].TenantID != "acme" {
		t.Fatalf("acme's dead letters: %+v %v", acme, err)
	}
	all, err := f.p.DeadLetters(ctx, "", true, 10)
	if err != nil || len(all) != 2 {
		t.Fatalf("all dead letters: %d %v", len(all), err)
	}
	_, err = f.p.ReplayDeadLetter(ctx, "globex", false, acme[0].ID)
	refusal(t, "another tenant's dead letter", err, NotFound, "dead_letter_not_found")
	res, err := f.p.ReplayDeadLetter(ctx, "acme", false, acme[0].ID)
	if err != nil || res.Status != queue.ReplayDone {
		t.Fatalf("replay: %+v %v", res, err)
	}
	if res, err = f.p.ReplayDeadLetter(ctx, "acme", false, acme[0].ID); err != nil || res.Status != queue.ReplayAlreadyReplayed {
		t.Fatalf("replay again: %+v %v", res, err)
	}
}

// wokenAtOnce is an events driver whose publish lets a filter take the wait first: the wait's
// index entry is gone by the time the event's index is written (a filter faster than the
// publisher's next round trip).
type wokenAtOnce struct {
	*store.RedisEventsDriver
	c   rueidis.Client
	key string
}

func (w wokenAtOnce) Index(ctx context.Context, sp keys.Space, iw store.EventIndexWrite) (bool, error) {
	if err := w.c.Do(ctx, w.c.B().Del().Key(w.key).Build()).Error(); err != nil {
		return false, err
	}
	return w.RedisEventsDriver.Index(ctx, sp, iw)
}

// A publish counts the waits it may wake before it writes the event: a filter that wakes one at
// once does not make the answer say the event wakes nothing. The uncounted publish reads
// neither the waits nor the registry.
func TestPublishCountsTheWaitsBeforeTheEvent(t *testing.T) {
	ctx := context.Background()
	var waitsKey string
	f := newFixture(t, func(d *Deps) {
		sp, err := keys.For(d.Root, "default")
		if err != nil {
			t.Fatal(err)
		}
		waitsKey, _ = sp.SubscriptionIndex("paid")
		c := redistest.Client(t)
		d.Events = store.NewEvents(wokenAtOnce{RedisEventsDriver: store.RedisEvents(c), c: c, key: waitsKey}, store.EventSettings{TTL: time.Hour}, d.Root)
	})
	ts, err := f.store.Tenant("default")
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.PutSubscription(ctx, store.Subscription{ExecutionID: "ex_w1", FlowID: "f", FlowVersion: "1", Node: "w", EventType: "paid",
		Since: time.Now().Add(-time.Minute)}, time.Hour); err != nil {
		t.Fatal(err)
	}
	ev, err := f.p.PublishEvent(ctx, store.Event{Type: "paid", Data: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Waiting != 1 || strings.Contains(ev.Text, "wakes nothing") {
		t.Fatalf("waiting %d, text %q: want the wait counted", ev.Waiting, ev.Text)
	}
	ev, err = f.p.PublishEventUncounted(ctx, store.Event{Type: "paid", Data: json.RawMessage(`{}`)})
	if err != nil || ev.Waiting != -1 || ev.FiltersAlive != -1 || ev.Text != "" || ev.ID == "" {
		t.Fatalf("uncounted: %+v %v", ev, err)
	}
}
