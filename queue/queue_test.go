package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEnqueueRejectsStartWithoutExecutionID(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	e := startEnv("f")
	e.ExecutionID = ""
	_, err := Enqueue(testCtx(t), Redis(b.c), b.q.Stream(), e)
	if !errors.Is(err, ErrMissingExecutionID) || !errors.Is(err, ErrInvalidEnvelope) {
		t.Fatalf("want ErrMissingExecutionID, got %v", err)
	}
	if n := b.xlen(t, b.q.Stream()); n != 0 {
		t.Fatalf("a refused envelope was written (%d entries)", n)
	}
}

func TestEnqueueStampsAndReadDecodes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	e := startEnv("f")
	e.TenantID = "acme"
	id := b.enqueue(t, e)
	d := b.readOne(t, b.q, "w1")
	if d.ID != id || d.Err != nil || d.Count != 1 || d.Reclaimed {
		t.Fatalf("delivery %+v", d)
	}
	got := d.Envelope
	if got.SchemaVersion != SchemaVersion || got.CreatedAt.IsZero() || got.ExecutionID != e.ExecutionID ||
		got.Tenant() != "acme" || string(got.Input) != `{"n":1}` {
		t.Fatalf("envelope %+v", got)
	}
	if v := b.q.Gate(d); v != VerdictRun {
		t.Fatalf("gate: %s", v)
	}
	if err := b.q.Ack(testCtx(t), d); err != nil {
		t.Fatal(err)
	}
	dep, err := b.q.Depth(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if dep != (Depth{}) {
		t.Fatalf("after ack: %+v", dep)
	}
	want := fmt.Sprintf(`plaita_queue_acked_total{queue=%q} 1`, b.q.Stream())
	if !strings.Contains(promText(b.set), want) {
		t.Fatalf("metrics lack %s:\n%s", want, promText(b.set))
	}
	// Legacy (no generation fields) is counted.
	if s := b.q.Stats(); s.Legacy != 1 || s.Acked != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestReadBlockTimeoutIsEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	start := time.Now()
	ds, err := b.q.Read(testCtx(t), "w1", 10, 60*time.Millisecond)
	if err != nil || len(ds) != 0 {
		t.Fatalf("got %v, %v", ds, err)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("returned after %s: did not block", el)
	}
	// A blocked reader wakes up for a new entry.
	var wg sync.WaitGroup
	wg.Add(1)
	var got []Delivery
	go func() {
		defer wg.Done()
		got, err = b.q.Read(testCtx(t), "w1", 10, 5*time.Second)
	}()
	time.Sleep(50 * time.Millisecond)
	b.enqueue(t, startEnv("f"))
	wg.Wait()
	if err != nil || len(got) != 1 {
		t.Fatalf("blocked read got %d, %v", len(got), err)
	}
}

func TestReadWithoutGroup(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q, _, _ := b.newQueue(t, map[string]string{"PLAITA_CONSUMER_GROUP": "nobody"})
	if _, err := q.Read(testCtx(t), "w1", 1, 0); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("want ErrNoGroup, got %v", err)
	}
}

func TestEnsureGroupWarnsAboutReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for range 3 {
		b.enqueue(t, startEnv("f"))
	}
	q, _, logs := b.newQueue(t, map[string]string{"PLAITA_CONSUMER_GROUP": "g2"})
	if err := q.EnsureGroup(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if l := logs.String(); !strings.Contains(l, `"level":"warn"`) || !strings.Contains(l, `"replay_entries":3`) {
		t.Fatalf("no replay warning: %s", l)
	}
	// Second time: BUSYGROUP is fine and says nothing.
	if err := q.EnsureGroup(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "group_created"); n != 1 {
		t.Fatalf("%d group_created lines", n)
	}
	// A group at $ replays nothing and does not warn.
	q3, _, logs3 := b.newQueue(t, map[string]string{"PLAITA_CONSUMER_GROUP": "g3", "PLAITA_CONSUMER_GROUP_START_ID": "$"})
	if err := q3.EnsureGroup(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs3.String(), `"level":"warn"`) {
		t.Fatalf("warned for $: %s", logs3.String())
	}
	if ds := b.read(t, q3, "w1", 10); len(ds) != 0 {
		t.Fatalf("group at $ read %d old entries", len(ds))
	}
}

// A consumer that dies mid-task (read, no ack): another consumer reclaims it after the claim
// idle time, with the delivery count of the pending list.
func TestDeadConsumerIsReclaimed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	id := b.enqueue(t, startEnv("f"))
	d1 := b.readOne(t, b.q, "dead")
	// Not idle long enough yet.
	if ds, err := b.q.Reclaim(testCtx(t), "alive", 10); err != nil || len(ds) != 0 {
		t.Fatalf("reclaimed a fresh delivery: %v %v", ds, err)
	}
	other, _, _ := b.newQueue(t, nil)
	d2 := b.reclaimOne(t, other, "alive")
	if d2.ID != id || d2.Count != 2 || !d2.Reclaimed || d2.Consumer != "alive" || d2.Envelope.ExecutionID != d1.Envelope.ExecutionID {
		t.Fatalf("reclaimed %+v", d2)
	}
	if c, n := b.pendingOf(t, id); c != "alive" || n != 2 {
		t.Fatalf("pending owner %q count %d", c, n)
	}
	if err := other.Ack(testCtx(t), d2); err != nil {
		t.Fatal(err)
	}
	if s := other.Stats(); s.Reclaimed != 1 || s.Acked != 1 {
		t.Fatalf("stats %+v", s)
	}
	if n := b.xlen(t, b.q.Stream()); n != 0 {
		t.Fatalf("stream keeps %d entries", n)
	}
}

// Pending entries whose stream entry was deleted are dropped from the pending list, not
// handed out.
func TestReclaimDropsDeletedEntries(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	id := b.enqueue(t, startEnv("f"))
	b.readOne(t, b.q, "dead")
	b.makeIdle(t) // before the XDEL: an XCLAIM of a deleted entry drops it from the PEL itself
	if err := b.c.Do(testCtx(t), b.c.B().Xdel().Key(b.q.Stream()).Id(id).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	ds, err := b.q.Reclaim(testCtx(t), "alive", 10)
	if err != nil || len(ds) != 0 {
		t.Fatalf("got %v %v", ds, err)
	}
	if c, _ := b.pendingOf(t, id); c != "" {
		t.Fatal("deleted entry still pending")
	}
}

// The reclaim cursor moves past entries it leaves alone, so gated entries at the head of the
// pending list do not hide claimable ones behind them.
func TestReclaimCursorPassesGatedEntries(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for range 3 {
		e := startEnv("f")
		e.ConfigFamily = "cf1-other"
		b.enqueue(t, e)
	}
	want := b.enqueue(t, startEnv("f"))
	b.read(t, b.q, "dead", 10)
	b.makeIdle(t)
	var got []Delivery
	for range 4 {
		ds, err := b.q.Reclaim(testCtx(t), "alive", 2)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ds...)
	}
	if len(got) != 1 || got[0].ID != want {
		t.Fatalf("reclaimed %v, want only %s", got, want)
	}
	if s := b.q.Stats(); s.FamilyMismatch != 3 {
		t.Fatalf("family mismatch counted %d times, want once per entry", s.FamilyMismatch)
	}
}

// After PLAITA_MAX_DELIVERIES the message goes to the DLQ with its reason, and the DLQ is
// trimmed to exactly PLAITA_DLQ_MAX_LEN.
func TestMaxDeliveriesDeadLettersAndTrims(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"PLAITA_MAX_DELIVERIES": "2", "PLAITA_DLQ_MAX_LEN": "2"})
	var mu sync.Mutex
	var alerts []DeadLetterInfo
	b.q.OnDeadLetter = func(i DeadLetterInfo) { mu.Lock(); alerts = append(alerts, i); mu.Unlock() }

	var ids []string
	for i := range 3 {
		ids = append(ids, b.enqueue(t, startEnv(fmt.Sprint("f", i))))
	}
	for _, d := range b.read(t, b.q, "a", 10) {
		if v := b.q.Gate(d); v != VerdictRun {
			t.Fatalf("first delivery: %s", v)
		}
	}
	for round, want := range []Verdict{VerdictRun, VerdictDeadLetterMaxDeliveries} {
		b.makeIdle(t)
		ds, err := b.q.Reclaim(testCtx(t), "b", 10)
		if err != nil || len(ds) != 3 {
			t.Fatalf("round %d: reclaimed %d, %v", round, len(ds), err)
		}
		for _, d := range ds {
			if d.Count != int64(round+2) {
				t.Fatalf("round %d: count %d", round, d.Count)
			}
			if v := b.q.Gate(d); v != want {
				t.Fatalf("round %d: gate %s, want %s", round, v, want)
			}
			if want != VerdictRun {
				if err := b.q.Apply(testCtx(t), d, VerdictDeadLetterMaxDeliveries); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if n := b.xlen(t, b.q.DLQKey()); n != 2 {
		t.Fatalf("DLQ holds %d entries, want 2 (trimmed)", n)
	}
	if n := b.xlen(t, b.q.Stream()); n != 0 {
		t.Fatalf("stream keeps %d entries", n)
	}
	es := b.dlq(t)
	if es[0].SourceID != ids[2] || es[1].SourceID != ids[1] {
		t.Fatalf("DLQ keeps %s, %s; want the newest two", es[0].SourceID, es[1].SourceID)
	}
	for _, e := range es {
		if e.Reason != "max_deliveries=2" || e.DeliveryCount != 3 || e.SchemaVersion != 1 || !e.HasPayload ||
			e.Queue != b.q.Stream() || e.ExecutionID == "" || e.DeadLetteredAt.IsZero() {
			t.Fatalf("DLQ entry %+v", e)
		}
	}
	if len(alerts) != 3 || alerts[2].TrimmedCount != 1 || alerts[2].DLQLength != 2 || alerts[2].DLQMaxLen != 2 {
		t.Fatalf("alerts %+v", alerts)
	}
	if s := b.q.Stats(); s.DeadLettered != 3 || s.Acked != 3 {
		t.Fatalf("stats %+v", s)
	}
}

func TestMalformedEntriesAreDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.xadd(t, "*", "garbage", "x")                                      // no payload field
	b.xadd(t, "*", PayloadField, "not json")                            // bad JSON
	b.xadd(t, "*", PayloadField, `{"schema_version":1,"kind":"start"}`) // no flow_id
	b.xadd(t, "*", PayloadField, `{"schema_version":"1","kind":"start","flow_id":"f","execution_id":"ex_1"}`)
	b.xadd(t, "*", PayloadField, `[1,2]`)
	ds := b.read(t, b.q, "w1", 10)
	if len(ds) != 5 {
		t.Fatalf("read %d", len(ds))
	}
	for _, d := range ds {
		if !errors.Is(d.Err, ErrMalformed) {
			t.Fatalf("%s: err %v", d.Payload, d.Err)
		}
		v := b.q.Gate(d)
		if v != VerdictDeadLetterMalformed {
			t.Fatalf("%s: gate %s", d.Payload, v)
		}
		if err := b.q.Apply(testCtx(t), d, v); err != nil {
			t.Fatal(err)
		}
	}
	es := b.dlq(t)
	if len(es) != 5 {
		t.Fatalf("DLQ holds %d", len(es))
	}
	for _, e := range es {
		if e.Reason != ReasonMalformed || e.Detail == "" {
			t.Fatalf("DLQ entry %+v", e)
		}
	}
	if last := es[len(es)-1]; last.HasPayload {
		t.Fatalf("the entry without payload got one: %+v", last)
	}
	if s := b.q.Stats(); s.Malformed != 5 || s.DeadLettered != 5 {
		t.Fatalf("stats %+v", s)
	}
	if n := b.xlen(t, b.q.Stream()); n != 0 {
		t.Fatalf("stream keeps %d entries", n)
	}
}

func TestTooOldTasksAreDropped(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"PLAITA_TASK_MAX_AGE_SECONDS": "3600"})
	// Stream id and created_at both known: the later one counts.
	old := startEnv("f")
	old.CreatedAt = time.Now().Add(-2 * time.Hour)
	b.enqueue(t, old) // stream id time is now: runs
	d := b.readOne(t, b.q, "w1")
	if v := b.q.Gate(d); v != VerdictRun {
		t.Fatalf("fresh stream id: %s", v)
	}
	b.q.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if v := b.q.Gate(d); v != VerdictDropTooOld {
		t.Fatalf("two hours later: %s", v)
	}
	// 0 turns the gate off.
	off, _, _ := b.newQueue(t, map[string]string{"PLAITA_TASK_MAX_AGE_SECONDS": "0"})
	off.Now = b.q.Now
	if v := off.Gate(d); v != VerdictRun {
		t.Fatalf("gate off: %s", v)
	}
	if err := b.q.Apply(testCtx(t), d, VerdictDropTooOld); err != nil {
		t.Fatal(err)
	}
	if s := b.q.Stats(); s.TooOld != 1 || s.Acked != 1 {
		t.Fatalf("stats %+v", s)
	}
	if l := b.logs.String(); !strings.Contains(l, `"event":"queue.too_old"`) || !strings.Contains(l, `"level":"warn"`) {
		t.Fatalf("no warning: %s", l)
	}
	if n := b.xlen(t, b.q.Stream()); n != 0 {
		t.Fatalf("stream keeps %d entries", n)
	}
}

func TestUnknownAgeIsDroppedFailClosed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// An explicit id carries no time, and the payload has no created_at.
	b.xadd(t, "0-1", PayloadField, `{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1"}`)
	d := b.readOne(t, b.q, "w1")
	if _, ok := b.q.Age(d); ok {
		t.Fatal("age known")
	}
	if v := b.q.Gate(d); v != VerdictDropTooOld {
		t.Fatalf("gate %s", v)
	}
	off, _, _ := b.newQueue(t, map[string]string{"PLAITA_TASK_MAX_AGE_SECONDS": "0"})
	if v := off.Gate(d); v != VerdictRun {
		t.Fatalf("gate off: %s", v)
	}
}

func TestNewerSchemaIsDeadLetteredOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	payload := fmt.Sprintf(`{"schema_version":%d,"kind":"start","flow_id":"f","execution_id":"ex_new","whatever":{"changed":true}}`,
		SchemaVersion+1)
	id := b.xadd(t, "*", PayloadField, payload)
	d := b.readOne(t, b.q, "w1")
	if !errors.Is(d.Err, ErrNewerSchema) {
		t.Fatalf("err %v", d.Err)
	}
	if _, err := b.q.Requeue(testCtx(t), d, nil); err == nil {
		t.Fatal("a newer-schema message was cloned")
	}
	v := b.q.Gate(d)
	if v != VerdictDeadLetterNewerSchema {
		t.Fatalf("gate %s", v)
	}
	if err := b.q.Apply(testCtx(t), d, v); err != nil {
		t.Fatal(err)
	}
	// The same source again (as if its ack had failed): acked, not dead-lettered twice.
	if err := b.q.DeadLetter(testCtx(t), d, ReasonNewerSchema); err != nil {
		t.Fatal(err)
	}
	es := b.dlq(t)
	if len(es) != 1 || es[0].Reason != ReasonNewerSchema || es[0].SourceID != id || es[0].Payload != payload ||
		es[0].SchemaVersion != SchemaVersion+1 || es[0].ExecutionID != "ex_new" {
		t.Fatalf("DLQ %+v", es)
	}
	if n := b.xlen(t, b.q.Stream()); n != 0 {
		t.Fatalf("stream keeps %d entries: cloned?", n)
	}
	if s := b.q.Stats(); s.NewerSchema != 1 || s.DeadLettered != 1 {
		t.Fatalf("stats %+v", s)
	}
	// This build cannot replay it; the marker is not burned for the upgraded one.
	if _, err := b.q.Replay(testCtx(t), es[0].ID); !errors.Is(err, ErrReplayRefused) {
		t.Fatalf("replay: %v", err)
	}
	if n, _ := b.c.Do(testCtx(t), b.c.B().Exists().Key(b.q.replayedKey(es[0].ID)).Build()).AsInt64(); n != 0 {
		t.Fatal("refused replay left its marker")
	}
}

// Family mismatch: the first delivery is not executed, the message stays pending with no
// delivery burned, reclaim does not claim it, and a worker of its family takes it.
func TestFamilyMismatchStaysPending(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// Another DLQ key is another config family on the same stream and group.
	other, _, _ := b.newQueue(t, map[string]string{"PLAITA_DLQ_KEY": b.root + ":other:dlq"})
	if other.Generations().Family == b.q.Generations().Family {
		t.Fatal("same family")
	}
	e := startEnv("f")
	e.Stamp(other.Generations(), time.Now())
	id := b.enqueue(t, e)

	d := b.readOne(t, b.q, "w1")
	v := b.q.Gate(d)
	if v != VerdictLeavePendingFamilyMismatch {
		t.Fatalf("gate %s", v)
	}
	if err := b.q.Apply(testCtx(t), d, v); err != nil {
		t.Fatal(err)
	}
	if c, n := b.pendingOf(t, id); c != "w1" || n != 0 {
		t.Fatalf("pending %q count %d: want w1 with no delivery burned", c, n)
	}
	b.makeIdle(t)
	for range 3 {
		if ds, err := b.q.Reclaim(testCtx(t), "w2", 10); err != nil || len(ds) != 0 {
			t.Fatalf("reclaimed %v %v", ds, err)
		}
	}
	if c, n := b.pendingOf(t, id); c != "w1" || n != 0 {
		t.Fatalf("after reclaim: pending %q count %d (claimed?)", c, n)
	}
	if s := b.q.Stats(); s.FamilyMismatch != 1 {
		t.Fatalf("family mismatch %d, want 1", s.FamilyMismatch)
	}
	if l := b.logs.String(); !strings.Contains(l, `"event":"queue.config_family_mismatch"`) {
		t.Fatalf("no warning: %s", l)
	}
	// A worker of the message's family takes it, as its first real delivery.
	got := b.reclaimOne(t, other, "w3")
	if got.ID != id || got.Count != 1 || other.Gate(got) != VerdictRun {
		t.Fatalf("matching worker got %+v (%s)", got, other.Gate(got))
	}
}

// Budget mismatch: the old PEL entry stays pending for a worker of its budget generation.
func TestBudgetStaleStaysPending(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	old, _, _ := b.newQueue(t, map[string]string{"PLAITA_MAX_DELIVERIES": "9"})
	if old.Generations().Family != b.q.Generations().Family || old.Generations().Budget == b.q.Generations().Budget {
		t.Fatal("want same family, other budget")
	}
	e := startEnv("f")
	e.Stamp(old.Generations(), time.Now())
	id := b.enqueue(t, e)
	d := b.readOne(t, old, "w-old")
	if old.Gate(d) != VerdictRun {
		t.Fatal("own generation gated")
	}
	// The old worker dies; the new one sees the entry but leaves it.
	b.makeIdle(t)
	if ds, err := b.q.Reclaim(testCtx(t), "w-new", 10); err != nil || len(ds) != 0 {
		t.Fatalf("reclaimed %v %v", ds, err)
	}
	if c, n := b.pendingOf(t, id); c != "w-old" || n != 1 {
		t.Fatalf("pending %q count %d", c, n)
	}
	if s := b.q.Stats(); s.BudgetStale != 1 {
		t.Fatalf("budget stale %d", s.BudgetStale)
	}
	// A first delivery stamped with another budget runs: producers stamp their own budget,
	// and a budget change is not an incompatibility.
	b.enqueue(t, e)
	d2 := b.readOne(t, b.q, "w-new")
	if v := b.q.Gate(d2); v != VerdictRun {
		t.Fatalf("first delivery of another budget: gate %s, want run", v)
	}
	// Its redelivery, by contrast, belongs to the old budget's PEL: left pending, no delivery
	// burned.
	d2.Count, d2.Reclaimed = 2, true
	if v := b.q.Gate(d2); v != VerdictLeavePendingBudgetStale {
		t.Fatalf("redelivery of another budget: gate %s", v)
	}
	if err := b.q.Apply(testCtx(t), d2, VerdictLeavePendingBudgetStale); err != nil {
		t.Fatal(err)
	}
	if _, n := b.pendingOf(t, d2.ID); n != 1 {
		t.Fatalf("delivery burned: count %d", n)
	}
	got := b.reclaimOne(t, old, "w-old2")
	if got.ID != id || got.Count != 2 {
		t.Fatalf("old generation worker got %+v", got)
	}
}

func TestLegacyMessagesRun(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// Python-era payload: no generations, numeric flow_version and created_at, no tenant.
	b.xadd(t, "*", PayloadField, fmt.Sprintf(`{"schema_version":1,"kind":"resume","flow_id":"f","flow_version":3,
		"execution_id":"ex_legacy","resume_type":"event","resume_data":{"k":1},"created_at":%d}`, time.Now().Unix()))
	d := b.readOne(t, b.q, "w1")
	if d.Err != nil || !d.Envelope.Legacy() || d.Envelope.FlowVersion != "3" || d.Envelope.Tenant() != "default" {
		t.Fatalf("delivery %+v", d)
	}
	if v := b.q.Gate(d); v != VerdictRun {
		t.Fatalf("gate %s", v)
	}
	if s := b.q.Stats(); s.Legacy != 1 || s.FamilyMismatch != 0 || s.BudgetStale != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// Requeue keeps the source's schema_version and generations whatever the mutation does,
// keeps unknown fields, names its source and acks it.
func TestRequeueInherits(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gens := b.q.Generations() // the queue's own, so the gate lets it through
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	src := fmt.Sprintf(`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_req","config_family":%q,
		"config_generation":%q,"budget_generation":%q,"config_effective_at":%q,"future_field":{"a":[1,2]}}`,
		gens.Family, gens.Config, gens.Budget, at.Format(time.RFC3339))
	srcID := b.xadd(t, "*", PayloadField, src)
	d := b.readOne(t, b.q, "w1")
	if d.Err != nil {
		t.Fatal(d.Err)
	}
	newID, err := b.q.Requeue(testCtx(t), d, func(e *Envelope) {
		e.TargetInstanceID = "worker-7"
		e.QuotaDeferCount++
		e.SchemaVersion = 99
		e.ConfigFamily = "cf1-forged"
		e.BudgetGeneration = ""
	})
	if err != nil {
		t.Fatal(err)
	}
	c := b.readOne(t, b.q, "w1")
	if c.ID != newID || c.Err != nil {
		t.Fatalf("copy %+v", c)
	}
	ce := c.Envelope
	if ce.SchemaVersion != 1 || ce.ConfigFamily != gens.Family || ce.BudgetGeneration != gens.Budget ||
		ce.ConfigGeneration != gens.Config || !ce.ConfigEffectiveAt.Equal(at) || ce.SourceMessageID != srcID ||
		ce.TargetInstanceID != "worker-7" || ce.QuotaDeferCount != 1 || ce.ExecutionID != "ex_req" {
		t.Fatalf("copy envelope %+v", ce)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(c.Payload), &m); err != nil || string(m["future_field"]) != `{"a":[1,2]}` {
		t.Fatalf("unknown field lost: %s", c.Payload)
	}
	if c, _ := b.pendingOf(t, srcID); c != "" {
		t.Fatal("source still pending")
	}
	if n := b.xlen(t, b.q.Stream()); n != 1 {
		t.Fatalf("stream holds %d entries, want the copy only", n)
	}
}

// A DLQ replay happens once, inherits the source's schema_version and generations, and an
// id-less legacy start gets the deterministic id its first delivery used.
func TestReplayExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	srcID := b.xadd(t, "*", PayloadField, `{"schema_version":1,"kind":"start","flow_id":"f","input":{"x":1},"config_family":"cf1-legacyprod"}`)
	d := b.readOne(t, b.q, "w1")
	want := DeterministicExecutionID(b.q.Stream(), srcID)
	if d.Err != nil || !d.DerivedExecutionID || d.Envelope.ExecutionID != want {
		t.Fatalf("delivery %+v", d)
	}
	if err := b.q.DeadLetter(testCtx(t), d, "operator test"); err != nil {
		t.Fatal(err)
	}
	es := b.dlq(t)
	if len(es) != 1 {
		t.Fatalf("DLQ %v", es)
	}
	if _, err := b.q.Replay(testCtx(t), "1-1"); !errors.Is(err, ErrDLQEntryNotFound) {
		t.Fatalf("missing entry: %v", err)
	}
	var wg sync.WaitGroup
	results := make([]ReplayResult, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.q.Replay(testCtx(t), es[0].ID)
			if err != nil {
				t.Error(err)
			}
			results[i] = r
		}()
	}
	wg.Wait()
	done := 0
	var queueID string
	for _, r := range results {
		if r.Status == ReplayDone {
			done++
			queueID = r.QueueID
			if r.ExecutionID != want || !r.DerivedExecutionID || r.SchemaVersion != 1 || r.SourceMessageID != srcID {
				t.Fatalf("result %+v", r)
			}
		} else if r.Status != ReplayAlreadyReplayed {
			t.Fatalf("status %q", r.Status)
		}
	}
	if done != 1 {
		t.Fatalf("%d replays enqueued", done)
	}
	r, err := b.q.Replay(testCtx(t), es[0].ID)
	if err != nil || r.Status != ReplayAlreadyReplayed || r.QueueID != queueID {
		t.Fatalf("second replay %+v %v", r, err)
	}
	ds := b.read(t, b.q, "w1", 10)
	if len(ds) != 1 {
		t.Fatalf("%d replayed tasks", len(ds))
	}
	got := ds[0].Envelope
	if ds[0].ID != queueID || got.ExecutionID != want || got.SchemaVersion != 1 || got.ConfigFamily != "cf1-legacyprod" ||
		got.SourceMessageID != srcID || string(got.Input) != `{"x":1}` {
		t.Fatalf("replayed %+v", got)
	}
	// The replayed copy carries its id now: no second derivation.
	if ds[0].DerivedExecutionID {
		t.Fatal("derived again")
	}
}

func TestGateOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"PLAITA_MAX_DELIVERIES": "1"})
	g := b.q.Generations()
	fresh := fmt.Sprintf("%d-0", time.Now().UnixMilli())
	newer := fmt.Errorf("%w: 2 > 1", ErrNewerSchema)
	bad := fmt.Errorf("%w: x", ErrMalformed)
	cases := []struct {
		name string
		d    Delivery
		want Verdict
	}{
		{"family before newer schema", Delivery{ID: fresh, Count: 1, Err: newer, Envelope: Envelope{ConfigFamily: "cf1-x"}}, VerdictLeavePendingFamilyMismatch},
		{"family before malformed", Delivery{ID: fresh, Count: 1, Err: bad, Envelope: Envelope{ConfigFamily: "cf1-x"}}, VerdictLeavePendingFamilyMismatch},
		{"budget before malformed", Delivery{ID: fresh, Count: 2, Reclaimed: true, Err: bad, Envelope: Envelope{ConfigFamily: g.Family, BudgetGeneration: "bg1-x"}}, VerdictLeavePendingBudgetStale},
		{"budget never gates a first delivery", Delivery{ID: fresh, Count: 1, Envelope: Envelope{ConfigFamily: g.Family, BudgetGeneration: "bg1-x"}}, VerdictRun},
		{"newer schema", Delivery{ID: fresh, Count: 9, Err: newer}, VerdictDeadLetterNewerSchema},
		{"malformed", Delivery{ID: fresh, Count: 9, Err: bad}, VerdictDeadLetterMalformed},
		{"too old before max deliveries", Delivery{ID: "1000-0", Count: 9}, VerdictDropTooOld},
		{"max deliveries", Delivery{ID: fresh, Count: 2}, VerdictDeadLetterMaxDeliveries},
		{"last allowed delivery runs", Delivery{ID: fresh, Count: 1}, VerdictRun},
		{"same generations run", Delivery{ID: fresh, Count: 1, Envelope: Envelope{ConfigFamily: g.Family, BudgetGeneration: g.Budget}}, VerdictRun},
	}
	for _, tc := range cases {
		if got := b.q.Gate(tc.d); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
