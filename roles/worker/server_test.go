package worker

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/redistest"
	"plaita/queue"
	"plaita/roles/settings"
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

type fakeDepth struct {
	d   queue.Depth
	err error
}

func (f *fakeDepth) Depth(context.Context) (queue.Depth, error) { return f.d, f.err }

func TestServerMetricsWritesTheSet(t *testing.T) {
	t.Parallel()
	set := metrics.NewSet()
	set.NewCounter(`plaita_test_things_total{kind="a"}`).Add(3)
	depth := &fakeDepth{d: queue.Depth{StreamLength: 7, Pending: 2, DLQLength: 1}}
	s := NewServer("127.0.0.1", 9, set, nil, zerolog.Nop())
	s.AddCollector(QueueDepthCollector(depth, `plaita:flow:queue`, set, zerolog.Nop()))
	base := srvStart(t, s)

	code, hdr, body := srvGet(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if ct := hdr.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("content type %q", ct)
	}
	for _, want := range []string{
		`plaita_test_things_total{kind="a"} 3`,
		`plaita_queue_stream_length{queue="plaita:flow:queue"} 7`,
		`plaita_queue_pending{queue="plaita:flow:queue"} 2`,
		`plaita_queue_dlq_length{queue="plaita:flow:queue"} 1`,
		`go_goroutines `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}

	// A failing depth read keeps the last values and is counted.
	depth.err = errors.New("redis down")
	_, _, body = srvGet(t, base+"/metrics")
	for _, want := range []string{
		`plaita_queue_stream_length{queue="plaita:flow:queue"} 7`,
		`plaita_queue_depth_read_failed_total{queue="plaita:flow:queue"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q after a failed read", want)
		}
	}
}

// TestServerMetricsQueueDepthFromRedis reads a real queue's depth through the collector.
func TestServerMetricsQueueDepthFromRedis(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	stream := root + ":flow:queue"
	cfg := cfgWith(t, map[string]string{"PLAITA_QUEUE_NAME": stream, "PLAITA_CONSUMER_NAME": "w1"})
	set := metrics.NewSet()
	q, err := queue.New(c, settings.Queue(cfg), set, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := q.EnsureGroup(srvCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(srvCtx(t), c.B().Xadd().Key(stream).Id("*").FieldValue().FieldValue("payload", "{}").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s := NewServer("127.0.0.1", 9, set, nil, zerolog.Nop())
	s.AddCollector(QueueDepthCollector(q, q.Stream(), set, zerolog.Nop()))
	_, _, body := srvGet(t, srvStart(t, s)+"/metrics")
	label := `{queue="` + stream + `"}`
	for _, want := range []string{"plaita_queue_stream_length" + label + " 1", "plaita_queue_pending" + label + " 0",
		"plaita_queue_dlq_length" + label + " 0", "plaita_queue_acked_total" + label + " 0"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestServerReadyzFlipsWithHealth(t *testing.T) {
	t.Parallel()
	ready := NewReadiness()
	base := srvStart(t, NewServer("127.0.0.1", 9, metrics.NewSet(), ready, zerolog.Nop()))

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

	// No Health: always ready.
	plain := srvStart(t, NewServer("127.0.0.1", 9, metrics.NewSet(), nil, zerolog.Nop()))
	if code, _, _ := srvGet(t, plain+"/readyz"); code != http.StatusOK {
		t.Errorf("nil health: /readyz %d", code)
	}
	if code, _, _ := srvGet(t, plain+"/nothing"); code != http.StatusNotFound {
		t.Errorf("unknown path: %d", code)
	}
}

func TestServerPortZeroIsOff(t *testing.T) {
	t.Parallel()
	s := NewServer("127.0.0.1", 0, metrics.NewSet(), nil, zerolog.Nop())
	if err := s.Start(srvCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != "" {
		t.Errorf("port 0 bound %s", s.Addr())
	}
	s.Stop(srvCtx(t))
	s.Stop(srvCtx(t))
}

func TestServerStartOnPortAndStopTwice(t *testing.T) {
	t.Parallel()
	port := redistest.FreePort(t)
	s := NewServer("127.0.0.1", port, metrics.NewSet(), nil, zerolog.Nop())
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
	if err := s.Start(srvCtx(t)); err == nil {
		t.Error("Start after Stop must fail")
	}

	never := NewServer("127.0.0.1", port, metrics.NewSet(), nil, zerolog.Nop())
	never.Stop(srvCtx(t)) // without Start
	never.Stop(srvCtx(t))

	// A taken port is an error from Start, not a silent failure.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := NewServer("127.0.0.1", ln.Addr().(*net.TCPAddr).Port, metrics.NewSet(), nil, zerolog.Nop())
	if err := busy.Start(srvCtx(t)); err == nil {
		busy.Stop(srvCtx(t))
		t.Error("Start on a taken port must fail")
	}
}

// TestServerStopDuringSlowScrape: a scrape in flight finishes before Stop returns; a Stop
// deadline closes it instead.
func TestServerStopDuringSlowScrape(t *testing.T) {
	t.Parallel()
	set := metrics.NewSet()
	entered := make(chan struct{})
	release := make(chan struct{})
	s := NewServer("127.0.0.1", 9, set, nil, zerolog.Nop())
	s.AddCollector(func(ctx context.Context) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		}
	})
	base := srvStart(t, s)
	got := make(chan int, 1)
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
	stopped := make(chan struct{})
	go func() {
		s.Stop(srvCtx(t))
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a scrape was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopped
	if code := <-got; code != http.StatusOK {
		t.Errorf("in-flight scrape got %d", code)
	}
}
