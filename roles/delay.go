package roles

import (
	"context"
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/internal/health"
	"plaita/internal/presence"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/roles/delay"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// runDelay wires the delay role and runs it until ctx ends (SIGTERM/SIGINT): it sends the
// delay queue's due entries (PLAITA_DELAY_QUEUE) to the task stream (PLAITA_QUEUE_NAME) as
// resumes. Several delay processes may run at once: each entry is sent by one of them.
//
// Start order (service.Group): metrics server → registry (status running) → mover, then
// ready. Shutdown: not ready and status stopping at once → the mover finishes its pass in
// flight and stops → registry deregistered → metrics server last. A process killed instead
// (kill -9) loses nothing: an entry leaves the queue only in the step that sends it.
func runDelay(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	set := metrics.NewSet()
	c, err := RedisClient(config.RedisURL.In(cfg))
	if err != nil {
		return fmt.Errorf("delay: %w", err)
	}
	defer c.Close()
	d, err := buildDelay(cfg, c, set, log)
	if err != nil {
		return fmt.Errorf("delay: %w", err)
	}
	r := roleProcess{name: "delay", ready: d.ready, server: d.server, registry: d.registry, control: store.NewControl(c, keys.DefaultRoot),
		services: []service.Named{{Name: "mover", Service: d.mover}}, stopFor: 15 * time.Second}
	err = r.serve(ctx, log, func() {
		log.Info().Str("event", "delay.started").Str("delay_queue", settings.DelayQueue(cfg)).
			Str("queue", config.QueueName.In(cfg)).Dur("interval", delay.DefaultInterval).Str("metrics", d.server.Addr()).
			Msg("delay role running")
	})
	if err == nil {
		log.Info().Str("event", "delay.stopped").Msg("delay role stopped")
	}
	return err
}

// delayParts are the delay role's services.
type delayParts struct {
	ready    *health.Readiness
	server   *health.Server
	registry *presence.Registry
	mover    *delay.Mover
}

// buildDelay builds every part; nothing runs yet.
func buildDelay(cfg *config.Config, c rueidis.Client, set *metrics.Set, log zerolog.Logger) (*delayParts, error) {
	q, err := queue.NewDelay(c, settings.DelayQueue(cfg))
	if err != nil {
		return nil, err
	}
	started := time.Now().UTC()
	mover := delay.NewMover(q, delay.Settings{Move: queue.MoveOptions{Stream: config.QueueName.In(cfg),
		Generations: settings.Generations(cfg), EffectiveAt: started}}, set, log)
	d := &delayParts{ready: health.NewReadiness(), mover: mover,
		registry: presence.New(store.NewRegistry(c, keys.DefaultRoot), roleInstance(cfg, config.RoleDelay, config.QueueName.In(cfg), started), log, set)}
	d.server = health.New(config.MetricsHost.In(cfg), config.MetricsPort.In(cfg), set, d.ready, log)
	d.server.AddCollector(mover.Collector())
	return d, nil
}
