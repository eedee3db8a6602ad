package web

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/labstack/echo/v4"

	"plaita/internal/service"
	"plaita/web/api"
	"plaita/web/ui"
)

// Server is the console's HTTP server: the API and the web UI on one echo, served by an
// http.Server as a service.
type Server struct {
	api  *api.API
	echo *echo.Echo

	httpd service.HTTP
}

// New builds the console's server over d: the API, and the web UI on it; nothing listens yet.
func New(d api.Deps, s api.Settings) *Server {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	a := api.New(e, d, s)
	ui.Register(e, a)
	srv := &Server{api: a, echo: e}
	srv.httpd = service.HTTP{Name: "console http", OnFailure: func(err error) {
		d.Log.Error().Str("event", "console.http_failed").Err(err).Msg("the console's HTTP server stopped serving")
	}}
	return srv
}

// Handler is the server as an http.Handler (tests serve it themselves).
func (s *Server) Handler() http.Handler { return s.echo }

// OpenAPI is the document GET /api/openapi.json serves.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.OpenAPI() }

// Routes are the API's registered routes, in registration order.
func (s *Server) Routes() []api.Route { return s.api.Routes() }

// Drain makes the API refuse writes (503 draining) from now on; reads and requests in flight
// go on, but live streams end (their clients reconnect elsewhere). /readyz says not ready.
func (s *Server) Drain() { s.api.Drain() }

// ReconcileTenantStatuses publishes every tenant's status from the database, once; the report
// is also the one /health shows next.
func (s *Server) ReconcileTenantStatuses(ctx context.Context, trigger string) (api.TenantStatusReport, error) {
	return s.api.ReconcileTenantStatuses(ctx, trigger)
}

// Service serves the console on addr (host:port; port 0 picks a free one, Addr says which)
// from Start until Stop; Stop shuts it down gracefully: requests in flight finish, bounded by
// the stop context.
func (s *Server) Service(addr string) service.Service { return &httpService{s: s, addr: addr} }

type httpService struct {
	s    *Server
	addr string
}

func (h *httpService) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", h.addr)
	if err != nil {
		return fmt.Errorf("console http: listen on %s: %w", h.addr, err)
	}
	return h.s.serve(ctx, ln)
}

func (h *httpService) Stop(ctx context.Context) { h.s.stop(ctx) }

func (s *Server) serve(ctx context.Context, ln net.Listener) error {
	return s.httpd.Serve(ctx, ln, &http.Server{Handler: s.echo, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: 120 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10})
}

func (s *Server) stop(ctx context.Context) {
	s.api.EndStreams() // a stream would hold the graceful shutdown until its deadline
	s.httpd.Stop(ctx)
}

// Addr is the address served ("" before Start).
func (s *Server) Addr() string { return s.httpd.Addr() }
