package api_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/control"
	"plaita/internal/presence"
	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/webtest"
)

// TestClusterInstanceStatusAndDrain: the console asks a live instance over its control channel
// (a registry presence with its channel, as a role runs them): its status, then a drain, which
// the instance receives once and the audit records; an unknown instance is a 404.
func TestClusterInstanceStatusAndDrain(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ctx := context.Background()
	reg := presence.New(store.NewRegistry(store.OnRedis(f.C), f.Root), presence.InstanceInfo{InstanceID: "w-ctl", Role: "worker", Host: "h", PID: 9,
		Capacity: 2, StartedAt: time.Now().Add(-time.Hour)}, zerolog.Nop(), metrics.NewSet())
	if err := reg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var stops atomic.Int32
	ctl := presence.NewControl(store.NewControl(store.OnRedis(f.C), f.Root), reg, func() { stops.Add(1) }, zerolog.Nop())
	if err := ctl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Stop(context.Background()); reg.Stop(context.Background()) })
	boss := f.Admin("")

	var a control.InstanceAnswer
	boss.Want(t, http.StatusOK, http.MethodGet, "/api/cluster/instances/w-ctl/status", nil).Decode(t, &a)
	if a.Role != "worker" || a.Status != "running" || a.InFlight == nil || a.Capacity != 2 || a.Uptime < time.Hour-time.Minute {
		t.Fatalf("status %+v", a)
	}
	if stops.Load() != 0 {
		t.Fatal("a status request stopped the instance")
	}
	boss.Want(t, http.StatusOK, http.MethodPost, "/api/cluster/instances/w-ctl/drain", nil).Decode(t, &a)
	if !a.DrainRequested || !a.Draining {
		t.Fatalf("drain %+v", a)
	}
	for deadline := time.Now().Add(5 * time.Second); stops.Load() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the instance never got the drain")
		}
	}
	// The cluster is a platform admin's: a tenant's admin and viewer are refused, and the
	// refused drain is audited.
	f.Tenant(t, "acme")
	for _, role := range []sqlite.Role{sqlite.RoleAdmin, sqlite.RoleViewer} {
		k := f.Key(f.APIKey(t, "acme", role))
		k.Want(t, http.StatusForbidden, http.MethodGet, "/api/cluster/instances/w-ctl/status", nil)
		k.Want(t, http.StatusForbidden, http.MethodPost, "/api/cluster/instances/w-ctl/drain", nil)
	}
	if stops.Load() != 1 {
		t.Fatalf("a refused drain reached the instance: %d stops", stops.Load())
	}
	if row, ok := f.Audited(t, "instance.drain.denied"); !ok || row.Outcome != sqlite.OutcomeDeny {
		t.Fatalf("refused drain's audit row %+v (found %v)", row, ok)
	}
	row, ok := f.Audited(t, "instance.drain")
	if !ok || row.Target != "w-ctl" || row.Outcome != sqlite.OutcomeAllow {
		t.Fatalf("audit row %+v (found %v)", row, ok)
	}
	if p := boss.Want(t, http.StatusNotFound, http.MethodGet, "/api/cluster/instances/w-nope/status", nil).Problem(t); p.Code != "instance_not_found" {
		t.Fatalf("unknown instance: %+v", p)
	}
	if p := boss.Want(t, http.StatusNotFound, http.MethodPost, "/api/cluster/instances/w-nope/drain", nil).Problem(t); p.Code != "instance_not_found" {
		t.Fatalf("unknown instance: %+v", p)
	}
}
