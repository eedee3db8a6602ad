package roles

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/roles/delay"
	"plaita/roles/settings"
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
	return runOnRedis(ctx, cfg, log, func(_ context.Context, o onRedis) (roleProcess, error) {
		q, err := queue.NewDelay(o.b.Delay, settings.DelayQueue(cfg))
		if err != nil {
			return roleProcess{}, err
		}
		started := time.Now().UTC()
		mover := delay.NewMover(q, delay.Settings{Move: queue.MoveOptions{Stream: config.QueueName.In(cfg),
			Generations: settings.Generations(cfg), EffectiveAt: started}}, o.set, log)
		o.server.AddCollector(mover.Collector())
		return roleProcess{registry: o.presence(roleInstance(cfg, config.RoleDelay, config.QueueName.In(cfg), started)),
			services: []service.Named{{Name: "mover", Service: mover}}, stopFor: 15 * time.Second, title: "delay role",
			started: func() {
				log.Info().Str("event", "delay.started").Str("delay_queue", settings.DelayQueue(cfg)).
					Str("queue", config.QueueName.In(cfg)).Dur("interval", delay.DefaultInterval).Str("metrics", o.server.Addr()).
					Msg("delay role running")
			}}, nil
	})
}
