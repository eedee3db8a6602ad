package web

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humaecho"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"plaita/control"
	"plaita/internal/health"
	"plaita/internal/service"
)

// Settings are the console's knobs, from the configuration (roles/console.go).
type Settings struct {
	// Env is PLAITA_CONSOLE_ENV: exactly "prod" makes deleting an execution admin-only.
	Env string
	// AdminAPIKey is PLAITA_CONSOLE_ADMIN_API_KEY; AllowInsecureAdmin is
	// PLAITA_CONSOLE_ALLOW_INSECURE_ADMIN (without a key, the admin API is then open to any
	// X-Admin-API-Key value; with neither it answers 503).
	AdminAPIKey        string
	AllowInsecureAdmin bool
	// SessionTTL is how long a login lasts (0: control.DefaultSessionMaxAge).
	SessionTTL time.Duration
	// Version is the binary's, in the OpenAPI document and /health.
	Version string
	// Live bounds and paces the Server-Sent Events streams (h_live.go).
	Live LiveSettings
	// TenantStatusInterval is PLAITA_TENANT_STATUS_RECONCILE_SECONDS, how often the console
	// republishes the tenants' statuses (0: never but at start), for /health.
	TenantStatusInterval time.Duration
	// Config is the console's effective configuration (secrets masked), GET /api/cluster/config.
	Config *EffectiveConfig
	// RedisTimeout bounds the work of a Bounded route (0: DefaultRedisTimeout).
	RedisTimeout time.Duration
	// Login guards POST /api/login per client network and per (login, network) (throttle.go;
	// zero: the defaults).
	Login LoginThrottle
}

// DefaultRedisTimeout bounds a Bounded route's work: well above a healthy call's milliseconds,
// below a client's or a scraper's patience.
const DefaultRedisTimeout = 10 * time.Second

func (s Settings) redisTimeout() time.Duration {
	if s.RedisTimeout > 0 {
		return s.RedisTimeout
	}
	return DefaultRedisTimeout
}

// Deps are what the API works on.
type Deps struct {
	// Accounts are the console's tenants, users, members, API keys, sessions and audit trail
	// (the console's database, with Redis when it has one).
	Accounts *control.Accounts
	// Catalog is the console's record of flows: drafts, who published each version.
	Catalog *control.Catalog
	// Plane is the control plane over Redis; nil when Redis was unreachable at start (RedisErr
	// says why): the routes that need it answer 503.
	Plane    *control.Plane
	RedisErr error
	// Local is local mode's control plane (executions in this process, on the database), set
	// when Redis was unreachable at start: the routes marked Local are served by it.
	Local *control.Local
	// Jobs keeps and runs the bulk jobs (h_jobs.go); set with Plane (its runner is a service
	// of the console's, roles/console.go).
	Jobs *control.Bulk
	// EngineSync is the start's write-back of the recorded flow versions to Redis (its last
	// report is on /health); set with Plane.
	EngineSync *control.EngineSync
	// Ready is the process's readiness (/readyz); nil: ready unless draining.
	Ready health.Prober
	Log   zerolog.Logger
	Now   func() time.Time
}

// errNoRedis is what a route that needs Redis answers while the console has none.
var errNoRedis = control.ErrNoRedis

// errLocalMode is what a route that needs the roles answers in local mode.
var errLocalMode = errors.New("not in local mode: Redis was unreachable when the console started, and this needs Redis and the roles " +
	"(dead letters, schedules, the cluster, bulk jobs, event listing); restart the console once Redis answers")

// ops are the operations of the console's mode: over Redis (Plane), else local mode's.
func (a *api) ops() control.Operations {
	if a.d.Plane != nil {
		return a.d.Plane
	}
	if a.d.Local != nil {
		return a.d.Local
	}
	return nil
}

// api is the registered API: the routes, their dependencies and the drain flag.
type api struct {
	huma     huma.API
	d        Deps
	s        Settings
	routes   []*Route
	draining atomic.Bool
	streams  *streams         // the live streams: their bound, and their end at drain (h_live.go)
	catalog  *control.Catalog // flows with the console database: drafts, version records (h_drafts.go)
	logins   *loginGuard      // the login guard: per client network, per (login, network) (throttle.go)
	redact   control.Redactor // hides storage keys in problems (api.go: redactProblem)

	// scrapes counts, by part, the reads GET /api/metrics could not make (h_cluster.go);
	// scrapeWarnAt is when a degraded scrape was last logged (Unix seconds).
	scrapes      scrapeFailures
	scrapeWarnAt atomic.Int64
}

// Server is the console's HTTP server: the API on echo, served by an http.Server as a service.
type Server struct {
	api  *api
	echo *echo.Echo
	log  zerolog.Logger

	httpd service.HTTP
}

// New builds the API over d; nothing listens yet.
func New(d Deps, s Settings) *Server {
	if d.Now == nil {
		d.Now = time.Now
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	cfg := huma.DefaultConfig("plaita console API", cmpOrString(s.Version, "dev"))
	// No $schema links in bodies (a strict client would have to accept a field it never
	// sent), no documentation page (it loads scripts from a CDN), no schema routes.
	cfg.CreateHooks, cfg.DocsPath, cfg.SchemasPath = nil, "", ""
	cfg.OpenAPIPath = "/api/openapi"
	cfg.RejectUnknownQueryParameters = true
	cfg.Info.Description = "The console's HTTP API (docs/console.md). Errors are RFC 9457 problem details (Problem)."
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"session":  {Type: "apiKey", In: "cookie", Name: SessionCookie, Description: "POST /api/login; writes also need " + HeaderCSRF},
		"apiKey":   {Type: "http", Scheme: "bearer", Description: "A tenant API key, plk_…"},
		"adminKey": {Type: "apiKey", In: "header", Name: HeaderAdminKey, Description: "PLAITA_CONSOLE_ADMIN_API_KEY"},
	}
	a := &api{d: d, s: s, scrapes: newScrapeFailures(), catalog: d.Catalog, logins: newLoginGuard(s.Login, d.Now),
		redact: control.NewRedactor("")}
	if d.Plane != nil {
		a.redact = d.Plane.Redactor()
	}
	cfg.Transformers = []huma.Transformer{a.transform}
	a.huma = humaecho.New(e, cfg)
	a.huma.UseMiddleware(a.access)
	srv := &Server{api: a, echo: e, log: d.Log}
	srv.httpd = service.HTTP{Name: "console http", OnFailure: func(err error) {
		d.Log.Error().Str("event", "console.http_failed").Err(err).Msg("the console's HTTP server stopped serving")
	}}
	e.Use(requestIDMiddleware, noStore, srv.recoverMiddleware)
	e.HTTPErrorHandler = srv.echoError
	a.routes = nil
	registerRoutes(a)
	registerUI(a, e)
	return srv
}

func cmpOrString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Handler is the API as an http.Handler (tests serve it themselves).
func (s *Server) Handler() http.Handler { return s.echo }

// OpenAPI is the document GET /api/openapi.json serves.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.huma.OpenAPI() }

// Routes are the registered routes, in registration order.
func (s *Server) Routes() []Route {
	out := make([]Route, len(s.api.routes))
	for i, r := range s.api.routes {
		out[i] = *r
	}
	return out
}

// Drain makes the API refuse writes (503 draining) from now on; reads and requests in flight
// go on, but live streams end (their clients reconnect elsewhere). /readyz says not ready.
func (s *Server) Drain() {
	s.api.draining.Store(true)
	s.api.endStreams()
}

// ---- the HTTP server as a service ----

// Service serves the API on addr (host:port; port 0 picks a free one, Addr says which) from
// Start until Stop; Stop shuts it down gracefully: requests in flight finish, bounded by the
// stop context.
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
	s.api.endStreams() // a stream would hold the graceful shutdown until its deadline
	s.httpd.Stop(ctx)
}

// Addr is the address served ("" before Start).
func (s *Server) Addr() string { return s.httpd.Addr() }

// ---- echo middleware and errors ----

// requestIDKey is the context key of the request id.
type requestIDKey struct{}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// goodRequestID is what a client's own X-Request-Id must look like to be kept.
var goodRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// requestIDMiddleware gives every request an id: the client's X-Request-Id when it is a sane
// token, else a new one; it is echoed in the response, in every Problem and in audit rows.
func requestIDMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(HeaderRequestID)
		if !goodRequestID.MatchString(id) {
			id = "req_" + rand.Text()[:20]
		}
		c.Response().Header().Set(HeaderRequestID, id)
		c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), requestIDKey{}, id)))
		return next(c)
	}
}

// noStore marks every answer as one no cache keeps and no browser sniffs into another type:
// the API's answers carry tenants' data and credentials. The static files set their own cache
// lifetime after it.
func noStore(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// recoverMiddleware turns a handler's panic into a 500 Problem and one log line.
func (s *Server) recoverMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error().Str("event", "console.panic").Str("request_id", requestID(c.Request().Context())).
					Str("path", c.Request().URL.Path).Interface("panic", v).Msg("a handler panicked")
				err = echo.NewHTTPError(http.StatusInternalServerError, "internal error")
			}
		}()
		return next(c)
	}
}

// echoError renders what echo itself answers (no such route, method not allowed, a panic) as
// a Problem.
func (s *Server) echoError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, code, detail := http.StatusInternalServerError, "internal", "internal error; the console's log has it under this request id"
	var he *echo.HTTPError
	if errors.As(err, &he) {
		status = he.Code
		switch status {
		case http.StatusNotFound:
			code, detail = "no_route", fmt.Sprintf("no route %s %s (GET /api/openapi.json lists them)", c.Request().Method, c.Request().URL.Path)
		case http.StatusMethodNotAllowed:
			code, detail = "method_not_allowed", fmt.Sprintf("%s is not allowed on %s", c.Request().Method, c.Request().URL.Path)
		case http.StatusInternalServerError:
		default:
			code, detail = "http_error", fmt.Sprint(he.Message)
		}
	}
	p := newProblem(status, code, "%s", detail)
	p.RequestID, p.Instance = requestID(c.Request().Context()), c.Request().URL.Path
	c.Response().Header().Set("Content-Type", "application/problem+json")
	c.Response().WriteHeader(status)
	if c.Request().Method != http.MethodHead {
		_ = json.NewEncoder(c.Response()).Encode(p)
	}
}
