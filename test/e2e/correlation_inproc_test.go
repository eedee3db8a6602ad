//go:build !e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/keys"
)

// Event correlation with the roles in process (docs/events.md, "Correlation"): `plaita worker` and
// `plaita filter` on a private redis-server, driven through the CLI. A wait_event whose match
// has a conjunct EVENT.<path> == <value not read from EVENT> is indexed under that value, and
// an event is checked only against the waits of its values and the uncorrelated waits of its
// type. Every test ends with every matching wait woken exactly once — by its own event: the
// flows end with the tag of the event that woke them — and no other.

// quietReconciler runs the reconciler's start-up pass only, so that the filter's counters
// count each event once (its notification), not again at every pass.
var quietReconciler = map[string]string{"PLAITA_EVENT_RECONCILE_INTERVAL": "300"}

// handled waits until the filter handled n events in all (its notifications counter).
func (s *stack) handled(f *proc, n int) {
	s.t.Helper()
	waitFor(s.t, fmt.Sprintf("%d events handled", n), 60*time.Second, func() bool {
		return f.metric("plaita_filter_events_total") >= n
	}, s.procs...)
}

// Numbers and strings (1, 1.0, "1"), a nested path, a conjunct on either side, && with a
// non-equality term that refuses the event, two correlation terms, an uncorrelated wait beside
// the correlated ones of the same type, and waits whose value is null or an object (so
// uncorrelated): each is woken by its own event only, exactly once.
func TestE2ECorrelationWakesEachWaitByItsValueOnly(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, quietReconciler)
	worker := s.start("worker", nil)
	f := s.filter(nil)
	const typ = "corr"
	num := corrFlow("corr-n", typ, "EVENT.n == INPUT.n")
	nested := corrFlow("corr-nested", typ, "INPUT.order == EVENT.data.order.id")
	amount := corrFlow("corr-amount", typ, "EVENT.order_id == INPUT.order && EVENT.amount >= INPUT.amount")
	two := corrFlow("corr-two", typ, "EVENT.a == INPUT.a && EVENT.b == INPUT.b")
	unc := corrFlow("corr-unc", typ, "EVENT.amount > 1000")
	k := corrFlow("corr-k", typ, "EVENT.k == INPUT.k && EVENT.amount < 0")

	type wait struct {
		name, def, input string
		corr             string // the value it is indexed under ("": none, an uncorrelated wait)
	}
	waits := map[string]wait{
		"a": {"num", num, `{"n":1}`, "1"},
		"b": {"num", num, `{"n":"1"}`, `"1"`},
		"c": {"nested", nested, `{"order":"A1"}`, `"A1"`},
		"d": {"amount", amount, `{"order":"P1","amount":10}`, `"P1"`},
		"e": {"two", two, `{"a":"x","b":"y"}`, `"x"`},
		"f": {"unc", unc, `{}`, ""},
		"g": {"k", k, `{}`, ""},            // INPUT.k is null: no value to index
		"h": {"k", k, `{"k":{"z":1}}`, ""}, // an object: no value to index
	}
	ids := map[string]string{}
	for _, key := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		w := waits[key]
		// Validation warns of a match without a term (corr-unc); corr-k's has one, which
		// the null and the object leave without a value only when the run suspends.
		id, warned := s.corrStart(w.name, w.def, w.input)
		if warned != (w.name == "unc") {
			t.Errorf("%s (%s): validation warning %v", key, w.name, warned)
		}
		ids[key] = id
	}
	for key, id := range ids {
		st := s.waitStatus(id, "", state.Suspended, 60*time.Second)
		got := ""
		if c := st.Suspend.Correlation; len(c) > 0 {
			got = c[0].Value
		}
		if got != waits[key].corr {
			t.Fatalf("%s indexed under %q, want %q (%+v)", key, got, waits[key].corr, st.Suspend.Correlation)
		}
	}
	events := []struct{ data, wakes string }{
		{`{"n":"1","tag":"s1"}`, "b"}, // the string: not the number's
		{`{"n":1.0,"tag":"n1"}`, "a"}, // 1.0 is 1
		{`{"data":{"order":{"id":"A1"}},"tag":"c"}`, "c"},
		{`{"order_id":"P1","amount":5,"tag":"d-low"}`, ""}, // its value, refused by amount >= 10
		{`{"order_id":"P1","amount":12,"tag":"d"}`, "d"},
		{`{"a":"x","b":"z","tag":"e-bad"}`, ""}, // one term of two
		{`{"a":"x","b":"y","tag":"e"}`, "e"},
		{`{"n":99,"amount":5000,"tag":"f"}`, "f"}, // the uncorrelated wait
		{`{"amount":-1,"tag":"g"}`, "g"},          // null == null
		{`{"k":{"z":1},"amount":-5,"tag":"h"}`, "h"},
	}
	woken := map[string]bool{}
	for i, ev := range events {
		s.publishEvent(typ, ev.data)
		s.handled(f, i+1)
		if ev.wakes != "" {
			var data struct{ Tag string }
			if err := json.Unmarshal([]byte(ev.data), &data); err != nil {
				t.Fatal(err)
			}
			s.wokenBy(ids[ev.wakes], data.Tag)
			woken[ev.wakes] = true
		}
		var rest []string
		for key, id := range ids {
			if !woken[key] {
				rest = append(rest, id)
			}
		}
		s.stillWaiting(rest...)
	}
	// The uncorrelated waits were checked against every event, and said so once per flow and node.
	if n := f.metric("plaita_filter_uncorrelated_checked_total"); n < len(events) {
		t.Errorf("%d uncorrelated checks for %d events", n, len(events))
	}
	if n := countLog(f, "filter.uncorrelated_wait", ""); n != 2 {
		t.Errorf("%d filter.uncorrelated_wait lines, want 2 (corr-unc and corr-k)\n%s", n, f.stderr.String())
	}
	if n := countLog(worker, "worker.resume_refused", ""); n != 0 {
		t.Errorf("the worker refused %d resumes: one that does not match reached it\n%s", n, worker.stderr.String())
	}
	// Of the refusals, those of correlated waits are d-low's and e-bad's only: each event was
	// checked against the waits of its values, not against every wait of the type. (Each check
	// of an uncorrelated wait is a refusal or one of the three wake-ups f, g and h.)
	checks := f.metric("plaita_filter_uncorrelated_checked_total")
	if n := f.metric("plaita_filter_no_match_total") - (checks - 3); n != 2 {
		t.Errorf("%d refusals of correlated waits, want the 2 events of their value that fail another conjunct", n)
	}
}

// A loop that waits twice at the same node with another value each time: the first value's
// event wakes the first wait only; published again, it does not reach the second; the second
// value's event does.
func TestE2ECorrelationLoopWaitsTwiceAtOneNode(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, quietReconciler)
	s.start("worker", nil)
	f := s.filter(nil)
	id, _ := s.corrStart("rounds", `{"id":"rounds","start":"w","vars":{"round":1},"nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"round","match":"EVENT.round == VARS.round"},"next":"inc"},
		{"id":"inc","type":"set","params":{"vars":{"round":"{{ VARS.round + 1 }}","last":"{{ EVENT.tag }}"}},"next":"c"},
		{"id":"c","type":"condition","params":{"expr":"VARS.round > 2"},"branches":{"true":"done","false":"w"}},
		{"id":"done","type":"end","params":{"output":"{{ VARS.last }}"}}]}`, `{}`)
	s.waitStatus(id, "", state.Suspended, 60*time.Second)
	s.publishEvent("round", `{"round":1,"tag":"r1"}`)
	waitFor(t, "the second wait, indexed under round 2", 60*time.Second, func() bool {
		st := s.show(id, "")
		return st.Status == state.Suspended && len(st.Suspend.Correlation) == 1 && st.Suspend.Correlation[0].Value == "2"
	}, s.procs...)
	s.publishEvent("round", `{"round":1,"tag":"r1-again"}`)
	s.handled(f, 2)
	if st := s.show(id, ""); st.Status != state.Suspended || resumes(st) != 1 {
		t.Fatalf("round 1 again: %s after %d resumes", st.Status, resumes(st))
	}
	s.publishEvent("round", `{"round":2,"tag":"r2"}`)
	st := s.waitStatus(id, "", state.Completed, 60*time.Second)
	if st.Output != "r2" || resumes(st) != 2 {
		t.Fatalf("output %v after %d resumes, want r2 after 2", st.Output, resumes(st))
	}
}

// An execution cancelled while it waits leaves its bucket member behind (the worker removes no
// wake-up record); the next event of its value finds it stale and removes it, and wakes nothing.
func TestE2ECorrelationCancelledWaitIsRemovedFromItsBucket(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, quietReconciler)
	s.start("worker", nil)
	f := s.filter(nil)
	def := corrFlow("corr-cancel", "corr.cancel", "EVENT.order_id == INPUT.order_id")
	x1, _ := s.corrStart("cancel", def, `{"order_id":"X1"}`)
	x2, _ := s.corrStart("cancel", def, `{"order_id":"X2"}`)
	s.waitStatus(x1, "", state.Suspended, 60*time.Second)
	s.waitStatus(x2, "", state.Suspended, 60*time.Second)
	if r := run(t, s.env, "execution", "cancel", x1, "--quiet"); r.code != 0 {
		t.Fatalf("cancel: exit %d\n%s", r.code, r.stderr)
	}
	s.waitStatus(x1, "", state.Cancelled, 60*time.Second)
	bucket, err := keys.MustFor("", "").SubscriptionBucket("corr.cancel", `["order_id"]`, `"X1"`)
	if err != nil {
		t.Fatal(err)
	}
	c := s.srv.Client(t)
	zcard := func() int64 {
		n, err := c.Do(context.Background(), c.B().Zcard().Key(bucket).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := zcard(); n != 1 {
		t.Fatalf("X1's bucket holds %d members before its event, want its stale one", n)
	}
	s.publishEvent("corr.cancel", `{"order_id":"X1","tag":"x1"}`)
	waitFor(t, "the stale member removed", 60*time.Second, func() bool {
		return f.metric("plaita_filter_stale_subscriptions_total") == 1
	}, s.procs...)
	if n := zcard(); n != 0 {
		t.Errorf("X1's bucket holds %d members after its event", n)
	}
	if st := s.show(x1, ""); st.Status != state.Cancelled || resumes(st) != 0 {
		t.Fatalf("X1 is %s after %d resumes", st.Status, resumes(st))
	}
	s.stillWaiting(x2)
	s.publishEvent("corr.cancel", `{"order_id":"X2","tag":"x2"}`)
	s.wokenBy(x2, "x2")
	if n := f.metric("plaita_filter_wakeups_total"); n != 1 {
		t.Errorf("%d wake-ups, want 1", n)
	}
}

// The window the one-shot markers leave (docs/events.md, "One-shot wake-up markers"): a
// filter killed between enqueuing a wake-up and marking it sent leaves a pending marker, and
// the filter that takes it over after the grace period enqueues a second copy. Here the dead
// filter's copy and its marker are written by the test, the worker stopped meanwhile; the next
// filter takes the claim over and enqueues its copy. The first copy resumes the execution,
// which loops to wait at the same node for the same value — the second copy's data matches
// that wait too, but the copy is for the earlier suspension and the worker refuses it; the next
// event wakes the second wait.
func TestE2ECorrelationSecondCopyOfAWakeUpIsRefused(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, quietReconciler)
	worker := s.start("worker", nil)
	id, _ := s.corrStart("ticks", `{"id":"ticks","start":"w","vars":{"round":0},"nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"tick","match":"EVENT.kind == 'tick'"},"next":"inc"},
		{"id":"inc","type":"set","params":{"vars":{"round":"{{ VARS.round + 1 }}","last":"{{ EVENT.tag }}"}},"next":"c"},
		{"id":"c","type":"condition","params":{"expr":"VARS.round >= 2"},"branches":{"true":"done","false":"w"}},
		{"id":"done","type":"end","params":{"output":"{{ VARS.last }}"}}]}`, `{}`)
	first := s.waitStatus(id, "", state.Suspended, 60*time.Second)
	worker.stop(t)
	evID, _ := s.publishEvent("tick", `{"kind":"tick","tag":"t1"}`, "--id", "evt-t1") // no filter: nobody hears it

	// What the dead filter left: its copy of the resume in the stream, and its claim, pending
	// past the grace period (30 s).
	since := first.Suspend.Since
	c := s.srv.Client(t)
	ctx := context.Background()
	copy1, _ := json.Marshal(map[string]any{"schema_version": 1, "kind": "resume", "tenant_id": "default", "flow_id": "ticks",
		"flow_version": first.FlowVersion, "execution_id": id, "resume_type": "event", "resume_data": map[string]any{"kind": "tick", "tag": "t1"},
		"source_message_id": fmt.Sprintf("event:%s:%d", evID, since.UnixNano())})
	if err := c.Do(ctx, c.B().Xadd().Key("plaita:flow:queue").Id("*").FieldValue().FieldValue("payload", string(copy1)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	marker, err := keys.MustFor("", "").EventWake(id, fmt.Sprint(since.UnixNano()), evID)
	if err != nil {
		t.Fatal(err)
	}
	claim := fmt.Sprintf("pending %d filter-killed", time.Now().Add(-31*time.Second).UnixMilli())
	if err := c.Do(ctx, c.B().Set().Key(marker).Value(claim).Ex(time.Hour).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// The next filter's start-up pass finds the event, the wait still at its first suspension,
	// and the stale claim: it takes it over and enqueues the second copy.
	f := s.filter(nil)
	waitFor(t, "the claim taken over", 60*time.Second, func() bool { return f.metric("plaita_filter_takeovers_total") == 1 }, s.procs...)
	// One consumer: the copies run one after the other, in the stream's order.
	worker = s.start("worker", map[string]string{"PLAITA_WORKER_CONCURRENCY": "1", "PLAITA_CLAIM_MIN_IDLE_MS": "1000"})
	waitFor(t, "the second copy refused", 60*time.Second, func() bool {
		return countLog(worker, "worker.resume_refused", "the event's wake-up was sent for the suspension that began at") == 1
	}, s.procs...)
	st := s.show(id, "")
	if st.Status != state.Suspended || resumes(st) != 1 || st.Suspend.Since.Equal(since) {
		t.Fatalf("after both copies: %s, %d resumes, since %s (first %s)", st.Status, resumes(st), st.Suspend.Since, since)
	}
	s.publishEvent("tick", `{"kind":"tick","tag":"t2"}`)
	done := s.waitStatus(id, "", state.Completed, 60*time.Second)
	if done.Output != "t2" || resumes(done) != 2 {
		t.Fatalf("output %v after %d resumes, want t2 after 2", done.Output, resumes(done))
	}
}
