//go:build e2e

package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP traces endpoint: it keeps every span the processes export.
type otlpReceiver struct {
	URL   string
	mu    sync.Mutex
	spans []gotSpan
}

// gotSpan is one exported span, ids in hex.
type gotSpan struct {
	Service, Name     string
	Kind              tracepb.Span_SpanKind
	Trace, ID, Parent string
	Attrs             map[string]string
	Links             []string // "trace/span"
	Status            tracepb.Status_StatusCode
	Events            []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&msg)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

func (r *otlpReceiver) add(msg *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = value(kv.GetValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				g := gotSpan{Service: service, Name: s.GetName(), Kind: s.GetKind(), Trace: hex.EncodeToString(s.GetTraceId()),
					ID: hex.EncodeToString(s.GetSpanId()), Parent: hex.EncodeToString(s.GetParentSpanId()), Attrs: map[string]string{},
					Status: s.GetStatus().GetCode()}
				for _, kv := range s.GetAttributes() {
					g.Attrs[kv.GetKey()] = value(kv.GetValue())
				}
				for _, l := range s.GetLinks() {
					g.Links = append(g.Links, hex.EncodeToString(l.GetTraceId())+"/"+hex.EncodeToString(l.GetSpanId()))
				}
				for _, ev := range s.GetEvents() {
					g.Events = append(g.Events, ev.GetName())
				}
				r.spans = append(r.spans, g)
			}
		}
	}
}

// inTrace is every span of the trace so far.
func (r *otlpReceiver) inTrace(trace string) []gotSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []gotSpan
	for _, s := range r.spans {
		if s.Trace == trace {
			out = append(out, s)
		}
	}
	return out
}

func named(spans []gotSpan, name string) []gotSpan {
	var out []gotSpan
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func describe(spans []gotSpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %-28q %s parent=%s links=%v delivery=%s instance=%s\n", s.Service, s.Name, s.ID, s.Parent, s.Links,
			s.Attrs["messaging.delivery_count"], s.Attrs["service.instance.id"])
	}
	return b.String()
}

// tracedStart starts flow through the console's API with a traceparent of the caller's: the
// execution's trace is then the caller's trace.
func tracedStart(t *testing.T, con *console, flow, traceID, spanID string) string {
	t.Helper()
	code, body := replicaCall(t, http.DefaultClient, http.MethodPost, con.base+"/api/executions",
		map[string]string{"X-Admin-API-Key": consoleAdminKey, "traceparent": "00-" + traceID + "-" + spanID + "-01"},
		map[string]any{"flow_id": flow, "input": map[string]any{"order": "o-1"}})
	id, _ := body["execution_id"].(string)
	if code != http.StatusAccepted && code != http.StatusCreated && code != http.StatusOK || id == "" {
		t.Fatalf("start: %d %v", code, body)
	}
	return id
}

// TestTraceAcrossTheRoles: one execution — an http call, a wait for an event, a delay — gives
// one trace across the console, the worker, the filter and the delay role, from the caller's
// traceparent to the last node: the start and the resumes are sent (producer spans) and
// processed (consumer spans) in it, every node runs in it, and the event's resume links the
// event's publish.
func TestTraceAcrossTheRoles(t *testing.T) {
	t.Parallel()
	rcv := newOTLPReceiver(t)
	e := newStack(t, withTimeout(150*time.Second), withEnv(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_BSP_SCHEDULE_DELAY": "100"}))
	hs := newPathServer(t, nil)
	worker := e.start("worker", nil)
	filter := e.start("filter", nil)
	delay := e.start("delay", nil)
	con := e.startConsole(map[string]string{"PLAITA_TRACE_URL_TEMPLATE": "http://jaeger.example/trace/{trace_id}"})
	procs := []*proc{worker, filter, delay, con.p}
	con.publishFlow(t, "", `{"id":"traced","version":"1","start":"fetch","nodes":[
		{"id":"fetch","type":"http","params":{"url":"`+hs.URL+`/ping","timeout":10},"next":"wait"},
		{"id":"wait","type":"wait_event","params":{"event_type":"paid","match":"EVENT.order == INPUT.order"},"next":"nap"},
		{"id":"nap","type":"delay","params":{"seconds":1},"next":"done"},
		{"id":"done","type":"end","params":{"output":"ok"}}]}`)

	const caller, callerSpan = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
	id := tracedStart(t, con, "traced", caller, callerSpan)
	con.waitExecution(t, id, "the execution to wait for its event", statusOf("suspended"))
	if code, body := con.call(t, http.MethodPost, "/api/events", map[string]any{"type": "paid", "data": map[string]any{"order": "o-1"}}); code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, body)
	}
	con.waitExecution(t, id, "the execution to complete", statusOf("completed"))

	// The execution's page names its trace and links it.
	_, view := con.call(t, http.MethodGet, "/api/executions/"+id, nil)
	tr, _ := view["trace"].(map[string]any)
	if tr["trace_id"] != caller || tr["url"] != "http://jaeger.example/trace/"+caller {
		t.Fatalf("the view's trace: %v, want %s and its link", tr, caller)
	}

	want := []string{"POST /api/executions", "send start", "process start", "node fetch", "node wait",
		"publish event paid", "send resume event", "process resume event", "node nap",
		"wake continue nap", "process resume continue", "node done"}
	var spans []gotSpan
	var eventSpans []gotSpan
	waitFor(t, "every span of the execution's trace", 30*time.Second, func() bool {
		spans = rcv.inTrace(caller)
		for _, name := range want {
			if name == "publish event paid" {
				continue // the publish is a trace of its own: the resume links it
			}
			if len(named(spans, name)) == 0 {
				return false
			}
		}
		rcv.mu.Lock()
		eventSpans = named(rcv.spans, "publish event paid")
		rcv.mu.Unlock()
		return len(eventSpans) == 1
	}, procs...)
	t.Logf("the trace:\n%s", describe(spans))
	byID := map[string]gotSpan{}
	for _, s := range spans {
		byID[s.ID] = s
	}
	one := func(name string) gotSpan {
		t.Helper()
		got := named(spans, name)
		if len(got) != 1 {
			t.Fatalf("%d spans %q, want 1\n%s", len(got), name, describe(spans))
		}
		return got[0]
	}
	childOf := func(child, parent gotSpan) {
		t.Helper()
		if child.Parent != parent.ID {
			t.Errorf("%q (%s) has parent %s, want %q (%s)\n%s", child.Name, child.Service, child.Parent, parent.Name, parent.ID, describe(spans))
		}
	}
	server, sendStart, processStart := one("POST /api/executions"), one("send start"), one("process start")
	if server.Parent != callerSpan || server.Service != "plaita-console" || server.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the console's span: parent %s service %s kind %v, want the caller's %s", server.Parent, server.Service, server.Kind, callerSpan)
	}
	childOf(sendStart, server)
	childOf(processStart, sendStart)
	if sendStart.Kind != tracepb.Span_SPAN_KIND_PRODUCER || processStart.Kind != tracepb.Span_SPAN_KIND_CONSUMER || processStart.Service != "plaita-worker" {
		t.Errorf("start: %v/%v on %s", sendStart.Kind, processStart.Kind, processStart.Service)
	}

	// The event's resume: sent by the filter in the execution's trace, linking the publish.
	sendEvent, processEvent := one("send resume event"), one("process resume event")
	if sendEvent.Service != "plaita-filter" {
		t.Errorf("the event's resume was sent by %s", sendEvent.Service)
	}
	childOf(sendEvent, sendStart)
	childOf(processEvent, sendEvent)
	publish := eventSpans[0]
	if publish.Service != "plaita-console" || publish.Trace == caller || !slices.Contains(sendEvent.Links, publish.Trace+"/"+publish.ID) {
		t.Errorf("the event's resume links %v, want the publish %s/%s (console)", sendEvent.Links, publish.Trace, publish.ID)
	}

	// The delay's wake-up: the delay role's span and the worker's run, both in the trace.
	wake, processDelay := one("wake continue nap"), one("process resume continue")
	if wake.Service != "plaita-delay" {
		t.Errorf("the wake-up span is %s's", wake.Service)
	}
	childOf(wake, sendStart)
	childOf(processDelay, sendStart)

	// Every node ran in the trace, under a delivery of the worker.
	for _, node := range []string{"fetch", "wait", "nap", "done"} {
		for _, s := range named(spans, "node "+node) {
			p, ok := byID[s.Parent]
			if !ok || p.Kind != tracepb.Span_SPAN_KIND_CONSUMER || s.Attrs["plaita.node.id"] != node || s.Attrs["plaita.execution_id"] != id {
				t.Errorf("node %s: parent %q (%v) attrs %v", node, p.Name, ok, s.Attrs)
			}
			if s.Attrs["plaita.node.attempt"] != "1" || s.Attrs["plaita.lease.epoch"] == "" || s.Attrs["plaita.outcome"] == "" {
				t.Errorf("node %s: attrs %v", node, s.Attrs)
			}
		}
	}
	if got := one("node fetch").Attrs["plaita.node.type"]; got != "http" {
		t.Errorf("node fetch has type %q", got)
	}
	for _, s := range spans {
		if s.Parent != callerSpan && byID[s.Parent].ID == "" {
			t.Errorf("%q (%s) has parent %s, which is not in the trace", s.Name, s.Service, s.Parent)
		}
	}
}

// TestTraceSurvivesKill9: a worker killed with SIGKILL in the middle of a step; the run its
// redelivery makes is in the execution's trace, under the same start as the first.
func TestTraceSurvivesKill9(t *testing.T) {
	t.Parallel()
	rcv := newOTLPReceiver(t)
	e := newStack(t, withTimeout(120*time.Second), withEnv(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_BSP_SCHEDULE_DELAY": "100",
		"PLAITA_CLAIM_MIN_IDLE_MS": "500", "PLAITA_LEASE_TTL_SECONDS": "2"}))
	hs := newPathServer(t, map[string]time.Duration{"/slow": 2 * time.Second})
	con := e.startConsole(nil)
	con.publishFlow(t, "", slowFlow(hs.URL))

	const caller, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	id := tracedStart(t, con, "slow", caller, callerSpan)
	a := e.spawn("worker", nil)
	hs.waitSeen(t, "/slow", 20*time.Second, a)
	a.kill9(t)
	b := e.start("worker", nil)
	if st := e.waitTerminal(id, 45*time.Second, a, b, con.p); st.Status != "completed" {
		t.Fatalf("status %s error %+v", st.Status, st.Error)
	}

	// The redelivery may first find the dead worker's lease and leave the message pending (a
	// span of its own, outcome leave_pending): the run is the one the nodes ran under.
	var redelivered gotSpan
	var spans []gotSpan
	under := func(name string, parent gotSpan) bool {
		return slices.ContainsFunc(named(spans, name), func(s gotSpan) bool { return s.Parent == parent.ID })
	}
	waitFor(t, "the redelivered run's spans", 30*time.Second, func() bool {
		spans = rcv.inTrace(caller)
		for _, s := range named(spans, "process start") {
			if s.Attrs["messaging.delivery_count"] != "1" && under("node slow", s) && under("node done", s) {
				redelivered = s
				return true
			}
		}
		return false
	}, a, b, con.p)
	t.Logf("the trace:\n%s", describe(spans))
	sendStart := named(spans, "send start")
	if len(sendStart) != 1 || redelivered.Parent != sendStart[0].ID {
		t.Fatalf("the redelivery's span has parent %s, want the start's send span\n%s", redelivered.Parent, describe(spans))
	}
	if redelivered.Attrs["plaita.outcome"] != "ack" || redelivered.Service != "plaita-worker" {
		t.Errorf("the redelivered run: %v", redelivered.Attrs)
	}
}
