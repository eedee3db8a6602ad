package alert

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/service"
)

func counter(set *metrics.Set, name string) uint64 { return set.GetOrCreateCounter(name).Get() }

func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// logSink collects a logger's lines, safely for concurrent writers.
type logSink struct {
	mu sync.Mutex
	sb strings.Builder
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sb.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sb.String()
}

func TestAlerterSendsJSON(t *testing.T) {
	t.Parallel()
	got := make(chan Event, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev Event
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &ev); err != nil || r.Header.Get("Content-Type") != "application/json" || r.Method != http.MethodPost {
			t.Errorf("bad alert: %s %s %v", r.Method, b, err)
		}
		got <- ev
	}))
	defer srv.Close()
	set := metrics.NewSet()
	a := New(srv.URL, "worker-1", set, zerolog.Nop())
	if err := a.Start(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	a.Send("dead_letter", map[string]any{"message_id": "1-0", "reason": "max_deliveries"})
	select {
	case ev := <-got:
		if ev.Event != "dead_letter" || ev.Instance != "worker-1" || ev.Fields["reason"] != "max_deliveries" || ev.Time.IsZero() {
			t.Errorf("event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no alert arrived")
	}
	ctx := testCtx(t, 5*time.Second)
	a.Stop(ctx)
	a.Stop(ctx)
	if counter(set, "plaita_alerts_sent_total") != 1 {
		t.Errorf("sent counter %d", counter(set, "plaita_alerts_sent_total"))
	}
	if err := a.Start(ctx); !errors.Is(err, service.ErrStopped) {
		t.Errorf("Start after Stop: %v, want ErrStopped", err)
	}
}

// Stop sends what is queued before it returns, including events queued before Start and
// events raised after the start context ended (a role's start-up deadline).
func TestAlerterStopSendsWhatIsQueued(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var events []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev Event
		_ = json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		events = append(events, ev.Event)
		mu.Unlock()
	}))
	defer srv.Close()
	set := metrics.NewSet()
	a := New(srv.URL, "w", set, zerolog.Nop())
	a.Send("before_start", nil)
	startCtx, cancelStart := context.WithCancel(context.Background())
	if err := a.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	cancelStart()
	for range 4 {
		a.Send("after_start", nil)
	}
	a.Stop(testCtx(t, 10*time.Second))
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 5 || events[0] != "before_start" || counter(set, "plaita_alerts_sent_total") != 5 {
		t.Fatalf("delivered %v (sent counter %d), want all 5 in order", events, counter(set, "plaita_alerts_sent_total"))
	}
}

func TestSlowEndpointNeverBlocks(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	defer close(release)
	set := metrics.NewSet()
	a := New(srv.URL, "w", set, zerolog.Nop())
	if err := a.Start(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	a.Send("first", nil)
	<-entered // one POST hangs at the endpoint: nothing else is delivered from here on
	done := make(chan struct{})
	go func() {
		for range QueueSize + 50 {
			a.Send("dead_letter", nil)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Send blocked on a slow endpoint")
	}
	// At most QueueSize events fit behind the one in delivery.
	if n := counter(set, "plaita_alerts_dropped_total"); n < 50 {
		t.Errorf("dropped %d of %d with the queue full, want ≥ 50", n, QueueSize+50)
	}
	begin := time.Now()
	a.Stop(testCtx(t, 200*time.Millisecond))
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("Stop took %s with a 200ms deadline and a hanging endpoint", took)
	}
}

func TestCredentialsStayHidden(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := closed.Addr().String()
	closed.Close() // connection refused: the HTTP client's error quotes the URL
	hooks := []string{
		strings.Replace(srv.URL, "http://", "http://ops:s3cret@", 1),
		strings.Replace(srv.URL, "http://", "http://ops:s3cret@", 1) + "/services/T0/B0/tok3n?key=s3cret",
		"http://ops:s3cret@" + deadAddr + "/hook/tok3n",
	}
	var logs logSink
	set := metrics.NewSet()
	for _, hook := range hooks {
		a := New(hook, "w", set, zerolog.New(&logs))
		if err := a.Start(testCtx(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		a.Send("dead_letter", nil)
		a.Stop(testCtx(t, 10*time.Second)) // delivers (and fails) the queued event
	}
	text := logs.String()
	if n := strings.Count(text, `"event":"alert.failed"`); n != len(hooks) || counter(set, "plaita_alerts_failed_total") != uint64(len(hooks)) {
		t.Fatalf("%d alert.failed lines for %d failing webhooks:\n%s", n, len(hooks), text)
	}
	for _, secret := range []string{"s3cret", "tok3n"} {
		if strings.Contains(text, secret) {
			t.Errorf("%s leaked into logs:\n%s", secret, text)
		}
	}
	for _, want := range []string{`"webhook":"http://ops:xxxxx@`, "status 500", "connection refused"} {
		if !strings.Contains(text, want) {
			t.Errorf("logs lack %q:\n%s", want, text)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"https://alerts.example/":                      "https://alerts.example/",
		"https://alerts.example":                       "https://alerts.example",
		"https://ops:s3cret@alerts.example/hook":       "https://ops:xxxxx@alerts.example/xxxxx",
		"https://hooks.example/services/T0/B0/tok3n":   "https://hooks.example/xxxxx",
		"https://alerts.example:8443?token=tok3n#frag": "https://alerts.example:8443/xxxxx",
		"http://[::1]:9/x":                             "http://[::1]:9/xxxxx",
		"not a url s3cret":                             "(unparseable webhook URL)",
		"http://ops:s3cret@bad host/":                  "(unparseable webhook URL)",
	}
	for in, want := range cases {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNoWebhookIsANilAlerter(t *testing.T) {
	t.Parallel()
	a := New("", "w", metrics.NewSet(), zerolog.Nop())
	if a != nil {
		t.Fatalf("no webhook: %+v, want nil", a)
	}
	a.Send("x", nil) // accepted and ignored
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Stop(context.Background())
	a.Stop(context.Background())
}
