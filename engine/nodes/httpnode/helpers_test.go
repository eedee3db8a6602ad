package httpnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
)

// fakeDNS answers made-up names. Each host has a sequence of answers: the n-th lookup gets the
// n-th answer, the last one repeating.
type fakeDNS struct {
	mu    sync.Mutex
	seq   map[string][][]string
	calls map[string]int
}

func newFakeDNS() *fakeDNS { return &fakeDNS{seq: map[string][][]string{}, calls: map[string]int{}} }

func (f *fakeDNS) set(host string, answers ...[]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq[host] = answers
}

func (f *fakeDNS) count(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[host]
}

func (f *fakeDNS) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[host]++
	seq := f.seq[host]
	if len(seq) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	ans := seq[min(f.calls[host]-1, len(seq)-1)]
	out := make([]net.IPAddr, 0, len(ans))
	for _, s := range ans {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	return out, nil
}

// fence is the test dialer: it records every address dialed and only ever connects to
// 127.0.0.1. A "virtual" public address can be mapped onto 127.0.0.1 (same port), so a test can
// play a public server without contacting anything but loopback.
type fence struct {
	mu      sync.Mutex
	dialed  []string
	virtual map[string]bool // public IPs served by 127.0.0.1
}

func (f *fence) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	f.dialed = append(f.dialed, addr)
	host, port, err := net.SplitHostPort(addr)
	virtual := f.virtual[host]
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if host != "127.0.0.1" && !virtual {
		return nil, fmt.Errorf("test fence: refusing to dial %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
}

func (f *fence) addrs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.dialed...)
}

func (f *fence) dialedHost(host string) bool {
	for _, a := range f.addrs() {
		if h, _, _ := net.SplitHostPort(a); h == host {
			return true
		}
	}
	return false
}

// harness runs flows made of one http node "fetch" (then an end node) through the engine.
type harness struct {
	t     *testing.T
	dns   *fakeDNS
	fence *fence
	clock *testClock
	typ   *Type
	reg   *engine.Registry
	ex    *engine.Executor
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// with is DefaultOptions changed by edit.
func with(edit func(o *Options)) Options {
	o := DefaultOptions()
	edit(&o)
	return o
}

func newHarness(t *testing.T, o Options, opts ...Option) *harness {
	t.Helper()
	h := &harness{t: t, dns: newFakeDNS(), fence: &fence{virtual: map[string]bool{}},
		clock: &testClock{now: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)}}
	all := append([]Option{WithResolver(h.dns), withDial(h.fence.dial), withClock(h.clock.Now)}, opts...)
	h.typ = New(o, zerolog.Nop(), all...)
	t.Cleanup(h.typ.CloseIdleConnections)
	h.reg = engine.NewRegistry()
	h.reg.Register("http", h.typ)
	h.ex = engine.NewExecutor(store.NewMemory())
	return h
}

// flow builds a flow whose first node is an http node with params, then extra nodes.
func (h *harness) flow(params map[string]any) *engine.Flow {
	h.t.Helper()
	f, err := h.parse(params)
	if err != nil {
		h.t.Fatalf("parse: %v", err)
	}
	return f
}

func (h *harness) parse(params map[string]any) (*engine.Flow, error) {
	def := map[string]any{
		"id": "http-test", "start": "fetch",
		"nodes": []any{
			map[string]any{"id": "fetch", "type": "http", "params": params, "next": "done"},
			map[string]any{"id": "done", "type": "end", "params": map[string]any{"output": "{{ NODE.fetch.RESPONSE.status }}"}},
		},
	}
	data, err := json.Marshal(def)
	if err != nil {
		h.t.Fatal(err)
	}
	return engine.Parse(data, h.reg, engine.DefaultExprLimits)
}

// run starts one execution of the flow.
func (h *harness) run(params map[string]any, input any) *state.Execution {
	h.t.Helper()
	return h.start(context.Background(), h.flow(params), input)
}

func (h *harness) start(ctx context.Context, f *engine.Flow, input any) *state.Execution {
	h.t.Helper()
	st, err := h.ex.Start(ctx, f, engine.StartRequest{Input: input})
	if err != nil {
		h.t.Fatalf("start: %v", err)
	}
	return st
}

// response is the RESPONSE output of the fetch node of a completed execution.
func response(t *testing.T, st *state.Execution) map[string]any {
	t.Helper()
	if st.Status != state.Completed {
		t.Fatalf("status %s, error %+v", st.Status, st.Error)
	}
	out, _ := st.Nodes()["fetch"].(map[string]any)
	resp, ok := out["RESPONSE"].(map[string]any)
	if !ok {
		t.Fatalf("no RESPONSE in %v", st.Nodes()["fetch"])
	}
	return resp
}

// failed asserts the execution ended in error at fetch, permanent or not, with every part in
// the message; it returns the message.
func failed(t *testing.T, st *state.Execution, permanent bool, parts ...string) string {
	t.Helper()
	if st.Status != state.Error || st.Error == nil {
		t.Fatalf("status %s, want error; nodes %v", st.Status, st.Nodes())
	}
	if st.Error.Node != "fetch" {
		t.Errorf("error at node %q, want fetch", st.Error.Node)
	}
	if st.Error.Permanent != permanent {
		t.Errorf("permanent = %v, want %v (%s)", st.Error.Permanent, permanent, st.Error.Message)
	}
	for _, p := range parts {
		if !strings.Contains(st.Error.Message, p) {
			t.Errorf("error %q does not contain %q", st.Error.Message, p)
		}
	}
	return st.Error.Message
}

// hits counts the requests a test server received.
type hits struct {
	mu    sync.Mutex
	paths []string
}

func (h *hits) add(r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.paths = append(h.paths, r.URL.Path)
}

func (h *hits) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.paths)
}

func (h *hits) has(path string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.paths {
		if p == path {
			return true
		}
	}
	return false
}

// serve starts a loopback server; the hits record every request.
func serve(t *testing.T, handler http.HandlerFunc) (*httptest.Server, *hits, string) {
	t.Helper()
	hs := &hits{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.add(r)
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	if u.Hostname() != "127.0.0.1" {
		t.Skipf("test server is on %s, not 127.0.0.1", u.Hostname())
	}
	return srv, hs, u.Port()
}
