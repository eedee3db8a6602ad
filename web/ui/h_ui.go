package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"plaita/control"
	"plaita/graph"
	"plaita/model"
	"plaita/web/api"
)

// The console's web pages (docs/console.md, "The web UI"): server-rendered html/template pages
// under /ui/, htmx for the parts that change in place. A page holds no rule of its own:
//
//   - the page calls the API in process (uiServer.call) for every read and write: the
//     same route, with the caller's cookie, tenant and CSRF token, so its access check, input
//     validation, audit row and refusal are the API's, byte for byte;
//   - a live region follows the API's Server-Sent Events through uiServer.relay (the same
//     route, streamed to the browser), and asks for its fragment again when an event says
//     something changed (web/ui/static/app.js); a poll stands in when the stream cannot be
//     held.
//
// Every write is a POST carrying the session's CSRF token (a form field, or the X-CSRF-Token
// header htmx sends); one whose Origin is another site's is refused before anything runs.

// Cookie of the tenant the pages act in (X-Tenant-ID of their API calls).
const uiTenantCookie = "plaita_tenant"

// uiServer renders the pages.
type uiServer struct {
	a      *api.API
	e      *echo.Echo
	pages  map[string]*template.Template
	graphs *graph.Engine
	now    func() time.Time
	log    zerolog.Logger
}

// Register adds the web UI to e, the server a is mounted on: its pages, fragments and static
// files. The pages call a's routes through e.
func Register(e *echo.Echo, a *api.API) {
	u := &uiServer{a: a, e: e, graphs: graph.New(), now: a.Now, log: a.Log()}
	pages, err := parsePages(u.funcs())
	if err != nil {
		panic(err) // the templates are embedded: a parse error is a build error, caught by every test
	}
	u.pages = pages
	static := http.StripPrefix("/ui/static/", http.FileServer(filesOnly{http.FS(staticFiles())}))
	e.GET("/ui/static/*", func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "public, max-age=3600")
		c.Response().Header().Set("X-Content-Type-Options", "nosniff")
		static.ServeHTTP(c.Response(), c.Request())
		return nil
	})
	e.GET("/", func(c echo.Context) error { return c.Redirect(http.StatusSeeOther, "/ui/") })
	// What a browser asks of every site whatever the page links: the console's icon.
	e.GET("/favicon.ico", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/ui/static/favicon.svg") })
	g := e.Group("/ui", u.headers, u.gate, u.sameOrigin)
	g.GET("", u.home)
	g.GET("/", u.home)
	u.authRoutes(g)
	u.flowRoutes(g)
	u.executionRoutes(g)
	u.opsRoutes(g)
	u.jobRoutes(g)
	u.adminRoutes(g)
}

// headers sets what every page's response carries: no caching of pages with data, a
// Content-Security-Policy that allows nothing but this origin (no inline script, no CDN, no
// frame), no MIME sniffing.
func (u *uiServer) headers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// filesOnly serves the static files and nothing else: a directory is "not found" (http.FileServer
// would list it).
type filesOnly struct{ fs http.FileSystem }

func (f filesOnly) Open(name string) (http.File, error) {
	file, err := f.fs.Open(name)
	if err != nil {
		return nil, err
	}
	if st, err := file.Stat(); err != nil || st.IsDir() {
		file.Close()
		return nil, fs.ErrNotExist
	}
	return file, nil
}

// uiLoginPath is the one page an anonymous caller is answered.
const uiLoginPath = "/ui/login"

// gate answers an anonymous caller nothing but the login page (a page, a fragment, a form
// post: a redirect to log in, before a byte of the body is read, so that no work is done for
// someone who has not logged in), and bounds every page's body as the API bounds its own
// (uiBodyLimit). A write's form is read here, within that bound: a body over it is a 413,
// never a form read whole or silently cut.
func (u *uiServer) gate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.URL.Path != uiLoginPath && !u.a.HasSession(r) {
			return u.fail(c, api.NewProblem(http.StatusUnauthorized, "unauthenticated", "log in first"))
		}
		limit := uiBodyLimit(r.URL.Path)
		if r.ContentLength > limit {
			return u.fail(c, tooLarge(limit))
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
		if api.IsRead(r.Method) {
			return next(c)
		}
		var err error
		if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
			err = r.ParseMultipartForm(limit)
		} else {
			err = r.ParseForm()
		}
		var big *http.MaxBytesError
		switch {
		case errors.As(err, &big):
			return u.fail(c, tooLarge(limit))
		case err != nil:
			return u.fail(c, api.NewProblem(http.StatusBadRequest, "invalid_form", "the form could not be read: %v", err))
		}
		return next(c)
	}
}

func tooLarge(limit int64) *api.Problem {
	return api.NewProblem(http.StatusRequestEntityTooLarge, "body_too_large", "the request body is larger than %d bytes", limit)
}

// uiBodyLimit bounds a page's request body: three times the bound of the API route the page
// posts to (a URL-encoded form triples a JSON document at worst), so a form carries what the
// API takes and no more; the login form is small.
func uiBodyLimit(path string) int64 {
	switch {
	case path == uiLoginPath:
		return 16 << 10
	case strings.HasPrefix(path, "/ui/flows"):
		return 3 * api.FlowBodyLimit
	case strings.HasPrefix(path, "/ui/events"):
		return 3 * api.EventBodyLimit
	}
	return 3 * api.DefaultMaxBody
}

// sameOrigin refuses a write whose Origin (or, without one, Referer) names another site: a
// cross-site form post carries the session cookie (SameSite=Lax lets a top-level POST through
// on some browsers' first two minutes) but is refused here before any handler runs; the CSRF
// token is still checked after this.
func (u *uiServer) sameOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if api.IsRead(r.Method) {
			return next(c)
		}
		from := r.Header.Get("Origin")
		if from == "" {
			from = r.Header.Get("Referer")
		}
		if from != "" {
			o, err := url.Parse(from)
			if err != nil || !strings.EqualFold(o.Host, r.Host) {
				return u.fail(c, api.NewProblem(http.StatusForbidden, "cross_origin", "a write from another origin (%s) is refused", from))
			}
		}
		return next(c)
	}
}

// ---- the caller ----

// uiSession is who is looking at a page, in which tenant, with which role there.
type uiSession struct {
	Login    string
	Platform bool
	Tenant   string
	Role     model.Role
	CSRF     string
	Tenants  []string // the tenants the switcher offers
}

// CanEdit and IsAdmin decide which buttons a page shows; the API decides what is allowed.
func (s *uiSession) CanEdit() bool { return s != nil && s.Role.AtLeast(model.RoleEditor) }
func (s *uiSession) IsAdmin() bool { return s != nil && s.Role.AtLeast(model.RoleAdmin) }

// session is the caller's session from GET /api/session; nil with the API's problem when there
// is none (a 401 sends the browser to the login page).
func (u *uiServer) session(c echo.Context) (*uiSession, *api.Problem) {
	var info api.SessionInfo
	if p := u.call(c, http.MethodGet, "/api/session", nil, &info); p != nil {
		return nil, p
	}
	if info.Kind != model.ActorUser || info.User == nil {
		return nil, api.NewProblem(http.StatusUnauthorized, "unauthenticated", "the web UI is for people who log in")
	}
	s := &uiSession{Login: info.Actor, Platform: info.Platform, CSRF: info.CSRFToken, Tenant: u.tenant(c)}
	for _, m := range info.Memberships {
		s.Tenants = append(s.Tenants, m.Tenant)
		if m.Tenant == s.Tenant {
			s.Role = m.Role
		}
	}
	if s.Platform {
		s.Role = model.RoleAdmin
		var page control.Page[model.Tenant]
		if u.call(c, http.MethodGet, "/api/tenants?limit=500", nil, &page) == nil {
			s.Tenants = s.Tenants[:0]
			for _, t := range page.Items {
				s.Tenants = append(s.Tenants, t.Slug)
			}
		}
	}
	if s.Role == "" && !s.Platform && len(info.Memberships) > 0 {
		// The tenant asked for is not theirs (or none was chosen and they are not a member of
		// the default one): the pages act in their first tenant, and remember it.
		m := info.Memberships[0]
		s.Tenant, s.Role = m.Tenant, m.Role
		c.Set(uiTenantKey, m.Tenant)
		c.SetCookie(tenantCookie(m.Tenant, api.SecureHTTP(c.Request())))
	}
	return s, nil
}

// uiTenantKey is the echo context key of the tenant a request's pages act in, when the session
// chose it (session).
const uiTenantKey = "plaita.ui.tenant"

// tenantCookie remembers the tenant the pages act in; it is Secure when the session cookie is
// (secureHTTP).
func tenantCookie(tenant string, secure bool) *http.Cookie {
	return &http.Cookie{Name: uiTenantCookie, Value: tenant, Path: "/ui", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: secure, MaxAge: 30 * 24 * 3600}
}

// tenant is the tenant the pages act in: the switcher's cookie, else the default tenant.
func (u *uiServer) tenant(c echo.Context) string {
	if t, ok := c.Get(uiTenantKey).(string); ok && t != "" {
		return t
	}
	if t := u.tenantCookie(c); t != "" {
		return t
	}
	return control.DefaultTenant
}

func (u *uiServer) tenantCookie(c echo.Context) string {
	ck, err := c.Cookie(uiTenantCookie)
	if err != nil {
		return ""
	}
	t, err := control.NormalizeTenant(ck.Value)
	if err != nil {
		return ""
	}
	return t
}

// csrf is the CSRF token a write came with: the header htmx sends, else the form's field.
func csrf(c echo.Context) string {
	if v := c.Request().Header.Get(api.HeaderCSRF); v != "" {
		return v
	}
	return c.FormValue("csrf")
}

// ---- calling the API in process ----

// call sends one request to the console's own API as the page's caller — their cookie, the
// page's tenant, the write's CSRF token, the page request's id and address — and decodes the
// answer into out; a 4xx or 5xx comes back as the API's Problem.
func (u *uiServer) call(c echo.Context, method, path string, body, out any) *api.Problem {
	rec, p := u.send(c, method, path, body)
	if p != nil {
		return p
	}
	if out != nil && rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			return u.internal(c, fmt.Errorf("ui: decode %s %s: %w", method, path, err))
		}
	}
	return nil
}

// send is call's request: the recorded answer of a 2xx, or its Problem.
func (u *uiServer) send(c echo.Context, method, path string, body any) (*httptest.ResponseRecorder, *api.Problem) {
	req, p := u.apiRequest(c, method, path, body)
	if p != nil {
		return nil, p
	}
	rec := httptest.NewRecorder()
	u.e.ServeHTTP(rec, req)
	if rec.Code >= 200 && rec.Code < 300 {
		return rec, nil
	}
	var prob api.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &prob); err != nil || prob.Code == "" {
		return nil, api.NewProblem(rec.Code, "http_error", "%s %s answered %d", method, path, rec.Code)
	}
	return nil, &prob
}

// apiRequest is a request to the console's own API as the page's caller: their cookie, the
// page's tenant (X-Tenant-ID), the write's CSRF token, the page request's id and address.
func (u *uiServer) apiRequest(c echo.Context, method, path string, body any) (*http.Request, *api.Problem) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, u.internal(c, fmt.Errorf("ui: encode %s %s: %w", method, path, err))
		}
		rd = bytes.NewReader(raw)
	}
	src := c.Request()
	req, err := http.NewRequestWithContext(src.Context(), method, path, rd)
	if err != nil {
		return nil, u.internal(c, fmt.Errorf("ui: %s %s: %w", method, path, err))
	}
	req.RemoteAddr, req.Host, req.TLS = src.RemoteAddr, src.Host, src.TLS
	for _, h := range []string{"Cookie", "User-Agent", "X-Forwarded-Proto"} {
		if v := src.Header.Values(h); len(v) > 0 {
			req.Header[h] = v
		}
	}
	req.Header.Set(api.HeaderRequestID, api.RequestID(src.Context()))
	req.Header.Set(api.HeaderTenant, u.tenant(c))
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if !api.IsRead(method) {
		req.Header.Set(api.HeaderCSRF, csrf(c))
	}
	return req, nil
}

// relay serves an API stream (Server-Sent Events) to the page as it comes: the API's route in
// process, as call does, but written straight to the browser's connection (each event is
// flushed through). A browser's EventSource sends no X-Tenant-ID; the relay adds the page's
// tenant, and passes Last-Event-ID on, so a reconnect resumes where the stream was.
func (u *uiServer) relay(c echo.Context, path string) error {
	req, p := u.apiRequest(c, http.MethodGet, path, nil)
	if p != nil {
		return u.fail(c, p)
	}
	if v := c.Request().Header.Get("Last-Event-ID"); v != "" {
		req.Header.Set("Last-Event-ID", v)
	}
	req.Header.Set("Accept", "text/event-stream")
	u.e.ServeHTTP(c.Response(), req)
	return nil
}

// internal logs err under the request id and is the 500 the page shows.
func (u *uiServer) internal(c echo.Context, err error) *api.Problem {
	id := api.RequestID(c.Request().Context())
	u.log.Error().Str("event", "console.ui_failed").Str("request_id", id).Err(err).Msg("a page failed")
	p := api.NewProblem(http.StatusInternalServerError, "internal", "internal error; the console's log has it under this request id")
	p.RequestID = id
	return p
}

// ---- rendering ----

// uiPage is what a page's template gets.
type uiPage struct {
	Title   string
	Nav     string
	S       *uiSession
	Data    any
	Notice  string
	Problem *api.Problem
	Now     time.Time
	// Local: the console runs in local mode (every page says so).
	Local bool
	// Self is the page's own URL, which a region refreshed after a write reloads.
	Self string
}

// render writes the page file with the layout, or, for an htmx request that names a fragment,
// only that fragment.
func (u *uiServer) render(c echo.Context, status int, file, fragment string, p uiPage) error {
	t, ok := u.pages[file]
	if !ok {
		return u.fail(c, u.internal(c, fmt.Errorf("ui: no page %s", file)))
	}
	p.Now, p.Local, p.Self = u.now(), u.a.LocalMode(), c.Request().URL.RequestURI()
	name := "layout.html"
	if fragment != "" {
		name = fragment
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, name, p); err != nil {
		return u.fail(c, u.internal(c, fmt.Errorf("ui: render %s/%s: %w", file, name, err)))
	}
	return c.HTMLBlob(status, b.Bytes())
}

// fail answers with a problem: a 401 goes to the login page (an htmx request is told to go
// there whole), anything else is shown as the problem, as a fragment to an htmx request.
func (u *uiServer) fail(c echo.Context, p *api.Problem) error {
	if p.Status == http.StatusUnauthorized {
		to := "/ui/login?next=" + url.QueryEscape(c.Request().URL.RequestURI())
		if c.Request().Header.Get("HX-Request") != "" {
			c.Response().Header().Set("HX-Redirect", to)
			return c.NoContent(http.StatusUnauthorized)
		}
		return c.Redirect(http.StatusSeeOther, to)
	}
	if c.Request().Header.Get("HX-Request") != "" {
		// htmx swaps only 2xx answers: the problem is shown where the request's answer goes.
		return u.renderProblemFragment(c, p)
	}
	return u.render(c, p.Status, "problem.html", "", uiPage{Title: http.StatusText(p.Status), Problem: p, S: u.quietSession(c)})
}

// failRefresh is fail for a page whose region refreshes itself (htmx names the region in
// HX-Target): a problem of the moment (a 5xx: Redis or the database gone) answers that refresh
// stale, so the region keeps what it shows under the page's banner and the refreshes go on,
// where a problem swapped in would replace it and end them.
func (u *uiServer) failRefresh(c echo.Context, p *api.Problem, region string) error {
	if p.Status >= http.StatusInternalServerError && c.Request().Header.Get("HX-Request") != "" && c.Request().Header.Get("HX-Target") == region {
		return u.stale(c, p)
	}
	return u.fail(c, p)
}

func (u *uiServer) renderProblemFragment(c echo.Context, p *api.Problem) error {
	t := u.pages["problem.html"]
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "problem", p); err != nil {
		return fmt.Errorf("ui: render problem: %w", err)
	}
	return c.HTMLBlob(http.StatusOK, b.Bytes())
}

// quietSession is the session for a problem page's navigation, nil when there is none.
func (u *uiServer) quietSession(c echo.Context) *uiSession {
	s, _ := u.session(c)
	return s
}

// page is the usual start of a page handler: the caller's session, or the answer that sends
// them to log in.
func (u *uiServer) page(c echo.Context) (*uiSession, error) {
	s, p := u.session(c)
	if p != nil {
		return nil, u.fail(c, p)
	}
	return s, nil
}

func (u *uiServer) home(c echo.Context) error {
	return c.Redirect(http.StatusSeeOther, "/ui/executions")
}
