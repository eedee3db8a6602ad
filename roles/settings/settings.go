// Package settings builds the typed settings of the libraries from the configuration, once at
// start: the one place that maps variables to the engine's, the store's and the queue's fields.
// Nothing below roles/ reads a variable; a Go process's environment cannot change from outside,
// so every value is read once (the configuration reference keeps the runbook's read-timing
// column for the operators who know it).
package settings

import (
	"time"

	"plaita/config"
	"plaita/engine"
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
