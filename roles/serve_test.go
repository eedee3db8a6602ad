package roles

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/health"
	"plaita/internal/service"
)

// startsUntilCancelled is a service whose Start waits for what it needs (a subscription, say)
// and gives up with ctx's error when ctx ends first.
type startsUntilCancelled struct{ entered chan struct{} }

func (s *startsUntilCancelled) Start(ctx context.Context) error {
	close(s.entered)
	<-ctx.Done()
	return ctx.Err()
}

func (s *startsUntilCancelled) Stop(context.Context) {}

// A SIGTERM that comes while a role starts is the stop asked for: serve returns nil (exit 0),
// not the starting service's context error (exit 1).
func TestServeStoppedWhileStartingIsNoFailure(t *testing.T) {
	svc := &startsUntilCancelled{entered: make(chan struct{})}
	ready := health.NewReadiness()
	r := roleProcess{name: "test", ready: ready, server: health.New("127.0.0.1", 0, metrics.NewSet(), ready, zerolog.Nop()),
		services: []service.Named{{Name: "slow", Service: svc}}, stopFor: time.Second,
		started: func() { t.Error("started: the role was never ready") }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.serve(ctx, zerolog.Nop()) }()
	<-svc.entered
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after the stop")
	}
	if ok, _ := ready.Ready(); ok {
		t.Fatal("ready after a stop while starting")
	}
	// A start that fails on its own, with no stop asked for, is still the role's failure.
	failing := roleProcess{name: "test", ready: ready, server: health.New("127.0.0.1", 0, metrics.NewSet(), ready, zerolog.Nop()),
		services: []service.Named{{Name: "broken", Service: failingService{}}}, stopFor: time.Second}
	if err := failing.serve(context.Background(), zerolog.Nop()); !errors.Is(err, errBroken) {
		t.Fatalf("a failed start: %v", err)
	}
}

var errBroken = errors.New("broken")

type failingService struct{}

func (failingService) Start(context.Context) error { return errBroken }
func (failingService) Stop(context.Context)        {}
