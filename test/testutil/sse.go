package testutil

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// SSEEvent is one Server-Sent Event as a client reads it: its id, name and data, or a comment
// (a heartbeat) when Comment is set.
type SSEEvent struct {
	ID      string
	Event   string
	Data    string
	Comment string
}

// Decode reads the event's data (JSON) into v.
func (e SSEEvent) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(e.Data), v); err != nil {
		t.Fatalf("event %s: data %q: %v", e.Event, e.Data, err)
	}
}

// SSEStream is an event stream a test reads over real HTTP: the response, and its events in
// order on Events, which is closed when the server ends the stream (Err then says how).
type SSEStream struct {
	Response *http.Response
	Events   <-chan SSEEvent
	cancel   context.CancelFunc
	done     chan struct{}
	err      error
}

// OpenSSE sends req (GET, with its headers) and, when the answer is a 200 text/event-stream,
// reads its events in the background; any other answer is returned with a nil stream and its
// body read into body. The stream is closed at the end of the test.
func OpenSSE(t testing.TB, req *http.Request) (*SSEStream, int, []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(req.Context())
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		cancel()
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		defer cancel()
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return nil, res.StatusCode, body
	}
	events := make(chan SSEEvent, 1024)
	s := &SSEStream{Response: res, Events: events, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(events)
		s.err = readSSE(ctx, res.Body, events)
	}()
	t.Cleanup(s.Close)
	return s, res.StatusCode, nil
}

// readSSE parses the text/event-stream format (the WHATWG rules the tests need: fields, comments,
// events ended by a blank line).
func readSSE(ctx context.Context, r io.ReadCloser, out chan<- SSEEvent) error {
	defer r.Close()
	send := func(ev SSEEvent) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev SSEEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if ev.Event != "" || len(data) > 0 || ev.ID != "" {
				ev.Data = strings.Join(data, "\n")
				if !send(ev) {
					return ctx.Err()
				}
			}
			ev, data = SSEEvent{}, nil
			continue
		}
		if c, ok := strings.CutPrefix(line, ":"); ok {
			if !send(SSEEvent{Comment: strings.TrimSpace(c)}) {
				return ctx.Err()
			}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Event = value
		case "data":
			data = append(data, value)
		}
	}
	return sc.Err()
}

// Next is the next event that is not a comment; the test fails when none comes within
// timeout or the stream ends.
func (s *SSEStream) Next(t testing.TB, timeout time.Duration) SSEEvent {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				t.Fatalf("the stream ended (%v) while an event was awaited", s.Err())
			}
			if ev.Comment == "" {
				return ev
			}
		case <-deadline:
			t.Fatalf("no event within %s", timeout)
		}
	}
}

// Ended waits for the server to end the stream, and fails the test when an event that is not
// a comment comes first.
func (s *SSEStream) Ended(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				return
			}
			if ev.Comment == "" {
				t.Fatalf("an event after the end: %+v", ev)
			}
		case <-deadline:
			t.Fatalf("the stream did not end within %s", timeout)
		}
	}
}

// Err is how the stream's reading ended (nil: the server closed it cleanly).
func (s *SSEStream) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return fmt.Errorf("still open")
	}
}

// Close ends the client's side of the stream; safe twice.
func (s *SSEStream) Close() {
	s.cancel()
	<-s.done
}
