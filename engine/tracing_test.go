package engine

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"plaita/internal/tracing"
)

// failing is a node that fails permanently.
type failing struct{}

func (failing) Prepare(*Node, *PrepareContext) Runner { return failing{} }
func (failing) Run(context.Context, *Call) (Outcome, error) {
	return Outcome{}, Permanent(errors.New("the service said no"))
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestNodeSpans: each node run is a span under the run's (the delivery's) span, naming the
// node, its type, its attempt and the lease's epoch, and saying how it ended; a failure is
// recorded with its class. Each save is a span of its own. The state keeps the trace the start
// gave it.
func TestNodeSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	restore := tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	defer restore()
	h := newHarness(t)
	h.reg.Register("failing", failing{})
	h.ex.LeaseEpoch = func() int64 { return 7 }

	ctx, delivery := tracing.Start(context.Background(), "process start", trace.SpanKindConsumer)
	carried := tracing.Of(ctx)
	f := h.flow(`{"id":"spans","start":"a","nodes":[
		{"id":"a","type":"set","params":{"vars":{"x":1}},"next":"b"},
		{"id":"b","type":"failing","next":"c"},
		{"id":"c","type":"end","params":{"output":1}}]}`)
	id := NewExecutionID()
	st, err := h.ex.Start(ctx, f, StartRequest{ExecutionID: id, Trace: carried})
	delivery.End()
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, st, ErrTypeNode, "b")
	if stored := h.stored(id); stored.TraceParent != carried.TraceParent || stored.TraceParent == "" {
		t.Fatalf("the state keeps %q, want the start's %q", stored.TraceParent, carried.TraceParent)
	}

	var nodes, saves []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if attrs(s)[tracing.AttrExecution].AsString() != id {
			continue
		}
		if s.Name() == "save state" {
			saves = append(saves, s)
		} else {
			nodes = append(nodes, s)
		}
	}
	// Two saves: a's step before b calls out, and the error b ended the execution in.
	if len(saves) != 2 || attrs(saves[0])["plaita.execution.status"].AsString() != "running" ||
		attrs(saves[1])["plaita.execution.status"].AsString() != "error" || saves[1].Parent().SpanID() != delivery.SpanContext().SpanID() {
		t.Errorf("%d save spans: %v", len(saves), saves)
	}
	if len(nodes) != 2 {
		t.Fatalf("%d node spans, want 2 (a, b)", len(nodes))
	}
	for i, want := range []struct{ name, typ, outcome string }{{"node a", "set", "step"}, {"node b", "failing", "failed"}} {
		s, a := nodes[i], attrs(nodes[i])
		if s.Name() != want.name || a[tracing.AttrNodeType].AsString() != want.typ || a[tracing.AttrOutcome].AsString() != want.outcome {
			t.Errorf("span %d: %s type %s outcome %s, want %+v", i, s.Name(), a[tracing.AttrNodeType].AsString(), a[tracing.AttrOutcome].AsString(), want)
		}
		if a[tracing.AttrAttempt].AsInt64() != 1 || a[tracing.AttrLeaseEpoch].AsInt64() != 7 {
			t.Errorf("%s: attempt %v epoch %v", s.Name(), a[tracing.AttrAttempt], a[tracing.AttrLeaseEpoch])
		}
		if s.Parent().SpanID() != delivery.SpanContext().SpanID() || s.SpanContext().TraceID() != delivery.SpanContext().TraceID() {
			t.Errorf("%s: not a child of the delivery's span", s.Name())
		}
	}
	b := nodes[1]
	if b.Status().Code.String() != "Error" || attrs(b)[tracing.AttrErrorClass].AsString() != "permanent" || len(b.Events()) != 1 {
		t.Errorf("node b: status %v class %v events %v", b.Status(), attrs(b)[tracing.AttrErrorClass], b.Events())
	}
}
