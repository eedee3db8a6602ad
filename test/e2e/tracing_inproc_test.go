//go:build !e2e

package e2e

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/tracing"
	"plaita/queue"
)

// TestTraceFollowsTheExecution (the default tier's run of the -tags e2e TestTraceAcrossTheRoles,
// the roles in this process and one recorder for them): `plaita start` sends the start under a
// span, the worker runs it in that trace and its state keeps it; the filter's resume continues it
// and links the publish; the delay role's wake-up and the worker's last run are in it too, and so
// is an approval's answer. A start no producer traced gets a trace derived from its execution id,
// which its wake-ups join.
//
// Not parallel: tracing is on for the whole process while it runs, and a test that runs alone
// records only its own spans.
func TestTraceFollowsTheExecution(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	restore := tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	defer restore()
	s := newFilterStack(t, nil)
	s.start("worker", nil)
	s.filter(nil)
	s.start("delay", nil)
	id := s.startDef("traced", `{"id":"traced","start":"wait","nodes":[
		{"id":"wait","type":"wait_event","params":{"event_type":"paid","match":"EVENT.order == INPUT.order"},"next":"nap"},
		{"id":"nap","type":"delay","params":{"seconds":1},"next":"done"},
		{"id":"done","type":"end","params":{"output":"ok"}}]}`, "", `{"order":"o-1"}`)
	waiting := s.waitStatus(id, "", state.Suspended, 60*time.Second)
	if r := run(t, s.env, "event", "publish", "paid", "--data", `{"order":"o-1"}`, "--quiet"); r.code != 0 {
		t.Fatalf("publish: %d %s", r.code, r.stderr)
	}
	s.waitStatus(id, "", state.Completed, 60*time.Second)

	trace := tracing.Parent{TraceParent: waiting.TraceParent}.TraceID()
	if trace == "" {
		t.Fatalf("the state keeps no trace: %q", waiting.TraceParent)
	}
	var spans []sdktrace.ReadOnlySpan
	has := func(name string) (sdktrace.ReadOnlySpan, bool) {
		i := slices.IndexFunc(spans, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == name })
		if i < 0 {
			return nil, false
		}
		return spans[i], true
	}
	want := []string{"send start", "process start", "node wait", "send resume event", "process resume event", "node nap",
		"wake continue nap", "process resume continue", "node done"}
	waitFor(t, "the execution's spans", 30*time.Second, func() bool {
		spans = spans[:0]
		for _, sp := range rec.Ended() {
			if sp.SpanContext().TraceID().String() == trace {
				spans = append(spans, sp)
			}
		}
		for _, name := range want {
			if _, ok := has(name); !ok {
				return false
			}
		}
		return true
	}, s.procs...)
	send, _ := has("send start")
	if send.Parent().IsValid() || send.SpanContext().SpanID() != (tracing.Parent{TraceParent: waiting.TraceParent}).SpanContext().SpanID() {
		t.Errorf("the execution's trace is not its start's send span (a root): %v", send.SpanContext())
	}
	resume, _ := has("send resume event")
	var publish sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		if sp.Name() == "publish event paid" {
			publish = sp
		}
	}
	if publish == nil || len(resume.Links()) != 1 || resume.Links()[0].SpanContext.SpanID() != publish.SpanContext().SpanID() {
		t.Errorf("the event's resume links %v, want the publish", resume.Links())
	}
	if resume.Parent().SpanID() != send.SpanContext().SpanID() {
		t.Errorf("the event's resume is not a child of the start's send span")
	}

	// A start no producer traced (written straight to the stream): the worker gives the
	// execution the trace derived from its id, and its wake-ups join that one trace.
	untraced := engine.NewExecutionID()
	payload, err := json.Marshal(queue.Envelope{SchemaVersion: queue.SchemaVersion, Kind: queue.KindStart, FlowID: "traced",
		FlowVersion: waiting.FlowVersion, ExecutionID: untraced, Input: json.RawMessage(`{"order":"o-2"}`), CreatedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.Do(s.ctx, s.c.B().Xadd().Key(config.QueueName.In(s.cfg)).Id("*").FieldValue().FieldValue(queue.PayloadField, string(payload)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	derived := s.waitStatus(untraced, "", state.Suspended, 60*time.Second)
	if want := tracing.ForExecution(untraced); derived.TraceParent != want.TraceParent {
		t.Fatalf("the untraced start's state keeps %q, want the derived %q", derived.TraceParent, want.TraceParent)
	}
	if r := run(t, s.env, "event", "publish", "paid", "--data", `{"order":"o-2"}`, "--quiet"); r.code != 0 {
		t.Fatalf("publish: %d %s", r.code, r.stderr)
	}
	s.waitStatus(untraced, "", state.Completed, 60*time.Second)
	trace = tracing.ForExecution(untraced).TraceID()
	waitFor(t, "the untraced execution's spans", 30*time.Second, func() bool {
		spans = spans[:0]
		for _, sp := range rec.Ended() {
			if sp.SpanContext().TraceID().String() == trace {
				spans = append(spans, sp)
			}
		}
		for _, name := range []string{"process start", "send resume event", "wake continue nap", "process resume continue"} {
			if _, ok := has(name); !ok {
				return false
			}
		}
		return true
	}, s.procs...)

	// An approval's answer continues the execution's trace too.
	asked := s.startDef("asked", `{"id":"asked","start":"ask","nodes":[
		{"id":"ask","type":"approval","params":{"message":"ok?"},"next":"done"},
		{"id":"done","type":"end","params":{"output":"ok"}}]}`, "", "")
	waiting = s.waitStatus(asked, "", state.Suspended, 60*time.Second)
	s.cli("approval", "approve", asked, "--by", "lee")
	s.waitStatus(asked, "", state.Completed, 60*time.Second)
	trace = tracing.Parent{TraceParent: waiting.TraceParent}.TraceID()
	waitFor(t, "the answer's spans", 30*time.Second, func() bool {
		spans = spans[:0]
		for _, sp := range rec.Ended() {
			if sp.SpanContext().TraceID().String() == trace {
				spans = append(spans, sp)
			}
		}
		_, sent := has("send resume approval")
		_, ran := has("process resume approval")
		_, done := has("node done")
		return sent && ran && done
	}, s.procs...)
	answer, _ := has("send resume approval")
	if start, _ := has("send start"); answer.Parent().SpanID() != start.SpanContext().SpanID() {
		t.Errorf("the answer's resume is not a child of the start's send span")
	}
}
