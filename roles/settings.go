package roles

import (
	"time"

	"plaita/config"
	"plaita/engine"
)

// The typed settings of the libraries, built once at start from the configuration: the one
// place that maps variables to the engine's, the store's and the queue's fields. Nothing below
// roles/ reads a variable; a Go process's environment cannot change from outside, so every
// value is read once.

// engineSettings are the executor's knobs.
func engineSettings(cfg *config.Config) engine.Settings {
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

// seconds converts a number of seconds from the configuration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
