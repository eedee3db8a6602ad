package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/settings"
)

// The fault suite: real worker processes against a real redis-server with AOF, a few hundred
// executions of flows with side effects and every kind of resume, while a random worker is
// killed with kill -9 every few seconds (and replaced), Redis is killed and restarted once and
// one worker is drained with SIGTERM. At the end every execution is in its expected state,
// none is left running, no execution has two terminal transitions, side effects were replayed
// only by crashes, and the dead-letter stream holds exactly the deliberately malformed entries,
// each once.

// effectServer is the flows' outside world: it counts requests per path (the side effects),
// answers after a random pause (so kills land mid-step), and fails the first request of a
// /once-fail/ path with 500.
type effectServer struct {
	*httptest.Server
	mu     sync.Mutex
	counts map[string]int
}

func newEffectServer(t *testing.T) *effectServer {
	s := &effectServer{counts: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.counts[r.URL.Path]++
		n := s.counts[r.URL.Path]
		s.mu.Unlock()
		select {
		case <-time.After(time.Duration(100+rand.IntN(500)) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		if strings.HasPrefix(r.URL.Path, "/once-fail/") && n == 1 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *effectServer) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// faultFlows are the flows of the suite; URL is the effect server. Every side effect is a
// request to /fx/<execution>/<step>.
var faultFlows = map[string]string{
	"fx": `{"id":"fx","start":"a","nodes":[
		{"id":"a","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/a","timeout":10},"next":"s"},
		{"id":"s","type":"set","params":{"vars":{"n":"{{ INPUT.n }}"}},"next":"b"},
		{"id":"b","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/b","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"{{ VARS.n }}"}}]}`,
	"branch": `{"id":"branch","start":"a","nodes":[
		{"id":"a","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/a","timeout":10},"next":"odd"},
		{"id":"odd","type":"condition","params":{"expr":"INPUT.odd"},"branches":{"true":"boom","false":"done"}},
		{"id":"boom","type":"fail","params":{"message":"odd input {{ INPUT.n }}"}},
		{"id":"done","type":"end","params":{"output":"even"}}]}`,
	"appr": `{"id":"appr","start":"a","nodes":[
		{"id":"a","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/a","timeout":10},"next":"ask"},
		{"id":"ask","type":"approval","params":{"message":"ship?"},"next":"b"},
		{"id":"b","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/b","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"shipped"}}]}`,
	"evt": `{"id":"evt","start":"w","nodes":[
		{"id":"w","type":"wait_event","params":{"event_type":"paid","match":"EVENT.order == INPUT.n","timeout":3600,"on_timeout":"late"},"next":"b"},
		{"id":"b","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/b","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"paid"}},
		{"id":"late","type":"end","params":{"output":"late"}}]}`,
	"dly": `{"id":"dly","start":"wait","nodes":[
		{"id":"wait","type":"delay","params":{"seconds":3600},"next":"b"},
		{"id":"b","type":"http","params":{"url":"URL/fx/{{ EXECUTION.id }}/b","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"woke"}}]}`,
	"flaky": `{"id":"flaky","start":"a","nodes":[
		{"id":"a","type":"http","params":{"url":"URL/once-fail/{{ EXECUTION.id }}","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"recovered"}}]}`,
}

// faultCase is one execution of the suite and what the test does to it.
type faultCase struct {
	id, flow string
	n        int
	odd      bool
	resume   engine.ResumeType // sent once the execution waits (suspended; error for retry)
	data     string
	want     state.Status
	output   string
	resumed  atomic.Bool
}

func faultCases(n int) []*faultCase {
	var cs []*faultCase
	for i := range n {
		c := &faultCase{id: engine.NewExecutionID(), n: i, odd: (i/8)%2 == 1}
		switch i % 8 {
		case 0, 1:
			c.flow, c.want, c.output = "fx", state.Completed, fmt.Sprint(i)
		case 2:
			c.flow = "branch"
			if c.odd {
				c.want = state.Error
			} else {
				c.want, c.output = state.Completed, "even"
			}
		case 3:
			c.flow, c.resume, c.data, c.want, c.output = "appr", engine.ResumeApproval, `{"approved":true}`, state.Completed, "shipped"
			if i%16 == 11 {
				c.resume, c.data, c.want, c.output = engine.ResumeCancel, "", state.Cancelled, ""
			}
		case 4:
			c.flow, c.resume, c.data, c.want, c.output = "evt", engine.ResumeEvent, fmt.Sprintf(`{"type":"paid","order":%d}`, i), state.Completed, "paid"
		case 5:
			c.flow, c.resume, c.want, c.output = "evt", engine.ResumeTimeout, state.Completed, "late"
		case 6:
			c.flow, c.resume, c.want, c.output = "dly", engine.ResumeContinue, state.Completed, "woke"
		case 7:
			c.flow, c.resume, c.want, c.output = "flaky", engine.ResumeRetry, state.Completed, "recovered"
		}
		cs = append(cs, c)
	}
	return cs
}

func TestFaultSuiteKillsRestartsAndDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real workers under faults for about a minute")
	}
	t.Parallel()
	const total = 480
	e := newE2E(t, 240*time.Second, map[string]string{
		"PLAITA_CLAIM_MIN_IDLE_MS": "1000", "PLAITA_LEASE_TTL_SECONDS": "3", "PLAITA_WORKER_CONCURRENCY": "4",
		"PLAITA_WORKER_DRAIN_TIMEOUT": "3",
	}, "--appendonly", "yes", "--appendfsync", "always")
	fx := newEffectServer(t)
	for id, def := range faultFlows {
		e.publish(id, strings.ReplaceAll(def, "URL", fx.URL))
	}
	queueName := config.QueueName.In(e.cfg)
	// Deliberately malformed entries, each to be dead-lettered exactly once.
	poison := map[string]string{}
	for i, fv := range [][]string{
		{"junk", "no payload field"},
		{queue.PayloadField, "not json"},
		{queue.PayloadField, `{"schema_version":1,"kind":"start"}`},
		{queue.PayloadField, `{"schema_version":999,"kind":"start","flow_id":"fx","execution_id":"ex_future"}`},
	} {
		id, err := e.c.Do(e.ctx, e.c.B().Xadd().Key(queueName).Id("*").FieldValue().FieldValue(fv[0], fv[1]).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		poison[id] = fmt.Sprint(i)
	}
	cases := faultCases(total)
	byID := map[string]*faultCase{}
	for _, c := range cases {
		byID[c.id] = c
		env := queue.Envelope{Kind: queue.KindStart, FlowID: c.flow, FlowVersion: "1", ExecutionID: c.id,
			Input: json.RawMessage(fmt.Sprintf(`{"n":%d,"odd":%t}`, c.n, c.odd))}
		env.Stamp(settings.Generations(e.cfg), time.Now())
		if _, err := queue.Enqueue(e.ctx, e.c, queueName, env); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	var all []*e2eWorker // every worker ever started, for the logs
	live := map[*e2eWorker]bool{}
	spawn := func() {
		w := e.startWorker(nil)
		mu.Lock()
		all = append(all, w)
		live[w] = true
		mu.Unlock()
	}
	pick := func() *e2eWorker {
		mu.Lock()
		defer mu.Unlock()
		for w := range live {
			delete(live, w)
			return w
		}
		return nil
	}
	workerLogs := func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs(all)
	}
	for range 3 {
		spawn()
	}

	// The producer of resumes: once an execution waits, send its resume once (again only when
	// the enqueue itself failed, e.g. while Redis is away).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, c := range cases {
				if c.resume == "" || c.resumed.Load() {
					continue
				}
				st, err := e.ts.Load(e.ctx, c.id)
				if err != nil {
					continue
				}
				waiting := st.Status == state.Suspended || (c.resume == engine.ResumeRetry && st.Status == state.Error)
				if !waiting {
					continue
				}
				if c.resume == engine.ResumeCancel {
					if err := e.ts.SetCancel(e.ctx, c.id); err != nil {
						continue
					}
				}
				env := queue.Envelope{Kind: queue.KindResume, FlowID: c.flow, FlowVersion: "1", ExecutionID: c.id, ResumeType: c.resume}
				if c.data != "" {
					env.ResumeData = json.RawMessage(c.data)
				}
				env.Stamp(settings.Generations(e.cfg), time.Now())
				if _, err := queue.Enqueue(e.ctx, e.c, queueName, env); err == nil {
					c.resumed.Store(true)
				}
			}
		}
	}()

	// The faults: kill -9 a random worker every 1–2.5 s and start a new one; restart Redis once
	// and drain one worker with SIGTERM on the way.
	settled := func() int {
		n := 0
		for _, c := range cases {
			if st, err := e.ts.Load(e.ctx, c.id); err == nil && st.Status.Terminal() {
				n++
			}
		}
		return n
	}
	var kills, restarts, drains int
	var inFlightAtRestart int
	var drained *e2eWorker
	deadline := time.Now().Add(150 * time.Second)
	for round := 0; ; round++ {
		time.Sleep(time.Duration(1000+rand.IntN(1500)) * time.Millisecond)
		done := settled()
		if done == total || time.Now().After(deadline) {
			break
		}
		switch {
		case round == 1 && restarts == 0:
			inFlightAtRestart = total - done
			e.srv.Kill()
			time.Sleep(time.Second)
			e.srv.Start()
			restarts++
		case round == 3 && drains == 0:
			if w := pick(); w != nil {
				w.cmd.Process.Signal(syscall.SIGTERM)
				drained = w
				drains++
				spawn()
			}
		default:
			if w := pick(); w != nil {
				w.cmd.Process.Signal(syscall.SIGKILL)
				w.wait(10 * time.Second)
				kills++
				spawn()
			}
		}
	}
	close(stop)
	wg.Wait()
	if restarts == 0 || drains == 0 || kills < 3 {
		t.Fatalf("the faults did not all happen (kills %d, restarts %d, drains %d): the run ended too early", kills, restarts, drains)
	}
	if inFlightAtRestart == 0 {
		t.Fatal("nothing was in flight when Redis was restarted")
	}
	if drained != nil {
		if !drained.wait(30 * time.Second) {
			t.Fatal("the drained worker did not exit")
		}
		if drained.err != nil {
			t.Errorf("the drained worker exited with %v", drained.err)
		}
	}

	// Every execution in its expected state, each with exactly one terminal transition.
	bad := 0
	for _, c := range cases {
		st, err := e.ts.Load(e.ctx, c.id)
		if err != nil {
			t.Errorf("%s (%s): %v", c.id, c.flow, err)
			bad++
			continue
		}
		// A retry of an execution in error starts a new segment of its timeline: each segment
		// holds at most one terminal transition, and the last exactly one.
		terminal, segments := 0, [][]state.TimelineEntry{nil}
		for _, te := range st.Timeline {
			if te.Event == "retry" && te.Detail == "retry from the failed node" {
				segments = append(segments, nil)
			}
			segments[len(segments)-1] = append(segments[len(segments)-1], te)
		}
		for i, seg := range segments {
			n := 0
			for _, te := range seg {
				switch te.Event {
				case string(state.Completed), string(state.Error), "cancelled":
					n++
				}
			}
			if n > 1 || (i == len(segments)-1 && n != 1) {
				terminal = n
				break
			}
			terminal = 1
		}
		if st.Status != c.want || (c.output != "" && fmt.Sprint(st.Output) != c.output) || terminal != 1 {
			t.Errorf("%s (%s, n=%d, resume %s): status %s output %v error %+v, %d terminal transitions; want %s %q",
				c.id, c.flow, c.n, c.resume, st.Status, st.Output, st.Error, terminal, c.want, c.output)
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d executions not as expected (kills %d)\n%s", bad, total, kills, tail(workerLogs(), 200))
	}
	waitFor(t, "queue drained", 30*time.Second, func() bool { return e.streamLen() == 0 && e.pending() == 0 })

	// The dead-letter stream holds the poisoned entries, each once, and nothing else.
	entries := e.dlqEntries()
	seen := map[string]int{}
	for _, en := range entries {
		seen[en["source_id"]]++
	}
	for id := range poison {
		if seen[id] != 1 {
			t.Errorf("poisoned entry %s dead-lettered %d times, want 1", id, seen[id])
		}
	}
	if len(entries) != len(poison) {
		t.Errorf("DLQ holds %d entries, want the %d poisoned ones: %v", len(entries), len(poison), entries)
	}

	// Side effects: each (execution, step) ran once, plus at most one replay per crash of a
	// worker that had it in flight.
	counts := fx.snapshot()
	replays := 0
	for path, n := range counts {
		if strings.HasPrefix(path, "/fx/") && n > 1 {
			replays += n - 1
		}
	}
	// A kill or a drain past its timeout replays at most the in-flight step of each of the
	// worker's 4 consumers; a Redis restart, that of every consumer of the 3 workers.
	limit := (kills+drains)*4 + restarts*3*4
	t.Logf("%d executions, %d kills, %d Redis restart (%d in flight), %d drain; %d side-effect requests, %d replayed (limit %d)",
		total, kills, restarts, inFlightAtRestart, drains, len(counts), replays, limit)
	if replays > limit {
		t.Errorf("%d side effects replayed, more than the %d steps in flight at the crashes", replays, limit)
	}
	if l := workerLogs(); strings.Contains(l, "worker.run_panic") || strings.Contains(l, "panic:") || strings.Contains(l, "goroutine ") {
		t.Errorf("a worker log shows a panic:\n%s", tail(l, 100))
	}
}

// tail keeps the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
