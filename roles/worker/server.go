package worker

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/queue"
)

// Health tells /readyz whether this process should receive work; reason is one line saying
// why not ("draining", "consumer group not ensured yet" …).
type Health interface {
	Ready() (ok bool, reason string)
}

// Readiness is the Health the worker role flips: not ready ("starting") until SetReady, not
// ready again with a reason while draining. Safe for concurrent use.
type Readiness struct {
	mu     sync.Mutex
	ready  bool
	reason string
}

// NewReadiness starts not ready with the reason "starting".
func NewReadiness() *Readiness { return &Readiness{reason: "starting"} }

// SetReady marks the process ready.
func (r *Readiness) SetReady() {
	r.mu.Lock()
	r.ready, r.reason = true, ""
	r.mu.Unlock()
}

// SetNotReady marks the process not ready, with a one-line reason.
func (r *Readiness) SetNotReady(reason string) {
	r.mu.Lock()
	r.ready, r.reason = false, reason
	r.mu.Unlock()
}

// Ready implements Health.
func (r *Readiness) Ready() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready, r.reason
}

// Collector refreshes gauges right before /metrics writes the set (queue depth …). It gets the
// scrape's context, bounded by ScrapeTimeout.
type Collector func(ctx context.Context)

// ScrapeTimeout bounds the collectors of one /metrics request.
const ScrapeTimeout = 3 * time.Second

// Server is the worker's tiny HTTP endpoint: /metrics (the process's metrics set), /healthz
// (200 while the process runs) and /readyz (200 only when Health says ready, else 503 with a
// one-line reason). Port 0 means off: Start does nothing.
type Server struct {
	host       string
	port       int
	set        *metrics.Set
	health     Health
	log        zerolog.Logger
	collectors []Collector

	mu      sync.Mutex
	srv     *http.Server
	addr    string
	stopped bool
	done    chan struct{}
}

// NewServer builds the endpoint for PLAITA_METRICS_HOST ("" = 0.0.0.0) and
// PLAITA_METRICS_PORT (0 = off). health nil = always ready.
func NewServer(host string, port int, set *metrics.Set, health Health, log zerolog.Logger) *Server {
	if host == "" {
		host = "0.0.0.0"
	}
	return &Server{host: host, port: port, set: set, health: health, log: log}
}

// AddCollector registers a collector run before every /metrics write; call before Start.
func (s *Server) AddCollector(c Collector) { s.collectors = append(s.collectors, c) }

// Handler serves /metrics, /healthz and /readyz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", s.serveMetrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", s.serveReady)
	return mux
}

func (s *Server) serveMetrics(w http.ResponseWriter, req *http.Request) {
	if len(s.collectors) > 0 {
		ctx, cancel := context.WithTimeout(req.Context(), ScrapeTimeout)
		for _, c := range s.collectors {
			c(ctx)
		}
		cancel()
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.set.WritePrometheus(w)
	metrics.WriteProcessMetrics(w)
}

func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	ok, reason := true, ""
	if s.health != nil {
		ok, reason = s.health.Ready()
	}
	if ok {
		_, _ = w.Write([]byte("ready\n"))
		return
	}
	if reason = strings.Join(strings.Fields(reason), " "); reason == "" {
		reason = "not ready"
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte("not ready: " + reason + "\n"))
}

// Start listens on host:port and serves until Stop. With port 0 it logs that the endpoint is
// off and returns nil. A listen error (port taken …) is returned.
func (s *Server) Start(ctx context.Context) error {
	if s.port == 0 {
		s.log.Info().Str("event", "worker.metrics_off").Msg("metrics endpoint off (PLAITA_METRICS_PORT=0)")
		return nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(s.host, strconv.Itoa(s.port)))
	if err != nil {
		return errors.New("metrics endpoint: " + err.Error())
	}
	return s.Serve(ln)
}

// Serve serves on a listener the caller opened (tests: 127.0.0.1:0) until Stop; it returns at
// once. The server owns ln from here on.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.srv != nil {
		ln.Close()
		return errors.New("metrics endpoint: already started or stopped")
	}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	s.addr = ln.Addr().String()
	s.done = make(chan struct{})
	srv, done := s.srv, s.done
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Str("event", "worker.metrics_failed").Err(err).Msg("metrics endpoint stopped serving")
		}
	}()
	s.log.Info().Str("event", "worker.metrics_listen").Str("addr", s.addr).Msg("serving /metrics, /healthz, /readyz")
	return nil
}

// Addr is the bound address ("" when off or not started).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Stop shuts the endpoint down gracefully; when ctx ends first, open connections are closed.
// Safe to call twice or without Start.
func (s *Server) Stop(ctx context.Context) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	srv, done := s.srv, s.done
	s.mu.Unlock()
	if srv == nil {
		return
	}
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
	<-done
}

// DepthReader is what QueueDepthCollector reads (*queue.Queue).
type DepthReader interface {
	Depth(ctx context.Context) (queue.Depth, error)
}

// QueueDepthCollector returns a collector that reads the queue's depth on every scrape into
// plaita_queue_stream_length, plaita_queue_pending and plaita_queue_dlq_length{queue="…"}.
// A failed read keeps the last values, counts plaita_queue_depth_read_failed_total{queue="…"}
// and logs once per outage.
func QueueDepthCollector(q DepthReader, stream string, set *metrics.Set, log zerolog.Logger) Collector {
	label := `{queue="` + promLabel(stream) + `"}`
	length := set.GetOrCreateGauge("plaita_queue_stream_length"+label, nil)
	pending := set.GetOrCreateGauge("plaita_queue_pending"+label, nil)
	dlq := set.GetOrCreateGauge("plaita_queue_dlq_length"+label, nil)
	failed := set.GetOrCreateCounter("plaita_queue_depth_read_failed_total" + label)
	var failing atomic.Bool
	return func(ctx context.Context) {
		d, err := q.Depth(ctx)
		if err != nil {
			failed.Inc()
			if failing.CompareAndSwap(false, true) {
				log.Warn().Str("event", "worker.queue_depth_failed").Str("queue", stream).Err(err).
					Msg("cannot read queue depth for /metrics; the gauges keep their last values")
			}
			return
		}
		failing.Store(false)
		length.Set(float64(d.StreamLength))
		pending.Set(float64(d.Pending))
		dlq.Set(float64(d.DLQLength))
	}
}

func promLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
