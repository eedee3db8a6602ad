package web

import (
	"context"
	"crypto/tls"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/labstack/echo/v4"
)

// The access check of a page that calls a control operation itself (no API endpoint yet): the
// API's own steps — authenticate, authorize the Route, CSRF, Redis — over the page's request,
// with the page's tenant as X-Tenant-ID and the form's CSRF token as X-CSRF-Token. Denials are
// audited as the API audits them; the handler audits its write with auditCall.

// uiRoutes are the operations pages run on control directly, with the access each needs (the
// access the CLI's equivalent has in the API's terms: reading is a viewer's, changing an
// execution's course an editor's, the cluster's internals a platform admin's).
var uiRoutes = struct {
	approvals, answer, deadLetters, replay, events, publishEvent, schedules, setSchedule, cluster Route
}{
	approvals:    Route{ID: "ui-approval-list", Method: http.MethodGet, Access: TenantViewer, Redis: true},
	answer:       Route{ID: "ui-approval-answer", Method: http.MethodPost, Access: TenantEditor, Action: "approval.answer", Redis: true},
	deadLetters:  Route{ID: "ui-dlq-list", Method: http.MethodGet, Access: TenantViewer, Redis: true},
	replay:       Route{ID: "ui-dlq-replay", Method: http.MethodPost, Access: TenantAdmin, Action: "dlq.replay", Redis: true},
	events:       Route{ID: "ui-event-list", Method: http.MethodGet, Access: TenantViewer, Redis: true},
	publishEvent: Route{ID: "ui-event-publish", Method: http.MethodPost, Access: TenantEditor, Action: "event.publish", Redis: true},
	schedules:    Route{ID: "ui-schedule-list", Method: http.MethodGet, Access: TenantViewer, Redis: true},
	setSchedule:  Route{ID: "ui-schedule-set", Method: http.MethodPost, Access: TenantEditor, Action: "schedule.set_enabled", Redis: true},
	cluster:      Route{ID: "ui-cluster-status", Method: http.MethodGet, Access: Platform, Redis: true},
}

// authorize runs the API's access check of r on the page's request: the call to run the
// operation as, or the problem that refuses it.
func (u *uiServer) authorize(c echo.Context, r Route) (*Call, *Problem) {
	hc := &uiHuma{c: c, tenant: u.tenant(c)}
	ctx := c.Request().Context()
	call := &Call{Route: &r, RequestID: requestID(ctx), IP: clientIP(hc), Secure: secureRequest(hc), hc: hc, Principal: anonymous}
	if u.a.draining.Load() && !isRead(r.Method) {
		return nil, newProblem(http.StatusServiceUnavailable, "draining", "the console is shutting down and takes no writes; retry on another instance")
	}
	p, d := u.a.authenticate(ctx, hc)
	call.Principal = p
	if d == nil {
		call.Tenant, call.Role, d = u.a.authorize(ctx, hc, &r, p)
	}
	if d == nil {
		d = checkCSRF(hc, p)
	}
	if d == nil && r.Redis && u.a.d.Plane == nil {
		d = &denial{p: problemFor(errNoRedis), reason: "redis_unavailable"}
	}
	if d != nil {
		if d.reason != "error" && d.reason != "redis_unavailable" {
			u.a.auditDenial(ctx, call, d.reason)
		}
		return nil, d.p
	}
	if call.Tenant == "" {
		call.Tenant = hc.tenant // a platform route: the page's tenant for what is tenant-scoped
	}
	return call, nil
}

// done audits a write the page ran (as register does for an API route) and returns its error
// as the problem to show.
func (u *uiServer) done(ctx context.Context, call *Call, err error) *Problem {
	u.a.auditCall(ctx, call, err)
	if err != nil {
		return problemFor(err)
	}
	return nil
}

// uiHuma is the page's echo request as the huma.Context the API's checks read: its headers,
// with X-Tenant-ID the page's tenant and X-CSRF-Token the write's token (header or form field).
// Nothing is written through it.
type uiHuma struct {
	c      echo.Context
	tenant string
	status int
}

var _ huma.Context = (*uiHuma)(nil)

func (h *uiHuma) header(name string) string {
	switch {
	case strings.EqualFold(name, HeaderTenant):
		return h.tenant
	case strings.EqualFold(name, HeaderCSRF):
		return csrf(h.c)
	case strings.EqualFold(name, HeaderAdminKey), strings.EqualFold(name, "Authorization"):
		return "" // a page is a session's; keys are the API's
	}
	return h.c.Request().Header.Get(name)
}

func (h *uiHuma) Operation() *huma.Operation { return nil }
func (h *uiHuma) Context() context.Context   { return h.c.Request().Context() }
func (h *uiHuma) TLS() *tls.ConnectionState  { return h.c.Request().TLS }
func (h *uiHuma) Version() huma.ProtoVersion {
	r := h.c.Request()
	return huma.ProtoVersion{Proto: r.Proto, ProtoMajor: r.ProtoMajor, ProtoMinor: r.ProtoMinor}
}
func (h *uiHuma) Method() string                  { return h.c.Request().Method }
func (h *uiHuma) Host() string                    { return h.c.Request().Host }
func (h *uiHuma) RemoteAddr() string              { return h.c.Request().RemoteAddr }
func (h *uiHuma) URL() url.URL                    { return *h.c.Request().URL }
func (h *uiHuma) Param(name string) string        { return h.c.Param(name) }
func (h *uiHuma) Query(name string) string        { return h.c.QueryParam(name) }
func (h *uiHuma) Header(name string) string       { return h.header(name) }
func (h *uiHuma) BodyReader() io.Reader           { return h.c.Request().Body }
func (h *uiHuma) SetReadDeadline(time.Time) error { return nil }
func (h *uiHuma) SetStatus(code int)              { h.status = code }
func (h *uiHuma) Status() int                     { return h.status }
func (h *uiHuma) SetHeader(string, string)        {}
func (h *uiHuma) AppendHeader(string, string)     {}
func (h *uiHuma) BodyWriter() io.Writer           { return io.Discard }

func (h *uiHuma) GetMultipartForm() (*multipart.Form, error) {
	err := h.c.Request().ParseMultipartForm(1 << 20)
	return h.c.Request().MultipartForm, err
}

// EachHeader lists the request's headers as Header answers them: the credential headers a
// page may not use are left out, the tenant and CSRF token are the page's.
func (h *uiHuma) EachHeader(cb func(name, value string)) {
	for name, vals := range h.c.Request().Header {
		switch {
		case strings.EqualFold(name, HeaderTenant), strings.EqualFold(name, HeaderCSRF),
			strings.EqualFold(name, HeaderAdminKey), strings.EqualFold(name, "Authorization"):
			continue
		}
		for _, v := range vals {
			cb(name, v)
		}
	}
	cb(HeaderTenant, h.tenant)
	if t := csrf(h.c); t != "" {
		cb(HeaderCSRF, t)
	}
}
