// Package presence is a role instance's presence in the registry: the heartbeat service every
// long-running role (worker, console, filter, schedule, delay) starts, so that operators and
// other instances can tell who is alive, what it runs and whether it drains; and its control
// channel (control.go), which answers `plaita ctl status` and turns `plaita ctl stop` into the
// role's drain. The Redis side (keys, commands, the records' JSON) is store.Registry and
// store.Control; the caller fills InstanceInfo from its configuration.
package presence

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"plaita/internal/service"
)

// Registry statuses. An instance only moves forward: running → draining → stopping, then it
// deregisters.
const (
	StatusRunning  = "running"
	StatusDraining = "draining"
	StatusStopping = "stopping"
)

// DefaultHeartbeatInterval is how often a registered instance refreshes its key; the
// key lives TTLFactor intervals, so one or two lost heartbeats do not make it look dead.
const (
	DefaultHeartbeatInterval = 10 * time.Second
	TTLFactor                = 3
)

var (
	// ErrClosed: the registry was stopped; nothing is written any more. It matches
	// service.ErrStopped, the lifecycle's "Start after Stop".
	ErrClosed = fmt.Errorf("presence: registry is closed: %w", service.ErrStopped)
	// ErrBadStatus: an unknown status or a move backwards (draining → running).
	ErrBadStatus = errors.New("presence: invalid registry status")
)

// Generations are the three config generation hashes an instance runs with
// (docs/configuration.md), as the
// caller computed them.
type Generations struct {
	Family string // config_family, cf1-…
	Config string // config_generation, cfg1-…
	Budget string // budget_generation, bg1-…
}

// InstanceInfo is what an instance says about itself when it registers; it does not change
// while the process runs. Fields a role does not have (a console has no queue) stay empty.
type InstanceInfo struct {
	InstanceID    string // PLAITA_INSTANCE_ID: the registry key and the lease holder name
	Role          string // "worker", "console" …: also names the metrics and log events
	Host          string
	PID           int
	Queue         string // PLAITA_QUEUE_NAME
	ConsumerGroup string // PLAITA_CONSUMER_GROUP
	ConsumerName  string // PLAITA_CONSUMER_NAME
	DLQKey        string // the effective dead-letter stream
	Generations   Generations
	Capacity      int // PLAITA_WORKER_CONCURRENCY
	StartedAt     time.Time
	// MetricsAddr is where the instance serves /metrics, /healthz and /readyz (host:port;
	// "" when PLAITA_METRICS_PORT is off): what GET /api/services lists.
	MetricsAddr string
}

func statusRank(s string) int {
	switch s {
	case StatusRunning:
		return 1
	case StatusDraining:
		return 2
	case StatusStopping:
		return 3
	}
	return 0
}

// roleName is the role as a metric name segment: plaita dev runs several roles in one process
// on one metrics set, so each role's gauges need their own names ("" → "instance").
func roleName(role string) string {
	role = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '_'
	}, role)
	if role == "" {
		return "instance"
	}
	return role
}
