//go:build !e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"plaita/test/testutil"
)

// The console's live stream with the roles in process: `plaita console` and `plaita worker` on the
// stack's Redis; a flow published and started over the API is followed over Server-Sent Events
// to its approval, answered over the API, and followed to its end; a reconnect with
// Last-Event-ID gets the rest, each entry once.

// follow opens the execution's event stream with the admin key.
func (c *console) follow(t *testing.T, id string, header ...string) *testutil.SSEStream {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, c.base+"/api/executions/"+id+"/events", nil)
	req.Header.Set("X-Admin-API-Key", consoleAdminKey)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	s, code, body := testutil.OpenSSE(t, req)
	if s == nil {
		t.Fatalf("open the stream of %s: %d %s", id, code, body)
	}
	return s
}

// liveEntry is what the test reads of a timeline event.
type liveEntry struct {
	Seq    int    `json:"seq"`
	Event  string `json:"event"`
	Status string `json:"status"`
}

// readUntil reads timeline events until one of event, checking that each id is its seq and one
// more than the last; it returns the last seq and the events read.
func readUntil(t *testing.T, s *testutil.SSEStream, last int, event string, ps ...*proc) (int, []string) {
	t.Helper()
	var events []string
	for {
		ev := s.Next(t, 60*time.Second)
		switch ev.Event {
		case "timeline":
			var e liveEntry
			ev.Decode(t, &e)
			if ev.ID != strconv.Itoa(e.Seq) || e.Seq != last+1 {
				t.Fatalf("entry id %s seq %d after %d (read %v)\n%s", ev.ID, e.Seq, last, events, logs(ps))
			}
			last = e.Seq
			events = append(events, e.Event)
			if e.Event == event {
				return last, events
			}
		case "node":
		case "end":
			t.Fatalf("the end before %s: %s (read %v)", event, ev.Data, events)
		default:
			t.Fatalf("unexpected event %+v", ev)
		}
	}
}

func wantStreamEnd(t *testing.T, s *testutil.SSEStream, last int) {
	t.Helper()
	ev := s.Next(t, 30*time.Second)
	var end struct {
		Reason  string `json:"reason"`
		Status  string `json:"status"`
		LastSeq int    `json:"last_seq"`
	}
	if ev.Event != "end" {
		t.Fatalf("want the end, got %+v", ev)
	}
	ev.Decode(t, &end)
	if end.Reason != "terminal" || end.Status != "completed" || end.LastSeq != last {
		t.Fatalf("end %+v, last entry %d", end, last)
	}
	s.Ended(t, 30*time.Second)
}

func TestConsoleLiveStreamE2E(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	// It failed twice in CI (no event within a minute after the approval) and never here: the
	// roles' logs say what the worker did with the resume.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the roles' logs:\n%s", s.logs())
		}
	})
	con := s.startConsole(nil)
	s.start("worker", nil)
	def := `{"id":"review","version":"1","start":"prep","nodes":[
		{"id":"prep","type":"log","params":{"message":"preparing {{ INPUT.n }}"},"next":"ask"},
		{"id":"ask","type":"approval","params":{"message":"ship {{ INPUT.n }}?"},"next":"ship"},
		{"id":"ship","type":"log","params":{"message":"shipped"},"next":"done"},
		{"id":"done","type":"end"}]}`
	if code, body := con.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)}); code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, body)
	}
	code, started := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "review", "input": map[string]any{"n": 7}})
	if code != http.StatusCreated {
		t.Fatalf("start: %d %v", code, started)
	}
	id := fmt.Sprint(started["execution_id"])

	st := con.follow(t, id)
	if ev := st.Next(t, 30*time.Second); ev.Event != "snapshot" || ev.ID != "" {
		t.Fatalf("first event %+v", ev)
	}
	last, events := readUntil(t, st, 0, "suspended", s.procs...)
	if events[0] != "started" {
		t.Fatalf("entries %v", events)
	}
	if code, body := con.call(t, http.MethodPost, "/api/executions/"+id+"/resume",
		map[string]any{"type": "approval", "data": map[string]any{"approved": true}}); code != http.StatusOK {
		t.Fatalf("approve: %d %v", code, body)
	}
	last, _ = readUntil(t, st, last, "completed", s.procs...)
	wantStreamEnd(t, st, last)

	// A client that lost its connection after entry 2 reconnects with Last-Event-ID: 2.
	again := con.follow(t, id, "Last-Event-ID", "2")
	var snap struct {
		Status  string `json:"status"`
		LastSeq int    `json:"last_seq"`
	}
	if ev := again.Next(t, 30*time.Second); ev.Event != "snapshot" {
		t.Fatalf("first event on reconnect %+v", ev)
	} else if ev.Decode(t, &snap); snap.Status != "completed" || snap.LastSeq != last {
		t.Fatalf("snapshot on reconnect %+v", snap)
	}
	if l, _ := readUntil(t, again, 2, "completed", s.procs...); l != last {
		t.Fatalf("the reconnect ended at %d, the first read at %d", l, last)
	}
	wantStreamEnd(t, again, last)
}

// SIGTERM with live streams open: each stream ends with an end event that says the console is
// draining, and the console exits at once instead of waiting for them (its graceful shutdown
// would otherwise wait for every open stream until its deadline).
func TestConsoleDrainEndsLiveStreamsE2E(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	con := s.startConsole(nil)
	s.start("worker", nil)
	def := `{"id":"hold","version":"1","start":"ask","nodes":[{"id":"ask","type":"approval","params":{"message":"ok?"},"next":"done"},{"id":"done","type":"end"}]}`
	if code, body := con.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(def)}); code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, body)
	}
	_, started := con.call(t, http.MethodPost, "/api/executions", map[string]any{"flow_id": "hold"})
	id := fmt.Sprint(started["execution_id"])
	st := con.follow(t, id)
	st.Next(t, 30*time.Second) // the snapshot
	readUntil(t, st, 0, "suspended", s.procs...)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, con.base+"/api/executions/stream", nil)
	req.Header.Set("X-Admin-API-Key", consoleAdminKey)
	list, code, body := testutil.OpenSSE(t, req)
	if list == nil {
		t.Fatalf("list stream: %d %s", code, body)
	}
	if ev := list.Next(t, 30*time.Second); ev.Event != "ready" {
		t.Fatalf("list stream's first event %+v", ev)
	}
	began := time.Now()
	con.p.stop(t) // SIGTERM: drains and exits 0 within 30 s
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("the console took %s to stop with two streams open", took)
	}
	for _, stream := range []*testutil.SSEStream{st, list} {
		ev := stream.Next(t, 5*time.Second)
		var end struct {
			Reason string `json:"reason"`
		}
		if ev.Event == "end" {
			ev.Decode(t, &end)
		}
		if end.Reason != "draining" {
			t.Fatalf("want the end (draining), got %+v", ev)
		}
		stream.Ended(t, 5*time.Second)
	}
}
