package worker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"
)

func counter(set *metrics.Set, name string) uint64 { return set.GetOrCreateCounter(name).Get() }

func TestAlerterSendsJSON(t *testing.T) {
	got := make(chan AlertEvent, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev AlertEvent
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &ev); err != nil || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("bad alert: %s %v", b, err)
		}
		got <- ev
	}))
	defer srv.Close()
	set := metrics.NewSet()
	a := NewAlerter(srv.URL, "worker-1", set, zerolog.Nop())
	a.Start(context.Background())
	a.Send("dead_letter", map[string]any{"message_id": "1-0", "reason": "max_deliveries"})
	select {
	case ev := <-got:
		if ev.Event != "dead_letter" || ev.Instance != "worker-1" || ev.Fields["reason"] != "max_deliveries" {
			t.Errorf("event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no alert arrived")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a.Stop(ctx)
	a.Stop(ctx)
	if counter(set, "plaita_alerts_sent_total") != 1 {
		t.Errorf("sent counter %d", counter(set, "plaita_alerts_sent_total"))
	}
}

func TestSlowEndpointNeverBlocksAndCredentialsStayHidden(t *testing.T) {
	release := make(chan struct{})
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		<-release
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	defer close(release)
	set := metrics.NewSet()
	var logs strings.Builder
	hook := strings.Replace(srv.URL, "http://", "http://ops:s3cret@", 1)
	a := NewAlerter(hook, "w", set, zerolog.New(&logs))
	a.Start(context.Background())
	done := make(chan struct{})
	go func() {
		for range AlertQueueSize + 50 {
			a.Send("dead_letter", nil)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Send blocked on a slow endpoint")
	}
	if counter(set, "plaita_alerts_dropped_total") == 0 {
		t.Error("a full queue must drop and count")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	go func() { time.Sleep(50 * time.Millisecond); release <- struct{}{} }()
	a.Stop(ctx)
	if strings.Contains(logs.String(), "s3cret") {
		t.Errorf("credentials leaked into logs: %s", logs.String())
	}
	var nilAlerter *Alerter = NewAlerter("", "w", set, zerolog.Nop())
	nilAlerter.Send("x", nil) // no webhook: accepted and ignored
	nilAlerter.Start(context.Background())
	nilAlerter.Stop(context.Background())
}
