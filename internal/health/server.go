package health

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/service"
)

// Collector refreshes gauges right before /metrics writes the set (a queue's depth …). It gets
// the scrape's context, bounded by ScrapeTimeout.
type Collector func(ctx context.Context)

// ScrapeTimeout bounds the collectors of one /metrics request: a collector reading Redis must
// not hang a scrape past Prometheus's own timeout.
const ScrapeTimeout = 3 * time.Second

// Server serves /metrics, /healthz (200 while the process runs) and /readyz (200 only when the
// Prober says ready, else 503 with a one-line reason). Port 0 means off: the service runs and
// serves nothing.
type Server struct {
	// off is the idle service of port 0 (the lifecycle is the same either way); httpd serves.
	off   service.Base
	httpd service.HTTP

	host       string
	port       int
	set        *metrics.Set
	prober     Prober
	log        zerolog.Logger
	collectors []Collector
}

// New builds the endpoint for host ("" = 0.0.0.0) and port (0 = off). prober nil = always
// ready.
func New(host string, port int, set *metrics.Set, prober Prober, log zerolog.Logger) *Server {
	if host == "" {
		host = "0.0.0.0"
	}
	s := &Server{host: host, port: port, set: set, prober: prober, log: log}
	s.httpd = service.HTTP{Name: "health endpoint", OnFailure: func(err error) {
		log.Error().Str("event", "health.failed").Err(err).Msg("metrics and health endpoint stopped serving")
	}}
	return s
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
	// One buffer through FillHelp: the library writes every HELP line empty (help.go).
	var out, proc bytes.Buffer
	s.set.WritePrometheus(&out)
	metrics.WriteProcessMetrics(&proc)
	out.Write(conventionalProcessMetrics(proc.Bytes()))
	_, _ = w.Write(FillHelp(out.Bytes()))
}

// conventionalProcessMetrics is the library's process and Go runtime series as Prometheus names
// them: its process_io_*_total byte and syscall counts are monotonic, so typed counter (the
// library says gauge), and the three go_*_count series whose names break the conventions
// (a counter without _total, a gauge ending in _count) are left out — with the help texts
// FillHelp adds, promtool then has nothing to say of /metrics.
func conventionalProcessMetrics(b []byte) []byte {
	var out bytes.Buffer
	for line := range bytes.Lines(b) {
		name := metricName(line)
		switch {
		case name == "go_cgo_calls_count" || name == "go_cpu_count" || name == "go_gc_forced_count":
			continue
		case bytes.HasPrefix(line, []byte("# TYPE process_io_")) && bytes.HasSuffix(bytes.TrimSpace(line), []byte("_total gauge")):
			line = append(bytes.TrimSuffix(bytes.TrimSpace(line), []byte("gauge")), "counter\n"...)
		}
		out.Write(line)
	}
	return out.Bytes()
}

// metricName is the series a line of the exposition format is about (its # HELP and # TYPE
// lines included).
func metricName(line []byte) string {
	if rest, ok := bytes.CutPrefix(line, []byte("# ")); ok {
		_, rest, _ = bytes.Cut(rest, []byte(" ")) // HELP or TYPE
		line = rest
	}
	end := bytes.IndexAny(line, " {\n")
	if end < 0 {
		end = len(line)
	}
	return string(line[:end])
}

func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	ok, reason := true, ""
	if s.prober != nil {
		ok, reason = s.prober.Ready()
	}
	if ok {
		_, _ = w.Write([]byte("ready\n"))
		return
	}
	// One line whatever the reason holds, so a probe log stays one line too.
	if reason = strings.Join(strings.Fields(reason), " "); reason == "" {
		reason = "not ready"
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte("not ready: " + reason + "\n"))
}

// Start listens on host:port and serves until Stop; a listen error (port taken …) is returned
// and nothing runs. With port 0 the endpoint is off: Start logs it and the service idles until
// Stop, so that the lifecycle (a second Start, a Start after Stop) is the same either way.
func (s *Server) Start(ctx context.Context) error {
	if s.port == 0 {
		if err := s.off.Run(ctx, func(ctx context.Context) { <-ctx.Done() }); err != nil {
			return fmt.Errorf("health endpoint: %w", err)
		}
		s.log.Info().Str("event", "health.off").Msg("metrics and health endpoint off (port 0)")
		return nil
	}
	if s.httpd.Stopped() { // a Start after Stop must not bind the port
		return fmt.Errorf("health endpoint: %w", service.ErrStopped)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(s.host, strconv.Itoa(s.port)))
	if err != nil {
		return fmt.Errorf("health endpoint: %w", err)
	}
	return s.serve(ctx, ln)
}

// Serve serves on a listener the caller opened (tests: 127.0.0.1:0) until Stop; it returns at
// once. The server owns ln from here on.
func (s *Server) Serve(ln net.Listener) error { return s.serve(context.Background(), ln) }

func (s *Server) serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	if err := s.httpd.Serve(ctx, ln, srv); err != nil {
		return err
	}
	// The default host is every interface (PLAITA_METRICS_HOST=0.0.0.0, so that Prometheus on
	// another host can scrape), unlike the console's 127.0.0.1: the line says so, since an
	// operator reading "[::]:9100" may not see that the endpoint is reachable from outside.
	ev := s.log.Info().Str("event", "health.listen").Str("addr", s.httpd.Addr())
	if allInterfaces(ln.Addr()) {
		ev.Bool("all_interfaces", true).Msg("serving /metrics, /healthz, /readyz on all interfaces (PLAITA_METRICS_HOST=" + s.host +
			"): reachable from other hosts; PLAITA_METRICS_HOST=127.0.0.1 keeps them local")
		return nil
	}
	ev.Msg("serving /metrics, /healthz, /readyz")
	return nil
}

// allInterfaces reports whether a listener's address is a wildcard (0.0.0.0 or ::).
func allInterfaces(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && (tcp.IP == nil || tcp.IP.IsUnspecified())
}

// Addr is the bound address ("" when off or not started).
func (s *Server) Addr() string { return s.httpd.Addr() }

// Stop shuts the endpoint down gracefully: a scrape in flight finishes, unless ctx ends first
// and its connection is closed. Safe to call twice or without Start.
func (s *Server) Stop(ctx context.Context) {
	s.httpd.Stop(ctx)
	s.off.Stop(ctx)
}
