package cluster

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
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

// trap is a TCP listener standing in for Redis; it counts every connection it gets.
type trap struct {
	ln    net.Listener
	conns atomic.Int32
	done  chan struct{}
}

func newTrap(t *testing.T) *trap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trap{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tr.conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-tr.done })
	return tr
}

func (tr *trap) url() string { return "redis://" + tr.ln.Addr().String() + "/0" }

// connections drains the accept queue and returns how many connections arrived. Call it after
// the process has exited: every handshake it completed is then queued, and Accept returns
// queued connections before the deadline fires.
func (tr *trap) connections() int {
	tr.ln.(*net.TCPListener).SetDeadline(time.Now().Add(300 * time.Millisecond))
	<-tr.done
	return int(tr.conns.Load())
}
