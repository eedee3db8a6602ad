package control

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"plaita/queue"
)

// drainFixture is a fixture with a legacy List under its root.
type drainFixture struct {
	*fixture
	list string
}

func newDrainFixture(t *testing.T) *drainFixture {
	f := newFixture(t)
	return &drainFixture{fixture: f, list: f.root + ":legacy:queue"}
}

func (f *drainFixture) push(items ...string) {
	f.t.Helper()
	if err := f.c.Do(context.Background(), f.c.B().Rpush().Key(f.list).Element(items...).Build()).Error(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *drainFixture) llen(key string) int64 {
	f.t.Helper()
	n, err := f.c.Do(context.Background(), f.c.B().Llen().Key(key).Build()).AsInt64()
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// stream reads the task stream's envelopes, in order.
func (f *drainFixture) stream() []queue.Envelope {
	f.t.Helper()
	es, err := f.c.Do(context.Background(), f.c.B().Xrange().Key(f.q.Stream()).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		f.t.Fatal(err)
	}
	var out []queue.Envelope
	for _, e := range es {
		env, _, err := queue.Decode(f.q.Stream(), e.ID, []byte(e.FieldValues[queue.PayloadField]))
		if err != nil {
			f.t.Fatalf("entry %s does not decode: %v", e.ID, err)
		}
		out = append(out, env)
	}
	return out
}

func (f *drainFixture) drain(dry bool) DrainListReport {
	f.t.Helper()
	rep, err := f.p.DrainList(context.Background(), DrainListRequest{List: f.list, Batch: 2, DryRun: dry})
	if err != nil {
		f.t.Fatalf("drain (dry %v): %v", dry, err)
	}
	return rep
}

const (
	legacyStart   = `{"schema_version":1,"kind":"start","flow_id":"ask","flow_version":"1","execution_id":"ex_a","input":{"n":1}}`
	legacyNoID    = `{"kind":"start","flow_id":"ask","flow_version":"1","input":{"n":2}}`
	legacyResume  = `{"schema_version":1,"kind":"resume","execution_id":"ex_b","resume_type":"continue"}`
	legacyNewer   = `{"schema_version":99,"kind":"start","flow_id":"ask","execution_id":"ex_c"}`
	legacyNotJSON = `RPUSH-era garbage`
)

// Every item of the List goes to the stream once, in order; a byte-identical item is one task;
// an id-less start gets the same deterministic id a dry run shows; what cannot become a task is
// set aside, not dropped; the copies stay legacy (never gated), as every copy of a message does.
func TestDrainListSendsEachItemOnce(t *testing.T) {
	f := newDrainFixture(t)
	f.push(legacyStart, legacyNoID, legacyResume, legacyStart, legacyNotJSON, legacyNewer)

	dry := f.drain(true)
	if dry.Sent != 3 || dry.AlreadySent != 1 || dry.Rejected != 2 || dry.Starts != 2 || dry.Resumes != 1 || dry.DerivedIDs != 1 {
		t.Fatalf("dry run counted %+v", dry)
	}
	if n := f.llen(f.list); n != 6 || len(f.stream()) != 0 || f.llen(dry.RejectedList) != 0 {
		t.Fatalf("the dry run wrote: List %d, stream %d, rejected %d", n, len(f.stream()), f.llen(dry.RejectedList))
	}

	rep := f.drain(false)
	if rep.Sent != 3 || rep.AlreadySent != 1 || rep.Rejected != 2 || rep.Before.Length != 6 || !strings.HasSuffix(rep.ProcessingList, ":drain:processing") {
		t.Fatalf("drain %+v", rep)
	}
	if rep.After.Length != 0 || rep.After.Processing != 0 || rep.After.Rejected != 2 || rep.Drained() {
		t.Fatalf("after the drain %+v (drained %v)", rep.After, rep.Drained())
	}
	got := f.stream()
	if len(got) != 3 || got[0].ExecutionID != "ex_a" || got[2].ExecutionID != "ex_b" || got[2].Kind != queue.KindResume {
		t.Fatalf("stream %+v", got)
	}
	derived := got[1].ExecutionID
	if !strings.HasPrefix(derived, "ex_") || string(got[1].Input) != `{"n":2}` || got[1].SchemaVersion != 1 {
		t.Fatalf("the id-less start: %+v", got[1])
	}
	for _, env := range got {
		if !env.Legacy() {
			t.Errorf("a drained copy was stamped with generations: %+v", env)
		}
	}
	rejected, _ := f.c.Do(context.Background(), f.c.B().Lrange().Key(rep.RejectedList).Start(0).Stop(-1).Build()).AsStrSlice()
	if len(rejected) != 2 || rejected[0] != legacyNotJSON || rejected[1] != legacyNewer || len(rep.RejectedItems) != 2 {
		t.Fatalf("rejected list %q, report %+v", rejected, rep.RejectedItems)
	}

	// A second run: nothing left, nothing sent.
	again := f.drain(false)
	if again.Sent != 0 || again.AlreadySent != 0 || len(f.stream()) != 3 {
		t.Fatalf("a second drain %+v, stream %d", again, len(f.stream()))
	}
	// The same item pushed again (a producer not stopped) is found by its marker: no second task.
	f.push(legacyNoID)
	if late := f.drain(false); late.Sent != 0 || late.AlreadySent != 1 || len(f.stream()) != 3 {
		t.Fatalf("an item sent before, pushed again: %+v", late)
	}
}

// A drain killed at each point between its steps is finished by the next run, which sends
// nothing twice and loses nothing: after the LMOVE (the item waits on the processing list, not
// yet sent) and after the send (sent, not yet removed from the processing list).
func TestDrainListRerunAfterACrash(t *testing.T) {
	f := newDrainFixture(t)
	ctx := context.Background()
	one := func(i int) string {
		b, _ := json.Marshal(map[string]any{"schema_version": 1, "kind": "start", "flow_id": "ask", "execution_id": "ex_" + string(rune('a'+i))})
		return string(b)
	}
	f.push(one(0), one(1), one(2), one(3))
	d, err := f.q.ListDrain(f.list)
	if err != nil {
		t.Fatal(err)
	}
	// Killed after the send: ex_a is in the stream and still on the processing list.
	taken, err := d.Take(ctx, 1)
	if err != nil || len(taken) != 1 {
		t.Fatalf("take: %v %v", taken, err)
	}
	if sent, err := d.Send(ctx, []queue.ListItem{d.Read(taken[0])}); err != nil || sent[0].Already {
		t.Fatalf("send: %+v %v", sent, err)
	}
	rep := f.drain(false)
	if rep.Before.Processing != 1 || rep.Sent != 3 || rep.AlreadySent != 1 || len(f.stream()) != 4 || !rep.Drained() {
		t.Fatalf("the run after a crash past the send: %+v, stream %d", rep, len(f.stream()))
	}

	// Killed after the LMOVE: ex_e waits on the processing list, in no stream entry.
	f.push(one(4), one(5))
	if taken, err = d.Take(ctx, 1); err != nil || len(taken) != 1 || taken[0] != one(4) {
		t.Fatalf("take: %v %v", taken, err)
	}
	rep = f.drain(false)
	got := f.stream()
	if rep.Sent != 2 || rep.AlreadySent != 0 || len(got) != 6 || got[4].ExecutionID != "ex_e" || got[5].ExecutionID != "ex_f" || !rep.Drained() {
		t.Fatalf("the run after a crash past the LMOVE: %+v, stream %+v", rep, got)
	}
	seen := map[string]bool{}
	for _, env := range got {
		if seen[env.ExecutionID] {
			t.Fatalf("%s is in the stream twice", env.ExecutionID)
		}
		seen[env.ExecutionID] = true
	}
}

// The drain refuses keys it cannot work on, and names them.
func TestDrainListRefusals(t *testing.T) {
	f := newDrainFixture(t)
	ctx := context.Background()
	_, err := f.p.DrainList(ctx, DrainListRequest{List: f.q.Stream()})
	refusal(t, "the List is the stream", err, Invalid, "invalid_list")
	_, err = f.p.DrainList(ctx, DrainListRequest{})
	refusal(t, "no List", err, Invalid, "invalid_list")

	if err := f.c.Do(ctx, f.c.B().Set().Key(f.list).Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	_, err = f.p.DrainList(ctx, DrainListRequest{List: f.list})
	if r := refusal(t, "a string", err, Conflict, "list_drain_refused"); !strings.Contains(r.Message, "holds a string") {
		t.Fatalf("message %q", r.Message)
	}
	_, err = f.p.DrainList(ctx, DrainListRequest{List: f.q.DLQKey()})
	refusal(t, "the dead-letter stream", err, Invalid, "invalid_list")

	// The stream key still holds the legacy List: drain into a new key.
	other := f.root + ":old"
	if err := f.c.Do(ctx, f.c.B().Rpush().Key(other).Element(legacyStart).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Do(ctx, f.c.B().Del().Key(f.q.Stream()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Do(ctx, f.c.B().Rpush().Key(f.q.Stream()).Element(legacyStart).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	_, err = f.p.DrainList(ctx, DrainListRequest{List: other})
	if r := refusal(t, "the stream is a List", err, Conflict, "list_drain_refused"); !strings.Contains(r.Message, "new stream key") {
		t.Fatalf("message %q", r.Message)
	}
	if n := f.llen(other); n != 1 {
		t.Fatalf("a refused drain moved items: %d left", n)
	}
}
