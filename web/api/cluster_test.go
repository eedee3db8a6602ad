package api_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/control"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// TestClusterEndpointsArePlatformOnly: the cluster's endpoints answer a platform admin, and
// refuse a tenant's admin, a viewer and the anonymous.
func TestClusterEndpointsArePlatformOnly(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithSettings(func(s *api.Settings) {
		s.Config = &api.EffectiveConfig{Role: "console", OK: true, Generations: api.ConfigGenerations{Family: "cf1-x", Config: "cfg1-y", Budget: "bg1-z"},
			Variables: []api.ConfigVariable{{Name: "PLAITA_CONSOLE_ADMIN_API_KEY", Value: "****", Secret: true, Source: "env"}}}
	}))
	f.Tenant(t, "acme")
	admin := f.Key(f.APIKey(t, "acme", sqlite.RoleAdmin))
	viewer := f.User(t, "vic", "acme", sqlite.RoleViewer)
	for _, r := range f.Srv.Routes() {
		if !strings.HasPrefix(r.Path, "/api/cluster/") && r.Path != "/api/services" && r.Path != "/api/metrics" {
			continue
		}
		if r.Access != api.Platform {
			t.Errorf("%s %s is %s, want platform", r.Method, r.Path, r.Access)
		}
		for _, c := range []*webtest.Client{admin, viewer} {
			if p := c.Want(t, http.StatusForbidden, r.Method, r.Path, nil).Problem(t); p.Code != "forbidden" {
				t.Errorf("%s %s: %+v", r.Method, r.Path, p)
			}
		}
		f.Client(nil).Want(t, http.StatusUnauthorized, r.Method, r.Path, nil)
	}
	var cfg api.EffectiveConfig
	f.Admin("").Want(t, http.StatusOK, http.MethodGet, "/api/cluster/config", nil).Decode(t, &cfg)
	if cfg.Generations.Config != "cfg1-y" || len(cfg.Variables) != 1 || cfg.Variables[0].Value != "****" {
		t.Fatalf("config: %+v", cfg)
	}
}

// TestClusterStatusInstancesAndServices: the status, the instances and the services read the
// registry and the queues as `plaita status` does.
func TestClusterStatusInstancesAndServices(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	boss := f.Admin("")
	f.RegisterInstance(t, store.InstanceRecord{InstanceID: "w1", Role: "worker", Status: "running", Queue: f.Root + ":flow:queue", Capacity: 4,
		ActiveTasks: 1, MetricsAddr: "host-a:9100"})
	f.RegisterInstance(t, store.InstanceRecord{InstanceID: "c1", Role: "console", Status: "draining"})
	f.DeadLetters(t, "default")

	var st control.ClusterStatus
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/cluster/status", nil).Decode(t, &st)
	if st.Queue.Stream != f.Root+":flow:queue" || st.Queue.DLQLength != 1 || len(st.Instances) != 2 || st.Suspended.TenantID != "default" {
		t.Fatalf("status: %+v", st)
	}
	codes := []string{}
	for _, a := range st.Attention {
		codes = append(codes, a.Code)
	}
	if !slices.Contains(codes, "dead_letters") {
		t.Fatalf("attention: %v", codes)
	}
	boss.Want(t, http.StatusBadRequest, http.MethodGet, "/api/cluster/status?tenant=Bad!", nil)
	boss.Want(t, http.StatusBadRequest, http.MethodGet, "/api/cluster/status?verbose=1", nil)

	var in control.ClusterInstances
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/cluster/instances", nil).Decode(t, &in)
	if len(in.Instances) != 2 || in.Instances[1].InstanceID != "w1" || in.Instances[1].MetricsAddr != "host-a:9100" || in.Instances[1].Capacity != 4 {
		t.Fatalf("instances: %+v", in)
	}
	var svc api.Services
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/services", nil).Decode(t, &svc)
	byRole := map[string]api.ServiceRole{}
	for _, r := range svc.Roles {
		byRole[r.Role] = r
	}
	if w := byRole["worker"]; w.Running != 1 || len(w.Instances) != 1 || w.Instances[0].MetricsAddr != "host-a:9100" {
		t.Fatalf("workers: %+v", w)
	}
	if c := byRole["console"]; c.Running != 0 || len(c.Instances) != 1 || c.Instances[0].Status != "draining" {
		t.Fatalf("consoles: %+v", c)
	}
	if d := byRole["delay"]; d.Running != 0 || len(d.Instances) != 0 {
		t.Fatalf("a role without instances: %+v", d)
	}
}

// TestClusterMetrics: Prometheus text of the backlog, the dead letters, the delay queue and
// the live instances; a part that cannot be read leaves its series out, sets
// plaita_console_scrape_degraded and counts the failed command, and the rest is still there.
func TestClusterMetrics(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ctx := context.Background()
	boss := f.Admin("")
	f.RegisterInstance(t, store.InstanceRecord{InstanceID: "w1", Role: "worker", Status: "running", Queue: f.Root + ":flow:queue", Capacity: 2})
	f.DeadLetters(t, "default", "default")
	r := boss.Want(t, http.StatusOK, http.MethodGet, "/api/metrics", nil)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("content type %q", ct)
	}
	text := string(r.Raw)
	q := f.Root + ":flow:queue"
	for _, want := range []string{
		`plaita_queue_stream_length{queue="` + q + `"} 0`, `plaita_queue_pending{queue="` + q + `",group="g"} 0`,
		`plaita_queue_dlq_length{queue="` + q + `",dlq="` + q + `:dlq"} 2`, `plaita_delay_scheduled{key="` + f.Root + `:delay:queue:scheduled"} 0`,
		`plaita_instances{role="worker",status="running"} 1`, `plaita_instances{role="delay",status="running"} 0`,
		`plaita_workers_registered_total 1`, "plaita_console_scrape_degraded 0", `plaita_console_scrape_failed_commands_total{command="registry"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	// The registry's set replaced by a string: its read fails, the rest is read.
	reg := store.NewRegistry(store.OnRedis(f.C), f.Root)
	if err := f.C.Do(ctx, f.C.B().Del().Key(reg.SetKey()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := f.C.Do(ctx, f.C.B().Set().Key(reg.SetKey()).Value("not a set").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r = boss.Want(t, http.StatusOK, http.MethodGet, "/api/metrics", nil)
	}
	text = string(r.Raw)
	for _, want := range []string{"plaita_console_scrape_degraded 1", `plaita_console_scrape_failed_commands_total{command="registry"} 2`,
		`plaita_queue_dlq_length{queue="` + q + `",dlq="` + q + `:dlq"} 2`} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("degraded: no %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, "plaita_workers_registered_total") {
		t.Errorf("a registry that cannot be read reports a worker count:\n%s", text)
	}
}

// TestTenantStatusReconcile: POST /api/cluster/tenant-status/reconcile publishes every tenant's
// status from the database — a tenant Redis has and the database does not becomes disabled —
// is audited, and is the last reconcile /health shows.
func TestTenantStatusReconcile(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithSettings(func(s *api.Settings) { s.TenantStatusInterval = time.Minute }))
	ctx := context.Background()
	f.Tenant(t, "acme")
	sp := keys.MustFor(f.Root, "")
	if err := f.C.Do(ctx, f.C.B().Hset().Key(sp.TenantStatus()).FieldValue().FieldValue("ghost", "active").FieldValue("acme", "disabled").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	f.Key(f.APIKey(t, "acme", sqlite.RoleAdmin)).Want(t, http.StatusForbidden, http.MethodPost, "/api/cluster/tenant-status/reconcile", nil)
	var rep api.TenantStatusReport
	f.Admin("").Want(t, http.StatusOK, http.MethodPost, "/api/cluster/tenant-status/reconcile", nil).Decode(t, &rep)
	if !rep.OK || rep.Trigger != api.TriggerAPI || !slices.Equal(rep.Tombstoned, []string{"ghost"}) || !slices.Contains(rep.Published, "acme") ||
		!slices.Contains(rep.Published, "default") || rep.Epoch != "1" {
		t.Fatalf("reconcile: %+v", rep)
	}
	statuses, err := f.C.Do(ctx, f.C.B().Hgetall().Key(sp.TenantStatus()).Build()).AsStrMap()
	if err != nil || statuses["ghost"] != "disabled" || statuses["acme"] != "active" || statuses["default"] != "active" {
		t.Fatalf("statuses after the reconcile: %v %v", statuses, err)
	}
	if e, ok := f.Audited(t, "tenant_status.reconcile"); !ok || e.Outcome != sqlite.OutcomeAllow || !strings.Contains(string(e.Details), `"tombstoned":["ghost"]`) {
		t.Fatalf("audit: %+v", e)
	}
	var h api.HealthReport
	f.Client(nil).Want(t, http.StatusOK, http.MethodGet, "/health", nil).Decode(t, &h)
	if ts := h.TenantStatus; ts == nil || ts.IntervalSeconds != 60 || ts.Last == nil || ts.Last.Trigger != api.TriggerAPI || ts.Warning != "" || h.Status != "ok" {
		t.Fatalf("health: %+v %+v", h, h.TenantStatus)
	}
}
