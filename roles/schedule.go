package roles

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/internal/presence"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/roles/schedule"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// runSchedule wires the schedule role and runs it until ctx ends (SIGTERM/SIGINT).
//
// Start order (service.Group): metrics server → registry (status running) → scheduler, then
// ready. Shutdown: not ready and registry status stopping at once → the scheduler stops after
// the schedules its pass already began (a claimed tick is enqueued and completed, not left
// pending) → registry deregistered → metrics server last.
func runSchedule(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	return runOnRedis(ctx, cfg, log, func(_ context.Context, o onRedis) (roleProcess, error) {
		registry, scheduler := buildSchedule(o)
		return roleProcess{registry: registry, services: []service.Named{{Name: "scheduler", Service: scheduler}},
			stopFor: 15 * time.Second, title: "schedule role",
			started: func() {
				log.Info().Str("event", "schedule.started").Str("queue", config.ConsoleTaskQueue.In(cfg)).
					Float64("check_interval_s", config.CheckInterval.In(cfg)).Str("metrics", o.server.Addr()).Msg("schedule role running")
			}}, nil
	})
}

// buildSchedule builds the schedule role's registry presence and scheduler; nothing runs yet.
func buildSchedule(o onRedis) (*presence.Registry, *schedule.Scheduler) {
	cfg := o.cfg
	st := o.b.Storage(settings.Store(cfg))
	// Starts go to PLAITA_CONSOLE_TASK_QUEUE through the one producer path: stamped with this
	// process's generations, the input held to PLAITA_EXECUTION_STATE_MAX_BYTES (a refused start
	// is recorded as a skipped tick).
	producer := queue.NewProducer(o.b.Queue, config.ConsoleTaskQueue.In(cfg), settings.Generations(cfg), config.ExecutionStateMaxBytes.In(cfg), nil)
	info := roleInstance(cfg, config.RoleSchedule, config.ConsoleTaskQueue.In(cfg), time.Now())
	return o.presence(info), schedule.New(schedule.Deps{
		Store:    store.NewSchedules(o.b.Schedules, keys.DefaultRoot),
		Flows:    store.NewFlows(o.b.Flows, keys.DefaultRoot),
		Tenants:  schedule.Tenants(st),
		Enqueue:  producer.Enqueue,
		Stream:   producer.Stream(),
		Started:  schedule.Executions(st),
		Instance: info.InstanceID,
		Interval: time.Duration(config.CheckInterval.In(cfg) * float64(time.Second)),
		Log:      o.log,
		Metrics:  o.set,
	})
}
