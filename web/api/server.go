package api

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humaecho"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"plaita/control"
	"plaita/internal/health"
	"plaita/internal/tracing"
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
	// TraceURLTemplate is PLAITA_TRACE_URL_TEMPLATE: an execution's view links its trace
	// there ({trace_id} replaced); "" links nothing (the trace id is shown all the same).
	TraceURLTemplate string
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
	// Plane is the control plane: over Redis, or in local mode over the console's database
	// (LocalMode); nil when the console has neither: the routes that need it answer 503.
	Plane *control.Plane
	// RedisErr is why Redis was unreachable at start (local mode, or neither).
	RedisErr error
	// LocalMode: Redis was unreachable at start and Plane runs on the console's database, the
	// roles in the console's process (roles.LocalMode).
	LocalMode bool
	// Orphans is what local mode's start did with the executions an earlier version's local
	// mode left running (PLAITA_CONSOLE_RECONCILE_ORPHANS); nil when it did not run.
	Orphans *control.OrphanReport
	// Credentials are the tenants' credentials (sealed; set with Plane).
	Credentials *control.Credentials
	// Hooks are the signed trigger contracts (set with Plane).
	Hooks *control.Hooks
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

// API is the registered API: the routes, their dependencies and the drain flag.
type API struct {
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

// New mounts the API on e: its routes under /api and the health routes, the OpenAPI document,
// and what every answer of e goes through — the request id, no caching, a panic as a 500, and
// echo's own errors (no such route, method not allowed) as Problems.
func New(e *echo.Echo, d Deps, s Settings) *API {
	if d.Now == nil {
		d.Now = time.Now
	}
	cfg := huma.DefaultConfig("plaita console API", cmp.Or(s.Version, "dev"))
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
	var failures loginFailures
	if d.Accounts != nil { // not an interface holding a nil pointer
		failures = d.Accounts
	}
	a := &API{d: d, s: s, scrapes: newScrapeFailures(), catalog: d.Catalog, logins: newLoginGuard(s.Login, d.Now, failures),
		redact: control.NewRedactor("")}
	if d.Plane != nil {
		a.redact = d.Plane.Redactor()
	}
	cfg.Transformers = []huma.Transformer{a.transform}
	a.huma = humaecho.New(e, cfg)
	a.huma.UseMiddleware(a.access)
	e.Use(RequestIDMiddleware, traceMiddleware, noStore, a.recoverMiddleware)
	e.HTTPErrorHandler = a.echoError
	registerRoutes(a)
	return a
}

// Plane is the console's control plane (on Redis, or local mode's); nil when it has neither.
func (a *API) Plane() *control.Plane { return a.d.Plane }

// HasPlane says whether the console has a control plane; LocalMode whether it runs in local
// mode.
func (a *API) HasPlane() bool  { return a.d.Plane != nil }
func (a *API) LocalMode() bool { return a.d.LocalMode }

// Log is the console's logger; Now its clock.
func (a *API) Log() zerolog.Logger { return a.d.Log }
func (a *API) Now() time.Time      { return a.d.Now() }

// OpenAPI is the document GET /api/openapi.json serves.
func (a *API) OpenAPI() *huma.OpenAPI { return a.huma.OpenAPI() }

// Routes are the registered routes, in registration order.
func (a *API) Routes() []Route {
	out := make([]Route, len(a.routes))
	for i, r := range a.routes {
		out[i] = *r
	}
	return out
}

// Drain makes the API refuse writes (503 draining) from now on; reads and requests in flight
// go on, but live streams end (their clients reconnect elsewhere). /readyz says not ready.
func (a *API) Drain() {
	a.draining.Store(true)
	a.EndStreams()
}

// ---- echo middleware and errors ----

// requestIDKey is the context key of the request id.
type requestIDKey struct{}

// RequestID is the request's id (RequestIDMiddleware), "" outside a request.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// goodRequestID is what a client's own X-Request-Id must look like to be kept.
var goodRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// RequestIDMiddleware gives every request an id: the client's X-Request-Id when it is a sane
// token, else a new one; it is echoed in the response, in every Problem and in audit rows.
func RequestIDMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
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

// traceMiddleware runs each request under a server span while tracing is on, a child of the
// caller's span when the request carries a W3C traceparent: a start it enqueues is sent under
// it, so the execution's trace begins at the caller's.
func traceMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !tracing.Enabled() {
			return next(c)
		}
		r := c.Request()
		// Named by the route's pattern, never the path (ids in paths would make a name per
		// execution); a request that matched no route is named by its method alone.
		name, route := r.Method, c.Path()
		if route != "" {
			name += " " + route
		}
		ctx, span := tracing.Start(tracing.FromHeaders(r.Context(), r.Header), name, trace.SpanKindServer)
		defer span.End()
		span.SetAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
			attribute.String("plaita.request_id", RequestID(r.Context())))
		if route != "" {
			span.SetAttributes(attribute.String("http.route", route))
		}
		c.SetRequest(r.WithContext(ctx))
		err := next(c)
		status := c.Response().Status
		if he := (*echo.HTTPError)(nil); errors.As(err, &he) {
			status = he.Code
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		return err
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
func (a *API) recoverMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.d.Log.Error().Str("event", "console.panic").Str("request_id", RequestID(c.Request().Context())).
					Str("path", c.Request().URL.Path).Interface("panic", v).Msg("a handler panicked")
				err = echo.NewHTTPError(http.StatusInternalServerError, "internal error")
			}
		}()
		return next(c)
	}
}

// echoError renders what echo itself answers (no such route, method not allowed, a panic) as
// a Problem.
func (a *API) echoError(err error, c echo.Context) {
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
	p := NewProblem(status, code, "%s", detail)
	p.RequestID, p.Instance = RequestID(c.Request().Context()), c.Request().URL.Path
	c.Response().Header().Set("Content-Type", "application/problem+json")
	c.Response().WriteHeader(status)
	if c.Request().Method != http.MethodHead {
		_ = json.NewEncoder(c.Response()).Encode(p)
	}
}
