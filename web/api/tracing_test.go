package api_test

import (
	"maps"
	"net/http"
	"slices"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"plaita/internal/tracing"
	"plaita/store/sqlite"
	"plaita/test/webtest"
)

// TestRequestsAreServerSpans: with tracing on, a request is a server span named by its route's
// pattern, a child of the caller's traceparent; an event it publishes carries the publish span.
//
// Not parallel: tracing is on for the whole process while it runs.
func TestRequestsAreServerSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	restore := tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	defer restore()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	editor := f.Key(f.APIKey(t, "acme", sqlite.RoleEditor))

	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	editor.Want(t, http.StatusCreated, http.MethodPost, "/api/events", map[string]any{"type": "order.paid", "id": "evt-t1", "data": map[string]any{"order": 1}},
		"traceparent", caller)
	editor.Want(t, http.StatusNotFound, http.MethodGet, "/api/executions/ex_nothere1", nil)

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	server, ok := byName["POST /api/events"]
	if !ok || server.SpanKind() != trace.SpanKindServer {
		t.Fatalf("no server span for the publish: %v", byName)
	}
	if server.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || server.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("the request's span is not the caller's child: trace %s parent %s", server.SpanContext().TraceID(), server.Parent().SpanID())
	}
	publish, ok := byName["publish event order.paid"]
	if !ok || publish.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Fatalf("the publish span: %v (parent %v)", ok, publish)
	}
	stored, err := f.Events.Get(t.Context(), "acme", "evt-t1")
	if err != nil {
		t.Fatal(err)
	}
	if got := (tracing.Parent{TraceParent: stored.TraceParent}).SpanContext().SpanID(); got != publish.SpanContext().SpanID() {
		t.Errorf("the stored event carries %q, not its publish span", stored.TraceParent)
	}
	if _, ok := byName["GET /api/executions/:id"]; !ok {
		t.Errorf("the lookup is not named by its route's pattern: %v", slices.Collect(maps.Keys(byName)))
	}
}
