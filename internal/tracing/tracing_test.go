package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestSettingsURL(t *testing.T) {
	for _, c := range []struct {
		s    Settings
		want string
		bad  string
	}{
		{s: Settings{Endpoint: "http://collector:4318"}, want: "http://collector:4318/v1/traces"},
		{s: Settings{Endpoint: "https://collector:4318/prefix/"}, want: "https://collector:4318/prefix/v1/traces"},
		{s: Settings{Endpoint: "http://a:4318", TracesEndpoint: "http://b:9999/custom"}, want: "http://b:9999/custom"},
		{s: Settings{Endpoint: "http://collector:4317", Protocol: ProtocolGRPC}, want: "http://collector:4317"},
		{s: Settings{Endpoint: "collector:4318"}, bad: "want an http:// or https:// URL"},
		{s: Settings{Endpoint: "ftp://collector"}, bad: "want an http:// or https:// URL"},
	} {
		got, err := c.s.URL()
		switch {
		case c.bad != "":
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%+v: err %v, want %q", c.s, err, c.bad)
			}
		case err != nil || got != c.want:
			t.Errorf("%+v: %q, %v; want %q", c.s, got, err, c.want)
		}
	}
}

func TestSettingsOn(t *testing.T) {
	if (Settings{}).On() {
		t.Error("no endpoint: on")
	}
	if !(Settings{Endpoint: "http://c:4318"}).On() || !(Settings{TracesEndpoint: "http://c:4318/v1/traces"}).On() {
		t.Error("an endpoint: off")
	}
	if (Settings{Endpoint: "http://c:4318", Disabled: true}).On() {
		t.Error("OTEL_SDK_DISABLED: on")
	}
	if _, err := (Settings{Endpoint: "http://c:4318", Sampler: "sometimes"}).sampler(); err == nil {
		t.Error("an unknown sampler was taken")
	}
	for _, name := range Samplers {
		if _, err := (Settings{Sampler: name, SamplerArg: 0.5}).sampler(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSetupOffIsANoOp: without an endpoint nothing is installed and Start allocates nothing.
func TestSetupOffIsANoOp(t *testing.T) {
	shutdown, err := Setup(context.Background(), Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if Enabled() {
		t.Fatal("tracing on without an endpoint")
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := Start(ctx, "x", trace.SpanKindConsumer)
		if span.IsRecording() || c != ctx {
			t.Fatal("a recording span while off")
		}
		span.End()
	})
	if allocs != 0 {
		t.Errorf("Start while off: %v allocations, want 0", allocs)
	}
	if _, err := Setup(context.Background(), Settings{Endpoint: "collector:4318"}); err == nil {
		t.Error("a bad endpoint was taken")
	}
}

func TestParentRoundTrip(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	restore := Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	defer restore()

	ctx, span := Start(context.Background(), "root", trace.SpanKindProducer)
	p := Of(ctx)
	span.End()
	if !strings.HasPrefix(p.TraceParent, "00-") || !p.Valid() {
		t.Fatalf("Of: %+v", p)
	}
	sc := span.SpanContext()
	if got := p.SpanContext(); got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() {
		t.Fatalf("round trip: %v, want %v", got, sc)
	}
	if p.TraceID() != sc.TraceID().String() {
		t.Fatalf("TraceID %q", p.TraceID())
	}
	// A child under the carried parent is in the same trace.
	_, child := Start(p.Context(context.Background()), "child", trace.SpanKindConsumer)
	child.End()
	if child.SpanContext().TraceID() != sc.TraceID() {
		t.Fatal("the child is in another trace")
	}
	spans := rec.Ended()
	if len(spans) != 2 || spans[1].Parent().SpanID() != sc.SpanID() {
		t.Fatalf("spans: %v", spans)
	}
	// Links: only valid span contexts.
	_, linked := Start(context.Background(), "linked", trace.SpanKindProducer, sc, trace.SpanContext{})
	linked.End()
	if l := rec.Ended()[2].Links(); len(l) != 1 || l[0].SpanContext.SpanID() != sc.SpanID() {
		t.Fatalf("links %v", l)
	}
}

func TestMalformedParentIsIgnored(t *testing.T) {
	for _, tp := range []string{"", "junk", "00-00000000000000000000000000000000-0000000000000000-01", "00-abc-def-01"} {
		p := Parent{TraceParent: tp}
		if p.Valid() || p.TraceID() != "" {
			t.Errorf("%q: valid", tp)
		}
		ctx := context.Background()
		if p.Context(ctx) != ctx {
			t.Errorf("%q: gave a parent", tp)
		}
	}
}

func TestForExecutionIsStable(t *testing.T) {
	a, b, c := ForExecution("ex_1"), ForExecution("ex_1"), ForExecution("ex_2")
	if !a.Valid() || a != b {
		t.Fatalf("%+v %+v", a, b)
	}
	if a.TraceID() == c.TraceID() {
		t.Fatal("two executions share a trace")
	}
	if !a.SpanContext().IsSampled() {
		t.Fatal("not sampled")
	}
}

func TestFromHeaders(t *testing.T) {
	h := http.Header{}
	ctx := context.Background()
	if FromHeaders(ctx, h) != ctx {
		t.Fatal("no header gave a parent")
	}
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.Set("tracestate", "vendor=x")
	sc := trace.SpanContextFromContext(FromHeaders(ctx, h))
	if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !sc.IsRemote() || sc.TraceState().Get("vendor") != "x" {
		t.Fatalf("%v", sc)
	}
}

func TestLink(t *testing.T) {
	if got := Link("http://jaeger:16686/trace/{trace_id}", "4bf9"); got != "http://jaeger:16686/trace/4bf9" {
		t.Fatal(got)
	}
	if Link("", "4bf9") != "" || Link("http://x/{trace_id}", "") != "" {
		t.Fatal("a link from nothing")
	}
}

// TestSetupExportsOverOTLPHTTP: Setup's exporter sends a span to the endpoint's /v1/traces
// with the configured headers, and the shutdown flushes it; a gRPC exporter is built too.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	got := make(chan http.Header, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" && r.Method == http.MethodPost {
			got <- r.Header.Clone()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	shutdown, err := Setup(context.Background(), Settings{Endpoint: srv.URL, Headers: map[string]string{"X-Api-Key": "k1"},
		ServiceName: "plaita-test", Role: "worker", BatchDelay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !Enabled() {
		t.Fatal("tracing off after Setup")
	}
	_, span := Start(context.Background(), "one", trace.SpanKindInternal)
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if Enabled() {
		t.Fatal("tracing on after its shutdown")
	}
	select {
	case h := <-got:
		if h.Get("X-Api-Key") != "k1" || h.Get("Content-Type") != "application/x-protobuf" {
			t.Fatalf("headers %v", h)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no export reached the endpoint")
	}

	shutdown, err = Setup(context.Background(), Settings{Endpoint: "http://127.0.0.1:1", Protocol: ProtocolGRPC, ServiceName: "plaita-test"})
	if err != nil {
		t.Fatalf("grpc: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = shutdown(ctx) // nothing listens there: the flush may fail, the exporter was built
}

// TestExportFailuresReachOnError: a collector that refuses the spans is reported through
// OnError (the roles log it), and the shutdown still returns.
func TestExportFailuresReachOnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer srv.Close()
	errs := make(chan error, 8)
	shutdown, err := Setup(context.Background(), Settings{Endpoint: srv.URL, ServiceName: "plaita-test", BatchDelay: 10 * time.Millisecond,
		OnError: func(err error) {
			select {
			case errs <- err:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	_, span := Start(context.Background(), "one", trace.SpanKindInternal)
	span.End()
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "400") {
			t.Errorf("error %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the refused export was not reported")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = shutdown(ctx)
}
