// Package tracing is plaita's OpenTelemetry tracing: one trace per execution across every
// process that touches it (docs/tracing.md). A process turns it on with Setup when an OTLP
// endpoint is configured; until then every function here is a no-op that allocates nothing,
// so the hot path costs what it cost without tracing.
//
// The trace context travels with the work, not with the process: a task envelope, an event, a
// wait's record, a delay-queue entry and the execution's state carry a W3C traceparent (and its
// tracestate), and whoever picks the work up continues that trace.
package tracing

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Protocols of the OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Samplers (OTEL_TRACES_SAMPLER), as the OpenTelemetry environment specification names them.
var Samplers = []string{"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio",
	"always_on", "always_off", "traceidratio"}

// Settings are a process's tracing settings, read from the standard OTEL_* variables by the
// configuration (config/registry.go).
type Settings struct {
	// Endpoint is the OTLP endpoint's base URL (OTEL_EXPORTER_OTLP_ENDPOINT); over HTTP the
	// traces go to its /v1/traces. TracesEndpoint (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is used
	// as it is and wins. Both empty: tracing is off.
	Endpoint, TracesEndpoint string
	Protocol                 string            // ProtocolHTTP (default) or ProtocolGRPC
	Headers                  map[string]string // sent with every export (OTEL_EXPORTER_OTLP_HEADERS)
	ServiceName              string            // service.name (OTEL_SERVICE_NAME)
	Sampler                  string            // one of Samplers; "" is parentbased_always_on
	SamplerArg               float64           // the ratio of the traceidratio samplers
	BatchDelay               time.Duration     // the longest a finished span waits to be sent (OTEL_BSP_SCHEDULE_DELAY)
	Disabled                 bool              // OTEL_SDK_DISABLED
	Role, Instance           string            // plaita.role and service.instance.id on every span
	// OnError hears what the SDK cannot do (an export the collector refused or never got: the
	// spans are dropped, the work goes on); nil leaves the SDK's own handler, which logs to stderr.
	OnError func(error)
}

// On reports whether the settings turn tracing on.
func (s Settings) On() bool { return !s.Disabled && (s.Endpoint != "" || s.TracesEndpoint != "") }

// URL is where the spans are sent, as the exporter is given it.
func (s Settings) URL() (string, error) {
	raw, traces := s.TracesEndpoint, true
	if raw == "" {
		raw, traces = s.Endpoint, false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("OTLP endpoint %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("OTLP endpoint %q: want an http:// or https:// URL with a host", raw)
	}
	if !traces && s.Protocol != ProtocolGRPC {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	return u.String(), nil
}

func (s Settings) sampler() (sdktrace.Sampler, error) {
	ratio := sdktrace.TraceIDRatioBased(s.SamplerArg)
	switch s.Sampler {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(ratio), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return ratio, nil
	}
	return nil, fmt.Errorf("unknown sampler %q (one of %s)", s.Sampler, strings.Join(Samplers, ", "))
}

// on is set by Setup: when false every function here returns at once.
var on atomic.Bool

// Setup turns tracing on for the process as s says (a no-op returning a no-op when s is off)
// and returns the function that flushes and stops it: the role calls it when it stops, so the
// spans of a drained process are sent. It installs the global tracer provider and the W3C
// propagator, as OpenTelemetry's instrumentation libraries expect.
func Setup(ctx context.Context, s Settings) (shutdown func(context.Context) error, err error) {
	nop := func(context.Context) error { return nil }
	if !s.On() {
		return nop, nil
	}
	endpoint, err := s.URL()
	if err != nil {
		return nop, err
	}
	sampler, err := s.sampler()
	if err != nil {
		return nop, err
	}
	var exp sdktrace.SpanExporter
	switch s.Protocol {
	case "", ProtocolHTTP:
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithHeaders(s.Headers))
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpoint), otlptracegrpc.WithHeaders(s.Headers))
	default:
		err = fmt.Errorf("unknown OTLP protocol %q (%s or %s)", s.Protocol, ProtocolHTTP, ProtocolGRPC)
	}
	if err != nil {
		return nop, fmt.Errorf("tracing: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", s.ServiceName), attribute.String(AttrRole, s.Role)}
	if s.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", s.Instance))
	}
	var batch []sdktrace.BatchSpanProcessorOption
	if s.BatchDelay > 0 {
		batch = append(batch, sdktrace.WithBatchTimeout(s.BatchDelay))
	}
	// The deployment's own resource attributes (OTEL_RESOURCE_ATTRIBUTES: k8s.pod.name …) are
	// kept; plaita's name the service, the role and the instance over them.
	res, err := resource.Merge(resource.Environment(), resource.NewSchemaless(attrs...))
	if err != nil {
		return nop, fmt.Errorf("tracing: resource attributes: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, batch...), sdktrace.WithSampler(sampler), sdktrace.WithResource(res))
	if s.OnError != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(s.OnError))
	}
	install(tp)
	return func(ctx context.Context) error {
		on.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// install makes tp the process's tracer provider (Setup; a test gives its recorder's).
func install(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	on.Store(true)
}

// Install makes tp the process's tracer provider for a test that records spans in memory
// (sdk/trace/tracetest); the returned function turns tracing off again.
func Install(tp trace.TracerProvider) (restore func()) {
	install(tp)
	return func() { on.Store(false); otel.SetTracerProvider(noop.NewTracerProvider()) }
}

// Enabled reports whether tracing is on in this process.
func Enabled() bool { return on.Load() }

// instrumentation is the tracer's name: the spans' instrumentation scope.
const instrumentation = "plaita"

// Attribute keys plaita sets on its spans.
const (
	AttrRole        = "plaita.role"
	AttrTenant      = "plaita.tenant_id"
	AttrExecution   = "plaita.execution_id"
	AttrFlow        = "plaita.flow_id"
	AttrFlowVersion = "plaita.flow_version"
	AttrKind        = "plaita.task.kind"
	AttrResumeType  = "plaita.task.resume_type"
	AttrOutcome     = "plaita.outcome"
	AttrNodeID      = "plaita.node.id"
	AttrNodeType    = "plaita.node.type"
	AttrAttempt     = "plaita.node.attempt"
	AttrBranch      = "plaita.node.branch"
	AttrLeaseEpoch  = "plaita.lease.epoch"
	AttrErrorClass  = "error.type"
	AttrEventType   = "plaita.event.type"
	AttrEventID     = "plaita.event.id"
	AttrDelivery    = "messaging.delivery_count" // not a semantic-convention name: plaita's
	AttrMessageID   = "messaging.message.id"
	AttrDestination = "messaging.destination.name"
	AttrSystem      = "messaging.system"
	AttrOperation   = "messaging.operation.type"
)

// noSpan is what Start returns while tracing is off: the no-op span of an empty context.
var noSpan = trace.SpanFromContext(context.Background())

// Start begins a span of the given kind under ctx's span (a root when ctx has none), with
// links to the span contexts given that are valid. While tracing is off it returns ctx and a
// no-op span and allocates nothing; callers guard attribute lists with span.IsRecording().
func Start(ctx context.Context, name string, kind trace.SpanKind, links ...trace.SpanContext) (context.Context, trace.Span) {
	if !on.Load() {
		return ctx, noSpan
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind)}
	for _, l := range links {
		if l.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: l}))
		}
	}
	return otel.Tracer(instrumentation).Start(ctx, name, opts...)
}

// StartAt is Start for a span that began at start, before the caller knew what it would be
// about (a delay-queue pass, whose moved entries are known when it returns).
func StartAt(ctx context.Context, name string, kind trace.SpanKind, start time.Time) (context.Context, trace.Span) {
	if !on.Load() {
		return ctx, noSpan
	}
	return otel.Tracer(instrumentation).Start(ctx, name, trace.WithSpanKind(kind), trace.WithTimestamp(start))
}

// Fail records err on span as the span's error, with its class (error.type).
func Fail(span trace.Span, class string, err error) {
	if !span.IsRecording() || err == nil {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	if class != "" {
		span.SetAttributes(attribute.String(AttrErrorClass, class))
	}
}

// Parent is a carried trace context: a traceparent and its tracestate, as the envelope, the
// event and the state store them. The zero Parent carries nothing.
type Parent struct {
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// Get and Set make a Parent a propagation.TextMapCarrier.
func (p *Parent) Get(key string) string {
	switch key {
	case "traceparent":
		return p.TraceParent
	case "tracestate":
		return p.TraceState
	}
	return ""
}

func (p *Parent) Set(key, value string) {
	switch key {
	case "traceparent":
		p.TraceParent = value
	case "tracestate":
		p.TraceState = value
	}
}

func (p *Parent) Keys() []string { return []string{"traceparent", "tracestate"} }

// Of is the trace context of ctx's span as a Parent (zero when ctx has no valid span).
func Of(ctx context.Context) Parent {
	var p Parent
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		propagation.TraceContext{}.Inject(ctx, &p)
	}
	return p
}

// FromHeaders is ctx with the trace context of an incoming request's headers (traceparent,
// tracestate) as its remote parent; ctx unchanged when they carry none or a malformed one.
func FromHeaders(ctx context.Context, h http.Header) context.Context {
	if h.Get("traceparent") == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h))
}

// SpanContext is the span context p carries; invalid when p carries none or a malformed one
// (a malformed traceparent is ignored, as the W3C recommendation says: the work runs, in a
// trace of its own).
func (p Parent) SpanContext() trace.SpanContext {
	if p.TraceParent == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), &p))
}

// Context is ctx with p as its remote parent span (ctx unchanged when p carries none).
func (p Parent) Context(ctx context.Context) context.Context {
	if sc := p.SpanContext(); sc.IsValid() {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// TraceID is p's trace id in hex, "" when p carries none.
func (p Parent) TraceID() string {
	if sc := p.SpanContext(); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// Valid reports whether p carries a well-formed trace context.
func (p Parent) Valid() bool { return p.SpanContext().IsValid() }

// ForExecution is the trace context of an execution whose producer did not trace it (a
// producer without OTEL_* settings, an older one): its trace id and parent span id are a hash
// of the execution id, so every delivery of its tasks — a redelivery after a crash, each
// resume — joins one trace all the same. The parent span itself is never sent: a trace viewer
// shows the run's spans under a missing root. Sampled, so a role under parentbased_* records it.
func ForExecution(executionID string) Parent {
	sum := sha256.Sum256([]byte("plaita-execution-trace\x00" + executionID))
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	var p Parent
	propagation.TraceContext{}.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), &p)
	return p
}

// Execution is the trace an execution's work joins: p when it carries one (the trace its
// state keeps), else ForExecution(executionID) — what the worker gave an execution whose start
// was not traced, so that every role agrees on it.
func Execution(p Parent, executionID string) Parent {
	if p.Valid() {
		return p
	}
	return ForExecution(executionID)
}

// ErrBadTemplate: a trace link template without {trace_id}.
var ErrBadTemplate = errors.New("the trace URL template has no {trace_id}")

// Link fills a trace link template (PLAITA_TRACE_URL_TEMPLATE: Jaeger's
// http://jaeger:16686/trace/{trace_id}, Tempo's, Honeycomb's) with a trace id; "" when either
// is empty.
func Link(template, traceID string) string {
	if template == "" || traceID == "" {
		return ""
	}
	return strings.ReplaceAll(template, "{trace_id}", url.PathEscape(traceID))
}
