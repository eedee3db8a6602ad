package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"plaita/model"

	"github.com/danielgtaylor/huma/v2"
)

// Route is one endpoint: where it is, who may call it, what it needs and what it audits. Every
// endpoint is one register call in routes.go.
type Route struct {
	ID      string // the OpenAPI operationId: "execution-resume"
	Method  string
	Path    string // "/api/executions/{id}/resume"
	Summary string
	Tags    []string
	Access  Access
	// Action is the audit action of a write ("execution.resume"): every call that passes the
	// access check is recorded, allowed or denied. A read has none, unless it is audited too
	// (the audit trail's own read).
	Action string
	// Redis: the route needs the control plane — over Redis, or local mode's over the console's
	// database; it answers 503 while the console has neither.
	Redis bool
	// Safe: a POST that changes nothing (validate): not audited, served while draining.
	Safe bool
	// MaxBody bounds the request body (0: DefaultMaxBody).
	MaxBody int64
	// Status is the success status (0: 200; 201 for a creation, 204 for nothing).
	Status int
	// Limited: a limit may refuse the call for now (429 with Retry-After: a tenant at its
	// running quota, a locked account).
	Limited bool
	// Bounded: the handler's work is bounded by Settings.RedisTimeout, so that a Redis that
	// went away is a 503 in seconds instead of a request that hangs (rueidis retries a read
	// until its context ends). Not for a route whose answer streams on after the handler
	// returns.
	Bounded bool
}

// DefaultMaxBody bounds a request body unless its route says otherwise.
const DefaultMaxBody = 1 << 20

// Call is one authorized request as a handler sees it.
type Call struct {
	Route     *Route
	Principal Principal
	// Tenant is the tenant the request acts in ("default" for the default tenant; "" for a
	// route that is not tenant-scoped) and Role the caller's role there.
	Tenant    string
	Role      model.Role
	RequestID string
	IP        string
	Secure    bool // TLS, or X-Forwarded-Proto: https
	// hc is the huma context: handlers that set cookies reach the response through it.
	hc huma.Context
	// What the audit row of the call records besides the route's action; a handler fills it.
	Audit AuditNote
}

// AuditNote is what a handler adds to its call's audit row.
type AuditNote struct {
	Target  string
	Details map[string]any
	// Tenant, when set, is the tenant the action was on, when it is not the caller's (a member
	// added to another tenant, a tenant disabled).
	Tenant string
	// Skip leaves the call unaudited (a login: its handler writes its own row).
	Skip bool
	// Action, when set, names what the call did instead of its route's action (a job's dry
	// run is job.dry_run, not job.create: it created nothing).
	Action string
}

// Note adds a detail to the call's audit row.
func (c *Call) Note(k string, v any) {
	if c.Audit.Details == nil {
		c.Audit.Details = map[string]any{}
	}
	c.Audit.Details[k] = v
}

// callKey is the context key of the *Call the access middleware builds.
type callKey struct{}

func callFrom(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// register adds a route: its OpenAPI operation (with the Problem responses its access and
// needs can produce) and its handler, wrapped so that errors become Problems and writes are
// audited. The access check runs earlier, in the API's middleware (access), before the body is
// read: an unauthenticated caller learns nothing from the validation of its body.
func register[I, O any](a *API, r Route, h func(context.Context, *Call, *I) (*O, error)) {
	registerOp(a, r, nil, h)
}

// registerOp is register with a last change to the operation before it is registered (a
// stream documents its text/event-stream response).
func registerOp[I, O any](a *API, r Route, change func(*huma.Operation), h func(context.Context, *Call, *I) (*O, error)) {
	rt := r
	a.routes = append(a.routes, &rt)
	op := huma.Operation{
		OperationID: r.ID, Method: r.Method, Path: r.Path, Summary: r.Summary, Tags: r.Tags,
		MaxBodyBytes: cmpOr(r.MaxBody, DefaultMaxBody), DefaultStatus: r.Status,
		Metadata:    map[string]any{"route": &rt},
		Description: describe(&rt),
		Responses:   a.problemResponses(&rt),
	}
	if r.Access != Public {
		op.Security = []map[string][]string{{"session": {}}, {"apiKey": {}}, {"adminKey": {}}}
	}
	if change != nil {
		change(&op)
	}
	huma.Register(a.huma, op, func(ctx context.Context, in *I) (*O, error) {
		c := callFrom(ctx)
		if rt.Bounded {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, a.s.redisTimeout())
			defer cancel()
		}
		out, err := h(ctx, c, in)
		if c != nil && rt.Action != "" && !c.Audit.Skip {
			a.auditCall(ctx, c, err)
		}
		if err != nil {
			p := problemFor(err)
			if p.Status >= http.StatusInternalServerError {
				a.d.Log.Error().Str("event", "console.request_failed").Str("request_id", RequestID(ctx)).Str("route", rt.ID).
					Err(err).Msg("request failed")
			}
			return nil, p
		}
		return out, nil
	})
}

func cmpOr(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

// describe says who may call a route, for its OpenAPI description.
func describe(r *Route) string {
	var b strings.Builder
	b.WriteString("Access: " + r.Access.String())
	if r.Access >= TenantViewer && r.Access <= TenantAdmin {
		b.WriteString(" (in the tenant of " + HeaderTenant + ", or the API key's)")
	}
	b.WriteString(".")
	if r.Action != "" {
		b.WriteString(" Audited as " + r.Action + ".")
	}
	switch {
	case r.Redis:
		b.WriteString(" Served by the roles: over Redis, or in local mode in the console's process.")
	}
	return b.String()
}

// problemResponses documents the Problem statuses a route can answer with.
func (a *API) problemResponses(r *Route) map[string]*huma.Response {
	schema := a.huma.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[Problem](), true, "Problem")
	statuses := []int{http.StatusBadRequest, http.StatusInternalServerError}
	if r.Access != Public {
		statuses = append(statuses, http.StatusUnauthorized, http.StatusForbidden)
	}
	if r.Access == Platform {
		statuses = append(statuses, http.StatusServiceUnavailable)
	}
	if r.Redis || r.Method != http.MethodGet {
		statuses = append(statuses, http.StatusServiceUnavailable, http.StatusNotFound, http.StatusConflict)
	}
	if r.Limited {
		statuses = append(statuses, http.StatusTooManyRequests)
	}
	if r.MaxBody > 0 || r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		statuses = append(statuses, http.StatusRequestEntityTooLarge)
	}
	out := map[string]*huma.Response{}
	for _, s := range statuses {
		out[strconv.Itoa(s)] = &huma.Response{Description: http.StatusText(s),
			Content: map[string]*huma.MediaType{"application/problem+json": {Schema: schema}}}
	}
	return out
}

// access is the API's middleware: it runs before huma reads the body. It refuses writes while
// draining, authenticates, authorizes the route (tenant, role, CSRF), audits a denial, and
// hands the handler its Call.
func (a *API) access(hc huma.Context, next func(huma.Context)) {
	r, _ := hc.Operation().Metadata["route"].(*Route)
	hc = statusMapped{hc}
	if r == nil { // huma's own operations (none are registered without a route today)
		next(hc)
		return
	}
	ctx := hc.Context()
	c := &Call{Route: r, RequestID: RequestID(ctx), IP: clientIP(hc), Secure: secureRequest(hc), hc: hc, Principal: anonymous}
	if a.draining.Load() && !IsRead(r.Method) && !r.Safe {
		a.writeProblem(hc, NewProblem(http.StatusServiceUnavailable, "draining", "the console is shutting down and takes no writes; retry on another instance").WithRetryAfter(5*time.Second))
		return
	}
	if r.Access == Public { // a stale cookie must not keep anyone from logging in again
		next(huma.WithValue(hc, callKey{}, c))
		return
	}
	p, d := a.authenticate(ctx, hc)
	c.Principal = p
	if d == nil {
		c.Tenant, c.Role, d = a.authorize(ctx, hc, r, p)
	}
	if d == nil {
		d = checkCSRF(hc, p)
	}
	if d == nil && r.Redis && a.d.Plane == nil {
		d = &denial{p: problemFor(errNoRedis), reason: "redis_unavailable"}
	}
	if d != nil {
		if d.reason != "error" && d.reason != "redis_unavailable" {
			a.auditDenial(ctx, c, d.reason)
		}
		a.writeProblem(hc, d.p)
		return
	}
	next(huma.WithValue(hc, callKey{}, c))
}

// statusMapped makes huma's validation failures (422) the API's 400: one status for a request
// that is wrong, whether its JSON is malformed or does not fit the schema.
type statusMapped struct{ humaContext }

type humaContext = huma.Context

func (s statusMapped) SetStatus(code int) {
	if code == http.StatusUnprocessableEntity {
		code = http.StatusBadRequest
	}
	s.humaContext.SetStatus(code)
}

func (s statusMapped) Unwrap() huma.Context { return s.humaContext }

// transform is the API's response transformer: huma's own error bodies become Problems, and
// every Problem carries the request id and path.
func (a *API) transform(hc huma.Context, _ string, v any) (any, error) {
	var p *Problem
	switch e := v.(type) {
	case *huma.ErrorModel:
		p = fromHuma(e)
	case *Problem:
		p = e
	default:
		return v, nil
	}
	a.redactProblem(p)
	if p.RequestID == "" {
		p.RequestID = RequestID(hc.Context())
	}
	if p.Instance == "" {
		u := hc.URL()
		p.Instance = u.Path
	}
	return p, nil
}

// redactProblem hides the names of storage keys in what a problem says (control.Redactor): a
// refusal written for an operator's terminal may name one, an HTTP caller must not read it.
func (a *API) redactProblem(p *Problem) {
	r := a.redact
	p.Detail, p.Unblock = r.String(p.Detail), r.String(p.Unblock)
	for i := range p.Lines {
		p.Lines[i] = r.String(p.Lines[i])
	}
	for _, e := range p.Errors {
		if e != nil {
			e.Message = r.String(e.Message)
		}
	}
	for i := range p.Accepted {
		h := &p.Accepted[i]
		h.Command = r.String(h.Command)
		for j := range h.Note {
			h.Note[j] = r.String(h.Note[j])
		}
	}
	for k, v := range p.Fields {
		p.Fields[k] = r.Value(v)
	}
}

// writeProblem answers with p from a middleware (before huma's handler runs).
func (a *API) writeProblem(hc huma.Context, p *Problem) {
	v, _ := a.transform(hc, "", p)
	for k, vals := range p.GetHeaders() {
		for _, val := range vals {
			hc.AppendHeader(k, val)
		}
	}
	hc.SetHeader("Content-Type", "application/problem+json")
	hc.SetStatus(p.Status)
	if err := json.NewEncoder(hc.BodyWriter()).Encode(v); err != nil && !errors.Is(hc.Context().Err(), context.Canceled) {
		a.d.Log.Debug().Str("event", "console.write_failed").Err(err).Msg("could not write a problem")
	}
}
