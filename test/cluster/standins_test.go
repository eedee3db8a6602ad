package cluster

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// pathServer is an HTTP server that counts requests per path and sleeps per path; the first
// request of the path failFirst (when set) fails with 500.
type pathServer struct {
	*httptest.Server
	mu     sync.Mutex
	counts map[string]int
	seen   chan string
}

func newPathServer(t *testing.T, delays map[string]time.Duration) *pathServer {
	return newFlakyServer(t, "", delays)
}

func newFlakyServer(t *testing.T, failFirst string, delays map[string]time.Duration) *pathServer {
	s := &pathServer{counts: map[string]int{}, seen: make(chan string, 100)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.counts[r.URL.Path]++
		n := s.counts[r.URL.Path]
		s.mu.Unlock()
		select {
		case s.seen <- r.URL.Path:
		default:
		}
		if d := delays[r.URL.Path]; d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		if failFirst != "" && r.URL.Path == failFirst && n == 1 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// waitSeen waits until the server has seen a request of path.
func (s *pathServer) waitSeen(t *testing.T, path string, timeout time.Duration, ps ...*proc) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case p := <-s.seen:
			if p == path {
				return
			}
		case <-deadline:
			t.Fatalf("the server never saw %s\n%s", path, logs(ps))
		}
	}
}
