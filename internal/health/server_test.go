package health

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/service"
	"plaita/test/redistest"
)

// srvStart serves s on 127.0.0.1:<ephemeral> and stops it at cleanup.
func srvStart(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(srvCtx(t)) })
	return "http://" + s.Addr()
}

func srvCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func srvGet(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(srvCtx(t), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

func TestServerMetricsWritesTheSet(t *testing.T) {
	t.Parallel()
	set := metrics.NewSet()
	set.NewCounter(`plaita_test_things_total{kind="a"}`).Add(3)
	var depth atomic.Int64
	depth.Store(7)
	gauge := set.NewGauge(`plaita_test_depth`, nil)
	var scrapes atomic.Int32
	s := New("127.0.0.1", 9, set, nil, zerolog.Nop())
	s.AddCollector(func(ctx context.Context) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("a collector got a context without the scrape bound")
		}
		scrapes.Add(1)
		gauge.Set(float64(depth.Load()))
	})
	base := srvStart(t, s)

	code, hdr, body := srvGet(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if ct := hdr.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("content type %q", ct)
	}
	for _, want := range []string{`plaita_test_things_total{kind="a"} 3`, `plaita_test_depth 7`, `go_goroutines `} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	// Collectors run on every scrape, right before the set is written.
	depth.Store(9)
	if _, _, body = srvGet(t, base+"/metrics"); !strings.Contains(body, `plaita_test_depth 9`) || scrapes.Load() != 2 {
		t.Errorf("second scrape (%d collector runs) lacks the new value:\n%s", scrapes.Load(), body)
	}
}

func TestServerReadyzFlipsWithReadiness(t *testing.T) {
	t.Parallel()
	ready := NewReadiness()
	base := srvStart(t, New("127.0.0.1", 9, metrics.NewSet(), ready, zerolog.Nop()))

	check := func(path string, wantCode int, wantBody string) {
		t.Helper()
		code, _, body := srvGet(t, base+path)
		if code != wantCode || body != wantBody {
			t.Errorf("%s = %d %q; want %d %q", path, code, body, wantCode, wantBody)
		}
	}
	check("/readyz", http.StatusServiceUnavailable, "not ready: starting\n")
	check("/healthz", http.StatusOK, "ok\n")
	ready.SetReady()
	check("/readyz", http.StatusOK, "ready\n")
	ready.SetNotReady("draining:\nin-flight tasks  finishing")
	check("/readyz", http.StatusServiceUnavailable, "not ready: draining: in-flight tasks finishing\n")
	check("/healthz", http.StatusOK, "ok\n")
	ready.SetNotReady("")
	check("/readyz", http.StatusServiceUnavailable, "not ready: not ready\n")

	// No Prober: always ready.
	plain := srvStart(t, New("127.0.0.1", 9, metrics.NewSet(), nil, zerolog.Nop()))
	if code, _, _ := srvGet(t, plain+"/readyz"); code != http.StatusOK {
		t.Errorf("nil prober: /readyz %d", code)
	}
	if code, _, _ := srvGet(t, plain+"/nothing"); code != http.StatusNotFound {
		t.Errorf("unknown path: %d", code)
	}
}

func TestServerPortZeroIsOff(t *testing.T) {
	t.Parallel()
	s := New("127.0.0.1", 0, metrics.NewSet(), nil, zerolog.Nop())
	if err := s.Start(srvCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != "" {
		t.Errorf("port 0 bound %s", s.Addr())
	}
	if err := s.Start(srvCtx(t)); err == nil {
		t.Error("a second Start must fail, port 0 or not")
	}
	s.Stop(srvCtx(t))
	s.Stop(srvCtx(t))
	if err := s.Start(srvCtx(t)); !errors.Is(err, service.ErrStopped) {
		t.Errorf("Start after Stop: %v, want ErrStopped", err)
	}
}

func TestServerStartOnPortAndStopTwice(t *testing.T) {
	t.Parallel()
	port := redistest.FreePort(t)
	s := New("127.0.0.1", port, metrics.NewSet(), nil, zerolog.Nop())
	if err := s.Start(srvCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != "127.0.0.1:"+strconv.Itoa(port) {
		t.Fatalf("addr %q", s.Addr())
	}
	if code, _, _ := srvGet(t, "http://"+s.Addr()+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz %d", code)
	}
	if err := s.Start(srvCtx(t)); err == nil {
		t.Error("a second Start must fail")
	}
	s.Stop(srvCtx(t))
	s.Stop(srvCtx(t))
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
		conn.Close()
		t.Error("still listening after Stop")
	}
	if err := s.Start(srvCtx(t)); !errors.Is(err, service.ErrStopped) {
		t.Errorf("Start after Stop: %v, want ErrStopped", err)
	}

	never := New("127.0.0.1", port, metrics.NewSet(), nil, zerolog.Nop())
	never.Stop(srvCtx(t)) // without Start
	never.Stop(srvCtx(t))

	// A taken port is an error from Start, not a silent failure.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := New("127.0.0.1", ln.Addr().(*net.TCPAddr).Port, metrics.NewSet(), nil, zerolog.Nop())
	if err := busy.Start(srvCtx(t)); err == nil {
		busy.Stop(srvCtx(t))
		t.Error("Start on a taken port must fail")
	}
}

// slowScrape serves a server whose collector blocks until release (or its context ends), and
// starts one scrape; it returns once the scrape is inside the collector. got receives the
// scrape's status code (-1: the request failed).
func slowScrape(t *testing.T) (s *Server, release chan struct{}, got chan int) {
	t.Helper()
	entered := make(chan struct{})
	release, got = make(chan struct{}), make(chan int, 1)
	s = New("127.0.0.1", 9, metrics.NewSet(), nil, zerolog.Nop())
	s.AddCollector(func(ctx context.Context) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		}
	})
	base := srvStart(t, s)
	go func() {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			got <- -1
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	<-entered
	return s, release, got
}

// A scrape in flight finishes before Stop returns.
func TestServerStopWaitsForAScrapeInFlight(t *testing.T) {
	t.Parallel()
	s, release, got := slowScrape(t)
	addr := s.Addr()
	var released atomic.Bool
	stopped := make(chan bool)
	go func() {
		s.Stop(srvCtx(t))
		stopped <- released.Load()
	}()
	// Positive signal that Stop is shutting down: the listener no longer accepts.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("Stop never closed the listener")
		}
		time.Sleep(5 * time.Millisecond)
	}
	released.Store(true)
	close(release)
	if !<-stopped {
		t.Fatal("Stop returned while a scrape was in flight")
	}
	if code := <-got; code != http.StatusOK {
		t.Errorf("in-flight scrape got %d", code)
	}
}

// Stop's deadline bounds the wait: a scrape that hangs has its connection closed.
func TestServerStopDeadlineClosesAStuckScrape(t *testing.T) {
	t.Parallel()
	s, release, got := slowScrape(t)
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	s.Stop(ctx)
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("Stop took %s with a 100ms deadline", took)
	}
	if code := <-got; code == http.StatusOK {
		t.Error("the stuck scrape was answered: its connection should have been closed")
	}
}

// The library's process series are passed on with Prometheus's conventions: counters typed
// counter, the three go_*_count series that break the naming rules left out, the rest as it is.
func TestConventionalProcessMetrics(t *testing.T) {
	in := "# HELP go_cgo_calls_count\n# TYPE go_cgo_calls_count counter\ngo_cgo_calls_count 1\n" +
		"# HELP go_goroutines\n# TYPE go_goroutines gauge\ngo_goroutines 7\n" +
		"# HELP process_io_read_bytes_total\n# TYPE process_io_read_bytes_total gauge\nprocess_io_read_bytes_total 10\n" +
		"go_cpu_count 2\ngo_gc_forced_count 0\n"
	want := "# HELP go_goroutines\n# TYPE go_goroutines gauge\ngo_goroutines 7\n" +
		"# HELP process_io_read_bytes_total\n# TYPE process_io_read_bytes_total counter\nprocess_io_read_bytes_total 10\n"
	if got := string(conventionalProcessMetrics([]byte(in))); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
