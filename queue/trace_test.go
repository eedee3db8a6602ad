package queue

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"plaita/engine/state"
	"plaita/internal/tracing"
)

const (
	execTrace   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	callerTrace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

// TestEnvelopeCarriesItsTrace: traceparent and tracestate are written and read back; one of
// the wrong type is dropped and the task still decodes (a trace never costs a task).
func TestEnvelopeCarriesItsTrace(t *testing.T) {
	env := Envelope{Kind: KindStart, FlowID: "f", ExecutionID: "ex_trace1", TraceParent: execTrace, TraceState: "v=1"}
	b, err := env.encode(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := Decode("s", "1-0", b)
	if err != nil {
		t.Fatal(err)
	}
	if got.TraceParent != execTrace || got.TraceState != "v=1" || got.Extra != nil {
		t.Fatalf("decoded %+v", got)
	}
	if got.Trace().TraceID() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("trace id %q", got.Trace().TraceID())
	}

	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["traceparent"], m["tracestate"] = 42, []string{"x"}
	bad, _ := json.Marshal(m)
	got, _, err = Decode("s", "1-0", bad)
	if err != nil {
		t.Fatalf("a bad trace context refused the task: %v", err)
	}
	if got.TraceParent != "" || got.TraceState != "" || got.ExecutionID != "ex_trace1" || got.Extra != nil {
		t.Fatalf("decoded %+v", got)
	}
}

// TestSendSpan: a fresh start is sent under the caller's span; a resume continues the trace it
// carries (the execution's) and links the caller's; the envelope then carries the send span.
func TestSendSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	restore := tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	defer restore()
	caller := tracing.Parent{TraceParent: callerTrace}.Context(context.Background())

	start := Envelope{Kind: KindStart, FlowID: "f", ExecutionID: "ex_1"}
	_, span := sendSpan(caller, "plaita:flow:queue", &start)
	span.End()
	sc := span.SpanContext()
	if sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("start: trace %s, want the caller's", sc.TraceID())
	}
	if start.Trace().SpanContext().SpanID() != sc.SpanID() {
		t.Fatalf("the envelope carries %q, not its send span", start.TraceParent)
	}

	resume := Envelope{Kind: KindResume, ExecutionID: "ex_1", ResumeType: state.ResumeEvent, TraceParent: execTrace}
	_, span = sendSpan(caller, "plaita:flow:queue", &resume)
	span.End()
	ended := rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans", len(ended))
	}
	r := ended[1]
	if r.Name() != "send resume event" || r.SpanKind() != trace.SpanKindProducer {
		t.Fatalf("%s %v", r.Name(), r.SpanKind())
	}
	if r.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || r.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("resume: trace %s parent %s, want the execution's", r.SpanContext().TraceID(), r.Parent().SpanID())
	}
	if l := r.Links(); len(l) != 1 || l[0].SpanContext.SpanID().String() != "b7ad6b7169203331" {
		t.Fatalf("links %v, want the caller's span", l)
	}
	if resume.Trace().SpanContext().SpanID() != r.SpanContext().SpanID() {
		t.Fatal("the resume does not carry its send span")
	}

	// No caller span and no trace of its own: a new trace.
	lone := Envelope{Kind: KindStart, FlowID: "f", ExecutionID: "ex_2"}
	_, span = sendSpan(context.Background(), "q", &lone)
	span.End()
	if !lone.Trace().Valid() || lone.Trace().TraceID() == "" || rec.Ended()[2].Parent().IsValid() {
		t.Fatalf("lone start: %+v", lone)
	}
}

// TestDelayEntryCarriesTheTrace: the entry's resume carries the execution's trace, and the
// entry rebuilt from that resume (the worker's WakeupEntry) is the same member; an entry
// without a trace is the member it always was.
func TestDelayEntryCarriesTheTrace(t *testing.T) {
	due := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for _, tp := range []string{execTrace, ""} {
		e := DelayEntry{ExecutionID: "ex_1", TenantID: "default", FlowID: "f", FlowVersion: "1", ResumeType: state.ResumeContinue,
			Node: "wait", Due: due, TraceParent: tp}
		env, err := e.Resume()
		if err != nil {
			t.Fatal(err)
		}
		if env.TraceParent != tp {
			t.Fatalf("resume carries %q, want %q", env.TraceParent, tp)
		}
		w, ok, err := ParseWakeup(env)
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		a, _ := e.member()
		b, _ := WakeupEntry(env, w).member()
		if a != b {
			t.Fatalf("members differ:\n%s\n%s", a, b)
		}
		if tp == "" && a != `{"execution_id":"ex_1","tenant_id":"default","flow_id":"f","flow_version":"1","resume_type":"continue","node":"wait","due":"2026-12-05T10:00:00Z"}` {
			t.Fatalf("an untraced member changed: %s", a)
		}
	}
}
