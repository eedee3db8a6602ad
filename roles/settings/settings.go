// Package settings builds the typed settings of the libraries from the configuration, once at
// start: the one place that maps variables to the engine's, the store's and the queue's fields.
// Nothing below roles/ reads a variable; a Go process's environment cannot change from outside,
// so every value is read once (the configuration reference keeps the replaced implementation's read-timing
// column for the operators who know it).
package settings

import (
	"time"

	"plaita/config"
	"plaita/engine"
	"plaita/queue"
	"plaita/store"
)

// Engine are the executor's knobs.
func Engine(cfg *config.Config) engine.Settings {
	return engine.Settings{
		Deadline:                seconds(config.ExecutionDeadlineSeconds.In(cfg)),
		TimelineMax:             config.ExecutionTimelineMax.In(cfg),
		DisableNodeRetry:        config.DisableNodeRetry.In(cfg),
		DisableCancelCheckpoint: config.DisableCancelCheckpoint.In(cfg),
		MaxStateBytes:           config.ExecutionStateMaxBytes.In(cfg),
		Expr: engine.ExprLimits{
			MaxResultSize: config.ExprMaxResultSize.In(cfg),
			GrowthFactor:  config.ExprGrowthFactor.In(cfg),
			MaxResultHard: config.ExprMaxResultHard.In(cfg),
		},
	}
}

// Store are the execution storage's knobs.
func Store(cfg *config.Config) store.Settings {
	return store.Settings{
		LeaseTTL:       time.Duration(config.LeaseTTLSeconds.In(cfg)) * time.Second,
		StateTTL:       time.Duration(max(config.ExecutionStateTTLDays.In(cfg), 0)) * 24 * time.Hour,
		TombstoneTTL:   time.Duration(config.ExecutionTombstoneTTLSeconds.In(cfg)) * time.Second,
		MaxStateBytes:  config.ExecutionStateMaxBytes.In(cfg),
		DisableFencing: config.DisableFencing.In(cfg),
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Events are the event bus's knobs (PLAITA_EVENT_TTL_SECONDS,
// PLAITA_DISABLE_EVENT_INDEX_PRUNE_ON_WRITE), for every process that publishes or reads events.
func Events(cfg *config.Config) store.EventSettings {
	return store.EventSettings{
		TTL:                 time.Duration(config.EventTTLSeconds.In(cfg)) * time.Second,
		DisablePruneOnWrite: config.DisableEventIndexPruneOnWrite.In(cfg),
	}
}

// Queue are the task queue's names and budgets.
func Queue(cfg *config.Config) queue.Settings {
	return queue.Settings{
		Stream:        config.QueueName.In(cfg),
		Group:         config.ConsumerGroup.In(cfg),
		StartID:       config.ConsumerGroupStartID.In(cfg),
		Consumer:      config.ConsumerName.In(cfg),
		DLQ:           config.DLQKey.In(cfg),
		ClaimMinIdle:  time.Duration(config.ClaimMinIdleMS.In(cfg)) * time.Millisecond,
		MaxDeliveries: config.MaxDeliveries.In(cfg),
		DLQMaxLen:     config.DLQMaxLen.In(cfg),
		TaskMaxAge:    time.Duration(config.TaskMaxAgeSeconds.In(cfg)) * time.Second,
		Generations:   Generations(cfg),
	}
}

// Generations are this process's config generations, as envelopes carry them.
func Generations(cfg *config.Config) queue.Generations {
	g := cfg.Generations()
	return queue.Generations{Family: g.Family, Config: g.Config, Budget: g.Budget}
}
