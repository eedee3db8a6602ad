package control

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/sqlite"
)

// Local mode over a real SQLite file: the runner runs executions in the test's process.

type localFix struct {
	t   *testing.T
	db  *sqlite.DB
	dsn string
	l   *Local
}

func openLocal(t *testing.T, dsn string, orphans sqlite.OrphanMode) *localFix {
	t.Helper()
	db, err := sqlite.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLocal(LocalDeps{DB: db, Orphans: orphans, Workers: 2, Log: zerolog.Nop()})
	if err := l.Runner().Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := &localFix{t: t, db: db, dsn: dsn, l: l}
	t.Cleanup(f.close)
	return f
}

func newLocalFix(t *testing.T) *localFix {
	return openLocal(t, "sqlite:///"+filepath.Join(t.TempDir(), "console.db"), sqlite.OrphanSuspend)
}

func (f *localFix) close() {
	if f.l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f.l.Runner().Stop(ctx)
	_ = f.db.Close()
	f.l = nil
}

func (f *localFix) publish(def string) {
	f.t.Helper()
	if _, err := f.l.PublishFlow(context.Background(), "", []byte(def), ""); err != nil {
		f.t.Fatal(err)
	}
}

// wait reads the execution until cond holds (the runner is asynchronous).
func (f *localFix) wait(id string, what string, cond func(*state.Execution) bool) *state.Execution {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		shown, err := f.l.Show(context.Background(), "", id)
		if err == nil && cond(shown.Execution) {
			return shown.Execution
		}
		if time.Now().After(deadline) {
			var st any = err
			if err == nil {
				st = shown.Execution
			}
			f.t.Fatalf("%s: not reached in 10 s: %+v", what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func statusIs(s state.Status) func(*state.Execution) bool {
	return func(st *state.Execution) bool { return st.Status == s }
}

func suspendedAt(node string) func(*state.Execution) bool {
	return func(st *state.Execution) bool {
		return st.Status == state.Suspended && st.Suspend != nil && st.Suspend.Node == node
	}
}

const localDelayApproval = `{"id": "pay", "start": "pause", "nodes": [
  {"id": "pause", "type": "delay", "params": {"seconds": 0.3}, "next": "ask"},
  {"id": "ask", "type": "approval", "params": {"message": "pay {{ INPUT.amount }}?"}, "next": "done"},
  {"id": "done", "type": "end", "params": {"output": "{{ NODE.ask.approved }}"}}]}`

// A flow with a delay and an approval runs to completion in process: the delay's timer
// resumes it, the answer (checked as in cluster mode) completes it.
func TestLocalRunsADelayAndAnApproval(t *testing.T) {
	f := newLocalFix(t)
	f.publish(localDelayApproval)
	ctx := context.Background()
	s, err := f.l.Start(ctx, StartRequest{FlowID: "pay", Input: json.RawMessage(`{"amount": 12}`)})
	if err != nil || s.Queue != LocalQueue || s.FlowVersion == "" {
		t.Fatalf("start: %+v %v", s, err)
	}
	st := f.wait(s.ExecutionID, "suspended at the delay", suspendedAt("pause"))
	shown, _ := f.l.Show(ctx, "", s.ExecutionID)
	if shown.WakeUp == nil || shown.WakeUp.Due == nil || shown.WakeUp.Due.Entry != "scheduled" || shown.WakeUp.By != "console" ||
		shown.WakeUp.Roles["delay"].Alive != 1 {
		t.Fatalf("wake-up report of the delay: %+v", shown.WakeUp)
	}
	_ = st
	f.wait(s.ExecutionID, "suspended at the approval after the delay", suspendedAt("ask"))
	page, err := f.l.Approvals(ctx, "", "", 10)
	if err != nil || len(page.Items) != 1 || page.Items[0].ExecutionID != s.ExecutionID || page.Items[0].Message != "pay 12?" {
		t.Fatalf("approvals: %+v %v", page, err)
	}
	// An answer the execution cannot take is refused as in cluster mode (here: an event).
	if _, err := f.l.Resume(ctx, ResumeRequest{ID: s.ExecutionID, Type: engine.ResumeEvent, Data: json.RawMessage(`{}`)}); AsRefusal(err) == nil ||
		AsRefusal(err).Code != "resume_refused" {
		t.Fatalf("event resume of an approval: %v", err)
	}
	if _, err := f.l.AnswerApproval(ctx, Answer{ID: s.ExecutionID, Approved: true, By: "kim", Comment: "fine"}); err != nil {
		t.Fatal(err)
	}
	done := f.wait(s.ExecutionID, "completed", statusIs(state.Completed))
	if done.Output != true {
		t.Fatalf("output %v", done.Output)
	}
	why := ""
	for _, e := range done.Timeline {
		if e.Node == "ask" && e.Event == "resumed" {
			why = e.Why
		}
	}
	if why != "approved by kim: fine" {
		t.Fatalf("the answer's reason in the timeline: %q", why)
	}
	if _, err := f.l.AnswerApproval(ctx, Answer{ID: s.ExecutionID, Approved: true, By: "kim"}); AsRefusal(err) == nil || AsRefusal(err).Code != "terminal" {
		t.Fatalf("a second answer: %v", err)
	}
}

// An event wakes the waits whose match it satisfies, once, and only those.
func TestLocalEventWakesTheMatchingWaitOnly(t *testing.T) {
	f := newLocalFix(t)
	f.publish(`{"id": "w", "start": "wait", "nodes": [
	  {"id": "wait", "type": "wait_event", "params": {"event_type": "paid", "match": "EVENT.order == INPUT.order"}, "next": "done"},
	  {"id": "done", "type": "end", "params": {"output": "{{ EVENT.order }}"}}]}`)
	ctx := context.Background()
	a, _ := f.l.Start(ctx, StartRequest{FlowID: "w", Input: json.RawMessage(`{"order": "a"}`)})
	b, _ := f.l.Start(ctx, StartRequest{FlowID: "w", Input: json.RawMessage(`{"order": "b"}`)})
	f.wait(a.ExecutionID, "a waits", suspendedAt("wait"))
	f.wait(b.ExecutionID, "b waits", suspendedAt("wait"))
	out, err := f.l.PublishEvent(ctx, store.Event{Type: "paid", ID: "evt_1", Data: json.RawMessage(`{"order": "a"}`)})
	if err != nil || out.Waiting != 1 || !strings.Contains(out.Text, "1 of the 2") {
		t.Fatalf("publish: %+v %v", out, err)
	}
	if st := f.wait(a.ExecutionID, "a completed", statusIs(state.Completed)); st.Output != "a" {
		t.Fatalf("a's output %v", st.Output)
	}
	// The same event again is idempotent; the same id with other data a conflict.
	if out, err := f.l.PublishEvent(ctx, store.Event{Type: "paid", ID: "evt_1", Data: json.RawMessage(`{"order": "a"}`)}); err != nil || !out.Duplicate {
		t.Fatalf("republish: %+v %v", out, err)
	}
	if _, err := f.l.PublishEvent(ctx, store.Event{Type: "paid", ID: "evt_1", Data: json.RawMessage(`{"order": "b"}`)}); AsRefusal(err) == nil ||
		AsRefusal(err).Code != "event_conflict" {
		t.Fatalf("the same id with other data: %v", err)
	}
	// Bad input is refused by the cluster mode's rules before anything runs.
	if _, err := f.l.PublishEvent(ctx, store.Event{Type: "paid", Data: json.RawMessage(strings.Repeat("[", 100) + strings.Repeat("]", 100))}); AsRefusal(err) == nil ||
		AsRefusal(err).Class != Invalid {
		t.Fatalf("an event nested too deep: %v", err)
	}
	if st := f.wait(b.ExecutionID, "b still waits", suspendedAt("wait")); st.Status != state.Suspended {
		t.Fatal(st.Status)
	}
	if _, err := f.l.Cancel(ctx, "", b.ExecutionID); err != nil {
		t.Fatal(err)
	}
	f.wait(b.ExecutionID, "b cancelled", statusIs(state.Cancelled))
	if _, err := f.l.Cancel(ctx, "", a.ExecutionID); AsRefusal(err) == nil || AsRefusal(err).Code != "terminal" {
		t.Fatalf("cancel of a completed execution: %v", err)
	}
}

// Another tenant's execution is not found; a bad id, cursor or input is Invalid.
func TestLocalTenantsAndBadInput(t *testing.T) {
	f := newLocalFix(t)
	f.publish(`{"id": "h", "start": "done", "nodes": [{"id": "done", "type": "end"}]}`)
	ctx := context.Background()
	s, err := f.l.Start(ctx, StartRequest{FlowID: "h"})
	if err != nil {
		t.Fatal(err)
	}
	f.wait(s.ExecutionID, "completed", statusIs(state.Completed))
	if _, err := f.db.CreateTenant(ctx, sqlite.NewTenant{Slug: "acme", Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.Show(ctx, "acme", s.ExecutionID); AsRefusal(err) == nil || AsRefusal(err).Class != NotFound {
		t.Fatalf("another tenant's execution: %v", err)
	}
	if _, err := f.l.Start(ctx, StartRequest{Tenant: "acme", FlowID: "h"}); AsRefusal(err) == nil || AsRefusal(err).Class != NotFound {
		t.Fatalf("a flow published in another tenant: %v", err)
	}
	if _, err := f.l.Start(ctx, StartRequest{FlowID: "h", Input: json.RawMessage(`{"n": 1e400}`)}); AsRefusal(err) == nil || AsRefusal(err).Code != "invalid_input" {
		t.Fatalf("an input the state cannot hold exactly: %v", err)
	}
	if _, err := f.l.List(ctx, "", ListRequest{Cursor: "nope"}); AsRefusal(err) == nil || AsRefusal(err).Code != "invalid_cursor" {
		t.Fatalf("a bad cursor: %v", err)
	}
	page, err := f.l.List(ctx, "", ListRequest{Limit: 10})
	if err != nil || len(page.Items) != 1 || page.Items[0].CurrentNode != "done" {
		t.Fatalf("list: %+v %v", page, err)
	}
	if _, err := f.l.PublishFlow(ctx, "", []byte(`{"id": "h", "version": "1", "start": "x", "nodes": [{"id": "x", "type": "end"}]}`), ""); err != nil {
		t.Fatal(err)
	}
	_, err = f.l.PublishFlow(ctx, "", []byte(`{"id": "h", "version": "1", "start": "y", "nodes": [{"id": "y", "type": "end"}]}`), "")
	if r := AsRefusal(err); r == nil || r.Code != "flow_version_conflict" || !errors.Is(err, sqlite.ErrVersionExists) {
		t.Fatalf("a changed definition under a published version: %v", err)
	}
}

// A console that stopped mid-step leaves its execution running: the next start suspends it
// (PLAITA_CONSOLE_RECONCILE_ORPHANS=suspend) and an operator's continue runs the step again.
func TestLocalOrphanIsSuspendedThenContinued(t *testing.T) {
	dsn := "sqlite:///" + filepath.Join(t.TempDir(), "console.db")
	f := openLocal(t, dsn, sqlite.OrphanSuspend)
	f.publish(`{"id": "o", "start": "a", "nodes": [{"id": "a", "type": "log", "params": {"message": "x"}, "next": "b"},
	  {"id": "b", "type": "end", "params": {"output": "done"}}]}`)
	// The state a console that died during step a left behind.
	now := time.Now().UTC()
	flow, _, err := f.l.publishedFlow(context.Background(), "default", "o", "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := engine.NewState(flow, engine.StartRequest{ExecutionID: "ex_orphan1", TenantID: "default"}, now)
	if err != nil {
		t.Fatal(err)
	}
	st.FlowVersion = flow.Hash[:12]
	if err := f.db.Executions().Save(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	f.close()

	f = openLocal(t, dsn, sqlite.OrphanSuspend)
	res, err := f.l.Reconciled()
	if err != nil || res == nil || len(res.Changed) != 1 || res.Changed[0].ExecutionID != "ex_orphan1" {
		t.Fatalf("reconcile: %+v %v", res, err)
	}
	got := f.wait("ex_orphan1", "suspended by the reconcile", func(s *state.Execution) bool {
		return s.Status == state.Suspended && s.Suspend.Kind == sqlite.SuspendOrphan
	})
	ctx := context.Background()
	if _, err := f.l.Resume(ctx, ResumeRequest{ID: got.ExecutionID, Type: engine.ResumeRetry}); AsRefusal(err) == nil {
		t.Fatal("a retry of an orphan was accepted")
	}
	if _, err := f.l.Resume(ctx, ResumeRequest{ID: got.ExecutionID, Type: engine.ResumeContinue}); err != nil {
		t.Fatal(err)
	}
	if done := f.wait(got.ExecutionID, "completed after continue", statusIs(state.Completed)); done.Output != "done" {
		t.Fatalf("output %v", done.Output)
	}
}

// A due time passed while the console was stopped fires when the runner starts again.
func TestLocalDueTimeSurvivesARestart(t *testing.T) {
	dsn := "sqlite:///" + filepath.Join(t.TempDir(), "console.db")
	f := openLocal(t, dsn, sqlite.OrphanSuspend)
	f.publish(`{"id": "d", "start": "pause", "nodes": [{"id": "pause", "type": "delay", "params": {"seconds": 1}, "next": "done"},
	  {"id": "done", "type": "end", "params": {"output": "woke"}}]}`)
	s, err := f.l.Start(context.Background(), StartRequest{FlowID: "d"})
	if err != nil {
		t.Fatal(err)
	}
	f.wait(s.ExecutionID, "suspended at the delay", suspendedAt("pause"))
	f.close() // the timer goes with the process; the due time stays in the state

	f = openLocal(t, dsn, sqlite.OrphanSuspend)
	if done := f.wait(s.ExecutionID, "completed after the restart", statusIs(state.Completed)); done.Output != "woke" {
		t.Fatalf("output %v", done.Output)
	}
}

// A local listing filters by the fields a flow indexes and by start time, as a Redis one does.
func TestLocalListsByIndexAndTime(t *testing.T) {
	f := newLocalFix(t)
	f.publish(`{"id": "o", "index": ["order_id"], "start": "done", "nodes": [{"id": "done", "type": "end"}]}`)
	ctx := context.Background()
	var ids []string
	for _, order := range []string{"a", "b", "a"} {
		s, err := f.l.Start(ctx, StartRequest{FlowID: "o", Input: json.RawMessage(`{"order_id": "` + order + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		f.wait(s.ExecutionID, "completed", statusIs(state.Completed))
		ids = append(ids, s.ExecutionID)
	}
	page, err := f.l.List(ctx, "", ListRequest{Index: []IndexFilter{{Field: "order_id", Value: "a"}}, Limit: 1})
	if err != nil || len(page.Items) != 1 || page.NextCursor == "" {
		t.Fatalf("first page of order a: %+v %v", page, err)
	}
	next, err := f.l.List(ctx, "", ListRequest{Index: []IndexFilter{{Field: "order_id", Value: "a"}}, Limit: 5, Cursor: page.NextCursor})
	if err != nil || len(next.Items) != 1 || next.Items[0].ExecutionID == page.Items[0].ExecutionID {
		t.Fatalf("second page of order a: %+v %v", next, err)
	}
	shown, _ := f.l.Show(ctx, "", ids[1])
	all, err := f.l.List(ctx, "", ListRequest{StartedAfter: shown.StartTime, Limit: 10})
	if err != nil || len(all.Items) == 0 || len(all.Items) == 3 {
		t.Fatalf("started after the second: %+v %v", all, err)
	}
	if _, err := f.l.List(ctx, "", ListRequest{Index: []IndexFilter{{Field: "9x", Value: "a"}}}); AsRefusal(err) == nil {
		t.Fatal("a field no flow can index was accepted")
	}
}
