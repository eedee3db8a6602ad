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
	set := metrics.NewSet()
	c, err := RedisClient(config.RedisURL.In(cfg))
	if err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	defer c.Close()
	p := buildSchedule(cfg, c, set, log)
	r := roleProcess{name: "schedule", ready: p.ready, server: p.server, registry: p.registry, control: store.NewControl(c, keys.DefaultRoot),
		services: []service.Named{{Name: "scheduler", Service: p.scheduler}}, stopFor: 15 * time.Second}
	err = r.serve(ctx, log, func() {
		log.Info().Str("event", "schedule.started").Str("queue", config.ConsoleTaskQueue.In(cfg)).
			Float64("check_interval_s", config.CheckInterval.In(cfg)).Str("metrics", p.server.Addr()).Msg("schedule role running")
	})
	if err == nil {
		log.Info().Str("event", "schedule.stopped").Msg("schedule role stopped")
	}
	return err
}

// scheduleParts are the schedule role's services.
type scheduleParts struct {
	registry  *presence.Registry
	ready     *health.Readiness
	server    *health.Server
	scheduler *schedule.Scheduler
}

// buildSchedule builds every part; nothing runs yet.
func buildSchedule(cfg *config.Config, c rueidis.Client, set *metrics.Set, log zerolog.Logger) *scheduleParts {
	st := store.NewRedis(c, settings.Store(cfg), keys.DefaultRoot)
	// Starts go to PLAITA_CONSOLE_TASK_QUEUE through the one producer path: stamped with this
	// process's generations, the input held to PLAITA_EXECUTION_STATE_MAX_BYTES (a refused start
	// is recorded as a skipped tick).
	producer := queue.NewProducer(c, config.ConsoleTaskQueue.In(cfg), settings.Generations(cfg), config.ExecutionStateMaxBytes.In(cfg), nil)
	info := roleInstance(cfg, config.RoleSchedule, config.ConsoleTaskQueue.In(cfg), time.Now())
	p := &scheduleParts{ready: health.NewReadiness(),
		registry: presence.New(store.NewRegistry(c, keys.DefaultRoot), info, log, set)}
	p.server = health.New(config.MetricsHost.In(cfg), config.MetricsPort.In(cfg), set, p.ready, log)
	p.scheduler = schedule.New(schedule.Deps{
		Store:    store.NewSchedules(c, keys.DefaultRoot),
		Flows:    store.NewFlows(c, keys.DefaultRoot),
		Tenants:  schedule.Tenants(st),
		Enqueue:  producer.Enqueue,
		Stream:   producer.Stream(),
		Started:  schedule.Executions(st),
		Instance: info.InstanceID,
		Interval: time.Duration(config.CheckInterval.In(cfg) * float64(time.Second)),
		Log:      log,
		Metrics:  set,
	})
	return p
}
