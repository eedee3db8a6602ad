package control

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
)

// Follow against a real Redis, with the test in the worker's place: it saves states and
// publishes live events (roles/console_live_test.go follows a real worker). What must hold:
// entries in seq order, each once; a gap filled from the state; a lost last event found by
// the poll; the entries after Last-Event-ID only; the terminal status always; a start still
// queued followed from its first entry; a deletion and an unreadable state end the follow.

// follower runs one Follow and hands its items to the test.
type follower struct {
	t     *testing.T
	items chan LiveItem
	done  chan error
	stop  context.CancelFunc
}

func (f *fixture) follow(req FollowRequest) *follower {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fl := &follower{t: f.t, items: make(chan LiveItem, 100), done: make(chan error, 1), stop: cancel}
	f.t.Cleanup(cancel)
	go func() {
		fl.done <- f.p.Follow(ctx, req, func(it LiveItem) error { fl.items <- it; return nil })
	}()
	return fl
}

// next is the next item that is not a heartbeat.
func (fl *follower) next() LiveItem {
	fl.t.Helper()
	for {
		select {
		case it := <-fl.items:
			if it.Kind != LiveHeartbeat {
				return it
			}
		case err := <-fl.done:
			select { // the items emitted before it returned come first
			case it := <-fl.items:
				fl.done <- err
				if it.Kind != LiveHeartbeat {
					return it
				}
				continue
			default:
			}
			fl.t.Fatalf("the follow returned %v", err)
		case <-time.After(10 * time.Second):
			fl.t.Fatal("no item")
		}
	}
}

// entries wants the next items to be the entries of these seqs.
func (fl *follower) entries(seqs ...int) {
	fl.t.Helper()
	for _, seq := range seqs {
		it := fl.next()
		if it.Kind != LiveEntry || it.Event.Seq != seq {
			fl.t.Fatalf("want entry %d, got %s %+v", seq, it.Kind, it.Event)
		}
	}
}

// end wants the follow to end with reason.
func (fl *follower) end(reason string) FollowEnd {
	fl.t.Helper()
	it := fl.next()
	if it.Kind != LiveEnd || it.End.Reason != reason {
		fl.t.Fatalf("want the end (%s), got %s %+v %+v", reason, it.Kind, it.End, it.Event)
	}
	select {
	case err := <-fl.done:
		if err != nil {
			fl.t.Fatalf("the follow ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		fl.t.Fatal("the follow did not return after its end")
	}
	return *it.End
}

// running is a state with the timeline entries from..to (the ones before from dropped).
func running(id string, from, to int, status state.Status) *state.Execution {
	now := time.Now().UTC()
	st := &state.Execution{ExecutionID: id, TenantID: "acme", FlowID: "ask", FlowVersion: "1", Status: status,
		CurrentNode: "ask", StartTime: now, LastUpdate: now, TimelineDropped: from - 1}
	for seq := from; seq <= to; seq++ {
		ev := "step"
		switch {
		case seq == 1:
			ev = "started"
		case seq == to && status.Terminal():
			ev = string(status)
		}
		st.Timeline = append(st.Timeline, state.TimelineEntry{Seq: seq, Time: state.Stamp(now), Node: "ask", Event: ev})
	}
	return st
}

func (f *fixture) publish(id string, seq int, ev string, status state.Status) {
	f.t.Helper()
	b, _ := json.Marshal(store.LiveEvent{ExecutionID: id, TenantID: "acme", FlowID: "ask", Status: status, Seq: seq, Event: ev, Node: "ask"})
	if err := f.p.d.Live.Publish(context.Background(), "acme", id, b); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) withLive() *fixture {
	f.p.d.Live = store.NewLiveEvents(store.OnRedis(f.c), f.root)
	return f
}

func TestFollowRelaysInOrderAndFillsGaps(t *testing.T) {
	f := newFixture(t).withLive()
	f.save(running("ex_f1", 1, 3, state.Running))
	fl := f.follow(FollowRequest{Tenant: "acme", ID: "ex_f1", Poll: 200 * time.Millisecond})
	snap := fl.next()
	if snap.Kind != LiveSnapshot || snap.Snapshot.Status != state.Running || snap.Snapshot.LastSeq != 3 || snap.Snapshot.FlowID != "ask" {
		t.Fatalf("first item %s %+v", snap.Kind, snap.Snapshot)
	}
	fl.entries(1, 2, 3)

	// The snapshot came after the subscription: a live event now is heard.
	f.publish("ex_f1", 4, "step", state.Running)
	fl.entries(4)
	f.publish("ex_f1", 4, "step", state.Running) // a duplicate is dropped
	f.publish("ex_f1", 0, "node_started", state.Running)
	if it := fl.next(); it.Kind != LiveNode || it.Event.Event != "node_started" {
		t.Fatalf("want the node start, got %s %+v", it.Kind, it.Event)
	}
	// Entry 5 is lost: 6 shows the gap, the state fills it.
	f.save(running("ex_f1", 1, 6, state.Running))
	f.publish("ex_f1", 6, "step", state.Running)
	fl.entries(5, 6)
	// The terminal entry is lost and nothing follows: the poll finds it.
	f.save(running("ex_f1", 1, 7, state.Completed))
	fl.entries(7)
	if e := fl.end("terminal"); e.Status != state.Completed || e.LastSeq != 7 {
		t.Fatalf("end %+v", e)
	}
}

// A terminal live event ends the follow at once, without waiting for the state.
func TestFollowEndsOnTheTerminalEvent(t *testing.T) {
	f := newFixture(t).withLive()
	f.save(running("ex_f2", 1, 2, state.Suspended))
	fl := f.follow(FollowRequest{Tenant: "acme", ID: "ex_f2", Poll: time.Minute})
	fl.next()
	fl.entries(1, 2)
	f.publish("ex_f2", 3, "resumed", state.Running)
	f.publish("ex_f2", 4, "error", state.Error)
	fl.entries(3, 4)
	if e := fl.end("terminal"); e.Status != state.Error || e.LastSeq != 4 {
		t.Fatalf("end %+v", e)
	}
}

// After a reconnect only the entries after Last-Event-ID come; those the state no longer
// keeps are named as a gap. A terminal execution ends at once.
func TestFollowAfterLastEventID(t *testing.T) {
	f := newFixture(t).withLive()
	f.save(running("ex_f3", 1, 5, state.Completed))
	fl := f.follow(FollowRequest{Tenant: "acme", ID: "ex_f3", After: 3})
	if s := fl.next(); s.Kind != LiveSnapshot || s.Snapshot.After != 3 || s.Snapshot.Status != state.Completed {
		t.Fatalf("snapshot %+v", s.Snapshot)
	}
	fl.entries(4, 5)
	fl.end("terminal")

	f.save(running("ex_f4", 6, 8, state.Running)) // 1…5 dropped from the bounded timeline
	fl = f.follow(FollowRequest{Tenant: "acme", ID: "ex_f4", After: 2})
	fl.next()
	if it := fl.next(); it.Kind != LiveTruncated || *it.Truncated != (TimelineGap{From: 3, To: 5}) {
		t.Fatalf("want the gap 3…5, got %s %+v", it.Kind, it.Truncated)
	}
	fl.entries(6, 7, 8)
	fl.stop()
}

// A start no worker has taken is followed from its first entry; a deletion ends the follow.
func TestFollowQueuedAndDeleted(t *testing.T) {
	f := newFixture(t).withLive()
	ctx := context.Background()
	if err := f.p.Follow(ctx, FollowRequest{Tenant: "acme", ID: "ex_none"}, func(LiveItem) error { return nil }); AsRefusal(err) == nil ||
		AsRefusal(err).Code != "execution_not_found" {
		t.Fatalf("no such execution: %v", err)
	}
	if _, err := f.p.PublishFlow(ctx, "acme", []byte(askFlow), ""); err != nil {
		t.Fatal(err)
	}
	s, err := f.p.Start(ctx, StartRequest{Tenant: "acme", FlowID: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	fl := f.follow(FollowRequest{Tenant: "acme", ID: s.ExecutionID, Poll: 200 * time.Millisecond})
	if it := fl.next(); it.Kind != LiveSnapshot || it.Snapshot.Status != "queued" {
		t.Fatalf("want a queued snapshot, got %s %+v", it.Kind, it.Snapshot)
	}
	f.save(running(s.ExecutionID, 1, 2, state.Running))
	f.publish(s.ExecutionID, 2, "step", state.Running) // 1 was published before the subscription was seen
	fl.entries(1, 2)
	ts, _ := f.store.Tenant("acme")
	if err := ts.Delete(ctx, s.ExecutionID); err != nil {
		t.Fatal(err)
	}
	if e := fl.end("deleted"); e.LastSeq != 2 {
		t.Fatalf("end %+v", e)
	}
}

func TestFollowHeartbeatsAndRefusals(t *testing.T) {
	f := newFixture(t).withLive()
	f.save(running("ex_f5", 1, 1, state.Suspended))
	fl := f.follow(FollowRequest{Tenant: "acme", ID: "ex_f5", Heartbeat: 50 * time.Millisecond, Poll: time.Minute})
	fl.next()
	fl.entries(1)
	select {
	case it := <-fl.items:
		if it.Kind != LiveHeartbeat {
			t.Fatalf("want a heartbeat, got %s", it.Kind)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no heartbeat")
	}
	fl.stop()
	if err := <-fl.done; err != context.Canceled {
		t.Fatalf("a cancelled follow returns %v", err)
	}
	ctx := context.Background()
	if err := f.c.Do(ctx, f.c.B().Set().Key(f.root+":acme:execution:{ex_bad}").Value("{not json").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	err := f.p.Follow(ctx, FollowRequest{Tenant: "acme", ID: "ex_bad"}, func(LiveItem) error { return nil })
	refusal(t, "unreadable", err, Conflict, "state_corrupt")
	err = f.p.Follow(ctx, FollowRequest{Tenant: "acme", ID: "ex_f5", After: -1}, func(LiveItem) error { return nil })
	refusal(t, "negative after", err, Invalid, "invalid_after")
	stop := fmt.Errorf("client gone")
	if err := f.p.Follow(ctx, FollowRequest{Tenant: "acme", ID: "ex_f5"}, func(LiveItem) error { return stop }); err != stop {
		t.Fatalf("an emit that fails ends the follow with its error: %v", err)
	}
}

func TestTimelinePages(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.save(running("ex_t1", 4, 10, state.Running))
	p, err := f.p.Timeline(ctx, "acme", "ex_t1", 0, 3)
	if err != nil || len(p.Entries) != 3 || p.Entries[0].Seq != 4 || p.Next != 6 || p.Dropped != 3 || p.LastSeq != 10 {
		t.Fatalf("first page %+v %v", p, err)
	}
	p, err = f.p.Timeline(ctx, "acme", "ex_t1", p.Next, 100)
	if err != nil || len(p.Entries) != 4 || p.Entries[0].Seq != 7 || p.Next != 0 {
		t.Fatalf("last page %+v %v", p, err)
	}
	if p, _ = f.p.Timeline(ctx, "acme", "ex_t1", 10, 0); len(p.Entries) != 0 || p.Next != 0 {
		t.Fatalf("after the newest %+v", p)
	}
	_, err = f.p.Timeline(ctx, "acme", "ex_t1", 0, MaxTimelineLimit+1)
	refusal(t, "limit", err, Invalid, "invalid_limit")
	_, err = f.p.Timeline(ctx, "other", "ex_t1", 0, 0)
	refusal(t, "another tenant's", err, NotFound, "execution_not_found")
}

func TestFollowStatus(t *testing.T) {
	f := newFixture(t).withLive()
	ctx, cancel := context.WithCancel(context.Background())
	items := make(chan LiveItem, 10)
	done := make(chan error, 1)
	go func() {
		done <- f.p.FollowStatus(ctx, "acme", StatusFilter{FlowID: "ask"}, time.Minute, time.Minute, func(it LiveItem) error { items <- it; return nil })
	}()
	if it := <-items; it.Kind != LiveReady {
		t.Fatalf("first %s", it.Kind)
	}
	for _, flow := range []string{"other", "ask"} {
		b, _ := json.Marshal(store.LiveEvent{ExecutionID: "ex_" + flow, TenantID: "acme", FlowID: flow, Status: state.Completed, Seq: 3, Event: "completed"})
		if err := f.p.d.Live.PublishStatus(ctx, "acme", "ex_"+flow, b); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case it := <-items:
		if it.Kind != LiveStatus || it.Event.ExecutionID != "ex_ask" {
			t.Fatalf("want the change of flow ask only, got %s %+v", it.Kind, it.Event)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no status change")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("FollowStatus returned %v", err)
	}
}
