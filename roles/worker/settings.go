package worker

import (
	"os"
	"time"

	"plaita/config"
	"plaita/internal/presence"
)

// Settings are the dispatcher's own knobs, read once at start.
type Settings struct {
	InstanceID  string // the lease holder (PLAITA_INSTANCE_ID)
	Concurrency int    // consumer goroutines (PLAITA_WORKER_CONCURRENCY; < 1: 1)
	// ClaimMinIdle is PLAITA_CLAIM_MIN_IDLE_MS: a running task's pending entry is refreshed
	// every third of it, so siblings never reclaim a long step.
	ClaimMinIdle           time.Duration
	DisableLeaseWatchdog   bool // PLAITA_DISABLE_LEASE_WATCHDOG
	DisableCancelInterrupt bool // PLAITA_DISABLE_CANCEL_INTERRUPT
	DisableHolderLiveness  bool // PLAITA_DISABLE_HOLDER_LIVENESS
	EventsPublish          bool // PLAITA_EXECUTION_EVENTS_PUBLISH: live events for the console
}

// SettingsFrom reads the dispatcher's settings from the configuration (once, at start).
func SettingsFrom(cfg *config.Config) Settings {
	return Settings{
		InstanceID:             config.InstanceID.In(cfg),
		Concurrency:            config.WorkerConcurrency.In(cfg),
		ClaimMinIdle:           time.Duration(config.ClaimMinIdleMS.In(cfg)) * time.Millisecond,
		DisableLeaseWatchdog:   config.DisableLeaseWatchdog.In(cfg),
		DisableCancelInterrupt: config.DisableCancelInterrupt.In(cfg),
		DisableHolderLiveness:  config.DisableHolderLiveness.In(cfg),
		EventsPublish:          config.ExecutionEventsPublish.In(cfg),
	}
}

// InstanceInfo is what this worker says about itself in the registry: the effective
// configuration (flags applied), the host and the pid; StartedAt is now.
func InstanceInfo(cfg *config.Config) presence.InstanceInfo {
	host, _ := os.Hostname()
	g := cfg.Generations()
	return presence.InstanceInfo{
		InstanceID:    config.InstanceID.In(cfg),
		Role:          string(cfg.Role()),
		Host:          host,
		PID:           os.Getpid(),
		Queue:         config.QueueName.In(cfg),
		ConsumerGroup: config.ConsumerGroup.In(cfg),
		ConsumerName:  config.ConsumerName.In(cfg),
		DLQKey:        config.DLQKey.In(cfg),
		Generations:   presence.Generations{Family: g.Family, Config: g.Config, Budget: g.Budget},
		Capacity:      config.WorkerConcurrency.In(cfg),
		StartedAt:     time.Now().UTC(),
	}
}
