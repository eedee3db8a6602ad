package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"plaita/internal/health"
	"plaita/store/sqlite"
	"plaita/web/api"
)

// While the console waits for Redis its port answers: /healthz 200, /readyz and /health 503
// with the reason, and every route of the API (a start among them) a 503 problem
// waiting_for_redis with a Retry-After; the port closes at Stop.
func TestWaitingServerRefusesEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, "sqlite:///"+filepath.Join(t.TempDir(), "console.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ready := health.NewReadiness()
	ready.SetNotReady("waiting for Redis at redis://127.0.0.1:1/0 (PLAITA_CONSOLE_REDIS_URL)")
	w := NewWaiting(db.Ping, ready, "v-test", zerolog.Nop())
	svc := w.Service("127.0.0.1:0")
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	base := "http://" + w.Addr()
	get := func(method, path string) (*http.Response, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{"flow_id":"x"}`))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	if res, body := get(http.MethodGet, "/healthz"); res.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d %s", res.StatusCode, body)
	}
	if res, body := get(http.MethodGet, "/readyz"); res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for Redis at redis://127.0.0.1:1/0") {
		t.Fatalf("/readyz: %d %s", res.StatusCode, body)
	}
	res, body := get(http.MethodGet, "/health")
	var h api.HealthReport
	if err := json.Unmarshal([]byte(body), &h); err != nil || res.StatusCode != http.StatusServiceUnavailable || h.Mode != "waiting_for_redis" ||
		h.Ready || !h.Database.OK || h.Redis.OK || !strings.Contains(h.Reason, "waiting for Redis") {
		t.Fatalf("/health: %d %s", res.StatusCode, body)
	}
	for _, r := range []struct{ method, path string }{{http.MethodPost, "/api/executions"}, {http.MethodGet, "/api/executions"}, {http.MethodGet, "/ui/"}} {
		res, body := get(r.method, r.path)
		var p api.Problem
		if err := json.Unmarshal([]byte(body), &p); err != nil || res.StatusCode != http.StatusServiceUnavailable || p.Code != "waiting_for_redis" ||
			res.Header.Get("Retry-After") == "" || res.Header.Get(api.HeaderRequestID) == "" || !strings.Contains(p.Detail, "waiting for Redis") || p.Instance != r.path {
			t.Fatalf("%s %s: %d %v %s", r.method, r.path, res.StatusCode, res.Header, body)
		}
	}
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	svc.Stop(stopCtx)
	svc.Stop(stopCtx) // safe twice
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("the port still answers after Stop")
	}
	if err := svc.Start(ctx); err == nil {
		t.Fatal("a start after stop")
	}
}
