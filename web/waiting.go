package web

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"plaita/internal/health"
	"plaita/internal/service"
	"plaita/web/api"
)

// Waiting is what the console serves on its port while it waits for Redis at its start
// (roles/console.go): its database has served with Redis, so it does not run local mode — a
// start answered there would be out of sight of the workers and of every cluster listing — and
// until Redis answers there is nothing of the API it can serve. /healthz answers 200 (the
// process runs); /readyz 503 with the reason; /health its report (mode waiting_for_redis,
// degraded); every other route a 503 problem `waiting_for_redis` with a Retry-After. Once Redis
// answers, the console stops it and serves the API on the same address.
type Waiting struct {
	echo    *echo.Echo
	pingDB  func(context.Context) error // the console database's probe
	ready   health.Prober
	version string
	log     zerolog.Logger

	httpd service.HTTP
}

// waitingRetryAfter is the Retry-After of a request refused while waiting: the console tries
// Redis at least every 10 s.
const waitingRetryAfter = 5 * time.Second

// NewWaiting builds the waiting server: ready's reason says why (and what Redis it waits
// for); the database answers /health's probe.
func NewWaiting(pingDB func(context.Context) error, ready health.Prober, version string, log zerolog.Logger) *Waiting {
	w := &Waiting{echo: echo.New(), pingDB: pingDB, ready: ready, version: cmp.Or(version, "dev"), log: log}
	w.httpd = service.HTTP{Name: "console waiting server", OnFailure: func(err error) {
		log.Error().Str("event", "console.http_failed").Err(err).Msg("the console's waiting server stopped serving")
	}}
	e := w.echo
	e.HideBanner, e.HidePort = true, true
	e.Use(api.RequestIDMiddleware)
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", func(c echo.Context) error {
		return c.String(http.StatusServiceUnavailable, "not ready: "+w.reason()+"\n")
	})
	e.GET("/health", w.health)
	e.Any("/*", w.refuse)
	return w
}

// reason is the readiness's reason, on one line.
func (w *Waiting) reason() string {
	_, why := w.ready.Ready()
	if why = strings.Join(strings.Fields(why), " "); why == "" {
		why = "waiting for Redis"
	}
	return why
}

// Handler is the waiting server as an http.Handler (tests serve it themselves).
func (w *Waiting) Handler() http.Handler { return w.echo }

func (w *Waiting) health(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), api.HealthProbe)
	defer cancel()
	start := time.Now()
	db := api.DependencyState{OK: true}
	if err := w.pingDB(ctx); err != nil {
		// Public: the kind of the failure, not the database's path (the log has it).
		w.log.Warn().Str("event", "console.database_unanswered").Err(err).Msg("the console database does not answer")
		db = api.DependencyState{Error: "not answering (the console's log says why)"}
	}
	db.LatencyMS = time.Since(start).Milliseconds()
	r := api.HealthReport{Status: "degraded", Version: w.version, Mode: "waiting_for_redis", Reason: w.reason(), Database: db,
		Redis: api.DependencyState{Error: "unreachable: the console waits for it"},
		Warning: "WAITING FOR REDIS: this console database has served with Redis, so the console does not run local mode while Redis " +
			"is unreachable (PLAITA_CONSOLE_LOCAL_FALLBACK=1 allows it); it starts on Redis as soon as Redis answers"}
	return c.JSON(http.StatusServiceUnavailable, r)
}

// refuse answers every route of the API and the UI while waiting.
func (w *Waiting) refuse(c echo.Context) error {
	p := api.NewProblem(http.StatusServiceUnavailable, "waiting_for_redis",
		"the console is not serving yet: %s; nothing was done, try again once it is ready (GET /readyz)", w.reason()).WithRetryAfter(waitingRetryAfter)
	p.RequestID, p.Instance = api.RequestID(c.Request().Context()), c.Request().URL.Path
	h := c.Response().Header()
	h.Set("Retry-After", p.GetHeaders().Get("Retry-After"))
	h.Set("Content-Type", "application/problem+json")
	c.Response().WriteHeader(p.Status)
	if c.Request().Method == http.MethodHead {
		return nil
	}
	return json.NewEncoder(c.Response()).Encode(p)
}

// Service serves the waiting server on addr (host:port; port 0 picks one, Addr says which)
// from Start until Stop.
func (w *Waiting) Service(addr string) service.Service { return &waitingService{w: w, addr: addr} }

type waitingService struct {
	w    *Waiting
	addr string
}

func (s *waitingService) Start(ctx context.Context) error { return s.w.start(ctx, s.addr) }
func (s *waitingService) Stop(ctx context.Context)        { s.w.Stop(ctx) }

func (w *Waiting) start(ctx context.Context, addr string) error {
	if w.httpd.Stopped() {
		return fmt.Errorf("console waiting server: %w", service.ErrStopped)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("console http: listen on %s: %w", addr, err)
	}
	return w.httpd.Serve(ctx, ln, &http.Server{Handler: w.echo, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10})
}

// Addr is the address served ("" before Start).
func (w *Waiting) Addr() string { return w.httpd.Addr() }

// Stop closes the waiting server's port (the requests in flight finish, bounded by ctx); safe
// twice and before Start.
func (w *Waiting) Stop(ctx context.Context) { w.httpd.Stop(ctx) }
