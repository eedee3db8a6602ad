package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/model"
)

// Problem is the one error body of the API, for every 4xx and 5xx: RFC 9457 problem details
// (application/problem+json) with a code programs switch on and the request id to quote. A
// refusal of the control plane (control.Refusal) is rendered whole: its message is the
// detail, and its explanation lines, what is accepted instead, how to unblock it and its
// structured fields follow — the same refusal `plaita execution resume` prints.
type Problem struct {
	Type      string `json:"type" doc:"Always about:blank: the code names the problem"`
	Title     string `json:"title" doc:"The HTTP status text"`
	Status    int    `json:"status" doc:"The HTTP status"`
	Detail    string `json:"detail,omitempty" doc:"What went wrong, in a sentence"`
	Instance  string `json:"instance,omitempty" doc:"The request path"`
	Code      string `json:"code" doc:"The problem, for programs: invalid_request, unauthenticated, forbidden, resume_refused, retry_budget …"`
	RequestID string `json:"request_id,omitempty" doc:"The request's X-Request-Id"`
	// Errors name each invalid part of the request (location: body.field, query.limit …).
	Errors []*huma.ErrorDetail `json:"errors,omitempty" doc:"Each invalid part of the request"`
	// Lines explain the detail (a refusal's detail lines: the counters, the match).
	Lines []string `json:"detail_lines,omitempty" doc:"Lines that explain the detail"`
	// Accepted is what would be accepted instead (a refused resume: the resumes that fit).
	Accepted []control.Hint `json:"accepted,omitempty" doc:"What would be accepted instead"`
	Unblock  string         `json:"unblock,omitempty" doc:"How to get past the refusal"`
	// Fields are a refusal's structured details (a retry budget's counters, limits and counter key).
	Fields map[string]any `json:"fields,omitempty" doc:"Structured details of the refusal"`
	// Execution is the execution a refusal is about.
	Execution *ProblemExecution `json:"execution,omitempty"`
	// RetryAfter is the Retry-After header's seconds (a locked account, a draining console).
	RetryAfter int `json:"retry_after,omitempty" doc:"Seconds to wait before trying again (also the Retry-After header)"`

	headers http.Header
}

// ProblemExecution is the execution a refusal is about.
type ProblemExecution struct {
	ID     string       `json:"id"`
	Status state.Status `json:"status"`
	Where  string       `json:"where" doc:"Its status with where it stands"`
}

func (p *Problem) Error() string { return p.Detail }

// GetStatus makes a Problem a huma.StatusError: a handler returns it as its error.
func (p *Problem) GetStatus() int { return p.Status }

// ContentType is RFC 9457's media type.
func (p *Problem) ContentType(string) string { return "application/problem+json" }

// GetHeaders are the headers the problem sets (Retry-After).
func (p *Problem) GetHeaders() http.Header {
	if p.headers == nil {
		p.headers = http.Header{}
	}
	return p.headers
}

// NewProblem is a problem of a status with its code and detail.
func NewProblem(status int, code, format string, a ...any) *Problem {
	return &Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Code: code, Detail: fmt.Sprintf(format, a...)}
}

// WithRetryAfter sets the Retry-After header and field.
func (p *Problem) WithRetryAfter(d time.Duration) *Problem {
	secs := max(int((d+time.Second-1)/time.Second), 1)
	p.RetryAfter = secs
	p.GetHeaders().Set("Retry-After", strconv.Itoa(secs))
	return p
}

// statusOf is the HTTP status of an error's class (model/errors.go): a refusal's, a storage
// error's, anything's.
func statusOf(c model.Class) int {
	switch c {
	case model.Invalid:
		return http.StatusBadRequest
	case model.NotFound:
		return http.StatusNotFound
	case model.Conflict:
		return http.StatusConflict
	case model.Limited:
		return http.StatusTooManyRequests
	case model.Unavailable:
		return http.StatusServiceUnavailable
	case model.Stale:
		return http.StatusPreconditionFailed
	case model.Unauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

// fromRefusal renders a control refusal.
func fromRefusal(r *control.Refusal) *Problem {
	p := NewProblem(statusOf(model.ClassOf(r)), r.Code, "%s", r.Message)
	p.Lines, p.Accepted, p.Unblock, p.Fields = r.Detail, r.Accepted, r.Unblock, r.Fields
	if r.RetryAfter > 0 {
		p.WithRetryAfter(r.RetryAfter)
	}
	if st := r.Execution; st != nil {
		p.Execution = &ProblemExecution{ID: st.ExecutionID, Status: st.Status, Where: control.DescribeStatus(st)}
	}
	var ve *engine.ValidationError
	if errors.As(r.Err, &ve) {
		p.Detail = fmt.Sprintf("invalid flow %s: %d problem(s)", flowName(ve.FlowID), len(ve.Problems))
		for _, pr := range ve.Problems {
			p.Errors = append(p.Errors, &huma.ErrorDetail{Location: "definition" + jsonPathSuffix(pr.Path), Message: pr.Message})
		}
	}
	return p
}

func flowName(id string) string {
	if id == "" {
		return "(no id)"
	}
	return id
}

// jsonPathSuffix joins a flow problem's path ("nodes[0].type", "" for the whole document) to
// the field that carried the definition.
func jsonPathSuffix(path string) string {
	switch {
	case path == "" || path == "$":
		return ""
	case path[0] == '[':
		return path
	}
	return "." + path
}

// retryAt is an error that says until when it holds (a locked account).
type retryAt interface{ RetryAt() time.Time }

// problemFor renders any error a handler returns: a Problem as it is, a control refusal whole,
// any other error by its class (model.ClassOf) with its code (model.CodeOf), and an error of no
// class as a 500 that says nothing of the cause (logged with the request id instead). A
// backend that failed is a 503 that does not say how either: its message names hosts and keys.
func problemFor(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	if r := control.AsRefusal(err); r != nil {
		return fromRefusal(r)
	}
	switch {
	case errors.Is(err, errNoRedis):
		return NewProblem(http.StatusServiceUnavailable, "redis_unavailable", "%v", err).WithRetryAfter(5 * time.Second)
	}
	class, code := model.ClassOf(err), model.CodeOf(err)
	switch class {
	case model.Unknown, model.Internal:
		if errors.Is(err, context.DeadlineExceeded) { // a Bounded route's Redis work ran out of time
			return NewProblem(http.StatusServiceUnavailable, "redis_unavailable", "Redis did not answer in time; try again").WithRetryAfter(time.Second)
		}
		return NewProblem(http.StatusInternalServerError, "internal", "internal error; the console's log has it under this request id")
	case model.Unavailable:
		what := "Redis did not answer"
		if code == "database_unavailable" {
			what = "the console database failed"
		}
		return NewProblem(http.StatusServiceUnavailable, code, "%s; try again", what).WithRetryAfter(time.Second)
	}
	p = NewProblem(statusOf(class), code, "%v", err)
	var until retryAt
	if class == model.Limited && errors.As(err, &until) {
		p.WithRetryAfter(time.Until(until.RetryAt()))
	}
	return p
}

// fromHuma renders huma's own errors (validation, body bounds, content types) as Problems: a
// body that is valid JSON but not of the schema is a 400 like malformed JSON (one status for
// "your request is wrong"), with each location in errors.
func fromHuma(m *huma.ErrorModel) *Problem {
	status := m.Status
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest
	}
	code := "invalid_request"
	switch status {
	case http.StatusRequestEntityTooLarge:
		code = "body_too_large"
	case http.StatusUnsupportedMediaType:
		code = "unsupported_media_type"
	case http.StatusNotAcceptable:
		code = "not_acceptable"
	case http.StatusRequestTimeout:
		code = "request_timeout"
	case http.StatusInternalServerError:
		code = "internal"
	}
	p := NewProblem(status, code, "%s", m.Detail)
	for _, e := range m.Errors {
		if e == nil {
			continue
		}
		// The rejected value is not echoed: huma would echo a whole body, password and all.
		p.Errors = append(p.Errors, &huma.ErrorDetail{Location: e.Location, Message: e.Message})
	}
	if len(p.Errors) > 0 && p.Detail == "validation failed" {
		first := p.Errors[0]
		p.Detail = "invalid request: " + first.Location + ": " + first.Message
		if n := len(p.Errors); n > 1 {
			p.Detail += fmt.Sprintf(" (and %d more)", n-1)
		}
	}
	return p
}
