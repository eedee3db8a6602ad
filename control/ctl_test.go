package control

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/presence"
	"plaita/store"
)

// startInstance registers an instance under the fixture's root with its control channel;
// onStop runs when a stop comes.
func (f *fixture) startInstance(id, role string, capacity int, onStop func(*presence.Registry)) *presence.Registry {
	f.t.Helper()
	reg := presence.New(store.NewRegistry(store.OnRedis(f.c), f.root), presence.InstanceInfo{InstanceID: id, Role: role, Host: "h", PID: 7,
		Capacity: capacity, StartedAt: time.Now().Add(-time.Minute)}, zerolog.Nop(), metrics.NewSet())
	if err := reg.Start(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	ctl := presence.NewControl(store.NewControl(store.OnRedis(f.c), f.root), reg, func() { onStop(reg) }, zerolog.Nop())
	if err := ctl.Start(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { ctl.Stop(context.Background()); reg.Stop(context.Background()) })
	return reg
}

// ctl status answers with the instance's role, status, uptime and, for a worker, its tasks in
// flight; an unknown instance is NotFound; a registered instance that does not listen is
// Unavailable after the wait; a stop is answered, drains the instance (here: it deregisters,
// as a role does at the end of its drain) and, with GoneWait, waits until it has gone.
func TestCtlStatusAndStop(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.startInstance("w-1", "worker", 4, func(*presence.Registry) {})
	a, err := f.p.InstanceStatus(ctx, InstanceRequest{ID: "w-1", From: "test"})
	if err != nil || a.Role != "worker" || a.Status != "running" || a.Draining || a.InFlight == nil || *a.InFlight != 0 ||
		a.Capacity != 4 || a.Uptime < 59*time.Second || a.AnsweredIn <= 0 {
		t.Fatalf("status %+v %v", a, err)
	}
	f.startInstance("s-1", "schedule", 0, func(*presence.Registry) {})
	if a, err = f.p.InstanceStatus(ctx, InstanceRequest{ID: "s-1"}); err != nil || a.InFlight != nil || a.Role != "schedule" {
		t.Fatalf("a role without tasks: %+v %v", a, err)
	}

	_, err = f.p.InstanceStatus(ctx, InstanceRequest{ID: "w-nope"})
	if r := refusal(t, "unknown instance", err, NotFound, "instance_not_found"); !strings.Contains(r.Message, "plaita status") {
		t.Fatalf("message %q", r.Message)
	}
	refusal(t, "no id", func() error { _, err := f.p.InstanceStatus(ctx, InstanceRequest{}); return err }(), Invalid, "invalid_instance")

	// Registered (an older build, or its channel is gone) but deaf.
	deaf := presence.New(store.NewRegistry(store.OnRedis(f.c), f.root), presence.InstanceInfo{InstanceID: "w-deaf", Role: "worker"}, zerolog.Nop(), metrics.NewSet())
	if err := deaf.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deaf.Stop(context.Background()) })
	_, err = f.p.InstanceStatus(ctx, InstanceRequest{ID: "w-deaf", Wait: 200 * time.Millisecond})
	if r := refusal(t, "deaf instance", err, Unavailable, "instance_no_answer"); !strings.Contains(r.Message, "nothing listens") {
		t.Fatalf("message %q", r.Message)
	}

	stopped := make(chan struct{}, 1)
	f.startInstance("w-2", "worker", 2, func(reg *presence.Registry) {
		_ = reg.SetStatus(context.Background(), presence.StatusDraining)
		go func() { reg.Stop(context.Background()); stopped <- struct{}{} }()
	})
	a, err = f.p.StopInstance(ctx, InstanceRequest{ID: "w-2", Graceful: true, GoneWait: 10 * time.Second})
	if err != nil || !a.DrainRequested || !a.Draining || !a.Deregistered || !strings.Contains(a.Message, "drain started") {
		t.Fatalf("stop %+v %v", a, err)
	}
	<-stopped
	_, err = f.p.StopInstance(ctx, InstanceRequest{ID: "w-2"})
	refusal(t, "the stopped instance", err, NotFound, "instance_not_found")
}
