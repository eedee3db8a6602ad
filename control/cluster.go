package control

import (
	"context"
	"fmt"
	"time"

	"plaita/internal/presence"
	"plaita/queue"
)

// The cluster's live instances, and a best-effort reading of the cluster for metrics: the parts
// of Status a console shows on their own.

// ClusterInstances are the registry's live instances: each role's counts (every role that runs
// or wakes executions has a row, alive or not), the instances, the generations that differ on
// one queue, and the records that do not decode.
type ClusterInstances struct {
	At         time.Time            `json:"at"`
	Roles      []RoleStatus         `json:"roles"`
	Instances  []InstanceStatus     `json:"instances"`
	Mismatches []GenerationMismatch `json:"generation_mismatches"`
	Unreadable []string             `json:"unreadable_instances,omitempty"`
}

// Instances reads the registry. A read that fails is an error.
func (p *Plane) Instances(ctx context.Context) (ClusterInstances, error) {
	now := p.now()
	list, err := p.d.Registry.Instances(ctx, now, presence.TTLFactor*presence.DefaultHeartbeatInterval)
	if err != nil {
		return ClusterInstances{}, fmt.Errorf("instance registry: %w", err)
	}
	s := ClusterStatus{Roles: []RoleStatus{}, Instances: []InstanceStatus{}}
	s.instances(list.Live, now, p.d.Built)
	out := ClusterInstances{At: now.UTC(), Roles: s.Roles, Instances: s.Instances, Mismatches: mismatches(list.Live)}
	for _, bad := range list.Unreadable {
		out.Unreadable = append(out.Unreadable, bad.Error())
	}
	return out, nil
}

// Reading parts, as ClusterReading.Failed names them.
const (
	ReadBacklog  = "backlog"
	ReadDelay    = "delay"
	ReadRegistry = "registry"
)

// ClusterReading is what a metrics scrape reads: the task queue's backlog, the delay queue and
// the live instances. Each part is read on its own; a part that cannot be read is nil (or, for
// the instances, not Read) and Failed says why, so a scrape shows what it could read and says
// it is degraded instead of failing whole.
type ClusterReading struct {
	At        time.Time
	Queue     *queue.Backlog
	Delay     *DelayStatus
	Instances *ClusterInstances
	Failed    map[string]error
}

// Read reads the cluster for a scrape (see ClusterReading).
func (p *Plane) Read(ctx context.Context) ClusterReading {
	now := p.now()
	r := ClusterReading{At: now.UTC(), Failed: map[string]error{}}
	if b, err := p.d.Queue.Backlog(ctx); err != nil {
		r.Failed[ReadBacklog] = err
	} else {
		r.Queue = &b
	}
	if ds, err := p.d.Delay.Stats(ctx, now); err != nil {
		r.Failed[ReadDelay] = err
	} else {
		r.Delay = &DelayStatus{Key: p.d.Delay.ScheduledKey(), Scheduled: ds.Scheduled, Due: ds.Due, Dead: ds.Dead}
	}
	if in, err := p.Instances(ctx); err != nil {
		r.Failed[ReadRegistry] = err
	} else {
		r.Instances = &in
	}
	return r
}
