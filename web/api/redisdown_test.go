package api_test

import (
	"net/http"
	"testing"
	"time"

	"plaita/store/sqlite"
	"plaita/test/redistest"
	"plaita/test/webtest"
	"plaita/web/api"
)

// TestRedisGoneIs503: with its Redis killed, every endpoint over Redis answers 503
// redis_unavailable (with Retry-After) within its bound, never a 500 and never a hang — reads
// and writes alike.
func TestRedisGoneIs503(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	f := webtest.New(t, webtest.WithServer(srv), webtest.WithSettings(func(s *api.Settings) { s.RedisTimeout = 500 * time.Millisecond }))
	f.Tenant(t, "acme")
	ids := f.DeadLetters(t, "acme")
	admin := f.Key(f.APIKey(t, "acme", sqlite.RoleAdmin))
	boss := f.Admin("")
	srv.Kill()
	t.Cleanup(srv.Start) // the key root's cleanup needs a server to answer
	for _, r := range []struct {
		c            *webtest.Client
		method, path string
		body         any
	}{
		{admin, http.MethodPost, "/api/executions", map[string]any{"flow_id": "f"}},
		{admin, http.MethodGet, "/api/executions/ex_x", nil},
		{admin, http.MethodGet, "/api/dead-letters", nil},
		{admin, http.MethodGet, "/api/dead-letters/" + ids["acme"][0], nil},
		{admin, http.MethodPost, "/api/dead-letters/" + ids["acme"][0] + "/replay", nil},
		{admin, http.MethodGet, "/api/events", nil},
		{admin, http.MethodPost, "/api/events", map[string]any{"type": "t"}},
		{admin, http.MethodGet, "/api/schedules", nil},
		{admin, http.MethodPost, "/api/schedules", map[string]any{"cron": "@daily", "flow_id": "f"}},
		{admin, http.MethodGet, "/api/approvals", nil},
		{boss, http.MethodGet, "/api/cluster/status", nil},
		{boss, http.MethodGet, "/api/cluster/instances", nil},
		{boss, http.MethodGet, "/api/services", nil},
		{boss, http.MethodGet, "/api/metrics", nil},
		{boss, http.MethodPost, "/api/cluster/tenant-status/reconcile", nil},
	} {
		began := time.Now()
		res := r.c.Do(t, r.method, r.path, r.body)
		if p := res.Problem(t); res.Status != http.StatusServiceUnavailable || p.Code != "redis_unavailable" || res.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: %d %+v", r.method, r.path, res.Status, p)
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Errorf("%s %s took %v: not bounded", r.method, r.path, d)
		}
	}
}
